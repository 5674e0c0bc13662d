"""Run control: start and cancel runs, take in what the worker sends back.

A mixin of :class:`~kpca_denoise.gui.main_window.MainWindow`.  A run asks the
:class:`~kpca_denoise.gui.worker.RunController` only for the ranks the
session has not cached yet (:meth:`Session.plan`); each image's results go
into the session as they arrive and the views are redrawn once per
event-loop turn.  Rank edits that only add ranks to a fitted image run by
themselves after a short pause.
"""

from __future__ import annotations

import numpy as np

from ..params import DenoiseParams
from .model import ImageEntry
from .texts import (
    QUEUE_TEXTS,
    outcome_error_text,
    outcome_log_lines,
    run_end_texts,
    run_started_text,
    separate_images_alone_text,
    status_text,
    waiting_spectrum_text,
)
from .jobs import Job
from .panels import run_estimate
from .worker import RunSummary

__all__ = ["RunControl", "LIVE_GROUPS_TEXT"]

#: the spectrum's line while the grouped method gathers it (its spread comes at the end)
LIVE_GROUPS_TEXT = "groups so far (live)"


class RunControl:
    """Parameters in, runs out: start, cancel, progress, results (mixed into the window)."""

    # -- parameters --------------------------------------------------------------------
    def current_params(self) -> DenoiseParams | None:
        """The panel's parameters, or the last valid ones while the form has an error."""
        try:
            p = self.params_panel.params()
        except ValueError:
            return self._last_params
        self._last_params = p
        return p

    def _params_or_report(self) -> DenoiseParams | None:
        try:
            return self.params_panel.params()
        except ValueError as exc:
            self.report_error(f"Cannot run: {exc}")
            return None

    def _on_params_changed(self) -> None:
        p = self.current_params()
        if p is None:
            return
        self.save_settings()
        self.refresh_views()
        e = self.current_entry()
        if not self.runner.is_running():
            self.progress.set_method(p.method)  # the stages this method will go through
        if self.preview_wanted():
            self._preview_timer.start()
        self.schedule_prepare()
        if e is not None and not self.runner.busy():
            rkey = self.result_key(e, p)
            rec = self.cache.get(e.key, rkey)
            if rec is not None and self.cache.missing(e.key, rkey, p.ranks):
                self._auto_timer.start()

    def _auto_run_missing(self) -> None:
        e, p = self.current_entry(), self.current_params()
        if e is None or p is None or self.runner.busy():
            return
        if self.cache.get(e.key, self.result_key(e, p)) is not None:
            self.log("computing only the ranks not computed yet for these parameters")
            self.run_current()

    def result_key(self, e: ImageEntry, params: DenoiseParams) -> str:
        """Cache key of the result shown for ``e``: its set fit's (when shown) or its own."""
        return self.session.result_key(e, params)

    # -- starting and cancelling ----------------------------------------------------------
    def run_current(self) -> bool:
        """Denoise the current image at the ranks not cached yet. Returns True if a run started."""
        e = self.current_entry()
        if e is None:
            self.report_error("Nothing to denoise: open an image first (Ctrl+O).")
            return False
        return self._start([e], "run")

    def run_all(self) -> bool:
        """Denoise every image, each with its own model."""
        if not self.entries:
            self.report_error("Nothing to denoise: open images first (Ctrl+O).")
            return False
        return self._start(list(self.entries), "run")

    def run_set_fit(self) -> bool:
        """The explicit set fit: one 'global' model per kind of image (as ``kpca-denoise denoise
        FOLDER`` fits), kept beside each image's own results and shown in their place."""
        p = self._params_or_report()
        if p is None:
            return False
        if p.method != "global":
            self.report_error("A set fit shares one kernel PCA between images: choose the method "
                              "'global' (the grouped method fits every image by itself).")
            return False
        groups = [g for g in self.session.kind_groups(list(self.entries)) if len(g) > 1]
        if not groups:
            self.report_error("A set fit needs at least two images of one kind (same channels; "
                              "images or patch sets of one size).")
            return False
        entries = [e for g in groups for e in g]
        self.set_fit_box.setChecked(True)
        return self._start(entries, "run", set_fit=True)

    def _start(self, entries: list[ImageEntry], purpose: str, ranks=None, set_fit: bool = False) -> bool:
        """Start a run for the ranks of ``entries`` not cached yet; False if none started."""
        if self.runner.is_running():
            if self.runner.purpose() in ("preview", "prepare"):  # the run is what they were for
                self._queued_run = (entries, purpose, ranks, set_fit)
                self.runner.cancel()
                if self.runner.purpose() == "preview":
                    self.log("preview stopped: the run starts as soon as it has")
                return True
            self.report_info("A run is in progress; wait for it or cancel it (Esc).")
            return False
        params = self._params_or_report()
        if params is None:
            return False
        items, sets = self.session.plan(entries, params, ranks, set_fit)
        if not items:
            if purpose == "run":
                self.report_info("All requested ranks are already computed for these parameters.")
            return False
        if params.method == "grouped" and params.sequence == "auto" and not set_fit:
            alike = max((len(self.session.sequence_group(e, params.replace(sequence="yes")))
                         for e in entries if e.stack is None), default=0)
            if alike > 1:
                self.log(separate_images_alone_text(alike))
        self._running_keys = {it.key for it in items}
        self._current_job_method = params.method
        self.banner.hide()
        return self.runner.start(Job(items=items, params=params, purpose=purpose, sets=sets))

    def cancel_run(self) -> None:
        if self.runner.busy():
            self.runner.cancel()
            self.progress.overall.setText("cancelling…")
            self.log("cancel requested")
        self._pending_export = None

    # -- what the worker sends ------------------------------------------------------------
    def _on_run_started(self, job: Job) -> None:
        if job.purpose == "prepare":  # in the background: nothing to show
            self._update_actions()
            return
        n = len(job.items)
        if job.purpose in ("run", "export"):  # the queue, on each image's line in the set
            self.queue = {it.key: "queued" for it in job.items}
            for it in job.items:
                self._show_queue_state(it.key)
        preview = job.purpose == "preview"  # one image's region (a sequence's page: its sweep)
        self.progress.start(job.params.method, 1 if preview else n, one_model=bool(job.sets),
                            sets_only=not preview and sum(len(g) for g in job.sets) == n,
                            passes=2 if job.params.grouped.two_stage else 1,
                            estimate=run_estimate(job), sets=job.sets)
        if job.purpose != "preview":
            self.log(run_started_text(n, job.params.method, {r for it in job.items for r in it.ranks},
                                      [len(g) for g in job.sets]))
        self.statusBar().showMessage("running…")
        e = self.current_entry()
        if e is not None and e.key in self._running_keys:
            self.spectrum.clear_spectrum(waiting_spectrum_text(job.params.method))
        self._update_actions()
        self.refresh_views()

    def _on_stage(self, stage: str, *_rest) -> None:
        if stage != "eigensolver":
            self.spectrum.solver_finished()

    def _on_live_spectrum(self, ev: np.ndarray) -> None:
        e = self.current_entry()
        if e is None or e.key not in self._running_keys:
            return
        if self._current_job_method == "global":
            self.spectrum.set_eigenvalues(ev, final=False)
        else:  # the grouped method's final pass: the mean spectrum of its groups so far
            self.spectrum.set_group_spectrum(ev, LIVE_GROUPS_TEXT)

    def _queue_item_started(self, index: int, count: int, _name: str) -> None:
        """The run's queue: the image (or the set) begun is running."""
        job = self.runner.job()
        if job is None or job.purpose not in ("run", "export") or not self.queue:
            return
        if index >= 0:
            keys = [job.items[index].key] if index < len(job.items) else []
        else:  # a set: the first whose images are all still queued
            keys = next(([job.items[i].key for i in g] for g in job.sets
                         if all(self.queue.get(job.items[i].key) == "queued" for i in g)), [])
        for key in keys:
            self.queue[key] = "running"
            self._show_queue_state(key)

    def _show_queue_state(self, key: str) -> None:
        row = self.session.row_of(key)
        if row >= 0 and key in self.queue:
            self.imageset.set_status(row, QUEUE_TEXTS[self.queue[key]])

    def _on_item_done(self, out) -> None:
        """One image's results: into the session, the log, its thumbnail, the views."""
        row = self.session.row_of(out.key)
        if row < 0:
            return  # removed while it was computing
        if out.key in self.queue and not out.partial:
            if out.error:
                self.queue[out.key] = "failed"
            else:
                del self.queue[out.key]
        if out.error:
            self.imageset.set_status(row, "⚠ failed")
            self.report_error(outcome_error_text(out))
            return
        self.session.add_outcome(out)
        e = self.entries[row]
        for line in outcome_log_lines(out, e.is_patchset, e.stack is not None):
            self.log(line)
        self._update_status(row)
        if row == self.current_index():
            self.schedule_refresh()

    def _update_status(self, row: int, p: DenoiseParams | None = None) -> None:
        """The thumbnail's line: how many ranks the image has for the panel's parameters,
        or, marked, for the other parameters it was computed with."""
        if self.entries[row].key in self.queue:  # waiting or running in this run
            self._show_queue_state(self.entries[row].key)
            return
        p = p or self.current_params()
        sh = self.session.shown(self.entries[row], p)
        if sh.record is None:
            return
        self.imageset.set_status(row, status_text(len(sh.record.ranks), sh.matches))

    def _after_prepare(self) -> None:
        """The background decisions ended (or gave way): what waited for them starts."""
        self._update_actions()
        queued, self._queued_run = self._queued_run, None
        if queued is not None:
            self._start(*queued)
        else:
            self._preview_after_run()

    def _on_run_finished(self, summary: RunSummary) -> None:
        self._running_keys = set()
        if summary.job.purpose == "prepare":
            self._after_prepare()
            return
        left, self.queue = self.queue, {}
        for key, state in left.items():  # the images the run did not reach (or failed)
            row = self.session.row_of(key)
            if row >= 0:
                self.imageset.set_status(row, QUEUE_TEXTS["failed"] if state == "failed" else
                                         QUEUE_TEXTS["not run"] if summary.status != "done" else None)
                self._update_status(row)
        kept = any(self.session.has_results(e) for e in self.entries)
        progress_text, msg = run_end_texts(summary.status, summary.seconds, summary.done,
                                           summary.failed, summary.message, kept)
        preview = summary.job.purpose == "preview"
        if preview and summary.status == "done":
            progress_text = msg = f"preview done in {summary.seconds:.1f} s"
        self.progress.finish(progress_text)
        queued, self._queued_run = self._queued_run, None
        if queued is not None:  # a run asked for while a preview was computing
            self._update_actions()
            self._start(*queued)
            return
        if preview and summary.status != "failed":
            self.statusBar().showMessage(msg, 10000)
        elif summary.status == "cancelled":
            self.report_info(msg)
        elif summary.status == "failed":
            self.report_error(msg)
        else:
            self.statusBar().showMessage(msg, 10000)
            self.log(msg)
        self._update_actions()
        self.schedule_refresh()
        if summary.status == "done" and not preview:
            self._add_auto_neighbours()
        self._preview_after_run()
        if not self.runner.is_running():
            self.schedule_prepare()
        pending, self._pending_export = self._pending_export, None
        if pending is not None and summary.status == "done" and summary.job.purpose == "export":
            self._export_after_run(*pending)
