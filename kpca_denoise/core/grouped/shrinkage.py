"""Shrinkage of each group's kernel coefficients and the expansion weights of the
shrunk projections (centring-corrected, so that they sum to one).

Stage 1 keeps a group's own components above a threshold (:func:`shrink_own`) and
takes one Wiener step on the patch means (:func:`correct_means`); stage 2 projects
the noisy members on the pilot group's kernel PCA and weights each coefficient with
the pilot's power on its component (:func:`shrink_pilot`).  Each estimate's weight
in the overlap average is ``1 / (1 + sum_k w_k^2)``.

A rank of ``-1`` (auto) is that shrinkage.  An explicit rank ``r`` keeps the ``r``
leading components of the noisy group's own kernel PCA whole (``w_k = 1``, stage-1
weights with no threshold) and drops the rest, so low ranks smooth and high ranks
keep noise.  See ``docs/method.md``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from kpca_denoise.core.kernels import exp_nonpositive
from kpca_denoise.core.parallel import run_parts

from .group_pca import NoiseFloors

__all__ = ["shrink_own", "shrink_pilot", "correct_means", "eigen_floor", "STAGE2_CUT"]

#: stage-2 components whose pilot eigenvalue is below ``STAGE2_CUT * n * tau2`` are
#: dropped: their Wiener weights are ~0 for every member, and the pilot's residual
#: noise lives there (``docs/options.md``)
STAGE2_CUT = 0.1


@njit(cache=True, fastmath=True, nogil=True)
def _project1(lam, V, tau, ranks, Gam, aggw, kept, r0, r1):
    """Stage 1, groups ``r0 <= r < r1``: hard threshold of the group's own kernel
    components: those with ``lambda_k > tau`` are kept whole (``w_k = 1``), the others
    dropped.

    Expansion weights ``Gam[r, q, i, :]`` of the projection of member ``i`` (rank cap
    ``ranks[q]``) on the feature-space images of the members, centring-corrected.
    With ``beta_ik = lambda_k alpha_ik`` and ``alpha_k = v_k / sqrt(lambda_k)``,
    ``sum_k w_k beta_ik alpha_jk = sum_k w_k v_ik v_jk``.
    """
    nref, n = lam.shape
    nr = ranks.shape[0]
    for r in range(r0, r1):
        lmax = lam[r, 0]
        w = np.zeros(n)
        nkeep = 0
        nvalid = 0  # components that are not numerically zero
        for k in range(n):
            l = lam[r, k]
            if l > 1e-6 * max(lmax, 1e-300):
                nvalid = k + 1
                w[k] = 1.0
                if l > tau:
                    nkeep = k + 1
        for q in range(nr):
            # auto (-1): the threshold decides; an explicit rank keeps that many whole
            cap = nkeep if ranks[q] < 0 else min(ranks[q], nvalid)
            kept[r, q] = cap
            ss = 0.0
            for k in range(cap):
                ss += w[k] * w[k]
            for i in range(n):
                rs = 0.0
                for j in range(n):
                    s = 0.0
                    for k in range(cap):
                        s += w[k] * V[r, i, k] * V[r, j, k]
                    Gam[r, q, i, j] = s
                    rs += s
                c = (1.0 - rs) / n  # centring correction: weights sum to one
                for j in range(n):
                    Gam[r, q, i, j] += c
                # weight of this estimate in the overlap average: inverse of its
                # (relative) residual noise, as BM3D does
                aggw[r, q, i] = 1.0 / (1.0 + ss)


@njit(cache=True, fastmath=True, nogil=True)
def _project2(lam, V, rowmean, P, X, rbf, gamma_x, kscale, tau2, cut, ranks, Gam, aggw, kept,
              r0, r1):
    """Stage 2, groups ``r0 <= r < r1``: kernel PCA of the pilot group, coefficients of
    the noisy members, empirical Wiener weights from the pilot: one weight per
    component from the group's mean power ``lambda_k / n``."""
    nref, n, d = P.shape
    nr = ranks.shape[0]
    for r in range(r0, r1):
        lmax = lam[r, 0]
        ncomp = 0
        for k in range(n):
            # components whose pilot energy is far below the coefficient noise get
            # Wiener weights ~0 for every member; the pilot's residual noise lives
            # there, so they are dropped (measured: +0.4 dB mean at sigma 25)
            if lam[r, k] > 1e-6 * max(lmax, 1e-300) and lam[r, k] > cut * n * tau2:
                ncomp += 1
            else:
                break
        if ncomp == 0:  # no component: every estimate is the group's mean (most groups
            for q in range(nr):  # of the chrominances), without the cross kernel
                kept[r, q] = 0
                for i in range(n):
                    for j in range(n):
                        Gam[r, q, i, j] = 1.0 / n
                    aggw[r, q, i] = 1.0
            continue
        # centred cross-kernel between noisy members (rows) and pilot members (cols)
        Kx = np.empty((n, n))
        if rbf:
            # row by row: the exponents, then one vectorised exp over them
            kf = np.empty(n)
            eb = np.empty(n, np.int64)
            for i in range(n):
                ki = Kx[i]
                for j in range(n):
                    s = 0.0
                    for t in range(d):
                        u = X[r, i, t] - P[r, j, t]
                        s += u * u
                    ki[j] = -gamma_x * s
                exp_nonpositive(ki, kf, eb)
                for j in range(n):
                    ki[j] = kscale * ki[j]
            tm = 0.0
            for j in range(n):
                tm += rowmean[r, j]
            tm /= n
            for i in range(n):
                s = 0.0
                for j in range(n):
                    s += Kx[i, j]
                s /= n
                for j in range(n):
                    Kx[i, j] = Kx[i, j] - s - rowmean[r, j] + tm
        else:
            m = np.zeros(d)
            for j in range(n):
                for t in range(d):
                    m[t] += P[r, j, t]
            m /= n
            for i in range(n):
                for j in range(n):
                    s = 0.0
                    for t in range(d):
                        s += (X[r, i, t] - m[t]) * (P[r, j, t] - m[t])
                    Kx[i, j] = s
        A = np.zeros((n, max(ncomp, 1)))  # alpha = v / sqrt(lambda): lambda |alpha|^2 = 1
        sq = np.zeros(max(ncomp, 1))
        for k in range(ncomp):
            sq[k] = math.sqrt(lam[r, k])
            for j in range(n):
                A[j, k] = V[r, j, k] / sq[k]
        beta = np.zeros((n, max(ncomp, 1)))
        for i in range(n):
            for k in range(ncomp):
                s = 0.0
                for j in range(n):
                    s += A[j, k] * Kx[i, j]
                beta[i, k] = s
        sb = np.zeros(max(ncomp, 1))
        wk = np.zeros(max(ncomp, 1))
        for q in range(nr):
            cap = ranks[q] if ranks[q] >= 0 else n
            cap = min(cap, ncomp)
            kept[r, q] = cap
            for i in range(n):
                for k in range(cap):
                    bp2 = lam[r, k] / n  # the pilot's mean power on the component
                    sk = bp2 / (bp2 + tau2)
                    wk[k] = sk
                    sb[k] = sk * beta[i, k]
                # the sum in a loop of its own: a reduction in a loop that also stores
                # is vectorised behind a runtime overlap check of the arrays' addresses,
                # so its rounding changed from run to run (threads allocate differently)
                ss = 0.0
                for k in range(cap):
                    ss += wk[k] * wk[k]
                rs = 0.0
                for j in range(n):
                    s = 0.0
                    for k in range(cap):
                        s += sb[k] * A[j, k]
                    Gam[r, q, i, j] = s
                    rs += s
                c = (1.0 - rs) / n
                for j in range(n):
                    Gam[r, q, i, j] += c
                aggw[r, q, i] = 1.0 / (1.0 + ss)


