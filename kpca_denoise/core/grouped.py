"""Two-stage non-local kernel-PCA denoiser (block matching + per-group KPCA).

DEV VERSION
"""

from __future__ import annotations

import math
import time
from typing import Any, Sequence

import numpy as np
from numba import njit, prange

from kpca_denoise.core.progress import ProgressCallback, check_cancel, report

__all__ = ["denoise_grouped"]


# ----------------------------------------------------------------------------
# numba kernels
# ----------------------------------------------------------------------------


@njit(cache=True, parallel=True, fastmath=True)
def _match(guide, refs_y, refs_x, p, R, n, out_y, out_x):
    H, W = guide.shape
    nref = refs_y.shape[0]
    for r in prange(nref):
        ry = refs_y[r]
        rx = refs_x[r]
        y0 = max(0, ry - R)
        y1 = min(H - p, ry + R)
        x0 = max(0, rx - R)
        x1 = min(W - p, rx + R)
        ny = y1 - y0 + 1
        nx = x1 - x0 + 1
        dist = np.empty(ny * nx)
        for iy in range(ny):
            cy = y0 + iy
            for ix in range(nx):
                cx = x0 + ix
                s = 0.0
                for a in range(p):
                    for b in range(p):
                        t = guide[ry + a, rx + b] - guide[cy + a, cx + b]
                        s += t * t
                dist[iy * nx + ix] = s
        dist[(ry - y0) * nx + (rx - x0)] = -1.0
        # n smallest by a partition (O(m)) instead of a full sort; ties broken by scan order
        thr = np.partition(dist, n - 1)[n - 1]
        k = 0
        for j in range(ny * nx):
            if dist[j] < thr:
                out_y[r, k] = y0 + j // nx
                out_x[r, k] = x0 + j % nx
                k += 1
        for j in range(ny * nx):
            if k >= n:
                break
            if dist[j] == thr:
                out_y[r, k] = y0 + j // nx
                out_x[r, k] = x0 + j % nx
                k += 1


@njit(cache=True, parallel=True)
def _gather(img, gy, gx, p, out):
    nref, n = gy.shape
    for r in prange(nref):
        for k in range(n):
            y = gy[r, k]
            x = gx[r, k]
            for a in range(p):
                for b in range(p):
                    out[r, k, a * p + b] = img[y + a, x + b]


@njit(cache=True, parallel=True, fastmath=True)
def _eig(B, rbf, gamma, lam_out, V_out, rowmean_out):
    nref, n, d = B.shape
    for r in prange(nref):
        X = B[r]
        K = np.empty((n, n))
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
        w, v = np.linalg.eigh(Kc)
        for k in range(n):
            lam_out[r, k] = w[n - 1 - k]
            for i in range(n):
                V_out[r, i, k] = v[i, n - 1 - k]


@njit(cache=True, parallel=True, fastmath=True)
def _project1(lam, V, tau, ranks, agg0, Gam, aggw):
    """Stage 1: shrinkage weights on the group's own components."""
    nref, n = lam.shape
    nr = ranks.shape[0]
    for r in prange(nref):
        lmax = lam[r, 0]
        w = np.zeros(n)
        for k in range(n):
            l = lam[r, k]
            if l > 1e-12 * max(lmax, 1e-300) and l > tau:
                w[k] = (l - tau) / l
        for q in range(nr):
            cap = ranks[q] if ranks[q] >= 0 else n
            cap = min(cap, n)
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
                c = (1.0 - rs) / n
                for j in range(n):
                    Gam[r, q, i, j] += c
                aggw[r, q, i] = 1.0 / (agg0 + ss)


@njit(cache=True, parallel=True, fastmath=True)
def _project2(lam, V, rowmean, P, X, rbf, gamma_x, kscale, tau2, ranks, agg0, Gam, aggw):
    """Stage 2: basis from the pilot group, coefficients of the noisy patches,
    empirical Wiener weights from the pilot coefficients."""
    nref, n, d = P.shape
    nr = ranks.shape[0]
    for r in prange(nref):
        lmax = lam[r, 0]
        ncomp = 0
        for k in range(n):
            if lam[r, k] > 1e-10 * max(lmax, 1e-300):
                ncomp += 1
        # centred cross-kernel between noisy patches (rows) and pilot patches (cols)
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
        # alpha = V / sqrt(lam): lam ||alpha||^2 = 1
        A = np.zeros((n, n))
        sq = np.zeros(n)
        for k in range(ncomp):
            sq[k] = math.sqrt(lam[r, k])
            for j in range(n):
                A[j, k] = V[r, j, k] / sq[k]
        beta = np.zeros((n, n))
        for i in range(n):
            for k in range(ncomp):
                s = 0.0
                for j in range(n):
                    s += A[j, k] * Kx[i, j]
                beta[i, k] = s
        for q in range(nr):
            cap = ranks[q] if ranks[q] >= 0 else n
            cap = min(cap, ncomp)
            for i in range(n):
                sb = np.zeros(cap)
                ss = 0.0
                for k in range(cap):
                    bp = sq[k] * V[r, i, k]  # pilot coefficient lam*alpha
                    bp2 = bp * bp
                    sk = bp2 / (bp2 + tau2)
                    ss += sk * sk
                    sb[k] = sk * beta[i, k]
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


