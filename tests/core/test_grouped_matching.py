"""Block matching with windows larger than the patch, the stage-1 shrinkers and
groups shared across channels (issue 12)."""

import numpy as np
import pytest

from kpca_denoise.core.color import opponent_to_rgb, rgb_to_opponent
from kpca_denoise.core.grouped import (GroupedOptions, denoise_grouped,
                                       denoise_grouped_channels, resolve_geometry)
from kpca_denoise.core.grouped.matching import (exact_sums, interleave_guide, match,
                                                match_predicted, quantise_guide, search_mask)
from kpca_denoise.core.grouped.matching import pad_for_matching as _pad_for_matching
from kpca_denoise.core.grouped.shrinkage import correct_means
from helpers import denoise_grouped_opponent

# patch-sized matching with stride 5 (the plain patch SSD)
OLD = dict(match_size1=5, match_size=5, kappa1=2.5, kappa2=1.2, stride=5)


def _reference_match(img, ry, rx, p, m, R, n, dense=None, extra=()):
    """Plain numpy block matching: SSD of the m x m windows of the reflect-padded image
    (summed over the channels of a (C, H, W) stack); outside the square of offsets up
    to ``dense`` (None: R) only the positions with both offsets even are searched,
    and the offsets in ``extra``."""
    dense = R if dense is None else dense

    def seen(dy, dx):
        return (max(abs(dy), abs(dx)) <= dense or (dy % 2 == 0 and dx % 2 == 0)
                or (dy, dx) in extra)

    stack = img if img.ndim == 3 else img[None]
    lo = (m - p) // 2
    gs = [np.pad(c, ((lo, m - p - lo), (lo, m - p - lo)), mode="reflect") for c in stack]
    H, W = stack.shape[1:]
    out = []
    for y, x in zip(ry, rx):
        cands = [(float(sum(((g[cy:cy + m, cx:cx + m] - g[y:y + m, x:x + m]) ** 2).sum()
                            for g in gs)), cy, cx)
                 for cy in range(max(0, y - R), min(H - p, y + R) + 1)
                 for cx in range(max(0, x - R), min(W - p, x + R) + 1)
                 if seen(cy - y, cx - x)]
        cands.sort()
        out.append({(cy, cx) for _, cy, cx in cands[:n]})
    return out


@pytest.mark.parametrize("m", [5, 6, 9])
def test_matching_windows_are_centred_windows_of_the_reflected_image(m):
    rng = np.random.default_rng(0)
    img = rng.normal(100, 30, (30, 33))
    ry = np.array([0, 0, 13, 25, 20], np.int64)
    rx = np.array([0, 28, 14, 3, 28], np.int64)
    gy, gx = match(_pad_for_matching(img, 5, m), ry, rx, 5, m, 6, 12)
    for r, ref in enumerate(_reference_match(img, ry, rx, 5, m, 6, 12)):
        got = set(zip(gy[r].tolist(), gx[r].tolist()))
        assert got == ref and (ry[r], rx[r]) in got  # the reference is a member


@pytest.mark.parametrize("m", [5, 9])
def test_several_guide_channels_match_on_their_summed_ssd(m):
    # (how colour is grouped: match_channels="all" stacks the opponent channels)
    rng = np.random.default_rng(4)
    img = rng.normal(100, 30, (3, 30, 33))
    ry = np.array([0, 0, 13, 25, 20], np.int64)
    rx = np.array([0, 28, 14, 3, 28], np.int64)
    guide = np.stack([_pad_for_matching(c, 5, m) for c in img])
    gy, gx = match(guide, ry, rx, 5, m, 8, 12, dense=3)
    for r, ref in enumerate(_reference_match(img, ry, rx, 5, m, 8, 12, dense=3)):
        assert set(zip(gy[r].tolist(), gx[r].tolist())) == ref
    # and not on the first channel's alone
    fy, fx = match(guide[:1], ry, rx, 5, m, 8, 12, dense=3)
    assert any(set(zip(fy[r].tolist(), fx[r].tolist())) != set(zip(gy[r].tolist(), gx[r].tolist()))
               for r in range(len(ry)))


@pytest.mark.parametrize("m", [5, 9])
def test_far_offsets_are_searched_at_even_values_only(m):
    # outside the dense square (offsets up to 3 here) only even offsets are candidates
    rng = np.random.default_rng(1)
    img = rng.normal(100, 30, (40, 42))
    ry = np.array([0, 0, 17, 35, 20, 9], np.int64)
    rx = np.array([0, 37, 18, 3, 37, 20], np.int64)
    gy, gx = match(_pad_for_matching(img, 5, m), ry, rx, 5, m, 9, 30, dense=3)
    for r, ref in enumerate(_reference_match(img, ry, rx, 5, m, 9, 30, dense=3)):
        got = set(zip(gy[r].tolist(), gx[r].tolist()))
        assert got == ref and (ry[r], rx[r]) in got
        far = [(y - ry[r], x - rx[r]) for y, x in got
               if abs(y - ry[r]) > 3 or abs(x - rx[r]) > 3]
        assert far and all(dy % 2 == 0 and dx % 2 == 0 for dy, dx in far)
    # a strip one patch high has fewer searched candidates at its end (20 dense + 7
    # even) than a group needs (32 of the 33 positions in reach): the unsearched
    # positions fill the group, every member distinct
    strip = rng.normal(100, 30, (5, 120))
    sy, sx = match(_pad_for_matching(strip, 5, 5), np.array([0], np.int64),
                   np.array([0], np.int64), 5, 5, 32, 32, dense=19)
    assert len(set(sx[0].tolist())) == 32 and 0 in sx[0] and sx[0].max() <= 32
    # a group larger than the window's 33 positions is refused, not filled with garbage
    with pytest.raises(ValueError, match="more positions than the search window holds"):
        match(_pad_for_matching(strip, 5, 5), np.array([0], np.int64), np.array([0], np.int64),
              5, 5, 32, 34, dense=19)
    # all dense: the plain full search
    full, _ = match(_pad_for_matching(img, 5, m), ry, rx, 5, m, 9, 30)
    same, _ = match(_pad_for_matching(img, 5, m), ry, rx, 5, m, 9, 30, dense=9)
    np.testing.assert_array_equal(full, same)
    # a texture's lattice adds every offset within 2 px of its points a v1 + b v2
    lags = [(7, 0), (3, 7)]
    mask = search_mask(9, 3, lags)
    lattice = {(a * 7 + b * 3, b * 7) for a in range(-4, 5) for b in range(-4, 5)}
    extra = {(dy, dx) for dy in range(-9, 10) for dx in range(-9, 10)
             if any(max(abs(dy - ly), abs(dx - lx)) <= 2 for ly, lx in lattice)}
    want = {(dy, dx) for dy in range(-9, 10) for dx in range(-9, 10)
            if max(abs(dy), abs(dx)) <= 3 or (dy % 2 == 0 and dx % 2 == 0) or (dy, dx) in extra}
    assert {(dy - 9, dx - 9) for dy, dx in zip(*np.nonzero(mask))} == want
    assert (5, 7) in want and (5, 7) not in {(dy, dx) for dy in range(-9, 10)
                                             for dx in range(-9, 10) if dy % 2 == 0}
    gy, gx = match(_pad_for_matching(img, 5, m), ry, rx, 5, m, 9, 30, dense=3, lags=lags)
    for r, ref in enumerate(_reference_match(img, ry, rx, 5, m, 9, 30, dense=3, extra=extra)):
        assert set(zip(gy[r].tolist(), gx[r].tolist())) == ref


