"""The denoising worker thread and the result cache.

The GUI thread never computes: :class:`RunController` moves a
:class:`DenoiseWorker` (a QObject) to a fresh ``QThread``, the worker calls
:func:`kpca_denoise.pipeline.denoise_set` once per image and sends progress,
live eigenvalues and finished results back by queued signals.  Cancel sets a
:class:`~kpca_denoise.core.progress.CancelToken` that the pipeline checks
between chunks.  ``RunController.finished`` is emitted only after the thread
has stopped, so "finished" always means "no worker left running".

Results are cached per (image, parameters without ranks, rank): asking for
ranks that were already computed costs nothing, and a run computes only the
missing ones (:class:`ResultCache`).
"""

from __future__ import annotations

import json
import time
import traceback
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PySide6.QtCore import QObject, Qt, QThread, Signal, Slot

from ..core.progress import CancelToken, Cancelled, ProgressEvent
from ..params import DenoiseParams
from ..pipeline import denoise_set, evaluate, remaining_noise
from .imageset import patch_mosaic

__all__ = [
    "JobItem",
    "Job",
    "ItemOutcome",
    "RunSummary",
    "DenoiseWorker",
    "RunController",
    "ResultCache",
    "FitRecord",
    "RankRecord",
    "params_key",
    "rank_sort_key",
    "compute_metrics",
    "active_threads",
]

#: minimum seconds between two progress signals of the same stage; a numba
#: loop can report thousands of times a second and the GUI only needs ~30 Hz
PROGRESS_INTERVAL = 0.03
#: minimum seconds between two live-spectrum updates
SPECTRUM_INTERVAL = 0.06

_LIVE_THREADS: "weakref.WeakSet[QThread]" = weakref.WeakSet()


def active_threads() -> list[QThread]:
    """Worker threads started by this module that are still running (for tests)."""
    out = []
    for t in list(_LIVE_THREADS):
        try:
            if t.isRunning():
                out.append(t)
        except RuntimeError:  # the C++ object is gone: not running
            pass
    return out


def params_key(params: DenoiseParams) -> str:
    """Everything that decides a result except the ranks, as a stable string."""
    d = params.to_dict()
    d.pop("ranks", None)
    return json.dumps(d, sort_keys=True, default=str)


def rank_sort_key(rank: int | None) -> float:
    """Order ranks with ``None`` (no cap) last: it keeps the most components."""
    return float("inf") if rank is None else float(rank)


def rank_label(rank: int | None) -> str:
    return "auto" if rank is None else str(rank)


def _tiled(a: np.ndarray) -> np.ndarray:
    # PSNR/SSIM of a patch set: all samples on one gap-free canvas
    return patch_mosaic(a, max_samples=a.shape[0], gap=0, fill=0.0)


def compute_metrics(estimate: np.ndarray, clean: np.ndarray | None, dtype: np.dtype,
                    is_patchset: bool) -> dict:
    """PSNR/SSIM against ``clean`` when there is one, else the remaining noise.

    Returns ``{'psnr', 'ssim'}``, ``{'remaining_noise'}``, or ``{}`` (patch
    set without a reference, where a noise estimate of a mosaic means nothing),
    or ``{'error': text}`` when the reference does not match.
    """
    if clean is not None:
        if np.shape(clean) != np.shape(estimate):
            return {"error": f"reference shape {np.shape(clean)} ≠ image shape {np.shape(estimate)}"}
        if is_patchset:
            return evaluate(_tiled(clean), _tiled(estimate), dtype)
        return evaluate(clean, estimate, dtype)
    if is_patchset:
        return {}
    return {"remaining_noise": remaining_noise(estimate)}


# -- jobs and outcomes -------------------------------------------------------------


@dataclass
class JobItem:
    """One image of a job and the ranks still missing for it."""

    key: str
    name: str
    array: np.ndarray
    is_patchset: bool
    ranks: tuple
    reference: np.ndarray | None = None


@dataclass
class Job:
    items: list
    params: DenoiseParams
    purpose: str = "run"  # 'run' or 'export' (what to do when it finishes)
    job_id: int = 0


@dataclass
class ItemOutcome:
    """What the worker computed for one image (sent to the GUI thread)."""

    key: str
    name: str
    params_key: str
    params: DenoiseParams
    outputs: dict = field(default_factory=dict)  # rank -> array
    metrics: dict = field(default_factory=dict)  # rank -> dict
    residual_std: dict = field(default_factory=dict)  # rank -> float
    noisy: np.ndarray | None = None
    noisy_metrics: dict = field(default_factory=dict)
    noise_sigma: float = float("nan")
    noise_estimated: bool = False
    eigenvalues: np.ndarray | None = None
    total_variance: float | None = None
    resolved: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    seconds: float = 0.0
    error: str | None = None


@dataclass
class RunSummary:
    job: Job
    status: str  # 'done', 'cancelled', 'failed'
    done: int = 0
    failed: int = 0
    seconds: float = 0.0
    message: str = ""


