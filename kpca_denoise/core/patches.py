"""Patch extraction and reassembly (plain and weighted overlap averaging) for
single-channel images."""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["patch_positions", "extract_patches", "reassemble", "accumulate_groups"]


def patch_positions(length: int, patch_size: int, stride: int) -> np.ndarray:
    """Return the top-left coordinates of patches along one axis.

    Top-left coordinates along one axis: every ``stride``, plus the last
    position ``length - patch_size`` so that the border is always covered."""
    if patch_size > length:
        raise ValueError(f"patch size {patch_size} is larger than the image side {length}")
    pos = np.arange(0, length - patch_size + 1, stride)
    if pos[-1] != length - patch_size:
        pos = np.append(pos, length - patch_size)
    return pos


def extract_patches(
    image: np.ndarray, patch_size: int, stride: int
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """All patches on a stride grid, as rows.

    Returns ``(P, (ys, xs))`` where P has shape (len(ys) * len(xs), p * p),
    row-major over the grid, in the image's dtype.
    """
    if patch_size < 1 or stride < 1:
        raise ValueError(f"patch_size and stride must be >= 1, got {patch_size} and {stride}")
    img = np.asarray(image)
    if img.ndim != 2:
        raise ValueError(f"expected a single-channel (H, W) image, got shape {img.shape}")
    ys = patch_positions(img.shape[0], patch_size, stride)
    xs = patch_positions(img.shape[1], patch_size, stride)
    win = np.lib.stride_tricks.sliding_window_view(img, (patch_size, patch_size))
    P = win[ys][:, xs].reshape(len(ys) * len(xs), patch_size * patch_size)
    return np.ascontiguousarray(P), (ys, xs)


def reassemble(
    P: np.ndarray,
    positions: tuple[np.ndarray, np.ndarray],
    shape: tuple[int, int],
    patch_size: int,
    weights: np.ndarray | None = None,
) -> np.ndarray:
    """Average overlapping patches back into an image of ``shape`` (float64).

    ``weights`` (one per patch) turns the plain average into a weighted one.
    """
    ys, xs = positions
    p = patch_size
    grid = np.asarray(P, dtype=np.float64).reshape(len(ys), len(xs), p, p)
    wgrid = np.ones((len(ys), len(xs))) if weights is None else np.asarray(
        weights, dtype=np.float64).reshape(len(ys), len(xs))
    acc = np.zeros(shape)
    cnt = np.zeros(shape)
    for a in range(p):
        rows = (ys + a)[:, None]
        for b in range(p):
            cols = (xs + b)[None, :]
            # indices inside one (a, b) slice are distinct, so += is exact
            acc[rows, cols] += grid[:, :, a, b] * wgrid
            cnt[rows, cols] += wgrid
    return acc / np.maximum(cnt, np.finfo(float).tiny)


@njit(cache=True, nogil=True)
def _aggregate(Est, aggw, gy, gx, p, num, den, win):
    """Serial weighted overlap accumulation (serial: deterministic, no write races)."""
    nref, nr, n, d = Est.shape
    for r in range(nref):
        for q in range(nr):
            for i in range(n):
                y = gy[r, i]
                x = gx[r, i]
                w = aggw[r, q, i]
                for a in range(p):
                    for b in range(p):
                        ww = w * win[a, b]
                        num[q, y + a, x + b] += ww * Est[r, q, i, a * p + b]
                        den[q, y + a, x + b] += ww


def accumulate_groups(Est: np.ndarray, aggw: np.ndarray, gy: np.ndarray, gx: np.ndarray, p: int,
                      num: np.ndarray, den: np.ndarray, win: np.ndarray) -> None:
    """Add grouped patch estimates and their weights into an overlap average.

    Overlap averaging of grouped estimates, accumulated: adds each member's patch
    estimate ``Est`` (m, nr, n, p*p), weighted by ``aggw`` (m, nr, n) times the window
    ``win`` (p, p), at its position ``(gy, gx)`` (m, n) into ``num`` and the weights into
    ``den`` (both (nr, H, W)); the image is ``num / den`` once every chunk is in."""
    _aggregate(Est, aggw, gy, gx, p, num, den, win)