def eigen_floor(stage: int, ranks: np.ndarray, floors: NoiseFloors, n: int) -> float:
    """Return the eigenvalue under which a pass's group kernel PCA may stop.

    The eigenvalue under which a pass's group kernel PCA need not resolve its
    eigenpairs (``group_pca.fit_groups``' ``floor``): what the shrinkage drops.  Stage 1
    keeps the components above ``tau1`` (none dropped when an explicit rank, kept
    whole, may reach below it: 0); stage 2 drops those under ``STAGE2_CUT n tau2``
    (``floors``: the channel's, groups of ``n``)."""
    if stage == 1:
        return 0.0 if (np.asarray(ranks) >= 0).any() else floors.tau1
    return STAGE2_CUT * n * floors.tau2


def _outputs(lam: np.ndarray, nr: int):
    m, n = lam.shape
    return np.empty((m, nr, n, n)), np.empty((m, nr, n)), np.empty((m, nr), np.int64)


def shrink_own(lam: np.ndarray, V: np.ndarray, tau: float, ranks: np.ndarray):
    """Stage-1 hard threshold of each group's own components (``lambda_k > tau`` kept).

    Returns the expansion weights ``Gam`` (m, nr, n, n), the aggregation weights
    (m, nr, n) and the number of kept components (m, nr); ``ranks`` (nr,) caps them
    (-1: no cap)."""
    Gam, aggw, kept = _outputs(lam, len(ranks))
    run_parts(_project1, len(lam), lam, V, float(tau), ranks, Gam, aggw, kept)
    return Gam, aggw, kept


