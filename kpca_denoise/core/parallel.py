"""The grouped core's parallel loops: a numba kernel over independent items (groups,
search rows) runs on parts of their range at once, in the calling thread and a pool's
(the kernels release the GIL).  Not numba's parallel loops (``parallel=True``), which
compile every kernel again as a parallel function (docs/speed.md#the-first-run).
:func:`run_in_order` runs whole parts of a chunk at once, one per thread, and adds
their results in order on the calling thread; :func:`compile_slp` compiles a kernel
with LLVM's SLP vectoriser."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

__all__ = ["run_parts", "run_in_order", "compile_slp", "num_threads", "PARTS_PER_THREAD"]

#: parts per thread: a thread that finishes its part early takes the next one
PARTS_PER_THREAD = 4

_lock = threading.Lock()
_pools: dict[int, ThreadPoolExecutor] = {}
if hasattr(os, "register_at_fork"):  # a forked child has none of the parent's threads
    os.register_at_fork(after_in_child=_pools.clear)


def shared_pool(threads: int) -> ThreadPoolExecutor:
    """Return the pool of ``threads`` threads that every parallel loop shares.

    A loop inside
    an item that another loop runs (a kernel's parts inside an image's tile) queues
    behind the pool's busy threads and is helped as they come free, so the threads
    never outnumber numba's."""
    with _lock:
        pool = _pools.get(threads)
        if pool is None:
            pool = _pools[threads] = ThreadPoolExecutor(threads, "kpca-denoise-part")
        return pool


#: per pool (by its number of threads), the helpers submitted and not yet started
_queued: dict[int, int] = {}


class _Helpers:
    """``work`` run by up to ``threads`` helpers of the shared pool beside the calling
    thread.  A pool busy with other work (another tile's) starts them late; only as
    many are queued as the pool has threads (more could never run sooner), and once
    :meth:`wait` returns a helper that starts late finds nothing: it holds no
    reference to the loop's arrays, which would otherwise stay in memory until the
    pool reached it (a queue of such helpers held a whole tile's groups per rank)."""

    def __init__(self, threads: int, work: Callable):
        self.threads, self.work = threads, work
        pool = shared_pool(threads)
        with _lock:
            n = max(0, threads - _queued.get(threads, 0))
            _queued[threads] = _queued.get(threads, 0) + n
        self.futures = [pool.submit(self._start) for _ in range(n)]

    def _start(self) -> None:
        with _lock:
            _queued[self.threads] -= 1
        work = self.work
        if work is not None:
            work()

    def wait(self, errors: bool = True) -> None:
        """Wait for the helpers that started (raising the first one's error when
        ``errors``); those still queued, behind a busy pool's other work, are dropped:
        every part is taken by then, so they would find nothing to do."""
        self.work = None
        for f in self.futures:
            if f.cancel():
                with _lock:
                    _queued[self.threads] -= 1
            elif errors:
                f.result()
            else:
                f.exception()


def num_threads() -> int:
    """numba's number of threads on this thread (``NUMBA_NUM_THREADS`` unless set)."""
    import numba

    return numba.get_num_threads()


