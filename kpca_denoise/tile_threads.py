"""An image's tiles denoised at once, one per thread, their cores written in order.

Each tile's steps then run on one thread and wait on no other, which keeps the cores
busier than one tile split across them (docs/speed.md#tiles-at-once).  The pixels are
those of one tile at a time: a core's results do not depend on the threads.  Used by
:func:`kpca_denoise.tiling.denoise_tiled` for the grouped method.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from .core.parallel import run_in_order
from .core.progress import cancel_requested

__all__ = ["tiles_at_once", "MAX_AT_ONCE"]

#: at most this many tiles at once (one per thread): each holds its working set
#: (docs/speed.md#tiles-at-once), so on more threads the tiles run one after the other
#: on all of them and memory stays at one tile's
MAX_AT_ONCE = 4


class _Stopped:
    """A cancel token set by the caller's token or by :attr:`stop`: the tiles in
    flight end at their next chunk when the run stops."""

    def __init__(self, cancel: Any):
        self.cancel, self.stop = cancel, threading.Event()

    def is_set(self) -> bool:
        return self.stop.is_set() or cancel_requested(self.cancel)


def tiles_at_once(a, tiles: list, denoise_tile: Callable, kw: dict, progress: Any,
                  cancel: Any, take: Callable) -> None:
    """``denoise_tile(a[tile.region], tile, **kw)`` for every tile, at once on numba's
    threads (the last tile asks for all of them: the pool's threads help it as they
    finish theirs); on the calling thread, in the tiles' order, ``take(n_done, k, outs,
    stats)`` writes each core.  The calling thread's own tiles send their progress
    events as they go (a window's bars move, and the run's stage clock takes their
    steps' times, which stand for the tiles beside them); the other threads' tiles
    send none.  An error or an interrupt ends the tiles in flight at their next chunk
    and is raised."""
    import numba

    token = _Stopped(cancel)
    threads = numba.get_num_threads()
    caller = threading.get_ident()

    def compute(k: int) -> tuple:
        keep = numba.get_num_threads()
        if k == len(tiles) - 1:
            numba.set_num_threads(threads)
        try:
            return denoise_tile(a[tiles[k].region], tiles[k], cancel=token,
                                progress=progress if threading.get_ident() == caller else None,
                                **kw)
        finally:
            numba.set_num_threads(keep)

    run_in_order(len(tiles), compute, lambda k, done: take(k + 1, k, *done),
                 stop=token.stop.set)