def shrink_pilot(lam: np.ndarray, V: np.ndarray, rowmean: np.ndarray, P: np.ndarray,
                 X: np.ndarray, floors: NoiseFloors, rbf: bool, ranks: np.ndarray):
    """Shrink the noisy members on the pilot's kernel PCA with Wiener weights (stage 2).

    Stage-2 shrinkage: the noisy members ``X`` projected on the kernel PCA of the
    pilot members ``P``, each coefficient with the empirical Wiener weight ``s / (s +
    tau2)``, ``s = lambda_k / n`` the pilot group's mean power on component ``k``.
    Same outputs as :func:`shrink_own`."""
    Gam, aggw, kept = _outputs(lam, len(ranks))
    run_parts(_project2, len(lam), lam, V, rowmean, P, X, rbf, floors.g_x, floors.kscale,
              floors.tau2, STAGE2_CUT, ranks, Gam, aggw, kept)
    return Gam, aggw, kept


def correct_means(Est: np.ndarray, X: np.ndarray, noise_var: float) -> None:
    """Stage-1 Wiener step on the patch means the low-rank estimate left out, in place.

    Per member ``i``, ``r_i = mean(x_i) - mean(xhat_i)``; with ``v`` the group's mean
    of ``r_i^2`` (per rank) every estimate gets ``w r_i`` added to all its pixels,
    ``w = max(v - noise_var, 0) / v``: along this one fixed direction the noise is
    known (``sigma^2 / d``), while a data-driven component must stand above the
    group's largest noise eigenvalue to be kept.  ``Est`` (m, nr, n, d), ``X`` (m, n, d).
    """
    _correct_means(Est, X, float(noise_var))


@njit(cache=True, nogil=True)
def _correct_means(Est, X, noise_var):
    """:func:`correct_means` on every group and rank, one pass over each."""
    m, nr, n, d = Est.shape
    xm = np.empty(n)
    res = np.empty(n)
    for g in range(m):
        for i in range(n):
            s = 0.0
            for t in range(d):
                s += X[g, i, t]
            xm[i] = s / d
        for q in range(nr):
            v = 0.0
            for i in range(n):
                s = 0.0
                for t in range(d):
                    s += Est[g, q, i, t]
                res[i] = xm[i] - s / d
                v += res[i] * res[i]
            v /= n
            w = max(v - noise_var, 0.0) / max(v, 1e-300)
            for i in range(n):
                a = w * res[i]
                for t in range(d):
                    Est[g, q, i, t] += a
