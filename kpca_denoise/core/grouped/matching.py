"""Block matching: the members of each group, found by their distance to the
reference patch on a guide image (the noisy image in stage 1, the pilot in stage 2).

The search covers a ``(2 R + 1)^2`` window (dense near the reference, even offsets
beyond, plus a regular texture's lattice, :func:`search_mask`); the distance is the
SSD of ``m x m`` windows around the patches summed over the channels, kept exactly
as running sums on a guide quantised to integers (:func:`quantise_guide`), so that
a tile finds the members the whole image finds.  See ``docs/method.md``.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from numba import njit

from kpca_denoise.core.parallel import run_parts

from .group_pca import argsort_small

__all__ = ["pad_for_matching", "search_mask", "exact_sums", "quantise_guide", "match", "gather",
           "match_predicted", "interleave_guide", "match_from_groups", "nearest"]


# The heaps of one chunk's references are rows ``j`` of 2-D arrays, indexed in place:
# passing a row as a view to a function call costs more than the comparisons
# (docs/speed.md)


@njit(cache=True, inline="always")
def _heap_gt(hd, ho, j, a, b):
    """Entry ``a`` of heap ``j`` of ``(hd, ho)`` above entry ``b``: a larger distance,
    or an equal one later in scan order."""
    return hd[j, a] > hd[j, b] or (hd[j, a] == hd[j, b] and ho[j, a] > ho[j, b])


@njit(cache=True, inline="always")
def _heap_swap(hd, ho, j, a, b):
    t = hd[j, a]
    hd[j, a] = hd[j, b]
    hd[j, b] = t
    u = ho[j, a]
    ho[j, a] = ho[j, b]
    ho[j, b] = u


@njit(cache=True, inline="always")
def _heap_push(hd, ho, j, size, v, o):
    """Add ``(v, o)`` to max-heap ``j`` of ``size`` entries (room for one more)."""
    i = size
    hd[j, i] = v
    ho[j, i] = o
    while i > 0:
        par = (i - 1) // 2
        if not _heap_gt(hd, ho, j, i, par):
            break
        _heap_swap(hd, ho, j, i, par)
        i = par


@njit(cache=True, inline="always")
def _heap_replace_top(hd, ho, j, size, v, o):
    """Replace the largest entry of the full max-heap ``j`` by ``(v, o)``."""
    hd[j, 0] = v
    ho[j, 0] = o
    i = 0
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and _heap_gt(hd, ho, j, c + 1, c):
            c += 1
        if not _heap_gt(hd, ho, j, c, i):
            break
        _heap_swap(hd, ho, j, i, c)
        i = c


@njit(cache=True, nogil=True)
def _row_runs(refs_y, refs_x, gap):
    """Starts of the runs of references on one row, and the end: (nseg + 1,).  A run
    also ends where the next reference is more than ``gap`` columns on (or back): the
    columns between two scattered references would cost more than a new run's
    (:func:`_distances` sums every column a run spans)."""
    nref = refs_y.shape[0]
    nseg = 0
    seg = np.empty(nref + 1, np.int64)
    for r in range(nref):
        if (r == 0 or refs_y[r] != refs_y[r - 1] or refs_x[r] < refs_x[r - 1]
                or refs_x[r] - refs_x[r - 1] > gap):
            seg[nseg] = r
            nseg += 1
    seg[nseg] = nref
    return seg[:nseg + 1]


@njit(cache=True, nogil=True)
def _offsets(mask, R):
    """The searched offsets in scan order (row offset, then column offset) and each
    offset's index in it (-1: not searched)."""
    S = 2 * R + 1
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
    return off_y, off_x, omap


