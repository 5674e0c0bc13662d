"""The compute process's loop, with no Qt: it runs the window's jobs (:mod:`.jobs`) and
sends their outcomes, progress and spectra back.

The numerical work runs in a separate *process* (spawned once and kept for
later runs) driven by a QThread relay in :mod:`kpca_denoise.gui.worker`.  A
thread alone is not enough here: numpy and parts of the pipeline hold the
GIL for tens of milliseconds at a time, and measured event-loop gaps reached
115-400 ms with the pipeline in a thread of the GUI process (96×96 image,
1600 training patches).  In a process the GUI thread never waits for the
pipeline's GIL, and a cancel that the pipeline cannot honour quickly (one
pre-image block of a 512×512 image takes longer than a second) can end the
process instead.

Everything here is plain Python so that the child imports no widgets.
"""

from __future__ import annotations

import ctypes
import gc
import multiprocessing
import os
import queue as queue_mod
import threading
import time
import traceback
from dataclasses import replace
from typing import Any

import numpy as np

from ..core.metrics import residual_std
from ..core.progress import Cancelled, ProgressEvent
from ..evaluation import rank_notes
from ..params import DenoiseParams
from ..pipeline import denoise_set, result_keys
from .image_preview import prepare_preview, run_preview
from .jobs import (FIT_ERRORS, Emit, ItemOutcome, Job, JobItem, cached_model, compute_metrics,
                   keep_model, params_key, rank_label, rank_sort_key, unique_names)
from .stack_preview import decisions_kept

__all__ = [
    "Throttle",
    "reproducing_ranks",
    "run_job",
    "serve",
    "drain",
    "PROGRESS_INTERVAL",
    "SPECTRUM_INTERVAL",
]

#: minimum seconds between two progress messages of the same stage; a numba
#: loop can report thousands of times a second and a progress bar needs ~15 Hz
PROGRESS_INTERVAL = 0.066
#: minimum seconds between two live-spectrum updates (each one repaints the plot)
SPECTRUM_INTERVAL = 0.1


def _total_variance(model: Any) -> float | None:
    """Trace of the centred Gram matrix, the denominator of explained variance.

    trace(LKL) = trace(K) - 1ᵀK1/n, and trace(K) = n for the RBF kernel; read
    from the fitted model's stored means, nothing is recomputed.
    """
    try:
        n = model.X_fit_.shape[0]
        if model.kernel == "rbf":
            tr = float(n)
        elif model.kernel == "linear":
            tr = float(np.einsum("ij,ij->", model.X_fit_, model.X_fit_))
        else:
            return None
        return tr - n * float(model.K_fit_all_)
    except AttributeError:
        return None


class Throttle:
    """Progress callback for the pipeline: forwards at most ~15 messages a second per stage."""

    def __init__(self, emit: Emit) -> None:
        self.emit = emit
        self.last: dict[str, float] = {}
        self.last_stage: str | None = None
        self.last_spectrum = 0.0
        self.pending_spectrum = None

    def __call__(self, ev: ProgressEvent) -> None:
        now = time.monotonic()
        if ev.eigenvalues is not None:
            if now - self.last_spectrum >= SPECTRUM_INTERVAL or ev.done >= ev.total:
                self.last_spectrum = now
                self.pending_spectrum = None
                self.emit("spectrum", np.array(ev.eigenvalues, dtype=np.float64))
            else:
                self.pending_spectrum = ev.eigenvalues
        elif self.pending_spectrum is not None:
            # the solver converged between two throttled updates: its final
            # eigenvalues must still reach the plot
            self.emit("spectrum", np.array(self.pending_spectrum, dtype=np.float64))
            self.pending_spectrum = None
        if ev.stage == "done":
            return
        edge = ev.stage != self.last_stage or ev.done <= 0 or ev.done >= ev.total
        if edge or now - self.last.get(ev.stage, 0.0) >= PROGRESS_INTERVAL:
            self.last[ev.stage] = now
            self.last_stage = ev.stage
            self.emit("progress", (ev.stage, int(ev.done), int(ev.total), ev.message))


