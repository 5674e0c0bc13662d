"""A stack in tiles: every tile carries all the pages (streamed) and the halo the stack
path needs, so the tiled result equals the whole stack's (docs/stacks.md#memory)."""

import numpy as np

from kpca_denoise import DenoiseParams
from kpca_denoise.core.grouped import GroupedOptions
from kpca_denoise.core.grouped.motion import page_shifts
from kpca_denoise.core.grouped.sequence import StackReach, stack_bytes
from kpca_denoise.stack_tiling import denoise_stack_tiled, plan_stack, stack_geometry

#: a small search and reach, so that small pages have tiles with a halo on every side
SMALL = GroupedOptions(search_radius=3, search_radius1=3, match_size1=5, match_size=5)
REACH = StackReach(window=1, radius=1, depth=3)


def _pan(pages, size, seed=0):
    from scipy import ndimage as ndi

    rng = np.random.default_rng(seed)
    a = ndi.gaussian_filter(rng.normal(size=(size + 40, size + 40)), 2.0)
    a = 30 + 190 * (a - a.min()) / np.ptp(a)
    clean = np.stack([a[10:10 + size, 5 + k:5 + k + size] for k in range(pages)])
    return clean + np.random.default_rng(seed + 1).normal(0, 20, clean.shape)


def test_tiles_carrying_every_page_equal_the_whole_stack():
    noisy = _pan(3, 144)
    pages = list(noisy)
    shifts = page_shifts(pages)
    # the two stages on grids of their own (2 and 3 px: the tiles' cores aligned to 12)
    params = DenoiseParams(noise_sigma=20.0, grouped=SMALL.replace(stride1=2, stride=3),
                           patch_size=4, tile_size=48, ranks=(None, 3))
    tiles = plan_stack(noisy.shape, params, shifts, REACH)
    inner = [t for t in tiles if t.ry0 > 0 and t.rx0 > 0 and t.ry1 < 144 and t.rx1 < 144]
    assert len(tiles) == 9 and inner
    # each page's references are a checkerboard of each stage's grid
    assert stack_geometry(params, shifts, REACH)[1] == 12
    assert all(t.ry0 % 12 == 0 and t.rx0 % 12 == 0 for t in tiles)
    kw = dict(linked=np.ones(2, bool), shifts=shifts, reach=REACH)
    whole, once = denoise_stack_tiled(pages, 20.0, params.replace(tile_size=4096), **kw)
    tiled, stats = denoise_stack_tiled(pages, 20.0, params, **kw)
    assert stats[0]["tiles"] == 9
    # the tiles' regions hold 4 times the pages' pixels; each computes only the groups
    # its core depends on
    assert sum((t.ry1 - t.ry0) * (t.rx1 - t.rx0) for t in tiles) == 4 * 144 * 144
    assert stats[0]["groups"] < 2 * once[0]["groups"]
    for rk in (None, 3):
        np.testing.assert_allclose(np.stack(tiled[rk]), np.stack(whole[rk]), rtol=0, atol=1e-9)
    used = np.asarray(stats[0]["sequence"]["neighbours_used"])
    assert used.shape == (3, 3) and np.allclose(used.sum(axis=1), 1.0) and used[1, 0] > 0.05


def test_a_colour_uint8_stack_in_tiles_with_a_cut():
    rgb = np.clip(np.stack([_pan(4, 72, seed) for seed in (3, 5, 7)], axis=-1), 0, 255)
    pages = list(rgb.astype(np.uint8))
    linked = np.array([True, False, True])
    params = DenoiseParams(noise_sigma=20.0, grouped=SMALL.replace(two_stage=False),
                           patch_size=4, tile_size=24)
    kw = dict(linked=linked, shifts=page_shifts([p[..., 0] for p in pages]), reach=REACH)
    whole, _ = denoise_stack_tiled(pages, 20.0, params.replace(tile_size=4096), **kw)
    tiled, _ = denoise_stack_tiled(pages, 20.0, params, **kw)
    assert tiled[None][0].dtype == np.uint8 and tiled[None][0].shape == (72, 72, 3)
    # rounding to 8 bits: a float difference of 1e-9 may flip a value by one step
    diff = np.abs(np.stack(tiled[None]).astype(int) - np.stack(whole[None]))
    assert diff.max() <= 1 and (diff > 0).mean() < 1e-4


