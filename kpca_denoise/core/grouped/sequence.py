"""The grouped method on a sequence of pages (a stack, a time-lapse, a burst): the
groups of page ``k`` take their members from page ``k`` and from its neighbours
``k - w .. k + w``.

Everything but the grouping is the single-image method's (:mod:`.driver`): the same
two passes, the same kernel PCA per group, shrinkage and fixed-point pre-image.  A
reference patch's own-page members come from :func:`.matching.match`; on each
neighbour page the search follows the motion: around where the best match of the
page before went, moved by the two pages' global shift (phase correlation,
:func:`page_shifts`), ``radius`` pixels either way (VBM3D's predictive search).  The
``n`` closest of the own-page members and of every neighbour candidate make the
group, and every member's estimate is averaged into its own page, so that a page
also gets the estimates of its neighbours' groups.  ``docs/stacks.md``.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np
from numba import njit, prange

from kpca_denoise.core.patches import patch_positions
from kpca_denoise.core.progress import ProgressCallback, check_cancel, report

from .calibrate import calibrate, central_crop
from .driver import (_ChannelStats, _check_inputs, _chunk, _pass_grid,
                     _report, _resolve, resolve_options, trial_denoiser)
from .matching import exact_sums, match, pad_for_matching, quantise_guide, search_mask

__all__ = ["denoise_grouped_stack", "page_shifts", "link_scores", "WINDOW", "RADIUS", "KAPPA2",
           "DEPTH"]

#: neighbour pages on each side a page's groups reach by default
WINDOW = 8
#: pixels searched either way around where a patch is predicted on a neighbour page
RADIUS = 3
#: pages each patch spans: a member is the ``p x p`` patch on its page and on the
#: pages either side (where the global motion carries it), one ``DEPTH p^2`` vector
DEPTH = 3
#: the stage-2 Wiener strength when the options leave it unset: groups of many
#: pages hold more copies of one structure (the single image's default is 0.7)
KAPPA2 = 1.0


# -- motion between pages --------------------------------------------------------------


def _shift(a: np.ndarray, b: np.ndarray) -> tuple[int, int]:
    """The integer shift ``s`` that carries ``a``'s content to ``b`` (``b(x) ~ a(x - s)``),
    by phase correlation of the two (H, W) images under a Hann window."""
    H, W = a.shape
    win = np.outer(np.hanning(H), np.hanning(W))
    fa = np.fft.rfft2((a - a.mean()) * win)
    fb = np.fft.rfft2((b - b.mean()) * win)
    cross = fb * np.conj(fa)
    cross /= np.maximum(np.abs(cross), 1e-300)
    r = np.fft.irfft2(cross, s=(H, W))
    iy, ix = np.unravel_index(int(np.argmax(r)), r.shape)
    return (int(iy - H if iy > H // 2 else iy), int(ix - W if ix > W // 2 else ix))


def page_shifts(pages: Sequence[np.ndarray], limit: int | None = None) -> np.ndarray:
    """``(P - 1, 2)`` integer shifts of the content from each page to the next (phase
    correlation on the central 256x256 of each (H, W) page); a shift beyond ``limit``
    pixels (default: a quarter of the crop) is taken as none."""
    crops = [np.asarray(central_crop(np.asarray(pg, dtype=np.float64)), dtype=np.float64)
             for pg in pages]
    lim = limit if limit is not None else min(crops[0].shape) // 4 if crops else 0
    out = np.zeros((max(len(crops) - 1, 0), 2), np.int64)
    for k in range(len(crops) - 1):
        s = _shift(crops[k], crops[k + 1])
        if max(abs(s[0]), abs(s[1])) <= lim:
            out[k] = s
    return out


def _best_ssd(a, b, ys, xs, sy, sx, m, R, out):
    """For each ``m x m`` window of ``a`` at ``(ys[i], xs[i])``: the smallest mean
    squared difference to the windows of ``b`` within ``R`` of ``(ys + sy, xs + sx)``;
    returns the offsets (dy, dx) from there of the best ones."""
    oy, ox = np.zeros(len(ys), np.int64), np.zeros(len(ys), np.int64)
    _best_ssd_at(a, b, ys, xs, ys + sy, xs + sx, m, R, out, oy, ox)
    return oy, ox


#: window side and grid step of the samples :func:`link_scores` compares
LINK_WINDOW = 16
LINK_STEP = 8
#: the neighbourhood of the predicted position searched for a sample's match
LINK_RADIUS = 4
#: at most this many samples per page pair, the most textured, and at least this
#: many (else the pair is not linked)
LINK_SAMPLES = 256
LINK_FEWEST = 8


def link_scores(pages: Sequence[np.ndarray], sigma: float,
                shifts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """How alike each page is to the next: ``(scores (P - 1,), shifts (P - 1, 2))``.

    On the central crops, the :data:`LINK_SAMPLES` most textured ``16 x 16`` windows of
    a page (of variance at least 1.25 times the noise's) are matched on the next page around where the global shift puts them
    (the given shift or none, whichever matches better; that one is returned) and,
    as a control, around two far places (half the crop away).  The score is the share
    of windows whose match beats both controls': about 1 for pages of one scene,
    about 1/3 for unrelated pages, whatever the noise; 0 for pages with fewer than
    :data:`LINK_FEWEST` such windows."""
    m = LINK_WINDOW
    n = len(pages)
    scores = np.zeros(max(n - 1, 0))
    chosen = np.zeros((max(n - 1, 0), 2), np.int64)
    for k in range(n - 1):
        a = np.ascontiguousarray(central_crop(np.asarray(pages[k], dtype=np.float64)))
        b = np.ascontiguousarray(central_crop(np.asarray(pages[k + 1], dtype=np.float64)))
        if a.shape != b.shape or min(a.shape) < 2 * m + 2 * LINK_RADIUS:
            continue
        H, W = a.shape
        ys = patch_positions(H, m, LINK_STEP)
        xs = patch_positions(W, m, LINK_STEP)
        yy, xx = np.repeat(ys, len(xs)), np.tile(xs, len(ys))
        win = np.lib.stride_tricks.sliding_window_view(a, (m, m))[yy, xx]
        texture = win.reshape(len(yy), -1).var(axis=1)
        order = np.argsort(-texture, kind="stable")[:LINK_SAMPLES]
        # windows whose signal is at least a quarter of the noise's (flat ones match
        # anywhere)
        order = order[texture[order] > 1.25 * float(sigma) ** 2]
        if len(order) < LINK_FEWEST:
            continue  # too little structure to tell: not linked
        ry, rx = np.ascontiguousarray(yy[order]), np.ascontiguousarray(xx[order])
        best, pick = None, (0, 0)
        for sy, sx in {(int(shifts[k, 0]), int(shifts[k, 1])), (0, 0)}:
            d = np.empty(len(order))
            oy, ox = _best_ssd(a, b, ry, rx, sy, sx, m, LINK_RADIUS, d)
            if best is None or np.median(d) < np.median(best) or (
                    np.median(d) == np.median(best) and (sy, sx) != (0, 0)):
                # the shift most windows agree on (the phase correlation's peak is
                # a pixel off under heavy noise on small pages)
                best, pick = d, (sy + int(np.round(np.median(oy))),
                                 sx + int(np.round(np.median(ox))))
        controls = []
        for cy, cx in ((H // 2, 0), (0, W // 2)):
            # the windows moved half the crop, wrapped into it
            c = np.empty(len(order))
            _best_ssd_at(a, b, ry, rx, (ry + pick[0] + cy) % (H - m + 1),
                         (rx + pick[1] + cx) % (W - m + 1), m, LINK_RADIUS, c,
                         np.zeros(len(ry), np.int64), np.zeros(len(ry), np.int64))
            controls.append(c)
        scores[k] = float(np.mean(best < np.minimum(*controls)))
        chosen[k] = pick
    return scores, chosen


@njit(cache=True, parallel=True, nogil=True)
def _best_ssd_at(a, b, ys, xs, cys, cxs, m, R, out, oy, ox):
    """As :func:`_best_ssd`, searching around ``(cys[i], cxs[i])`` on ``b``; the best
    offsets from there into ``oy, ox``."""
    H, W = a.shape
    for i in prange(ys.shape[0]):
        y, x = ys[i], xs[i]
        best = np.inf
        for dy in range(-R, R + 1):
            cy = cys[i] + dy
            if cy < 0 or cy > H - m:
                continue
            for dx in range(-R, R + 1):
                cx = cxs[i] + dx
                if cx < 0 or cx > W - m:
                    continue
                s = 0.0
                for u in range(m):
                    for v in range(m):
                        t = a[y + u, x + v] - b[cy + u, cx + v]
                        s += t * t
                if s < best:
                    best = s
                    oy[i] = dy
                    ox[i] = dx
        out[i] = best / (m * m)


# -- matching across pages ------------------------------------------------------------


@njit(cache=True, inline="always")
def _ssd(g, pa, ya, xa, pb, yb, xb, m, bound):
    """SSD of the ``m x m`` windows of pages ``pa`` and ``pb`` of ``g`` (P, C, Hg, Wg),
    summed over channels; stops once past ``bound`` (returns a value above it)."""
    s = 0.0
    for c in range(g.shape[1]):
        for u in range(m):
            ra = g[pa, c, ya + u]
            rb = g[pb, c, yb + u]
            for v in range(m):
                t = ra[xa + v] - rb[xb + v]
                s += t * t
            if s > bound:
                return s
    return s


@njit(cache=True, inline="always")
def _insert(hd, hp, hy, hx, cnt, d, q, y, x):
    """Put member ``(q, y, x)`` at distance ``d`` into the list ``hd, hp, hy, hx`` of
    the ``cnt`` closest so far, kept ascending (ties: the earlier first) and at most
    ``len(hd)`` long; returns the new count."""
    n = hd.shape[0]
    if cnt < n:
        j = cnt
        cnt += 1
    elif d < hd[n - 1]:
        j = n - 1
    else:
        return cnt
    while j > 0 and hd[j - 1] > d:
        hd[j], hp[j], hy[j], hx[j] = hd[j - 1], hp[j - 1], hy[j - 1], hx[j - 1]
        j -= 1
    hd[j], hp[j], hy[j], hx[j] = d, q, y, x
    return cnt


@njit(cache=True, parallel=True, nogil=True)
def _cross_match(g, page, ry, rx, own_y, own_x, shifts, linked, w, R, n, p, m,
                 out_p, out_y, out_x):
    """Each reference's ``n`` closest among its own-page members ``own_y, own_x`` and
    the candidates of the neighbour pages, followed page by page from the reference
    (see the module docstring); the reference first, then by distance (ties: the
    order met).  ``out_p`` holds the members' pages."""
    P = g.shape[0]
    H = g.shape[2] - (m - p)
    W = g.shape[3] - (m - p)
    nref = ry.shape[0]
    n_own = own_y.shape[1]
    for r in prange(nref):
        hd = np.empty(n)
        hp = np.empty(n, np.int64)
        hy = np.empty(n, np.int64)
        hx = np.empty(n, np.int64)
        cnt = 0
        y0, x0 = ry[r], rx[r]
        # the own-page members (the reference among them, kept with distance -1)
        for i in range(n_own):
            y, x = own_y[r, i], own_x[r, i]
            d = -1.0 if (y == y0 and x == x0) else _ssd(g, page, y0, x0, page, y, x, m, np.inf)
            cnt = _insert(hd, hp, hy, hx, cnt, d, page, y, x)
        for step in (1, -1):
            cy, cx = y0, x0
            for k in range(1, w + 1):
                q = page + step * k
                if q < 0 or q >= P:
                    break
                link = q - 1 if step == 1 else q
                if not linked[link]:
                    break
                if step == 1:
                    cy += shifts[link, 0]
                    cx += shifts[link, 1]
                else:
                    cy -= shifts[link, 0]
                    cx -= shifts[link, 1]
                best = np.inf
                by, bx = cy, cx
                for dy in range(-R, R + 1):
                    y = cy + dy
                    if y < 0 or y > H - p:
                        continue
                    for dx in range(-R, R + 1):
                        x = cx + dx
                        if x < 0 or x > W - p:
                            continue
                        top = hd[n - 1] if cnt == n else np.inf
                        d = _ssd(g, page, y0, x0, q, y, x, m, max(best, top))
                        if d < best:
                            best, by, bx = d, y, x
                        cnt = _insert(hd, hp, hy, hx, cnt, d, q, y, x)
                if best < np.inf:  # the motion followed from the best match
                    cy, cx = by, bx
        for j in range(n):
            out_p[r, j] = hp[j]
            out_y[r, j] = hy[j]
            out_x[r, j] = hx[j]


# -- the driver ----------------------------------------------------------------------


def denoise_grouped_stack(stack: np.ndarray, sigma: float, *, ranks: Sequence = (None,),
                          options: Any = None, window: int = WINDOW, radius: int = RADIUS,
                          linked: np.ndarray | None = None, shifts: np.ndarray | None = None,
                          depth: int = DEPTH, progress: ProgressCallback | None = None, cancel: Any = None,
                          **overrides: Any) -> tuple[dict, list]:
    """Denoise a stack ``(P, H, W, C)`` of float pages whose channels share one set of
    groups (as :func:`.driver.denoise_grouped_channels`), with groups reaching
    ``window`` pages either way.

    ``linked`` (P - 1 bools, default all) says which neighbouring pages are of one
    scene: a group never crosses an unlinked pair.  ``depth`` (odd) pages make a
    patch: its slices on the pages either side follow the global motion (1: plain
    2-D patches).  ``shifts`` (P - 1, 2) are the
    global shifts from page to page (default :func:`page_shifts` on channel 0).
    Progress: the single-image stages, then ``"page"`` per page done (pass 2).

    Returns ``({rank: (P, H, W, C) float64}, stats)``: per channel, as the driver's,
    plus ``sequence``: the window, radius, shifts, links and, per page, the share of
    its groups' members that came from each relative page ``-window .. window``.
    """
    t_all = time.perf_counter()
    a = np.asarray(stack)
    if a.ndim != 4 or a.shape[0] < 1 or a.shape[3] < 1:
        raise ValueError(f"stack must be 4-D (P, H, W, C), got shape {a.shape}")
    P, H, W, C = a.shape
    opts = resolve_options(options, **overrides)
    if opts.kappa2 is None:
        opts = opts.replace(kappa2=KAPPA2)
    pages = []
    for k in range(P):
        chans, sigma_f, rank_list = _check_inputs([a[k, ..., c] for c in range(C)], sigma,
                                                  ranks)
        pages.append(chans)
    sigma = sigma_f
    ranks_arr = np.asarray([-1 if rk is None else int(rk) for rk in rank_list], dtype=np.int64)
    w = max(0, int(window))
    linked = (np.ones(max(P - 1, 0), np.bool_) if linked is None
              else np.ascontiguousarray(linked, dtype=np.bool_))
    if linked.shape != (max(P - 1, 0),):
        raise ValueError(f"linked must hold {max(P - 1, 0)} values, got {linked.shape}")
    if shifts is None:
        shifts = page_shifts([pg[0] for pg in pages])
    shifts = np.ascontiguousarray(shifts, dtype=np.int64).reshape(max(P - 1, 0), 2)
    # the image-dependent decisions once, on the middle page
    cal = calibrate(pages[P // 2], sigma, opts, trial_denoiser(cancel))
    run = _resolve(pages[P // 2], sigma, cal)
    stats = [_ChannelStats() for _ in range(C)]
    floors: dict = {}
    used = np.zeros((P, 2 * w + 1))
    seq = dict(P=P, w=w, R=max(0, int(radius)), shifts=shifts, linked=linked, used=used,
               depth=max(1, int(depth)) | 1, motion=_motion(shifts, linked))
    tall = [np.concatenate([pg[c] for pg in pages]) for c in range(C)]
    if run.options.two_stage:
        pilot = [o[0] for o in _stack_pass(tall, tall, 1, np.asarray([-1], np.int64), run,
                                           stats, floors, False, seq, progress, cancel)]
        check_cancel(cancel)
        used[:] = 0.0
        outs = _stack_pass(tall, pilot, 2, ranks_arr, run, stats, floors, True, seq, progress,
                           cancel)
    else:
        outs = _stack_pass(tall, tall, 1, ranks_arr, run, stats, floors, True, seq, progress,
                           cancel)
    params = _report(run, cal, floors)
    total = time.perf_counter() - t_all
    share = used / np.maximum(used.sum(axis=1, keepdims=True), 1.0)
    info = dict(window=w, radius=seq["R"], shifts=shifts.tolist(), linked=linked.tolist(),
                neighbours_used=share.tolist())
    all_stats = []
    for st in stats:
        ng = max(st.final_groups, 1)
        all_stats.append(dict(
            preimage_fallbacks=st.fallbacks, preimage_iterations=st.iterations,
            groups=st.groups, seconds={**st.seconds, "total": total / C}, params=dict(params),
            # the mean over the groups decomposed whole (driver.SPECTRUM_EVERY)
            spectrum=(st.spectrum / max(st.spectrum_groups, 1) if st.spectrum is not None
                      else np.zeros(0)),
            effective_rank={rk: float(np.asarray(st.kept)[i]) / ng if st.final_groups
                            else 0.0 for i, rk in enumerate(rank_list)},
            sequence=info))
    results = {rk: np.stack([o[i].reshape(P, H, W) for o in outs], axis=-1)
               for i, rk in enumerate(rank_list)}
    return results, all_stats


def _stack_pass(imgs: list, guides: list, stage: int, ranks: np.ndarray, run, stats: list,
                floors_report: dict, final: bool, seq: dict,
                progress: ProgressCallback | None, cancel: Any) -> list:
    """One pass over every page's reference patches: ``(nr, P H, W)`` estimates per
    channel (the pages one above the other).  ``imgs`` and ``guides`` are the
    channels of the stack, pages stacked on the rows."""
    P, w, R = seq["P"], seq["w"], seq["R"]
    TH, W = imgs[0].shape
    H = TH // P
    C = len(imgs)
    g = run.geometry
    p = g.patch_size
    nr = len(ranks)
    ps, ys, xs, rows_per_chunk, nchunks, nums, dens = _pass_grid(
        run, stage, final, floors_report, nr, stats, H, W, C, pages=P)
    t0 = time.perf_counter()
    m = ps.match_size
    guide_m = np.stack([quantise_guide(np.stack([pad_for_matching(gd[k * H:(k + 1) * H], p, m)
                                                 for gd in guides]), run.sigma)
                        for k in range(P)])
    running = all(exact_sums(guide_m[k], m) for k in range(P))
    lags = run.options.lags
    work = np.empty((int(search_mask(ps.search_radius, g.dense_radius, lags).sum()),
                     min(rows_per_chunk, len(ys)) * len(xs)))
    for st in stats:
        st.seconds["grouping"] += (time.perf_counter() - t0) / C
    used = seq["used"]
    ps3 = _depth_pass(run, ps, stage, seq["depth"]) if seq["depth"] > 1 else ps
    for k in range(P):
        for ci in range(nchunks):
            check_cancel(cancel)
            yy = ys[ci * rows_per_chunk:(ci + 1) * rows_per_chunk]
            ry = np.ascontiguousarray(np.repeat(yy, len(xs)))
            rx = np.ascontiguousarray(np.tile(xs, len(yy)))
            t0 = time.perf_counter()
            oy, ox = match(guide_m[k], ry, rx, p, m, ps.search_radius, ps.n, g.dense_radius,
                           lags, running, work)
            gp = np.empty_like(oy)
            gy = np.empty_like(oy)
            gx = np.empty_like(ox)
            _cross_match(guide_m, k, ry, rx, oy, ox, seq["shifts"], seq["linked"], w, R,
                         ps.n, p, m, gp, gy, gx)
            rel = np.clip(gp - k + w, 0, 2 * w)
            used[k] += np.bincount(rel.ravel(), minlength=2 * w + 1)[:2 * w + 1]
            gy = gy + gp * H  # rows of the stacked pages
            tm = (time.perf_counter() - t0) / C
            for ch in range(C):
                if seq["depth"] > 1:
                    _chunk_depth(imgs[ch], guides[ch], ch, gy, gx, H, P, seq["depth"],
                                 seq["motion"], ranks, run, ps3, stats[ch], nums[ch], dens[ch])
                    continue
                _chunk(imgs[ch], guides[ch], ch, gy, gx, tm,
                       (k * nchunks + ci + 1, P * nchunks), ranks, run, ps, stats[ch],
                       nums[ch], dens[ch], progress)
        report(progress, "page", k + 1, P, message=f"stage {stage}")
    return [num / den for num, den in zip(nums, dens)]



# -- 3-D patches -------------------------------------------------------------------------


def _motion(shifts: np.ndarray, linked: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each page's position along the global motion, ``(P, 2)`` (page 0 at 0), and
    ``cut[a, b]``: an unlinked pair lies between pages ``a <= b``."""
    P = len(shifts) + 1
    S = np.zeros((P, 2), np.int64)
    S[1:] = np.cumsum(shifts, axis=0)
    breaks = np.concatenate([[0], np.cumsum(~np.asarray(linked, dtype=bool))])
    return S, breaks[None, :] != breaks[:, None]


def _depth_pass(run, ps, stage: int, depth: int):
    """The pass's settings for patches ``depth`` pages deep: the floors and tolerance of
    ``depth p^2``-dimensional patches."""
    from dataclasses import replace

    from .group_pca import noise_floors

    o = run.options
    d = depth * run.geometry.patch_size ** 2
    c = float(o.gamma_scale if stage == 1 else o.gamma_scale2)
    fl = noise_floors(run.sigma, d, ps.n, c, run.rbf, run.kappa1, run.kappa2)
    own = noise_floors(run.sigma, d, ps.n, float(o.gamma_scale), run.rbf, run.kappa1, run.kappa2)
    return replace(ps, floors=fl, floors_rest=fl.with_tau2(run.kappa2_chroma / run.kappa2),
                   tol2=ps.tol2 * depth, own_gamma=own.gamma)


def _chunk_depth(img, guide, ch, gy, gx, H, P, depth, seq_motion, ranks, run, ps, st, num,
                 den):
    """As the driver's chunk, with each member the ``depth`` pages around it (mirrored
    at the stack's ends) at the same place: one kernel PCA of the 3-D patches, each
    slice's estimate averaged into its page."""
    from kpca_denoise.core.patches import accumulate_groups

    from .group_pca import fit_groups
    from .matching import gather
    from .driver import preimage_by_rank, shrink_by_rank
    from .shrinkage import correct_means

    p = run.geometry.patch_size
    fl = ps.floors
    W = img.shape[1]
    page = gy // H
    y = gy - page * H
    # each slice where the global motion carries the member (its own page across a cut)
    S, cut = seq_motion
    rows, cols = [], []
    for dz in range(-(depth // 2), depth // 2 + 1):
        q = np.abs(page + dz)
        q = np.where(q > P - 1, 2 * (P - 1) - q, q)
        q = np.where(cut[np.minimum(page, q), np.maximum(page, q)], page, q)
        rows.append(np.ascontiguousarray(
            q * H + np.clip(y + S[q, 0] - S[page, 0], 0, H - p)))
        cols.append(np.ascontiguousarray(np.clip(gx + S[q, 1] - S[page, 1], 0, W - p)))
    X = np.concatenate([gather(img, r, c, p) for r, c in zip(rows, cols)], axis=2)
    G = (np.concatenate([gather(guide, r, c, p) for r, c in zip(rows, cols)], axis=2)
         if ps.stage == 2 else X)
    fit = fit_groups(G, run.rbf, fl.gamma, fl.tau1 if ps.stage == 1 and not ps.final else 0.0,
                     gram=run.rbf)
    lam, V, rowmean = fit[:3]
    if ps.final:
        st.spectrum = lam.sum(axis=0) + (st.spectrum if st.spectrum is not None else 0.0)
        st.spectrum_groups += len(gy)
        st.final_groups += len(gy)
    auto, parts = shrink_by_rank(ps, lam, V, rowmean, G, X, fit[3] if run.rbf else None,
                                 fl if ch == 0 else ps.floors_rest, ranks, run.rbf, st)
    Est, aggw, fb, its = preimage_by_rank(auto, parts, run.rbf, int(run.options.max_iter),
                                          ps.tol2)
    mk = run.options.mean_kappa1
    if ps.stage == 1 and ch == 0 and mk is not None:
        correct_means(Est, X, float(mk) * run.sigma * run.sigma / (depth * p * p))
    st.fallbacks += fb
    st.iterations += its
    d = p * p
    for i, (r, c) in enumerate(zip(rows, cols)):
        accumulate_groups(np.ascontiguousarray(Est[..., i * d:(i + 1) * d]), aggw, r, c, p,
                          num, den, run.window)
