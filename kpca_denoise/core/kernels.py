"""Kernel functions and Gram matrices.

Conventions follow scikit-learn's ``sklearn.metrics.pairwise`` so that results
can be compared directly:

* RBF:        ``k(x, y) = exp(-gamma * ||x - y||^2)``
* polynomial: ``k(x, y) = (gamma * <x, y> + coef0) ** degree``
* sigmoid:    ``k(x, y) = tanh(gamma * <x, y> + coef0)``

The RBF Gram matrix is one BLAS symmetric rank-d update (SYRK: only one
triangle, so symmetry halves the work) for the inner products, followed by a
fused, parallel numba pass that turns inner products into kernel values in
place and mirrors them into the other triangle tile by tile.  The pass works
in block rows so that progress can be reported and cancellation honoured
between blocks.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.linalg.blas
from numba import njit, prange

from .progress import ProgressCallback, check_cancel, report

__all__ = [
    "KERNELS",
    "rbf_gram",
    "rbf_cross",
    "kernel_matrix",
    "squared_norms",
    "centre_gram",
]

KERNELS = ("rbf", "poly", "sigmoid", "linear")

_TILE = 64


def _float_dtype(X: np.ndarray) -> np.dtype:
    return X.dtype if X.dtype in (np.float32, np.float64) else np.dtype(np.float64)


def squared_norms(X: np.ndarray) -> np.ndarray:
    """Return the row-wise squared Euclidean norms of X.

    Accumulated in float64, returned in X's dtype."""
    return np.einsum("ij,ij->i", X, X, dtype=np.float64).astype(X.dtype, copy=False)


@njit(inline="always", cache=True)
def _expf_poly(x):  # pragma: no cover - numba
    """exp(x) for float32 x in [-ln2/2, ln2/2]: Cephes' degree-6 minimax polynomial."""
    p = np.float32(1.9875691500e-4)
    p = p * x + np.float32(1.3981999507e-3)
    p = p * x + np.float32(8.3334519073e-3)
    p = p * x + np.float32(4.1665795894e-2)
    p = p * x + np.float32(1.6666665459e-1)
    p = p * x + np.float32(5.0000001201e-1)
    return p * x * x + x + np.float32(1.0)


@njit(inline="always", cache=True)
def _neg_gamma_d_expf(out, sq_r, sqc, gamma, kf, ebits):  # pragma: no cover - numba
    """out[j] = exp(-gamma * max(sq_r + sqc[j] - 2 out[j], 0)) in place, float32.

    ``out`` holds inner products on entry.  Cody-Waite reduction
    y = k ln2 + x, Cephes' expf polynomial (relative error < 1e-6, about
    float32 rounding), and 2**k built as float bits in ``ebits``.  numba has
    no vector exp without SVML, and the scalar libm call made the Gram pass
    2x slower than the GEMM.  The three loops are separate on purpose: LLVM
    vectorises each of them (8 lanes with AVX2) but not the fused loop, which
    ran 7x slower.  ``kf`` and ``ebits`` are scratch of at least len(out).
    """
    m = out.shape[0]
    for j in range(m):
        y = -gamma * (sq_r + sqc[j] - np.float32(2.0) * out[j])
        # y <= 0 up to round-off; below -87 expf leaves the normal range
        y = max(min(y, np.float32(0.0)), np.float32(-87.0))
        k = np.floor(y * np.float32(1.4426950408889634) + np.float32(0.5))
        kf[j] = k
        out[j] = y - k * np.float32(0.693359375) + k * np.float32(2.12194440e-4)
    for j in range(m):
        ebits[j] = (np.int32(kf[j]) + np.int32(127)) << 23
    scale = ebits[:m].view(np.float32)
    for j in range(m):
        out[j] = _expf_poly(out[j]) * scale[j]


