"""Where a stack's 3-D patches lie, and which references a page's groups start from.

A member of a stack's group is a 3-D patch: its ``p x p`` patch on its page and on the
pages either side, where the global motion carries it (:func:`motion_track`,
:func:`depth_pages`).  Since every page also gets the slices of its neighbours'
groups, each page's groups start from half its reference grid
(:func:`page_references`).  ``docs/stacks.md``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["THIN", "THIN_STAGES", "motion_track", "depth_pages", "page_references"]

#: each page's groups start from every other reference of its grid, in a checkerboard
#: that alternates from page to page, plus those a pixel would otherwise miss: the
#: slices of the neighbours' 3-D patches cover the rest (:func:`page_references`)
THIN = True
#: the passes whose pages are thinned (both: each alone saves a fifth, ``docs/stacks.md``)
THIN_STAGES = (1, 2)


def motion_track(shifts: np.ndarray, linked: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return each page's position along the global motion and its scene.

    Each page's position along the global motion, ``(P, 2)`` (page 0 at 0), and its
    scene, ``(P,)``: the unlinked pairs before it (two pages are one scene when their
    counts are equal)."""
    P = len(shifts) + 1
    S = np.zeros((P, 2), np.int64)
    S[1:] = np.cumsum(shifts, axis=0)
    return S, np.concatenate([[0], np.cumsum(~np.asarray(linked, dtype=bool))])


def depth_pages(k, depth: int, P: int, scene: np.ndarray) -> list:
    """Return the pages of the slices of 3-D patches on given pages.

    The pages of the ``depth`` slices of patches on pages ``k`` (an int array):
    ``k + dz`` mirrored at the stack's ends, ``k`` itself across a cut (``scene``:
    :func:`motion_track`'s)."""
    out = []
    for dz in range(-(depth // 2), depth // 2 + 1):
        q = np.abs(k + dz)
        q = np.clip(np.where(q > P - 1, 2 * (P - 1) - q, q), 0, P - 1)
        out.append(np.where(scene[k] != scene[q], k, q))
    return out


def page_references(k: int, grid: tuple, p: int, stride: int, shape: tuple,
                    track: tuple, depth: int, first_page: int = 0) -> np.ndarray:
    """Tell which references of a page's grid its groups start from.

    The references of page ``k``'s grid ``ys x xs`` (``grid``, on pages of ``shape``)
    its groups start from, a boolean ``(len(ys), len(xs))``: those where ``y // stride
    + x // stride + k`` is even (a checkerboard alternating from page to page; ``k``
    counted from the whole sequence's first page, ``first_page`` that of page 0 here),
    and every other one whose patch holds a pixel of the page that none of those
    references' slices covers: their own patches and the slices of the neighbour pages'
    such references, where the global motion (``track``, :func:`motion_track`) puts
    them, clipped at the border as the slices are.  A reference is always a member of
    its group, so every pixel gets an estimate.  The rule depends on the grid, the
    motion and the links only, so a tile decides as the whole pages (its cores aligned
    to twice the stride)."""
    ys, xs = grid
    H, W = shape
    S, scene = track
    P = len(scene)
    parity = (ys // stride)[:, None] + (xs // stride)[None, :] + first_page
    starts = np.zeros((H, W), bool)  # the top-left corners of the covering patches
    for q in range(max(0, k - depth // 2), min(P, k + depth // 2 + 1)):
        if not any(int(d) == k for d in depth_pages(np.asarray(q), depth, P, scene)):
            continue
        kept = (parity + q) % 2 == 0
        yy = np.clip(ys + S[k, 0] - S[q, 0], 0, H - p)
        xx = np.clip(xs + S[k, 1] - S[q, 1], 0, W - p)
        starts[np.broadcast_to(yy[:, None], kept.shape)[kept],
               np.broadcast_to(xx[None, :], kept.shape)[kept]] = True
    # a pixel is covered when a patch starts up to p - 1 above and left of it; a
    # reference comes back when its patch holds a pixel not covered
    covered = np.zeros_like(starts)
    for a in range(p):
        for b in range(p):
            covered[a:, b:] |= starts[:H - a, :W - b]
    hole, bare = ~covered, np.zeros_like(starts)
    for a in range(p):
        for b in range(p):
            bare[:H - a, :W - b] |= hole[a:, b:]
    return ((parity + k) % 2 == 0) | bare[np.ix_(ys, xs)]
