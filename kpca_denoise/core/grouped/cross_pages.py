"""Matching across pages: a stack reference's candidates on its neighbour pages.

On each neighbour page the search follows the motion: around where the best match of
the page before went, moved by the two pages' global shift, a few pixels either way
(VBM3D's predictive search).  The group is the ``n`` closest of the own-page members
and of every candidate met; a direction ends at the first page none of whose
candidates joins the group.  ``docs/stacks.md``.

A row of a page's candidates is measured at once, eight SSDs side by side in vector
lanes (:func:`_row8`, compiled with LLVM's SLP vectoriser,
:func:`~kpca_denoise.core.parallel.run_parts`); each lane adds its sums in the order a
single SSD does, so the distances are the same to the last bit, and full sums give
the decisions the sums stopped past the group's bound gave.  ``docs/speed.md``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

__all__ = ["candidate_offsets", "cross_match", "PageStack", "CrossSearch"]

#: candidates measured at once along a row (vector lanes of :func:`_row8`)
LANES = 8


@njit(cache=True, inline="always")
def _ssd(g, pa, ya, xa, pb, yb, xb, m, bound):
    """SSD of the ``m x m`` windows of pages (slots) ``pa`` and ``pb`` of ``g`` (Q, C, Hg, Wg),
    summed over channels in float64 (the guides may be stored as float32); stops once
    past ``bound`` (returns a value above it)."""
    s = 0.0
    for c in range(g.shape[1]):
        for u in range(m):
            ra = g[pa, c, ya + u]
            rb = g[pb, c, yb + u]
            for v in range(m):
                t = np.float64(ra[xa + v]) - np.float64(rb[xb + v])
                s += t * t
            if s > bound:
                return s
    return s


@njit(cache=True, inline="always")
def _row8(g, pa, ya, xa, pb, yb, xb, m, lanes):
    """``lanes[l]``: :func:`_ssd` (unbounded) of the window at ``(ya, xa)`` of slot ``pa``
    and the window at ``(yb, xb + l)`` of slot ``pb``, for ``l < 8``, each summed in
    :func:`_ssd`'s order.  Eight scalar sums that the SLP vectoriser packs into one
    vector; unsigned indices spare numba's negative-index wrap, which stops it."""
    a0 = 0.0
    a1 = 0.0
    a2 = 0.0
    a3 = 0.0
    a4 = 0.0
    a5 = 0.0
    a6 = 0.0
    a7 = 0.0
    for c in range(g.shape[1]):
        for u in range(m):
            ra = g[pa, c, ya + u]
            rb = g[pb, c, yb + u]
            for v in range(m):
                r = np.float64(ra[xa + v])
                i = np.uint64(xb + v)
                t0 = r - np.float64(rb[i])
                a0 += t0 * t0
                t1 = r - np.float64(rb[i + np.uint64(1)])
                a1 += t1 * t1
                t2 = r - np.float64(rb[i + np.uint64(2)])
                a2 += t2 * t2
                t3 = r - np.float64(rb[i + np.uint64(3)])
                a3 += t3 * t3
                t4 = r - np.float64(rb[i + np.uint64(4)])
                a4 += t4 * t4
                t5 = r - np.float64(rb[i + np.uint64(5)])
                a5 += t5 * t5
                t6 = r - np.float64(rb[i + np.uint64(6)])
                a6 += t6 * t6
                t7 = r - np.float64(rb[i + np.uint64(7)])
                a7 += t7 * t7
    lanes[0] = a0
    lanes[1] = a1
    lanes[2] = a2
    lanes[3] = a3
    lanes[4] = a4
    lanes[5] = a5
    lanes[6] = a6
    lanes[7] = a7


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


def candidate_offsets(R: int) -> tuple[np.ndarray, np.ndarray]:
    """List the offsets ``(dy, dx)`` up to ``R`` either way, nearest first.

    Ties row-major: the order a neighbour page's candidates are met in."""
    dy, dx = np.mgrid[-R:R + 1, -R:R + 1].reshape(2, -1)
    order = np.argsort(dy * dy + dx * dx, kind="stable")
    return np.ascontiguousarray(dy[order]), np.ascontiguousarray(dx[order])


class PageStack(NamedTuple):
    """The pages a stack reference's search walks (:func:`cross_match`).

    ``g`` (Q, C, Hg, Wg) holds the matching guide of page ``q`` of the ``P`` at slot
    ``q % Q`` (the pages within ``w`` of the reference's at least); ``shifts``
    (P - 1, 2) are the global shifts from page to page and ``linked`` (P - 1 bools)
    which neighbouring pages are of one scene; the search goes ``w`` pages either way."""

    g: np.ndarray
    P: int
    shifts: np.ndarray
    linked: np.ndarray
    w: int