@dataclass
class RankRecord:
    output: np.ndarray
    metrics: dict
    residual_std: float


@dataclass
class FitRecord:
    """Everything cached for one (image, parameters) pair, any number of ranks."""

    noisy: np.ndarray
    noise_sigma: float
    noise_estimated: bool
    noisy_metrics: dict
    eigenvalues: np.ndarray | None
    total_variance: float | None
    resolved: dict
    timings: dict
    params: DenoiseParams
    ranks: dict = field(default_factory=dict)  # rank -> RankRecord


class ResultCache:
    """Results per (image key, parameters key), each holding results per rank."""

    def __init__(self) -> None:
        self._fits: dict[tuple[str, str], FitRecord] = {}

    def get(self, key: str, pkey: str) -> FitRecord | None:
        return self._fits.get((key, pkey))

    def missing(self, key: str, pkey: str, ranks) -> tuple:
        rec = self.get(key, pkey)
        have = rec.ranks if rec is not None else {}
        return tuple(r for r in ranks if r not in have)

    def add(self, out: ItemOutcome) -> FitRecord:
        rec = self.get(out.key, out.params_key)
        if rec is None:
            rec = FitRecord(noisy=out.noisy, noise_sigma=out.noise_sigma,
                            noise_estimated=out.noise_estimated, noisy_metrics=out.noisy_metrics,
                            eigenvalues=out.eigenvalues, total_variance=out.total_variance,
                            resolved=out.resolved, timings=out.timings, params=out.params)
            self._fits[(out.key, out.params_key)] = rec
        elif out.eigenvalues is not None and (
                rec.eigenvalues is None or out.eigenvalues.size > rec.eigenvalues.size):
            # a later run for a larger rank knows more of the spectrum
            rec.eigenvalues = out.eigenvalues
            rec.total_variance = out.total_variance
            rec.resolved = out.resolved
        for r, arr in out.outputs.items():
            rec.ranks[r] = RankRecord(arr, out.metrics.get(r, {}), out.residual_std.get(r, float("nan")))
        return rec

    def records_for(self, key: str) -> list[FitRecord]:
        return [rec for (k, _), rec in self._fits.items() if k == key]

    def drop_image(self, key: str) -> None:
        for k in [k for k in self._fits if k[0] == key]:
            del self._fits[k]

    def __len__(self) -> int:
        return len(self._fits)


# -- the worker --------------------------------------------------------------------


class DenoiseWorker(QObject):
    """Runs a :class:`Job` in its thread; talks to the GUI only by signals."""

    itemStarted = Signal(int, int, str)  # index, count, name
    progress = Signal(str, int, int, str)  # stage, done, total, message
    spectrum = Signal(object)  # ndarray of current eigenvalue estimates
    itemDone = Signal(object)  # ItemOutcome
    finished = Signal(object)  # RunSummary

    def __init__(self, job: Job, token: CancelToken) -> None:
        super().__init__()
        self.job = job
        self.token = token
        self._last: dict[str, float] = {}
        self._last_stage: str | None = None
        self._last_spectrum = 0.0
        self.summary: RunSummary | None = None

    def _on_progress(self, ev: ProgressEvent) -> None:
        # runs in the worker thread: throttle here so the GUI queue stays short
        if ev.stage == "done":
            return
        now = time.monotonic()
        if ev.eigenvalues is not None and (now - self._last_spectrum >= SPECTRUM_INTERVAL
                                           or ev.done >= ev.total):
            self._last_spectrum = now
            self.spectrum.emit(np.array(ev.eigenvalues, dtype=np.float64))
        edge = ev.stage != self._last_stage or ev.done <= 0 or ev.done >= ev.total
        if edge or now - self._last.get(ev.stage, 0.0) >= PROGRESS_INTERVAL:
            self._last[ev.stage] = now
            self._last_stage = ev.stage
            self.progress.emit(ev.stage, ev.done, ev.total, ev.message)

    @Slot()
    def run(self) -> None:
        job = self.job
        t0 = time.perf_counter()
        summary = RunSummary(job=job, status="done")
        try:
            for i, item in enumerate(job.items):
                if self.token.is_set():
                    raise Cancelled("cancelled by the user")
                self.itemStarted.emit(i, len(job.items), item.name)
                outcome = self._run_item(item, job.params)
                if outcome.error:
                    summary.failed += 1
                else:
                    summary.done += 1
                self.itemDone.emit(outcome)
        except Cancelled:
            summary.status = "cancelled"
            summary.message = "cancelled by the user"
        except Exception as exc:  # noqa: BLE001 - a worker must report, never die silently
            summary.status = "failed"
            summary.message = f"{type(exc).__name__}: {exc}"
            traceback.print_exc()
        summary.seconds = time.perf_counter() - t0
        self.summary = summary
        self.finished.emit(summary)

    def _run_item(self, item: JobItem, base: DenoiseParams) -> ItemOutcome:
        params = base.replace(ranks=tuple(item.ranks))
        out = ItemOutcome(key=item.key, name=item.name, params_key=params_key(params), params=params)
        t = time.perf_counter()
        try:
            res = denoise_set([item.array], params, names=[item.name],
                              patch_sets=[item.is_patchset], progress=self._on_progress,
                              cancel=self.token)
        except Cancelled:
            raise
        except (ValueError, MemoryError, FloatingPointError, np.linalg.LinAlgError) as exc:
            out.error = f"{item.name}: {exc}"
            return out
        img = res.images[0]
        out.seconds = time.perf_counter() - t
        out.timings = dict(res.timings)
        out.resolved = dict(res.resolved)
        if img.error:
            out.error = img.error
            return out
        out.noisy = img.noisy
        out.noise_sigma = img.noise_sigma
        out.noise_estimated = img.noise_estimated
        if res.eigenvalues is not None and res.eigenvalues.size:
            out.eigenvalues = np.asarray(res.eigenvalues, dtype=np.float64)
            out.total_variance = _total_variance(res.model)
        # a clean reference: the one the user gave, or the input itself when noise was added
        clean = item.reference if item.reference is not None else (
            item.array if params.add_noise else None)
        dtype = item.array.dtype
        self.progress.emit("metrics", 0, len(img.outputs), "")
        if clean is not None:
            out.noisy_metrics = compute_metrics(img.noisy, clean, dtype, item.is_patchset)
        elif not item.is_patchset:
            out.noisy_metrics = {"noise_sigma": img.noise_sigma}
        noisy_f = np.asarray(img.noisy, dtype=np.float64)
        for k, (r, arr) in enumerate(img.outputs.items()):
            out.outputs[r] = arr
            out.metrics[r] = compute_metrics(arr, clean, dtype, item.is_patchset)
            out.residual_std[r] = float(np.std(noisy_f - arr))
            self.progress.emit("metrics", k + 1, len(img.outputs), "")
        return out


