"""The worker that runs denoising off the GUI thread, and the result cache.

:class:`RunController` starts a ``QThread`` whose :class:`DenoiseWorker`
(a QObject) hands the job to the compute process
(:mod:`kpca_denoise.gui.compute`, spawned once and reused) and relays its
messages as Qt signals: progress per stage, live eigenvalues, finished
images.  The GUI thread only draws.  Cancel sets the pipeline's cancel event;
if the process has not stopped within :data:`CANCEL_GRACE` seconds (a
pre-image block can take longer) the process is ended and a fresh one is
started for the next run; a preview's background decisions get
:data:`PREPARE_GRACE` CPU seconds of the process (:class:`CancelClock`).  ``RunController.finished`` is emitted only after
the thread has stopped, so "finished" always means "no worker left running".
A preview of a sequence's page is sent with that page alone
(:meth:`~kpca_denoise.gui.jobs.Job.without_pages`): the process keeps the
sequence's pages with its decisions, and when it does not, it says so and the
whole job follows.
The windows of one application share the compute process: one job runs in it at a
time, and a second window's job waits for the first's to end.

Results are cached per (image, parameters without ranks, rank): asking for
ranks that were already computed costs nothing, and a run computes only the
missing ones (:class:`ResultCache`).  A result of a set fitted together (one
model for several images) is cached under a key that names the whole set.
"""

from __future__ import annotations

import atexit
import multiprocessing as mp
import os
import sys
import threading
import time
import types
import weakref
from dataclasses import dataclass

from PySide6.QtCore import QObject, Qt, QThread, Signal, Slot

from ..core.progress import CancelToken
from ..params import DenoiseParams
from .compute import drain, serve
from .jobs import Job

__all__ = [
    "RunSummary",
    "DenoiseWorker",
    "RunController",
    "active_threads",
    "compute_server",
    "discard_compute_server",
]

#: seconds a cancelled run may take to stop by itself before its process is ended
CANCEL_GRACE = 0.8
#: CPU seconds (the compute process's, all its threads) a preview's background decisions
#: may spend after a cancel before the process is ended.  They check the token between
#: their steps and the calibration's chunks, but the noise measurement is one step (about
#: 5-12 CPU s on a 768 x 768 image), which costs less to wait for than a new compute
#: process (its start and warm-up) and leaves nothing half-done.  CPU time, not the
#: clock's: the process runs niced, and on a loaded machine the same step takes many times
#: longer on the clock (where the process's CPU time cannot be read, the clock's seconds)
PREPARE_GRACE = 20.0
#: wall seconds after a cancel in which a process that uses no CPU at all is taken to be
#: stuck (and ended) whatever its grace
STALL_GRACE = 15.0

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


@dataclass
class RunSummary:
    job: Job
    status: str  # 'done', 'cancelled', 'failed'
    done: int = 0
    failed: int = 0
    seconds: float = 0.0
    message: str = ""


# -- the compute process -------------------------------------------------------------


