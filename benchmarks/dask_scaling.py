"""Time and peak memory of :func:`kpca_denoise.denoise_dask` on one large image:
Dask's threaded scheduler on 1 and 2 threads, and a local ``dask.distributed``
cluster of 2 single-threaded worker processes.

A script, not a test.  The image is scikit-image's camera (grey, 512x512) repeated to
``--size`` x ``--size`` with white noise of std 20 (uint8), held as a Dask array of
``--chunk`` square chunks; default method, noise level estimated.  Each row is one
run after a warm-up on a small image (numba's compiled kernels are loaded once per
process): ``decide`` is the call to ``denoise_dask`` (the whole-image decisions:
one pass over the data, the noise estimate, the calibration), ``compute`` the
tiles, and ``peak`` the largest resident memory of this process and its child
processes (the cluster's workers) together, sampled every 20 ms with psutil, less
what they held before the run (so the input array, already in memory, is not in
it).  The rows' pixels are checked against each other.

Usage::

    python -m benchmarks.dask_scaling [--size 4096] [--chunk 1024] [--tile N]

``--tile``: the tiles' core side (``tile_size``; default the method's, 1024 px), to
get several tiles out of a small image.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import threading
import time

import numpy as np

from benchmarks.common import add_noise, load, results_header
from kpca_denoise import denoise_dask


class PeakMemory:
    """The peak resident memory (bytes) of this process and its children above what
    they held at the start, sampled every ``every`` seconds while in the block."""

    def __init__(self, every: float = 0.02):
        import psutil

        self.every, self.me = every, psutil.Process()
        self.peak = 0
        self._stop = threading.Event()

    def _rss(self) -> int:
        import psutil

        total = self.me.memory_info().rss
        for child in self.me.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                total += child.memory_info().rss
        return total

    def _watch(self) -> None:
        while not self._stop.wait(self.every):
            self.peak = max(self.peak, self._rss() - self.base)

    def __enter__(self) -> "PeakMemory":
        self.base = self._rss()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def make_image(size: int) -> np.ndarray:
    cam = load("camera")
    reps = -(-size // cam.shape[0])
    big = np.tile(cam, (reps, reps))[:size, :size]
    return np.clip(add_noise(big, 20.0, seed=0), 0, 255).astype(np.uint8)


def run(a, tile, **compute_kw) -> tuple[float, float, int, np.ndarray]:
    """(decide seconds, compute seconds, peak bytes, pixels) of one run."""
    with PeakMemory() as mem:
        t0 = time.perf_counter()
        lazy = denoise_dask(a, tile_size=tile)
        t1 = time.perf_counter()
        out = lazy.compute(**compute_kw)
        t2 = time.perf_counter()
    return t1 - t0, t2 - t1, mem.peak, out


def main() -> None:
    import dask.array as da

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--chunk", type=int, default=1024)
    ap.add_argument("--tile", type=int, default=None)
    args = ap.parse_args()
    if args.size < 64 or args.chunk < 16:
        ap.error("--size must be at least 64 and --chunk at least 16")
    print(results_header(), flush=True)
    img = make_image(args.size)
    a = da.from_array(img, chunks=args.chunk)
    warm = da.from_array(img[:96, :96], chunks=48)
    from kpca_denoise import DenoiseParams
    from kpca_denoise.tiling import plan

    tiles = len(plan(img.shape, DenoiseParams(tile_size=args.tile)))
    print(f"image {args.size}x{args.size} uint8, {len(a.chunks[0]) * len(a.chunks[1])} chunks of "
          f"{args.chunk} px, {tiles} tiles", flush=True)
    print(f"{'scheduler':28s} {'decide':>8s} {'compute':>9s} {'peak':>9s}", flush=True)
    outs = []

    def row(label, **kw):
        denoise_dask(warm).compute(**kw)  # warm-up: numba's kernels loaded
        decide, compute, peak, out = run(a, args.tile, **kw)
        outs.append(out)
        print(f"{label:28s} {decide:7.1f}s {compute:8.1f}s {peak / 2**20:6.0f} MB", flush=True)

    row("threads, 1", scheduler="threads", num_workers=1)
    row("threads, 2", scheduler="threads", num_workers=2)
    from dask.distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
            Client(cluster):
        row("distributed, 2 processes")
    differ = max(int(np.count_nonzero(outs[0] != o)) for o in outs[1:])
    print(f"pixels that differ from the first row's: at most {differ} of {img.size}", flush=True)


if __name__ == "__main__":
    main()