@njit(cache=True, inline="always")
def _add_rows(guide, y0, y1, dy, lo, hi, dx, acc):
    """``acc[c - lo] +=`` the squared differences of guide rows ``y0 <= t < y1``
    against rows ``t + dy``, columns ``lo <= c < hi`` against ``c + dx``, every channel
    (along contiguous slices, so that the inner loop vectorises; two rows at a time,
    which halves the loads and stores of ``acc``)."""
    nc = hi - lo
    for ch in range(guide.shape[0]):
        t = y0
        while t + 1 < y1:
            g0 = guide[ch, t, lo:hi]
            h0 = guide[ch, t + dy, lo + dx:hi + dx]
            g1 = guide[ch, t + 1, lo:hi]
            h1 = guide[ch, t + 1 + dy, lo + dx:hi + dx]
            for c in range(nc):
                u = g0[c] - h0[c]
                v = g1[c] - h1[c]
                acc[c] += u * u + v * v
            t += 2
        if t < y1:
            g0 = guide[ch, t, lo:hi]
            h0 = guide[ch, t + dy, lo + dx:hi + dx]
            for c in range(nc):
                u = g0[c] - h0[c]
                acc[c] += u * u


@njit(cache=True, nogil=True)
def _next_rows(refs_y, seg):
    """Per run: the row of the next row's run when both rows are a single run (the
    next row's window sums can then share this one's rows), else -1."""
    nseg = seg.shape[0] - 1
    out = np.full(nseg, -1, np.int64)
    for si in range(nseg - 1):
        y = refs_y[seg[si]]
        y1 = refs_y[seg[si + 1]]
        if y1 == y or (si > 0 and refs_y[seg[si - 1]] == y):
            continue
        if si + 2 <= nseg - 1 and refs_y[seg[si + 2]] == y1:
            continue
        out[si] = y1
    return out


@njit(cache=True, inline="always")
def _spread_rows(S):
    """The ``S`` row offsets in an order that spreads the dense middle rows over every
    thread's contiguous share of :func:`_distances`' loop."""
    rows = np.empty(S, np.int64)
    o = 0
    for q in range(8):
        for a in range(q, S, 8):
            rows[o] = a
            o += 1
    return rows


@njit(cache=True, inline="always")
def _run_columns(refs_x, r0, r1):
    """The first and last column of the references ``r0 <= r < r1`` (a run)."""
    lo = refs_x[r0]
    hi = lo
    for r in range(r0 + 1, r1):
        lo = min(lo, refs_x[r])
        hi = max(hi, refs_x[r])
    return lo, hi


@njit(cache=True, inline="always")
def _window_distances(csb, refs_x, r0, r1, dx, W, p, m, running, drow):
    """Each reference ``r0 <= r < r1`` of a run: its window's SSD at column offset
    ``dx`` from the column sums ``csb`` into ``drow[r]`` (``inf`` outside the image),
    with ``running`` updated from the previous reference's where that is less work."""
    hv = False  # s holds the previous reference's sum
    px = 0
    s = 0.0
    for r in range(r0, r1):
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