@njit(cache=True, parallel=True, fastmath=True)
def _preimage(Gam, B, Z0, use_z0, rbf, gamma, max_iter, tol2, Est, fallbacks, iters):
    """Mika et al. fixed-point pre-image for every group member and rank."""
    nref, nr, n, _ = Gam.shape
    d = B.shape[2]
    for r in prange(nref):
        fb = 0
        it_total = 0
        zl = np.empty(d)
        z = np.empty(d)
        zn = np.empty(d)
        dd = np.empty(n)
        for q in range(nr):
            for i in range(n):
                # linear (large-width) reconstruction: sum_j Gam_ij x_j
                for t in range(d):
                    zl[t] = 0.0
                for j in range(n):
                    g = Gam[r, q, i, j]
                    for t in range(d):
                        zl[t] += g * B[r, j, t]
                if not rbf:
                    for t in range(d):
                        Est[r, q, i, t] = zl[t]
                    continue
                if use_z0:
                    for t in range(d):
                        z[t] = Z0[r, i, t]
                else:
                    for t in range(d):
                        z[t] = zl[t]
                prev_sign = 0.0
                ok_any = False
                for it in range(max_iter):
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
                        c = Gam[r, q, i, j] * math.exp(-gamma * (dd[j] - dmin))
                        den += c
                        aden += abs(c)
                        for t in range(d):
                            zn[t] += c * B[r, j, t]
                    sgn = 1.0 if den > 0 else -1.0
                    if (not (abs(den) > 1e-8 * aden)) or (prev_sign != 0.0 and sgn != prev_sign):
                        fb += 1
                        if not ok_any:
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


@njit(cache=True)
def _aggregate(Est, aggw, gy, gx, p, num, den, win):
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


# ----------------------------------------------------------------------------
# driver
# ----------------------------------------------------------------------------


def _grid(L, p, stride):
    g = list(range(0, L - p + 1, stride))
    if g[-1] != L - p:
        g.append(L - p)
    return np.asarray(g, dtype=np.int64)


