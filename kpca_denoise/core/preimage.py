"""Pre-image of kernel-PCA projections: the fixed-point iteration of Mika et al.

For the RBF kernel the pre-image ``z`` of a projection ``P Phi(x)`` minimises
``||Phi(z) - P Phi(x)||^2``.  With the projection written as an expansion over
the training points, ``P Phi(x) = sum_i w_i Phi(x_i)``, the stationarity
condition gives the fixed point (Mika et al. 1998, eq. 10)::

    z <- sum_i w_i k(z, x_i) x_i / sum_i w_i k(z, x_i)

The expansion weights include the feature-space centring (``docs/method.md``):
``w_i = sum_k beta_k alpha_i^k + (1/n) (1 - sum_j sum_k beta_k alpha_j^k)``,
so that ``sum_i w_i = 1``.

Numerical guards
----------------
* Kernel values in each row are computed relative to the nearest training
  point (``exp(-gamma (d_i - min_j d_j))``).  Numerator and denominator scale
  alike, so the iterate is unchanged, but a start far from every training
  point can no longer underflow to ``0 / 0``.
* If the denominator is not clearly positive (``<= 1e-8 * sum_i |w_i| k_i``:
  vanishing or sign-changing), the point stops at its last good iterate; if
  that happens at the very first step, it restarts once from the input-space
  expansion ``sum_i w_i x_i`` and, failing that, keeps its start.  Each such
  event is counted.

References
----------
Mika, Schölkopf, Smola, Müller, Scholz, Rätsch (1998), "Kernel PCA and
de-noising in feature spaces", NIPS 11.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit, prange

from .kernels import squared_norms
from .parallel import run_parts
from .progress import ProgressCallback, check_cancel, report

__all__ = ["expansion_weights", "preimage_fixed_point", "preimage_groups", "PreimageStats"]


@dataclass
class PreimageStats:
    """What happened during one pre-image call."""

    n_points: int = 0
    iterations: int = 0  # largest number of iterations any point used
    converged: int = 0  # points that met the tolerance
    fallbacks: int = 0  # points stopped at a previous iterate by the guard
    restarts: int = 0  # points restarted from the input-space expansion


def expansion_weights(Z: np.ndarray, alphas: np.ndarray) -> np.ndarray:
    """Return the expansion weights of ``P Phi(x)`` over the training points.

    Centring-corrected weights ``w``.  Z : (m, k) projections; alphas : (n, k)
    expansion coefficients of the axes.  Returns (m, n) float64 with every row
    summing to 1.
    """
    n = alphas.shape[0]
    W = np.asarray(Z, dtype=np.float64) @ np.asarray(alphas, dtype=np.float64).T
    W += ((1.0 - W.sum(axis=1)) / n)[:, None]
    return W


@njit(parallel=True, fastmath=True, cache=True, nogil=True)
def _weighted_kernel_rows(G, sqz, sqx, W, gamma, out, den, den_abs):  # pragma: no cover
    m, n = G.shape
    for i in prange(m):
        dmin = np.inf
        for j in range(n):
            d = sqz[i] + sqx[j] - 2.0 * G[i, j]
            if d < 0.0:
                d = 0.0
            out[i, j] = d
            if d < dmin:
                dmin = d
        s = 0.0
        sa = 0.0
        for j in range(n):
            v = W[i, j] * math.exp(-gamma * (out[i, j] - dmin))
            out[i, j] = v
            s += v
            sa += abs(v)
        den[i] = s
        den_abs[i] = sa


def _fixed_point_block(Z0, X, sqx, W, gamma, tol, max_iter, stats, cancel=None):
    m = Z0.shape[0]
    z = Z0.copy()
    active = np.arange(m)
    fresh = np.ones(m, dtype=bool)  # no successful step yet
    restarted = np.zeros(m, dtype=bool)
    it = 0
    while active.size and it < max_iter:
        check_cancel(cancel)  # per iteration: a block of a large image takes seconds
        it += 1
        za = z[active]
        G = za @ X.T
        K = np.empty_like(G)
        den = np.empty(active.size)
        den_abs = np.empty(active.size)
        _weighted_kernel_rows(G, squared_norms(za), sqx, W[active], gamma, K, den, den_abs)
        ok = den > 1e-8 * den_abs
        bad = active[~ok]
        can_restart = fresh[bad] & ~restarted[bad]
        # restart once from the input-space expansion sum_i w_i x_i
        again = bad[can_restart]
        z[again] = W[again] @ X
        restarted[again] = True
        stats.restarts += int(again.size)
        # otherwise stop at the last good iterate (the start, if there was none)
        stop = bad[~can_restart]
        z[stop[fresh[stop]]] = Z0[stop[fresh[stop]]]
        stats.fallbacks += int(stop.size)

        good = active[ok]
        znew = (K[ok] @ X) / den[ok][:, None]
        diff = znew - z[good]
        step = np.einsum("ij,ij->i", diff, diff)
        scale = np.einsum("ij,ij->i", znew, znew) + 1e-30
        z[good] = znew
        fresh[good] = False
        conv = step <= (tol * tol) * scale
        stats.converged += int(conv.sum())
        active = np.sort(np.concatenate([again, good[~conv]]))
    stats.iterations = max(stats.iterations, it)
    return z


def preimage_fixed_point(
    W: np.ndarray,
    X: np.ndarray,
    gamma: float,
    *,
    init: np.ndarray | None = None,
    tol: float = 1e-5,
    max_iter: int = 100,
    block: int = 1024,
    progress: ProgressCallback | None = None,
    cancel: Any = None,
) -> tuple[np.ndarray, PreimageStats]:
    """Batched RBF pre-image by fixed-point iteration.

    Parameters
    ----------
    W : (m, n) expansion weights from :func:`expansion_weights`.
    X : (n, d) training points.
    gamma : RBF kernel parameter.
    init : (m, d) starting points (the noisy inputs); default ``W @ X``.
    tol : a point stops when ``||z_new - z|| <= tol * ||z_new||``.
    max_iter : iteration cap per point.
    block : points processed together (memory is ``block x n``).

    Returns
    -------
    Z : (m, d) float64 pre-images, always finite; stats : :class:`PreimageStats`.
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    W = np.ascontiguousarray(W, dtype=np.float64)
    m = W.shape[0]
    if init is None:
        init = W @ X
    init = np.ascontiguousarray(init, dtype=np.float64)
    if init.shape != (m, X.shape[1]):
        raise ValueError(f"init must have shape {(m, X.shape[1])}, got {init.shape}")
    sqx = squared_norms(X)
    stats = PreimageStats(n_points=m)
    out = np.empty_like(init)
    nb = max(1, -(-m // block))
    report(progress, "preimage", 0, m)
    for bi in range(nb):
        check_cancel(cancel)
        s = slice(bi * block, min((bi + 1) * block, m))
        out[s] = _fixed_point_block(init[s], X, sqx, W[s], float(gamma), tol, max_iter, stats,
                                    cancel)
        report(progress, "preimage", s.stop, m)
    return out, stats


# -- the grouped method: one small expansion per group member ------------------------


@njit(cache=True, fastmath=True, nogil=True)
def _preimage_groups(Gam, B, rbf, gamma, max_iter, tol2, K, Est, fallbacks, iters, r0, r1):
    """Mika et al. (1998) fixed-point pre-image for every member and rank of the groups
    ``r0 <= r < r1``.

    ``B`` holds the expansion points (noisy members in stage 1, pilot members in
    stage 2), which are also the starting points.  For the linear kernel the
    pre-image is exact: ``sum_j Gam_ij B_j``.  ``K``, unless empty, is the RBF Gram
    of ``B`` (from the group kernel PCA): the start ``z = B_i`` then has its kernel
    values ``exp(-gamma |z - B_j|^2) = K_ij`` already, which saves the first
    iteration's distances.
    """
    nref, nr, n, _ = Gam.shape
    d = B.shape[2]
    have_k = K.shape[0] == nref and rbf
    for r in range(r0, r1):
        fb = 0
        it_total = 0
        zl = np.empty(d)
        z = np.empty(d)
        zn = np.empty(d)
        dd = np.empty(n)
        C = np.empty((n, n))
        den0 = np.empty(n)
        aden0 = np.empty(n)
        ZN = np.empty((n, d))
        for q in range(nr):
            if have_k:
                # the first step of every member at once: its weights Gam_ij K_ij, then
                # one matrix product (BLAS) for the weighted sums of the members
                for i in range(n):
                    s = 0.0
                    sa = 0.0
                    for j in range(n):
                        c = Gam[r, q, i, j] * K[r, i, j]
                        C[i, j] = c
                        s += c
                        sa += abs(c)
                    den0[i] = s
                    aden0[i] = sa
                np.dot(C, B[r], ZN)
            for i in range(n):
                # linear (large-width limit) reconstruction sum_j Gam_ij x_j: the exact
                # answer for kernel="linear" and the fallback for the RBF iteration
                # (then computed only when a guard needs it)
                if not rbf:
                    _linear_recon(Gam, B, r, q, i, zl)
                    for t in range(d):
                        Est[r, q, i, t] = zl[t]
                    continue
                for t in range(d):
                    z[t] = B[r, i, t]
                prev_sign = 0.0
                ok_any = False
                for it in range(max_iter):
                    from_k = it == 0 and have_k
                    if from_k:
                        # z = B_i: exp(-gamma |z - B_j|^2) is K_ij, read below, and
                        # the smallest distance is 0 (j = i); no distances needed
                        dmin = 0.0
                    else:
                        dmin = 1e300
                        for j in range(n):
                            s = 0.0
                            for t in range(d):
                                u = z[t] - B[r, j, t]
                                s += u * u
                            dd[j] = s
                            if s < dmin:
                                dmin = s
                    if from_k:
                        den = den0[i]
                        aden = aden0[i]
                        for t in range(d):
                            zn[t] = ZN[i, t]
                    else:
                        den = 0.0
                        aden = 0.0
                        for t in range(d):
                            zn[t] = 0.0
                        for j in range(n):
                            # a common factor exp(-gamma dmin) cancels in the ratio: it
                            # keeps the kernel values from underflowing when z is far
                            # from all x_j
                            c = Gam[r, q, i, j] * math.exp(-gamma * (dd[j] - dmin))
                            den += c
                            aden += abs(c)
                            for t in range(d):
                                zn[t] += c * B[r, j, t]
                    sgn = 1.0 if den > 0.0 else -1.0
                    bad = not (abs(den) > 1e-8 * aden) or not math.isfinite(den)
                    if bad or (prev_sign != 0.0 and sgn != prev_sign):
                        # guard: keep the previous iterate (or the linear estimate)
                        fb += 1
                        if not ok_any:
                            _linear_recon(Gam, B, r, q, i, zl)
                            for t in range(d):
                                z[t] = zl[t]
                        break
                    prev_sign = sgn
                    ok_any = True
                    ch = 0.0
                    for t in range(d):
                        v = zn[t] / den
                        u = v - z[t]
                        ch += u * u
                        z[t] = v
                    it_total += 1
                    if ch <= tol2:
                        break
                for t in range(d):
                    Est[r, q, i, t] = z[t]
        fallbacks[r] = fb
        iters[r] = it_total


@njit(cache=True, fastmath=True, nogil=True)
def _linear_recon(Gam, B, r, q, i, zl):
    """``zl = sum_j Gam[r, q, i, j] B[r, j]``."""
    n = B.shape[1]
    d = B.shape[2]
    for t in range(d):
        zl[t] = 0.0
    for j in range(n):
        g = Gam[r, q, i, j]
        for t in range(d):
            zl[t] += g * B[r, j, t]


def preimage_groups(Gam: np.ndarray, B: np.ndarray, rbf: bool, gamma: float, max_iter: int,
                    tol2: float, K: np.ndarray | None = None):
    """Compute the fixed-point pre-image of every member of every group and rank.

    The fixed-point pre-image of every member of every group and rank, started at
    the member itself, with the guards above (the linear expansion is the fallback).

    ``Gam`` (m, nr, n, n): expansion weights per group, rank and member over the
    group's points ``B`` (m, n, d); ``tol2``: squared change per patch that stops it;
    ``K``: the RBF Gram of ``B``, which saves the first step's distances.  Returns the
    estimates (m, nr, n, d) and the guarded steps and iterations per group.  For
    ``rbf=False`` the pre-image is exact: ``sum_j Gam_ij B_j``.
    """
    m, nr, n, _ = Gam.shape
    Est = np.empty((m, nr, n, B.shape[2]))
    fb = np.zeros(m, np.int64)
    its = np.zeros(m, np.int64)
    run_parts(_preimage_groups, m, Gam, B, rbf, gamma, max_iter, tol2,
              np.empty((0, 0, 0)) if K is None else K, Est, fb, its)
    return Est, fb, its
