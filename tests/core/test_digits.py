"""Digits denoising (as scikit-learn's kernel-PCA denoising example): models
fit on noisy training digits, noise std 0.25 on [0, 1].

Measured (this test's data): ours 0.0188, scikit-learn's learned pre-image at
its best grid point 0.0213 (gamma 0.08, 64 components, alpha 1), linear PCA
at its best rank 0.0289 (16 components); noisy 0.0627."""

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.decomposition import KernelPCA as SkKernelPCA

from helpers import KPCA as KernelPCA  # the denoiser's choices, explicit
from kpca_denoise.core.kpca import noise_eigenvalue
from kpca_denoise.pipeline import PATCH_SET_DEFAULT_RANK


def test_automatic_kpca_beats_sklearn_and_pca_at_their_best(digits):
    Ntr, Xte, Nte = digits

    def mse(a):
        return float(np.mean((a - Xte) ** 2))

    ours_model = KernelPCA(PATCH_SET_DEFAULT_RANK).fit(Ntr)  # gamma='noise': automatic
    ours = mse(ours_model.fixed_point_inverse_transform(ours_model.transform(Nte), init=Nte))
    pca_best = min(mse(PCA(k).fit(Ntr).inverse_transform(PCA(k).fit(Ntr).transform(Nte)))
                   for k in (4, 8, 12, 16, 24, 32))
    sk_best = np.inf
    # the neighbourhood of the best point of a 64-point grid (gamma 0.04..0.32,
    # 32..256 components, alpha 0.1..3) searched once (benchmarks/gamma_rule.py)
    for g in (0.04, 0.08, 0.16):
        for k in (64,):
            for alpha in (0.3, 1.0):
                m = SkKernelPCA(k, kernel="rbf", gamma=g, fit_inverse_transform=True,
                                alpha=alpha).fit(Ntr)
                sk_best = min(sk_best, mse(m.inverse_transform(m.transform(Nte))))
    noisy = mse(Nte)
    assert ours_model.preimage_stats_.fallbacks == 0
    assert ours < 0.93 * sk_best, (ours, sk_best)
    assert ours < 0.75 * pca_best, (ours, pca_best)
    assert ours < 0.35 * noisy


def test_noise_eigenvalue_matches_pure_noise_gram():
    # for pure noise the centred RBF Gram's non-zero eigenvalues average
    # 1 - E k(e_i, e_j) = 1 - (1 + 4 gamma sigma^2)^(-d/2)
    rng = np.random.default_rng(3)
    n, d, sigma = 600, 16, 0.7
    X = rng.normal(0, sigma, (n, d))
    for gamma in (0.01, 0.05, 0.2):
        m = KernelPCA(n - 1, gamma=gamma, eigen_solver="dense").fit(X)
        mean_eig = m.eigenvalues_.sum() / (n - 1)
        assert abs(mean_eig / noise_eigenvalue("rbf", gamma, sigma, d, n) - 1) < 0.02
    lin = KernelPCA(d, kernel="linear", eigen_solver="dense").fit(X)
    assert abs(lin.eigenvalues_.mean() / noise_eigenvalue("linear", 0, sigma, d, n) - 1) < 0.05


def test_noise_rank_keeps_detail_at_low_noise_and_matches_at_high(digits):
    # python -m benchmarks.noise_rank: test MSE, fixed 128 components against the
    # noise rank: 0.0088 vs 0.0070 (noise 0.1), 0.0190 vs 0.0190 (0.25)
    _, Xte, _ = digits
    rng = np.random.default_rng(0)
    X = load_digits().data / 16.0
    X = X[rng.permutation(len(X))][:1000]
    for sigma, factor in ((0.1, 0.85), (0.25, 1.02)):
        r = np.random.default_rng(0)
        Ntr = X + r.normal(0, sigma, X.shape)
        Nte = Xte + r.normal(0, sigma, Xte.shape)
        m = KernelPCA(500, noise_sigma=sigma, eigen_solver="dense").fit(Ntr)
        Z = m.transform(Nte)
        k = m.noise_rank()
        fixed = np.mean((m.fixed_point_inverse_transform(Z[:, :128], init=Nte) - Xte) ** 2)
        auto = np.mean((m.fixed_point_inverse_transform(Z[:, :k], init=Nte) - Xte) ** 2)
        assert auto < factor * fixed, (sigma, k, auto, fixed)
    with pytest.raises(ValueError, match="no noise model for kernel='poly'"):
        KernelPCA(4, kernel="poly").fit(X[:50]).noise_rank(0.1)