def test_ties_go_to_the_earlier_candidate_and_members_keep_scan_order():
    # an image of exact repeats (a 4 x 3 px tile of small integers) ties many
    # candidates at the n-th distance: the group is the candidates closer than the
    # n-th distance in scan order, then the earliest of its ties in scan order (as a
    # partition of all the distances in scan order picked them); the reference counts
    # as distance -1, so it is always among the closer ones
    tile = np.array([[0, 3, 1], [2, 0, 5], [4, 1, 0], [1, 2, 3]], float)
    img = np.tile(tile, (8, 10)) + np.kron(np.arange(4)[:, None] % 2, np.ones((8, 30)))
    ry = np.array([0, 9, 13, 27], np.int64)
    rx = np.array([0, 11, 25, 4], np.int64)
    for m, R, n, dense in ((5, 6, 17, 6), (7, 9, 23, 3), (5, 8, 28, 2)):
        g = _pad_for_matching(img, 5, m)
        gy, gx = match(g, ry, rx, 5, m, R, n, dense=dense)
        H, W = img.shape
        cut = 0
        for r, (y, x) in enumerate(zip(ry.tolist(), rx.tolist())):
            cands = [(-1.0 if (cy, cx) == (y, x) else
                      float(((g[cy:cy + m, cx:cx + m] - g[y:y + m, x:x + m]) ** 2).sum()),
                      cy, cx)
                     for cy in range(max(0, y - R), min(H - 5, y + R) + 1)
                     for cx in range(max(0, x - R), min(W - 5, x + R) + 1)
                     if max(abs(cy - y), abs(cx - x)) <= dense
                     or ((cy - y) % 2 == 0 and (cx - x) % 2 == 0)]
            thr = sorted(d for d, _, _ in cands)[n - 1]
            want = [(cy, cx) for d, cy, cx in cands if d < thr]
            ties = [(cy, cx) for d, cy, cx in cands if d == thr]
            cut += len(ties) > n - len(want)  # more ties at the n-th distance than room
            want += ties[:n - len(want)]
            assert list(zip(gy[r].tolist(), gx[r].tolist())) == want, (m, R, n, r)
        assert cut >= 2, (m, R, n)


@pytest.mark.parametrize("m", [9, 15, 21])
def test_running_sums_give_the_members_of_fresh_sums(m):
    # on a guide of integers the matcher updates a run's column sums and a window's
    # sum from the previous ones (rows and columns dropped and added) where the step
    # is under m / 2: exact, so the members and their order are those of summing
    # every window afresh, for a grid (steps 3 and 2), references out of order,
    # repeated ones and a block of columns (column sums over its columns only)
    rng = np.random.default_rng(m)
    img = rng.integers(0, 200, (2, 40, 47)).astype(float)
    g = np.stack([_pad_for_matching(c, 5, m) for c in img])
    assert exact_sums(g, m)
    ys, xs = np.arange(0, 36, 3), np.r_[np.arange(0, 42, 2), 42]
    ry, rx = np.repeat(ys, len(xs)), np.tile(xs, len(ys))
    perm = rng.permutation(len(ry))[:150]
    blk = (rx >= 10) & (rx <= 20)
    for a, b in ((ry, rx), (ry[perm], rx[perm]), (np.r_[ry[:30], ry[:30]], np.r_[rx[:30], rx[:30]]),
                 (ry[blk], rx[blk])):
        a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
        fy, fx = match(g, a, b, 5, m, 9, 24, dense=4, running=False)
        sy, sx = match(g, a, b, 5, m, 9, 24, dense=4, running=True)
        np.testing.assert_array_equal(sy, fy)
        np.testing.assert_array_equal(sx, fx)
    sy, sx = match(g, ry[:40], rx[:40], 5, m, 9, 24, dense=4, running=True)
    for r, ref in enumerate(_reference_match(img, ry[:40], rx[:40], 5, m, 9, 24, dense=4)):
        assert set(zip(sy[r].tolist(), sx[r].tolist())) == ref


@pytest.mark.parametrize("m, step", [(7, 4), (9, 5), (11, 5), (5, 3)])
def test_rows_shared_with_the_next_row_give_the_distances_of_fresh_sums(m, step):
    # on a grid whose step is at least half the window, the matcher keeps the column
    # sums of the rows the next row's windows share (their tail) and adds only the
    # others: exact, so every member's distance and the members are those of summing
    # afresh, on a checkerboard (rows' columns alternating, so their spans differ),
    # with references dropped (runs split, rows skipped) and on three channels
    rng = np.random.default_rng(m + step)
    img = rng.integers(0, 200, (3, 61, 58)).astype(float)
    g = np.stack([_pad_for_matching(c, 5, m) for c in img])
    assert exact_sums(g, m)
    ys = np.arange(0, 57, step)
    xs = np.arange(0, 54, step)
    cells = [(y, x) for i, y in enumerate(ys) for j, x in enumerate(xs) if (i + j) % 2 == 0]
    ry, rx = (np.array(a, np.int64) for a in zip(*cells))
    keep = rng.random(len(ry)) < 0.6
    keep &= ~(((ry == ys[3]) | (ry == ys[4])) & (rx <= 30))  # rows of one short run
    keep[ry == ys[6]] = False  # a row without references
    for a, b in ((ry, rx), (ry[keep], rx[keep])):
        a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
        fy, fx, fd = match(g, a, b, 5, m, 10, 20, dense=4, running=False, distances=True)
        sy, sx, sd = match(g, a, b, 5, m, 10, 20, dense=4, running=True, distances=True)
        np.testing.assert_array_equal(sy, fy)
        np.testing.assert_array_equal(sx, fx)
        np.testing.assert_array_equal(sd, fd)
    for r in range(0, len(a), 7):  # the distances are the windows' SSDs
        for i in range(20):
            y, x = sy[r, i], sx[r, i]
            if (y, x) != (a[r], b[r]):
                want = ((g[:, y:y + m, x:x + m] - g[:, a[r]:a[r] + m, b[r]:b[r] + m]) ** 2).sum()
                assert sd[r, i] == want