def run_parts(kernel: Callable, n: int, *args: Any, slp: bool = False) -> None:
    """Run a numba kernel over ``range(n)`` in parts on numba's threads.

    ``kernel(*args, i0, i1)`` on parts ``[i0, i1)`` that cover ``range(n)``, on
    numba's number of threads (``numba.get_num_threads()``, ``NUMBA_NUM_THREADS``): the
    calling thread and a pool's take the next part until none is left.  Returns when
    all are done (raises the first error).  The kernel must treat each item on its
    own, so that the result does not depend on the parts.  ``slp``: the kernel is
    compiled with LLVM's SLP vectoriser (:func:`compile_slp`)."""
    import numba

    if slp:
        compile_slp(kernel, args + (0, n))
    threads = min(numba.get_num_threads(), n)
    if threads <= 1:
        kernel(*args, 0, n)
        return
    parts = min(n, threads * PARTS_PER_THREAD)
    bounds = [n * k // parts for k in range(parts + 1)]
    todo = iter(range(parts))
    take = threading.Lock()

    def work() -> None:
        while True:
            with take:
                k = next(todo, None)
            if k is None:
                return
            kernel(*args, bounds[k], bounds[k + 1])

    helpers = _Helpers(threads - 1, work)
    try:
        work()
    except BaseException:  # an error or an interrupt: the pool takes no more parts
        with take:
            for _ in todo:
                pass
        raise
    finally:
        helpers.wait()


def compile_slp(kernel: Callable, args: tuple) -> None:
    """Compile a numba kernel once with LLVM's SLP vectoriser.

    Compile the numba ``kernel`` for the types of ``args`` with LLVM's SLP
    vectoriser, once (numba turns it off for every function, ``NUMBA_SLP_VECTORIZE``):
    it packs side-by-side scalar sums, such as a row of candidates' SSDs, into vector
    lanes.  Each lane keeps its own order of operations, so the results are those of
    the scalar code.  A kernel already compiled (or in numba's cache) is left as it
    is.  docs/speed.md."""
    import numba
    from numba.core import config
    from numba.core.compiler_lock import global_compiler_lock

    sig = tuple(numba.typeof(a) for a in args)
    if sig in kernel.overloads:
        return
    with global_compiler_lock:  # no other compile sees the switch
        if sig in kernel.overloads:
            return
        saved = config.SLP_VECTORIZE
        config.SLP_VECTORIZE = True
        try:
            kernel.compile(sig)
        finally:
            config.SLP_VECTORIZE = saved


def run_in_order(n: int, compute: Callable, add: Callable, *,
                 stop: Callable | None = None, most: int | None = None) -> None:
    """Compute items on numba's threads and add their results in order.

    ``add(i, compute(i))`` for ``i`` in ``range(n)``: the ``compute`` calls run at once
    on numba's number of threads (the calling thread and a pool's), each call on one
    thread (the kernels it runs through :func:`run_parts` see one thread); the ``add``
    calls run on the calling thread, one at a time in the order of ``i``, between its
    own ``compute`` calls.  So the serial work (``add``, the Python between a call's
    kernels) overlaps the other threads' kernels.  Returns when all are added (raises
    the first error; the other threads then take no more items).  A ``compute`` call
    that raises its thread's number of threads again (an image's last tile) is helped
    by the pool's threads as they finish their items.  ``stop``: called on the calling
    thread when it stops on an error or an interrupt, before it waits for the items
    the other threads are computing (to tell them to end early).  ``most``: at most
    this many calls at once (each holding its own working memory).  docs/speed.md."""
    import numba

    threads = min(numba.get_num_threads(), n, n if most is None else max(1, most))
    if threads <= 1:
        for i in range(n):
            add(i, compute(i))
        return
    lock = threading.Lock()  # the next item and the results ready
    got = threading.Condition(lock)  # a result is ready (or a thread failed)
    todo = {"next": 0, "stop": False}
    ready: dict = {}

    def take() -> int | None:
        with lock:
            if todo["stop"] or todo["next"] >= n:
                return None
            todo["next"] += 1
            return todo["next"] - 1

    def help_out() -> None:
        keep = numba.get_num_threads()
        numba.set_num_threads(1)  # this thread's own setting
        try:
            while (i := take()) is not None:
                r = compute(i)
                with got:
                    ready[i] = r
                    got.notify()
        except BaseException:
            with got:
                todo["stop"] = True
                got.notify()
            raise
        finally:
            numba.set_num_threads(keep)

    helpers = _Helpers(threads - 1, help_out)
    keep = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        for j in range(n):
            # compute items of its own while the next result is not ready
            while True:
                with lock:
                    if j in ready or todo["stop"]:
                        break
                i = take()
                if i is None:
                    with got:  # every item taken: wait for the helpers' result
                        got.wait_for(lambda: j in ready or todo["stop"])
                    break
                r = compute(i)
                with lock:
                    ready[i] = r
            with lock:
                if j not in ready:  # a helper failed
                    break
                r = ready.pop(j)
            add(j, r)
    except BaseException:
        with lock:
            todo["stop"] = True
        if stop is not None:
            stop()
        helpers.wait(errors=False)  # their items end first; the caller's error is raised
        raise
    finally:
        numba.set_num_threads(keep)
    helpers.wait()  # a helper's error, the caller having none
