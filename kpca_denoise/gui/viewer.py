"""Looking at the images: zoom and fit, the grid/split tabs, contrast, the ROI, the cursor readout.

A mixin of :class:`~kpca_denoise.gui.main_window.MainWindow`.  The views fit
the image until the user zooms or pans; from then on the user's centre and
scale are kept (across tabs, resizes and new results) until Ctrl+0.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QTimer
from PySide6.QtGui import QCursor

from .imageset import display_levels
from .model import ImageEntry
from .texts import hover_text, region_stats, split_hover_text
from .views import ZOOM_STEPS, Loupe, view_scale, zoom_to

__all__ = ["ImageViewer"]


class ImageViewer:
    """Zoom, tabs, contrast levels, ROI statistics, cursor readout (mixed into the window)."""

    # -- tabs ------------------------------------------------------------------------
    def toggle_split(self) -> None:
        self.tabs.setCurrentIndex(1 - self.tabs.currentIndex())

    def toggle_single(self) -> None:
        """One view fills the views' space, the selected rank's (the input's before a run),
        with a strip of the others as thumbnails; again: every view."""
        if self.tabs.currentIndex() != 0:
            self.tabs.setCurrentIndex(0)
        panel = None
        if self.grid.large is None:
            panel = self.grid.rank_panels.get(self.selected_rank)
            if panel is None or not panel.has_image():
                panel = self.grid.input_panel
        self.grid.toggle_large(panel)

    def _on_tab_changed(self, i: int) -> None:
        src, dst = (self.grid.master, self.split.vb) if i == 1 else (self.split.vb, self.grid.master)
        if i == self._tab:
            return
        self._tab = i
        # the views follow each other live (ZoomLink); the view just shown has its
        # real size only now, so its scale is set again from the one left.  At
        # once, not deferred: a zoom made right after the switch must not be undone
        self.zoom_link.copy(src, dst)
        self.keep_fit()

    # -- cursor readout ------------------------------------------------------------------
    def toggle_loupe(self) -> None:
        """The loupe beside the cursor over any view, on or off."""
        if self.loupe is None:
            self.loupe = Loupe(self)
        self.loupe_on = not self.loupe_on
        self.act_loupe.setChecked(self.loupe_on)
        if not self.loupe_on:
            self.loupe.hide()

    def _show_loupe(self, panel, info) -> None:
        if not self.loupe_on or self.loupe is None:
            return
        a = panel.data
        if info is not None and panel is self.split.panel:  # the side under the cursor
            a = self.split.before if info[0] < self.split.split_column() else self.split.after
        if info is None or a is None or not hasattr(a, "shape"):
            self.loupe.hide()
            return
        self.loupe.show_at(a, info[0], info[1], panel.image.levels,
                           self.mapFromGlobal(QCursor.pos()))

    def _on_hover(self, panel, info) -> None:
        """Cursor readout: position and value under the mouse, and the input's value there."""
        self._show_loupe(panel, info)
        if info is None:
            self.cursor_label.setText("")
            return
        c, r, val = info
        if panel is self.split.panel:  # both sides, the one under the cursor first
            self.cursor_label.setText(split_hover_text(c, r, self.split.values_at(c, r)))
            return
        inp = self.grid.input_panel
        if panel is not inp and inp.data is not None and inp.data.shape[:2] == panel.data.shape[:2]:
            text = hover_text(c, r, panel.title.text(), val, inp.title.text(), inp.data[r, c])
        else:
            text = hover_text(c, r, panel.title.text(), val)
        self.cursor_label.setText(text)

    # -- contrast ------------------------------------------------------------------------
    def _levels_for(self, e: ImageEntry) -> tuple[float, float]:
        """The black and white points of an image (from its data until the user drags them)."""
        if e.key not in self._levels:
            # a camera mosaic is shown developed (8 bits): its levels are the developed view's
            self._levels[e.key] = display_levels(e.display(e.array) if e.raw is not None else e.array)
        return self._levels[e.key]

    def _image_panels(self):
        """The panels showing pixel values (the residuals keep their own symmetric scale)."""
        return [self.grid.input_panel, self.grid.ref_panel, *self.grid.rank_panels.values(),
                self.split.panel]

    def _on_levels_changed(self, *_a) -> None:
        """The histogram's black and white points apply to every view of the image."""
        if self._syncing_levels:
            return
        e = self.current_entry()
        lo, hi = self.hist.item.getLevels()
        if e is None or not hi > lo:
            return
        self._levels[e.key] = (float(lo), float(hi))
        for p in self._image_panels():
            if p.has_image():
                p.image.setLevels((lo, hi))
        self.split.levels = (lo, hi)

    def _sync_histogram(self, levels) -> None:
        self._syncing_levels = True
        try:
            self.hist.item.setLevels(*levels)
        finally:
            self._syncing_levels = False

    # -- ROI -------------------------------------------------------------------------------
    def toggle_roi(self) -> None:
        """Show or remove the ROI on the input view; its statistics appear under every view."""
        if self.roi is not None:
            self.grid.input_panel.vb.removeItem(self.roi)
            self.roi = None
            for p in self.grid.panels():
                p.set_roi_text("")
            self.act_roi.setChecked(False)
            return
        data = self.grid.input_panel.data
        h, w = data.shape[:2] if data is not None else (64, 64)
        self.roi = pg.RectROI([w / 4, h / 4], [max(2, w // 2), max(2, h // 2)], pen=pg.mkPen("#ffd84a", width=2))
        self.grid.input_panel.vb.addItem(self.roi)
        self.roi.sigRegionChanged.connect(self.update_roi_stats)
        self.act_roi.setChecked(True)
        self.update_roi_stats()

    def keep_roi_inside(self, shape: tuple | None) -> None:
        """An ROI that does not lie inside an image of ``shape`` (H, W, ...) moves to that
        image's centre half: a leftover ROI of a larger image made Fit zoom out to it
        and shrink the new image to a sliver."""
        if self.roi is None or shape is None:
            return
        h, w = shape[:2]
        x0, y0, x1, y1 = self.roi_box()
        if x0 < 0 or y0 < 0 or x1 > w or y1 > h:
            self.roi.setPos([w / 4, h / 4], update=False)
            self.roi.setSize([max(2, w // 2), max(2, h // 2)])

    def roi_box(self) -> tuple[int, int, int, int] | None:
        """The ROI as whole pixels ``(x0, y0, x1, y1)``."""
        if self.roi is None:
            return None
        (x, y), (w, h) = self.roi.pos(), self.roi.size()
        return int(round(x)), int(round(y)), int(round(x + w)), int(round(y + h))

    def update_roi_stats(self) -> None:
        box = self.roi_box()
        if box is None:
            return
        for p in self.grid.panels():
            p.set_roi_text(region_stats(p.data, *box) if p.has_image() else "")

    # -- zoom and fit -------------------------------------------------------------------------
    def _visible_vb(self):
        return self.split.vb if self.tabs.currentIndex() == 1 else self.grid.current_vb()

    def zoom_one_to_one(self) -> None:
        """One image pixel per screen pixel in the visible view (kept until Ctrl+0)."""
        self.zoom_percent(100)

    def zoom_percent(self, percent: float) -> None:
        """``percent`` / 100 screen pixels per image pixel in the visible view, around its
        centre (kept until Ctrl+0)."""
        zoom_to(self._visible_vb(), percent / 100.0)
        self._on_user_zoom()

    def zoom_step(self, step: int) -> None:
        """The next zoom step in (``step`` 1) or out (-1) from the zoom now
        (:data:`~kpca_denoise.gui.views.ZOOM_STEPS`); out of the smallest: fit."""
        now = view_scale(self._visible_vb())
        if step > 0:
            bigger = [z for z in ZOOM_STEPS if z > now * 1.01]
            self.zoom_percent(100 * (bigger[0] if bigger else ZOOM_STEPS[-1]))
        else:
            smaller = [z for z in ZOOM_STEPS if z < now / 1.01]
            if smaller:
                self.zoom_percent(100 * smaller[-1])
            else:
                self.auto_range()

    def _on_user_zoom(self) -> None:
        """The user zoomed or panned: keep that centre and scale from now on, until Ctrl+0."""
        self.fitted = False
        vb = self._visible_vb()
        (x0, x1), (y0, y1) = vb.viewRange()
        upp = max((x1 - x0) / max(vb.width(), 1.0), (y1 - y0) / max(vb.height(), 1.0))
        self._user_view = ((x0 + x1) / 2, (y0 + y1) / 2, upp)

    def keep_fit(self) -> None:
        """After whatever changed the views' size or content: fit them again while they are
        fitted, else put back the user's centre and scale (a re-laid-out, linked view would
        otherwise show another region); once, at the next event-loop turn (after layout)."""
        if not self._fit_pending:
            self._fit_pending = True
            QTimer.singleShot(0, self, self._fit_now)  # none once the window is gone

    def _fit_now(self) -> None:
        self._fit_pending = False
        if self.fitted:
            self._auto_range()
        elif self._user_view is not None:
            cx, cy, upp = self._user_view
            vb = self._visible_vb()
            w, h = vb.width(), vb.height()
            if min(w, h) >= 1:
                vb.setRange(xRange=(cx - upp * w / 2, cx + upp * w / 2),
                            yRange=(cy - upp * h / 2, cy + upp * h / 2), padding=0)

    def auto_range(self) -> None:
        """Fit the image in the visible view (Ctrl+0); the views stay fitted until the user zooms."""
        self.fitted = True
        self._auto_range()

    def _auto_range(self) -> None:
        if self.tabs.currentIndex() == 1:
            self.split.vb.autoRange(padding=0.0)
        else:
            self.grid.auto_range()