@pytest.mark.parametrize("running", [False, True])
def test_scattered_references_get_the_members_each_gets_alone(running):
    # a row's references more than four windows apart are matched in separate runs (the
    # columns between them are not summed): the members and their order are each
    # reference's own, alone, as for references next to each other
    rng = np.random.default_rng(3)
    img = rng.integers(0, 200, (1, 40, 140)).astype(float)
    g = _pad_for_matching(img[0], 5, 7)[None]
    ry = np.array([2, 2, 2, 2, 2, 9, 9, 30, 30, 30], np.int64)
    rx = np.array([0, 3, 31, 70, 131, 5, 110, 40, 44, 69], np.int64)
    gy, gx = match(g, ry, rx, 5, 7, 12, 16, dense=3, running=running)
    for r in range(len(ry)):
        ay, ax = match(g, ry[r:r + 1], rx[r:r + 1], 5, 7, 12, 16, dense=3, running=running)
        np.testing.assert_array_equal(gy[r], ay[0])
        np.testing.assert_array_equal(gx[r], ax[0])


def test_match_gives_its_members_distances_as_plain_ssds():
    # what the stack path's cross-page selection reuses instead of summing again: each
    # member's SSD over the channels' m x m windows, -1 for the reference, and NaN for
    # a member the search never reached (a window too thin for n searched positions)
    rng = np.random.default_rng(7)
    img = rng.integers(0, 200, (2, 30, 33)).astype(float)
    g = np.stack([_pad_for_matching(c, 5, 9) for c in img])
    ry = np.array([0, 0, 13, 13, 25], np.int64)
    rx = np.array([0, 28, 4, 14, 3], np.int64)
    gy, gx, gd = match(g, ry, rx, 5, 9, 8, 12, dense=3, distances=True)
    assert np.array_equal((gy, gx), match(g, ry, rx, 5, 9, 8, 12, dense=3))
    for r in range(len(ry)):
        for i in range(12):
            y, x = gy[r, i], gx[r, i]
            want = -1.0 if (y, x) == (ry[r], rx[r]) else float(
                ((g[:, y:y + 9, x:x + 9] - g[:, ry[r]:ry[r] + 9, rx[r]:rx[r] + 9]) ** 2).sum())
            assert gd[r, i] == want
    thin = np.stack([_pad_for_matching(c[:6], 5, 5) for c in img])  # 2 rows of positions
    ty, tx, td = match(thin, np.array([0], np.int64), np.array([10], np.int64), 5, 5, 4, 12,
                       dense=1, distances=True)
    searched = (np.abs(ty[0] - 0) <= 1) & (np.abs(tx[0] - 10) <= 1) | (
        (ty[0] % 2 == 0) & (tx[0] % 2 == 0))
    assert np.isnan(td[0]).any() and np.array_equal(np.isnan(td[0]), ~searched)


@pytest.mark.parametrize("channels", [1, 3])
def test_a_predicted_search_ranks_its_candidates_as_the_full_search(channels):
    # with every offset of the window among its candidates (a core of R), the
    # predicted search finds the full search's members in its order; with a small
    # core it searches only the core's square and the previous members' crosses, and
    # finds the closest of those (a brute-force check)
    rng = np.random.default_rng(channels)
    img = rng.integers(0, 60, (channels, 36, 41)).astype(float)
    m, R, n = 9, 7, 12
    g = np.stack([_pad_for_matching(c, 5, m) for c in img])
    ys, xs = np.arange(0, 32, 3), np.arange(0, 37, 4)
    ry, rx = np.repeat(ys, len(xs)), np.tile(xs, len(ys))
    fy, fx = match(g, ry, rx, 5, m, R, n)
    prev_y = np.clip(ry[:, None] + rng.integers(-R, R + 1, (len(ry), 6)), 0, 31)
    prev_x = np.clip(rx[:, None] + rng.integers(-R, R + 1, (len(ry), 6)), 0, 36)
    py, px = match_predicted(interleave_guide(g), ry, rx, prev_y, prev_x, 5, m, R, n, core=R, reach=0)
    np.testing.assert_array_equal(py, fy)
    np.testing.assert_array_equal(px, fx)
    py, px = match_predicted(interleave_guide(g), ry, rx, prev_y, prev_x, 5, m, R, n, core=1, reach=1)
    for r in range(len(ry)):
        cands = {(y, x) for y in range(ry[r] - 1, ry[r] + 2) for x in range(rx[r] - 1, rx[r] + 2)}
        cands |= {(y + a, x + b) for y, x in zip(prev_y[r], prev_x[r])
                  for a, b in ((0, 0), (-1, 0), (1, 0), (0, -1), (0, 1))}
        cands = [(y, x) for y, x in cands if 0 <= y <= 31 and 0 <= x <= 36
                 and abs(y - ry[r]) <= R and abs(x - rx[r]) <= R]
        if len(cands) < n:
            assert py[r, 0] == -1
            continue
        d = {c: (-1.0 if c == (ry[r], rx[r]) else float(
            ((g[:, c[0]:c[0] + m, c[1]:c[1] + m] - g[:, ry[r]:ry[r] + m, rx[r]:rx[r] + m]) ** 2
             ).sum())) for c in cands}
        # the n closest (ties to the earlier in scan order), in scan order: those
        # closer than the n-th, then the n-th and its ties
        best = sorted(cands, key=lambda c: (d[c], c))[:n]
        top = d[best[-1]]
        want = sorted(c for c in best if d[c] < top) + sorted(c for c in best if d[c] == top)
        assert list(zip(py[r].tolist(), px[r].tolist())) == want


