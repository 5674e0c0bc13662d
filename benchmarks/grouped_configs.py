"""Mean PSNR of the grouped denoiser under other settings (kernel ablations).

A script, not a test.  For each JSON dictionary of keyword arguments to
:func:`kpca_denoise.core.grouped.denoise_grouped` given on the command line it
prints the mean PSNR over the 256x256 crops of ``benchmarks/quality.py``'s
development set (coins, moon, grass, gravel, hubble) at sigma 15 / 25 / 50
(noise level given, seed 1) and their mean.

``--bm3d`` adds a line for ``bm3d.bm3d`` on the same noisy images (told sigma).

Usage::

    python benchmarks/grouped_configs.py '{}' '{"kernel": "linear"}' '{"group_size": 64}'
    python benchmarks/grouped_configs.py --bm3d '{}'
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from quality import DEV, load, psnr  # noqa: E402

from kpca_denoise.core.grouped import denoise_grouped  # noqa: E402

SIGMAS = (15, 25, 50)


def main(argv: list[str]) -> None:
    with_bm3d = "--bm3d" in argv
    cfgs = [json.loads(a) for a in argv if a != "--bm3d"] or [{}]
    imgs = {n: load(n, 256) for n in DEV}
    noisy = {(n, s): imgs[n] + np.random.default_rng(1).normal(0, s, imgs[n].shape)
             for n in DEV for s in SIGMAS}
    print("settings | mean PSNR at sigma 15 / 25 / 50 | mean | seconds (shared machine: rough)")
    for cfg in cfgs:
        t0 = time.perf_counter()
        per = []
        for s in SIGMAS:
            per.append(np.mean([psnr(imgs[n], denoise_grouped(noisy[n, s], s, **cfg)[0][None])
                                for n in DEV]))
        print(json.dumps(cfg), " ".join(f"{v:.3f}" for v in per), f"mean {np.mean(per):.3f}",
              f"{time.perf_counter() - t0:.0f}s", flush=True)
    if with_bm3d:
        import bm3d

        t0 = time.perf_counter()
        per = [np.mean([psnr(imgs[n], bm3d.bm3d(noisy[n, s], float(s))) for n in DEV])
               for s in SIGMAS]
        print("bm3d", " ".join(f"{v:.3f}" for v in per), f"mean {np.mean(per):.3f}",
              f"{time.perf_counter() - t0:.0f}s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