class _RankLabel:
    """Progress callback that adds "rank r, k of n" to the stages of one rank's pass."""

    def __init__(self, inner: Throttle, rank, k: int, n: int) -> None:
        self.inner, self.text = inner, f"rank {rank_label(rank)}, {k} of {n}"

    def __call__(self, ev: ProgressEvent) -> None:
        if ev.stage in ("projection", "preimage", "reassembly"):
            ev = replace(ev, message=self.text + (f"; {ev.message}" if ev.message else ""))
        self.inner(ev)


def _run_item(item: JobItem, base: DenoiseParams, progress: Throttle, cancel: Any):
    """Yield the outcomes of one image.  With 'global' and several ranks, one outcome per
    rank as soon as it is done (the largest first: its fit serves every smaller rank), so
    the window shows each rank when it finishes and a cancel keeps the finished ones."""
    ranks = tuple(item.ranks)
    if base.method != "global" or item.is_patchset or len(ranks) < 2:
        yield _run_ranks(item, base, ranks, progress, progress, cancel)
        return
    auto = _image_auto_rank(base)
    order = sorted(ranks, key=lambda r: auto if r is None else r, reverse=True)
    for k, r in enumerate(order, start=1):
        out = _run_ranks(item, base, (r,), _RankLabel(progress, r, k, len(order)), progress, cancel)
        out.partial = k < len(order) and not out.error
        yield out
        if out.error:
            return


def _image_auto_rank(params: DenoiseParams) -> int:
    """What 'auto' (None) is for an image under 'global' (the pipeline's result key for it)."""
    return result_keys(params.replace(ranks=(None,)), False)[0]


def _run_ranks(item: JobItem, base: DenoiseParams, ranks: tuple, progress, throttle: Throttle,
               cancel: Any) -> ItemOutcome:
    params = base.replace(ranks=tuple(ranks))
    out = ItemOutcome(key=item.key, name=item.name, params_key=params_key(params), params=params)
    t = time.perf_counter()
    model_key = (item.key, out.params_key)
    try:
        res = denoise_set([item.array], params, names=[item.name], patch_sets=[item.is_patchset],
                          progress=progress, cancel=cancel, model=cached_model(model_key))
        keep_model(model_key, res.model)
    except Cancelled:
        raise
    except FIT_ERRORS as exc:
        out.error = f"{item.name}: {exc}"
        return out
    out.seconds = time.perf_counter() - t
    eig = res.eigenvalues if res.eigenvalues is not None and res.eigenvalues.size else None
    resolved = dict(res.resolved)
    if resolved.get("models"):
        resolved.update(resolved["models"][0])  # gamma, auto rank, ... of this item's model
    return _fill_outcome(out, item, res.images[0], res.timings, resolved, eig,
                         _total_variance(res.model) if eig is not None else None, throttle)


class _FitSpectra:
    """Progress callback that also keeps the final eigenvalues of every fit, in fit order.

    ``denoise_set`` returns only its first model; a set whose images need
    several models (grey and colour, patch sets) fits the others too, and
    their spectra are the last eigensolver reports of each fit.
    """

    def __init__(self, inner: Throttle) -> None:
        self.inner = inner
        self.spectra: list[np.ndarray] = []
        self._in_solver = False

    def __call__(self, ev: ProgressEvent) -> None:
        if ev.eigenvalues is not None:
            w = np.clip(np.asarray(ev.eigenvalues, dtype=np.float64), 0.0, None)
            if self._in_solver:
                self.spectra[-1] = w
            else:
                self.spectra.append(w)
        self._in_solver = ev.stage == "eigensolver" and (ev.eigenvalues is not None or self._in_solver)
        self.inner(ev)


