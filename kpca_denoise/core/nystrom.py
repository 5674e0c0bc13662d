"""Nyström (landmark) approximation of kernel PCA.

With m landmarks ``l_1..l_m`` chosen from the N training samples, every
feature vector is replaced by its orthogonal projection onto
``span{Phi(l_j)}``.  In the orthonormal basis ``B = Phi_m U_r S_r^{-1/2}`` of
that span (``K_mm = U S U^T``, only eigenvalues above a relative threshold
kept) the coordinates are the approximate feature map

    phi~(x) = S_r^{-1/2} U_r^T k_m(x),      k_m(x) = (k(x, l_j))_j,

i.e. ``K_mm^{-1/2} k_m(x)`` up to the rotation ``U_r`` (Williams & Seeger
2001).  Kernel PCA becomes linear PCA of the centred ``phi~`` of all N
samples: the r x r matrix ``C = sum_i (phi~_i - mu)(phi~_i - mu)^T`` has the
non-zero eigenvalues of the centred approximate Gram matrix
``L K~ L`` (``K~ = K_Nm K_mm^+ K_mN``), so they are on the same scale as the
exact mode's ``eigenvalues_``.  Cost O(N m r + N r^2 + m^3) time and
O(block * m + r^2) memory instead of O(N^2).

A projection is an expansion over the landmarks: with ``C``'s eigenvectors E,
``P Phi(x) = B mu + B E z = Phi_m c`` with

    c = U_r S_r^{-1/2} (mu + E z) = mean_weights + alphas z,

``mean_weights = U_r S_r^{-1/2} mu`` (the projection of the training mean
``(1/N) sum_i Phi(x_i)`` onto the span; the centring term) and
``alphas = U_r S_r^{-1/2} E`` (the unit-length axes).  With m = N these are
exactly the exact mode's centring-corrected weights
(:func:`kpca_denoise.core.preimage.expansion_weights`), which sum to 1.

References
----------
Williams, Seeger (2001), "Using the Nyström method to speed up kernel
machines", NIPS 13.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import scipy.linalg

from . import eigen
from .progress import ProgressCallback, check_cancel, report

__all__ = [
    "select_landmarks",
    "landmark_basis",
    "fit_landmark_pca",
    "landmark_weights",
    "LANDMARK_RTOL",
]

#: Eigenvalues of K_mm below ``rtol * largest`` are dropped, per precision of
#: the N x m kernel blocks: float32 kernel values carry ~1e-7 relative error,
#: which ``S^{-1/2}`` amplifies in the kept directions.  Measured on 2000
#: noisy 8x8 camera patches (sigma 25, width scale 8, 16 components, m = N,
#: against the exact float64 fit): float64 at 1e-10 keeps all 2000 and agrees
#: to 5e-14 (eigenvalues) / 2e-13 (projections); float32 at 1e-6 keeps 515
#: and agrees to 7e-7 / 8e-6, no worse than float32 without truncation
#: (1.2e-6 / 8e-6: the float32 kernel's round-off dominates).
LANDMARK_RTOL = {"float32": 1e-6, "float64": 1e-10}


def select_landmarks(n: int, m: int, random_state: int | None = 0) -> np.ndarray:
    """Indices of m landmarks among n samples: uniform without replacement, sorted.

    The first m of one random permutation, so for a fixed ``random_state`` a
    larger m only adds landmarks.  The Nyström Gram matrix then grows in the
    Loewner order towards K, and by Weyl's inequality every eigenvalue of the
    centred approximation approaches the exact one monotonically as m grows.
    m = n returns ``arange(n)`` (every sample, in order).
    """
    if m >= n:
        return np.arange(n)
    rng = np.random.default_rng(random_state)
    return np.sort(rng.permutation(n)[:m])


def landmark_basis(K_mm: np.ndarray, rtol: float) -> tuple[np.ndarray, np.ndarray]:
    """Guarded inverse square root of the landmark kernel matrix.

    Returns ``T = U_r S_r^{-1/2}`` (m, r) and the kept eigenvalues ``s`` (r,),
    descending, from ``K_mm = U S U^T`` (float64).  Only eigenvalues
    ``s > rtol * s_max`` are kept, so no division is by a vanishing (or, for
    indefinite kernels such as 'sigmoid', negative) eigenvalue; r may be 0
    when K_mm has no positive eigenvalue.
    """
    K = np.asarray(K_mm, dtype=np.float64)
    K = 0.5 * (K + K.T)  # round-off asymmetry of non-RBF kernels
    s, U = scipy.linalg.eigh(K, driver="evd")
    s, U = s[::-1], U[:, ::-1]
    smax = float(s[0]) if s.size else 0.0
    keep = s > rtol * smax if smax > 0 else np.zeros(s.shape, dtype=bool)
    s = s[keep].copy()
    return U[:, keep] / np.sqrt(s), s


def fit_landmark_pca(
    X: np.ndarray,
    landmarks: np.ndarray,
    kernel: Callable[[np.ndarray, np.ndarray], np.ndarray],
    n_components: int,
    *,
    gram: Callable[[np.ndarray], np.ndarray] | None = None,
    dtype: np.dtype,
    rtol: float,
    eigen_solver: str = "auto",
    tol: float = 1e-4,
    max_iter: int | None = None,
    random_state: int | None = 0,
    block: int = 2048,
    progress: ProgressCallback | None = None,
    cancel: Any = None,
) -> dict:
    """Linear PCA of the centred Nyström features of all rows of X.

    Parameters
    ----------
    X : (N, d) training samples; landmarks : (m, d).
    kernel : ``kernel(Y, L)`` -> (len(Y), m) kernel values, called on row
        blocks of X already cast to ``dtype`` and on ``landmarks`` cast to it.
    gram : ``gram(L)`` -> (m, m) kernel matrix of the landmarks, called with
        float64 landmarks (default ``kernel(L, L)``).  K_mm is float64: it is
        small, and its small eigenvalues are inverted.
    dtype : precision of the N x m kernel blocks and of the product with
        the basis (the O(N m r) part); the covariance is accumulated in float64.

    Returns a dict with ``eigenvalues`` (k,), ``alphas`` (m, k),
    ``mean_weights`` (m,), ``offset`` (k,) (``mu . E``, so that
    ``z = k_m(x) alphas - offset``), ``projections`` (N, k) of the training
    samples (``eigenvectors * sqrt(eigenvalues)`` of ``L K~ L``), ``row_means``
    (N,), ``mean_all``, ``rank`` (r), ``landmark_eigenvalues`` (r,),
    ``solver``, ``iterations``, ``n_negative``.  Signs are not yet fixed.
    """
    dt = np.dtype(dtype)
    n = X.shape[0]
    k = int(n_components)
    nblocks = max(1, -(-n // block))
    total = nblocks + 1
    report(progress, "gram", 0, total, message="landmark kernel matrix")
    check_cancel(cancel)
    L64 = np.ascontiguousarray(landmarks, dtype=np.float64)
    K_mm = gram(L64) if gram is not None else kernel(L64, L64)
    T, s = landmark_basis(K_mm, rtol)
    del K_mm
    report(progress, "gram", 1, total, message="landmark basis")
    r = T.shape[1]
    Ld = np.ascontiguousarray(landmarks, dtype=dt)
    Td = T.astype(dt)
    # accumulate the covariance around the landmarks' own mean feature
    # (phi~(l_j) = S^{1/2} U^T e_j), close to mu, so that the final
    # ``C - N (mu - s0)(mu - s0)^T`` does not cancel
    s0 = (s * T.sum(axis=0) / max(T.shape[0], 1)).astype(dt)
    C = np.zeros((r, r))
    fsum = np.zeros(r)
    for bi, i0 in enumerate(range(0, n, block)):
        check_cancel(cancel)
        Kb = kernel(np.ascontiguousarray(X[i0:i0 + block], dtype=dt), Ld)
        F = Kb.astype(dt, copy=False) @ Td
        F -= s0
        fsum += F.sum(axis=0, dtype=np.float64)
        C += F.T @ F
        report(progress, "gram", bi + 2, total)
    dmu = fsum / n
    C -= n * np.outer(dmu, dmu)
    mu = s0.astype(np.float64) + dmu
    C = 0.5 * (C + C.T)
    ke = min(k, r)
    if ke > 0:
        w, E, info = eigen.eigh_top(C, ke, solver=eigen_solver, tol=tol, max_iter=max_iter,
                                    random_state=random_state, progress=progress, cancel=cancel)
    else:
        w, E, info = np.zeros(0), np.zeros((0, 0)), {"solver": "none", "iterations": 0}
    n_negative = int((w < 0).sum())
    w = np.where(w > 0, w, 0.0)
    # fewer positive landmark eigenvalues than components: zero axes, as the
    # exact mode gives for zero eigenvalues
    w = np.concatenate([w, np.zeros(k - ke)])
    E = np.concatenate([E, np.zeros((r, k - ke))], axis=1)
    alphas = T @ E
    mean_weights = T @ mu
    offset = mu @ E
    # second, cheap pass (O(N m (d + k))): training projections, which give
    # the N-vector eigenvectors of L K~ L for the sign rule and fit_transform
    Z = np.empty((n, k))
    rows = np.empty(n)
    A = np.concatenate([alphas, mean_weights[:, None]], axis=1)
    report(progress, "projection", 0, n)
    for i0 in range(0, n, block):
        check_cancel(cancel)
        Kb = kernel(np.ascontiguousarray(X[i0:i0 + block], dtype=dt), Ld)
        P = Kb.astype(np.float64) @ A
        Z[i0:i0 + block] = P[:, :k] - offset
        rows[i0:i0 + block] = P[:, k]
        report(progress, "projection", min(i0 + block, n), n)
    return dict(eigenvalues=w, alphas=alphas, mean_weights=mean_weights, offset=offset,
                projections=Z, row_means=rows, mean_all=float(mu @ mu), rank=r,
                landmark_eigenvalues=s, solver=info["solver"], iterations=info["iterations"],
                n_negative=n_negative)


def landmark_weights(Z: np.ndarray, alphas: np.ndarray, mean_weights: np.ndarray, *,
                     normalise: bool = True) -> np.ndarray:
    """Expansion weights of ``P Phi(x)`` over the landmarks, shape (M, m) float64.

    ``c = mean_weights + Z alphas^T`` (Z (M, r), alphas (m, r) for r <= k
    components).  With ``normalise`` each row is divided by its sum when that
    sum is clearly positive: the RBF fixed point
    ``z <- sum_j c_j k(z, l_j) l_j / sum_j c_j k(z, l_j)`` does not change
    under a positive scaling of c, and rows summing to 1 make the restart
    point ``c @ landmarks`` an affine combination, as in the exact mode.
    (With m = N the sums are already 1.)  Use ``normalise=False`` for the
    linear kernel, where ``c @ landmarks`` itself is the pre-image.
    """
    W = np.asarray(Z, dtype=np.float64) @ np.asarray(alphas, dtype=np.float64).T
    W += np.asarray(mean_weights, dtype=np.float64)[None, :]
    if normalise:
        tot = W.sum(axis=1)
        ok = tot > 1e-8 * np.abs(W).sum(axis=1)
        W[ok] /= tot[ok][:, None]
    return W
