"""Two-stage non-local kernel-PCA denoiser: block matching + one kernel PCA per group.

The image is covered by reference patches on a grid (every pixel covered, last
row/column included).  For each reference patch the most similar patches inside a
search window are grouped (block matching, as in BM3D), a kernel PCA with an RBF
kernel is computed on the group, the coefficients of every member are shrunk with
Wiener-like weights, every member is mapped back to pixel space with the Mika et al.
fixed-point pre-image, and the estimates of all overlapping patches are averaged
with weights.  A second pass repeats this with the first estimate ("pilot") guiding
the block matching, giving the kernel-PCA basis and the Wiener signal power (the
BM3D / LPG-PCA two-stage scheme).  ``kernel="linear"`` runs exactly the same
pipeline with the linear kernel (plain group PCA) as an ablation.

The stages have one function each: :func:`grouping` (block matching),
:func:`fit_groups` (per-group kernel PCA), :func:`shrink_own` / :func:`shrink_pilot`
(shrinkage of the stage-1 / stage-2 coefficients), :func:`preimage`,
:func:`correct_means` (stage 1) and :func:`aggregate`; ``_run_pass`` chains them
over the image and :func:`denoise_grouped` chains the passes.

Everything heavy runs in numba kernels (``prange`` over the reference patches of a
chunk of reference rows); chunks are driven from Python so progress can be reported
and cancellation checked between them.  Results are deterministic: parallel loops
only write to their own slots and the overlap averaging is serial.

How the kernel parts work (per group of ``n`` patches ``x_i`` of dimension ``d``)
-------------------------------------------------------------------------------
* Gram ``K_ij = exp(-gamma |x_i - x_j|^2)`` with ``gamma = 1 / (c * 2 d sigma^2)``:
  the width is tied to the noise level (``2 d sigma^2`` is the expected squared
  distance between two noisy copies of the same patch), not to noisy distances.
* Exact feature-space centring ``Kc = L K L``, ``L = I - 11^T/n``; eigenpairs
  ``(lambda_k, v_k)`` of ``Kc``; ``alpha_k = v_k / sqrt(lambda_k)`` so that
  ``lambda_k |alpha_k|^2 = 1``; coefficients ``beta_ik = lambda_k alpha_ik``.
* Noise in feature space: for pure noise the centred RBF Gram has mean non-zero
  eigenvalue ``tau = 1 - (1 + 4 gamma sigma^2)^(-d/2)`` (= ``1 - E k(n_i, n_j)``;
  the diagonal is exactly 1 while off-diagonals shrink by the noise).  The noise in
  the leading directions is larger than that mean, so the stage-1 threshold is
  ``kappa1 * tau``: ``w_k = 1`` if ``lambda_k > kappa1 tau`` else 0 with ``kappa1 =
  4.5`` (``shrink1="hard"``, the default), ``w_k = max(lambda_k - kappa1 tau, 0) /
  lambda_k`` with ``kappa1 = 2.5`` (``"soft"``), or ``w_k = (lambda_k - tau) /
  lambda_k`` above the threshold (``"wiener"``).
* Stage 2: the kernel PCA is fitted on the pilot patches, the noisy patches are
  projected on it (their kernel values against pilot patches are corrected for the
  noise: ``E exp(-g'|s + e - p|^2) = (1 + 2 g' sigma^2)^(-d/2) exp(-g'|s-p|^2/(1+2g'sigma^2))``),
  and the coefficients on component ``k`` are shrunk with the empirical Wiener weight
  ``s_k / (s_k + kappa2 * 2 gamma sigma^2)`` where ``s_k = lambda_k / n`` is the
  pilot group's mean power on the component (``wiener2="group"``; ``"member"``
  uses each member's own pilot coefficient ``b_ik^2``, one weight per member) and
  ``2 gamma sigma^2`` is the (large-width) variance of a coefficient caused by the
  noise.  Components whose pilot energy is below ``stage2_cut * n * noise`` are
  dropped (their Wiener weights are ~0 anyway, and the pilot's residual noise
  lives there).
* Pre-image (Mika et al. 1998): with centring-corrected weights
  ``w_j = sum_k beta_k alpha_j^k + (1/n)(1 - sum_j' sum_k beta_k alpha_j'^k)``
  iterate ``z <- sum_j w_j k(z, x_j) x_j / sum_j w_j k(z, x_j)`` from the group member
  itself (noisy patch in stage 1, pilot patch in stage 2).  If the denominator is
  tiny relative to ``sum_j |w_j k(z, x_j)|``, changes sign, or is not finite, the
  previous iterate (or, before the first successful step, the linear / large-width
  reconstruction ``sum_j w_j x_j``) is kept and the event is counted.
* The patch mean (DC) is never removed and added back raw: it is part of the patch
  vectors, so it is modelled by the kernel (and the group mean in feature space).
  Stage 1 then takes one Wiener step on what the estimate left of the members'
  patch means (:func:`correct_means`): along that one fixed direction the noise is
  known, ``sigma^2 / d``, while a data-driven component must stand above the
  group's largest noise eigenvalue to be kept.
"""

from __future__ import annotations

import inspect
import math
import time
from typing import Any, Sequence

import llvmlite.binding as llvm_binding
import numpy as np
from numba import njit, prange, types
from numba.extending import get_cython_function_address

from kpca_denoise.core.kpca import _is_number
from kpca_denoise.core.progress import ProgressCallback, check_cancel, report

__all__ = ["denoise_grouped", "denoise_grouped_channels", "denoise_grouped_opponent"]


# ----------------------------------------------------------------------------
# numba kernels
# ----------------------------------------------------------------------------

# LAPACK's ssyevr (the eigenpairs above a value only) from scipy's Cython LAPACK,
# registered as a named symbol so that the numba kernels that call it can be cached
llvm_binding.add_symbol("kpca_denoise_ssyevr",
                        get_cython_function_address("scipy.linalg.cython_lapack", "ssyevr"))
_ssyevr = types.ExternalFunction("kpca_denoise_ssyevr", types.void(*([types.voidptr] * 21)))


@njit(cache=True, inline="always")
def _heap_gt(hd, ho, a, b):
    """Entry ``a`` of the heap ``(hd, ho)`` above entry ``b``: a larger distance, or
    an equal one later in scan order."""
    return hd[a] > hd[b] or (hd[a] == hd[b] and ho[a] > ho[b])


@njit(cache=True, inline="always")
def _heap_swap(hd, ho, a, b):
    t = hd[a]
    hd[a] = hd[b]
    hd[b] = t
    u = ho[a]
    ho[a] = ho[b]
    ho[b] = u


@njit(cache=True)
def _heap_push(hd, ho, size, v, o):
    """Add ``(v, o)`` to the max-heap of ``size`` entries (room for one more)."""
    i = size
    hd[i] = v
    ho[i] = o
    while i > 0:
        par = (i - 1) // 2
        if not _heap_gt(hd, ho, i, par):
            return
        _heap_swap(hd, ho, i, par)
        i = par


@njit(cache=True)
def _heap_replace_top(hd, ho, size, v, o):
    """Replace the largest entry of the full max-heap by ``(v, o)``."""
    hd[0] = v
    ho[0] = o
    i = 0
    while True:
        c = 2 * i + 1
        if c >= size:
            return
        if c + 1 < size and _heap_gt(hd, ho, c + 1, c):
            c += 1
        if not _heap_gt(hd, ho, c, i):
            return
        _heap_swap(hd, ho, i, c)
        i = c


@njit(cache=True, parallel=True, nogil=True)
def _match(guide, refs_y, refs_x, p, m, R, mask, n, running, dist, out_y, out_x):
    """Block matching: the ``n`` patches closest to each reference, by the SSD of
    their ``m x m`` matching windows (``m >= p``) in ``guide``.

    Candidates are the offsets ``(dy, dx)`` up to ``R`` with ``mask[dy + R, dx + R]``
    (:func:`search_mask`: every offset in BM3D's 39x39 square and, beyond it, those
    whose row and column offsets are both even, plus the neighbourhoods of a regular
    texture's repeats): a wide window reaches the next period of a regular texture
    for a fraction of the cost of a dense one.

    ``guide`` is the image padded by ``(m - p) // 2`` pixels before and
    ``m - p - (m - p) // 2`` after on both axes (:func:`_pad_for_matching`), so the
    window of the patch at ``(y, x)`` starts at ``guide[y, x]`` and is centred on the
    patch (one pixel more after it when ``m - p`` is odd).  Candidate positions are
    those of the unpadded image; the search window is clipped at the borders; the
    reference itself is always a member (members in scan order).  With ``m == p``
    (no padding) this is the plain patch SSD.

    The distances are computed offset by offset (in parallel over the offsets), for
    every reference: for the row offset ``dy`` and column offset ``dx``, the column
    sums of squared differences over the ``m`` window rows of a run of references
    on one row (a run of equal ``refs_y``, as the reference grid gives) serve all of
    them, and a window's SSD adds ``m`` of those sums.  With ``running`` (the guide
    holds integers and every window's SSD is below 2^53, :func:`match`), a run's
    column sums are those of the previous run with the rows between them dropped and
    added, and a window's SSD that of the previous reference with the columns
    between them dropped and added, where that is less work than summing afresh
    (``m`` more than twice the step): sums of integers below 2^53 are exact in any
    order, so a window's SSD depends on its own pixels only and a tile gets the
    distances the whole image gets.  Without it, each column sums its ``m`` rows and
    each window its ``m`` columns, in order.  The ``n`` closest are selected by a
    bounded max-heap over the candidates in scan order (ties go to the earlier
    candidate), which picks and orders the members exactly as a partition of all
    the distances did (stop 24).  Stop 25, a 512x512 image with 4 px steps, best of
    three: 35x35 windows 1.25 -> 0.58 s, 13x13 0.55 -> 0.38 s, 11x11 0.41 -> 0.35 s,
    7x7 (summed afresh) 0.37 s either way.
    """
    C = guide.shape[0]
    H = guide.shape[1] - (m - p)
    W = guide.shape[2] - (m - p)
    Wg = guide.shape[2]
    nref = refs_y.shape[0]
    # runs of references on the same row
    nseg = 0
    seg = np.empty(nref + 1, np.int64)
    for r in range(nref):
        if r == 0 or refs_y[r] != refs_y[r - 1]:
            seg[nseg] = r
            nseg += 1
    seg[nseg] = nref
    S = 2 * R + 1
    # the searched offsets in scan order (row offset, then column offset) and their
    # index in it
    noff = 0
    for a in range(S):
        for b in range(S):
            if mask[a, b]:
                noff += 1
    off_y = np.empty(noff, np.int64)
    off_x = np.empty(noff, np.int64)
    omap = np.full((S, S), -1, np.int64)
    o = 0
    for a in range(S):
        for b in range(S):
            if mask[a, b]:
                off_y[o] = a - R
                off_x[o] = b - R
                omap[a, b] = o
                o += 1
    oref = omap[R, R]  # the reference's own offset (0, 0), always searched
    # dist[oi, r]: each reference's distance at each searched offset (those in the
    # image are all written, the only ones read), (>= noff, >= nref) scratch
    # the row offsets in an order that spreads the dense middle rows over every
    # thread's contiguous share of the loop
    rows = np.empty(S, np.int64)
    o = 0
    for q in range(8):
        for a in range(q, S, 8):
            rows[o] = a
            o += 1
    for ai in prange(S):
        a = rows[ai]
        dy = a - R
        # per searched column offset: the column sums of squared differences over the
        # current run's window rows, and whether they are those of the previous run
        cs = np.empty((S, Wg))
        have = np.zeros(S, np.bool_)
        py = np.zeros(S, np.int64)
        for si in range(nseg):
            r0 = seg[si]
            ry = refs_y[r0]
            if ry + dy < 0 or ry + dy > H - p:
                have[:] = False
                continue
            for b in range(S):
                oi = omap[a, b]
                if oi < 0:
                    continue
                dx = b - R
                # column c of the reference rows against column c + dx of the candidate's
                c_lo = max(0, -dx)
                c_hi = min(Wg, Wg - dx)
                nc = c_hi - c_lo
                csb = cs[b]
                cv = csb[c_lo:c_hi]
                d = ry - py[b]
                # row by row along contiguous slices, so that the inner loop has
                # zero-based indices and vectorises (about 6x faster than a loop over
                # columns)
                if running and have[b] and 0 <= d and 2 * d < m:
                    y = py[b]
                    for ch in range(C):
                        for t0 in range(d):
                            g0 = guide[ch, y + t0, c_lo:c_hi]
                            h0 = guide[ch, y + dy + t0, c_lo + dx:c_hi + dx]
                            g1 = guide[ch, y + m + t0, c_lo:c_hi]
                            h1 = guide[ch, y + m + dy + t0, c_lo + dx:c_hi + dx]
                            for c in range(nc):
                                t = g0[c] - h0[c]
                                u = g1[c] - h1[c]
                                cv[c] += u * u - t * t
                else:
                    # each column sums its rows in order 0..m-1
                    cv[:] = 0.0
                    for ch in range(C):
                        for t0 in range(m):
                            g0 = guide[ch, ry + t0, c_lo:c_hi]
                            h0 = guide[ch, ry + dy + t0, c_lo + dx:c_hi + dx]
                            for c in range(nc):
                                t = g0[c] - h0[c]
                                cv[c] += t * t
                have[b] = True
                py[b] = ry
                drow = dist[oi]
                hv = False  # s holds the previous reference's sum
                px = 0
                s = 0.0
                for r in range(r0, seg[si + 1]):
                    rx = refs_x[r]
                    if rx + dx < 0 or rx + dx > W - p:
                        drow[r] = np.inf  # outside the image: never selected
                        hv = False
                        continue
                    e = rx - px
                    if running and hv and 0 <= e and 2 * e < m:
                        for t0 in range(e):
                            s += csb[px + m + t0] - csb[px + t0]
                    else:
                        s = 0.0
                        for t0 in range(m):
                            s += csb[rx + t0]
                    drow[r] = s
                    hv = True
                    px = rx
    for si in prange(nseg):
        r0 = seg[si]
        r1 = seg[si + 1]
        k = r1 - r0
        ry = refs_y[r0]
        y0 = max(0, ry - R)
        y1 = min(H - p, ry + R)
        ny = y1 - y0 + 1
        # each reference's n smallest (distance, scan index) through a bounded max-heap:
        # the candidates come in scan order, so a later one displaces the largest only
        # when strictly closer (ties keep the earlier), as a partition would.  The
        # reference goes in first, at distance -1, so it stays; the others (+inf
        # outside the image) are compared with the heap's top, or +inf while it fills
        hd = np.empty((k, n))
        ho = np.empty((k, n), np.int64)
        cnt = np.ones(k, np.int64)
        thr = np.full(k, np.inf)
        for j in range(k):
            hd[j, 0] = -1.0
            ho[j, 0] = oref
            if n == 1:
                thr[j] = -1.0
        for oi in range(noff):
            cy = ry + off_y[oi]
            if oi == oref or cy < y0 or cy > y1:
                continue
            drow = dist[oi, r0:r1]
            for j in range(k):
                v = drow[j]
                if v < thr[j]:
                    if cnt[j] < n:
                        _heap_push(hd[j], ho[j], cnt[j], v, oi)
                        cnt[j] += 1
                        if cnt[j] == n:
                            thr[j] = hd[j, 0]
                    else:
                        _heap_replace_top(hd[j], ho[j], n, v, oi)
                        thr[j] = hd[j, 0]
        for j in range(k):
            r = r0 + j
            rx = refs_x[r]
            if cnt[j] == n:
                hdj = hd[j]
                hoj = ho[j]
                top = hdj[0]
                # members in scan order: those closer than the n-th, then its ties
                order = np.argsort(hoj)
                q = 0
                for t in range(n):
                    i = order[t]
                    if hdj[i] < top:
                        out_y[r, q] = ry + off_y[hoj[i]]
                        out_x[r, q] = rx + off_x[hoj[i]]
                        q += 1
                for t in range(n):
                    i = order[t]
                    if hdj[i] == top:
                        out_y[r, q] = ry + off_y[hoj[i]]
                        out_x[r, q] = rx + off_x[hoj[i]]
                        q += 1
                continue
            # a very thin image leaves fewer than n searched candidates: all of them
            # (their n-th is +inf), then the unsearched positions in scan order
            x0 = max(0, rx - R)
            x1 = min(W - p, rx + R)
            nx = x1 - x0 + 1
            q = 0
            for iy in range(ny):
                for ix in range(nx):
                    a = y0 + iy - ry + R
                    b = x0 + ix - rx + R
                    if (a == R and b == R) or (mask[a, b] and dist[omap[a, b], r] < np.inf):
                        out_y[r, q] = y0 + iy
                        out_x[r, q] = x0 + ix
                        q += 1
            for iy in range(ny):
                for ix in range(nx):
                    if q >= n:
                        break
                    a = y0 + iy - ry + R
                    b = x0 + ix - rx + R
                    if not (a == R and b == R) and (not mask[a, b]
                                                    or dist[omap[a, b], r] == np.inf):
                        out_y[r, q] = y0 + iy
                        out_x[r, q] = x0 + ix
                        q += 1