def process_cpu_seconds(pid: int) -> float | None:
    """User and system CPU seconds process ``pid`` has used (all its threads), None where
    they cannot be read (no ``/proc``, the process gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


class CancelClock:
    """How long a cancelled job has taken to stop: the compute process's CPU seconds
    since the cancel (the clock's where they cannot be read), and whether it is stuck
    (no CPU used for :data:`STALL_GRACE` seconds)."""

    def __init__(self, pid: int | None, cpu: bool) -> None:
        self.pid = pid
        self.wall0 = self.moved = time.monotonic()
        self.cpu0 = process_cpu_seconds(pid) if (cpu and pid is not None) else None
        self.last = self.cpu0

    def spent(self) -> float:
        """Seconds the job has spent since the cancel (CPU seconds when measured)."""
        now = time.monotonic()
        if self.cpu0 is None:
            return now - self.wall0
        cpu = process_cpu_seconds(self.pid)
        if cpu is None:  # the process is gone: its end is read elsewhere
            return 0.0
        if cpu > self.last:
            self.last, self.moved = cpu, now
        return cpu - self.cpu0

    def stuck(self) -> bool:
        return self.cpu0 is not None and time.monotonic() - self.moved > STALL_GRACE


class ComputeServer:
    """The spawned process that runs the pipeline, with its queues and cancel event."""

    def __init__(self) -> None:
        # spawn, not fork: the GUI process has Qt and numba threads that a fork would copy half-way
        ctx = mp.get_context("spawn")
        self.jobs = ctx.Queue()
        self.events = ctx.Queue()
        self.cancel = ctx.Event()
        self.proc = ctx.Process(target=serve, args=(self.jobs, self.events, self.cancel),
                                name="kpca-denoise compute", daemon=True)
        # spawn re-runs the parent's __main__ in the child unless it is a package's
        # __main__; a script without an ``if __name__ == "__main__"`` guard (a test
        # driver, an interactive session) would open a second window there.  The
        # child needs nothing from __main__ (``serve`` lives in an importable
        # module), so show multiprocessing an empty one while it starts.
        real_main = sys.modules.get("__main__")
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            self.proc.start()
        finally:
            if real_main is not None:
                sys.modules["__main__"] = real_main

    def alive(self) -> bool:
        return self.proc.is_alive()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.join(5)
        for q in (self.jobs, self.events):
            q.cancel_join_thread()  # the queues may hold half a message: do not wait on them
            q.close()

    def stop(self, timeout: float = 5.0) -> None:
        if self.alive():
            try:
                self.cancel.set()
                self.jobs.put(None)
            except (OSError, ValueError):
                pass
            self.proc.join(timeout)
        if self.alive():
            self.kill()


_SERVER: ComputeServer | None = None
#: guards ``_SERVER`` (windows' threads start and end it)
_SERVER_GUARD = threading.Lock()
#: held by the worker whose job the compute process runs: the windows of one
#: application share the process and its event queue, and a reader drops messages of
#: another job, so a second window's job waits for the first's to end
_JOB_LOCK = threading.Lock()


def compute_server() -> ComputeServer:
    """The running compute process, started (or restarted) if needed."""
    global _SERVER
    with _SERVER_GUARD:
        if _SERVER is None or not _SERVER.alive():
            _SERVER = ComputeServer()
        return _SERVER


def discard_compute_server(kill: bool = True) -> None:
    global _SERVER
    with _SERVER_GUARD:
        srv, _SERVER = _SERVER, None
    if srv is not None:
        srv.kill() if kill else srv.stop()


atexit.register(lambda: discard_compute_server(kill=False))


class DenoiseWorker(QObject):
    """Lives in a QThread: sends a :class:`Job` to the compute process and relays its messages."""

    itemStarted = Signal(int, int, str)  # index, count, name
    progress = Signal(str, int, int, str)  # stage, done, total, message
    spectrum = Signal(object)  # ndarray of current eigenvalue estimates
    itemDone = Signal(object)  # ItemOutcome
    previewDone = Signal(object)  # PreviewOutcome
    finished = Signal(object)  # RunSummary

    def __init__(self, job: Job, token: CancelToken) -> None:
        super().__init__()
        self.job = job
        self.token = token
        self.summary: RunSummary | None = None

    @Slot()
    def run(self) -> None:
        job = self.job
        t0 = time.perf_counter()
        summary = RunSummary(job=job, status="done")
        if self._take_turn(summary):
            try:
                self._relay(job, summary)
            except Exception as exc:  # noqa: BLE001 - report, never die silently
                summary.status = "failed"
                summary.message = f"{type(exc).__name__}: {exc}"
                discard_compute_server()  # before another window's job may start on it
            finally:
                _JOB_LOCK.release()
        summary.seconds = time.perf_counter() - t0
        self.summary = summary
        self.finished.emit(summary)

    def _take_turn(self, summary: RunSummary) -> bool:
        """Wait until no other window's job is in the compute process; False if this
        job was cancelled meanwhile."""
        said = False
        while not _JOB_LOCK.acquire(timeout=0.05):
            if self.token.is_set():
                summary.status = "cancelled"
                summary.message = "cancelled by the user"
                return False
            if not said:
                said = True
                self.progress.emit("waiting", 0, 0, "waiting for another window's run to end")
        return True

    def _relay(self, job: Job, summary: RunSummary) -> None:
        srv = compute_server()
        srv.cancel.clear()
        srv.jobs.put(job.without_pages())  # a preview's other pages only if asked for
        cancel_sent: CancelClock | None = None
        grace = PREPARE_GRACE if job.purpose == "prepare" else CANCEL_GRACE
        while True:
            if self.token.is_set() and cancel_sent is None:
                srv.cancel.set()
                cancel_sent = CancelClock(srv.proc.pid, cpu=job.purpose == "prepare")
            if cancel_sent is not None and (cancel_sent.spent() > grace or cancel_sent.stuck()):
                # the pipeline is inside a long chunk: end the process, keep nothing half-done
                discard_compute_server(kill=True)
                summary.status = "cancelled"
                summary.message = "cancelled by the user (compute process ended)"
                return
            msg = drain(srv.events, 0.02)
            if msg is None:
                if not srv.alive():
                    code = srv.proc.exitcode
                    discard_compute_server()
                    summary.status = "failed"
                    summary.message = f"the compute process stopped unexpectedly (exit code {code})"
                    return
                continue
            kind, payload, job_id = msg
            if job_id != job.job_id:
                continue  # left by an earlier job ended without its last words (or 'ready')
            if kind == "progress":
                self.progress.emit(*payload)
            elif kind == "spectrum":
                self.spectrum.emit(payload)
            elif kind == "item_started":
                self.itemStarted.emit(*payload)
            elif kind == "item":
                if cancel_sent is None:
                    self.itemDone.emit(payload)
            elif kind == "preview":
                if cancel_sent is None:
                    self.previewDone.emit(payload)
            elif kind == "finished":
                if payload["status"] == "pages":  # it keeps no decisions of the sequence:
                    if cancel_sent is None:
                        srv.jobs.put(job)  # its pages, then
                        continue
                    payload = dict(payload, status="cancelled", message="cancelled by the user")
                summary.status = payload["status"]
                summary.done = payload["done"]
                summary.failed = payload["failed"]
                summary.message = payload["message"]
                return
            # 'ready' needs nothing


class RunController(QObject):
    """Owns at most one worker thread; relays its signals in the GUI thread."""

    started = Signal(object)  # Job
    itemStarted = Signal(int, int, str)
    progress = Signal(str, int, int, str)
    spectrum = Signal(object)
    itemDone = Signal(object)
    previewDone = Signal(object)
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

    def busy(self) -> bool:
        """A job the user asked for is going on (not the background preview decisions)."""
        return self._thread is not None and self.purpose() != "prepare"

    def job(self) -> Job | None:
        """The job going on, None when idle."""
        return self._worker.job if self._worker is not None else None

    def purpose(self) -> str | None:
        """What the job going on is for ('run', 'export', 'preview'), None when idle."""
        return self._worker.job.purpose if self._worker is not None else None

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
        worker.previewDone.connect(self.previewDone)
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
