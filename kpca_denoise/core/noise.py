"""Noise-level estimation for additive white Gaussian noise.

``estimate_sigma_pca`` follows Chen, Zhu & Heng (2015), "An efficient
statistical method for image noise level estimation" (ICCV): the eigenvalues
of the covariance of many patches split into signal directions (large) and
noise-only directions whose eigenvalues are all about sigma^2.  Starting from
all eigenvalues and dropping the largest one at a time, the first tail whose
mean is not above its median is taken as the noise-only set.
"""

from __future__ import annotations

import numpy as np

from .patches import extract_patches

__all__ = ["estimate_sigma_pca", "estimate_sigma_image"]


def estimate_sigma_pca(samples: np.ndarray) -> float:
    """Noise standard deviation from samples as rows, shape (N, d), d >= 4.

    Works for image patches and for patch sets (digits) alike; returns 0.0
    for noise-free data with exactly flat directions.
    """
    X = np.asarray(samples, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] < 2 or X.shape[1] < 4:
        raise ValueError(
            f"noise estimation needs at least 2 samples of dimension >= 4, got shape {X.shape}"
        )
    Xc = X - X.mean(axis=0)
    C = Xc.T @ Xc / max(X.shape[0] - 1, 1)
    lam = np.sort(np.clip(np.linalg.eigvalsh(C), 0.0, None))[::-1]
    d = lam.size
    for i in range(d):
        tail = lam[i:]
        if tail.mean() <= np.median(tail):
            return float(np.sqrt(tail.mean()))
    return float(np.sqrt(lam[-1]))


def estimate_sigma_image(image: np.ndarray, *, patch_size: int = 7, max_patches: int = 50000,
                         random_state: int = 0) -> float:
    """Noise standard deviation of a single-channel image (H, W), in its units."""
    img = np.asarray(image, dtype=np.float64)
    p = min(patch_size, img.shape[0], img.shape[1])
    if p < 2:
        raise ValueError(f"image of shape {img.shape} is too small to estimate noise")
    P, _ = extract_patches(img, p, 1)
    if P.shape[0] > max_patches:
        idx = np.random.default_rng(random_state).choice(P.shape[0], max_patches, replace=False)
        P = P[idx]
    return estimate_sigma_pca(P)
