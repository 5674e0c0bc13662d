"""Smooth images: the default against BM3D on 2x upscaled development photographs.

A script, not a test.  ``camera`` and ``moon`` (development images) are upscaled 2x
with a cubic spline (``skimage.transform.rescale(order=3)``, clipped to 0..255) to
1024x1024: every structure is twice as wide, so 5x5 patches see smoother content,
which is where block-transform methods are strongest.  White Gaussian noise of sigma
15 / 25 / 50 (seed 0, not clipped), noise level given to both.  It prints PSNR in dB
and seconds for ``bm3d.bm3d`` and :func:`kpca_denoise.core.grouped.denoise_grouped`
(defaults, or the JSON keywords given).

Usage::

    python -m benchmarks.upscaled
    python -m benchmarks.upscaled '{"stride": 3}'
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
from skimage import data
from skimage.transform import rescale

from benchmarks.common import add_noise, bm3d_denoise, exit_on_help, psnr, results_header
from kpca_denoise.core.grouped import denoise_grouped


def main(argv: list[str]) -> None:
    exit_on_help(argv, __doc__)
    print(results_header(), flush=True)
    kw = json.loads(argv[0]) if argv else {}
    print(f"keywords for ours: {json.dumps(kw)}")
    print("image        sigma    bm3d    ours    gap   | seconds: bm3d ours")
    gaps: dict[int, list[float]] = {}
    for name in ("camera", "moon"):
        up = np.clip(rescale(getattr(data, name)().astype(np.float64), 2, order=3), 0, 255)
        for s in (15, 25, 50):
            noisy = add_noise(up, s, 0)
            t0 = time.perf_counter()
            b = psnr(up, bm3d_denoise(noisy, s))
            t1 = time.perf_counter()
            o = psnr(up, denoise_grouped(noisy, float(s), **dict({"data_range": 255.0}, **kw))
                     [0][None])
            t2 = time.perf_counter()
            gaps.setdefault(s, []).append(o - b)
            print(f"{name}-x2{up.shape[0]:>6} {s:>5} {b:7.2f} {o:7.2f} {o - b:+6.2f}   | "
                  f"{t1 - t0:.1f} {t2 - t1:.1f}", flush=True)
    for s, g in gaps.items():
        print(f"sigma {s}: mean gap {np.mean(g):+.2f} dB")


if __name__ == "__main__":
    main(sys.argv[1:])
