"""Accuracy of the blind noise estimate (``kpca_denoise.core.noise.estimate_sigma_image``).

A script, not a test: on scikit-image's camera, coins, moon, grass, gravel and
astronaut (grey, 0..255) with white Gaussian noise of sigma 5/15/25/50 (not clipped),
it prints the estimate of the product's estimator, of its first step alone
(weak-texture fraction, ``iterations=0``) and, for reference, scikit-image's wavelet
estimator ``skimage.restoration.estimate_sigma``, with the mean and worst relative
errors.

``--model``: the whole noise model of the default path
(``kpca_denoise.core.nlf.estimate_noise_model``) on the same images, with white noise
(is it read as white, at the finest-scale estimate?) and with correlated noise of the
PSD of bilinear demosaicing (white noise through the unit-energy ``[1 2 1] x [1 2 1]``
filter: its per-pixel std read against the true one, and the level told to the
denoiser over it against the exact factor of that PSD,
``kpca_denoise.core.nlf.effective_factor``).

Usage::

    python -m benchmarks.noise_estimate [--model]
"""

from __future__ import annotations

import sys

import numpy as np
from skimage.restoration import estimate_sigma

from benchmarks.common import add_noise, exit_on_help, load, results_header
from kpca_denoise.core.noise import estimate_sigma_image

NAMES = ("camera", "coins", "moon", "grass", "gravel", "astronaut")
SIGMAS = (5, 15, 25, 50)


def correlated_noise(shape, sigma: float, seed: int) -> np.ndarray:
    """White noise through the unit-energy [1 2 1] x [1 2 1] filter (per-pixel std
    ``sigma``, neighbours correlated by 2/3: bilinear demosaicing's PSD)."""
    from scipy.ndimage import convolve

    k = np.outer([1.0, 2.0, 1.0], [1.0, 2.0, 1.0])
    k /= np.sqrt(np.sum(k * k))
    return sigma * convolve(np.random.default_rng(seed).normal(0, 1, shape), k, mode="wrap")


def exact_factor() -> float:
    """:func:`~kpca_denoise.core.nlf.effective_factor` of the exact autocovariance of
    :func:`correlated_noise` (r = 1, 2/3, 1/6 per axis)."""
    from kpca_denoise.core.nlf import autocovariance_lags, effective_factor

    r = {0: 1.0, 1: 2.0 / 3.0, 2: 1.0 / 6.0}
    return effective_factor(np.array([r.get(abs(dy), 0.0) * r.get(abs(dx), 0.0)
                                      for dy, dx in autocovariance_lags(3)]), 3)


def model_main() -> None:
    from kpca_denoise.core.nlf import estimate_noise_model

    print(results_header(), flush=True)
    f0 = exact_factor()
    print(f"exact factor of the [1 2 1]^2 PSD: {f0:.3f}")
    print(f"{'image':10s} {'sigma':>5s} {'white: kind':>12s} {'sigma':>6s} {'finest':>6s} "
          f"{'corr: kind':>11s} {'sigma':>6s} {'ratio':>6s} {'factor':>6s}")
    wrong, white_err, ratios, factors = 0, [], {}, []
    for name in NAMES:
        img = load(name)
        for s in SIGMAS[:3]:
            noisy = add_noise(img, s, 2)
            w = estimate_sigma_image(noisy)
            mw = estimate_noise_model(noisy, w)
            wrong += mw.kind != "white"
            white_err.append(mw.level / s - 1.0)
            cn = img + correlated_noise(img.shape, s, 3)
            mc = estimate_noise_model(cn, estimate_sigma_image(cn))
            ratios.setdefault(name, []).append(mc.sigma / s)
            factors.append(mc.level / mc.sigma / f0)
            print(f"{name:10s} {s:5d} {mw.kind:>12s} {mw.level:6.2f} {w:6.2f} {mc.kind:>11s} "
                  f"{mc.sigma:6.2f} {mc.sigma / s:6.3f} {mc.level / mc.sigma:6.3f}", flush=True)
    print()
    e = np.abs(np.asarray(white_err))
    print(f"white noise: {wrong} of {e.size} read as correlated; level told mean relative "
          f"error {100 * e.mean():.1f} %, worst {100 * e.max():.1f} %")
    allr = np.concatenate([np.asarray(v) for v in ratios.values()])
    print(f"correlated noise: per-pixel std / true mean {allr.mean():.3f}, min {allr.min():.3f}, "
          f"max {allr.max():.3f}; per image " + ", ".join(
              f"{k} {np.mean(v):.3f}" for k, v in ratios.items()))
    fa = np.asarray(factors)
    print(f"correlated noise: fitted factor / exact mean {fa.mean():.3f}, min {fa.min():.3f}, "
          f"max {fa.max():.3f}")


def main() -> None:
    exit_on_help(sys.argv[1:], __doc__)
    if "--model" in sys.argv[1:]:
        return model_main()
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
