"""One kernel PCA per group: Gram matrix (RBF or linear), exact feature-space
centring, eigenpairs in descending order (LAPACK ``ssyevr`` for the pairs above a
floor only), and the noise levels that the shrinkage compares them with.

Equations in ``docs/method.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import llvmlite.binding as llvm_binding
import numpy as np
from numba import njit, prange, types
from numba.extending import get_cython_function_address

from kpca_denoise.core.kpca import noise_eigenvalue

__all__ = ["fit_groups", "noise_floors", "NoiseFloors"]

# LAPACK's ssyevr (the eigenpairs above a value only) from scipy's Cython LAPACK,
# registered as a named symbol so that the numba kernels that call it can be cached
llvm_binding.add_symbol("kpca_denoise_ssyevr",
                        get_cython_function_address("scipy.linalg.cython_lapack", "ssyevr"))
_ssyevr = types.ExternalFunction("kpca_denoise_ssyevr", types.void(*([types.voidptr] * 21)))


@njit(cache=True, parallel=True, fastmath=True, nogil=True)
def _eig(B, rbf, gamma, floor, every, count, lam_out, V_out, rowmean_out, K_out):
    """Per group: Gram (RBF or linear), exact centring, eigenpairs in descending order.

    ``rowmean_out`` keeps the row means of the uncentred Gram, needed to centre the
    kernel values of new points (stage 2) consistently.  With ``floor > 0`` only the
    eigenpairs with eigenvalues above ``floor`` are computed (LAPACK ``ssyevr``; the
    others are returned as zeros), except in every ``every``-th group (``r % every
    == 0``; 0: none), which gets all of them (the spectrum a run reports).  With
    ``count``, their number ``k`` comes first from the inertia of ``Kc - floor I``
    (a sixth of LAPACK's work), a group with ``k = 0`` skips LAPACK and the others
    ask it for ``k`` pairs.  ``K_out`` (nref, n, n), unless it is empty, receives the
    uncentred Gram.
    """
    nref, n, d = B.shape
    keep_k = K_out.shape[0] == nref
    for r in prange(nref):
        X = B[r]
        K = K_out[r] if keep_k else np.empty((n, n))
        if rbf:
            for i in range(n):
                K[i, i] = 1.0
                for j in range(i + 1, n):
                    s = 0.0
                    for t in range(d):
                        u = X[i, t] - X[j, t]
                        s += u * u
                    v = math.exp(-gamma * s)
                    K[i, j] = v
                    K[j, i] = v
        else:
            # the linear Gram on explicitly centred vectors (better conditioned for images
            # with a large offset); its row means are then 0, which is what centring gives
            m = np.zeros(d)
            for i in range(n):
                for t in range(d):
                    m[t] += X[i, t]
            m /= n
            Xc = np.empty((n, d))
            for i in range(n):
                for t in range(d):
                    Xc[i, t] = X[i, t] - m[t]
            for i in range(n):
                for j in range(i, n):
                    s = 0.0
                    for t in range(d):
                        s += Xc[i, t] * Xc[j, t]
                    K[i, j] = s
                    K[j, i] = s
        rm = np.empty(n)
        for i in range(n):
            s = 0.0
            for j in range(n):
                s += K[i, j]
            rm[i] = s / n
        tm = rm.mean()
        Kc = np.empty((n, n))
        for i in range(n):
            rowmean_out[r, i] = rm[i]
            for j in range(n):
                Kc[i, j] = K[i, j] - rm[i] - rm[j] + tm
        full = floor <= 0.0 or (every > 0 and r % every == 0)
        if not full:
            nk = _count_above(Kc, floor, K if not keep_k else np.empty((n, n))) if count else -1
            if nk == 0:
                for k in range(n):
                    lam_out[r, k] = 0.0
                    for i in range(n):
                        V_out[r, i, k] = 0.0
                continue
            # float32 LAPACK is ~15-25% faster on these small matrices and the kept
            # components are far above float32 round-off; components below 1e-6 of the
            # largest eigenvalue are never used (see the thresholds in _project*)
            # (ssyevr overwrites its input: the full solver, the fallback if LAPACK
            # reports a failure, gets a fresh copy)
            if _eig_above(Kc.astype(np.float32), floor, nk, lam_out[r], V_out[r]):
                continue
        w, v = np.linalg.eigh(Kc.astype(np.float32))
        for k in range(n):
            lam_out[r, k] = w[n - 1 - k]
            for i in range(n):
                V_out[r, i, k] = v[i, n - 1 - k]


@njit(cache=True, fastmath=True, nogil=True)
def _count_above(A, floor, W):
    """The number of eigenvalues of the symmetric ``A`` above ``floor``: the positive
    pivots of the LDL^T factorisation of ``A - floor I`` (Sylvester's law of inertia;
    a zero pivot counts as negative).  ``W`` (n, n) is scratch: its upper triangle is
    overwritten.  About a sixth of a tridiagonalisation's work."""
    n = A.shape[0]
    for i in range(n):
        for j in range(i, n):
            W[i, j] = A[i, j]
        W[i, i] -= floor
    cnt = 0
    for k in range(n):
        p = W[k, k]
        if p > 0.0:
            cnt += 1
        elif p > -1e-300:
            p = -1e-300
        inv = 1.0 / p
        for i in range(k + 1, n):
            f = W[k, i] * inv
            for j in range(i, n):  # rows, contiguous
                W[i, j] -= f * W[k, j]
    return cnt


@njit(cache=True, nogil=True)
def _eig_above(A, floor, k, lam, V):
    """The eigenpairs of the symmetric float32 matrix ``A`` with eigenvalues above
    ``floor``, or its ``k`` leading ones if ``k >= 0`` (descending, in ``lam`` and the
    columns of ``V``; zeros after them) through ``ssyevr``.  False if LAPACK reports a
    failure (``A`` is overwritten)."""
    n = A.shape[0]
    jobz = np.array([ord("V")], np.uint8)
    rng = np.array([ord("V" if k < 0 else "I")], np.uint8)
    uplo = np.array([ord("L")], np.uint8)  # A is symmetric: either storage order
    nn = np.array([n], np.int32)
    vl = np.array([floor], np.float32)
    vu = np.array([np.inf], np.float32)
    il = np.array([n - k + 1 if k >= 0 else 1], np.int32)
    abstol = np.zeros(1, np.float32)
    m = np.zeros(1, np.int32)
    w = np.empty(n, np.float32)
    z = np.empty((n, n), np.float32)  # column j of LAPACK's Z is row j here
    isuppz = np.empty(2 * n, np.int32)
    lwork = np.array([26 * n], np.int32)
    work = np.empty(26 * n, np.float32)
    liwork = np.array([10 * n], np.int32)
    iwork = np.empty(10 * n, np.int32)
    info = np.zeros(1, np.int32)
    _ssyevr(jobz.ctypes, rng.ctypes, uplo.ctypes, nn.ctypes, A.ctypes, nn.ctypes, vl.ctypes,
            vu.ctypes, il.ctypes, nn.ctypes, abstol.ctypes, m.ctypes, w.ctypes, z.ctypes,
            nn.ctypes, isuppz.ctypes, work.ctypes, lwork.ctypes, iwork.ctypes, liwork.ctypes,
            info.ctypes)
    if info[0] != 0:
        return False
    mk = m[0]
    for k in range(n):
        if k < mk:
            lam[k] = w[mk - 1 - k]
            for i in range(n):
                V[i, k] = z[mk - 1 - k, i]
        else:
            lam[k] = 0.0
            for i in range(n):
                V[i, k] = 0.0
    return True


def fit_groups(P: np.ndarray, rbf: bool, gamma: float, floor: float = 0.0,
               gram: bool = False, every: int = 0, count: bool = False):
    """Per-group kernel PCA of the members ``P`` (m, n, d): eigenvalues ``lam`` (m, n)
    descending, eigenvectors ``V`` (m, n, n) in columns and the uncentred Gram's row
    means (m, n).  With ``floor > 0`` only the eigenpairs above it (the rest zeros),
    except in every ``every``-th group (0: none), which gets them all.  ``count``
    counts them first and skips the solver where there are none (worth it when many
    groups have none, as in stage 1 and in the chrominances).  ``gram=True`` adds the
    uncentred Gram matrices (m, n, n), which save the pre-image's first step."""
    m, n, _ = P.shape
    lam = np.empty((m, n))
    V = np.empty((m, n, n))
    rowmean = np.empty((m, n))
    K = np.empty((m, n, n) if gram else (0, 0, 0))
    _eig(P, rbf, gamma, float(floor), int(every), bool(count), lam, V, rowmean, K)
    return (lam, V, rowmean, K) if gram else (lam, V, rowmean)


@dataclass(frozen=True)
class NoiseFloors:
    """Kernel width and noise levels of one pass (``docs/method.md``).

    ``gamma = 1 / (c 2 d sigma^2)``; ``tau1`` the stage-1 threshold (``kappa1`` times
    the noise eigenvalue of the centred group Gram matrix); ``g_x`` and ``kscale``
    correct the noisy-to-pilot kernel values of stage 2 so that on average they equal
    the clean kernel of width ``gamma``; ``tau2`` the stage-2 coefficient noise.
    """

    gamma: float
    tau1: float
    g_x: float
    kscale: float
    tau2: float

    def with_tau2(self, factor: float) -> "NoiseFloors":
        """The same floors with the stage-2 coefficient noise scaled by ``factor``."""
        return replace(self, tau2=self.tau2 * factor)


def noise_floors(sigma: float, d: int, n: int, c: float, rbf: bool, kappa1: float,
                 kappa2: float) -> NoiseFloors:
    """The :class:`NoiseFloors` of groups of ``n`` patches of dimension ``d`` under
    white noise of std ``sigma``, kernel width scale ``c``."""
    gamma = 1.0 / (c * 2.0 * d * sigma * sigma)
    tau1 = noise_eigenvalue("rbf" if rbf else "linear", gamma, sigma, d, n)
    g_x = gamma / max(1.0 - 2.0 * gamma * sigma * sigma, 1e-3)
    kscale = (1.0 + 2.0 * g_x * sigma * sigma) ** (d / 2.0)
    tau2 = kappa2 * (2.0 * gamma * sigma * sigma if rbf else sigma * sigma)
    return NoiseFloors(gamma=gamma, tau1=tau1 * kappa1, g_x=g_x, kscale=kscale, tau2=tau2)
