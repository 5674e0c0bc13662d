"""Drawing the views: the input, the reference, every cached rank and its residual, the split
view, the spectrum and the line over the views.

A mixin of :class:`~kpca_denoise.gui.main_window.MainWindow`.  It only draws
what the session holds for the current image and the panel's parameters (or
the image's latest result, marked); it never computes a result.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QTimer

from ..pipeline import result_keys
from .layout import WELCOME_TEXT
from .model import FitRecord, ImageEntry, group_spectrum, pasted, residual_view
from .texts import (empty_spectrum_text, format_metrics, info_html, input_title, noise_text,
                    rank_metrics_text)
from .jobs import rank_label

__all__ = ["ViewDrawing"]


class ViewDrawing:
    """``refresh_views`` and its parts (mixed into the window)."""

    def schedule_refresh(self) -> None:
        """Redraw once at the next event-loop turn, however many results arrived."""
        if not self._refresh_pending:
            self._refresh_pending = True
            QTimer.singleShot(0, self, self._deferred_refresh)  # none once the window is gone

    def _deferred_refresh(self) -> None:
        if self._refresh_pending:
            self.refresh_views()

    def refresh_views(self, reset_zoom: bool = False) -> None:
        """Draw the current image and every cached rank; only draws, never computes a result."""
        self._refresh_pending = False
        e = self.current_entry()
        p = self.current_params()
        shown = self.session.shown(e, p)
        rec = shown.record
        # results computed with other parameters are shown as they are, marked
        ranks = self.compared_ranks() if shown.matches else shown.ranks
        self._show_mismatch(shown, p)
        self.set_fit_box.setEnabled(e is not None and p is not None
                                    and bool(self.session.set_group(e, p)))
        # only where a set can be fitted: one image leaves the line room
        self.set_fit_box.setVisible(len(self.entries) > 1)
        for row in range(len(self.entries)):
            self._update_status(row, p)
        # where 'auto' fell is marked for a result of the panel's parameters only (another
        # method's or run's mark stayed on the spectrum, stale)
        self._show_rank_choice(ranks, rec if shown.matches else None)
        if e is None:
            self._draw_nothing()
            self.viewsRefreshed.emit()
            return
        levels = self._levels_for(e)
        running = e.key in self._running_keys
        noisy_d = self._draw_input(e, rec, levels)
        self._draw_reference(e, p, levels)
        self._draw_ranks(e, rec, ranks, levels, running)
        # split view: A and B among the input, the reference and the ranks computed
        # (by default the noisy input and the selected rank)
        self.split.set_sources(self._split_sources(e, rec, noisy_d, ranks), levels,
                               "input", ("rank", self.selected_rank))
        self.grid.update_strip()
        if not running:  # a run draws its live spectrum itself
            self._draw_spectrum(e, rec)
        self._show_resolved(rec)
        info = info_html(e, rec)
        pv = self.session.preview(e, p) if rec is None and self.preview_roi is not None else None
        if pv is not None and not pv.noise_model:  # the noise the preview was made for
            info += " · preview: noise " + noise_text(pv.noise_sigma, pv.noise_estimated,
                                                      pv.params.strength, pv.noise)
        self.info.setText(info)
        self.info.setToolTip(self.info.text().replace("<b>", "").replace("</b>", ""))
        self.update_roi_stats()
        if reset_zoom:
            self.fitted = True  # another image: fitted again
        # after the layout has given the views their size, or the fit is wrong
        self.keep_fit()
        self.viewsRefreshed.emit()

    def _split_sources(self, e: ImageEntry, rec: FitRecord | None, noisy_d, ranks) -> dict:
        """``{key: (label, image)}`` the split view's A and B choose from."""
        out = {"input": ("noisy", noisy_d)}
        if self.grid.ref_panel.has_image() and self.grid.ref_panel.data.shape == noisy_d.shape:
            out["reference"] = (self.grid.ref_panel.title.text() or "reference",
                                self.grid.ref_panel.data)
        for r in ranks:
            res = rec.ranks.get(r) if rec is not None else None
            panel = self.grid.rank_panels.get(r)
            if res is not None:
                out[("rank", r)] = (f"rank {rank_label(r)}", e.display(res.output))
            elif panel is not None and panel.has_image() and panel.data.shape == noisy_d.shape:
                # a preview: the region denoised in place, the rest the input
                out[("rank", r)] = (f"rank {rank_label(r)} (preview)", panel.data)
            else:
                out[("rank", r)] = (f"rank {rank_label(r)}", None)
        return out

    def _show_rank_choice(self, ranks: tuple, rec: FitRecord | None) -> None:
        """The grid's cells, the selected rank (kept if still shown), the combo, the spectrum's lines."""
        self.grid.set_ranks(ranks)
        if self.selected_rank not in ranks:
            self.selected_rank = ranks[-1] if ranks else None
        self.rank_combo.blockSignals(True)
        self.rank_combo.clear()
        for r in ranks:
            self.rank_combo.addItem(rank_label(r), r)
        if ranks:
            self.rank_combo.setCurrentIndex(ranks.index(self.selected_rank))
        self.rank_combo.blockSignals(False)
        self.grid.set_selected(self.selected_rank)
        # the rank the fit chose for 'auto' (patch sets), or the components the grouped
        # method's shrinkage kept per group, is marked on the spectrum
        auto = None
        if rec is not None:
            auto = rec.resolved.get("auto_rank")
            if auto is None and rec.params.method == "grouped":
                auto = rec.effective_rank(None)
        elif self.preview_roi is not None:
            pv = self.session.preview(self.current_entry(), self.current_params())
            if pv is not None and pv.group_spectra:
                auto = (pv.group_spectra[0].get("effective_rank") or {}).get(None)
            elif pv is not None and pv.params.method == "global":
                auto = result_keys(pv.params.replace(ranks=(None,)), False)[0]
        self.spectrum.set_ranks(ranks, self.selected_rank, auto)

    def _draw_nothing(self) -> None:
        """No image loaded: empty views and the welcome line."""
        for panel in self.grid.panels():
            panel.set_image(None, placeholder="")
            panel.set_metrics("")
        self.grid.input_panel.set_image(None, placeholder="open or drop images")
        self.split.set_images(None, None, None)
        self.info.setText(WELCOME_TEXT)
        self.spectrum.clear_spectrum()  # nothing left of the last image removed
        for curve in getattr(self.hist.item, "plots", ()):
            curve.clear()

    def _draw_input(self, e: ImageEntry, rec: FitRecord | None, levels) -> np.ndarray:
        """The input view (the noisy image a run denoised, if any); returns what it draws."""
        noisy = rec.noisy if rec is not None else e.array
        noisy_d = e.display(noisy)
        self.grid.input_panel.set_title(input_title(rec))
        self.grid.set_aspect(noisy_d.shape[1] / max(noisy_d.shape[0], 1))
        self.grid.input_panel.set_image(noisy_d, levels)
        self._sync_histogram(levels)
        self.grid.input_panel.set_metrics(format_metrics(rec.noisy_metrics) if rec else e.describe())
        return noisy_d

    def _draw_reference(self, e: ImageEntry, p, levels) -> None:
        """The clean view: the reference, the input noise was added to, or why there is none."""
        clean = self._clean_for(e, p) if p is not None else None
        ref = self.grid.ref_panel
        if clean is not None:
            ref.set_title("reference" if e.reference is not None else "clean")
            ref.set_image(e.display(clean), levels)
            ref.set_metrics(str(e.reference_path.name) if e.reference_path
                            else "before the noise")
        else:
            ref.set_title("no reference")
            ref.set_image(None, placeholder="no clean reference: the metrics show the noise left")
            ref.set_metrics("")

    def _draw_ranks(self, e: ImageEntry, rec: FitRecord | None, ranks: tuple, levels,
                    running: bool) -> None:
        """Each rank's view and its residual, or what is missing ('computing…', 'not computed');
        a rank not computed shows the preview of its region, when there is one."""
        sigma = rec.noise_sigma if rec is not None and np.isfinite(rec.noise_sigma) else None
        prev = None
        pv = self.session.preview(e, self.current_params()) if self.preview_roi is not None else None
        for r in ranks:
            panel, rpanel = self.grid.rank_panels[r], self.grid.resid_panels[r]
            rr = rec.ranks.get(r) if rec is not None else None
            if r is None:
                panel.set_title(self.rank_title(e, rec, r))
            if rr is None and pv is not None and r in pv.outputs:
                self._draw_preview(e, rec, pv, r, panel, rpanel, levels)
            elif rr is not None:
                panel.set_frame(None)
                panel.set_image(e.display(rr.output), levels)
                panel.set_metrics(rank_metrics_text(rec, r, prev, sigma))
                prev = rr
                res = residual_view(e, rec.noisy, rr.output)
                span = 3.0 * (sigma if sigma else max(rr.residual_std, 1e-12))
                rpanel.set_image(res, (-span, span))
                rpanel.set_metrics(f"residual std {rr.residual_std:.3g}")
            else:
                msg = "computing…" if running else "not computed\nRun (Ctrl+R) or preview (P)"
                panel.set_frame(None)
                panel.set_image(None, placeholder=msg)
                panel.set_metrics("")
                rpanel.set_image(None, placeholder="")
                rpanel.set_metrics("")

    def _draw_preview(self, e: ImageEntry, rec: FitRecord | None, pv, r, panel, rpanel, levels) -> None:
        """A rank's preview in place: the region denoised, the rest as the input, framed."""
        base = pv.noisy if pv.noisy is not None else (rec.noisy if rec is not None else e.array)
        out = pasted(base, pv.box, pv.outputs[r])
        panel.set_image(e.display(out), levels)
        # the region computed (the rectangle may have moved on since)
        upright = e.item.meta.get("orientation") in (None, 1)
        panel.set_frame(pv.box if upright else self.preview_box())
        # the frame says it is a preview; the line, what it measures: the region only
        # the frame says it is the preview's region; the tooltip says it in words
        panel.set_metrics(format_metrics(pv.metrics.get(r)))
        panel.metrics.setToolTip(panel.metrics.text() + " · in the preview's region")
        res = residual_view(e, base, out)
        sigma = pv.noise_sigma if np.isfinite(pv.noise_sigma) and pv.noise_sigma > 0 else 1.0
        rpanel.set_image(res, (-3.0 * sigma, 3.0 * sigma))
        rpanel.set_metrics("preview residual")

    def _draw_spectrum(self, e: ImageEntry, rec: FitRecord | None) -> None:
        """The fitted eigen-spectrum of the result shown (the grouped method: its groups'
        mean spectrum, what a rank cuts), or why there is none."""
        pv = self.session.preview(e, self.current_params()) if rec is None else None
        spec, what, spread = group_spectrum(rec, pv) if not e.is_patchset else (None, "", None)
        if spec is not None:
            self.spectrum.set_group_spectrum(spec, what, spread)
        elif pv is not None and pv.spectrum is not None:
            self.spectrum.set_eigenvalues(pv.spectrum, final=True)
        elif rec is not None and rec.eigenvalues is not None and rec.eigenvalues.size:
            self.spectrum.set_eigenvalues(rec.eigenvalues, final=True, total_variance=rec.total_variance)
        else:
            self.spectrum.clear_spectrum(empty_spectrum_text(rec, e.is_patchset))

    def _show_resolved(self, rec: FitRecord | None) -> None:
        """Next to the panel's 'auto' boxes: the γ and σ the result's run chose."""
        if rec is None:
            self.params_panel.show_resolved(None, None, False)
            return
        poisson = rec.resolved.get("noise_model")
        self.params_panel.show_resolved(rec.resolved.get("gamma"),
                                        None if poisson else rec.noise_sigma / rec.params.strength,
                                        rec.noise_estimated)
