"""Runs the pipeline's per-image work in this process or on a Dask cluster.

The command line calls :class:`Executor`; the executor calls the pipeline
(:func:`kpca_denoise.pipeline.denoise_set`), which stays the only recipe.
Images are the tasks, and so are the tiles of a large image: an image that
needs several tiles (:func:`kpca_denoise.tiling.plan`) runs its pipeline here
(noise estimate, assembly, metrics) and sends each tile to the cluster as a
task of its own, so one big photo spreads over every worker.  A set that
needs one global kernel PCA (``method 'global'``, patch sets) has it fitted
once here, on the whole set, and the fitted models are shipped to the workers
once (``Client.scatter``), not with every task.  Results are yielded as they complete, so the caller writes each
image as it arrives; writing files stays with the caller (``io``), never on
a worker, so a task that Dask re-runs after a worker died never leaves a
second file.

* ``Executor()``: in-process, as before (no cluster, no Dask import).
* ``Executor(workers=N)``: an embedded ``dask.distributed`` LocalCluster of N
  worker processes on 127.0.0.1.
* ``Executor(scheduler="tcp://host:8786")``: an existing scheduler
  (``dask scheduler``, dask-jobqueue, Kubernetes...).

Dask is an optional dependency: ``pip install 'kpca-denoise[distributed]'``.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import signal
import time
import uuid
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from .core.progress import ProgressCallback, ProgressEvent, check_cancel, report
from .params import DenoiseParams, too_many_workers
from .pipeline import ImageResult, SetResult, denoise_set
from .signals import STOP_SIGNALS
from .tiling import denoise_tile, plan
from .stack_tiling import denoise_stack_tile

__all__ = ["Executor", "ExecutorError"]

#: seconds to wait for a scheduler to answer before giving up
CONNECT_TIMEOUT = 10


class ExecutorError(RuntimeError):
    """A cluster that cannot be used; the message is one line naming the fix."""


def _denoise_one(image, index: int, name: str, patch_set: bool, params: DenoiseParams,
                 models: dict | None) -> SetResult:
    """The task: one item of the set through the pipeline (runs on a worker)."""
    return denoise_set([image], params, names=[name], patch_sets=[patch_set],
                       first_index=index, fitted_models=models or None)


def _denoise_tile(region, tile, sigma, params, model, ranks, vst):
    """The task for one tile of a large image (runs on a worker)."""
    return denoise_tile(region, tile, sigma, params, model=model, ranks=ranks, vst=vst)


def _denoise_stack_tile(block, tile, sigma, params, linked, shifts, vst, reach):
    """The task for one spatial tile of a stack, every page (runs on a worker)."""
    return denoise_stack_tile(block, tile, sigma, params, linked=linked, shifts=shifts,
                              vst=vst, reach=reach)


def _is_tiled(images, i: int, patch_set: bool, params: DenoiseParams) -> bool:
    """Whether item i is denoised in several tiles (then the tiles are the tasks)."""
    shape = images.shape_of(i) if hasattr(images, "shape_of") else np.shape(images[i])
    if patch_set or len(shape) not in (2, 3) or min(shape[:2]) < 1:
        return False  # the pipeline reports what is wrong with it
    return len(plan(shape, params)) > 1


class _DaskTiles:
    """A ``tile_map`` (see :func:`kpca_denoise.tiling.denoise_tiled`) that runs
    each tile as a Dask task and yields the tiles as they complete."""

    def __init__(self, client, run_id: str):
        self.client = client
        self.run_id = run_id
        self._models: dict = {}  # id(model) -> (model, its scattered copy)
        self._n = 0

    def _shared(self, model):
        if model is None:
            return None
        if id(model) not in self._models:
            # without the caller's progress callback and cancel token (they stay here)
            bare = copy.copy(model)
            bare.set_params(progress=None, cancel=None)
            self._models[id(model)] = (model, self.client.scatter(bare, broadcast=True,
                                                                  hash=False))
        return self._models[id(model)][1]

    def __call__(self, jobs, *, sigma, params, model, ranks, vst):
        shared = self._shared(model)
        return self._run(((k, np.ascontiguousarray(region), tile) for k, region, tile in jobs),
                         _denoise_tile, sigma, params, shared, ranks, vst)

    def stacks(self, jobs, *, sigma, params, linked, shifts, vst, reach):
        """Run a stack's tiles on the cluster, each tile with all its pages one task.

        The ``tile_map`` of a stack's tiles (:func:`kpca_denoise.tiling.denoise_stack_tiled`):
        each tile, every page of its region, one task."""
        pages = ((k, np.stack([np.asarray(block[i]) for i in range(len(block))]), tile)
                 for k, block, tile in jobs)
        return self._run(pages, _denoise_stack_tile, sigma, params, linked, shifts, vst, reach)

    def _run(self, jobs, task, *args):
        from dask.distributed import as_completed

        client = self.client
        futures: dict = {}
        try:
            for k, region, tile in jobs:
                self._n += 1
                data = client.scatter(region, hash=False)
                fut = client.submit(task, data, tile, *args,
                                    key=f"kpca-denoise-{self.run_id}-tile-{self._n}", pure=False)
                futures[fut] = k
            for fut in as_completed(list(futures)):
                yield futures[fut], fut.result()
                fut.release()
        finally:
            # finished, or stopped early (Ctrl-C, cancel, an error): nothing left running
            client.cancel(list(futures))


class _ItemProgress:
    """Forwards a task's stage events; the set-level 'image' count is the executor's."""

    def __init__(self, inner: ProgressCallback | None):
        self.inner = inner

    def __call__(self, ev: ProgressEvent) -> None:
        if self.inner is not None and ev.stage not in ("image", "done"):
            self.inner(ev)


@contextlib.contextmanager
def _workers_ignore_sigint():
    """Start child processes with SIGINT, SIGHUP and the other stop signals but SIGTERM
    ignored (inherited through exec).

    Ctrl-C on a terminal, or the terminal closing, signals the whole process group: the
    local workers printed a traceback each.  This process handles it instead, cancels
    the futures and closes the cluster (with SIGTERM, which the workers keep).
    """
    signums = [signal.SIGINT] + [s for s in STOP_SIGNALS if s != signal.SIGTERM]
    try:
        previous = {s: signal.signal(s, signal.SIG_IGN) for s in signums}
    except ValueError:  # not the main thread: nothing to change
        yield
        return
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, signal.SIG_DFL if old is None else old)


class Executor:
    """Where the per-image work runs; use as a context manager.

    Parameters
    ----------
    workers : start a LocalCluster with this many worker processes.
    scheduler : address of an existing Dask scheduler.  With neither, the
        work runs in this process.
    timeout : seconds to wait for the scheduler to answer.

    Raises
    ------
    ExecutorError : Dask missing, the scheduler does not answer, or the
        workers cannot import kpca_denoise (one line, before any compute).
    """

    def __init__(self, workers: int | None = None, scheduler: str | None = None, *,
                 timeout: float | None = None):
        if workers is not None and scheduler is not None:
            raise ExecutorError("give --workers or --scheduler, not both")
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                    or workers < 1):
            raise ExecutorError(f"--workers must be an integer >= 1, got {workers!r}")
        if workers is not None and (why := too_many_workers(workers)) is not None:
            raise ExecutorError(f"--workers {why}")
        self.workers = workers
        self.scheduler = scheduler
        self.timeout = CONNECT_TIMEOUT if timeout is None else timeout
        self.client = None
        self._cluster = None
        self.summary: SetResult | None = None

    @property
    def distributed(self) -> bool:
        """Whether the work runs on a Dask cluster (workers or a scheduler given)."""
        return self.workers is not None or self.scheduler is not None

    # -- lifetime ---------------------------------------------------------------------

    def __enter__(self) -> "Executor":
        if self.distributed and self.client is None:  # entered again: the same cluster
            self._connect()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Close the client and the local cluster started, if any."""
        if self.client is not None:
            self.client.close()
            self.client = None
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None

    def _connect(self) -> None:
        try:
            from dask.distributed import Client, LocalCluster
        except ImportError:
            raise ExecutorError(
                "--workers/--scheduler need Dask: pip install 'kpca-denoise[distributed]'"
            ) from None
        try:
            if self.scheduler is not None:
                try:
                    self.client = Client(self.scheduler, timeout=self.timeout)
                except (OSError, TimeoutError, ValueError) as exc:
                    raise ExecutorError(
                        f"cannot reach the Dask scheduler at {self.scheduler} "
                        f"({type(exc).__name__}); start one with 'dask scheduler' and give its "
                        "tcp://HOST:PORT address") from None
            else:
                with _workers_ignore_sigint():
                    try:
                        self._cluster = LocalCluster(
                            n_workers=self.workers, threads_per_worker=1, processes=True,
                            host="127.0.0.1", dashboard_address=":0",
                            silence_logs=logging.ERROR)
                    except Exception as exc:  # noqa: BLE001 - dask's own start-up errors
                        first = str(exc).splitlines()[0] if str(exc) else ""
                        raise ExecutorError(
                            f"cannot start {self.workers} local Dask worker"
                            f"{'s' if self.workers != 1 else ''} ({type(exc).__name__}: "
                            f"{first}); in a script, create the Executor under "
                            "'if __name__ == \"__main__\":'") from None
                self.client = Client(self._cluster)
            self._check_workers()
        except BaseException:
            # a failure or Ctrl-C half way: a cluster already started is not left running
            self.close()
            raise

    def _check_workers(self) -> None:
        # a builtin, so that a worker without the package can still run the probe
        try:
            found = self.client.run(eval, "__import__('kpca_denoise').__version__")
        except Exception as exc:  # noqa: BLE001 - any worker failure means the same fix
            self.close()
            raise ExecutorError(
                f"a Dask worker cannot import kpca_denoise ({type(exc).__name__}: "
                f"{str(exc).splitlines()[0] if str(exc) else ''}); install kpca-denoise "
                "on every worker (pip install 'kpca-denoise[distributed]')") from None
        if not found and self.scheduler is not None:
            self.close()
            raise ExecutorError(
                f"the Dask scheduler at {self.scheduler} has no workers; start some with "
                f"'dask worker {self.scheduler}'")

    # -- work -------------------------------------------------------------------------

    def run(self, images: Sequence[np.ndarray], params: DenoiseParams, *,
            names: Sequence[str] | None = None, patch_sets: Sequence[bool] | None = None,
            progress: ProgressCallback | None = None, cancel: Any = None,
            denoise: Callable[..., SetResult] = denoise_set,
            sequences: Sequence[tuple[int, int]] = ()) -> Iterator[ImageResult]:
        """Denoise every item; yield each :class:`ImageResult` as it completes.

        ``sequences``: ``(start, stop)`` ranges of items that are the pages of one
        stack; each goes to the pipeline in one call, so that its pages can be
        denoised with their neighbours (``params.sequence``, ``docs/stacks.md``): its
        decisions here, and on a cluster its tiles (every page of a region each) as
        tasks.

        ``denoise`` is the pipeline function run in this process (the set's fit,
        and every image when there is no cluster); workers run
        :func:`kpca_denoise.pipeline.denoise_set`.

        After the loop, :attr:`summary` is the set's :class:`SetResult`
        (results in input order without their pixels, which only the yielded
        results carry; resolved parameters, eigenvalues, timings).

        ``images`` is any sequence; an item that raises OSError or ValueError
        when it is fetched (a file read lazily that changed) gets that error as
        its result and the others go on.
        """
        if self.distributed and self.client is None:
            raise ExecutorError("the Executor is not connected; use it in a with block "
                                "(with Executor(workers=N) as ex: ex.run(...))")
        params = params.validate()
        n = len(images)
        names = list(names) if names is not None else [f"image {i}" for i in range(n)]
        patch_sets = list(patch_sets) if patch_sets is not None else [False] * n
        t0 = time.perf_counter()
        models: dict = {}
        fit = None
        if params.method == "global" or any(patch_sets):
            # one kernel PCA per set, fitted here on the whole set
            fit = denoise(images, params, names=names, patch_sets=patch_sets,
                          progress=_ItemProgress(progress), cancel=cancel, fit_only=True)
            models = fit.models
            for r in fit.images:  # only the models are needed from here on
                r.noisy, r.outputs = None, {}
        parts: list = [None] * n
        report(progress, "image", 0, n)
        done = 0
        grouped = {i for a, b in sequences for i in range(a, b)}
        work = self._sequences(images, names, patch_sets, params, progress, cancel, denoise,
                               sequences)
        if len(grouped) < n:
            rest = [i for i in range(n) if i not in grouped]
            work = _chain(work, self._parts(_Subset(images, rest), _Subset(names, rest),
                                            _Subset(patch_sets, rest), params, models, progress,
                                            cancel, denoise, rest))
        try:
            for part in work:
                res = part.images[0]
                # the summary keeps no pixels: the caller writes them and lets them go,
                # so a long set does not pile up in memory
                parts[res.index] = dataclasses.replace(
                    part, images=[dataclasses.replace(res, outputs={}, noisy=None)])
                done += 1
                report(progress, "image", done, n, message="failed" if res.error else "")
                yield res
        finally:
            work.close()  # the caller stopped early (Ctrl-C): cancel what is left
        self.summary = _merge(params, parts, fit, time.perf_counter() - t0)

    def _sequences(self, images, names, patch_sets, params, progress, cancel, denoise,
                   sequences):
        """The stacks' pages, one pipeline call per stack (here; on a cluster its tiles
        are the tasks), one part per page."""
        tiles = _DaskTiles(self.client, uuid.uuid4().hex) if self.distributed else None
        for a, b in sequences:
            check_cancel(cancel)
            try:
                pages = [images[i] for i in range(a, b)]
            except (OSError, ValueError) as exc:
                for i in range(a, b):
                    yield _failed(params, i, names[i], exc)
                continue
            res = denoise(pages, params, names=list(names[a:b]), patch_sets=list(patch_sets[a:b]),
                          first_index=a, progress=_ItemProgress(progress), cancel=cancel,
                          tile_map=tiles)
            for img in res.images:
                yield dataclasses.replace(res, images=[img])

    def _parts(self, images, names, patch_sets, params, models, progress, cancel, denoise,
               index=None):
        n = len(images)
        index = index if index is not None else range(n)
        if not self.distributed:
            for k in range(n):
                i = index[k]
                check_cancel(cancel)
                try:
                    img = images[k]  # may read the file now (the CLI's lazy pages)
                except (OSError, ValueError) as exc:
                    yield _failed(params, i, names[k], exc)
                    continue
                yield denoise([img], params, names=[names[k]], patch_sets=[patch_sets[k]],
                              first_index=i, fitted_models=models or None,
                              progress=_ItemProgress(progress), cancel=cancel)
            return
        from dask.distributed import as_completed

        client = self.client
        # one future for the whole dict: its key is a hash of the models, so runs of
        # other sets on the same cluster never share it
        shared = client.scatter([models], broadcast=True)[0] if models else None
        run_id = uuid.uuid4().hex
        tiled, small = [], []
        for i in range(n):
            try:
                big = _is_tiled(images, i, patch_sets[i], params)
            except (OSError, ValueError):  # unreadable: fetched again and reported below
                big = False
            (tiled if big else small).append(i)
        # images are read and sent a window at a time (a few per worker), so a set
        # larger than memory is never held here or on the scheduler at once
        window = max(2, 2 * len(client.scheduler_info().get("workers", {})))
        todo = iter(small)
        futures: list = []
        running = as_completed()
        failed: list = []

        def submit_next() -> bool:
            for i in todo:
                try:
                    img = images[i]
                except (OSError, ValueError) as exc:
                    failed.append(_failed(params, index[i], names[i], exc))
                    continue
                fut = client.submit(_denoise_one, img, index[i], names[i], patch_sets[i], params, shared,
                                    key=f"kpca-denoise-{run_id}-{index[i]}", pure=False)
                futures.append(fut)
                running.add(fut)
                return True
            return False

        try:
            for _ in range(window):
                if not submit_next():
                    break
            # a large image: its pipeline here, its tiles on the cluster (beside the
            # small images' tasks, which run meanwhile)
            tiles = _DaskTiles(client, run_id)
            for i in tiled:
                check_cancel(cancel)
                try:
                    img = images[i]
                except (OSError, ValueError) as exc:
                    yield _failed(params, index[i], names[i], exc)
                    continue
                yield denoise([img], params, names=[names[i]], patch_sets=[patch_sets[i]],
                              first_index=index[i], fitted_models=models or None,
                              progress=_ItemProgress(progress), cancel=cancel, tile_map=tiles)
            for fut in running:
                check_cancel(cancel)
                part = fut.result()
                fut.release()
                submit_next()
                while failed:
                    yield failed.pop(0)
                yield part
            while failed:
                yield failed.pop(0)
        except BaseException:
            # Ctrl-C, a cancel token or an error: nothing left running on the cluster
            client.cancel(futures)
            raise


