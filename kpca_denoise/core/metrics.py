"""Image quality measures: PSNR and SSIM (Wang et al. 2004)."""

from __future__ import annotations

import numpy as np
from scipy.ndimage import gaussian_filter

__all__ = ["psnr", "ssim", "data_range_for", "mean_squared_error", "residual_std"]


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


#: rows per band: the measures read a band of rows at a time in float64, so their
#: memory is bounded by the band, not by the image (a 12 Mpx RGB photo in float64
#: is 288 MB per copy, and SSIM needs about ten)
BAND_ROWS = 256
#: the SSIM window: Gaussian sigma 1.5, truncated at 3.5 sigma as scikit-image does;
#: ``gaussian_filter`` reaches ``int(truncate * sigma + 0.5)`` = 5 rows either side
_SSIM_SIGMA, _SSIM_TRUNCATE = 1.5, 3.5
_SSIM_REACH = int(_SSIM_TRUNCATE * _SSIM_SIGMA + 0.5)


def _same_shape(reference, estimate) -> tuple[np.ndarray, np.ndarray]:
    ref, est = np.asarray(reference), np.asarray(estimate)
    if ref.shape != est.shape:
        raise ValueError(f"shapes differ: reference {ref.shape}, estimate {est.shape}")
    return ref, est


def _row_bands(n: int):
    for y0 in range(0, n, BAND_ROWS):
        yield y0, min(n, y0 + BAND_ROWS)


def mean_squared_error(reference: np.ndarray, estimate: np.ndarray) -> float:
    """Mean of ``(reference - estimate)^2`` in float64, a band of rows at a time."""
    ref, est = _same_shape(reference, estimate)
    if ref.size == 0:
        return 0.0
    if ref.ndim == 0:
        return float((float(ref) - float(est)) ** 2)
    total = 0.0
    for y0, y1 in _row_bands(ref.shape[0]):
        d = ref[y0:y1].astype(np.float64) - est[y0:y1].astype(np.float64)
        total += float(np.vdot(d, d))
    return total / ref.size


def residual_std(a: np.ndarray, b: np.ndarray) -> float:
    """Standard deviation of ``a - b`` (as ``np.std``), a band of rows at a time."""
    a, b = _same_shape(a, b)
    if a.size == 0:
        return float("nan")
    if a.ndim == 0:
        return 0.0
    bands = list(_row_bands(a.shape[0]))
    mean = sum(float(np.sum(a[y0:y1].astype(np.float64) - b[y0:y1])) for y0, y1 in bands) / a.size
    ss = 0.0
    for y0, y1 in bands:
        d = a[y0:y1].astype(np.float64) - b[y0:y1] - mean
        ss += float(np.vdot(d, d))
    return float(np.sqrt(ss / a.size))


def psnr(reference: np.ndarray, estimate: np.ndarray, data_range: float) -> float:
    """Peak signal-to-noise ratio in dB; ``inf`` for identical images."""
    mse = mean_squared_error(reference, estimate)
    if mse == 0.0:
        return float("inf")
    return 10.0 * np.log10(data_range**2 / mse)


def _ssim_map(ref: np.ndarray, est: np.ndarray, data_range: float) -> np.ndarray:
    c1 = (0.01 * data_range) ** 2
    c2 = (0.03 * data_range) ** 2

    def filt(a):
        return gaussian_filter(a, _SSIM_SIGMA, truncate=_SSIM_TRUNCATE)

    mx, my = filt(ref), filt(est)
    # unbiased (sample) covariances over the window's (2 reach + 1)^2 pixels, as
    # scikit-image uses (win_size = 11 with its Gaussian weights)
    npix = (2 * _SSIM_REACH + 1) ** 2
    cov_norm = npix / (npix - 1)
    vx = cov_norm * (filt(ref * ref) - mx * mx)
    vy = cov_norm * (filt(est * est) - my * my)
    vxy = cov_norm * (filt(ref * est) - mx * my)
    return ((2 * mx * my + c1) * (2 * vxy + c2)) / ((mx**2 + my**2 + c1) * (vx + vy + c2))


def ssim(reference: np.ndarray, estimate: np.ndarray, data_range: float) -> float:
    """Return the mean structural similarity (SSIM) of ``estimate`` to ``reference``.

    Mean structural similarity with a Gaussian window (sigma 1.5), as in
    Wang et al. (2004) and scikit-image's ``gaussian_weights=True``.  Colour
    images (H, W, C) average the per-channel values.

    Computed a band of rows at a time: each band is filtered with the
    ``_SSIM_REACH`` rows beyond it that the window reaches (the image's own
    border rows are reflected as before), so the map is the whole-image map and
    memory is bounded by the band."""
    ref, est = _same_shape(reference, estimate)
    if ref.ndim == 3:
        return float(np.mean([ssim(ref[..., c], est[..., c], data_range) for c in range(ref.shape[2])]))
    if ref.ndim != 2:
        raise ValueError(f"ssim needs a 2-D or (H, W, C) image, got shape {ref.shape}")
    H, W = ref.shape
    pad = _SSIM_REACH  # (win_size - 1) // 2, crop the border like scikit-image
    r0, r1, c0, c1 = (pad, H - pad, pad, W - pad) if min(H, W) > 2 * pad else (0, H, 0, W)
    total, count = 0.0, 0
    for y0 in range(r0, r1, BAND_ROWS):
        y1 = min(r1, y0 + BAND_ROWS)
        a0, a1 = max(0, y0 - _SSIM_REACH), min(H, y1 + _SSIM_REACH)
        s = _ssim_map(ref[a0:a1].astype(np.float64), est[a0:a1].astype(np.float64), data_range)
        part = s[y0 - a0:y1 - a0, c0:c1]
        total += float(part.sum())
        count += part.size
    return total / count