def _total_variance(model: Any) -> float | None:
    """Trace of the centred Gram matrix, the denominator of explained variance.

    trace(LKL) = trace(K) - 1ᵀK1/n; for the RBF kernel trace(K) = n.  Only
    read from the fitted model's stored means, nothing is recomputed.
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


class RunController(QObject):
    """Owns at most one worker thread; relays its signals in the GUI thread."""

    started = Signal(object)  # Job
    itemStarted = Signal(int, int, str)
    progress = Signal(str, int, int, str)
    spectrum = Signal(object)
    itemDone = Signal(object)
    finished = Signal(object)  # RunSummary, emitted after the thread has stopped

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._thread: QThread | None = None
        self._worker: DenoiseWorker | None = None
        self._token: CancelToken | None = None
        self._job_ids = 0
        self.cancel_requested_at: float | None = None

    def is_running(self) -> bool:
        return self._thread is not None

    def start(self, job: Job) -> bool:
        """Start ``job``; returns False if a run is already going."""
        if self._thread is not None:
            return False
        self._job_ids += 1
        job.job_id = self._job_ids
        self._token = CancelToken()
        self.cancel_requested_at = None
        thread = QThread()
        thread.setObjectName(f"kpca-denoise worker {job.job_id}")
        worker = DenoiseWorker(job, self._token)
        worker.moveToThread(thread)
        # queued connections (worker lives in another thread): slots run here
        worker.itemStarted.connect(self.itemStarted)
        worker.progress.connect(self.progress)
        worker.spectrum.connect(self.spectrum)
        worker.itemDone.connect(self.itemDone)
        # quit from the worker thread itself (direct): the GUI thread may be
        # blocked in wait() while closing, and a queued quit would never arrive
        worker.finished.connect(thread.quit, Qt.ConnectionType.DirectConnection)
        thread.started.connect(worker.run)
        thread.finished.connect(self._on_thread_finished)
        self._thread, self._worker = thread, worker
        _LIVE_THREADS.add(thread)
        self.started.emit(job)
        thread.start()
        return True

    def cancel(self) -> None:
        if self._token is not None and not self._token.is_set():
            self.cancel_requested_at = time.monotonic()
            self._token.cancel()

    def wait(self, ms: int = 10_000) -> bool:
        """Block until the thread stops (used when closing the window)."""
        if self._thread is None:
            return True
        ok = self._thread.wait(ms)
        return bool(ok)

    @Slot()
    def _on_thread_finished(self) -> None:
        thread, worker = self._thread, self._worker
        summary = (worker.summary if worker is not None else None) or RunSummary(job=worker.job if worker else Job([], DenoiseParams()),
                                              status="failed", message="the worker stopped unexpectedly")
        self._thread = self._worker = None
        self._token = None
        if worker is not None:
            worker.deleteLater()
        if thread is not None:
            thread.deleteLater()
        self.finished.emit(summary)