@njit(cache=True, nogil=True)
def _distances(guide, refs_y, refs_x, seg, p, m, R, omap, running, dist, i0, i1):
    """``dist[oi, r]``: reference ``r``'s SSD at searched offset ``oi`` (``inf`` where
    the candidate is outside the image), for the offsets in the search rows
    ``rows[i0:i1]`` (:func:`_spread_rows`); see :func:`match` for the running sums.
    Per row offset, run by run: the columns the run's windows cover, each column
    offset's column sums started (from the previous row's tail, a running update of
    the previous run's, or zeros), the window rows still to add (those the next row
    shares kept as its tail), then the windows' sums (:func:`_window_distances`)."""
    H = guide.shape[1] - (m - p)
    W = guide.shape[2] - (m - p)
    Wg = guide.shape[2]
    nseg = seg.shape[0] - 1
    S = 2 * R + 1
    nxt = _next_rows(refs_y, seg)
    rows = _spread_rows(S)
    # per searched column offset, allocated once (a fresh array per row offset costs its
    # pages again): the column sums of squared differences over the current run's
    # window rows, and the tail below; read only where the flags say they hold this
    # row offset's sums
    cs = np.empty((S, Wg))
    tail = np.empty((S, Wg))
    for ai in range(i0, i1):
        a = rows[ai]
        dy = a - R
        # whether the column sums are those of the previous run, and the columns they
        # hold
        have = np.zeros(S, np.bool_)
        py = np.zeros(S, np.int64)
        vlo = np.zeros(S, np.int64)
        vhi = np.zeros(S, np.int64)
        # per column offset: the column sums over the rows that the next row's windows
        # share with the current one's (rows trow .. tend - 1, columns tlo .. thi - 1)
        trow = np.full(S, -1, np.int64)
        tend = np.zeros(S, np.int64)
        tlo = np.zeros(S, np.int64)
        thi = np.zeros(S, np.int64)
        for si in range(nseg):
            r0, r1 = seg[si], seg[si + 1]
            ry = refs_y[r0]
            if ry + dy < 0 or ry + dy > H - p:
                have[:] = False
                trow[:] = -1
                continue
            x_lo, x_hi = _run_columns(refs_x, r0, r1)
            # the next row, when its windows share rows with these and both rows are
            # one run: its columns
            ny = nxt[si]
            if ny >= 0 and running and ny < ry + m and ny + dy <= H - p:
                n_lo, n_hi = _run_columns(refs_x, r1, seg[si + 2])
            else:
                ny, n_lo, n_hi = -1, 0, 0
            for b in range(S):
                oi = omap[a, b]
                if oi < 0:
                    continue
                dx = b - R
                # column c of the reference rows against column c + dx of the candidate's
                c_lo = max(x_lo, -dx)
                c_hi = min(x_hi + m, Wg - dx)
                nc = c_hi - c_lo
                if nc <= 0:  # no candidate at this offset is inside the image
                    for r in range(r0, r1):
                        dist[oi, r] = np.inf
                    have[b] = False
                    trow[b] = -1
                    continue
                csb = cs[b]
                cv = csb[c_lo:c_hi]
                d = ry - py[b]
                # the window's column sums start from the previous row's tail (the rows
                # they share), a running update, or zeros; rows t_from.. are still to add
                t_from = ry
                if (running and trow[b] == ry and tlo[b] <= c_lo and c_hi <= thi[b]):
                    tb = tail[b]
                    for c in range(nc):
                        cv[c] = tb[c_lo + c]
                    t_from = tend[b]
                elif (running and have[b] and 0 <= d and 2 * d < m and vlo[b] <= c_lo
                        and c_hi <= vhi[b]):
                    y = py[b]
                    for ch in range(guide.shape[0]):
                        for t0 in range(d):
                            g0 = guide[ch, y + t0, c_lo:c_hi]
                            h0 = guide[ch, y + dy + t0, c_lo + dx:c_hi + dx]
                            g1 = guide[ch, y + m + t0, c_lo:c_hi]
                            h1 = guide[ch, y + m + dy + t0, c_lo + dx:c_hi + dx]
                            for c in range(nc):
                                t = g0[c] - h0[c]
                                u = g1[c] - h1[c]
                                cv[c] += u * u - t * t
                    t_from = ry + m
                else:
                    cv[:] = 0.0
                # the rest of the window's rows; those the next row shares, into its tail
                u_lo = max(min(c_lo, n_lo), -dx)
                u_hi = min(max(c_hi, n_hi + m), Wg - dx)
                if ny >= t_from and ny > ry and u_hi > u_lo:
                    _add_rows(guide, t_from, ny, dy, c_lo, c_hi, dx, cv)
                    tv = tail[b, u_lo:u_hi]
                    tv[:] = 0.0
                    _add_rows(guide, ny, ry + m, dy, u_lo, u_hi, dx, tv)
                    sh = c_lo - u_lo
                    for c in range(nc):
                        cv[c] += tv[sh + c]
                    trow[b] = ny
                    tend[b] = ry + m
                    tlo[b] = u_lo
                    thi[b] = u_hi
                else:
                    if t_from < ry + m:
                        _add_rows(guide, t_from, ry + m, dy, c_lo, c_hi, dx, cv)
                    trow[b] = -1
                have[b] = True
                py[b] = ry
                vlo[b] = c_lo
                vhi[b] = c_hi
                _window_distances(csb, refs_x, r0, r1, dx, W, p, m, running, dist[oi])