def test_running_sums_need_integers_whose_window_ssd_is_exact():
    g = np.zeros((3, 30, 30))
    assert exact_sums(g, 35)
    assert not exact_sums(g + 0.5, 35)
    # the largest SSD of two 35 x 35 windows over 3 channels is 3 * 35^2 * span^2,
    # exact up to 2^52: a span of at most 2^26 / (35 sqrt 3) = 1.107e6
    g[0, 0, 0] = 1.10e6
    assert exact_sums(g, 35)
    g[0, 0, 0] = 1.11e6
    assert not exact_sums(g, 35)
    assert exact_sums(g, 7)
    # the engine's guide, in units of sigma / 1024: any colour image whose noise is at
    # least 1/255 of its span keeps exact running sums up to 35 x 35 windows
    x = np.random.default_rng(0).random((3, 40, 40))
    x[:, 0, 0], x[:, 0, 1] = 0.0, 1.0
    q = quantise_guide(x, 1.0 / 255.0)
    assert exact_sums(q, 35)
    assert np.abs(q * (1.0 / 255.0 / 1024.0) - x).max() <= 1.0 / 255.0 / 2048.0 + 1e-15


def test_a_matching_window_of_the_patch_size_is_the_plain_patch_ssd(camera):
    # match_size = patch_size is the matching of before the windows existed
    # (checked bit for bit against the previous commit when written)
    img = camera[100:180, 100:180].astype(float)
    noisy = img + np.random.default_rng(0).normal(0, 25, img.shape)
    a, sa = denoise_grouped(noisy, 25.0, **OLD)
    assert (sa["params"]["match_size1"], sa["params"]["match_size"]) == (5, 5)
    assert np.array_equal(_pad_for_matching(img, 5, 5), img)
    c, _ = denoise_grouped(noisy, 25.0, **dict(OLD, match_size1=3, match_size=1))
    np.testing.assert_array_equal(a[None], c[None])  # smaller than the patch: the patch
    d, _ = denoise_grouped(noisy, 25.0, match_size1=7, match_size=9)
    assert np.abs(d[None] - a[None]).max() > 0.1  # wider windows change the groups


def test_the_pilot_and_stage_2_take_their_own_strides():
    """The pilot (stage 1) takes a reference every patch - 1 px and stage 2 every patch
    (docs/options.md#stride); ``stride`` sets both, ``stride1`` the pilot's alone, and
    stage 2 on stage 1's groups (no regroup) or on a regular texture keeps the pilot's
    grid."""
    from kpca_denoise.core.grouped import resolve_geometry
    from kpca_denoise.core.grouped.matching import nearest

    def strides(**kw):
        g = resolve_geometry(GroupedOptions(**kw))
        return g.stride1, g.stride

    assert strides() == (4, 5)
    assert strides(stride=3) == (3, 3)
    assert strides(stride1=2) == (2, 5)
    assert strides(stride1=2, stride=3) == (2, 3)
    assert strides(regroup=False) == (4, 4)
    assert strides(**GroupedOptions.preset("fast").changed()) == (5, 5)
    assert strides(patch_size=8) == (7, 8)
    g = resolve_geometry(GroupedOptions(), periodic=True)  # a regular texture: one grid
    assert (g.stride1, g.stride) == (4, 4)
    with pytest.raises(ValueError, match=r"stride1 must be in 1..patch_size=5 .*got 6"):
        strides(stride1=6)
    # each pass's groups: a 40x40 image has 10 pilot rows and columns (0, 4, ..., 32, 35)
    # and 8 of stage 2 (0, 5, ..., 35); the pilot's are the same in both runs
    img = np.random.default_rng(2).normal(100, 10, (40, 40))
    n5 = denoise_grouped(img, 10.0)[1]["groups"]
    n4 = denoise_grouped(img, 10.0, stride=4)[1]["groups"]
    assert n4 - n5 == 10 * 10 - 8 * 8
    # a stage-2 reference predicts from the nearest pilot reference, the lower of two
    grid = np.array([0, 4, 8, 12, 15])
    np.testing.assert_array_equal(nearest(grid, np.array([0, 2, 5, 10, 13, 14, 15])),
                                  [0, 0, 1, 2, 3, 4, 4])


def test_stage1_shrinker_and_geometry_defaults_are_resolved_per_kernel():
    noisy = np.random.default_rng(1).normal(100, 10, (40, 40))
    p = {k: denoise_grouped(noisy, 10.0, kernel=k)[1]["params"] for k in ("rbf", "linear")}
    assert (p["rbf"]["kappa1"], p["rbf"]["kappa2"]) == (4.5, 0.7)
    assert p["linear"]["kappa1"] == 3.0
    g = p["rbf"]
    # pure noise has no coarse detail: the smooth image's 11x11 stage-1 window
    assert g["detail"] < 0.3
    assert (g["match_size1"], g["match_size"], g["stride1"], g["stride"]) == (11, 11, 4, 5)
    assert denoise_grouped(noisy, 10.0, detail=5.0)[1]["params"]["match_size1"] == 7
    assert (g["search_radius1"], g["search_radius"]) == (32, 32)
    wide = denoise_grouped(noisy, 10.0, patch_size=7, detail=5.0)[1]["params"]
    # the geometry follows the patch size and the search radius
    assert (wide["match_size1"], wide["match_size"], wide["stride1"], wide["stride"]) == (
        9, 13, 6, 7)
    small = denoise_grouped(noisy, 10.0, search_radius=3)[1]["params"]
    assert (small["search_radius1"], small["search_radius"]) == (3, 3)
    both = denoise_grouped(noisy, 10.0, search_radius=3, search_radius1=6)[1]["params"]
    assert (both["search_radius1"], both["search_radius"]) == (6, 3)
    with pytest.raises(ValueError, match="unknown grouped option 'shrink1'"):
        denoise_grouped(noisy, 10.0, shrink1="firm")
    with pytest.raises(ValueError, match="match_size"):
        denoise_grouped(noisy, 10.0, match_size=0)


