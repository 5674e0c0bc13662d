"""Matching across pages (core/grouped/cross_pages.py): a row of candidates measured
at once gives the members that one at a time, each stopped past the bound, gives."""

import numpy as np
import pytest

from kpca_denoise.core.grouped.cross_pages import (CrossSearch, PageStack, candidate_offsets,
                                                   cross_match)
from kpca_denoise.core.parallel import run_parts


def _members(g, P, page, ry, rx, own, shifts, linked, w, R, n, ns, p, m, rows):
    oy, ox, od = own
    k = len(ry)
    out = [np.empty((k, n), np.int64) for _ in range(3)]
    run_parts(cross_match, k, PageStack(g, P, shifts, linked, w), page, ry, rx, oy, ox, od,
              CrossSearch(*candidate_offsets(R), n, ns, p, m, rows), *out, slp=True)
    return out


@pytest.mark.parametrize("dtype,integers", [(np.float64, True), (np.float32, False)])
@pytest.mark.parametrize("width", [60, 14, 9])  # 9 and 14: narrower than a row of lanes
@pytest.mark.parametrize("R", [2, 5])  # 5: a square wider than the lanes
def test_rows_of_candidates_give_the_members_one_at_a_time_gives(dtype, integers, width, R):
    rng = np.random.default_rng(width + R)
    P, C, H, p, m, n, ns, w = 7, 2, 40, 5, 9, 12, 10, 3
    scene = rng.normal(0, 40, (C, H + 30, width + 30))
    g = np.empty((P, C, H + m - p, width + m - p), dtype)
    for q in range(P):  # a scene drifting (q, -q) with noise, some pages unrelated
        if q == 4:
            page = rng.normal(0, 40, g.shape[1:])
        else:
            page = scene[:, 10 + q:10 + q + g.shape[2], 12 - q:12 - q + g.shape[3]]
            page = page + rng.normal(0, 10, page.shape)
        g[q] = np.round(page) if integers else page
    shifts = np.array([[1, -1]] * (P - 1), np.int64)
    shifts[2] = [0, 3]  # a jump the search has to follow
    linked = np.ones(P - 1, bool)
    linked[5] = False
    page = 3
    ry, rx = np.meshgrid(np.arange(0, H - p + 1, 3), np.arange(0, width - p + 1, 2),
                         indexing="ij")
    ry, rx = ry.ravel().copy(), rx.ravel().copy()
    k = len(ry)
    oy = np.repeat(ry[:, None], n, 1)  # own members: the reference and its right side
    ox = np.minimum(rx[:, None] + np.arange(n)[None, :] % 3, width - p)
    oy = np.minimum(oy + np.arange(n)[None, :] // 3, H - p)
    od = np.full((k, n), np.nan)
    a = _members(g, P, page, ry, rx, (oy, ox, od), shifts, linked, w, R, n, ns, p, m, True)
    b = _members(g, P, page, ry, rx, (oy, ox, od), shifts, linked, w, R, n, ns, p, m, False)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert (a[0] != page).any() and not (a[0] == 6).any()  # neighbours used, not past the cut