@njit(cache=True, nogil=True)
def _select(refs_y, refs_x, seg, H, W, p, R, n, mask, omap, off_y, off_x, visit, dist, out_y,
            out_x, s0, s1):
    """Each reference's ``n`` closest candidates by ``dist``, in scan order (the
    reference first among equals), into ``out_y, out_x``, for the references of the
    row runs ``s0 <= si < s1``.  The candidates are
    visited in the order ``visit`` (the searched offsets' indices, the dense centre
    first, ring by ring outwards: its close candidates fill the heaps early, so that
    few of the others get in); the members do not depend on it."""
    oref = omap[R, R]  # the reference's own offset (0, 0), always searched
    for si in range(s0, s1):
        r0 = seg[si]
        r1 = seg[si + 1]
        k = r1 - r0
        ry = refs_y[r0]
        y0 = max(0, ry - R)
        y1 = min(H - p, ry + R)
        ny = y1 - y0 + 1
        # each reference's n smallest (distance, scan index) through a bounded max-heap:
        # a candidate displaces the largest when it is closer, or as close and earlier
        # in scan order (ties keep the earlier), as a partition would, whatever the
        # order of the visits.  The reference goes in first, at distance -1, so it
        # stays; the others (+inf outside the image) are compared with the heap's
        # top, or +inf while it fills
        hd = np.empty((k, n))
        ho = np.empty((k, n), np.int64)
        cnt = np.ones(k, np.int64)
        thr = np.full(k, np.inf)
        for j in range(k):
            hd[j, 0] = -1.0
            ho[j, 0] = oref
            if n == 1:
                thr[j] = -1.0
        for vi in range(visit.shape[0]):
            oi = visit[vi]
            cy = ry + off_y[oi]
            if oi == oref or cy < y0 or cy > y1:
                continue
            drow = dist[oi, r0:r1]
            for j in range(k):
                v = drow[j]
                if v < thr[j] or (v == thr[j] and cnt[j] == n and oi < ho[j, 0]):
                    if cnt[j] < n:
                        _heap_push(hd, ho, j, cnt[j], v, oi)
                        cnt[j] += 1
                        if cnt[j] == n:
                            thr[j] = hd[j, 0]
                    else:
                        _heap_replace_top(hd, ho, j, n, v, oi)
                        thr[j] = hd[j, 0]
        for j in range(k):
            r = r0 + j
            rx = refs_x[r]
            if cnt[j] == n:
                hdj = hd[j]
                hoj = ho[j]
                top = hdj[0]
                # members in scan order: those closer than the n-th, then its ties
                order = argsort_small(hoj)
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


@njit(cache=True, nogil=True)
def _gather(img, gy, gx, p, out, r0, r1):
    """The members' patches of the references ``r0 <= r < r1``."""
    n = gy.shape[1]
    for r in range(r0, r1):
        for k in range(n):
            y = gy[r, k]
            x = gx[r, k]
            for a in range(p):
                for b in range(p):
                    out[r, k, a * p + b] = img[y + a, x + b]



def pad_for_matching(guide: np.ndarray, p: int, m: int) -> np.ndarray:
    """Pad a guide by mirror reflection for matching windows around patches.

    ``guide`` extended for ``m x m`` matching windows around ``p x p`` patches:
    ``(m - p) // 2`` pixels before and the rest after, on both axes, by mirror
    reflection (deterministic; the image itself when ``m == p``)."""
    lo = (m - p) // 2
    hi = m - p - lo
    if lo == 0 and hi == 0:
        return guide
    return np.ascontiguousarray(np.pad(guide, ((lo, hi), (lo, hi)), mode="reflect"))