def _chain(*parts):
    """The parts of several generators in turn; closing it closes each."""
    for part in parts:
        try:
            yield from part
        finally:
            part.close()


class _Subset(Sequence):
    """Items ``index`` of a sequence, fetched when asked for (the CLI's lazy pages)."""

    def __init__(self, items, index):
        self._items, self._index = items, list(index)

    def __len__(self) -> int:
        return len(self._index)

    def __getitem__(self, k):
        return self._items[self._index[k]]

    def shape_of(self, k):
        """Return item ``k``'s shape, without reading it where the items can."""
        i = self._index[k]
        return (self._items.shape_of(i) if hasattr(self._items, "shape_of")
                else np.shape(self._items[i]))


def _failed(params: DenoiseParams, index: int, name: str, exc: Exception) -> SetResult:
    """The part of an item that could not even be read: its error, no pixels."""
    msg = str(exc) or type(exc).__name__
    return SetResult(params=params, ranks=(), eigenvalues=np.zeros(0), resolved={}, timings={},
                     images=[ImageResult(index=index, name=name, error=msg)])


def _merge(params: DenoiseParams, parts: list, fit: SetResult | None, total: float) -> SetResult:
    """One SetResult from the per-item results (and the set's fit)."""
    images = [p.images[0] for p in parts]
    timings: dict = {}
    for p in ([fit] if fit is not None else []) + parts:
        for k, v in p.timings.items():
            if k != "total":
                timings[k] = timings.get(k, 0.0) + v
    timings["total"] = total
    resolved = dict(fit.resolved) if fit is not None else {"method": params.method}
    for p in parts:
        for k, v in p.resolved.items():
            resolved.setdefault(k, v)
    ranks = next((p.ranks for p in parts if p.ranks), fit.ranks if fit is not None else ())
    if fit is not None and fit.eigenvalues.size:
        eig = fit.eigenvalues
    else:
        spectra = [p.eigenvalues for p in parts if p.eigenvalues.size]
        L = min((s.size for s in spectra), default=0)
        eig = np.mean([s[:L] for s in spectra], axis=0) if spectra else np.zeros(0)
    return SetResult(params=params, ranks=tuple(ranks), images=images, eigenvalues=eig,
                     resolved=resolved, timings=timings,
                     model=fit.model if fit is not None else None,
                     models=fit.models if fit is not None else {})