def _run_set(items: list, base: DenoiseParams, progress: Throttle, cancel: Any):
    """Denoise ``items`` with one ``denoise_set`` call; yields their outcomes.

    One model is fitted for all items of a kind (grey, colour, patch sets of
    one size), exactly as ``kpca-denoise denoise FOLDER`` does; under the grouped
    method the items are a stack's pages or separate images of one size, denoised as a
    sequence (``params.sequence``), as ``denoise_set`` denoises them for the command line.

    Every item is denoised at every rank missing for any of them: they share
    the model, and ranks up to its size reuse its eigendecomposition.
    """
    ranks = tuple(sorted({r for it in items for r in it.ranks}, key=rank_sort_key))
    params = base.replace(ranks=ranks)
    fit_set = tuple(it.key for it in items)
    pkey = params_key(params, fit_set)
    names = unique_names([it.name for it in items])
    outs = [ItemOutcome(key=it.key, name=it.name, params_key=pkey, params=params, fit_set=fit_set)
            for it in items]
    spectra = _FitSpectra(progress)
    model_key = (fit_set, pkey)
    t = time.perf_counter()
    try:
        res = denoise_set([it.array for it in items], params, names=names,
                          patch_sets=[it.is_patchset for it in items], progress=spectra,
                          cancel=cancel, model=cached_model(model_key))
        keep_model(model_key, res.model)
    except Cancelled:
        raise
    except FIT_ERRORS as exc:
        for out in outs:
            out.error = f"{out.name}: the set could not be denoised: {exc}"
            yield out
        return
    seconds = time.perf_counter() - t
    models = res.resolved.get("models", [])
    # the first model is the one returned; the spectra of the others come from their reports
    aligned = len(spectra.spectra) == len(models)
    for i, (item, out, img) in enumerate(zip(items, outs, res.images)):
        k = next((j for j, m in enumerate(models) if names[i] in m.get("items", ())), None)
        resolved = dict(res.resolved)
        eig = total = None
        if k is not None:
            resolved.update(models[k])  # gamma, n_train, ... of the model that denoised this item
            if k == 0 and res.eigenvalues is not None and res.eigenvalues.size:
                eig, total = res.eigenvalues, _total_variance(res.model)
            elif aligned and spectra.spectra[k].size:
                eig = spectra.spectra[k]
        elif not models and res.eigenvalues is not None and res.eigenvalues.size:
            eig = res.eigenvalues  # grouped: the mean spectrum of the sequence's groups
        out.seconds = seconds
        yield _fill_outcome(out, item, img, res.timings, resolved, eig, total, progress)