def test_the_stage1_threshold_keeps_the_components_above_it_whole():
    # the expansion weights of the hard threshold: the kept components' projector,
    # centring-corrected so that each member's weights sum to one
    from kpca_denoise.core.grouped.shrinkage import shrink_own

    rng = np.random.default_rng(3)
    lam = np.sort(rng.uniform(0.0, 10.0, (4, 8)), axis=1)[:, ::-1].copy()
    V = np.stack([np.linalg.qr(rng.normal(size=(8, 8)))[0] for _ in range(4)])
    tau = 4.0
    Gam, aggw, kept = shrink_own(lam, V, tau, np.asarray([-1, 1], np.int64))
    for r in range(4):
        keep = lam[r] > tau
        for q, cap in enumerate((8, 1)):
            w = np.where(keep & (np.arange(8) < cap), 1.0, 0.0)
            expect = (V[r] * w) @ V[r].T
            expect += (1.0 - expect.sum(axis=1, keepdims=True)) / 8  # weights sum to one
            np.testing.assert_allclose(Gam[r, q], expect, atol=1e-12)
            assert kept[r, q] == min(cap, keep.sum())
            np.testing.assert_allclose(aggw[r, q], 1.0 / (1.0 + w.sum()))


def test_an_images_chunks_only_reorder_its_sums(monkeypatch, camera):
    """driver.CHUNK_GROUPS sets how many references go through the steps together:
    the pixels are the same whatever the chunks (a few rows of references or the
    whole image), to the floating-point noise of adding the parts' sums in another
    order."""
    import kpca_denoise.core.grouped.driver as driver

    img = camera[:96, :128] + np.random.default_rng(5).normal(0, 25, (96, 128))
    out = {}
    for k in (64, 2048):
        monkeypatch.setattr(driver, "CHUNK_GROUPS", k)
        out[k] = denoise_grouped(img, 25.0)[0][None]
    np.testing.assert_allclose(out[2048], out[64], rtol=0, atol=1e-9)
    assert np.abs(out[64] - img).mean() > 5  # denoised, not passed through


def test_channels_share_one_grouping():
    rng = np.random.default_rng(2)
    y, x = np.mgrid[0:48, 0:56]
    lum = 120 + 50 * np.sin(x / 4.0) * np.cos(y / 6.0) + rng.normal(0, 15, (48, 56))
    # (a periodic pattern: the photograph settings, so that kappa2 is 0.7 throughout)
    one, st1 = denoise_grouped(lum, 15.0, ranks=(None, 2), periodic=False)
    both, st = denoise_grouped_channels(np.stack([lum, lum], -1), 15.0, ranks=(None, 2),
                                        periodic=False)
    assert len(st) == 2 and st[0]["params"] == st1["params"]
    # without the stage-1 mean step (channel 0's only) and with the luminance's
    # stage-2 constant, the two copies have the same pilot, every matching distance is
    # doubled, and so the groups are the one channel's: each copy is denoised exactly
    # like the channel alone
    off = dict(ranks=(None, 2), mean_kappa1=None, periodic=False)
    one_off, st_off = denoise_grouped(lum, 15.0, **off)
    both_off, _ = denoise_grouped_channels(np.stack([lum, lum], -1), 15.0, kappa2_chroma=0.7,
                                           **off)
    assert st_off["params"]["kappa2"] == 0.7
    for r in (None, 2):
        np.testing.assert_allclose(both_off[r][..., 0], one_off[r], rtol=0, atol=1e-9)
        np.testing.assert_allclose(both_off[r][..., 1], one_off[r], rtol=0, atol=1e-9)
    assert np.abs(both[None][..., 1] - one[None]).max() > 1e-3  # the step is channel 0's
    # kappa2_chroma is the later channels' kappa2 (default 1.5 kappa2), channel 0 keeps
    # its own: the copy is then denoised as the guide with that kappa2
    assert st[1]["params"]["kappa2_chroma"] == pytest.approx(1.05)
    both_k, _ = denoise_grouped_channels(np.stack([lum, lum], -1), 15.0, kappa2_chroma=1.3,
                                         **off)
    one_k, _ = denoise_grouped(lum, 15.0, kappa2=1.3, **off)
    for r in (None, 2):
        np.testing.assert_allclose(both_k[r][..., 0], one_off[r], rtol=0, atol=1e-9)
        np.testing.assert_allclose(both_k[r][..., 1], one_k[r], rtol=0, atol=1e-9)
    assert np.abs(one_k[None] - one_off[None]).max() > 1e-3
    # one channel is denoise_grouped itself
    single, _ = denoise_grouped_channels(lum[..., None], 15.0, ranks=(None, 2),
                                         periodic=False)
    np.testing.assert_array_equal(single[2][..., 0], one[2])
    # the matching sums the SSD of every channel: structure that only a later channel
    # has (a chrominance pattern on a flat luminance) is grouped on, and denoised far
    # better than the noise (sigma 15: 24.6 dB noisy)
    pat = 40.0 * np.sign(np.sin(np.mgrid[0:64, 0:64][1] / 3.0)) * np.sign(
        np.cos(np.mgrid[0:64, 0:64][0] / 5.0))
    clean = np.stack([np.full((64, 64), 120.0), pat, np.zeros((64, 64))], -1)
    noisy = clean + np.random.default_rng(3).normal(0, 15, clean.shape)
    got = denoise_grouped_channels(noisy, 15.0, periodic=False)[0][None]
    assert 10 * np.log10(255.0 ** 2 / np.mean((got[..., 1] - pat) ** 2)) >= 35.0
    # RGB: the opponent transform around the shared-group denoiser
    rgb = np.stack([lum, lum[::-1], lum[:, ::-1]], -1)
    out, st3 = denoise_grouped_opponent(rgb, 15.0)
    ref, _ = denoise_grouped_channels(rgb_to_opponent(rgb), 15.0)
    np.testing.assert_allclose(out[None], opponent_to_rgb(ref[None]), rtol=0, atol=1e-9)
    assert len(st3) == 3 and all(s["groups"] == st3[0]["groups"] for s in st3)
    with pytest.raises(ValueError, match="RGB"):
        denoise_grouped_opponent(lum, 15.0)


