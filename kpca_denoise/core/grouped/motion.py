"""Motion between the pages of a sequence: the global shift from each page to the
next (phase correlation, :func:`page_shifts`), a steady drift's rounding jitter removed
(:func:`steady_shifts`), and how alike neighbouring pages are (:func:`link_scores`),
which decides whether a set is denoised as one.  ``docs/stacks.md``.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
from numba import njit

from kpca_denoise.core.parallel import run_parts
from kpca_denoise.core.patches import patch_positions

from .calibrate import central_crop

__all__ = ["page_shifts", "steady_shifts", "link_scores", "LINK_WINDOW", "LINK_STEP",
           "LINK_RADIUS", "LINK_SAMPLES", "LINK_FEWEST"]


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


def page_shifts(pages: Iterable[np.ndarray], limit: int | None = None) -> np.ndarray:
    """Measure the integer shift of the content from each page to the next.

    ``(P - 1, 2)`` integer shifts of the content from each page to the next (phase
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


def steady_shifts(shifts: np.ndarray, linked: np.ndarray | None = None) -> np.ndarray:
    """Remove a steady drift's rounding jitter from page shifts.

    ``shifts`` (P - 1, 2) with a steady drift's rounding jitter removed: along each
    axis, where the shifts of a run of ``linked`` pairs (default all) take only two
    neighbouring values (a motion of a fraction of a pixel per page, rounded one way
    or the other), all take the more frequent one (a tie: the smaller in size).  A
    patch's slices follow the pairs' shifts, so pages whose shifts differ cut their
    patches differently and match each other worse: a rotating time-lapse lost 0.7 dB
    to shifts of (1, 1) and (1, 0) mixed against either alone (``docs/stacks.md``)."""
    out = np.array(shifts, dtype=np.int64).reshape(-1, 2)
    n = out.shape[0]
    link = np.ones(n, bool) if linked is None else np.asarray(linked, dtype=bool)
    k = 0
    while k < n:
        if not link[k]:
            k += 1
            continue
        e = k
        while e < n and link[e]:
            e += 1
        for ax in range(2):
            v = out[k:e, ax]
            lo, hi = int(v.min()), int(v.max())
            if hi - lo == 1:
                a, b = int(np.sum(v == lo)), int(np.sum(v == hi))
                out[k:e, ax] = lo if (a > b or (a == b and abs(lo) <= abs(hi))) else hi
        k = e
    return out


def _best_ssd(a, b, ys, xs, sy, sx, m, R, out):
    """For each ``m x m`` window of ``a`` at ``(ys[i], xs[i])``: the smallest mean
    squared difference to the windows of ``b`` within ``R`` of ``(ys + sy, xs + sx)``;
    returns the offsets (dy, dx) from there of the best ones."""
    oy, ox = np.zeros(len(ys), np.int64), np.zeros(len(ys), np.int64)
    run_parts(_best_ssd_at, len(ys), a, b, ys, xs, ys + sy, xs + sx, m, R, out, oy, ox)
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
            run_parts(_best_ssd_at, len(ry), a, b, ry, rx, (ry + pick[0] + cy) % (H - m + 1),
                      (rx + pick[1] + cx) % (W - m + 1), m, LINK_RADIUS, c,
                      np.zeros(len(ry), np.int64), np.zeros(len(ry), np.int64))
            controls.append(c)
        scores[k] = float(np.mean(best < np.minimum(*controls)))
        chosen[k] = pick
    return scores, chosen


@njit(cache=True, nogil=True)
def _best_ssd_at(a, b, ys, xs, cys, cxs, m, R, out, oy, ox, i0, i1):
    """As :func:`_best_ssd`, searching around ``(cys[i], cxs[i])`` on ``b``, for the
    windows ``i0 .. i1 - 1`` (:func:`~kpca_denoise.core.parallel.run_parts`); the best
    offsets from there into ``oy, ox``."""
    H, W = a.shape
    for i in range(i0, i1):
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