def search_mask(R: int, dense: int | None = None, lags: Sequence = ()) -> np.ndarray:
    """Return the searched offsets of a matching window as a boolean array.

    The searched offsets of a ``(2 R + 1)^2`` window, a boolean array indexed by
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
    """Tell whether :func:`match` may keep exact running sums on a guide.

    Whether :func:`match` may keep running sums on ``guide`` ((C, H, W) or
    (H, W)): it holds integers, and ``C m^2 D^2`` (D its span), the largest SSD of
    two ``m x m`` windows, is at most 2^52, so that every partial sum is exact."""
    g = guide if guide.ndim == 3 else guide[None]
    if g.size == 0 or not np.array_equal(g, np.round(g)):
        return False
    span = float(g.max()) - float(g.min())
    return g.shape[0] * float(m) ** 2 * span * span <= 2.0 ** 52


def quantise_guide(guide: np.ndarray, sigma: float) -> np.ndarray:
    """Quantise a matching guide to integer units of ``sigma / 1024``.

    A matching guide in integer units of ``sigma / 1024`` (``round(guide / step)``,
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
          work: np.ndarray | None = None, distances: bool = False):
    """Find each reference's closest patches by block matching.

    Block matching on a guide padded by :func:`pad_for_matching`: the member
    positions ``gy, gx`` (len(ry), n), the reference among them, over the offsets of
    :func:`search_mask` (``dense``, ``lags``).  ``running`` (None: :func:`exact_sums`,
    a pass over the guide) lets the distances be updated from the neighbouring
    windows' (:func:`quantise_guide` makes a guide fit for it); only a guide of
    integers with exact sums gives the same members with it as without.  ``work``, a
    float64 scratch array of at least (searched offsets, len(ry)), spares the
    allocation when the calls repeat (a chunk's distances: tens of MB).  With
    ``distances``, also each member's SSD ``gd`` (len(ry), n): -1 for the reference,
    NaN for a position not searched (a very thin image's last members).

        Candidates are the offsets ``(dy, dx)`` up to ``R`` with ``mask[dy + R, dx + R]``
    (:func:`search_mask`: every offset in the dense central square and, beyond it, those
    whose row and column offsets are both even, plus the neighbourhoods of a regular
    texture's repeats): a wide window reaches the next period of a regular texture
    for a fraction of the cost of a dense one.

    ``guide`` is the image padded by ``(m - p) // 2`` pixels before and
    ``m - p - (m - p) // 2`` after on both axes (:func:`pad_for_matching`), so the
    window of the patch at ``(y, x)`` starts at ``guide[y, x]`` and is centred on the
    patch (one pixel more after it when ``m - p`` is odd).  Candidate positions are
    those of the unpadded image; the search window is clipped at the borders; the
    reference itself is always a member (members in scan order).  With ``m == p``
    (no padding) this is the plain patch SSD.

    The distances are computed offset by offset (in parallel over the offsets), for
    every reference: for the row offset ``dy`` and column offset ``dx``, the column
    sums of squared differences over the ``m`` window rows of a run of references
    on one row (a run of equal ``refs_y``, up to a gap of more than ``4 m``) serve all
    of them, and a window's SSD adds ``m`` of those sums.  With ``running`` (the guide
    holds integers and every window's SSD is below 2^53), a run's column sums start
    from the rows it shares with the previous row's run, kept aside when that row was
    summed (its tail: a 7x7 window on a 4 px grid adds 4 rows, not 7), or are those of
    the previous run with the rows between them dropped and added; a window's SSD is
    that of the previous reference with the columns between them dropped and added,
    where that is less work than summing afresh (``m`` more than twice the step): sums
    of integers below 2^53 are exact in any order, so a window's SSD depends on its own
    pixels only and a tile gets the distances the whole image gets.  Without it, each
    column sums its ``m`` rows (two at a time, from the window's first) and each window
    its ``m`` columns, in order: again a window's own pixels in a fixed order.  The ``n``
    closest are selected by a bounded max-heap over the candidates, the dense centre
    first, ring by ring outwards (ties go to the earlier candidate in scan order), which
    picks and orders the members exactly as a partition of all the distances would.
    The running sums pay for wide windows (35x35 about twice as fast on a 512x512
    image); docs/speed.md#shared-window-rows.
    """
    k = len(ry)
    g = np.ascontiguousarray(guide_padded if guide_padded.ndim == 3 else guide_padded[None],
                             dtype=np.float64)
    if running is None:
        running = exact_sums(g, m)
    H, W = g.shape[1] - (m - p), g.shape[2] - (m - p)
    if k:
        # every reference needs n positions in its (clipped) window, searched or not
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
    # a run's distances sum every column it spans: its runs end at gaps of more than
    # four windows (scattered references, as a pass's flat holes; docs/speed.md); the
    # selection's runs are whole rows (its inner loop runs along them)
    seg = _row_runs(ry, rx, W)
    dseg = _row_runs(ry, rx, 4 * m)
    off_y, off_x, omap = _offsets(mask, R)
    run_parts(_distances, 2 * R + 1, g, ry, rx, dseg, p, m, R, omap, bool(running), work)
    d = R if dense is None else min(int(dense), R)
    centre = (np.abs(off_y) <= d) & (np.abs(off_x) <= d)
    # the centre ring by ring outwards (nearest first within a ring), then the rest:
    # the nearest candidates, mostly the closest, fill the heaps with few replacements
    near = np.flatnonzero(centre)
    rings = np.lexsort((off_y[near] ** 2 + off_x[near] ** 2,
                        np.maximum(np.abs(off_y[near]), np.abs(off_x[near]))))
    visit = np.concatenate([near[rings], np.flatnonzero(~centre)])
    run_parts(_select, len(seg) - 1, ry, rx, seg, H, W, p, R, n, mask, omap, off_y, off_x,
              visit, work, gy, gx)
    if not distances:
        return gy, gx
    # the members' distances, looked up where the search left them
    oi = omap[gy - ry[:, None] + R, gx - rx[:, None] + R]
    gd = np.where(oi >= 0, work[np.maximum(oi, 0), np.arange(k)[:, None]], np.nan)
    gd[(gy == ry[:, None]) & (gx == rx[:, None])] = -1.0
    return gy, gx, gd