@pytest.mark.parametrize("rbf", [True, False])
def test_the_partial_eigensolver_gives_the_full_ones_eigenpairs_above_its_floor(rbf):
    # stage 1 computes only the components above its threshold (count, then Lanczos;
    # none where the centred Gram's trace is below it: the first 16, flat groups)
    from kpca_denoise.core.grouped.group_pca import fit_groups

    rng = np.random.default_rng(4)
    base = rng.normal(0.0, 30.0, (64, 1, 25))
    spread = np.r_[np.full(16, 0.5), np.full(48, 10.0)][:, None, None]
    P = base + spread * rng.normal(0.0, 1.0, (64, 40, 25))  # 64 groups of 40 patches
    gamma = 1.0 / (16 * 2 * 25 * 100.0)
    lam, V, rm = fit_groups(P, rbf, gamma)
    floor = float(np.median(lam[16:, 3]))
    assert (lam[:16].sum(axis=1) < floor).all() and (lam[16:].sum(axis=1) > floor).all()
    lam_p, V_p, rm_p = fit_groups(P, rbf, gamma, floor)
    np.testing.assert_array_equal(rm_p, rm)
    for r in range(64):
        k = int((lam[r] > floor).sum())
        assert (lam_p[r, k:] == 0).all() and (V_p[r, :, k:] == 0).all()
        # relative to the largest eigenvalue (the full solver is float32 LAPACK)
        np.testing.assert_allclose(lam_p[r, :k], lam[r, :k], atol=1e-5 * lam[r, 0])
        # the kept eigenvectors up to sign (their eigenvalues are distinct here)
        dots = np.abs(np.sum(V_p[r, :, :k] * V[r, :, :k], axis=0))
        np.testing.assert_allclose(dots, 1.0, atol=1e-4)
    assert 0 < (lam_p > 0).sum() < lam.size  # the floor did cut


def test_the_preimage_first_step_from_the_gram_equals_the_computed_one():
    # starting at a member z = x_i, exp(-gamma |z - x_j|^2) is the Gram entry K_ij:
    # the pre-image reads it instead of recomputing the distances
    from kpca_denoise.core.grouped.group_pca import fit_groups
    from kpca_denoise.core.grouped.shrinkage import shrink_own
    from kpca_denoise.core.preimage import preimage_groups as preimage

    rng = np.random.default_rng(5)
    P = rng.normal(0.0, 30.0, (32, 1, 25)) + rng.normal(0.0, 10.0, (32, 24, 25))
    gamma = 1.0 / (16 * 2 * 25 * 100.0)
    lam, V, rm, K = fit_groups(P, True, gamma, gram=True)
    x0 = P[:, :, None, :] - P[:, None, :, :]
    np.testing.assert_allclose(K, np.exp(-gamma * np.sum(x0 * x0, axis=-1)), rtol=1e-12)
    Gam, _, _ = shrink_own(lam, V, float(np.median(lam[:, 2])), np.array([-1, 2]))
    for iters in (1, 2, 6):
        with_k = preimage(Gam, P, True, gamma, iters, 1e-6, K)
        without = preimage(Gam, P, True, gamma, iters, 1e-6)
        np.testing.assert_allclose(with_k[0], without[0], rtol=0, atol=1e-9)
        np.testing.assert_array_equal(with_k[2], without[2])  # the same iterations
    # and the step moved the members (the test is not comparing two no-ops)
    assert np.abs(with_k[0][:, 0] - P).max() > 1.0


def test_high_noise_widens_the_stage1_matching_window_only_with_a_known_data_range():
    from kpca_denoise.core.grouped.geometry import HIGH_NOISE

    o = GroupedOptions()
    assert resolve_geometry(o).match_size1 == 7
    assert resolve_geometry(o, noise_fraction=HIGH_NOISE).match_size1 == 7
    assert resolve_geometry(o, noise_fraction=HIGH_NOISE * 1.01).match_size1 == 13
    assert resolve_geometry(o.replace(patch_size=7), noise_fraction=0.3).match_size1 == 15
    assert resolve_geometry(o.replace(match_size1=9), noise_fraction=0.3).match_size1 == 9
    assert resolve_geometry(o, noise_fraction=0.3).match_size == 11  # stage 2 unchanged
    rng = np.random.default_rng(5)
    y, x = np.mgrid[0:48, 0:48]
    clean = 120 + 60 * np.sin(x / 4.0) * np.cos(y / 5.0)
    noisy = clean + rng.normal(0, 50, clean.shape)
    # (about the noise rule: the image's coarse detail, low at this noise, given high)
    wide, st = denoise_grouped(noisy, 50.0, data_range=255.0, periodic=False, detail=5.0)
    assert (st["params"]["match_size1"], st["params"]["data_range"]) == (13, 255.0)
    assert denoise_grouped(noisy, 40.0, data_range=255.0, periodic=False,
                           detail=5.0)[1]["params"]["match_size1"] == 7
    # (this pattern is periodic: the texture settings are not what this test is about)
    narrow, st0 = denoise_grouped(noisy, 50.0, periodic=False, detail=5.0)
    assert (st0["params"]["match_size1"], st0["params"]["data_range"]) == (7, None)
    same, _ = denoise_grouped(noisy, 50.0, match_size1=13, periodic=False)
    np.testing.assert_array_equal(wide[None], same[None])
    assert np.abs(wide[None] - narrow[None]).max() > 1.0
    # the rule is on sigma relative to the range, so the result scales with the image
    scaled, _ = denoise_grouped(4.0 * noisy, 200.0, data_range=1020.0, periodic=False,
                                detail=5.0)
    np.testing.assert_allclose(scaled[None], 4.0 * wide[None], rtol=0, atol=1e-6 * 1020)
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="data_range"):
            denoise_grouped(noisy, 50.0, data_range=bad)


def test_the_pipeline_gives_the_core_the_working_range_of_integer_images():
    from kpca_denoise import DenoiseParams, denoise_set
    from kpca_denoise.core.vst import GeneralizedAnscombe
    from kpca_denoise.working import working_range

    assert working_range(np.uint8) == 255.0 and working_range(np.uint16) == 65535.0
    assert working_range(np.float32) is None
    vst = GeneralizedAnscombe(gain=2.0, sigma=3.0)
    ends = vst.forward(np.array([[[0.0], [255.0]]]))
    assert working_range(np.uint8, vst) == pytest.approx(float(ends[0, 1, 0] - ends[0, 0, 0]))
    rng = np.random.default_rng(6)
    img = np.clip(120 + rng.normal(0, 50, (40, 40)), 0, 255).astype(np.uint8)
    for a, sigma, m1 in ((img, 50.0, 13), (img, 30.0, 7), (img.astype(np.float32), 50.0, 7)):
        # (pure noise has no coarse detail: given high, as a photograph's)
        res = denoise_set([a], DenoiseParams(noise_sigma=sigma, grouped={"detail": 5.0})).images[0]
        assert res.stats["grouped"][0]["params"]["match_size1"] == m1


