"""The grouped core's parallel loops: a numba kernel over independent items (groups,
search rows) runs on parts of their range at once, in the calling thread and a pool's
(the kernels release the GIL).  Not numba's parallel loops (``parallel=True``), which
compile every kernel again as a parallel function (docs/speed.md#the-first-run)."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

__all__ = ["run_parts", "compile_slp", "PARTS_PER_THREAD"]

#: parts per thread: a thread that finishes its part early takes the next one
PARTS_PER_THREAD = 4

_lock = threading.Lock()
_pools: dict[int, ThreadPoolExecutor] = {}
if hasattr(os, "register_at_fork"):  # a forked child has none of the parent's threads
    os.register_at_fork(after_in_child=_pools.clear)


def _pool(threads: int) -> ThreadPoolExecutor:
    with _lock:
        pool = _pools.get(threads)
        if pool is None:
            pool = _pools[threads] = ThreadPoolExecutor(threads, "kpca-denoise-part")
        return pool


def run_parts(kernel: Callable, n: int, *args: Any, slp: bool = False) -> None:
    """``kernel(*args, i0, i1)`` on parts ``[i0, i1)`` that cover ``range(n)``, on
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

    pool = _pool(threads - 1)
    helpers = [pool.submit(work) for _ in range(threads - 1)]
    try:
        work()
    except BaseException:  # an error or an interrupt: the pool takes no more parts
        with take:
            for _ in todo:
                pass
        raise
    finally:
        for f in helpers:
            f.result()


def compile_slp(kernel: Callable, args: tuple) -> None:
    """Compile the numba ``kernel`` for the types of ``args`` with LLVM's SLP
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