def gather(img: np.ndarray, gy: np.ndarray, gx: np.ndarray, p: int) -> np.ndarray:
    """The members' patches of ``img``: (len(gy), n, p*p) float64."""
    out = np.empty(gy.shape + (p * p,))
    run_parts(_gather, len(gy), img, gy, gx, p, out)
    return out


#: zeros after each row of :func:`interleave_guide`'s guide, so that the predicted
#: search reads a window's row as a multiple of 4 values (docs/speed.md)
ROW_PAD = 3


# reassociated sums (vectorised): exact on the integer guide, whatever their order
@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _predicted(guide, C, refs_y, refs_x, prev_y, prev_x, p, m, R, n, core, reach, out_y,
               out_x, r0, r1):
    """:func:`match_predicted` for the references ``r0 <= r < r1``; ``guide`` (H, W C +
    :data:`ROW_PAD`), the ``C`` channels interleaved, so that a window's row is ``m C``
    contiguous values (read as up to ``ROW_PAD`` more, whose squares are not summed)."""
    H = guide.shape[0] - (m - p)
    W = (guide.shape[1] - ROW_PAD) // C - (m - p)
    S = 2 * R + 1
    L = m * C
    Lp = (L + 3) // 4 * 4  # at most L + ROW_PAD
    acc = np.empty(Lp)
    n1 = prev_y.shape[1]
    mark = np.zeros((S, S), np.bool_)
    cand = np.empty((2 * core + 1) ** 2 + n1 * (4 * reach + 1), np.int64)
    hd = np.empty((1, n))
    ho = np.empty((1, n), np.int64)
    ref = np.empty((m, Lp))
    for r in range(r0, r1):
        ry = refs_y[r]
        rx = refs_x[r]
        y0 = max(0, ry - R)
        y1 = min(H - p, ry + R)
        x0 = max(0, rx - R)
        x1 = min(W - p, rx + R)
        # the candidates (scan indices, each once): a dense square around the reference
        # and a small cross around each previous member, in the window and the image
        nc = 0
        for k in range(-1, n1):
            cy = ry if k < 0 else prev_y[r, k]
            cx = rx if k < 0 else prev_x[r, k]
            e = core if k < 0 else reach
            for a in range(max(y0, cy - e), min(y1, cy + e) + 1):
                for b in range(max(x0, cx - e), min(x1, cx + e) + 1):
                    if k >= 0 and a != cy and b != cx:  # a member's cross
                        continue
                    ia = a - ry + R
                    ib = b - rx + R
                    if not mark[ia, ib]:
                        mark[ia, ib] = True
                        cand[nc] = ia * S + ib
                        nc += 1
        for t in range(m):
            ref[t, :] = guide[ry + t, rx * C:rx * C + Lp]
        # the n closest (distance, scan index) through a bounded max-heap, the
        # reference first at distance -1; a candidate displaces the largest when it is
        # closer, or as close and earlier in scan order, whatever the order of visits
        hd[0, 0] = -1.0
        ho[0, 0] = R * S + R
        cnt = 1
        thr = np.inf if n > 1 else -1.0
        for ci in range(nc):
            oi = cand[ci]
            ia = oi // S
            ib = oi - ia * S
            mark[ia, ib] = False
            if ia == R and ib == R:
                continue
            cy = ry + ia - R
            cx = (rx + ib - R) * C
            # per position in a window row, its squares over the rows (Lp of them, a
            # multiple of 4: no remainder loop and no reduction per row), then the L
            # that are the window's
            for u in range(Lp):
                acc[u] = 0.0
            for t in range(m):
                g = guide[cy + t, cx:cx + Lp]
                rt = ref[t]
                for u in range(Lp):
                    v = rt[u] - g[u]
                    acc[u] += v * v
            s = 0.0
            for u in range(L):
                s += acc[u]
            if s < thr or (s == thr and cnt == n and oi < ho[0, 0]):
                if cnt < n:
                    _heap_push(hd, ho, 0, cnt, s, oi)
                    cnt += 1
                    if cnt == n:
                        thr = hd[0, 0]
                else:
                    _heap_replace_top(hd, ho, 0, n, s, oi)
                    thr = hd[0, 0]
        if cnt < n:  # too few candidates: the caller searches these references fully
            out_y[r, 0] = -1
            continue
        top = hd[0, 0]
        order = argsort_small(ho[0])
        q = 0
        for t in range(n):
            i = order[t]
            if hd[0, i] < top:
                out_y[r, q] = ry + ho[0, i] // S - R
                out_x[r, q] = rx + ho[0, i] % S - R
                q += 1
        for t in range(n):
            i = order[t]
            if hd[0, i] == top:
                out_y[r, q] = ry + ho[0, i] // S - R
                out_x[r, q] = rx + ho[0, i] % S - R
                q += 1