def _fill_outcome(out: ItemOutcome, item: JobItem, img, timings: dict, resolved: dict,
                  eigenvalues, total_variance, progress: Throttle) -> ItemOutcome:
    """Outputs, metrics and residuals of one image of a ``denoise_set`` result."""
    params = out.params
    out.timings = dict(timings)
    out.resolved = resolved
    outputs = dict(img.outputs)
    if None in params.ranks and None not in outputs and not item.is_patchset and params.method == "global":
        # the pipeline keys an image's 'auto' by the rank it stands for: show it as 'auto'
        auto = _image_auto_rank(params)
        if auto in outputs:
            outputs[None] = outputs[auto] if auto in params.ranks else outputs.pop(auto)
            resolved.setdefault("auto_rank", auto)
    if img.error:
        out.error = img.error
        return out
    out.noisy = img.noisy
    out.noise_sigma = img.noise_sigma
    out.noise_estimated = img.noise_estimated
    out.note = img.stats.get("note")
    if img.stats.get("noise_model"):
        # Poisson-Gaussian: sigma is the stabilised domain's 1; the gain and the
        # Gaussian part are what describe the noise
        resolved["noise_model"] = img.stats["noise_model"]
    for k in ("noise", "hint"):  # the measured noise (white or correlated), a word on it
        if img.stats.get(k):
            resolved[k] = img.stats[k]
    notes = rank_notes(out.name, [img.stats])  # ranks no group can hold: all is kept
    if notes:
        resolved["rank_notes"] = notes
    if img.stats.get("sequence"):  # a page of a sequence: the decision, the neighbours it used
        resolved["page_sequence"] = img.stats["sequence"]
    if eigenvalues is not None:
        out.eigenvalues = np.asarray(eigenvalues, dtype=np.float64)
        out.total_variance = total_variance
    # the clean reference: the one the user gave, or the input itself when noise was added
    clean = item.reference if item.reference is not None else (item.array if params.add_noise else None)
    dtype = item.array.dtype
    progress.emit("progress", ("metrics", 0, len(outputs), ""))
    if clean is not None:
        out.noisy_metrics = compute_metrics(img.noisy, clean, dtype, item.is_patchset)
    elif not item.is_patchset:
        out.noisy_metrics = ({"noise_model": img.stats["noise_model"]} if img.stats.get("noise_model")
                             else {"noise_sigma": img.noise_sigma})
    fitted = eigenvalues.size if eigenvalues is not None and not item.is_patchset else None
    for k, (r, arr) in enumerate(outputs.items()):
        out.outputs[r] = arr
        out.fit_ranks[r] = reproducing_ranks(params, r, fitted)
        out.metrics[r] = compute_metrics(arr, clean, dtype, item.is_patchset)
        out.residual_std[r] = residual_std(img.noisy, arr)  # in bands: no float64 image copies
        progress.emit("progress", ("metrics", k + 1, len(outputs), ""))
    return out


def reproducing_ranks(params: DenoiseParams, rank, fitted: int | None) -> tuple:
    """The ranks of a run that gives ``rank``'s output exactly: the rank itself, and the
    model's size when the model it came from was fitted for a larger rank (the global
    method fits once for a run's largest rank; a smaller rank's pixels depend on it)."""
    key = result_keys(params.replace(ranks=(rank,)), False)[0]
    if params.method != "global" or fitted is None or key is None or fitted <= key:
        return (rank,)
    return (rank, int(fitted))


def run_job(job: Job, emit: Emit, cancel: Any) -> dict:
    """Run every item of ``job``; messages go through ``emit(kind, payload)``.

    kinds: 'item_started' (index, count, name; index -1 for a set fitted
    together, count its size), 'progress' (stage, done, total, message),
    'spectrum' (eigenvalues), 'item' (ItemOutcome).
    Returns the summary ``{'status', 'done', 'failed', 'message', 'seconds'}``;
    ``status`` 'pages': a preview sent without its sequence's pages
    (:meth:`Job.without_pages`) whose decisions this process does not keep.
    """
    t0 = time.perf_counter()
    summary = {"status": "done", "done": 0, "failed": 0, "message": "", "seconds": 0.0}
    throttle = Throttle(emit)
    n = len(job.items)
    group_of = {i: tuple(g) for g in job.sets if len(g) > 1 for i in g}
    try:
        started: set = set()
        if job.purpose in ("preview", "prepare"):
            item = job.items[job.focus]
            sequence = [job.items[i] for i in job.sets[0]] if job.sets else ()
        if (job.purpose == "preview" and any(m.array is None for m in sequence)
                and not decisions_kept(sequence, job.params)):
            summary["status"] = "pages"  # sent without them (Job.without_pages): all, please
            job = replace(job, items=[])
        elif job.purpose == "preview":
            emit("item_started", (-1, 1, f"preview of {item.name}"))
            outcome = run_preview(item, job.params, job.box, throttle, cancel, sequence)
            summary["failed" if outcome.error else "done"] += 1
            emit("preview", outcome)
            job = replace(job, items=[])
        elif job.purpose == "prepare":  # a failure is the preview's to report
            try:
                prepare_preview(item, job.params, cancel, sequence)
            except FIT_ERRORS:
                pass
            job = replace(job, items=[])
        for i, item in enumerate(job.items):
            if cancel.is_set():
                raise Cancelled("cancelled by the user")
            group = group_of.get(i)
            if group is None:
                emit("item_started", (i, n, item.name))
                outcomes = _run_item(item, job.params, throttle, cancel)
            elif group in started:
                continue
            else:
                started.add(group)
                emit("item_started", (-1, len(group), f"{len(group)} images denoised as one sequence"
                                      if job.params.method == "grouped" else
                                      f"set of {len(group)} images fitted together"))
                outcomes = _run_set([job.items[j] for j in group], job.params, throttle, cancel)
            for outcome in outcomes:
                if not outcome.partial:
                    summary["failed" if outcome.error else "done"] += 1
                emit("item", outcome)
    except Cancelled:
        summary["status"] = "cancelled"
        summary["message"] = "cancelled by the user"
    except Exception as exc:  # noqa: BLE001 - report every failure to the window
        summary["status"] = "failed"
        summary["message"] = f"{type(exc).__name__}: {exc}"
        traceback.print_exc()
    summary["seconds"] = time.perf_counter() - t0
    return summary


