"""Accuracy of the blind noise estimate (``kpca_denoise.core.noise.estimate_sigma_image``).

A script, not a test: on scikit-image's camera, coins, moon, grass, gravel and
astronaut (grey, 0..255) with white Gaussian noise of sigma 5/15/25/50 (not clipped),
it prints the estimate of the product's estimator, of its first step alone
(weak-texture fraction, ``iterations=0``) and, for reference, scikit-image's wavelet
estimator ``skimage.restoration.estimate_sigma``, with the mean and worst relative
errors.

Usage::

    python -m benchmarks.noise_estimate
"""

from __future__ import annotations

import sys

import numpy as np
from skimage.restoration import estimate_sigma

from benchmarks.common import add_noise, exit_on_help, load, results_header
from kpca_denoise.core.noise import estimate_sigma_image

NAMES = ("camera", "coins", "moon", "grass", "gravel", "astronaut")
SIGMAS = (5, 15, 25, 50)


def main() -> None:
    exit_on_help(sys.argv[1:], __doc__)
    print(results_header(), flush=True)
    cols = {"ours": lambda x: estimate_sigma_image(x),
            "step 1 only": lambda x: estimate_sigma_image(x, iterations=0),
            "skimage wavelet": lambda x: float(estimate_sigma(x))}
    err = {k: [] for k in cols}
    print(f"{'image':10s} {'sigma':>5s} " + " ".join(f"{k:>16s}" for k in cols))
    for name in NAMES:
        img = load(name)
        for s in SIGMAS:
            noisy = add_noise(img, s, 2)
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