def test_the_working_set_does_not_grow_with_pages():
    # the stack is streamed: two passes hold 4 e + 1 noisy pages and 2 e + 1 of the
    # pilot (float32), each stage's guides of the 2 window + 1 pages searched (3 slices
    # each: the 3-D matching; float32) and 2 e + 1 pages of sums and weights (float64;
    # e = window + depth // 2 = 9), whatever the number of pages
    assert stack_bytes(1) == 4 * (37 + 19 + 2 * 3 * 17) + 8 * 19 * (2 + 2)
    assert stack_bytes(2, two_stage=False) == 4 * (19 + 3 * 17) + 8 * 19 * 4
    assert stack_bytes(1, window=1, depth=1) == 4 * (5 + 3 + 2 * 3) + 8 * 3 * 4
    # 2-D matching of 3-D patches: stage 2 puts its guides a page ahead
    assert stack_bytes(1, match_depth=1) == 4 * (37 + 19 + 17 + 18) + 8 * 19 * 4


def test_the_sweep_reports_its_pages_in_order():
    # both passes run interleaved: the 'page' events count their reference pages as the
    # first pass's and then the second's, so the share done only grows
    from kpca_denoise.core.grouped.sequence import denoise_grouped_stack

    events = []
    denoise_grouped_stack(_pan(5, 40)[..., None], 20.0, options=SMALL, window=1,
                          progress=lambda ev: events.append((ev.message, ev.done, ev.total))
                          if ev.stage == "page" else None)
    assert events == [(f"stage {1 + i // 5}", 1 + i % 5, 5) for i in range(10)]


def test_pages_that_fit_the_budget_make_one_tile(monkeypatch):
    """Pages whose working set fits ``STACK_TILE_BYTES`` are one tile: cut, the tiles'
    halos (166 px for a 1 px pan) covered the page, and a 256x256 colour stack
    computed most of its groups four times.  Larger pages are cut, and a lazy stack's
    (whose tasks also hold their region of every page) within its smaller budget."""
    from kpca_denoise.stack_tiling import LAZY_STACK_TILE_BYTES, STACK_TILE_BYTES

    from kpca_denoise.io import lazy_tiff

    monkeypatch.setattr(lazy_tiff, "memory_budget", lambda: 16 << 30)
    params = DenoiseParams(noise_sigma=25)
    pan = np.array([[0, 1]] * 15)
    per_pixel = stack_bytes(1)
    for shape in [(16, 256, 256, 3), (16, 512, 512), (40, 128, 128, 3), (16, 1024, 1024)]:
        c = shape[3] if len(shape) == 4 else 1
        assert shape[1] * shape[2] * c * per_pixel <= STACK_TILE_BYTES
        tiles = plan_stack(shape, params, pan[:shape[0] - 1] if shape[0] <= 16 else
                           np.array([[0, 1]] * (shape[0] - 1)))
        assert len(tiles) == 1 and tiles[0].region == (slice(0, shape[1]), slice(0, shape[2]))
    for shape in [(16, 2048, 2048), (16, 1024, 1024, 3)]:
        assert shape[1] * shape[2] * (shape[3:] or (1,))[0] * per_pixel > STACK_TILE_BYTES
        assert len(plan_stack(shape, params, pan)) > 1
    # read lazily, the same pages are cut within the smaller budget
    assert 1024 * 1024 * per_pixel > LAZY_STACK_TILE_BYTES
    assert len(plan_stack((16, 1024, 1024), params, pan, lazy=True)) > 1
    big = (16, 2048, 2048)
    assert len(plan_stack(big, params, pan, lazy=True)) > len(plan_stack(big, params, pan))
    # with little memory left, a stack held in memory gets the lazy stack's tiles
    monkeypatch.setattr(lazy_tiff, "memory_budget", lambda: 600 << 20)
    assert plan_stack(big, params, pan) == plan_stack(big, params, pan, lazy=True)
    assert len(plan_stack((16, 1024, 1024), params, pan)) > 1
