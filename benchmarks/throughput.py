"""Throughput of a set: in-process against 1 and 2 local Dask workers.

A script, not a test.  Denoises the same set of 16 noisy images (crops of
scikit-image's camera, astronaut (grey), coins and moon, std 20, default
method, noise level estimated) with :class:`kpca_denoise.executor.Executor`
in this process, then on an embedded LocalCluster of 1 and of 2 worker
processes (the cluster is started and warmed up before the clock starts:
numba's compiled kernels are loaded once per worker).  Prints images per
minute and the ratio to the in-process run.  On one machine the workers share
its cores with numba's own threads, so the gain is small; on a cluster each
worker brings its own cores and the throughput grows with the workers until
the scheduler or the file system limits it.

Usage::

    python -m benchmarks.throughput [--images 16] [--size 192]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks.common import load, results_header
from kpca_denoise import DenoiseParams
from kpca_denoise.executor import Executor
from kpca_denoise.pipeline import add_noise


def make_set(n: int, size: int) -> list[np.ndarray]:
    srcs = [load("camera"), load("astronaut"), load("coins"), load("moon")]  # grey, 0..255
    out = []
    for k in range(n):
        s = np.asarray(srcs[k % len(srcs)], dtype=np.float64)
        y = (k // len(srcs)) * 37 % (s.shape[0] - size)
        x = (k // len(srcs)) * 53 % (s.shape[1] - size)
        out.append(np.clip(add_noise(s[y:y + size, x:x + size], 20, seed=k), 0, 255)
                   .astype(np.uint8))
    return out


def timed(ex: Executor, images, params) -> float:
    t = time.perf_counter()
    n = sum(1 for _ in ex.run(images, params))
    assert n == len(images)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=16)
    ap.add_argument("--size", type=int, default=192)
    args = ap.parse_args()
    if not 16 <= args.size < 303:
        ap.error("--size must be in 16..302 (crops of coins, the smallest source, 303x384)")
    print(results_header(), flush=True)
    images = make_set(args.images, args.size)
    params = DenoiseParams()
    rows = []
    for label, kw in (("in-process", {}), ("1 local worker", {"workers": 1}),
                      ("2 local workers", {"workers": 2})):
        with Executor(**kw) as ex:
            timed(ex, images[:2] if kw else images[:1], params)  # warm-up: load numba kernels
            sec = timed(ex, images, params)
        rows.append((label, sec))
        print(f"{label:16s} {sec:7.1f} s  {60 * len(images) / sec:6.1f} images/min  "
              f"x{rows[0][1] / sec:.2f}", flush=True)


if __name__ == "__main__":
    main()
