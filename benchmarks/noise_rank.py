"""The automatic rank for patch sets: components above kappa x the noise eigenvalue.

A script, not a test.  Prints, for noisy digits, the denoising error with a fixed
128 components (the old default) and with the rank
``KernelPCA.noise_rank(sigma, kappa)`` for several kappa:

* scikit-learn's digits on [0, 1], models fit on 1000 noisy digits, test MSE on
  the other 797 (noise 0.1 / 0.25 / 0.4, given);
* the shipped ``sample_images/digits.npz`` (0..255, uint8) with noise 10 / 25 / 50 /
  80 added and clipped to 0..255, as ``kpca-denoise denoise --add-noise`` does, noise
  level estimated (clipping makes it smaller than the std added); PSNR in dB, the
  model fit on the noisy set itself.

Usage::

    python -m benchmarks.noise_rank
"""

from __future__ import annotations

import sys

import numpy as np

from benchmarks.common import exit_on_help, psnr, results_header, sample_digits, shuffled_digits
from kpca_denoise import KernelPCA
from kpca_denoise.core.kpca import WIDTH_SCALE_SAMPLES
from kpca_denoise.core.noise import estimate_sigma_pca
from kpca_denoise.pipeline import add_noise

KAPPAS = (1.0, 1.5, 2.0, 3.0)


def row(model, sigma, Z, init, score) -> str:
    out = [f"r128 {score(model.fixed_point_inverse_transform(Z[:, :128], init=init))}"]
    for kappa in KAPPAS:
        r = model.noise_rank(sigma, kappa)
        out.append(f"kappa {kappa}: r{r} {score(model.fixed_point_inverse_transform(Z[:, :r], init=init))}")
    return " | ".join(out)


def main() -> None:
    exit_on_help(sys.argv[1:], __doc__)
    print(results_header(), flush=True)
    X = shuffled_digits(np.random.default_rng(0))
    Xtr, Xte = X[:1000], X[1000:]
    print("scikit-learn digits on [0, 1]: test MSE (fit on 1000 noisy, up to 500 components)")
    for s in (0.1, 0.25, 0.4):
        rng = np.random.default_rng(0)
        Ntr = Xtr + rng.normal(0, s, Xtr.shape)
        Nte = Xte + rng.normal(0, s, Xte.shape)
        m = KernelPCA.for_denoising(n_components=500, noise_sigma=s, width_scale=WIDTH_SCALE_SAMPLES,
                      eigen_solver="dense").fit(Ntr)
        mse = lambda a: f"{np.mean((a - Xte) ** 2):.4f}"  # noqa: E731
        print(f"  noise {s}: noisy {mse(Nte)} | " + row(m, s, m.transform(Nte), Nte, mse),
              flush=True)
    clean = sample_digits().astype(np.float64)
    N = clean.shape[0]
    Xc = clean.reshape(N, -1)

    def ps(a):  # of the output as a 0..255 integer image stores it (rounded, clipped)
        return f"{psnr(Xc, np.clip(np.rint(a), 0, 255)):.2f}"

    print("shipped digits (0..255, clipped): PSNR in dB (fit on the noisy set, up to N/2 "
          "components)")
    for s in (10, 25, 50, 80):
        noisy = np.clip(np.rint(add_noise(clean, s, seed=0)), 0, 255).reshape(N, -1)
        sig = estimate_sigma_pca(noisy)
        m = KernelPCA.for_denoising(n_components=N // 2, noise_sigma=sig, width_scale=WIDTH_SCALE_SAMPLES,
                      eigen_solver="dense").fit(noisy)
        print(f"  noise {s} (estimated {sig:.1f}): noisy {ps(noisy)} | "
              + row(m, sig, m.transform(noisy), noisy, ps), flush=True)


if __name__ == "__main__":
    main()
