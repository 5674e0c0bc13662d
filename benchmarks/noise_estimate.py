"""Accuracy of the blind noise estimate (``kpca_denoise.core.noise.estimate_sigma_image``).

A script, not a test: on scikit-image's camera, coins, moon, grass, gravel and
astronaut (grey, 0..255) with white Gaussian noise of sigma 5/15/25/50 (not clipped),
it prints the estimate of the product's estimator, of its first step alone
(weak-texture fraction, ``iterations=0``) and, for reference, scikit-image's wavelet
estimator ``skimage.restoration.estimate_sigma``, with the mean and worst relative
errors.

Usage::

    python benchmarks/noise_estimate.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from skimage import data  # noqa: E402
from skimage.color import rgb2gray  # noqa: E402
from skimage.restoration import estimate_sigma  # noqa: E402

from kpca_denoise.core.noise import estimate_sigma_image  # noqa: E402

NAMES = ("camera", "coins", "moon", "grass", "gravel", "astronaut")
SIGMAS = (5, 15, 25, 50)


def main() -> None:
    cols = {"ours": lambda x: estimate_sigma_image(x),
            "step 1 only": lambda x: estimate_sigma_image(x, iterations=0),
            "skimage wavelet": lambda x: float(estimate_sigma(x))}
    err = {k: [] for k in cols}
    print(f"{'image':10s} {'sigma':>5s} " + " ".join(f"{k:>16s}" for k in cols))
    for name in NAMES:
        img = (rgb2gray(data.astronaut()) * 255.0 if name == "astronaut"
               else getattr(data, name)().astype(np.float64))
        for s in SIGMAS:
            noisy = img + np.random.default_rng(2).normal(0.0, s, img.shape)
            row = []
            for k, f in cols.items():
                v = f(noisy)
                err[k].append(v / s - 1.0)
                row.append(v)
            print(f"{name:10s} {s:5d} " + " ".join(f"{v:16.2f}" for v in row), flush=True)
    print()
    for k, e in err.items():
        e = np.abs(np.asarray(e))
        print(f"{k:16s} mean relative error {100 * e.mean():5.1f} %   worst {100 * e.max():5.1f} %")


if __name__ == "__main__":
    main()
