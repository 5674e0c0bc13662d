"""Mean PSNR of the grouped denoiser under other settings (kernel ablations).

A script, not a test.  For each JSON dictionary of keyword arguments to
:func:`kpca_denoise.core.grouped.denoise_grouped` given on the command line it
prints the mean PSNR over the 256x256 crops of ``benchmarks/quality.py``'s
development set (coins, moon, grass, gravel, hubble) at sigma 15 / 25 / 50
(noise level given, seed 1) and their mean.

``--bm3d`` adds a line for ``bm3d.bm3d`` on the same noisy images (told sigma).
``--full`` uses the full-size images instead of the crops (hubble stays 256x256);
``--images=camera,moon`` replaces the development list (any grey scikit-image name);
``--sigmas=30,40`` the noise levels.
A configuration may hold ``"sigma_factor": f``: the denoiser is then told ``f * sigma``
(robustness to a misestimated noise level).

Usage::

    python -m benchmarks.grouped_configs '{}' '{"kernel": "linear"}' '{"group_size": 64}'
    python -m benchmarks.grouped_configs --bm3d '{}'
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

from benchmarks.common import (DEV, add_noise, bm3d_denoise, exit_on_help, load, psnr,
                               results_header)
from kpca_denoise.core.grouped import denoise_grouped

SIGMAS = (15, 25, 50)


def main(argv: list[str]) -> None:
    exit_on_help(argv, __doc__)
    print(results_header(), flush=True)
    with_bm3d = "--bm3d" in argv
    full = "--full" in argv
    cfgs = [json.loads(a) for a in argv if not a.startswith("--")] or [{}]
    names = DEV
    sigmas = SIGMAS
    for a in argv:
        if a.startswith("--images="):
            names = tuple(a.split("=", 1)[1].split(","))
        if a.startswith("--sigmas="):
            sigmas = tuple(float(v) for v in a.split("=", 1)[1].split(","))
    imgs = {n: load(n, None if full else 256) for n in names}
    noisy = {(n, s): add_noise(imgs[n], s, 1) for n in names for s in sigmas}
    print("settings | mean PSNR at sigma " + " / ".join(f"{s:g}" for s in sigmas)
          + " | mean | seconds (shared machine: rough)")
    for cfg in cfgs:
        t0 = time.perf_counter()
        per = []
        kw = dict({"data_range": 255.0}, **cfg)  # 0..255 images, as the command line says
        f = kw.pop("sigma_factor", 1.0)
        for s in sigmas:
            per.append(np.mean([psnr(imgs[n], denoise_grouped(noisy[n, s], f * s, **kw)[0][None])
                                for n in names]))
        print(json.dumps(cfg), " ".join(f"{v:.3f}" for v in per), f"mean {np.mean(per):.3f}",
              f"{time.perf_counter() - t0:.0f}s", flush=True)
    if with_bm3d:
        t0 = time.perf_counter()
        per = [np.mean([psnr(imgs[n], bm3d_denoise(noisy[n, s], s)) for n in names])
               for s in sigmas]
        print("bm3d", " ".join(f"{v:.3f}" for v in per), f"mean {np.mean(per):.3f}",
              f"{time.perf_counter() - t0:.0f}s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
