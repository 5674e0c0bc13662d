"""The preview: a region of the current image denoised at every rank before the long run.

A mixin of :class:`~kpca_denoise.gui.main_window.MainWindow`.  ``P`` (or the toolbar's
Preview) puts a rectangle on the input view, first over the part of the image in view
(at most :data:`PREVIEW_SIDE` pixels a side); moving it, resizing it or changing a
parameter denoises that region again (the latest request wins: one at a time, after the
run going on).  The compute process makes the whole image's decisions once (noise level,
the global fit, the grouped calibration) and denoises one tile of the tiled engine whose
core is the region (:func:`kpca_denoise.gui.image_preview.run_preview`), so the preview is the
full run's result there, pixel for pixel.  A page the run denoises with its neighbouring
pages (a stack's, or an image of a sequence) is previewed so too: the job names its
sequence's pages (their arrays go to the compute process only when it does not keep the
sequence's decisions and pages already), and the region goes through the stack path with
the pages within its reach.  The rank views show it in place, framed, with the metrics of
the region.
``docs/gui.md#preview-before-the-long-run``.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QTimer

from ..io import display_oriented
from .jobs import Job, JobItem, PreviewOutcome, params_key, rank_label
from .model import ImageEntry
from .texts import preview_sequence_text

__all__ = ["PreviewControl", "PREVIEW_SIDE"]

#: the side of the first preview region, in image pixels (at most; the part in view)
PREVIEW_SIDE = 256
#: the largest image (pixels) whose preview decisions are made in the background when it is
#: selected (the grouped method: the noise measurement and the calibration, some seconds a
#: megapixel; a run asked for meanwhile stops them)
PREPARE_MAX_PIXELS = 4_000_000
#: the same for a sequence's pages all together (each page at most the above): every page's
#: noise is measured (about 0.7 s for a 320 x 320 page), a run asked for stops them
#: between two pages
PREPARE_MAX_SEQUENCE_PIXELS = 64_000_000
_PEN = "#39c5e0"


class PreviewControl:
    """The preview rectangle, its requests and its results (mixed into the window)."""

    #: milliseconds an image or a parameter stays unchanged before the preview's decisions
    #: are made in the background; None: never (the tests drive every job themselves)
    prepare_delay_ms: int | None = 800

    def _init_preview(self) -> None:
        self.preview_roi: pg.RectROI | None = None
        self._preview_pending = False
        self._queued_run = None  # a run asked for while a preview computed: (entries, purpose, ...)
        self._preview_timer = QTimer(self)
        self._preview_timer.setSingleShot(True)
        self._preview_timer.setInterval(250)  # a drag sends one request, not fifty
        self._preview_timer.timeout.connect(self.request_preview)
        self.runner.previewDone.connect(self._on_preview_done)
        self._prepared: set = set()  # (image key, parameters) whose decisions were asked for
        self._prepare_timer = QTimer(self)
        self._prepare_timer.setSingleShot(True)
        self._prepare_timer.timeout.connect(self.prepare_preview)

    # -- the rectangle ------------------------------------------------------------------
    def toggle_preview(self) -> None:
        """Show the preview rectangle (and preview it at once) or remove it."""
        if self.preview_roi is not None:
            self.grid.input_panel.vb.removeItem(self.preview_roi)
            self.preview_roi = None
            self.grid.input_panel.set_frame(None)
            self._preview_pending = False
            self.act_preview.setChecked(False)
            self.refresh_views()
            return
        data = self.grid.input_panel.data
        if data is None or self.current_entry() is None or self.current_entry().is_patchset:
            self.act_preview.setChecked(False)
            self.report_info("A preview needs an image (patch sets are denoised whole).")
            return
        if self.current_entry().raw is not None:
            self.act_preview.setChecked(False)
            self.report_info("A camera mosaic is denoised whole: run it (Ctrl+R); the preview "
                             "of a region takes images.")
            return
        self._show_preview_roi(self.visible_box(data.shape))

    def draw_preview(self, rect: tuple) -> bool:
        """The preview of the region drawn on a view (Shift + drag): ``rect`` (x0, y0, x1,
        y1) in image pixels, clipped to the image; a region under 8 pixels a side is a slip
        of the mouse.  True if the region is shown (and its preview asked for)."""
        data = self.grid.input_panel.data
        e = self.current_entry()
        if data is None or e is None or e.is_patchset or e.raw is not None:
            return False
        h, w = data.shape[:2]
        x0, y0 = max(0, int(round(rect[0]))), max(0, int(round(rect[1])))
        x1, y1 = min(w, int(round(rect[2]))), min(h, int(round(rect[3])))
        if x1 - x0 < 8 or y1 - y0 < 8:
            return False
        if self.preview_roi is None:
            self._show_preview_roi((x0, y0, x1, y1))
        else:
            self.preview_roi.setPos([x0, y0], update=False)
            self.preview_roi.setSize([x1 - x0, y1 - y0])
            self._preview_timer.start()
        return True

    def _show_preview_roi(self, box: tuple) -> None:
        x0, y0, x1, y1 = box
        self.preview_roi = pg.RectROI([x0, y0], [x1 - x0, y1 - y0], pen=pg.mkPen(_PEN, width=2),
                                      snapSize=1.0, translateSnap=True, scaleSnap=True)
        self.preview_roi.setZValue(20)
        self.grid.input_panel.vb.addItem(self.preview_roi)
        self.preview_roi.sigRegionChangeFinished.connect(lambda *_: self._preview_timer.start())
        # a mark the region keeps at any zoom (the rectangle alone was 10 px on a 12 Mpx photo)
        self.preview_roi.sigRegionChanged.connect(
            lambda *_: self.grid.input_panel.set_frame(self.preview_box(), dashed=False))
        self.grid.input_panel.set_frame(self.preview_box(), dashed=False)
        self.act_preview.setChecked(True)
        self.request_preview()

    def visible_box(self, shape: tuple) -> tuple[int, int, int, int]:
        """``(x0, y0, x1, y1)``: the part of an image of ``shape`` in view, at most
        :data:`PREVIEW_SIDE` a side around the view's centre."""
        h, w = shape[:2]
        (vx0, vx1), (vy0, vy1) = self.grid.master.viewRange()
        cx = min(max((vx0 + vx1) / 2, 0), w)
        cy = min(max((vy0 + vy1) / 2, 0), h)
        sw = int(min(PREVIEW_SIDE, w, max(16, vx1 - vx0)))
        sh = int(min(PREVIEW_SIDE, h, max(16, vy1 - vy0)))
        x0 = int(min(max(round(cx - sw / 2), 0), w - sw))
        y0 = int(min(max(round(cy - sh / 2), 0), h - sh))
        return x0, y0, x0 + sw, y0 + sh

    def preview_box(self) -> tuple[int, int, int, int] | None:
        """The rectangle as whole pixels of the image (y0, y1, x0, x1), inside it."""
        if self.preview_roi is None or self.grid.input_panel.data is None:
            return None
        h, w = self.grid.input_panel.data.shape[:2]
        (x, y), (sw, sh) = self.preview_roi.pos(), self.preview_roi.size()
        x0, y0 = max(0, int(round(x))), max(0, int(round(y)))
        x1, y1 = min(w, int(round(x + sw))), min(h, int(round(y + sh)))
        return (y0, y1, x0, x1) if x1 > x0 and y1 > y0 else None

    # -- requests -------------------------------------------------------------------------
    def preview_wanted(self) -> bool:
        """A preview is asked for and the full result is not there already."""
        return self.preview_roi is not None and self._result_missing()

    def _result_missing(self) -> bool:
        """The current image has an image (not a patch set, not a camera mosaic, which is
        denoised whole) whose result for the panel's parameters is not all there."""
        e, p = self.current_entry(), self.current_params()
        if e is None or p is None or e.is_patchset or e.raw is not None:
            return False
        rec = self.session.record(e, p)
        return rec is None or bool(self.cache.missing(e.key, self.result_key(e, p), p.ranks))

    def schedule_prepare(self) -> None:
        """Make the current image's preview decisions once it has stayed selected (and the
        parameters unchanged) for :attr:`prepare_delay_ms`."""
        if self.prepare_delay_ms is not None:
            self._prepare_timer.start(self.prepare_delay_ms)

    def prepare_preview(self) -> bool:
        """Start the background job that makes the current image's whole-image decisions
        (:func:`kpca_denoise.gui.image_preview.prepare_preview`), so that its first preview
        denoises only its region: the grouped method, an image of at most
        :data:`PREPARE_MAX_PIXELS`, nothing running.  True if it started."""
        e, p = self.current_entry(), self.current_params()
        if self.runner.is_running() or not self._result_missing() or p.method != "grouped":
            return False
        job = self._preview_job(e, p, "prepare")
        pixels = [it.array.shape[0] * it.array.shape[1] for it in job.items]
        if max(pixels) > PREPARE_MAX_PIXELS or sum(pixels) > PREPARE_MAX_SEQUENCE_PIXELS:
            return False
        key = (tuple(it.key for it in job.items), params_key(p))  # a sequence's: its pages'
        if key in self._prepared:
            return False
        self._prepared.add(key)
        return self.runner.start(job)

    def _preview_job(self, e: ImageEntry, p, purpose: str, box: tuple = ()):
        """The job of a preview of ``e`` (or of its decisions, ``purpose`` 'prepare'): ``e``
        alone, or with the pages of the sequence the run denoises it in (its one set,
        ``e`` its focus), whose decisions and neighbouring pages the preview needs."""
        loaded = {x.key: x for x in self.session.entries}
        group = self.session.sequence_group(e, p)
        members = [loaded[k] for k in group] if group and all(k in loaded for k in group) else [e]
        items = [JobItem(key=m.key, name=m.name, array=m.array, is_patchset=False,
                         ranks=tuple(p.ranks), reference=m.reference) for m in members]
        return Job(items=items, params=p, purpose=purpose, box=box,
                   sets=[tuple(range(len(items)))] if len(items) > 1 else [],
                   focus=[m.key for m in members].index(e.key))

    def request_preview(self) -> bool:
        """Denoise the rectangle now, or after the run going on; True if it started."""
        if not self.preview_wanted():
            return False
        if self.runner.is_running():
            self._preview_pending = True
            if self.runner.purpose() == "prepare":  # quiet until now: say what the wait is
                self.progress.overall.setText("preview: the image's noise and calibration first…")
            return False
        e, p, box = self.current_entry(), self._params_or_report(), self.preview_box()
        if p is None or box is None:
            return False
        box = _array_box(e, box)
        self._preview_pending = False
        self._running_keys = {e.key}
        self._current_job_method = p.method
        return self.runner.start(self._preview_job(e, p, "preview", box))

    def _preview_after_run(self) -> None:
        if self._preview_pending:
            QTimer.singleShot(0, self, self.request_preview)

    def _on_preview_done(self, pv: PreviewOutcome) -> None:
        if self.session.row_of(pv.key) < 0:
            return
        if pv.error:
            self.report_error(f"Preview: {pv.error}")
            return
        self.session.add_preview(pv)
        y0, y1, x0, x1 = pv.box
        self.log(f"preview of {x1 - x0}×{y1 - y0} pixels at ({x0}, {y0}), ranks "
                 f"{', '.join(rank_label(r) for r in pv.outputs)}: {pv.seconds:.1f} s"
                 + ((" (the stack's decisions made before)" if pv.sequence and "first" in pv.sequence
                     else " (the image's decisions made before)") if pv.decided_before else ""))
        if pv.note:
            self.log(pv.note)
        if pv.sequence:  # what the run does with its neighbouring pages, and the preview
            e = self.session.entries[self.session.row_of(pv.key)]
            self.log(preview_sequence_text(pv.sequence, e.stack is not None))
        self.schedule_refresh()


def _array_box(e: ImageEntry, box: tuple) -> tuple:
    """A box of the view (an upright photo) in the array's own rows and columns."""
    orientation = e.item.meta.get("orientation")
    if orientation in (None, 1):
        return box
    h, w = e.array.shape[:2]
    idx = display_oriented(np.arange(h * w, dtype=np.int64).reshape(h, w), orientation)
    y0, y1, x0, x1 = box
    rows, cols = np.divmod(idx[y0:y1, x0:x1], w)
    return int(rows.min()), int(rows.max()) + 1, int(cols.min()), int(cols.max()) + 1