def _warm_up() -> None:
    """Run both methods once on a tiny image while the user picks files: numba loads its
    compiled code (or compiles it, about 20 s after an install) before the first real
    run instead of during it.  ~2 s with a warm numba cache."""
    rng = np.random.default_rng(0)
    tiny = (rng.random((24, 24)) * 255).astype(np.uint8)
    for p in (DenoiseParams(method="global", ranks=(2,), n_train=60, preimage_iterations=3),
              DenoiseParams(method="grouped", ranks=(None,))):
        try:
            denoise_set([tiny], p)
        except Exception:  # noqa: BLE001 - a warm-up failure must not stop the server
            traceback.print_exc()


def _exit_with_parent() -> None:
    """End this process when the window's process ends, however it ends: a SIGKILL of
    the window left the compute process (and multiprocessing's resource tracker, which
    waits for it) running for good.  The parent's sentinel, a pipe only the parent
    holds open, reaches end-of-file when the parent is gone: no polling."""
    parent = multiprocessing.parent_process()
    if parent is None:  # not started by multiprocessing (a test calling serve directly)
        return

    def watch() -> None:
        parent.join()
        os._exit(0)  # the window is gone: nobody reads a result

    threading.Thread(target=watch, name="kpca-denoise parent watch", daemon=True).start()


def serve(jobs, events, cancel) -> None:
    """Main loop of the compute process: run jobs from ``jobs`` until ``None`` arrives;
    ends with the window's process (:func:`_exit_with_parent`)."""
    _exit_with_parent()
    # background work: below the GUI's priority, so drawing never waits for a core
    # (on 2 cores numba's and BLAS's threads otherwise take both)
    try:
        os.nice(10)
    except (AttributeError, OSError):
        pass
    _warm_up()
    events.put(("ready", None, None))
    while True:
        try:
            job = jobs.get()
        except (EOFError, OSError, KeyboardInterrupt):
            return
        if job is None:
            return

        def emit(kind: str, payload: Any, job_id: int = job.job_id) -> None:
            events.put((kind, payload, job_id))  # tagged: a reader skips an older job's

        summary = run_job(job, emit, cancel)
        events.put(("finished", summary, job.job_id))
        del summary, emit
        release_freed_memory()


def release_freed_memory() -> bool:
    """Give the memory a finished job freed back to the system; True where it could.

    The results have gone to the window; the allocator keeps the freed heap for reuse,
    so the compute process stayed at its peak after a run (a 2000x1500 colour photo at
    five ranks: 0.53 GB with the results dropped, 0.31 GB after ``malloc_trim``; idle
    0.24 GB).  glibc's ``malloc_trim`` returns it; elsewhere nothing is done."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        return False
    return True


def drain(q, timeout: float):
    """One message from a multiprocessing queue, or None after ``timeout`` seconds."""
    try:
        return q.get(timeout=timeout)
    except queue_mod.Empty:
        return None