def denoise_grouped(
    image,
    sigma,
    *,
    ranks=(None,),
    kernel="rbf",
    patch_size=None,
    group_size=40,
    group_size1=None,
    search_radius=12,
    stride=None,
    stride1=None,
    gamma_scale=8.0,
    gamma_scale2=16.0,
    kappa1=None,
    kappa2=1.4,
    max_iter=6,
    tol=1e-2,
    preimage_init="basis",
    two_stage=True,
    window_beta=0.0,
    agg_const=1.0,
    progress=None,
    cancel=None,
    _pilot=None,
):
    t_all = time.perf_counter()
    img = np.asarray(image, dtype=np.float64)
    if img.ndim != 2:
        raise ValueError(f"image must be 2-D (H, W), got shape {img.shape}")
    sigma = float(sigma)
    if not (sigma > 0 and math.isfinite(sigma)):
        raise ValueError(f"sigma must be a positive finite number, got {sigma}")
    if kernel not in ("rbf", "linear"):
        raise ValueError(f"kernel must be 'rbf' or 'linear', got {kernel!r}")
    if patch_size is None:
        patch_size = 5
    p = int(patch_size)
    H, W = img.shape
    if H < p or W < p:
        raise ValueError(f"image {H}x{W} is smaller than patch_size {p}")
    rank_list = list(ranks)
    ranks_arr = np.asarray([-1 if r is None else int(r) for r in rank_list], dtype=np.int64)
    d = p * p
    R = int(search_radius)
    n2 = int(group_size)
    n1 = int(group_size1) if group_size1 is not None else n2
    mincand = min(R + 1, H - p + 1) * min(R + 1, W - p + 1)
    n1 = max(1, min(n1, mincand))
    n2 = max(1, min(n2, mincand))
    rbf = kernel == "rbf"
    img = np.ascontiguousarray(img)
    sec = dict(grouping=0.0, eigensolver=0.0, projection=0.0, preimage=0.0, reassembly=0.0)
    nfb = 0
    nit = 0
    ngroups = 0
    if stride is None:
        stride = p
    if stride1 is None:
        stride1 = stride
    s1 = int(stride1)
    if kappa1 is None:
        kappa1 = 2.5 if kernel == "rbf" else 2.0
    if window_beta > 0:
        k1 = np.kaiser(p, window_beta)
        win = np.outer(k1, k1)
    else:
        win = np.ones((p, p))

    def run_stage(guide, stage, n, ranks_here, gscale, st):
        nonlocal nfb, nit, ngroups
        ys = _grid(H, p, st)
        xs = _grid(W, p, st)
        ngroups += len(ys) * len(xs)
        rows_per_chunk = max(1, 2048 // len(xs))
        nr = len(ranks_here)
        num = np.zeros((nr, H, W))
        den = np.zeros((nr, H, W))
        gamma = 1.0 / (gscale * 2.0 * d * sigma * sigma)
        if rbf:
            # mean eigenvalue of a centred RBF Gram built from pure noise
            tau1 = 1.0 - (1.0 + 4.0 * gamma * sigma * sigma) ** (-d / 2.0)
        else:
            tau1 = (n - 1) * d * sigma * sigma / min(d, n - 1)
        tau1 *= kappa1
        # stage 2, rbf: kernel between a noisy patch and a (clean) pilot patch is on average
        # (1+2g's^2)^(-d/2) exp(-g'|s-p|^2/(1+2g's^2)); choose g' so that the effective width is gamma
        gx = gamma / max(1.0 - 2.0 * gamma * sigma * sigma, 1e-3)
        kscale = (1.0 + 2.0 * gx * sigma * sigma) ** (d / 2.0)
        tau2 = kappa2 * (2.0 * gamma * sigma * sigma if rbf else sigma * sigma)
        agg0 = float(agg_const) if agg_const is not None else d / n
        nchunks = (len(ys) + rows_per_chunk - 1) // rows_per_chunk
        for c in range(nchunks):
            check_cancel(cancel)
            yy = ys[c * rows_per_chunk:(c + 1) * rows_per_chunk]
            ry = np.repeat(yy, len(xs))
            rx = np.tile(xs, len(yy))
            m = len(ry)
            t0 = time.perf_counter()
            gy = np.empty((m, n), np.int64)
            gxx = np.empty((m, n), np.int64)
            _match(guide, ry, rx, p, R, n, gy, gxx)
            Xg = np.empty((m, n, d))
            _gather(img, gy, gxx, p, Xg)
            if stage == 2:
                Pg = np.empty((m, n, d))
                _gather(guide, gy, gxx, p, Pg)
            else:
                Pg = Xg
            t1 = time.perf_counter()
            sec["grouping"] += t1 - t0
            report(progress, "grouping", c + 1, nchunks, message=f"stage {stage}")
            lam = np.empty((m, n))
            V = np.empty((m, n, n))
            rmean = np.empty((m, n))
            _eig(Pg, rbf, gamma, lam, V, rmean)
            t2 = time.perf_counter()
            sec["eigensolver"] += t2 - t1
            report(progress, "eigensolver", c + 1, nchunks, message=f"stage {stage}")
            Gam = np.empty((m, nr, n, n))
            aggw = np.empty((m, nr, n))
            if stage == 1:
                _project1(lam, V, tau1, ranks_here, agg0, Gam, aggw)
            else:
                _project2(lam, V, rmean, Pg, Xg, rbf, gx, kscale, tau2, ranks_here, agg0, Gam, aggw)
            t3 = time.perf_counter()
            sec["projection"] += t3 - t2
            report(progress, "projection", c + 1, nchunks, message=f"stage {stage}")
            Est = np.empty((m, nr, n, d))
            fb = np.zeros(m, np.int64)
            its = np.zeros(m, np.int64)
            tol2 = d * (tol * sigma) ** 2
            _preimage(Gam, Pg, Pg, preimage_init == "basis", rbf, gamma, max_iter, tol2, Est, fb, its)
            nfb += int(fb.sum())
            nit += int(its.sum())
            t4 = time.perf_counter()
            sec["preimage"] += t4 - t3
            report(progress, "preimage", c + 1, nchunks, message=f"stage {stage}")
            _aggregate(Est, aggw, gy, gxx, p, num, den, win)
            sec["reassembly"] += time.perf_counter() - t4
            report(progress, "reassembly", c + 1, nchunks, message=f"stage {stage}")
        return num / den

    if two_stage:
        pilot = run_stage(img, 1, n1, np.asarray([-1], np.int64), gamma_scale, s1)[0] if _pilot is None else np.ascontiguousarray(_pilot, dtype=np.float64)
        out = run_stage(pilot, 2, n2, ranks_arr, gamma_scale2, int(stride))
    else:
        out = run_stage(img, 1, n1, ranks_arr, gamma_scale, s1)
    result = {rk: out[i].copy() for i, rk in enumerate(rank_list)}
    sec["total"] = time.perf_counter() - t_all
    stats = dict(preimage_fallbacks=nfb, groups=ngroups,
                 preimage_iterations=nit, seconds=sec,
                 params=dict(patch_size=p, group_size=n2, group_size1=n1, search_radius=R,
                             stride=stride, kernel=kernel, gamma_scale=gamma_scale))
    return result, stats
