"""One kernel PCA per group: Gram matrix (RBF or linear), exact feature-space
centring, eigenpairs in descending order (only the pairs above a floor: counted
exactly, then found by Lanczos), and the noise levels that the shrinkage compares
them with.

Equations in ``docs/method.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from numba import njit

from kpca_denoise.core.kernels import exp_nonpositive
from kpca_denoise.core.kpca import noise_eigenvalue
from kpca_denoise.core.parallel import run_parts

__all__ = ["fit_groups", "noise_floors", "NoiseFloors"]

#: the Lanczos iteration stops when the kept Ritz pairs' residuals are below this
#: fraction of the largest eigenvalue (float32 LAPACK's accuracy, which it replaces)
LANCZOS_TOL = 1e-7
#: the Lanczos start is this power of the matrix times a fixed vector (docs/speed.md)
LANCZOS_POWER = 4


@njit(cache=True, fastmath=True, nogil=True)
def _eig(B, rbf, gamma, floor, every, lam_out, V_out, rowmean_out, K_out, r0, r1):
    """Per group ``r0 <= r < r1``: Gram (RBF or linear), exact centring, eigenpairs in
    descending order.

    ``rowmean_out`` keeps the row means of the uncentred Gram, needed to centre the
    kernel values of new points (stage 2) consistently.  With ``floor > 0`` only the
    eigenpairs with eigenvalues above ``floor`` are computed (the others are returned
    as zeros), except in every ``every``-th group (``r % every == 0``; 0: none), which
    also gets the eigenvalues below it (the spectrum a run reports).  Their number
    ``k`` comes first from the inertia of ``Kc - floor I`` (a sixth of a
    tridiagonalisation's work): a group with ``k = 0`` (most in flat areas, in
    stage 1 and in the chrominances) needs nothing more, the others get their ``k``
    leading pairs from a few Lanczos steps (``docs/speed.md``).  ``K_out`` (nref, n,
    n), unless it is empty, receives the uncentred Gram.
    """
    nref, n, d = B.shape
    keep_k = K_out.shape[0] == nref
    for r in range(r0, r1):
        X = B[r]
        K = K_out[r] if keep_k else np.empty((n, n))
        if rbf:
            # row by row: the exponents, then one vectorised exp over them
            ex = np.empty(n)
            kf = np.empty(n)
            eb = np.empty(n, np.int64)
            for i in range(n):
                K[i, i] = 1.0
                nj = n - 1 - i
                for j in range(i + 1, n):
                    s = 0.0
                    for t in range(d):
                        u = X[i, t] - X[j, t]
                        s += u * u
                    ex[j - i - 1] = -gamma * s
                exp_nonpositive(ex[:nj], kf, eb)
                for j in range(i + 1, n):
                    v = ex[j - i - 1]
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
        if floor > 0.0:
            # no eigenvalue of the positive semi-definite Kc exceeds its trace: a group
            # whose trace is below the floor has none above it (flat groups)
            tr = 0.0
            for i in range(n):
                tr += Kc[i, i]
            if tr < floor * (1.0 - 1e-9):
                nk = 0
            else:
                nk = count_above(Kc, floor, K if not keep_k else np.empty((n, n)))
            if nk == 0:
                for k in range(n):
                    lam_out[r, k] = 0.0
                    for i in range(n):
                        V_out[r, i, k] = 0.0
                done = True
            else:
                done = lanczos_top(Kc, nk, floor, LANCZOS_TOL, lam_out[r], V_out[r]) >= 0
            if done:
                if every > 0 and r % every == 0:  # the spectrum: the eigenvalues below
                    w = np.linalg.eigvalsh(Kc.astype(np.float32))  # the floor too
                    for k in range(nk, n):
                        lam_out[r, k] = min(w[n - 1 - k], floor)
                _fix_signs(V_out[r])
                continue
        # the full decomposition (and the fallback): float32 LAPACK is ~15-25% faster
        # on these small matrices and the kept components are far above float32
        # round-off; components below 1e-6 of the largest eigenvalue are never used
        # (see the thresholds in _project*)
        w, v = np.linalg.eigh(Kc.astype(np.float32))
        for k in range(n):
            lam_out[r, k] = w[n - 1 - k]
            for i in range(n):
                V_out[r, i, k] = v[i, n - 1 - k]
        _fix_signs(V_out[r])


@njit(cache=True, nogil=True)
def argsort_small(a):
    """Sort a short 1-D array's indices ascending, ties in index order.

    The indices that sort the 1-D ``a`` ascending, ties in index order (a stable
    insertion sort): for the few dozen values a kernel sorts, without compiling numba's
    ``np.argsort``."""
    n = a.shape[0]
    order = np.empty(n, np.int64)
    for i in range(n):
        v = a[i]
        j = i
        while j > 0 and a[order[j - 1]] > v:
            order[j] = order[j - 1]
            j -= 1
        order[j] = i
    return order


@njit(cache=True, nogil=True)
def _fix_signs(V):
    """Each eigenvector (a column of ``V``) turned so that its largest entry in
    magnitude is positive: the same vectors whatever the solver or thread count."""
    n, m = V.shape
    for k in range(m):
        big, at = 0.0, 0
        for i in range(n):
            if abs(V[i, k]) > big:
                big, at = abs(V[i, k]), i
        if V[at, k] < 0.0:
            for i in range(n):
                V[i, k] = -V[i, k]


@njit(cache=True, fastmath=True, nogil=True)
def count_above(A, floor, W):
    """Count the eigenvalues of the symmetric ``A`` above ``floor``.

    The positive pivots of the LDL^T factorisation of ``A - floor I`` (Sylvester's law of inertia;
    a zero pivot counts as negative).  ``W`` (n, n) is scratch: its upper triangle is
    overwritten.  About a sixth of a tridiagonalisation's work.  The pivots are taken
    four at a time: the block's rows first, then one pass over each trailing row for
    all four (a quarter of the loads and stores of one pivot at a time)."""
    n = A.shape[0]
    for i in range(n):
        for j in range(i, n):
            W[i, j] = A[i, j]
        W[i, i] -= floor
    cnt = 0
    inv = np.empty(4)
    for k in range(0, n, 4):
        b = min(4, n - k)
        for a in range(b):  # row k + a, updated by the block's pivots before it
            for c in range(a):
                f = W[k + c, k + a] * inv[c]
                for j in range(k + a, n):
                    W[k + a, j] -= f * W[k + c, j]
            p = W[k + a, k + a]
            if p > 0.0:
                cnt += 1
            elif p > -1e-300:
                p = -1e-300
            inv[a] = 1.0 / p
        if b < 4:  # the last rows: nothing trails them
            break
        v0, v1, v2, v3 = inv[0], inv[1], inv[2], inv[3]
        for i in range(k + 4, n):
            f0 = W[k, i] * v0
            f1 = W[k + 1, i] * v1
            f2 = W[k + 2, i] * v2
            f3 = W[k + 3, i] * v3
            for j in range(i, n):  # rows, contiguous
                W[i, j] -= (f0 * W[k, j] + f1 * W[k + 1, j]) + (f2 * W[k + 2, j]
                                                                + f3 * W[k + 3, j])
    return cnt


@njit(cache=True, nogil=True)
def _tql(d, e, z, m):
    """Eigen-decomposition of the symmetric tridiagonal matrix (diagonal ``d[:m]``,
    off-diagonal ``e[:m-1]``) by implicit QL: eigenvalues in ``d``, eigenvectors in the
    columns of ``z`` (m, m; it must hold the identity).  ``e`` is destroyed.  False if an
    eigenvalue took more than 60 sweeps."""
    e[m - 1] = 0.0
    for l in range(m):
        it = 0
        while True:
            mm = l
            while mm < m - 1:
                dd = abs(d[mm]) + abs(d[mm + 1])
                if abs(e[mm]) <= 2.3e-16 * dd:
                    break
                mm += 1
            if mm == l:
                break
            it += 1
            if it > 60:
                return False
            g = (d[l + 1] - d[l]) / (2.0 * e[l])
            r = math.sqrt(g * g + 1.0)
            g = d[mm] - d[l] + e[l] / (g + (r if g >= 0.0 else -r))
            s = 1.0
            c = 1.0
            p = 0.0
            i = mm - 1
            under = False
            while i >= l:
                f = s * e[i]
                b = c * e[i]
                r = math.sqrt(f * f + g * g)
                e[i + 1] = r
                if r == 0.0:
                    d[i + 1] -= p
                    e[mm] = 0.0
                    under = True
                    break
                s = f / r
                c = g / r
                g = d[i + 1] - p
                r = (d[i] - g) * s + 2.0 * c * b
                p = s * r
                d[i + 1] = g + p
                g = c * r - b
                for k in range(m):
                    f = z[k, i + 1]
                    z[k, i + 1] = s * z[k, i] + c * f
                    z[k, i] = c * z[k, i] - s * f
                i -= 1
            if under:
                continue
            d[l] -= p
            e[l] = g
            e[mm] = 0.0
    return True


@njit(cache=True, nogil=True, fastmath=True)
def lanczos_top(A, want, floor, tol, lam, V):
    """Find the ``want`` leading eigenpairs of a symmetric PSD matrix by Lanczos.

    The eigenpairs of ``A`` (descending in ``lam`` and the columns of ``V``; zeros after
    them), whose eigenvalues are known to be above ``floor``: Lanczos with full
    reorthogonalisation from a fixed start, ``want + 10`` steps and 6 more until each of
    those Ritz values is above ``floor`` with a residual below ``tol`` times the largest
    (at most ``n`` steps: then exact). Returns the number of steps, or -1 if it could
    not start or the tridiagonal solver failed (then ``lam``, ``V`` are unset).
    """
    n = A.shape[0]
    Q = np.empty((n, n))
    alpha = np.empty(n)
    beta = np.empty(n)
    d = np.empty(n)
    e = np.empty(n)
    z = np.empty(n)
    Z = np.empty((n, n))
    cq = np.empty(n)
    tr = 0.0
    for i in range(n):
        tr += A[i, i]
    # a fixed, generic start: A^LANCZOS_POWER times a golden-ratio sequence (the
    # powers, cheaper than Lanczos steps, tilt it towards the leading pairs)
    for j in range(n):
        u = 0.6180339887498949 * (j + 1)
        e[j] = u - math.floor(u) - 0.5
    for _ in range(LANCZOS_POWER):
        nz = 0.0
        for i in range(n):
            s = 0.0
            for j in range(n):
                s += A[i, j] * e[j]
            z[i] = s
            nz += s * s
        nz = math.sqrt(nz)
        if not (tr > 0.0) or nz <= 1e-150 * tr:
            return -1
        for i in range(n):
            e[i] = z[i] / nz
    for i in range(n):
        Q[0, i] = e[i]
    m = 0
    target = min(n, want + 10)
    while True:
        b = 0.0
        while m < target:
            j = m
            for i in range(n):
                z[i] = 0.0
            for t in range(n):  # A symmetric: its rows are its columns, contiguous
                qt = Q[j, t]
                for i in range(n):
                    z[i] += A[t, i] * qt
            a = 0.0
            for i in range(n):
                a += Q[j, i] * z[i]
            alpha[j] = a
            for _ in range(2):  # full reorthogonalisation, twice (classical
                for q in range(j + 1):  # Gram-Schmidt: the coefficients, then the updates)
                    c = 0.0
                    for i in range(n):
                        c += Q[q, i] * z[i]
                    cq[q] = c
                for q in range(j + 1):
                    c = cq[q]
                    for i in range(n):
                        z[i] -= c * Q[q, i]
            b = 0.0
            for i in range(n):
                b += z[i] * z[i]
            b = math.sqrt(b)
            beta[j] = b
            m = j + 1
            if b <= 1e-13 * tr:
                break
            if m < n:
                for i in range(n):
                    Q[m, i] = z[i] / b
        for i in range(m):
            d[i] = alpha[i]
            e[i] = beta[i]
            for k in range(m):
                Z[i, k] = 0.0
            Z[i, i] = 1.0
        if not _tql(d, e, Z, m):
            return -1
        # the want largest Ritz values, by selection
        top = 0.0
        for i in range(m):
            top = max(top, d[i])
        order = argsort_small(-d[:m])
        ok = m >= want
        if ok:
            for q in range(want):
                i = order[q]
                if d[i] <= floor or b * abs(Z[m - 1, i]) > tol * top:
                    ok = False
        if ok or m == n:
            break
        if b <= 1e-13 * tr:  # an invariant subspace without them all (a repeated
            return -1  # eigenvalue): the caller's full solver
        target = min(n, m + 6)
    for k in range(n):
        lam[k] = 0.0
        for i in range(n):
            V[i, k] = 0.0
    got = min(want, m)
    for q in range(got):  # V's columns from the Lanczos vectors' rows, contiguous
        i = order[q]
        lam[q] = d[i]
        for r in range(n):
            z[r] = 0.0
        for t in range(m):
            c = Z[t, i]
            for r in range(n):
                z[r] += c * Q[t, r]
        for r in range(n):
            V[r, q] = z[r]
    return m


def fit_groups(P: np.ndarray, rbf: bool, gamma: float, floor: float = 0.0,
               gram: bool = False, every: int = 0):
    """Fit one kernel PCA per group of members.

    Per-group kernel PCA of the members ``P`` (m, n, d): eigenvalues ``lam`` (m, n)
    descending, eigenvectors ``V`` (m, n, n) in columns and the uncentred Gram's row
    means (m, n).  With ``floor > 0`` only the eigenpairs above it (the rest zeros),
    except in every ``every``-th group (0: none), which gets all the eigenvalues (its
    eigenvectors below the floor are zeros too).  ``gram=True``
    adds the uncentred Gram matrices (m, n, n), which save the pre-image's first
    step."""
    m, n, _ = P.shape
    lam = np.empty((m, n))
    V = np.empty((m, n, n))
    rowmean = np.empty((m, n))
    K = np.empty((m, n, n) if gram else (0, 0, 0))
    run_parts(_eig, m, P, rbf, gamma, float(floor), int(every), lam, V, rowmean, K)
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
    """Return the :class:`NoiseFloors` of groups of patches under white noise.

    The :class:`NoiseFloors` of groups of ``n`` patches of dimension ``d`` under
    white noise of std ``sigma``, kernel width scale ``c``."""
    gamma = 1.0 / (c * 2.0 * d * sigma * sigma)
    tau1 = noise_eigenvalue("rbf" if rbf else "linear", gamma, sigma, d, n)
    g_x = gamma / max(1.0 - 2.0 * gamma * sigma * sigma, 1e-3)
    kscale = (1.0 + 2.0 * g_x * sigma * sigma) ** (d / 2.0)
    tau2 = kappa2 * (2.0 * gamma * sigma * sigma if rbf else sigma * sigma)
    return NoiseFloors(gamma=gamma, tau1=tau1 * kappa1, g_x=g_x, kscale=kscale, tau2=tau2)
