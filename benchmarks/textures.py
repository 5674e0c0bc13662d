"""Regular textures: the default against BM3D on synthetic periodic images.

A script, not a test.  Two synthetic 256x256 images, so that no photograph is tuned
on: ``bricks`` (30x14 px bricks with 2 px mortar, rows offset by half a brick, one
random shade per brick, slightly blurred) and ``weave`` (a product of sines of period
17 px plus a diagonal square wave of period 23 px, slightly blurred).  White Gaussian
noise of sigma 15 / 25 / 50 (seed 1, not clipped), noise level given.  It prints PSNR
in dB for ``bm3d.bm3d`` and for :func:`kpca_denoise.core.grouped.denoise_grouped` with
each JSON dictionary of keywords given (default: the defaults, and a 39x39 search
window as BM3D uses).

Usage::

    python benchmarks/textures.py
    python benchmarks/textures.py '{}' '{"search_radius": 16}'
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from scipy.ndimage import gaussian_filter

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from quality import psnr  # noqa: E402

from kpca_denoise.core.grouped import denoise_grouped  # noqa: E402


def images() -> dict[str, np.ndarray]:
    y, x = np.mgrid[0:256, 0:256].astype(np.float64)
    rng = np.random.default_rng(0)
    row = (y // 14).astype(int)
    off = (row % 2) * 15
    col = ((x + off) // 30).astype(int)
    bricks = 170.0 + rng.uniform(-25, 25, (row.max() + 1, col.max() + 2))[row, col]
    bricks[(y % 14) < 2] = 90.0
    bricks[((x + off) % 30) < 2] = 90.0
    weave = (128 + 50 * np.sin(2 * np.pi * x / 17) * np.sin(2 * np.pi * y / 17)
             + 30 * np.sign(np.sin(2 * np.pi * (x + y) / 23)))
    return {"bricks": gaussian_filter(bricks, 0.7), "weave": gaussian_filter(weave, 0.8)}


def main(argv: list[str]) -> None:
    import bm3d

    cfgs = [json.loads(a) for a in argv] or [{}, {"search_radius": 19}]
    print("image   sigma    bm3d  | " + " | ".join(json.dumps(c) for c in cfgs))
    for name, im in images().items():
        for s in (15, 25, 50):
            noisy = im + np.random.default_rng(1).normal(0, s, im.shape)
            row = [psnr(im, denoise_grouped(noisy, float(s), **dict({"data_range": 255.0}, **c))
                        [0][None]) for c in cfgs]
            print(f"{name:7} {s:5} {psnr(im, bm3d.bm3d(noisy, float(s))):7.2f}  | "
                  + " | ".join(f"{v:7.2f}" for v in row), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