@njit(cache=True, parallel=True, nogil=True)
def _gather(img, gy, gx, p, out):
    nref, n = gy.shape
    for r in prange(nref):
        for k in range(n):
            y = gy[r, k]
            x = gx[r, k]
            for a in range(p):
                for b in range(p):
                    out[r, k, a * p + b] = img[y + a, x + b]


@njit(cache=True, parallel=True, fastmath=True, nogil=True)
def _eig(B, rbf, gamma, floor, lam_out, V_out, rowmean_out, K_out):
    """Per group: Gram (RBF or linear), exact centring, eigenpairs in descending order.

    ``rowmean_out`` keeps the row means of the uncentred Gram, needed to centre the
    kernel values of new points (stage 2) consistently.  With ``floor > 0`` only the
    eigenpairs with eigenvalues above ``floor`` are computed (LAPACK ``ssyevr``; the
    others are returned as zeros): a stage that keeps only those needs no more, and
    the back-transformation of the few kept vectors costs about half a full
    decomposition (measured 0.22 s against 0.39 s for 4096 groups of 40 keeping 4.5).
    ``K_out`` (nref, n, n), unless it is empty, receives the uncentred Gram.
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
        # float32 LAPACK is ~15-25% faster on these small matrices and the kept
        # components are far above float32 round-off; components below 1e-6 of the
        # largest eigenvalue are never used (see the thresholds in _project*)
        # (ssyevr overwrites its input: the full solver, the fallback if LAPACK
        # reports a failure, gets a fresh copy)
        if floor > 0.0 and _eig_above(Kc.astype(np.float32), floor, lam_out[r], V_out[r]):
            continue
        w, v = np.linalg.eigh(Kc.astype(np.float32))
        for k in range(n):
            lam_out[r, k] = w[n - 1 - k]
            for i in range(n):
                V_out[r, i, k] = v[i, n - 1 - k]


@njit(cache=True, nogil=True)
def _eig_above(A, floor, lam, V):
    """The eigenpairs of the symmetric float32 matrix ``A`` with eigenvalues above
    ``floor`` (descending, in ``lam`` and the columns of ``V``; zeros after them)
    through ``ssyevr``.  False if LAPACK reports a failure (``A`` is overwritten)."""
    n = A.shape[0]
    jobz = np.array([ord("V")], np.uint8)
    rng = np.array([ord("V")], np.uint8)
    uplo = np.array([ord("L")], np.uint8)  # A is symmetric: either storage order
    nn = np.array([n], np.int32)
    vl = np.array([floor], np.float32)
    vu = np.array([np.inf], np.float32)
    il = np.array([1], np.int32)
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


@njit(cache=True, parallel=True, fastmath=True, nogil=True)
def _project1(lam, V, tau, nu, ranks, agg0, Gam, aggw, kept):
    """Stage 1: shrinkage of the group's own kernel components: the components with
    ``lambda_k > tau`` are kept with the weight ``w_k = (lambda_k - nu) / lambda_k``
    (``nu = 0``: hard threshold; ``nu = tau``: soft; ``0 < nu < tau``: Wiener weights
    with the noise power ``nu`` behind a threshold ``tau``).

    Expansion weights ``Gam[r, q, i, :]`` of the projection of member ``i`` (rank cap
    ``ranks[q]``) on the feature-space images of the members, centring-corrected.
    With ``beta_ik = lambda_k alpha_ik`` and ``alpha_k = v_k / sqrt(lambda_k)``,
    ``sum_k w_k beta_ik alpha_jk = sum_k w_k v_ik v_jk``.
    """
    nref, n = lam.shape
    nr = ranks.shape[0]
    for r in prange(nref):
        lmax = lam[r, 0]
        w = np.zeros(n)
        nkeep = 0
        for k in range(n):
            l = lam[r, k]
            if l > 1e-6 * max(lmax, 1e-300) and l > tau:
                w[k] = (l - nu) / l
                nkeep = k + 1
        for q in range(nr):
            cap = ranks[q] if ranks[q] >= 0 else n
            cap = min(cap, nkeep)
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
                aggw[r, q, i] = 1.0 / (agg0 + ss)


@njit(cache=True, parallel=True, fastmath=True, nogil=True)
def _project2(lam, V, rowmean, P, X, rbf, gamma_x, kscale, tau2, cut, group, ranks, agg0, Gam,
              aggw, kept):
    """Stage 2: kernel PCA of the pilot group, coefficients of the noisy members,
    empirical Wiener weights from the pilot: with ``group`` one weight per component
    from the group's mean power ``lambda_k / n``, else one per member and component
    from the member's own pilot coefficient."""
    nref, n, d = P.shape
    nr = ranks.shape[0]
    for r in prange(nref):
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
        # centred cross-kernel between noisy members (rows) and pilot members (cols)
        Kx = np.empty((n, n))
        if rbf:
            for i in range(n):
                for j in range(n):
                    s = 0.0
                    for t in range(d):
                        u = X[r, i, t] - P[r, j, t]
                        s += u * u
                    Kx[i, j] = kscale * math.exp(-gamma_x * s)
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
                    if group:
                        bp2 = lam[r, k] / n  # the pilot's mean power on the component
                    else:
                        bp = sq[k] * V[r, i, k]  # the pilot's own coefficient lambda*alpha
                        bp2 = bp * bp
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
                aggw[r, q, i] = 1.0 / (agg0 + ss)


@njit(cache=True, parallel=True, fastmath=True, nogil=True)
def _preimage(Gam, B, use_member, rbf, gamma, max_iter, tol2, K, Est, fallbacks, iters):
    """Mika et al. (1998) fixed-point pre-image for every group member and rank.

    ``B`` holds the expansion points (noisy members in stage 1, pilot members in
    stage 2) and, with ``use_member``, the starting points.  For the linear kernel the
    pre-image is exact: ``sum_j Gam_ij B_j``.  ``K``, unless empty, is the RBF Gram
    of ``B`` (from :func:`_eig`): a member start ``z = B_i`` then has its kernel
    values ``exp(-gamma |z - B_j|^2) = K_ij`` already, which saves the first
    iteration's distances.
    """
    nref, nr, n, _ = Gam.shape
    d = B.shape[2]
    have_k = K.shape[0] == nref and rbf and use_member
    for r in prange(nref):
        fb = 0
        it_total = 0
        zl = np.empty(d)
        z = np.empty(d)
        zn = np.empty(d)
        dd = np.empty(n)
        for q in range(nr):
            for i in range(n):
                # linear (large-width limit) reconstruction sum_j Gam_ij x_j: the exact
                # answer for kernel="linear" and the fallback for the RBF iteration
                # (then computed only when a guard needs it)
                if not rbf or not use_member:
                    _linear_recon(Gam, B, r, q, i, zl)
                if not rbf:
                    for t in range(d):
                        Est[r, q, i, t] = zl[t]
                    continue
                if use_member:
                    for t in range(d):
                        z[t] = B[r, i, t]
                else:
                    for t in range(d):
                        z[t] = zl[t]
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
                    den = 0.0
                    aden = 0.0
                    for t in range(d):
                        zn[t] = 0.0
                    for j in range(n):
                        # a common factor exp(-gamma dmin) cancels in the ratio: it keeps
                        # the kernel values from underflowing when z is far from all x_j
                        if from_k:
                            c = Gam[r, q, i, j] * K[r, i, j]
                        else:
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
                            if use_member:
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


_STAGES = ("grouping", "eigensolver", "projection", "preimage", "reassembly")


# ----------------------------------------------------------------------------
# stages: each works on one chunk of reference patches (numba does the loops)
# ----------------------------------------------------------------------------


def _pad_for_matching(guide: np.ndarray, p: int, m: int) -> np.ndarray:
    """``guide`` extended for ``m x m`` matching windows around ``p x p`` patches:
    ``(m - p) // 2`` pixels before and the rest after, on both axes, by mirror
    reflection (deterministic; the image itself when ``m == p``)."""
    lo = (m - p) // 2
    hi = m - p - lo
    if lo == 0 and hi == 0:
        return guide
    return np.ascontiguousarray(np.pad(guide, ((lo, hi), (lo, hi)), mode="reflect"))


def search_mask(R: int, dense: int | None = None, lags: Sequence = ()) -> np.ndarray:
    """The searched offsets of a ``(2 R + 1)^2`` window, a boolean array indexed by
    ``dy + R, dx + R``: every offset up to ``dense`` (None: ``R``) on both axes,
    beyond that those whose row and column offsets are both even, and every offset
    within 2 px of a point ``a v1 + b v2`` of the lattice spanned by ``lags`` (a
    regular texture's two periods, :func:`periodic_lags`; ``a, b`` in -4..4), so
    that its repeats are matched exactly at any period."""
    off = np.arange(-R, R + 1)
    even = off % 2 == 0
    mask = np.outer(even, even)
    d = R if dense is None else min(int(dense), R)
    mask[R - d:R + d + 1, R - d:R + d + 1] = True
    if len(lags) == 2:
        (y1, x1), (y2, x2) = lags
        for a in range(-4, 5):
            for b in range(-4, 5):
                cy, cx = a * y1 + b * y2, a * x1 + b * x2
                if max(abs(cy), abs(cx)) <= R + 2:
                    mask[max(cy - 2 + R, 0):max(cy + 3 + R, 0),
                         max(cx - 2 + R, 0):max(cx + 3 + R, 0)] = True
    return mask