def interleave_guide(guide_padded: np.ndarray) -> tuple:
    """Lay a padded guide out with its channels interleaved, as the predicted search reads it.

    ``(guide, C)``: the padded matching guide ``(C, Hg, Wg)`` (or ``(Hg, Wg)``) with
    its channels interleaved and :data:`ROW_PAD` zeros after each row, ``(Hg, Wg C +
    ROW_PAD)`` float64, as :func:`match_predicted` reads it; made once per pass."""
    g = guide_padded if guide_padded.ndim == 3 else guide_padded[None]
    C = g.shape[0]
    out = np.zeros((g.shape[1], g.shape[2] * C + ROW_PAD))
    out[:, :g.shape[2] * C] = np.moveaxis(g, 0, 2).reshape(g.shape[1], -1)
    return out, C


def match_predicted(interleaved: tuple, ry: np.ndarray, rx: np.ndarray,
                    prev_y: np.ndarray, prev_x: np.ndarray, p: int, m: int, R: int, n: int,
                    core: int = 3, reach: int = 1) -> tuple:
    """Block matching over the candidates an earlier grouping predicts.

    Block matching over the candidates an earlier grouping predicts: the offsets up
    to ``core`` from the reference on both axes, and those up to ``reach`` from each
    previous member ``prev_y, prev_x`` (len(ry), n1) along its row or its column,
    inside the ``(2 R + 1)^2`` search window and the image.  The distance (exact sums on
    a guide of integers), the members and their order are :func:`match`'s over the
    same candidates.  ``gy[r, 0] == -1`` marks a reference with fewer than ``n``
    candidates.  ``interleaved``: :func:`interleave_guide` of the padded guide.
    docs/speed.md#stage-2s-predicted-search."""
    g, C = interleaved
    k = len(ry)
    gy = np.empty((k, n), np.int64)
    gx = np.empty((k, n), np.int64)
    run_parts(_predicted, k, g, C, np.ascontiguousarray(ry), np.ascontiguousarray(rx),
              np.ascontiguousarray(prev_y), np.ascontiguousarray(prev_x), p, m, R, n,
              int(core), int(reach), gy, gx)
    return gy, gx