def test_colour_places_sigma_against_the_span_of_the_luminance():
    # the opponent luminance spans sqrt(3) x 255 for 8-bit RGB: sigma 50 on each
    # channel is not high noise for the matching (measured: -0.38 dB with the wide
    # window on colour at sigma 50)
    from kpca_denoise import DenoiseParams, denoise_set

    rng = np.random.default_rng(8)
    rgb = np.clip(120 + rng.normal(0, 60, (40, 40, 3)), 0, 255)
    # (pure noise has no coarse detail: given high, as a photograph's)
    st = denoise_grouped_opponent(rgb, 50.0, data_range=255.0, detail=5.0)[1]
    assert st[0]["params"]["match_size1"] == 7
    assert st[0]["params"]["data_range"] == pytest.approx(255.0 * np.sqrt(3))
    high = denoise_grouped_opponent(rgb, 80.0, data_range=255.0, detail=5.0)[1][0]["params"]
    assert high["match_size1"] == 13
    res = denoise_set([rgb.astype(np.uint8)], DenoiseParams(noise_sigma=50.0)).images[0]
    assert res.stats["grouped"][0]["params"]["data_range"] == pytest.approx(255.0 * np.sqrt(3))


def test_stage2_wiener_weights_match_numpy():
    # linear kernel: Gam_ij = sum_k w_k beta_ik alpha_jk + (1 - sum_j ...) / n with
    # beta_ik = (x_i - m) . u_k (u_k the pilot's unit principal directions, through
    # alpha_k = v_k / sqrt(lambda_k)), w_k = s / (s + tau2) and s = lambda_k / n
    from kpca_denoise.core.grouped.group_pca import fit_groups, noise_floors
    from kpca_denoise.core.grouped.shrinkage import STAGE2_CUT, shrink_pilot

    rng = np.random.default_rng(9)
    n, d = 12, 9
    P = rng.normal(0, 20, (3, 1, d)) + rng.normal(0, 5, (3, n, d))
    X = P + rng.normal(0, 5, P.shape)
    fl = noise_floors(5.0, d, n, 32.0, False, 3.0, 0.7)
    lam, V, rm = fit_groups(P, False, fl.gamma)
    Gam = shrink_pilot(lam, V, rm, P, X, fl, False, np.asarray([-1], np.int64))[0][:, 0]
    for r in range(3):
        keep = lam[r] > STAGE2_CUT * n * fl.tau2
        lk, Vk = lam[r][keep], V[r][:, keep]
        m = P[r].mean(axis=0)
        A = Vk / np.sqrt(lk)
        beta = ((X[r] - m) @ (P[r] - m).T) @ A
        s = np.broadcast_to(lk / n, beta.shape)
        expect = (s / (s + fl.tau2) * beta) @ A.T
        expect += (1.0 - expect.sum(axis=1, keepdims=True)) / n
        np.testing.assert_allclose(Gam[r], expect, rtol=1e-5, atol=1e-8)


def test_the_mean_step_is_a_wiener_step_on_the_members_patch_means():
    rng = np.random.default_rng(3)
    X = rng.normal(100.0, 20.0, (6, 10, 25))
    Est = rng.normal(100.0, 5.0, (6, 2, 10, 25))
    r = X.mean(axis=2)[:, None, :] - Est.mean(axis=3)
    v = np.mean(r * r, axis=2, keepdims=True)
    nv = float(np.median(v))  # some groups above the noise, some below
    out = Est.copy()
    correct_means(out, X, nv)
    w = np.maximum(v - nv, 0.0) / v
    assert np.allclose(out - Est, (w * r)[..., None], atol=1e-10)
    # only the means move: the zero-mean parts are untouched
    assert np.allclose(out - out.mean(axis=3, keepdims=True),
                       Est - Est.mean(axis=3, keepdims=True), atol=1e-10)
    # a group whose spread is at or below the noise is left alone, and with no noise
    # every estimate takes its noisy patch's mean
    low = v[..., 0] <= nv
    assert low.any() and (~low).any()
    assert np.allclose(out[low], Est[low], atol=1e-12)
    exact = Est.copy()
    correct_means(exact, X, 0.0)
    assert np.allclose(exact.mean(axis=3), np.broadcast_to(X.mean(axis=2)[:, None], (6, 2, 10)))


