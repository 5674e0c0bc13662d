"""Regular textures: the default against BM3D on synthetic periodic images.

A script, not a test.  Synthetic 256x256 images, so that no photograph is tuned on:
``bricks`` (30x14 px bricks with 2 px mortar, rows offset by half a brick, one random
shade per brick, slightly blurred), the same bricks at 36x17 px (a period beyond the
65x65 search window), 31x15 px (an odd period) and 25x13 px, and ``weave`` (a product
of sines of period 17 px plus a diagonal square wave of period 23 px, slightly
blurred).  White Gaussian noise of sigma 15 / 25 / 50 (seed 1, not clipped), noise
level given.  It prints PSNR in dB for ``bm3d.bm3d`` and for
:func:`kpca_denoise.core.grouped.denoise_grouped` with each JSON dictionary of
keywords given (default: the defaults, and the photograph settings,
``{"periodic": false}``), then the mean gap to BM3D per sigma.

``--variants`` runs four less regular textures instead, built after the texture
settings were chosen and not tuned on: the 30x14 px bricks (400x400) rotated by 10
degrees, with each row of bricks shifted by up to 8 px at random, and stretched
across by up to 30 % (a perspective), and the 36x17 px bricks rotated by 30
degrees (256x256 centre crops).

Usage::

    python benchmarks/textures.py
    python benchmarks/textures.py --variants
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


def bricks(w: int, h: int, n: int = 256, jitter: int = 0) -> np.ndarray:
    """w x h px bricks with 2 px mortar, rows offset by half a brick (and by up to
    ``jitter`` px more at random), one random shade per brick, slightly blurred;
    n x n."""
    y, x = np.mgrid[0:n, 0:n].astype(np.float64)
    rng = np.random.default_rng(0)
    row = (y // h).astype(int)
    off = (row % 2) * (w // 2)
    if jitter:
        off = off + rng.integers(-jitter, jitter + 1, row.max() + 1)[row]
    col = ((x + off) // w).astype(int)
    b = 170.0 + rng.uniform(-25, 25, (row.max() + 1, col.max() + 2))[row, col]
    b[(y % h) < 2] = 90.0
    b[((x + off) % w) < 2] = 90.0
    return gaussian_filter(b, 0.7)


def images() -> dict[str, np.ndarray]:
    y, x = np.mgrid[0:256, 0:256].astype(np.float64)
    weave = (128 + 50 * np.sin(2 * np.pi * x / 17) * np.sin(2 * np.pi * y / 17)
             + 30 * np.sign(np.sin(2 * np.pi * (x + y) / 23)))
    return {"bricks": bricks(30, 14), "weave": gaussian_filter(weave, 0.8),
            "bricks36": bricks(36, 17), "bricks31": bricks(31, 15), "bricks25": bricks(25, 13)}


def variants() -> dict[str, np.ndarray]:
    from scipy.ndimage import map_coordinates, rotate

    b = bricks(30, 14, 400)
    c = slice(72, 328)
    y, x = np.mgrid[0:256, 0:256].astype(np.float64)
    return {"rot10": rotate(b, 10, reshape=False, order=1)[c, c],
            "jitter8": bricks(30, 14, 400, jitter=8)[c, c],
            "persp": map_coordinates(b, [y + 72, 72 + x * (1 + 0.3 * x / 255) / 1.15], order=1),
            "rot30-36": rotate(bricks(36, 17, 400), 30, reshape=False, order=1)[c, c]}


def main(argv: list[str]) -> None:
    import bm3d

    which = variants() if "--variants" in argv else images()
    argv = [a for a in argv if a != "--variants"]
    cfgs = [json.loads(a) for a in argv] or [{}, {"periodic": False}]
    print("image     sigma    bm3d  | " + " | ".join(json.dumps(c) for c in cfgs))
    gaps = {s: [] for s in (15, 25, 50)}
    for name, im in which.items():
        for s in (15, 25, 50):
            noisy = im + np.random.default_rng(1).normal(0, s, im.shape)
            row = [psnr(im, denoise_grouped(noisy, float(s), **dict({"data_range": 255.0}, **c))
                        [0][None]) for c in cfgs]
            b = psnr(im, bm3d.bm3d(noisy, float(s)))
            gaps[s].append([v - b for v in row])
            print(f"{name:9} {s:5} {b:7.2f}  | " + " | ".join(f"{v:7.2f}" for v in row),
                  flush=True)
    for s, g in gaps.items():
        print(f"mean gap to BM3D at sigma {s:2}: "
              + " | ".join(f"{v:+.2f}" for v in np.mean(g, axis=0)))

if __name__ == "__main__":
    main(sys.argv[1:])