def exact_sums(guide: np.ndarray, m: int) -> bool:
    """Whether :func:`match` may keep running sums on ``guide`` ((C, H, W) or
    (H, W)): it holds integers, and ``C m^2 D^2`` (D its span), the largest SSD of
    two ``m x m`` windows, is at most 2^52, so that every partial sum is exact."""
    g = guide if guide.ndim == 3 else guide[None]
    if g.size == 0 or not np.array_equal(g, np.round(g)):
        return False
    span = float(g.max()) - float(g.min())
    return g.shape[0] * float(m) ** 2 * span * span <= 2.0 ** 52


def quantise_guide(guide: np.ndarray, sigma: float) -> np.ndarray:
    """A matching guide in integer units of ``sigma / 1024`` (``round(guide / step)``,
    float64), so that :func:`match` can keep exact running sums.  The rounding,
    at most ``sigma / 2048``, changes the matching distances by a part in ten
    thousand of the noise's; the step depends on ``sigma`` only, so tiles of an
    image get the values the whole image gets."""
    with np.errstate(over="ignore"):
        q = np.round(guide * (1024.0 / float(sigma)))
    # a guide so far beyond its noise that the units overflow keeps its own values
    # (matched with fresh sums, as before)
    return q if np.isfinite(q).all() else guide


def match(guide_padded: np.ndarray, ry: np.ndarray, rx: np.ndarray, p: int, m: int, R: int,
          n: int, dense: int | None = None, lags: Sequence = (), running: bool | None = None,
          work: np.ndarray | None = None):
    """Block matching on a guide padded by :func:`_pad_for_matching`: the member
    positions ``gy, gx`` (len(ry), n), the reference among them, over the offsets of
    :func:`search_mask` (``dense``, ``lags``).  ``running`` (None: :func:`exact_sums`,
    a pass over the guide) lets the distances be updated from the neighbouring
    windows' (:func:`quantise_guide` makes a guide fit for it); only a guide of
    integers with exact sums gives the same members with it as without.  ``work``, a
    float64 scratch array of at least (searched offsets, len(ry)), spares the
    allocation when the calls repeat (a chunk's distances: tens of MB)."""
    k = len(ry)
    g = np.ascontiguousarray(guide_padded if guide_padded.ndim == 3 else guide_padded[None],
                             dtype=np.float64)
    if running is None:
        running = exact_sums(g, m)
    if k:
        # every reference needs n positions in its (clipped) window, searched or not
        H, W = g.shape[1] - (m - p), g.shape[2] - (m - p)
        ny = np.minimum(H - p, ry + R) - np.maximum(0, ry - R) + 1
        nx = np.minimum(W - p, rx + R) - np.maximum(0, rx - R) + 1
        if n > int((ny * nx).min()):
            raise ValueError(f"groups of {n} need more positions than the search window "
                             f"holds ({int((ny * nx).min())})")
    gy = np.empty((k, n), np.int64)
    gx = np.empty((k, n), np.int64)
    mask = search_mask(R, dense, lags)
    noff = int(mask.sum())
    if (work is None or work.dtype != np.float64 or work.ndim != 2 or not work.flags.c_contiguous
            or work.shape[0] < noff or work.shape[1] < k):
        work = np.empty((noff, k))
    _match(g, ry, rx, p, m, R, mask, n, bool(running), work, gy, gx)
    return gy, gx


def gather(img: np.ndarray, gy: np.ndarray, gx: np.ndarray, p: int) -> np.ndarray:
    """The members' patches of ``img``: (len(gy), n, p*p) float64."""
    out = np.empty(gy.shape + (p * p,))
    _gather(img, gy, gx, p, out)
    return out


def grouping(img: np.ndarray, guide: np.ndarray, ry: np.ndarray, rx: np.ndarray, p: int,
             R: int, n: int, with_pilot: bool, m: int | None = None):
    """Block matching on ``guide`` (``m x m`` windows, ``None`` = ``p``); the members'
    noisy patches and, with a pilot, its patches.

    Returns ``gy, gx`` (k, n) member positions and ``X, P`` (k, n, p*p) float64
    (``P is X`` without a pilot).
    """
    m = p if m is None else m
    gy, gx = match(_pad_for_matching(guide, p, m), ry, rx, p, m, R, n)
    X = gather(img, gy, gx, p)
    return gy, gx, X, (gather(guide, gy, gx, p) if with_pilot else X)


def fit_groups(P: np.ndarray, rbf: bool, gamma: float, floor: float = 0.0,
               gram: bool = False):
    """Per-group kernel PCA: eigenvalues ``lam`` (m, n) descending, eigenvectors
    ``V`` (m, n, n) in columns and the uncentred Gram's row means (m, n).  With
    ``floor > 0`` only the eigenpairs above it (the rest zeros).  ``gram=True`` adds
    the uncentred Gram matrices (m, n, n) for :func:`preimage`."""
    m, n, _ = P.shape
    lam = np.empty((m, n))
    V = np.empty((m, n, n))
    rowmean = np.empty((m, n))
    K = np.empty((m, n, n) if gram else (0, 0, 0))
    _eig(P, rbf, gamma, float(floor), lam, V, rowmean, K)
    return (lam, V, rowmean, K) if gram else (lam, V, rowmean)


def shrink_own(lam: np.ndarray, V: np.ndarray, tau: float, ranks: np.ndarray,
               nu: float = 0.0):
    """Stage-1 shrinkage of each group's own components: ``w_k = (lambda_k - nu) /
    lambda_k`` where ``lambda_k > tau``, else 0 (``nu`` 0: hard threshold, ``nu = tau``:
    soft).  Returns the expansion weights ``Gam`` (m, nr, n, n), the aggregation
    weights (m, nr, n) and the number of kept components (m, nr)."""
    m, n = lam.shape
    nr = len(ranks)
    Gam = np.empty((m, nr, n, n))
    aggw = np.empty((m, nr, n))
    kept = np.empty((m, nr), np.int64)
    _project1(lam, V, float(tau), float(nu), ranks, 1.0, Gam, aggw, kept)
    return Gam, aggw, kept


def shrink_pilot(lam: np.ndarray, V: np.ndarray, rowmean: np.ndarray, P: np.ndarray,
                 X: np.ndarray, floors: dict, rbf: bool, cut: float, ranks: np.ndarray,
                 weights: str = "group"):
    """Stage-2 shrinkage: the noisy members projected on the pilot's kernel PCA, each
    coefficient with the empirical Wiener weight ``s / (s + tau2)``: ``s = lambda_k /
    n``, the pilot group's mean power on component ``k`` (``weights="group"``), or
    ``s = b_ik^2``, member ``i``'s own pilot coefficient (``"member"``).  Same outputs
    as :func:`shrink_own`."""
    if weights not in ("group", "member"):
        raise ValueError(f"weights must be 'group' or 'member', got {weights!r}")
    m, n = lam.shape
    nr = len(ranks)
    Gam = np.empty((m, nr, n, n))
    aggw = np.empty((m, nr, n))
    kept = np.empty((m, nr), np.int64)
    _project2(lam, V, rowmean, P, X, rbf, floors["g_x"], floors["kscale"], floors["tau2"],
              cut, weights == "group", ranks, 1.0, Gam, aggw, kept)
    return Gam, aggw, kept


def preimage(Gam: np.ndarray, B: np.ndarray, use_member: bool, rbf: bool, gamma: float,
             max_iter: int, tol2: float, K: np.ndarray | None = None):
    """Mika fixed-point pre-image of every member and rank: estimates (m, nr, n, d), and
    the guarded steps and iterations per group.  ``K``: the RBF Gram of ``B`` from
    :func:`fit_groups` (``gram=True``), which saves the first iteration's distances
    when the iteration starts at the members."""
    m, nr, n, _ = Gam.shape
    Est = np.empty((m, nr, n, B.shape[2]))
    fb = np.zeros(m, np.int64)
    its = np.zeros(m, np.int64)
    _preimage(Gam, B, use_member, rbf, gamma, max_iter, tol2,
              np.empty((0, 0, 0)) if K is None else K, Est, fb, its)
    return Est, fb, its


def correct_means(Est: np.ndarray, X: np.ndarray, noise_var: float) -> None:
    """Stage-1 Wiener step on the patch means the low-rank estimate left out, in place.

    Per member ``i`` of a group, ``r_i = mean(x_i) - mean(xhat_i)``: the noisy patch's
    mean less its estimate's.  With ``v`` the group's mean of ``r_i^2`` (per rank),
    every estimate gets ``w r_i`` added to all its pixels, ``w = max(v - noise_var, 0)
    / v``.  The data-driven components find a direction only when it stands above
    the largest noise eigenvalue of the group, so a spread of brightness between
    members that is small against that goes to the group mean; along this one fixed
    direction the noise is known (``sigma^2 / d`` per member), and the Wiener step
    keeps the part of the spread that stands above it.  ``Est`` (m, nr, n, d), ``X``
    (m, n, d).
    """
    r = X.mean(axis=2)[:, None, :] - Est.mean(axis=3)
    v = np.mean(r * r, axis=2, keepdims=True)
    w = np.maximum(v - noise_var, 0.0) / np.maximum(v, 1e-300)
    Est += (w * r)[..., None]


def aggregate(Est: np.ndarray, aggw: np.ndarray, gy: np.ndarray, gx: np.ndarray, p: int,
              num: np.ndarray, den: np.ndarray, win: np.ndarray) -> None:
    """Adds the windowed, weighted patch estimates into ``num`` and their weights into
    ``den`` (both (nr, H, W)); the image is ``num / den``."""
    _aggregate(Est, aggw, gy, gx, p, num, den, win)


# ----------------------------------------------------------------------------
# driver
# ----------------------------------------------------------------------------


#: search radius of the grouped method, both stages (a 65x65 window)
SEARCH_RADIUS = 32
#: offsets searched densely (BM3D's 39x39 window); outside that square only the
#: positions whose row and column offsets are both even
DENSE_RADIUS = 19
#: search radius of a regular texture (an 81x81 window; dense around its repeats,
#: :func:`search_mask`): the repeats two periods away of a texture whose period is
#: beyond 32 px (36x17 px bricks) are then in reach
TEXTURE_RADIUS = 40
#: noise level (as a fraction of the data range) above which the stage-1 matching
#: window widens from ``patch_size + 2`` to ``patch_size + 8`` (45 / 255; BM3D
#: switches its profile at sigma 40 / 255)
HIGH_NOISE = 45.0 / 255.0


#: periodicity score (:func:`periodic_lags`) above which an image is a regular
#: texture and gets the texture settings (``periodic`` of :func:`denoise_grouped`).
#: Measured on 256x256 crops and whole images, clean and at sigma 15 / 25 / 50:
#: photographs (the development set, aero, ascent, face, Grace Hopper) 0.03-0.15,
#: synthetic bricks of four sizes and a weave 0.61-0.82, the walls of
#: ``benchmarks/textures.py --walls`` 0.40-0.64 and its irregular walls
#: (``--irregular``) 0.12-0.49; the Shepp-Logan phantom 0.24-0.29.  Stop 24 lowered it
#: from 0.4: the irregular walls that score 0.3-0.4 gain with the texture settings at
#: every sigma (``benchmarks/results_textures.txt``), and a photograph scores half of it
PERIODIC = 0.3
#: side of the central crop the score is measured on
PERIODIC_CROP = 256
#: periodicity scores in this range (above the first, up to the second) are
#: borderline: a trial decides (:func:`periodic_trial`), not :data:`PERIODIC`.
#: Measured in stop 28 at sigma 15 / 25 / 35 / 50: the development photographs score
#: 0.04-0.10, the 21 borderline walls of ``benchmarks/textures.py --borderline``
#: 0.155-0.40 (the texture settings -0.10 / -0.10 / +0.12 / +0.28 dB against the
#: photograph settings on them, whatever their score), its irregular walls 0.12-0.49
#: (the texture settings better but for 0.05 dB at most), the Shepp-Logan phantom 0.25-0.29
#: and the horse silhouette 0.21 (the texture settings +0.19 / +0.20 / -0.13 / -0.62
#: and +0.55 / +0.51 / -0.32 / -0.92 dB); regular textures 0.53 and more
BORDERLINE = (0.15, 0.45)
#: how much of the trial's recorrupting noise goes into the image it denoises
#: (``a`` of :func:`periodic_trial`).  With 0.5 the trial judges at 1.12 sigma.
#: Measured in stop 28 (scratch runs; ``benchmarks/results_textures.txt``): on the 21
#: borderline walls it picked the better settings 17 / 11 / 20 / 21 times at sigma 15
#: / 25 / 35 / 50 (the misses cost 0.16 dB at most, at sigma 25, where the two
#: settings are closest), against :data:`PERIODIC` alone +0.06 / +0.01 / +0.07 /
#: +0.28 dB mean; on the phantom, the horse, the page scan, the clock and the blobs of
#: ``benchmarks/kernel_gain.py``, the irregular walls and one wall of ``--walls``, 36
#: of 38 (misses 0.05 dB at most; no development photograph scores in the band),
#: +0.55 / +0.51 dB on the horse at sigma 15 / 25, +0.19 / +0.20 on the phantom.  With 1.0 it judges at 1.41 sigma: as right at sigma 35 and 50, but at
#: sigma 25 it took the texture settings for the walls (which suit sigma 35 better
#: than sigma 25) and the photograph settings for the phantom and the horse
TRIAL_ALPHA = 0.5
#: seed of the trial's recorrupting noise (fixed: the same image gets the same settings)
TRIAL_SEED = 2028
#: noise levels (fractions of the data range, 15 / 255 and 50 / 255) between which a
#: regular texture's stage-1 matching window grows from 7x7 to 35x35
#: (:func:`texture_match_extra`)
TEXTURE_NOISE0 = 15.0 / 255.0
TEXTURE_NOISE1 = 50.0 / 255.0
#: a regular texture's contrast (:func:`texture_contrast`) times this is the span its
#: noise is also measured against (:func:`texture_noise`): a faint texture gets the
#: window its noise against its contrast calls for, when wider than the data range's.
#: 10: the walls the window rule was chosen on (``benchmarks/textures.py --walls``)
#: have a std of 22-28 on 0..255, so their windows hardly change.  Stop 29: faint
#: walls (half contrast or less, 1-2 px mortar, little grain; std 8-16) lost 0.3-1.1 dB
#: to BM3D at sigma 15 / 25 with 7x7 / 9x9 windows and gain with 13x13-35x35
#: (``benchmarks/results_textures.txt``)
TEXTURE_SPAN = 10.0
#: a photograph's detail (:func:`coarse_detail`) under which its stage-1 matching window is
#: 9x9 / 11x11 instead of 7x7 (5x5 patches; :func:`resolve_geometry`)
SMOOTH = (0.6, 0.3)
#: the side of the blocks whose means :func:`coarse_detail` compares
DETAIL_BLOCK = 4


