"""Image quality measures: PSNR and SSIM (Wang et al. 2004)."""

from __future__ import annotations

import numpy as np
from scipy.ndimage import gaussian_filter

__all__ = ["psnr", "ssim", "data_range_for"]


def data_range_for(dtype: np.dtype, reference: np.ndarray | None = None) -> float:
    """Peak value range: the dtype's for integers, the reference's span for floats."""
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return float(info.max - info.min)
    if reference is None:
        return 1.0
    span = float(np.max(reference) - np.min(reference))
    return span if span > 0 else 1.0


def psnr(reference: np.ndarray, estimate: np.ndarray, data_range: float) -> float:
    """Peak signal-to-noise ratio in dB; ``inf`` for identical images."""
    ref = np.asarray(reference, dtype=np.float64)
    est = np.asarray(estimate, dtype=np.float64)
    if ref.shape != est.shape:
        raise ValueError(f"shapes differ: reference {ref.shape}, estimate {est.shape}")
    mse = float(np.mean((ref - est) ** 2))
    if mse == 0.0:
        return float("inf")
    return 10.0 * np.log10(data_range**2 / mse)


def ssim(reference: np.ndarray, estimate: np.ndarray, data_range: float) -> float:
    """Mean structural similarity with a Gaussian window (sigma 1.5), as in
    Wang et al. (2004) and scikit-image's ``gaussian_weights=True``.  Colour
    images (H, W, C) average the per-channel values."""
    ref = np.asarray(reference, dtype=np.float64)
    est = np.asarray(estimate, dtype=np.float64)
    if ref.shape != est.shape:
        raise ValueError(f"shapes differ: reference {ref.shape}, estimate {est.shape}")
    if ref.ndim == 3:
        return float(np.mean([ssim(ref[..., c], est[..., c], data_range) for c in range(ref.shape[2])]))
    c1 = (0.01 * data_range) ** 2
    c2 = (0.03 * data_range) ** 2

    def filt(a):
        return gaussian_filter(a, 1.5, truncate=3.5)

    mx, my = filt(ref), filt(est)
    # unbiased (sample) covariances, as scikit-image uses
    npix = 49
    cov_norm = npix / (npix - 1)
    vx = cov_norm * (filt(ref * ref) - mx * mx)
    vy = cov_norm * (filt(est * est) - my * my)
    vxy = cov_norm * (filt(ref * est) - mx * my)
    s = ((2 * mx * my + c1) * (2 * vxy + c2)) / ((mx**2 + my**2 + c1) * (vx + vy + c2))
    pad = 3  # (win_size - 1) // 2, crop the border like scikit-image
    return float(s[pad:-pad, pad:-pad].mean()) if min(s.shape) > 2 * pad else float(s.mean())