@njit(inline="always", cache=True)
def exp_nonpositive(x, kf, ebits):  # pragma: no cover - numba
    """Exponentiate float64 ``x <= 0`` in place, vectorised.

    ``x[j] = exp(x[j])`` in place for float64 ``x <= 0`` (a kernel's exponent),
    vectorised: Cody-Waite reduction ``x = k ln2 + r``, ``|r| <= ln2 / 2``, Taylor
    polynomial of degree 13 (truncation below 1e-17), ``2**k`` built as float bits in
    ``ebits``; within 2 units in the last place of ``math.exp``.  Below -708 (where
    exp leaves the normal range) it gives exp(-708), about 3e-308.  Three loops, so
    that LLVM vectorises each (see :func:`_neg_gamma_d_expf`); ``kf`` and ``ebits``
    (int64) are scratch of at least len(x)."""
    m = x.shape[0]
    for j in range(m):
        y = max(min(x[j], 0.0), -708.0)
        k = np.floor(y * 1.4426950408889634 + 0.5)
        kf[j] = k
        x[j] = (y - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10
    for j in range(m):
        ebits[j] = (np.int64(kf[j]) + np.int64(1023)) << 52
    scale = ebits[:m].view(np.float64)
    for j in range(m):
        r = x[j]
        p = 1.0 / 6227020800.0
        p = p * r + 1.0 / 479001600.0
        p = p * r + 1.0 / 39916800.0
        p = p * r + 1.0 / 3628800.0
        p = p * r + 1.0 / 362880.0
        p = p * r + 1.0 / 40320.0
        p = p * r + 1.0 / 5040.0
        p = p * r + 1.0 / 720.0
        p = p * r + 1.0 / 120.0
        p = p * r + 1.0 / 24.0
        p = p * r + 1.0 / 6.0
        p = p * r + 0.5
        p = p * r + 1.0
        x[j] = (p * r + 1.0) * scale[j]


@njit(parallel=True, fastmath=True, cache=True, nogil=True)
def _rbf_rows_inplace(K, sq, i0, i1, gamma):  # pragma: no cover - numba
    # K holds <x_r, x_c> in its lower triangle (c <= r), from one SYRK.  For
    # rows i0..i1 turn them into kernel values, then mirror them into the
    # upper triangle.  Each prange task owns a tile of columns, so the mirror
    # writes (rows of the tile's columns) never collide and stay in cache.
    ntiles = (i1 + _TILE - 1) // _TILE
    for t in prange(ntiles):
        c0 = t * _TILE
        c1 = min(c0 + _TILE, i1)
        for r in range(max(i0, c0), i1):
            sr = sq[r]
            for c in range(c0, min(c1, r + 1)):
                d = sr + sq[c] - 2.0 * K[r, c]
                # cancellation in |x|^2 + |y|^2 - 2<x,y> can go slightly negative
                if d < 0.0:
                    d = 0.0
                K[r, c] = math.exp(-gamma * d)
        _mirror_tile(K, i0, i1, c0, c1)


@njit(parallel=True, fastmath=True, cache=True, nogil=True)
def _rbf_rows_inplace_f32(K, sq, i0, i1, gamma):  # pragma: no cover - numba
    # float32 variant with the vectorised exp of _neg_gamma_d_expf
    ntiles = (i1 + _TILE - 1) // _TILE
    for t in prange(ntiles):
        c0 = t * _TILE
        c1 = min(c0 + _TILE, i1)
        kf = np.empty(_TILE, np.float32)
        ebits = np.empty(_TILE, np.int32)
        for r in range(max(i0, c0), i1):
            cend = min(c1, r + 1)
            _neg_gamma_d_expf(K[r, c0:cend], sq[r], sq[c0:cend], gamma, kf, ebits)
        _mirror_tile(K, i0, i1, c0, c1)


@njit(inline="always", cache=True)
def _mirror_tile(K, i0, i1, c0, c1):  # pragma: no cover - numba
    # upper triangle K[c, r] (c < r) from the lower K[r, c], for rows i0..i1
    for c in range(c0, c1):
        for r in range(max(i0, c + 1), i1):
            K[c, r] = K[r, c]


@njit(parallel=True, fastmath=True, cache=True, nogil=True)
def _rbf_fill_cross(G, sqY, sqX, gamma, out):  # pragma: no cover - numba
    m, n = G.shape
    for i in prange(m):
        si = sqY[i]
        for j in range(n):
            d = si + sqX[j] - 2.0 * G[i, j]
            if d < 0.0:
                d = 0.0
            out[i, j] = math.exp(-gamma * d)


@njit(parallel=True, fastmath=True, cache=True, nogil=True)
def _rbf_fill_cross_f32(G, sqY, sqX, gamma, out):  # pragma: no cover - numba
    # the vectorised exp of _neg_gamma_d_expf, row by row
    m, n = G.shape
    for i in prange(m):
        kf = np.empty(n, np.float32)
        ebits = np.empty(n, np.int32)
        row = out[i]
        row[:] = G[i]
        _neg_gamma_d_expf(row, sqY[i], sqX, gamma, kf, ebits)


def rbf_gram(
    X: np.ndarray,
    gamma: float,
    *,
    block: int = 256,
    progress: ProgressCallback | None = None,
    cancel: Any = None,
) -> np.ndarray:
    """RBF Gram matrix ``K[i, j] = exp(-gamma * ||x_i - x_j||^2)``.

    Parameters
    ----------
    X : ndarray, shape (n, d), float32 or float64
        Samples as rows.  Other dtypes are converted to float64.
    gamma : float
        Kernel width parameter, > 0 (scikit-learn's convention).
    block : int
        Rows per block; progress is reported and cancellation checked per block.
    progress, cancel
        See :mod:`kpca_denoise.core.progress`.  Stage name ``"gram"``.

    Returns
    -------
    K : ndarray, shape (n, n), X's float dtype, symmetric with unit diagonal.
    """
    X = np.ascontiguousarray(X, dtype=_float_dtype(np.asarray(X)))
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features), got shape {X.shape}")
    if not (np.isfinite(gamma) and gamma > 0):
        raise ValueError(f"gamma must be a positive finite number, got {gamma!r}")
    n = X.shape[0]
    sq = squared_norms(X)
    # all inner products in one symmetric rank-d update (half a GEMM's work);
    # its Fortran-order upper triangle is the C-order lower triangle of K.
    # One BLAS call, then only numba passes: alternating BLAS and numba
    # thread pools block by block made the numba pass 2x slower here.
    syrk = scipy.linalg.blas.ssyrk if X.dtype == np.float32 else scipy.linalg.blas.dsyrk
    report(progress, "gram", 0, max(1, -(-n // block)))
    check_cancel(cancel)
    # SYRK into an array numpy allocated: numpy advises huge pages for large
    # arrays, the f2py-allocated result gets 4 kB pages, and touching the
    # other triangle's fresh pages in the mirror then cost a third of the
    # pass.  np.zeros, not np.empty: no reliance on BLAS ignoring C at beta=0.
    K = syrk(1.0, X, beta=0.0, c=np.zeros((n, n), X.dtype, order="F"), overwrite_c=1).T
    fill = _rbf_rows_inplace_f32 if X.dtype == np.float32 else _rbf_rows_inplace
    g = X.dtype.type(gamma)
    nblocks = max(1, -(-n // block))
    for bi, i0 in enumerate(range(0, n, block)):
        check_cancel(cancel)
        fill(K, sq, i0, min(i0 + block, n), g)
        report(progress, "gram", bi + 1, nblocks)
    # ||x - x|| = 0 exactly; the float32 |x|^2 + |x|^2 - 2<x,x> is off by round-off
    np.fill_diagonal(K, 1.0)
    return K


@njit(parallel=True, cache=True, nogil=True)
def _row_means(K):  # pragma: no cover - numba
    n, m = K.shape
    out = np.empty(n)
    for i in prange(n):
        acc = 0.0
        for j in range(m):
            acc += K[i, j]
        out[i] = acc / m
    return out


@njit(parallel=True, fastmath=True, cache=True, nogil=True)
def _centre_inplace(K, rows, cols, mean_all):  # pragma: no cover - numba
    n, m = K.shape
    for i in prange(n):
        ci = mean_all - cols[i]
        for j in range(m):
            K[i, j] += ci - rows[j]


def centre_gram(K: np.ndarray, symmetric: bool = False) -> tuple[np.ndarray, np.ndarray, float]:
    """Centre a Gram matrix in feature space, in place.

    ``K~ = L K L``, ``L = I - 11^T/n``, that is
    ``K~[i, j] = K[i, j] - mean_a K[a, j] - mean_b K[i, b] + mean_ab K[a, b]``.
    Returns ``(column means, row means, mean)`` (float64; the column means
    are scikit-learn's ``K_fit_rows_``).  With ``symmetric`` the row means
    are taken as the column means (one pass less).  Two parallel passes over
    K instead of numpy's five; sums are accumulated in float64.
    """
    rows = _row_means(K)
    cols_means = rows if symmetric else np.asarray(K.mean(axis=0, dtype=np.float64))
    mean_all = float(rows.mean())
    _centre_inplace(K, cols_means.astype(K.dtype), rows.astype(K.dtype), K.dtype.type(mean_all))
    return cols_means, rows, mean_all


def rbf_cross(
    Y: np.ndarray,
    X: np.ndarray,
    gamma: float,
    *,
    sqX: np.ndarray | None = None,
) -> np.ndarray:
    """Cross kernel ``K[i, j] = exp(-gamma * ||y_i - x_j||^2)``, shape (m, n)."""
    dt = np.result_type(_float_dtype(Y), _float_dtype(X))
    Y = np.ascontiguousarray(Y, dtype=dt)
    X = np.ascontiguousarray(X, dtype=dt)
    if sqX is None:
        sqX = squared_norms(X)
    G = Y @ X.T
    fill = _rbf_fill_cross_f32 if dt == np.float32 else _rbf_fill_cross
    # in place: G's entries are read before each is overwritten
    fill(G, squared_norms(Y), sqX.astype(dt, copy=False), dt.type(gamma), G)
    return G


def kernel_matrix(
    Y: np.ndarray,
    X: np.ndarray,
    kernel: str,
    *,
    gamma: float,
    degree: float = 3,
    coef0: float = 1.0,
) -> np.ndarray:
    """Kernel values between rows of Y (m, d) and rows of X (n, d), shape (m, n)."""
    if kernel == "rbf":
        return rbf_cross(Y, X, gamma)
    dt = np.result_type(_float_dtype(Y), _float_dtype(X))
    G = np.asarray(Y, dtype=dt) @ np.asarray(X, dtype=dt).T
    if kernel == "linear":
        return G
    if kernel == "poly":
        G *= gamma
        G += coef0
        return G**degree
    if kernel == "sigmoid":
        G *= gamma
        G += coef0
        return np.tanh(G, out=G)
    raise ValueError(f"unknown kernel {kernel!r}; use one of {', '.join(KERNELS)}")