def central_crop(image: np.ndarray, size: int = PERIODIC_CROP) -> np.ndarray:
    """The central ``size x size`` part of ``image`` (its first two axes; all of an
    axis shorter than ``size``): where :func:`periodic_lags` and :func:`coarse_detail`
    measure, so that a tiled image can be measured as the core measures one piece."""
    H, W = image.shape[:2]
    h, w = min(H, size), min(W, size)
    return image[(H - h) // 2:(H - h) // 2 + h, (W - w) // 2:(W - w) // 2 + w]


def coarse_detail(image: np.ndarray, sigma: float, size: int = PERIODIC_CROP) -> float | None:
    """How much a noisy image varies at a coarse scale, against its noise: the RMS
    difference between neighbouring means of ``DETAIL_BLOCK``-pixel blocks, less the
    noise's share (``2 sigma^2 / DETAIL_BLOCK^2``), over ``sigma``; on the central
    ``size x size`` crop, as :func:`periodic_lags` measures.

    Low for a smooth image (an out-of-focus background, a sky, an upscaled image)
    and for a faint one: there the 7x7 window's distances are mostly noise and a
    wider one groups better (:data:`SMOOTH`).  The block means take the noise down
    16-fold, so the value hardly moves with a few per cent of error in ``sigma``,
    unlike the same measure on single pixels (a difference of two nearly equal
    numbers).  At sigma 25 the development photographs score 1.1-1.25 (hubble 0.64,
    moon 0.22), their 2x-blurred or 3x-upscaled crops 0.14-0.91 (stop 25).  None
    for an image under two blocks a side (too small to tell).
    """
    a = central_crop(np.asarray(image, dtype=np.float64), size)
    b = DETAIL_BLOCK
    h, w = a.shape[0] - a.shape[0] % b, a.shape[1] - a.shape[1] % b
    if h < 2 * b or w < 2 * b:
        return None  # too small to tell: the default window
    m = a[:h, :w].reshape(h // b, b, w // b, b).mean(axis=(1, 3))
    e = 0.5 * (float(np.mean(np.diff(m, axis=0) ** 2)) + float(np.mean(np.diff(m, axis=1) ** 2)))
    s2 = float(sigma) ** 2
    return math.sqrt(max(e - 2.0 * s2 / (b * b), 0.0) / s2)


def periodicity(image: np.ndarray, sigma: float, data_range: float | None = None,
                size: int = PERIODIC_CROP) -> float:
    """The score of :func:`periodic_lags`."""
    return periodic_lags(image, sigma, data_range, size)[0]


def periodic_lags(image: np.ndarray, sigma: float, data_range: float | None = None,
                  size: int = PERIODIC_CROP) -> tuple[float, tuple, tuple]:
    """``(score, v1, v2)``: how strongly ``image`` repeats itself in two directions,
    the normalised autocorrelation of its detail at its second period, a shift of 8
    to 40 pixels at least 30 degrees away from the best one (0 = nothing repeats, 1 =
    an exact two-dimensional period), and the two shifts.

    Computed on the central ``size x size`` crop, smoothed by a Gaussian of width
    ``1 + 10 sigma / range`` (``range``: ``data_range`` or the crop's span) so that
    the noise does not mask the repeat, less its 15x15 local mean (the detail).
    Shifts under 8 px are left out (every smooth image correlates with itself
    there), and so are the shifts along the best one: a long edge or a set of
    parallel lines matches itself along its own direction, a texture of bricks or
    a weave repeats in two.  ``v1`` and ``v2`` are the two shifts ``(dy, dx)`` (the
    periods, for :func:`search_mask`).  Images under 48 px on a side score 0 (with
    zero shifts).
    """
    from scipy.fft import irfft2, rfft2
    from scipy.ndimage import gaussian_filter, uniform_filter

    a = central_crop(np.asarray(image, dtype=np.float64), size)
    h, w = a.shape
    none = (0.0, (0, 0), (0, 0))
    if h < 48 or w < 48:
        return none
    span = float(data_range) if data_range is not None else float(np.ptp(a))
    if not span > 0.0:
        return none
    x = gaussian_filter(a, 1.0 + 10.0 * float(sigma) / span)
    x = x - uniform_filter(x, 15)
    x -= x.mean()
    ac = irfft2(np.abs(rfft2(x, s=(2 * h, 2 * w))) ** 2, s=(2 * h, 2 * w))
    if not ac[0, 0] > 0.0:
        return none
    L = min(40, h // 3, w // 3)
    dy = np.arange(-L, L + 1)[:, None].astype(np.float64)
    dx = np.arange(0, L + 1)[None, :].astype(np.float64)
    c = ac[np.arange(-L, L + 1)[:, None] % (2 * h), np.arange(0, L + 1)[None, :]] / ac[0, 0]
    r2 = dy * dy + dx * dx
    c = np.where(r2 >= 64.0, c, -np.inf)
    i, j = np.unravel_index(np.argmax(c), c.shape)
    cos = (dy * dy[i, 0] + dx * dx[0, j]) / np.sqrt(np.maximum(r2 * r2[i, j], 1e-300))
    c = np.where(np.abs(cos) < math.cos(math.radians(30.0)), c, -np.inf)
    k, q = np.unravel_index(np.argmax(c), c.shape)
    return (float(max(c[k, q], 0.0)), (int(dy[i, 0]), int(dx[0, j])),
            (int(dy[k, 0]), int(dx[0, q])))


def _decide_periodic(imgs: list, sigma: float, kw: dict) -> tuple[bool, float, tuple, dict | None]:
    """``(periodic, score, (v1, v2), trial)`` for the channels ``imgs`` and the
    keywords ``kw`` of :func:`_denoise_channels`: ``kw["periodic"]`` when given, else
    the score (:func:`periodic_lags_channels` of the matched channels) above
    :data:`PERIODIC`, or for a score in :data:`BORDERLINE` the :func:`periodic_trial`'s
    better settings (``trial``: its estimates; None when there was none)."""
    matched = imgs if kw["match_channels"] == "all" else imgs[:1]
    score, v1, v2 = periodic_lags_channels(matched, sigma, kw["data_range"])
    if kw.get("lags") is not None:  # decided for the whole image (the tiled engine)
        v1, v2 = (tuple(int(c) for c in v) for v in kw["lags"])
    given, trial = kw["periodic"], None
    if given is not None:
        return bool(given), score, (v1, v2), None
    periodic = score > PERIODIC
    if BORDERLINE[0] < score <= BORDERLINE[1]:
        trial = periodic_trial(imgs, sigma, kw)
        periodic = trial["texture"] < trial["photo"]
    return bool(periodic), score, (v1, v2), trial


def decide_periodic(chans: Sequence[np.ndarray], sigma: float, **kw: Any) -> bool:
    """``periodic`` as :func:`denoise_grouped_channels` decides it for the channels
    ``chans`` with the keywords ``kw`` (as :func:`denoise_grouped`), from their
    central crop: for the tiled engine, which decides once for the whole image."""
    imgs = [np.ascontiguousarray(central_crop(np.asarray(c, dtype=np.float64))) for c in chans]
    bound = _SIGNATURE.bind(imgs[0], sigma, **kw)
    bound.apply_defaults()
    args = dict(bound.arguments)
    del args["image"], args["sigma"]
    return _decide_periodic(imgs, float(sigma), args)[0]


def periodic_trial(chans: Sequence[np.ndarray], sigma: float, kw: dict) -> dict:
    """Which settings denoise ``chans`` better, by a trial on their central crop:
    ``{"photo": mse, "texture": mse}``, each an unbiased estimate of that setting's
    mean squared error at noise ``sigma sqrt(1 + a^2)`` (``a``: :data:`TRIAL_ALPHA`).
    Most of either estimate's error (the energy of the noise it is compared with) is
    the same in both, so their difference, which decides, is far more precise.

    Recorrupted-to-recorrupted (Pang et al., CVPR 2021): with ``z`` white noise of
    std ``sigma``, ``y1 = y + a z`` and ``y2 = y - z / a`` carry independent noise
    (their covariance is ``sigma^2 - sigma^2 = 0``), so for a denoiser ``f`` told
    ``sigma sqrt(1 + a^2)``, ``E ||f(y1) - y2||^2 / N = E ||f(y1) - x||^2 / N + sigma^2
    (1 + 1 / a^2)``: the two settings are compared on the image itself, with no
    clean copy, two runs of the crop (at most :data:`PERIODIC_CROP` a side).  No
    derivative is taken (Monte-Carlo SURE, tried first, is thrown off by the block
    matching, whose groups jump under a small perturbation).  ``kw``: the keywords
    of :func:`_denoise_channels` (``periodic``, ``ranks`` and ``progress`` are
    replaced).  ``z`` is drawn from :data:`TRIAL_SEED`, so the choice is repeatable.
    """
    a = TRIAL_ALPHA
    crop = [np.ascontiguousarray(central_crop(np.asarray(c, dtype=np.float64))) for c in chans]
    rng = np.random.default_rng(TRIAL_SEED)
    z = [rng.standard_normal(c.shape) * float(sigma) for c in crop]
    y1 = [c + a * zz for c, zz in zip(crop, z)]
    y2 = [c - zz / a for c, zz in zip(crop, z)]
    s1 = float(sigma) * math.sqrt(1.0 + a * a)
    out = {}
    for name, per in (("photo", False), ("texture", True)):
        res, _ = _denoise_channels(y1, s1, **dict(kw, periodic=per, ranks=(None,), progress=None))
        err = float(np.mean([np.mean((r[None] - b) ** 2) for r, b in zip(res, y2)]))
        out[name] = err - float(sigma) ** 2 * (1.0 + 1.0 / (a * a))
    return out


def periodic_lags_channels(chans: Sequence[np.ndarray], sigma: float,
                           data_range: float | None = None,
                           size: int = PERIODIC_CROP) -> tuple[float, tuple, tuple]:
    """:func:`periodic_lags` of the channel that repeats most (the first of equals),
    every channel measured against ``data_range`` (channel 0's span): a colour texture
    can repeat in its chrominance more than in its luminance."""
    return max((periodic_lags(c, sigma, data_range, size) for c in chans),
               key=lambda r: r[0])


def resolve_geometry(patch_size: int | None = None, stride: int | None = None,
                     stride1: int | None = None, match_size1: int | None = None,
                     match_size: int | None = None, search_radius: int | None = None,
                     search_radius1: int | None = None,
                     noise_fraction: float | None = None, periodic: bool = False,
                     detail: float | None = None) -> dict:
    """The patch geometry of :func:`denoise_grouped`, defaults resolved and checked.

    ``patch_size`` None -> 5; ``stride`` None -> ``patch_size - 1`` (at least 1);
    ``stride1`` None -> ``stride``; ``match_size1`` / ``match_size`` None ->
    ``patch_size + 2`` / ``patch_size + 6`` (a window smaller than the patch means the
    patch), and ``match_size1`` None -> ``patch_size + 8`` when ``noise_fraction``
    (sigma / data range; None: unknown) exceeds :data:`HIGH_NOISE`, else ``patch_size
    + 4`` / ``+ 6`` when ``detail`` (:func:`coarse_detail`; None: unknown) is under
    :data:`SMOOTH`'s first / second value (not for a ``periodic`` image), ``match_size``
    None -> ``patch_size + 2`` for a ``periodic`` image when it does not;
    ``search_radius`` None -> :data:`SEARCH_RADIUS` (32), or :data:`TEXTURE_RADIUS`
    (40) for a ``periodic`` image; ``search_radius1`` (stage 1) None ->
    ``search_radius``; ``dense_radius``, the offsets searched densely, is
    :data:`DENSE_RADIUS` (19).  The
    tiled engine takes its halo from the same values.
    """
    p = 5 if patch_size is None else int(patch_size)
    if p < 1:
        raise ValueError(f"patch_size must be >= 1, got {patch_size}")
    R = (TEXTURE_RADIUS if periodic else SEARCH_RADIUS) if search_radius is None \
        else int(search_radius)
    if R < 1:
        raise ValueError(f"search_radius must be >= 1, got {search_radius}")
    R1 = R if search_radius1 is None else int(search_radius1)
    if R1 < 1:
        raise ValueError(f"search_radius1 must be >= 1, got {search_radius1}")
    st2 = max(1, p - 1) if stride is None else int(stride)
    st1 = st2 if stride1 is None else int(stride1)
    for name, s in (("stride", st2), ("stride1", st1)):
        if not 1 <= s <= p:
            raise ValueError(f"{name} must be in 1..patch_size={p} (to cover every pixel), got {s}")
    ms = {}
    high = noise_fraction is not None and noise_fraction > HIGH_NOISE
    if periodic:
        extra1 = texture_match_extra(noise_fraction)
    else:
        smooth = 2 if detail is None or detail >= SMOOTH[0] else (4 if detail >= SMOOTH[1] else 6)
        extra1 = max(8 if high else 2, smooth)
    for name, v, extra in (("match_size1", match_size1, extra1),
                           ("match_size", match_size, 2 if periodic else 6)):
        mv = p + extra if v is None else int(v)
        if mv < 1:
            raise ValueError(f"{name} must be >= 1 or None, got {v!r}")
        ms[name] = max(mv, p)
    return dict(patch_size=p, stride=st2, stride1=st1, search_radius=R, search_radius1=R1,
                dense_radius=DENSE_RADIUS, **ms)


def texture_match_extra(noise_fraction: float | None) -> int:
    """How much wider than the patch a regular texture's stage-1 matching window is:
    ``2 + 2 round(14 t^2)`` with ``t = (f - TEXTURE_NOISE0) / (TEXTURE_NOISE1 -
    TEXTURE_NOISE0)`` clipped to 0..1 and ``f`` the noise as a fraction of the data
    range (None, unknown: 2).  With 5x5 patches: 7x7 up to sigma 15 on 0..255, 9x9 at
    25, 13x13 at 30, 17x17 at 35, 27x27 at 45, 35x35 from 50 (:data:`TEXTURE_NOISE1`) on."""
    if noise_fraction is None:
        return 2
    t = min(max((float(noise_fraction) - TEXTURE_NOISE0) / (TEXTURE_NOISE1 - TEXTURE_NOISE0),
                0.0), 1.0)
    return 2 + 2 * int(round(14.0 * t * t))


def texture_contrast(chans: Sequence[np.ndarray], sigma: float, match_channels: str = "all",
                     size: int = PERIODIC_CROP) -> float:
    """The signal's std over the channels the matching sees (all of ``chans``, or the
    first with ``match_channels="first"``), on their central ``size x size`` crop:
    ``sqrt(max(sum_c var(c) - C sigma^2, 0))``, the norm over the channels, as the
    matching's SSD sums them."""
    matched = chans if match_channels == "all" else chans[:1]
    crops = [central_crop(np.asarray(c, dtype=np.float64), size) for c in matched]
    v = float(sum(np.var(c) for c in crops)) - len(crops) * float(sigma) ** 2
    return math.sqrt(max(v, 0.0))


def texture_noise(noise_fraction: float | None, sigma: float, contrast: float, C: int = 1,
                  match_channels: str = "all") -> float:
    """The noise fraction a regular texture's stage-1 window follows
    (:func:`texture_match_extra`): the larger of the noise against one matched
    channel's span and the noise against :data:`TEXTURE_SPAN` times the texture's own
    ``contrast`` (:func:`texture_contrast`; 0: the widest window).

    The span: ``noise_fraction`` (sigma / data_range; None: unknown) times ``sqrt(C)``
    when all ``C`` channels of an orthonormal opponent transform are matched (the
    luminance's span, ``data_range``, is ``sqrt(C)`` times an input channel's).
    Measured on the colour walls of benchmarks/textures.py (gap to CBM3D at sigma 25 /
    35 / 50): +1.39 / +0.94 / +0.70 dB against the luminance's span, +1.45 / +1.24 /
    +1.43 against one channel's."""
    own = sigma / (TEXTURE_SPAN * contrast) if contrast > 0.0 else math.inf
    if noise_fraction is None:
        return own
    span = noise_fraction * math.sqrt(C) if match_channels == "all" else noise_fraction
    return max(float(span), own)


def _grid(L: int, p: int, stride: int) -> np.ndarray:
    """Reference positions 0, stride, ... plus the last position L - p (full coverage)."""
    g = list(range(0, L - p + 1, stride))
    if g[-1] != L - p:
        g.append(L - p)
    return np.asarray(g, dtype=np.int64)


def noise_floors(sigma: float, d: int, n: int, c: float, rbf: bool, kappa1: float,
                 kappa2: float) -> dict:
    """Kernel width and noise floors of one pass (equations in the module docstring).

    ``gamma = 1 / (c 2 d sigma^2)``; ``tau1`` the stage-1 floor; ``g_x`` and ``kscale``
    correct the noisy-to-pilot kernel values of stage 2; ``tau2`` the stage-2
    coefficient noise.
    """
    gamma = 1.0 / (c * 2.0 * d * sigma * sigma)
    if rbf:
        tau1 = 1.0 - (1.0 + 4.0 * gamma * sigma * sigma) ** (-d / 2.0)
    else:
        # linear: noise energy (n-1) d sigma^2 spread over min(d, n-1) directions
        tau1 = (n - 1) * d * sigma * sigma / min(d, n - 1)
    # stage 2 (rbf): kernel between a noisy patch and a pilot patch, corrected so
    # that on average it equals the kernel of the clean patch with width gamma
    g_x = gamma / max(1.0 - 2.0 * gamma * sigma * sigma, 1e-3)
    kscale = (1.0 + 2.0 * g_x * sigma * sigma) ** (d / 2.0)
    tau2 = kappa2 * (2.0 * gamma * sigma * sigma if rbf else sigma * sigma)
    return dict(gamma=gamma, tau1=tau1 * kappa1, g_x=g_x, kscale=kscale, tau2=tau2)


def _run_pass(imgs: list, guides: list, sigma: float, stage: int, n: int,
              ranks: np.ndarray, c: float, st: int, cfg: dict, runs: list, final: bool,
              progress: ProgressCallback | None, cancel: Any) -> list:
    """One pass over all reference patches: ``(nr, H, W)`` estimates per channel.

    ``imgs`` are the channels to denoise, ``guides`` their pilots (stage 2; in stage 1
    the channels themselves).  The groups are found once, on all the guides (or the
    first, ``match_channels="first"``), and shared by every channel; each channel then
    has its own kernel PCA per group.  Stage 1 shrinks each group's own components;
    stage 2 fits on the pilot.  ``runs`` (one per channel) collect timings, counters,
    the final stage's spectrum and kept ranks.
    """
    H, W = imgs[0].shape
    C = len(imgs)
    p = cfg["patch_size"]
    m = cfg["match_size1"] if stage == 1 else cfg["match_size"]
    nr = len(ranks)
    ys = _grid(H, p, st)
    xs = _grid(W, p, st)
    for run in runs:
        run["groups"] += len(ys) * len(xs)
    # ~2048 groups per chunk keeps the per-chunk buffers at a few tens of MB
    rows_per_chunk = max(1, 2048 // (len(xs) * nr))
    nchunks = (len(ys) + rows_per_chunk - 1) // rows_per_chunk
    nums = [np.zeros((nr, H, W)) for _ in range(C)]
    dens = [np.zeros((nr, H, W)) for _ in range(C)]
    rbf = cfg["rbf"]
    fl = noise_floors(sigma, p * p, n, c, rbf, cfg["kappa1"], cfg["kappa2"])
    # the channels after the first (the chrominances of colour) have their own stage-2
    # coefficient-noise multiplier
    fl_rest = dict(fl, tau2=fl["tau2"] * cfg["kappa2_chroma"] / cfg["kappa2"])
    gamma = fl["gamma"]
    cfg[f"stage{stage}_gamma"] = gamma
    cfg[f"stage{stage}_noise_floor"] = fl["tau1"] if stage == 1 else fl["tau2"]
    # the noise power subtracted from the kept stage-1 components (see shrink1)
    nu1 = {"hard": 0.0, "soft": fl["tau1"], "wiener": fl["tau1"] / cfg["kappa1"]}[cfg["shrink1"]]
    tol2 = p * p * (cfg["tol"] * sigma) ** 2
    msg = f"stage {stage}"
    t0 = time.perf_counter()
    # the matching distance: the SSD summed over every channel (for the orthonormal
    # opponent channels of colour, the SSD in RGB), or channel 0's alone
    # in integer units of the noise / 1024 (the original sigma, the same in every pass
    # and tile), so that the matching keeps exact running sums
    guide_m = quantise_guide(np.stack([_pad_for_matching(g, p, m) for g in
                                       (guides if cfg["match_channels"] == "all"
                                        else guides[:1])]), cfg["sigma"])
    running = exact_sums(guide_m, m)
    R = cfg["search_radius1"] if stage == 1 else cfg["search_radius"]
    # the chunks' matching distances, one scratch array for all (tens of MB)
    work = np.empty((int(search_mask(R, cfg["dense_radius"], cfg["lags"]).sum()),
                     min(rows_per_chunk, len(ys)) * len(xs)))
    for run in runs:
        run["seconds"]["grouping"] += (time.perf_counter() - t0) / C
    for ci in range(nchunks):
        check_cancel(cancel)
        yy = ys[ci * rows_per_chunk:(ci + 1) * rows_per_chunk]
        ry = np.ascontiguousarray(np.repeat(yy, len(xs)))
        rx = np.ascontiguousarray(np.tile(xs, len(yy)))
        t0 = time.perf_counter()
        gy, gx = match(guide_m, ry, rx, p, m, R, n, cfg["dense_radius"], cfg["lags"], running,
                       work)
        tm = (time.perf_counter() - t0) / C  # the shared matching, split between channels
        for ch in range(C):
            run = runs[ch]
            sec = run["seconds"]
            t0 = time.perf_counter()
            X = gather(imgs[ch], gy, gx, p)
            P = gather(guides[ch], gy, gx, p) if stage == 2 else X
            t1 = time.perf_counter()
            sec["grouping"] += t1 - t0 + tm
            report(progress, "grouping", ci + 1, nchunks, message=msg)
            # stage 1 uses only the components above its threshold; the final stage
            # reports the whole spectrum
            fit = fit_groups(P, rbf, gamma, fl["tau1"] if stage == 1 and not final else 0.0,
                             gram=rbf)
            lam, V, rowmean = fit[:3]
            K = fit[3] if rbf else None  # for the pre-image's first step
            t2 = time.perf_counter()
            sec["eigensolver"] += t2 - t1
            # the mean spectrum of the final stage's groups, sent as it grows so
            # a plot can show it while the run goes on
            if final:
                run["spectrum"] = lam.sum(axis=0) + (run["spectrum"] if run["spectrum"]
                                                     is not None else 0.0)
                run["final_groups"] += len(ry)
            report(progress, "eigensolver", ci + 1, nchunks, message=msg,
                   eigenvalues=run["spectrum"] / run["final_groups"] if final else None)
            if stage == 1:
                Gam, aggw, kept = shrink_own(lam, V, fl["tau1"], ranks, nu1)
            else:
                Gam, aggw, kept = shrink_pilot(lam, V, rowmean, P, X,
                                               fl if ch == 0 else fl_rest, rbf,
                                               cfg["stage2_cut"], ranks, cfg["wiener2"])
            if final:
                run["kept"] = kept.sum(axis=0) + run["kept"]
            t3 = time.perf_counter()
            sec["projection"] += t3 - t2
            report(progress, "projection", ci + 1, nchunks, message=msg)
            Est, fb, its = preimage(Gam, P, cfg["preimage_init"] == "member", rbf, gamma,
                                    cfg["max_iter"], tol2, K)
            # on channel 0 only (the luminance of colour): the chrominances lose with it
            # (benchmarks/results_issue12.txt); its time counts as the pre-image's
            if stage == 1 and ch == 0 and cfg["mean_kappa1"] is not None:
                correct_means(Est, X, cfg["mean_kappa1"] * sigma * sigma / (p * p))
            run["fallbacks"] += int(fb.sum())
            run["iterations"] += int(its.sum())
            t4 = time.perf_counter()
            sec["preimage"] += t4 - t3
            report(progress, "preimage", ci + 1, nchunks, message=msg)
            aggregate(Est, aggw, gy, gx, p, nums[ch], dens[ch], cfg["window"])
            sec["reassembly"] += time.perf_counter() - t4
            report(progress, "reassembly", ci + 1, nchunks, message=msg)
    # every pixel is covered by a reference patch (stride <= p, last row/col kept)
    return [num / den for num, den in zip(nums, dens)]


def denoise_grouped(
    image: np.ndarray,
    sigma: float,
    *,
    ranks: Sequence[int | None] = (None,),
    kernel: str = "rbf",
    patch_size: int | None = None,
    group_size: int = 32,
    group_size1: int = 40,
    search_radius: int | None = None,
    search_radius1: int | None = None,
    match_size1: int | None = None,
    match_size: int | None = None,
    data_range: float | None = None,
    stride: int | None = None,
    stride1: int | None = None,
    gamma_scale: float = 16.0,
    gamma_scale2: float = 32.0,
    kappa1: float | None = None,
    shrink1: str | None = None,
    kappa2: float | None = None,
    kappa2_chroma: float | None = None,
    wiener2: str = "group",
    stage2_cut: float = 0.1,
    max_iter: int = 2,
    tol: float = 1e-2,
    preimage_init: str = "member",
    window_beta: float = 2.0,
    mean_kappa1: float | None = 0.7,
    two_stage: bool = True,
    periodic: bool | None = None,
    detail: float | None = None,
    contrast: float | None = None,
    lags: Sequence | None = None,
    match_channels: str = "all",
    backprojection: int = 0,
    bp_delta: float = 0.1,
    bp_lambda: float = 1.0,
    progress: ProgressCallback | None = None,
    cancel: Any = None,
) -> tuple[dict[int | None, np.ndarray], dict]:
    """Denoise a single-channel image with two-stage grouped (non-local) kernel PCA.

    Parameters
    ----------
    image : ndarray, shape (H, W)
        Noisy image, float (any value range; ``sigma`` in the same units).
    sigma : float
        Standard deviation of the additive white Gaussian noise, > 0.
    ranks : sequence of int or None, default ``(None,)``
        Hard caps on the number of kernel components kept per group, on top of the
        Wiener shrinkage; ``None`` means no cap (shrinkage only, the best setting).
        All ranks come from the same eigendecomposition per group of the final stage
        (prefixes of the components sorted by eigenvalue); stage 1 always uses
        ``None``.  Each rank must be >= 1.
    kernel : {"rbf", "linear"}, default "rbf"
        ``"linear"`` is the ablation: plain group PCA with the same grouping,
        shrinkage and aggregation (pre-image exact).  Measured: on natural
        photographs the RBF kernel is 0.05 / 0.01 / 0.01 dB ahead at sigma 15 / 25 /
        50 (``benchmarks/quality.py``); on sharp, high-contrast structure it gains up
        to 2.6 dB at sigma 15 (mean +0.83 / +0.40 / +0.11 dB over ten
        non-photographic images, ``benchmarks/kernel_gain.py``).
    patch_size : int or None, default None
        Patch side; ``None`` -> 5.  Measured on 256x256 crops: at sigma 15, 5 beat 4
        (+0.17 dB) and 6 (+0.06 dB); at sigma 50, 6 is only +0.03 dB, so 5 is used for
        every sigma (a rule on sigma would also break the scale invariance).
    group_size : int, default 32
        Patches per group in stage 2 (32 vs 40: +0.003 dB, cheaper).
    group_size1 : int, default 40
        Patches per group in stage 1 (24: -0.28 dB, 32: -0.05 dB, 48: +0.045 dB at
        1.7x the eigensolver cost).  Both are reduced when the image has fewer
        candidate patches in a search window.
    search_radius : int or None, default None
        None -> 32, or 40 for a regular texture (``periodic``).  Search window of
        ``(2 R + 1)^2`` positions (65x65): every position up to
        :data:`DENSE_RADIUS` (19) away on both axes, as in BM3D's 39x39 window, and
        beyond it the positions whose offsets are both even (the matcher then costs
        1.4x a dense 39x39 search instead of 2.5x for a dense 65x65).  Regular
        textures need it: on the synthetic bricks / weave of
        ``benchmarks/textures.py`` 19 instead of 12 in stage 1 gained +1.1 / +1.1 /
        +0.9 dB and +0.4 / +0.3 / +0.1 dB at sigma 15 / 25 / 50, then 19 instead of
        12 in stage 2 as well +1.0 / +1.0 / +0.5 dB and +0.4 / +0.3 / +0.3 dB, and
        32 (sparse beyond 19) instead of 19 in both +0.9 / +1.0 / +0.7 dB on the
        bricks, whose next brick is 30 px away, and +0.1 / +0.1 / +0.1 dB on the weave
        (``benchmarks/results_issue12.txt``).  The development crops change by +0.01
        dB (19 after 12) and +0.03 / +0.02 / +0.04 dB (32 after 19).
    search_radius1 : int or None, default None
        Stage-1 search radius; ``None`` -> ``search_radius``.
    stride, stride1 : int or None, default None
        Step between reference patches in stage 2 / stage 1; ``None`` -> ``patch_size
        - 1`` (4) for stage 2 and ``stride`` for stage 1.  Must be <= patch_size so
        that reference patches cover every pixel.  Measured on the development crops
        with the other defaults (``benchmarks/results_issue12.txt``): stride 5 -> 4
        +0.05 / +0.10 / +0.08 dB at sigma 15 / 25 / 50 for 1.5x the time; 3 adds
        +0.03 more at 2.5x.
    gamma_scale, gamma_scale2 : float, default 16, 32
        ``c`` in ``gamma = 1 / (c * 2 d sigma^2)`` for stage 1 / stage 2.  Measured
        (mean of 4 images x sigma 15/25/50): c1 4 / 8 / 16 / 32 -> 29.54 / 29.63 /
        29.67 / 29.67 dB; c2 8 / 16 / 32 -> 29.58 / 29.63 / 29.66.  Narrow kernels
        lose; wide ones approach the linear kernel.
    match_size1, match_size : int or None, default None
        Side of the window compared in block matching in stage 1 / stage 2, centred
        on the patch (the members stay ``patch_size`` patches; the guide is mirrored
        at the border); ``None`` -> ``patch_size + 2`` (7) / ``patch_size + 6`` (11);
        ``patch_size`` compares the patches themselves.  Measured with the hard
        shrinker on the development crops (``benchmarks/results_issue12.txt``): patch
        / 7 / 9 matching 31.675 / 29.285 / 26.013 dB -> 31.695 / 29.377 / 26.213 dB
        at sigma 15 / 25 / 50 (noise level given); stage 2 at 11 instead of 9 +0.01
        / +0.03 / +0.02 dB.  Above the noise level :data:`HIGH_NOISE` (sigma >
        45 on 0..255, when ``data_range`` is given) ``match_size1`` None -> ``patch_size
        + 8`` (13), as BM3D widens its blocks at high noise: at sigma 50 the
        regular textures of ``benchmarks/textures.py`` gain +0.6 / +0.8 dB (bricks /
        weave) and the photographs change by -0.01 dB (development crops and
        camera) and 0.00 dB (four photographs from outside scikit-image); at sigma 30
        / 35 / 40 the photographs lose 0.11 / 0.08 / 0.05 dB with it, so it is not
        used there (``benchmarks/results_issue12.txt``).  A regular texture
        (``periodic``) has its own rule, :func:`texture_match_extra`.
    data_range : float or None, default None
        The span of values the clean image can take (255 for 8-bit data; for several
        channels, that of channel 0), only used to place ``sigma`` against
        :data:`HIGH_NOISE` and :data:`TEXTURE_NOISE0` / :data:`TEXTURE_NOISE1`, and to
        smooth the image before its periodicity is measured; None (unknown) keeps the low-noise
        geometry at every sigma, so the result scales with the image.  Colour through
        the opponent luminance does not reach the rule at sigma 50 on 0..255 (its
        span is ``sqrt(3)`` times larger), and must not: with ``match_size1=13`` the
        colour crops of ``benchmarks/colour_groups.py`` lose 0.38 dB at sigma 50.
    kappa1 : float or None, default None
        Stage-1 noise-floor multiplier; ``None`` -> 4.5 (rbf, hard or wiener
        shrinker; hard 4.0 / 4.5 / 5.0 -> 29.086 / 29.095 / 29.014 dB mean on the
        development crops), 3.0 (linear, hard; 2.5 / 3.0 / 3.5 -> 28.879 / 29.148 /
        29.082 dB), 2.5 (rbf, soft) or 1.6 (linear, soft).
    shrink1 : {"hard", "soft", "wiener"} or None, default None
        Stage-1 shrinker: ``"hard"`` (``None``) keeps the components with ``lambda_k
        > kappa1 tau`` whole, ``"soft"`` weights them ``max(lambda_k - kappa1 tau, 0)
        / lambda_k``, ``"wiener"`` keeps the same components with the weight
        ``(lambda_k - tau) / lambda_k``.  Measured with the other defaults (crops,
        sigma 15 / 25 / 50): hard 31.759 / 29.508 / 26.346 dB, soft (``kappa2=1.2``)
        31.781 / 29.467 / 26.300, wiener with ``kappa1=4`` 31.800 / 29.525 / 26.418;
        on the full-size images all three within 0.1 dB.  Hard is the default
        because it is the robust one: told a noise level 8 % too low it loses 0.24
        dB mean, soft and wiener 0.8-0.9 dB.
    kappa2 : float or None, default None
        Stage-2 coefficient-noise multiplier in the Wiener weights; None -> 0.7 with
        ``wiener2="group"`` (0.5 / 0.6 / 0.7 / 0.8 -> 29.263 / 29.288 / 29.289 /
        29.260 dB mean over the development crops and camera, sigma 15 / 25 / 50,
        ``stage2_cut`` 0.05 for the first three), 1.0 with ``"member"`` (1.0 / 1.2 /
        1.4 -> 29.109 / 29.095 / 29.075 dB with the hard stage-1 shrinker).
    kappa2_chroma : float or None, default None
        ``kappa2`` for the channels after the first (the chrominances of colour, see
        :func:`denoise_grouped_opponent`); ``None`` -> 1.5 ``kappa2``.  A single
        channel does not use it.  The chrominances carry little signal, so their
        pilot's residual noise is a larger part of the power the Wiener weights
        see.  Measured on the colour crops of ``benchmarks/colour_groups.py``
        (sigma 15 / 25 / 50; ``benchmarks/results_issue12.txt``): factor 1 (the
        luminance's) 33.998 / 31.965 / 29.161 dB, 1.5 34.004 / 31.978 / 29.200, 2
        33.987 / 31.969 / 29.211, 3 33.939 / 31.938 / 29.211.
    wiener2 : {"group", "member"}, default "group"
        The signal power in the stage-2 Wiener weights: the pilot group's mean power
        on each kernel component, one weight per component (``"group"``), or each
        member's own pilot coefficient (``"member"``, before issue 12's last
        change).  Measured (``benchmarks/results_issue12.txt``; sigma 15 / 25 / 50):
        development crops and camera +0.03 / +0.03 / +0.12 dB, four photographs
        from outside scikit-image (``benchmarks/outside.py``) +0.06 / +0.07 /
        +0.14 dB; told a sigma 8 % too low it loses 0.03 / 0.07 / 0.35 dB instead of
        0.15 / 0.23 / 1.14 dB.  It loses on the synthetic bricks of
        ``benchmarks/textures.py`` (-0.57 / -0.52 / -0.07 dB), where members with
        small pilot coefficients are best shrunk on their own.
    stage2_cut : float, default 0.1
        Stage-2 components with pilot eigenvalue below ``cut * n * noise`` are dropped.
    max_iter, tol : int, float, default 2, 1e-2
        Pre-image iteration cap and per-patch tolerance (RMS change per pixel in units
        of sigma).  2 and 6 iterations give the same PSNR to 0.001 dB on the
        development crops and on the images of ``benchmarks/kernel_gain.py``; 2 saves
        about a tenth of the pre-image time; 1 loses 0.004 ... 0.014 dB on the latter.
    preimage_init : {"member", "linear"}, default "member"
        Start of the fixed point: the group member itself (noisy patch in stage 1,
        pilot patch in stage 2) or the linear reconstruction (same PSNR measured,
        half the iterations).
    window_beta : float, default 2.0
        Kaiser window on the aggregation weights (0 = flat; 2 gave +0.045 dB).
    mean_kappa1 : float or None, default 0.7
        Stage-1 Wiener step on the patch means (:func:`correct_means`): each member's
        estimate gets back ``w`` times the difference between its noisy patch's mean
        and its estimate's, ``w = max(v - mean_kappa1 sigma^2 / d, 0) / v`` with ``v``
        the group's mean squared difference.  The hard threshold keeps a component
        only above the group's largest noise eigenvalue, so brightness differences
        between members below that went to the group mean; the pilot is better with
        them.  ``None`` turns the step off.  Measured on the development crops
        (``benchmarks/results_issue12.txt``, sigma 15 / 25 / 50): off 31.844 / 29.543
        / 26.448 dB, 0.5 31.925 / 29.650 / 26.553, 0.7 31.916 / 29.651 / 26.618, 1.0
        31.882 / 29.602 / 26.553; the linear kernel gains as much.  Only stage 1: the
        same step in stage 2 lost 0.1 dB at sigma 50.  With several channels only
        channel 0, which guides the matching (the luminance of colour images): on the
        colour crops of ``benchmarks/colour_groups.py`` the luminance alone gains
        +0.03 / +0.04 / +0.08 dB, all three channels +0.01 / +0.02 / +0.03 dB.
    two_stage : bool, default True
        ``False`` returns the stage-1 estimate (ranks then apply to stage 1).
    periodic : bool or None, default None
        Whether the image is a regular texture (bricks, a weave, a grid); None ->
        measured, :func:`periodic_lags_channels` (the best :func:`periodic_lags` of the
        channels the matching sees) above :data:`PERIODIC`, or in the borderline
        band (:data:`BORDERLINE`) by a trial (below).  A regular texture
        searches an 81x81 window (``search_radius`` :data:`TEXTURE_RADIUS`) with,
        besides the usual offsets, every offset within 2 px of the lattice its two
        periods span (:func:`search_mask`): its repeats two periods away are in reach
        and an odd period is matched exactly.  Its stage-1 matching window widens
        with the noise (:func:`texture_match_extra`: 7x7 to sigma 15 on 0..255, 9x9
        at 25, 17x17 at 35, 35x35 from 50; with several channels matched, against
        one channel's span, ``data_range / sqrt(C)``), or with its noise against its
        own contrast when that calls for a wider window (``contrast`` below), so
        that the noise does not decide which repeat is nearest, and stage 2 matches
        7x7 windows instead of 11x11 (``match_size``) with ``kappa2`` 1.0 instead of
        0.7: its repeats are exact, so the tighter window finds them and their pilot
        coefficients are worth more trust.  Given values win.  Measured (mean gap to
        BM3D at sigma 15 / 25 / 35 / 50, ``benchmarks/textures.py``;
        ``benchmarks/results_textures.txt``): on its five synthetic textures -0.42 /
        -0.40 / -0.51 / -0.30 dB with the photograph settings, +1.06 / +0.82 / +0.46 /
        +1.41 dB with these (stop 22's texture settings, a 7x7 stage-1 window below
        sigma 45 and the photographs' beyond, gave +1.06 / +0.72 / +0.02 / +0.19); on
        six brick walls drawn to look like photographs, built after the stop-22
        settings (``--walls``) +0.26 / +0.01 / -0.41 / -0.33 dB with the photograph
        settings, +0.66 / +0.31 / +0.20 / +0.50 dB with these (stop 22's +0.66 /
        +0.18 / -0.50 / -0.19; +0.37 at sigma 50 while the threshold of 0.4 left the
        perspective wall, 0.40, with the photograph settings); on four variants not tuned on (``--variants``) +0.19
        / +0.18 / -0.01 / +0.06 and +1.25 / +1.07 / +0.78 / +1.29 dB; on seven
        irregular walls built in stop 24 (``--irregular``, scores 0.12-0.49) +0.30 /
        +0.12 / -0.15 / -0.08 dB with the photograph settings and +0.49 / +0.26 /
        +0.15 / +0.17 dB with the default (+0.51 / +0.26 / +0.22 / +0.28 with the
        texture settings throughout).  Photographs score 0.03-0.15 and keep their
        settings.  A borderline score (in :data:`BORDERLINE`, 0.15-0.45) is not
        trusted: :func:`periodic_trial` denoises the central crop, recorrupted, with
        both settings and keeps the one whose estimated error is lower (two more
        runs of at most 256x256).  Stop 28 (``python benchmarks/textures.py
        --borderline --sigmas 15,25,35,50``): on 21 walls scoring 0.15-0.4, the
        default against BM3D went from -0.12 / -0.29 / -0.20 / -0.14 dB at sigma 15 /
        25 / 35 / 50 to -0.06 / -0.28 / -0.13 / +0.13 (worst at sigma 50 -0.48 before,
        -0.16 with it); the phantom and the horse silhouette keep the photograph
        settings at sigma 35 and 50 (where the texture settings cost them 0.6 and
        0.9 dB) and take the texture settings at 15 and 25 (+0.2 and +0.5 dB).
        Stats report ``periodic``, the score (``periodicity``, also when ``periodic``
        is given), the trial's two estimates (``periodic_trial``, ``{"photo": mse,
        "texture": mse}``, see :func:`periodic_trial`; None without a trial), the
        periods (``lags``, empty unless periodic) and the resolved ``search_radius``,
        ``match_size1``, ``match_size`` and ``kappa2``.
    detail : float or None, default None
        How much the image varies at a coarse scale against its noise
        (:func:`coarse_detail`, on channel 0); None -> measured (unless ``periodic``
        or ``match_size1`` settles the window).  A smooth photograph (under 0.6 / 0.3,
        :data:`SMOOTH`) matches 9x9 / 11x11 windows in stage 1 instead of 7x7 (the
        high-noise window, 13x13, stays when it is wider; not for a regular texture):
        its 7x7 windows differ mostly by their noise.  Chosen on 2x-blurred and
        3x-upscaled crops of the development photographs (stop 25); the tiled engine
        measures it once on the whole image.  Stats report it (None when not
        measured or the image is too small to tell).
    contrast : float or None, default None
        A regular texture's contrast: the std of its signal over the channels the
        matching sees (:func:`texture_contrast`, the norm over channels), in the
        image's units; None -> measured on the central crop (only for a ``periodic``
        image; the tiled engine measures it once on the whole image).  Its stage-1
        window follows ``max(sigma / data_range, sigma / (10 contrast))``
        (:func:`texture_noise`, :data:`TEXTURE_SPAN`): a faint texture gets the wider
        window its noise against its own contrast calls for, and no ``data_range``
        is needed.  Stop 29 (``python benchmarks/textures.py --faint-new --sigmas
        15,25,35,50 '{}' '{"contrast": 1e6}'``, the second the data range's rule
        alone): on 24 faint walls built after the rule was chosen, the gap to BM3D
        went from -0.27 / -0.25 / +0.17 / +0.62 dB to +0.53 / +0.63 / +0.55 / +0.62
        at sigma 15 / 25 / 35 / 50; the walls, textures and colour walls it was
        chosen beside keep their windows but for a few at sigma 25 / 35
        (``benchmarks/results_textures.txt``).  Stats report it (None when not
        periodic).
    lags : pair of (dy, dx) pairs or None, default None
        A regular texture's two periods (:func:`periodic_lags`), whose lattice the
        search adds (:func:`search_mask`); None -> measured on the central crop.  The
        tiled engine measures them once on the whole image, so that every tile
        searches the same offsets (measured per tile, they differed, and so did the
        result).
    match_channels : {"all", "first"}, default "all"
        With several channels (:func:`denoise_grouped_channels`): block matching on
        the SSD summed over all of them (for the orthonormal opponent channels of
        colour, the SSD in RGB), or on channel 0's alone (the luminance, as CBM3D
        does; the colour path of stops 19-22).  One channel: no difference.  Measured
        (``benchmarks/results_issue12.txt``, gap to CBM3D at sigma 15 / 25 / 50):
        the colour development crops of ``benchmarks/colour_groups.py`` 34.053 /
        32.027 / 29.253 dB against 34.034 / 32.022 / 29.245 with the luminance
        (astronaut +0.02 to +0.18, hubble +0.01 to -0.13); two colour photographs
        from outside scikit-image +0.05 / +0.08 / +0.12 dB against +0.04 / +0.04 /
        +0.03; four colour brick walls whose mortar has about the bricks'
        luminance (``benchmarks/textures.py --colour-walls``) +1.50 / +1.45 / +1.43
        dB against +0.02 / -0.25 / -0.17: their pattern is in the chrominance, which
        the luminance does not see (nor does the texture test on it).  Stage-2
        matching alone on all three pilots gave the walls +0.29 at sigma 25, both
        stages +1.10 (``benchmarks/results_issue12.txt``).  Costs about 10-25 %
        more time on colour.
    backprojection, bp_delta, bp_lambda : int, float, float, default 0, 0.1, 1.0
        Extra stage-2 passes of iterative regularisation (WNNM, SAIST): pass ``k``
        denoises ``y_k = x_{k-1} + bp_delta (y - x_{k-1})`` at the re-estimated noise
        ``bp_lambda * sqrt(sigma^2 - mean((y - y_k)^2))``, grouped on ``x_{k-1}``.
        Measured on 128x128 crops of coins / moon / gravel / camera with one pass,
        ``bp_delta=0``, ``bp_lambda=0.6``: +0.15 / +0.03 / -0.03 dB at sigma 50 / 25 /
        15 for one more stage-2 pass of time, so it is off by default.
    progress : callable or None
        Receives :class:`~kpca_denoise.core.progress.ProgressEvent` for the stages
        ``"grouping"``, ``"eigensolver"``, ``"projection"``, ``"preimage"`` and
        ``"reassembly"`` after every chunk of reference rows (done/total = chunks).
    cancel : token or None
        Checked between chunks; raises :class:`~kpca_denoise.core.progress.Cancelled`.

    Returns
    -------
    results : dict
        ``{rank: denoised (H, W) float64}`` for every entry of ``ranks``.
    stats : dict
        ``preimage_fallbacks`` (guarded pre-image steps), ``preimage_iterations``,
        ``groups`` (both stages), ``seconds`` (per stage and ``total``), ``params``
        (every resolved parameter, the kernel widths and noise floors), ``spectrum``
        (mean eigenvalues of the final stage's groups) and ``effective_rank``
        (``{rank: mean number of kernel components kept per group}`` in the final
        stage, after the shrinkage's noise floor and the rank cap).

    Raises
    ------
    ValueError
        Image not 2-D, not finite, smaller than ``patch_size`` (or too small to form
        a group of two patches); bad ``sigma`` or ``ranks``; any option with a value
        it does not take (:func:`check_options`, before any work).

    Notes
    -----
    Images smaller than the search window work: the window is clipped to the image
    and the group size is reduced to the number of candidates if needed.

    References
    ----------
    .. [1] S. Mika, B. Schoelkopf, A. Smola, K.-R. Mueller, M. Scholz, G. Raetsch,
       "Kernel PCA and de-noising in feature spaces", NIPS 11, 1998.
    .. [2] L. Zhang, W. Dong, D. Zhang, G. Shi, "Two-stage image denoising by
       principal component analysis with local pixel grouping", Pattern
       Recognition 43(4):1531-1549, 2010 (LPG-PCA).
    .. [3] K. Dabov, A. Foi, V. Katkovnik, K. Egiazarian, "Image denoising by sparse
       3-D transform-domain collaborative filtering", IEEE TIP 16(8):2080-2095,
       2007 (BM3D).
    """
    kw = dict(locals())  # first statement: exactly the parameters
    img = np.asarray(image)
    if img.ndim != 2:
        raise ValueError(f"image must be 2-D (H, W), got shape {img.shape}")
    del kw["image"], kw["sigma"]
    results, stats = _denoise_channels([img], sigma, **kw)
    return results[0], stats[0]


def denoise_grouped_channels(image: np.ndarray, sigma: float, **kw: Any
                             ) -> tuple[dict[int | None, np.ndarray], list[dict]]:
    """Denoise the channels of ``image`` (H, W, C) with groups shared across channels.

    Block matching runs once, on the SSD summed over every channel (noisy in stage 1,
    the pilots in stage 2; ``match_channels="first"``: channel 0's alone, as CBM3D
    matches on its luminance), and every channel is denoised with the same groups,
    each with its own kernel PCA per group, shrinkage, pre-image and aggregation; the
    stage-1 mean step (``mean_kappa1``) is channel 0's only.  Channel 0 should
    therefore be the luminance of an orthonormal opponent transform (the noise keeps
    ``sigma`` in every channel, and the summed SSD is the SSD in RGB); see
    :func:`denoise_grouped_opponent` for RGB input.  Keywords as
    :func:`denoise_grouped`.

    Returns ``{rank: (H, W, C) float64}`` and one stats dict per channel (the shared
    matching time split evenly between them).
    """
    img = np.asarray(image)
    if img.ndim != 3 or img.shape[2] < 1:
        raise ValueError(f"image must be 3-D (H, W, C), got shape {img.shape}")
    bound = _SIGNATURE.bind(img[..., 0], sigma, **kw)
    bound.apply_defaults()
    args = dict(bound.arguments)
    del args["image"], args["sigma"]
    results, stats = _denoise_channels([img[..., c] for c in range(img.shape[2])], sigma,
                                       **args)
    ranks = list(results[0])
    return {rk: np.stack([r[rk] for r in results], axis=-1) for rk in ranks}, stats


def denoise_grouped_opponent(image: np.ndarray, sigma: float, **kw: Any
                             ) -> tuple[dict[int | None, np.ndarray], list[dict]]:
    """Denoise an RGB image (H, W, 3): one grouping (on the colour distance), shared.

    RGB goes to the orthonormal opponent space of :mod:`kpca_denoise.core.color`
    (``Y = (R + G + B) / sqrt(3)`` and two chrominances; white noise of std ``sigma``
    keeps ``sigma`` in each), :func:`denoise_grouped_channels` denoises it with one
    set of groups (matched on all three channels, i.e. on the RGB distance; on ``Y``
    alone with ``match_channels="first"``) and the result goes back to RGB.  Keywords as
    :func:`denoise_grouped` (``data_range`` is the span of R, G and B; ``Y`` spans
    ``sqrt(3)`` times it); returns ``{rank: (H, W, 3)}`` and per-channel stats
    (opponent channels).
    """
    from kpca_denoise.core.color import OPPONENT, opponent_to_rgb, rgb_to_opponent

    img = np.asarray(image)
    if img.ndim != 3 or img.shape[2] != 3:
        raise ValueError(f"image must be RGB (H, W, 3), got shape {img.shape}")
    if kw.get("data_range") is not None:
        kw = dict(kw, data_range=float(kw["data_range"]) * float(OPPONENT[0].sum()))
    out, stats = denoise_grouped_channels(rgb_to_opponent(img), sigma, **kw)
    return {rk: opponent_to_rgb(o) for rk, o in out.items()}, stats


#: what each option of :func:`denoise_grouped` takes, checked by :func:`check_options`:
#: (kind, None allowed, ...) with the kinds ("int", _, lo, hi) an integer in lo..hi;
#: ("num", _, op, lo[, hi]) a finite number op lo (and <= hi); ("bool", _); ("choice", _,
#: values); ("lags", _) two (dy, dx) pairs.  The upper bounds, far above any use, keep
#: memory, time and arithmetic bounded (a search radius of 1e9 was taken, and the run
#: killed for memory at 23 GB; a Kaiser window of beta 1000 overflowed into a crash;
#: kappa1 1e300 reached LAPACK as an illegal bound; kappa1 0 divided by zero).
_OPTION_RULES: dict[str, tuple] = {
    "patch_size": ("int", True, 1, 64), "group_size": ("int", False, 2, 512),
    "group_size1": ("int", False, 2, 512), "search_radius": ("int", True, 1, 256),
    "search_radius1": ("int", True, 1, 256), "match_size1": ("int", True, 1, 99),
    "match_size": ("int", True, 1, 99), "stride": ("int", True, 1, 32),
    "stride1": ("int", True, 1, 32), "max_iter": ("int", False, 1, 10000),
    "backprojection": ("int", False, 0, 10),
    "data_range": ("num", True, ">", 0), "gamma_scale": ("num", False, ">", 0.001, 1e6),
    "gamma_scale2": ("num", False, ">", 0.001, 1e6), "kappa1": ("num", True, ">", 0, 1000),
    "kappa2": ("num", True, ">", 0, 1000), "kappa2_chroma": ("num", True, ">", 0, 1000),
    "stage2_cut": ("num", False, ">=", 0, 1000), "tol": ("num", False, ">", 0, 1),
    "window_beta": ("num", False, ">=", 0, 50), "mean_kappa1": ("num", True, ">=", 0, 1000),
    "detail": ("num", True, ">=", 0), "contrast": ("num", True, ">=", 0),
    "lags": ("lags", True),
    "bp_delta": ("num", False, ">=", 0, 1), "bp_lambda": ("num", False, ">", 0, 10),
    "two_stage": ("bool", False), "periodic": ("bool", True),
    "kernel": ("choice", False, ("rbf", "linear")),
    "shrink1": ("choice", True, ("hard", "soft", "wiener")),
    "wiener2": ("choice", False, ("group", "member")),
    "preimage_init": ("choice", False, ("member", "linear")),
    "match_channels": ("choice", False, ("all", "first")),
}


def check_options(**options: Any) -> None:
    """Check the values of :func:`denoise_grouped`'s options without an image.

    Raises ``ValueError`` naming the first bad one, what it takes and what it got
    (``"window_beta must be a finite number >= 0 and <= 50, got 1000"``); names that are not
    options (``ranks``, ``progress``, ...) are left to their callers.  The driver
    calls it before any work, and :meth:`kpca_denoise.params.DenoiseParams.validate`
    on the ``extra`` options, so a bad value is reported once before a run rather
    than by every image.
    """
    for name, v in options.items():
        if name not in _OPTION_RULES:
            continue
        kind, optional, *arg = _OPTION_RULES[name]
        if v is None and optional:
            continue
        number = _is_number(v) and math.isfinite(v)
        if kind == "int":
            ok = number and float(v).is_integer() and arg[0] <= v <= arg[1]
            want = f"an integer from {arg[0]} to {arg[1]}"
        elif kind == "num":
            op, lo, hi = arg[0], arg[1], arg[2] if len(arg) > 2 else math.inf
            ok = number and (v > lo if op == ">" else v >= lo) and v <= hi
            want = f"a finite number {op} {lo:g}" + (f" and <= {hi:g}" if hi < math.inf else "")
        elif kind == "lags":
            ok = isinstance(v, (list, tuple)) and len(v) == 2 and all(
                isinstance(u, (list, tuple)) and len(u) == 2 and all(
                    _is_number(c) and math.isfinite(c) and float(c).is_integer()
                    and abs(c) <= 256 for c in u) for u in v)
            want = "two (dy, dx) pairs of whole numbers, such as [[0, 30], [14, 15]]"
        elif kind == "bool":
            ok = isinstance(v, (bool, np.bool_))
            want = "True, False" if optional else "True or False"
        else:
            ok = isinstance(v, str) and v in arg[0]
            want = "one of " + ", ".join(repr(a) for a in arg[0])
        if not ok:
            raise ValueError(f"{name} must be {want}{' or None' if optional else ''}, "
                             f"got {v!r}")


def _denoise_channels(chans: list, sigma: float, *, ranks, kernel, patch_size, group_size,
                      group_size1, search_radius, search_radius1, match_size1, match_size,
                      data_range, stride, stride1,
                      gamma_scale, gamma_scale2, kappa1, shrink1, kappa2, kappa2_chroma, wiener2,
                      stage2_cut,
                      max_iter,
                      tol, preimage_init, window_beta, mean_kappa1, two_stage, periodic,
                      detail, contrast, lags,
                      match_channels, backprojection,
                      bp_delta,
                      bp_lambda, progress, cancel) -> tuple[list, list]:
    """The driver of :func:`denoise_grouped` for one or more channels of the same
    size (one grouping for all): per channel ``{rank: (H, W)}`` and stats."""
    kw = dict(locals())  # first statement: exactly the parameters (for a trial)
    del kw["chans"], kw["sigma"]
    check_options(**kw)
    t_all = time.perf_counter()
    imgs = []
    for im in chans:
        im = np.ascontiguousarray(im, dtype=np.float64)
        if not np.all(np.isfinite(im)):
            raise ValueError("image contains NaN or Inf")
        imgs.append(im)
    img = imgs[0]
    if any(im.shape != img.shape or im.ndim != 2 for im in imgs):
        raise ValueError("channels must be 2-D and of the same size")
    if not (_is_number(sigma) and math.isfinite(sigma) and sigma > 0.0):
        raise ValueError(f"sigma must be a positive finite number, got {sigma!r}")
    sigma = float(sigma)
    if not (sigma * sigma > 0.0 and math.isfinite(1.0 / (sigma * sigma))):
        raise ValueError(f"sigma {sigma} is too small: its square underflows float64 "
                         "(give sigma in the image's units, at least 1e-150)")
    if not math.isfinite(sigma * sigma):
        raise ValueError(f"sigma {sigma} is too large: its square overflows float64 "
                         "(give sigma in the image's units, at most 1e150)")
    if isinstance(ranks, (str, bytes)) or not hasattr(ranks, "__iter__"):
        raise ValueError(f"ranks must be a list such as [4, 8] or [None], got {ranks!r}")
    rank_list = list(ranks)
    if not rank_list:
        raise ValueError("ranks must contain at least one entry (None = no cap)")
    for rk in rank_list:
        if rk is not None and (int(rk) != rk or int(rk) < 1):
            raise ValueError(f"ranks must be None or integers >= 1, got {rk!r}")
    ranks_arr = np.asarray([-1 if rk is None else int(rk) for rk in rank_list], dtype=np.int64)

    noise_fraction = None if data_range is None else sigma / float(data_range)
    # a regular texture (in any channel the matching sees) gets the texture settings;
    # the score is reported even when the caller decided (5 ms per channel on 256x256)
    periodic, score, (v1, v2), trial = _decide_periodic(imgs, sigma, kw)
    # the periods measured here (none when nothing repeats), or those given
    lags = [v1, v2] if periodic and (score > 0.0 or kw["lags"] is not None) else []
    con, nf = None, noise_fraction
    if periodic:  # its stage-1 window: the noise against the span or its own contrast
        con = float(contrast) if contrast is not None else texture_contrast(
            imgs, sigma, match_channels)
        nf = texture_noise(noise_fraction, sigma, con, len(imgs), match_channels)
    # how smooth the image is (channel 0: the luminance of colour), against its noise
    det = (float(detail) if detail is not None else
           None if periodic or match_size1 is not None else coarse_detail(img, sigma))
    g = resolve_geometry(patch_size, stride, stride1, match_size1, match_size, search_radius,
                         search_radius1, nf, periodic, det)
    p, st1, st2 = g["patch_size"], g["stride1"], g["stride"]
    R, R1 = g["search_radius"], g["search_radius1"]
    H, W = img.shape
    if H < p or W < p:
        raise ValueError(f"image {H}x{W} is smaller than patch_size {p}")
    # fewest candidates any reference has (a corner reference with a clipped window)
    def fewest(r: int) -> int:
        return min(r + 1, H - p + 1) * min(r + 1, W - p + 1)

    if min(fewest(R), fewest(R1)) < 2:
        raise ValueError(
            f"image {H}x{W} is too small for patch_size {p}: fewer than 2 patches to group")
    n1 = max(2, min(int(group_size1), fewest(R1)))
    n2 = max(2, min(int(group_size), fewest(R)))
    rbf = kernel == "rbf"
    sh1 = shrink1 if shrink1 is not None else "hard"
    k1 = float(kappa1) if kappa1 is not None else (
        (4.5 if rbf else 3.0) if sh1 in ("hard", "wiener") else (2.5 if rbf else 1.6))
    k2 = float(kappa2) if kappa2 is not None else (
        0.7 if wiener2 == "group" and not periodic else 1.0)
    win = np.outer(np.kaiser(p, window_beta), np.kaiser(p, window_beta)) if window_beta > 0 \
        else np.ones((p, p))
    win = np.ascontiguousarray(win, dtype=np.float64)

    cfg: dict[str, Any] = dict(
        kernel=kernel, patch_size=p, group_size=n2, group_size1=n1, search_radius=R,
        search_radius1=R1,
        match_size1=g["match_size1"], match_size=g["match_size"],
        data_range=None if data_range is None else float(data_range),
        stride=st2, stride1=st1, gamma_scale=float(gamma_scale),
        gamma_scale2=float(gamma_scale2), kappa1=k1, shrink1=sh1,
        kappa2=k2, kappa2_chroma=float(kappa2_chroma) if kappa2_chroma is not None else 1.5 * k2,
        wiener2=wiener2, stage2_cut=float(stage2_cut), max_iter=int(max_iter), tol=float(tol),
        preimage_init=preimage_init, window_beta=float(window_beta),
        mean_kappa1=None if mean_kappa1 is None else float(mean_kappa1),
        two_stage=bool(two_stage), periodic=periodic, periodicity=score, lags=lags,
        periodic_trial=trial,
        detail=det, contrast=con,
        match_channels=match_channels,
        dense_radius=g["dense_radius"], sigma=sigma)
    C = len(imgs)
    runs = [dict(seconds={s: 0.0 for s in _STAGES}, fallbacks=0, iterations=0, groups=0,
                 spectrum=None, final_groups=0, kept=0) for _ in range(C)]
    cfg.update(rbf=rbf, window=win)  # working values, not reported
    one = np.asarray([-1], np.int64)
    if two_stage:
        pilot = [o[0] for o in _run_pass(imgs, imgs, sigma, 1, n1, one, float(gamma_scale),
                                         st1, cfg, runs, False, progress, cancel)]
        y, s = imgs, sigma
        for _ in range(int(backprojection)):
            # iterative regularisation (WNNM / SAIST): re-inject part of the residual,
            # re-estimate the noise left in it (over all channels), regroup on the new
            # estimate
            check_cancel(cancel)
            est = [o[0] for o in _run_pass(y, pilot, s, 2, n2, one, float(gamma_scale2), st2,
                                           cfg, runs, False, progress, cancel)]
            y = [e + bp_delta * (im - e) for e, im in zip(est, imgs)]
            res2 = float(np.mean([np.mean((im - yy) ** 2) for im, yy in zip(imgs, y)]))
            s = bp_lambda * math.sqrt(max(sigma * sigma - res2, 1e-4 * sigma * sigma))
            pilot = est
        check_cancel(cancel)
        outs = _run_pass(y, pilot, s, 2, n2, ranks_arr, float(gamma_scale2), st2, cfg,
                         runs, True, progress, cancel)
    else:
        outs = _run_pass(imgs, imgs, sigma, 1, n1, ranks_arr, float(gamma_scale), st1, cfg,
                         runs, True, progress, cancel)
    del cfg["rbf"], cfg["window"]
    total = time.perf_counter() - t_all
    all_results, all_stats = [], []
    for out, run in zip(outs, runs):
        all_results.append({rk: np.ascontiguousarray(out[i]) for i, rk in enumerate(rank_list)})
        sec = run["seconds"]
        sec["total"] = total / C
        ng = max(run["final_groups"], 1)
        all_stats.append(dict(
            preimage_fallbacks=run["fallbacks"],
            preimage_iterations=run["iterations"],
            groups=run["groups"],
            seconds=sec,
            params=dict(cfg),
            # mean eigenvalues of the final stage's centred group Gram matrices, descending
            spectrum=run["spectrum"] / ng if run["spectrum"] is not None else np.zeros(0),
            # mean number of kernel components kept per group of the final stage, per rank
            effective_rank={rk: float(np.asarray(run["kept"])[i]) / ng if run["final_groups"]
                            else 0.0 for i, rk in enumerate(rank_list)},
        ))
    return all_results, all_stats


_SIGNATURE = inspect.signature(denoise_grouped)
