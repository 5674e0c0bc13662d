"""An image's tiles denoised at once, one per thread, their cores written in order.

Each tile's steps then run on one thread and wait on no other (a tile alone on two
threads keeps them busy about 1.75 of the time; docs/speed.md#tiles-at-once).  The
pixels are those of one tile at a time: a core's results do not depend on the
threads.  Used by :func:`kpca_denoise.tiling.denoise_tiled` for the grouped method.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any, Callable

from .core.parallel import run_in_order

__all__ = ["tiles_at_once"]


class _Stopped:
    """A cancel token set by the caller's token or by :attr:`stop`: the tiles in
    flight end at their next chunk when the run stops."""

    def __init__(self, cancel: Any):
        self.cancel, self.stop = cancel, threading.Event()

    def is_set(self) -> bool:
        if self.stop.is_set():
            return True
        c = self.cancel
        return bool(c is not None and (c.is_set() if hasattr(c, "is_set") else c()))


def tiles_at_once(a, tiles: list, denoise_tile: Callable, kw: dict, progress: Any,
                  cancel: Any, take: Callable) -> None:
    """``denoise_tile(a[tile.region], tile, **kw)`` for every tile, at once on numba's
    threads (the last tile on all of them: the threads that finish help it); on the
    calling thread, in the tiles' order, each tile's progress events are sent and
    ``take(n_done, k, outs, stats)`` writes its core.  An error or an interrupt ends
    the tiles in flight at their next chunk and is raised."""
    import numba

    token = _Stopped(cancel)
    threads = numba.get_num_threads()

    def compute(k: int) -> tuple:
        events: list = []
        keep = numba.get_num_threads()
        if k == len(tiles) - 1:
            numba.set_num_threads(threads)
        try:
            res = denoise_tile(a[tiles[k].region], tiles[k], progress=events.append,
                               cancel=token, **kw)
        finally:
            numba.set_num_threads(keep)
        return res, events

    last = [time.perf_counter()]

    def add(k: int, done: tuple) -> None:
        (outs, stats), events = done
        if progress is not None:
            # the wall time since the previous tile's, shared out as this tile's steps
            # took theirs: the stages still add up to the run's time
            now = time.perf_counter()
            spent = sum(ev.seconds or 0.0 for ev in events)
            f = (now - last[0]) / spent if spent > 0.0 else 0.0
            last[0] = now
            for ev in events:
                progress(ev if ev.seconds is None else replace(ev, seconds=ev.seconds * f))
        take(k + 1, k, outs, stats)

    run_in_order(len(tiles), compute, add, items=True, stop=token.stop.set)