#: the grid neighbours whose group stands in for a reference that was not matched (a
#: flat area's, dropped by the pilot), in the order they are tried
NEIGHBOURS = ((0, 0), (0, -1), (-1, 0), (-1, -1), (0, 1), (1, 0), (-1, 1), (1, -1), (1, 1))


def match_from_groups(groups: dict, guide_m: np.ndarray, inter: tuple, ry: np.ndarray,
                      rx: np.ndarray, p: int, m: int, R: int, n: int, dense: int | None,
                      lags: Sequence, running: bool, work: np.ndarray | None, core: int = 3,
                      reach: int = 1) -> tuple:
    """Find the references' members among the candidates earlier groups predict.

    The members of the references ``ry, rx``, predicted by earlier groups on a grid
    (``groups``: members ``"gy"``, ``"gx"`` per position of the grid ``"ys"`` x
    ``"xs"``, ``"has"`` marking the matched ones): searched among the candidates of the
    nearest grid position's group (:func:`match_predicted`, ``core``, ``reach``), or
    where it was not matched, of its first matched grid neighbour (:data:`NEIGHBOURS`)
    moved onto the reference; fully (:func:`match`, ``dense``, ``lags``, ``running``,
    ``work``) where neither exists within ``p`` or the candidates are too few.
    ``inter``: :func:`interleave_guide` of ``guide_m``.
    docs/speed.md#stage-2s-predicted-search."""
    pys, pxs = groups["ys"], groups["xs"]
    rows = nearest(pys, ry)
    cols = nearest(pxs, rx)
    on = (np.abs(pys[rows] - ry) <= p) & (np.abs(pxs[cols] - rx) <= p)  # else: searched fully
    src = np.full(len(ry), -1, np.int64)
    for di, dj in NEIGHBOURS:
        r2, c2 = rows + di, cols + dj
        ok = (src < 0) & on & (r2 >= 0) & (r2 < len(pys)) & (c2 >= 0) & (c2 < len(pxs))
        at = np.where(ok, r2 * len(pxs) + c2, 0)
        ok &= groups["has"][at]
        src[ok] = at[ok]
    gy = np.empty((len(ry), n), np.int64)
    gx = np.empty((len(ry), n), np.int64)
    hi = np.flatnonzero(src >= 0)
    if len(hi):
        s = src[hi]
        sy = (ry[hi] - pys[s // len(pxs)])[:, None]  # the neighbour's group moved over
        sx = (rx[hi] - pxs[s % len(pxs)])[:, None]
        gy[hi], gx[hi] = match_predicted(inter, ry[hi], rx[hi], groups["gy"][s] + sy,
                                         groups["gx"][s] + sx, p, m, R, n, core, reach)
        src[hi[gy[hi, 0] < 0]] = -1  # too few candidates
    full = np.flatnonzero(src < 0)
    if len(full):
        gy[full], gx[full] = match(guide_m, np.ascontiguousarray(ry[full]),
                                   np.ascontiguousarray(rx[full]), p, m, R, n, dense, lags,
                                   running, work)
    return gy, gx


def nearest(grid: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Return the index of the position of a sorted grid nearest each value.

    The index of the position of the sorted ``grid`` nearest each of ``v`` (the
    lower one of two as near): a stage-2 reference's pilot reference, the same one
    where the two grids coincide."""
    i = np.clip(np.searchsorted(grid, v), 1, len(grid) - 1)
    lower = v - grid[i - 1] <= grid[i] - v
    return np.where(lower, i - 1, i) if len(grid) > 1 else np.zeros(len(v), np.int64)