def test_the_mean_step_keeps_small_brightness_differences():
    # a mosaic of flat 8x8 tiles whose brightness differs by at most 10 grey levels at
    # sigma 25: below what a data-driven component can tell from the noise in a group
    # of 40, so without the step the tiles blur into each other (measured +1.1 dB)
    shades = np.random.default_rng(0).uniform(-10.0, 10.0, (16, 16))
    y, x = np.mgrid[0:128, 0:128]
    clean = 128.0 + shades[y // 8, x // 8]
    noisy = clean + np.random.default_rng(1).normal(0.0, 25.0, clean.shape)

    def psnr(mk):
        out, st = denoise_grouped(noisy, 25.0, mean_kappa1=mk)
        assert st["params"]["mean_kappa1"] == mk
        return 10 * np.log10(255.0 ** 2 / np.mean((out[None] - clean) ** 2))

    assert psnr(0.7) > psnr(None) + 0.5


@pytest.mark.parametrize("bad", [-0.1, float("nan"), float("inf"), "0.7", True])
def test_a_bad_mean_kappa1_is_refused(bad):
    with pytest.raises(ValueError, match="mean_kappa1"):
        denoise_grouped(np.zeros((32, 32)), 1.0, mean_kappa1=bad)


@pytest.mark.parametrize("name", ["kappa2", "kappa2_chroma"])
@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf"), "1.0", True])
def test_a_bad_stage2_constant_is_refused(name, bad):
    with pytest.raises(ValueError, match=f"{name} must be a finite number > 0 and <= 1000 or None"):
        denoise_grouped(np.zeros((32, 32)), 1.0, **{name: bad})


# a value each option refuses, and the words of its message (unchecked, gamma_scale2=0
# and kappa1=0 divided by zero, a search radius of 1e9 ran out of memory and
# window_beta=1000 crashed the interpreter)
BAD_OPTIONS = {
    "patch_size": (0, "an integer from 1 to 64 or None"),
    "group_size": (1.5, "an integer from 2 to 512"),
    "group_size1": (1, "an integer from 2 to 512 or None"),
    "search_radius": (10**9, "an integer from 1 to 256 or None"),
    "search_radius1": ("4", "an integer from 1 to 256 or None"),
    "match_size1": (-3, "an integer from 1 to 99 or None"),
    "match_size": (0, "an integer from 1 to 99 or None"),
    "stride": (0, "an integer from 1 to 32 or None"),
    "stride1": (1.5, "an integer from 1 to 32 or None"),
    "max_iter": (0, "an integer from 1 to 10000"),
    "data_range": (0.0, "a finite number > 0 or None"),
    "gamma_scale": (-1.0, "a finite number > 0.001 and <= 1e+06"),
    "gamma_scale2": (0, "a finite number > 0.001 and <= 1e+06"),
    "kappa1": (0, "a finite number > 0 and <= 1000 or None"),
    "kappa2": (float("inf"), "a finite number > 0 and <= 1000 or None"),
    "kappa2_chroma": ("1.5", "a finite number > 0 and <= 1000 or None"),
    "tol": (-1, "a finite number > 0 and <= 1"),
    "window_beta": (1000, "a finite number >= 0 and <= 50"),
    "mean_kappa1": (-0.1, "a finite number >= 0 and <= 1000 or None"),
    "detail": (-1.0, "a finite number >= 0 or None"),
    "contrast": (float("-inf"), "a finite number >= 0 or None"),
    "lags": ([[0, 30]], "two (dy, dx) pairs of whole numbers, such as [[0, 30], [14, 15]], "
                        "or [] or None"),
    "two_stage": ("no", "True or False"), "regroup": (1, "True or False"), "periodic": ("yes", "True, False or None"),
    "kernel": ("poly", "one of 'rbf', 'linear'"),
}


def test_every_option_is_checked_before_any_work():
    from dataclasses import fields

    assert set(BAD_OPTIONS) == {f.name for f in fields(GroupedOptions)}  # a rule per knob
    events = []
    x = np.random.default_rng(0).normal(0.0, 1.0, (32, 32))
    for name, (bad, want) in BAD_OPTIONS.items():
        msg = f"{name} must be {want}, got {bad!r}"
        with pytest.raises(ValueError) as exc:
            GroupedOptions(**{name: bad})
        assert str(exc.value) == msg
        with pytest.raises(ValueError) as exc:
            denoise_grouped(x, 1.0, progress=events.append, **{name: bad})
        assert str(exc.value) == msg
    assert events == []  # refused before the first stage began
    # None where allowed, integral floats and numpy booleans pass
    GroupedOptions(kappa2=None, periodic=None, group_size=24.0, two_stage=np.True_, lags=[])
    with pytest.raises(ValueError, match="unknown grouped option 'kapa1'; known are: contrast"):
        GroupedOptions.from_dict({"kapa1": 4.0})
    with pytest.raises(ValueError, match="unknown grouped preset 'fastest'"):
        denoise_grouped(x, 1.0, options="fastest")


def test_presets_and_options_objects_give_what_their_knobs_give():
    x = np.random.default_rng(1).normal(100.0, 10.0, (40, 40))
    one = denoise_grouped(x, 10.0, options="single-stage")[0][None]
    np.testing.assert_array_equal(one, denoise_grouped(x, 10.0, two_stage=False)[0][None])
    two = denoise_grouped(x, 10.0, options=GroupedOptions(kappa1=4.0))[0][None]
    np.testing.assert_array_equal(two, denoise_grouped(x, 10.0, kappa1=4.0)[0][None])
    np.testing.assert_array_equal(
        two, denoise_grouped(x, 10.0, options={"kappa1": 4.0})[0][None])
    assert np.abs(one - two).max() > 0.1
    assert GroupedOptions(kappa1=4.0).changed() == {"kappa1": 4.0}


@pytest.mark.parametrize("sigma", [1e-300, 5e-324])
def test_a_sigma_whose_square_underflows_is_refused(sigma):
    x = np.random.default_rng(0).random((24, 24))
    with pytest.raises(ValueError, match="its square underflows float64"):
        denoise_grouped(x, sigma)


def test_a_guide_too_large_for_the_noise_units_keeps_its_values():
    g = np.array([[1e300, 0.0], [2.0, 3.0]])
    assert quantise_guide(g, 1e-10) is g
    assert not exact_sums(g, 5)
    np.testing.assert_array_equal(quantise_guide(g[1:] + 0.4, 1024.0), g[1:])  # step 1


def test_match_takes_any_guide_dtype_and_refuses_an_unfit_scratch():
    # an 8-bit guide is matched in float64 (no wrap-around in its differences), and a
    # float32 or too small scratch array is replaced rather than rounding distances
    img = np.random.default_rng(3).integers(0, 256, (30, 34)).astype(np.uint8)
    ry, rx = np.array([0, 4, 8, 8], np.int64), np.array([0, 4, 8, 12], np.int64)
    want = match(_pad_for_matching(img.astype(float), 5, 13), ry, rx, 5, 13, 6, 10)
    for work in (None, np.empty((5, 5), np.float32), np.empty((5, 5))):
        got = match(_pad_for_matching(img, 5, 13), ry, rx, 5, 13, 6, 10, work=work)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    for r, ref in enumerate(_reference_match(img.astype(float), ry, rx, 5, 13, 6, 10)):
        assert set(zip(want[0][r].tolist(), want[1][r].tolist())) == ref
    # 1x1 patches over two channels: the third pixel is at squared distance 2^26 from
    # the first, the second at 2^26 + 1, which float32 cannot tell apart (the earlier
    # would win the tie)
    g = np.array([[[0, 8192, 8192, 30000, 30000]], [[0, 1, 0, 0, 0]]], float)
    for work in (None, np.empty((81, 1), np.float32)):
        gy, gx = match(g, np.array([0], np.int64), np.array([0], np.int64), 1, 1, 4, 2,
                       work=work)
        assert gx.tolist() == [[0, 2]]