class CrossSearch(NamedTuple):
    """How a stack reference's group is searched across pages (:func:`cross_match`).

    ``oy, ox``: the offsets around the predicted position (:func:`candidate_offsets`);
    ``n`` members, of which a page must enter the closest ``ns`` for the search to go
    on; ``p x p`` patches in ``m x m`` matching windows; ``rows``: a page's candidates
    measured a row at a time (:func:`_row8`; False: one by one, each stopped past the
    group's bound: the same members)."""

    oy: np.ndarray
    ox: np.ndarray
    n: int
    ns: int
    p: int
    m: int
    rows: bool


@njit(cache=True, nogil=True)
def cross_match(pages, page, ry, rx, own_y, own_x, own_d, search, out_p, out_y, out_x, r0, r1):
    """Group each stack reference with its closest own-page and neighbour-page patches.

    Each reference's ``search.n`` closest among its own-page members ``own_y, own_x``
    (at distances ``own_d`` from the matching, NaN where not known: computed here)
    and the candidates of the neighbour pages of ``pages`` (:class:`PageStack`),
    followed page by page from the reference's page ``page`` (see the module
    docstring) at the offsets of ``search`` (:class:`CrossSearch`); the reference
    first, then by distance (ties: the order met).  A direction ends at the first page
    none of whose candidates joins the group's closest ``search.ns`` (a z-stack's
    farther slices, a scene cut the links missed).  ``out_p, out_y, out_x`` receive
    the members' pages and positions.  References ``r0 .. r1 - 1``
    (:func:`~kpca_denoise.core.parallel.run_parts`)."""
    g, P, shifts, linked, w = pages
    oy, ox, n, ns, p, m, rows = search
    Q = g.shape[0]
    H = g.shape[2] - (m - p)
    W = g.shape[3] - (m - p)
    n_own = own_y.shape[1]
    e = 0  # the candidates' square: 2 e + 1 on a side
    for o in range(oy.shape[0]):
        e = max(e, abs(oy[o]), abs(ox[o]))
    side = 2 * e + 1
    dist = np.empty((side, side))
    got = np.zeros((side, side), np.bool_)
    lanes = np.empty(LANES)
    rows = rows and W - p - (LANES - 1) >= 0  # a page as wide as a row of lanes
    for r in range(r0, r1):
        hd = np.empty(n)
        hp = np.empty(n, np.int64)
        hy = np.empty(n, np.int64)
        hx = np.empty(n, np.int64)
        cnt = 0
        y0, x0 = ry[r], rx[r]
        # the own-page members (the reference among them, kept with distance -1)
        for i in range(n_own):
            y, x = own_y[r, i], own_x[r, i]
            d = own_d[r, i]
            if y == y0 and x == x0:
                d = -1.0
            elif np.isnan(d):
                d = _ssd(g, page % Q, y0, x0, page % Q, y, x, m, np.inf)
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
                if rows:
                    # every candidate's whole SSD, LANES of a row at once (lanes off the
                    # page are shifted back onto it); a sum stopped past the bound
                    # below and the whole one lead to the same decisions
                    got[:, :] = False
                    for a in range(side):
                        y = cy - e + a
                        if y < 0 or y > H - p:
                            continue
                        for b0 in range(0, side, LANES):
                            xs = cx - e + b0
                            xb = min(max(xs, 0), W - p - (LANES - 1))
                            _row8(g, page % Q, y0, x0, q % Q, y, xb, m, lanes)
                            for b in range(b0, min(side, b0 + LANES)):
                                lane = cx - e + b - xb
                                if 0 <= lane < LANES:
                                    dist[a, b] = lanes[lane]
                                    got[a, b] = True
                best = np.inf
                by, bx = cy, cx
                entered = False
                for o in range(oy.shape[0]):  # nearest the prediction first
                    y = cy + oy[o]
                    x = cx + ox[o]
                    if y < 0 or y > H - p or x < 0 or x > W - p:
                        continue
                    if rows and got[oy[o] + e, ox[o] + e]:
                        d = dist[oy[o] + e, ox[o] + e]
                    else:
                        top = hd[n - 1] if cnt == n else np.inf
                        d = _ssd(g, page % Q, y0, x0, q % Q, y, x, m, max(best, top))
                    if d < best:
                        best, by, bx = d, y, x
                    if cnt < ns or d < hd[ns - 1]:
                        entered = True
                    cnt = _insert(hd, hp, hy, hx, cnt, d, q, y, x)
                if best < np.inf:  # the motion followed from the best match
                    cy, cx = by, bx
                if not entered:
                    break
        for j in range(n):
            out_p[r, j] = hp[j]
            out_y[r, j] = hy[j]
            out_x[r, j] = hx[j]
