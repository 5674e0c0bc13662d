"""Tiles bound memory without changing the result; the noise estimate reads a
bounded sample."""

import tracemalloc

import numpy as np
import pytest

from kpca_denoise import DenoiseParams, denoise_set
from kpca_denoise.core.noise import estimate_sigma_image
from kpca_denoise.core.patches import patch_positions
from kpca_denoise.core.tiles import tile_grid
from kpca_denoise.pipeline import add_noise, evaluate, remaining_noise
from kpca_denoise.tiling import plan
from helpers import fake_tiles


@pytest.mark.parametrize("shape,tile,halo,align", [((300, 200), 64, 23, 5), ((64, 700), 100, 8, 4),
                                                    ((50, 50), 1024, 70, 5)])
def test_tile_cores_partition_the_image_and_regions_are_aligned(shape, tile, halo, align):
    tiles = tile_grid(shape, tile, halo, align)
    count = np.zeros(shape, int)
    h = -(-halo // align) * align  # the halo is rounded up to the alignment
    for t in tiles:
        count[t.core] += 1
        assert t.ry0 % align == 0 and t.rx0 % align == 0  # patch grids stay aligned
        assert (t.ry0, t.ry1) == (max(0, t.y0 - h), min(shape[0], t.y1 + h))
        assert (t.rx0, t.rx1) == (max(0, t.x0 - h), min(shape[1], t.x1 + h))
        region = np.zeros(shape, bool)
        region[t.region] = True
        assert region[t.core].all()
    assert (count == 1).all()
    if max(shape) <= tile:
        assert len(tiles) == 1 and tiles[0].region == (slice(0, shape[0]), slice(0, shape[1]))


def test_default_tiles_bound_a_12_megapixel_photo():
    tiles = plan((3000, 4000, 3), DenoiseParams())
    assert len(tiles) == 12
    # 1024 px cores and a 162 px halo (both stages search 32 px away, with matching
    # windows of up to 13 px in stage 1 at high noise and 11 px in stage 2):
    # 2 (32 + 5) + 8 + 2 (32 + 5) + 6, rounded up to 200, a multiple of 40 (twice the
    # pilot's stride of 4 and stage 2's of 5)
    assert max((t.ry1 - t.ry0) * (t.rx1 - t.rx0) for t in tiles) <= (1024 + 2 * 200) ** 2
    assert len(plan((512, 512), DenoiseParams())) == 1  # small images: one tile, as before


def _scene(shape, seed):
    y, x = np.mgrid[0:shape[0], 0:shape[1]]
    img = 120 + 60 * np.sin(x / 6.0) * np.cos(y / 9.0) + 50 * ((x // 23 + y // 17) % 2)
    return np.clip(add_noise(img, 20, seed=seed), 0, 255)


@pytest.mark.parametrize("extra,sigma,shape,ntiles", [
    ({"search_radius": 4, "periodic": False}, 20.0, (192, 160), 6),
    ({"search_radius": 4, "periodic": False}, 50.0, (192, 160), 6),
    ({"search_radius": 4, "periodic": False, "match_size1": 7, "match_size": 9}, 20.0,
     (192, 160), 6),
    ({"search_radius": 4, "periodic": True}, 50.0, (384, 160), 12)])
def test_tiled_grouped_equals_whole_image(extra, sigma, shape, ntiles):
    # a small search window keeps the halo (both stages search R = 4 px away:
    # 2 (4 + p) + (m1 - p) + 2 (4 + p) + (m2 - p) = 50 with the default windows, planned
    # for the widest stage-1 window, m1 = 13 at high noise, and stage 2's m2 = 11; 42
    # with the windows of 7 / 9) below the image, so interior tiles are really cut:
    # 3 x 2 tiles of a 192 x 160 image.  Sigma 50 on 8-bit data is high noise (13 px
    # windows used).  A regular texture (the scene is one; the first three cases are
    # about the photograph windows) gets a 35 px stage-1 window at sigma 50 and 7 px in
    # stage 2: a halo of 2 (4 + 5) + 30 + 2 (4 + 5) + 2 = 68, so its image is taller.
    clean = _scene(shape, 0)
    noisy = np.clip(add_noise(clean, sigma, seed=1), 0, 255).astype(np.uint8)
    base = DenoiseParams(noise_sigma=sigma, grouped=extra)
    whole = denoise_set([noisy], base).images[0].outputs[None]
    res = denoise_set([noisy], base.replace(tile_size=64)).images[0]
    assert res.stats["grouped"][0]["tiles"] == ntiles
    m1 = (35 if sigma > 45 else 7) if extra["periodic"] else (13 if sigma > 45 else 7)
    assert res.stats["grouped"][0]["params"]["match_size1"] == extra.get("match_size1", m1)
    assert res.stats["grouped"][0]["params"]["periodic"] is extra["periodic"]
    tiled = res.outputs[None]
    assert tiled.dtype == np.uint8
    assert abs(evaluate(clean, tiled, np.uint8)["psnr"]
               - evaluate(clean, whole, np.uint8)["psnr"]) <= 0.02
    assert np.abs(tiled.astype(int) - whole.astype(int)).max() <= 1


def test_tiled_global_equals_whole_image_colour_with_alpha_uint16():
    clean = np.stack([_scene((150, 170), 2), _scene((150, 170), 3), _scene((150, 170), 4)], -1)
    noisy = (np.clip(add_noise(clean, 15, seed=5), 0, 255) * 257).astype(np.uint16)
    rgba = np.dstack([noisy, np.full(noisy.shape[:2], 65535, np.uint16)])
    base = DenoiseParams(method="global", ranks=(4, 8), n_train=300, noise_sigma=15.0 * 257)
    whole = denoise_set([rgba], base).images[0].outputs
    tiled = denoise_set([rgba], base.replace(tile_size=64)).images[0].outputs
    assert len(plan(rgba.shape, base.replace(tile_size=64))) == 6
    for r in (4, 8):
        assert tiled[r].shape == rgba.shape and tiled[r].dtype == np.uint16
        assert (tiled[r][..., 3] == 65535).all()
        diff = np.abs(tiled[r].astype(np.int64) - whole[r].astype(np.int64))
        assert diff.max() <= 1


def test_noise_estimate_of_a_large_image_reads_a_bounded_sample():
    rng = np.random.default_rng(7)
    y, x = np.mgrid[0:2048, 0:2048]
    img = 100 + 50 * np.sin(x / 40.0) + 30 * np.cos(y / 25.0) + rng.normal(0, 12, (2048, 2048))
    tracemalloc.start()
    est = estimate_sigma_image(img)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # every 7x7 patch at stride 1 in float64 would be 1.6 GB; the sample is ~1 Mpx
    assert peak < 200e6, peak / 1e6
    assert abs(est / 12 - 1) < 0.03


def test_remaining_noise_of_a_colour_image_is_its_luminance_noise():
    rng = np.random.default_rng(3)
    flat = np.full((400, 300, 3), 128.0) + rng.normal(0, 10, (400, 300, 3))
    assert abs(remaining_noise(flat) / 10 - 1) < 0.05


def test_whole_image_work_outside_the_tiles_is_bounded(monkeypatch):
    """Reading a big colour image's noise level and assembling its output cost
    a bounded amount beside the output itself: no float64 luminance plane, no
    rounding temporaries of the whole image.  (The tiles are faked: their own
    working set is bounded by the tile size.)"""
    fake_tiles(monkeypatch)
    img = np.clip(120 + np.random.default_rng(0).normal(0, 10, (3000, 3000, 3)), 0, 255)
    img = img.astype(np.uint8)
    tracemalloc.start()
    try:
        res = denoise_set([img], DenoiseParams()).images[0]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert abs(res.noise_sigma - 10) < 0.5
    np.testing.assert_array_equal(res.outputs[None], img)
    # the output (27 MB) plus the estimator's bounded samples (two noise fits at once,
    # about 50 MB each, nlf.FITS_AT_ONCE); a float64 plane would be 72 MB more
    assert peak - img.nbytes < 140e6, (f"peak {peak / 1e6:.0f} MB beside a "
                                       f"{img.nbytes / 1e6:.0f} MB output")


def test_tiles_share_the_whole_images_smoothness():
    # a smooth scene gets a wider stage-1 window from the coarse detail of the whole
    # image (core.grouped.coarse_detail), in every tile as in one piece
    from scipy.ndimage import gaussian_filter

    clean = gaussian_filter(_scene((192, 160), 0), 8.0)
    noisy = np.clip(add_noise(clean, 25.0, seed=1), 0, 255).astype(np.uint8)
    base = DenoiseParams(noise_sigma=25.0, grouped={"search_radius": 4, "periodic": False})
    whole = denoise_set([noisy], base).images[0]
    res = denoise_set([noisy], base.replace(tile_size=64)).images[0]
    assert res.stats["grouped"][0]["tiles"] == 6
    want, got = whole.stats["grouped"][0]["params"], res.stats["grouped"][0]["params"]
    assert want["detail"] < 0.6 and want["match_size1"] in (9, 11)
    assert got["detail"] == want["detail"] and got["match_size1"] == want["match_size1"]
    assert np.abs(res.outputs[None].astype(int) - whole.outputs[None].astype(int)).max() <= 1


@pytest.mark.parametrize("colour", [False, True], ids=["grey", "colour"])
@pytest.mark.parametrize("extra", [{}, {"regroup": False}, {"two_stage": False}],
                         ids=["two-stage", "groups-kept", "one-stage"])
def test_a_core_computes_only_what_it_depends_on_and_is_exact_there(colour, extra):
    """The driver's ``core``: the core's pixels are those of the whole call (float64, to
    the last bit), the rest the input; fewer groups are computed.  A core inside, one
    on the image's edge and one in its corner (search radius 5 keeps them apart from
    the far edges on a 112 x 128 image)."""
    from kpca_denoise.core.grouped import denoise_grouped_channels

    planes = [_scene((112, 128), s) for s in range(3 if colour else 1)]
    noisy = np.stack([np.clip(add_noise(p, 20, seed=9), 0, 255) for p in planes], -1)
    opts = {"search_radius": 5, "periodic": False, **extra}
    whole, st_whole = denoise_grouped_channels(noisy, 20.0, ranks=(2, None), options=opts)
    for core in [(48, 72, 56, 80), (0, 20, 40, 70), (96, 112, 100, 128)]:
        part, st = denoise_grouped_channels(noisy, 20.0, ranks=(2, None), options=opts,
                                            core=core)
        y0, y1, x0, x1 = core
        inside = np.zeros(noisy.shape[:2], bool)
        inside[y0:y1, x0:x1] = True
        for r in (2, None):
            np.testing.assert_array_equal(part[r][inside], whole[r][inside])
            np.testing.assert_array_equal(part[r][~inside], noisy[~inside])
        assert st[0]["groups"] < 0.6 * st_whole[0]["groups"]


def test_a_core_over_flat_areas_is_exact_with_the_pilots_sparser_references():
    """The pilot takes the references of flat areas on every other grid row and column
    (``driver.coarse_flat``, image coordinates) and fills what no group wrote from the
    dropped references' own patches: every pixel is estimated, and a core's pixels,
    its corners off the doubled grid, are the whole call's."""
    from kpca_denoise.core.grouped import denoise_grouped
    from kpca_denoise.core.grouped import driver

    clean = _scene((112, 128), 0)
    clean[:, :72] = 128.0
    noisy = add_noise(clean, 20, seed=3)
    opts = {"search_radius": 5, "periodic": False}
    whole, st = denoise_grouped(noisy, 20.0, options=opts)
    assert np.isfinite(whole[None]).all()
    full = 2 * len(patch_positions(112, 5, 4)) * len(patch_positions(128, 5, 4))
    assert st["groups"] < 0.95 * full  # the pilot dropped references
    for core in [(44, 70, 18, 58), (0, 30, 0, 30), (87, 112, 60, 128)]:
        part, _ = denoise_grouped(noisy, 20.0, options=opts, core=core)
        y0, y1, x0, x1 = core
        np.testing.assert_array_equal(part[None][y0:y1, x0:x1], whole[None][y0:y1, x0:x1])
    assert driver.FLAT_PILOT is not None


def test_the_pilots_holes_take_a_kept_neighbours_candidates_and_tiles_stay_exact(monkeypatch):
    """Told more noise than a flat area holds (a level estimated high), the pilot's
    kept groups leave holes; each dropped reference that fills one is matched among a
    kept neighbour's candidates (``driver.HOLES_PREDICTED``), not over the whole window.
    A core's pixels stay the whole call's, and the result is within 0.05 dB of a full
    search's."""
    from kpca_denoise.core.grouped import denoise_grouped
    from kpca_denoise.core.grouped import driver

    clean = np.tile(60.0 + np.arange(128.0), (128, 1))  # a ramp below a flat half
    clean[:64] = 128.0
    noisy = add_noise(clean, 10, seed=3)
    holes, searched = [], []
    fill, grouped = driver.fill_holes, driver.match_from_groups

    def spy_fill(imgs, guides, guide_m, dropped, ranks, run, ps, stats, nums, dens, *a, **k):
        holes.append(int((dens[0][0] == 0).sum()))
        searched.clear()
        fill(imgs, guides, guide_m, dropped, ranks, run, ps, stats, nums, dens, *a, **k)
        holes.append(len(searched))

    def spy_grouped(groups, guide_m, inter, ry, *a, **k):
        searched.append(len(ry))
        return grouped(groups, guide_m, inter, ry, *a, **k)

    monkeypatch.setattr(driver, "fill_holes", spy_fill)
    monkeypatch.setattr(driver, "match_from_groups", spy_grouped)
    opts = {"periodic": False}
    whole, _ = denoise_grouped(noisy, 20.0, options=opts)
    assert holes[0] > 50 and holes[1] == 1  # holes, filled through one predicted search
    for core in [(40, 80, 16, 72), (88, 128, 80, 128)]:
        part, _ = denoise_grouped(noisy, 20.0, options=opts, core=core)
        y0, y1, x0, x1 = core
        np.testing.assert_array_equal(part[None][y0:y1, x0:x1], whole[None][y0:y1, x0:x1])
    monkeypatch.setattr(driver, "HOLES_PREDICTED", False)
    full, _ = denoise_grouped(noisy, 20.0, options=opts)
    assert not np.array_equal(full[None], whole[None])
    mse = [np.mean((x[None] - clean) ** 2) for x in (whole, full)]
    assert 10 * np.log10(mse[1] / mse[0]) > -0.05


def test_a_core_outside_the_image_is_refused_in_one_line():
    from kpca_denoise.core.grouped import denoise_grouped

    img = _scene((40, 40), 0)
    with pytest.raises(ValueError, match=r"^core \(0, 50, 0, 10\) is not a non-empty rectangle "
                                         r"inside the image 40x40$"):
        denoise_grouped(img, 20.0, core=(0, 50, 0, 10))
    with pytest.raises(ValueError, match=r"^core must be \(y0, y1, x0, x1\) in pixels, got 5$"):
        denoise_grouped(img, 20.0, core=5)


def test_the_spread_of_the_group_spectra_pools_every_tile():
    """The quantiles over the groups' spectra of an image run in tiles are those of every
    tile's groups (the sampled spectra pooled), not the first tile's: here a flat first
    tile, whose own spread is far below the image's."""
    from kpca_denoise.tiling import denoise_tile

    clean = _scene((192, 160), 0)
    clean[:96, :80] = 128
    noisy = np.clip(add_noise(clean, 20, seed=1), 0, 255).astype(np.uint8)
    base = DenoiseParams(noise_sigma=20.0, ranks=(4, None),
                         grouped={"search_radius": 4, "periodic": False})
    whole = denoise_set([noisy], base).images[0].stats["grouped"][0]
    params = base.replace(tile_size=64)
    res = denoise_set([noisy], params).images[0].stats["grouped"][0]
    t0 = plan(noisy.shape, params)[0]
    first = denoise_tile(noisy[t0.region], t0, 20.0, params)[1][0]
    assert res["tiles"] == 6 and not any(k.endswith("_pool") for k in res)
    for key in ("rank_spectrum_quantiles", "spectrum_quantiles"):
        want, got = whole[key][:, :4], res[key][:, :4]
        assert got.shape == want.shape
        np.testing.assert_allclose(got[1:], want[1:], rtol=0.25)  # median and 90 %
        assert (first[key][1, :4] < 0.6 * want[1]).all()  # the first tile alone: far below
    np.testing.assert_allclose(res["rank_spectrum"][:4], whole["rank_spectrum"][:4], rtol=0.1)


def test_pooled_quantiles_weigh_each_pool_by_the_groups_it_stands_for():
    from kpca_denoise.core.grouped.stats import pooled_quantiles

    ones, twos = np.ones((10, 3)), np.full((10, 3), 2.0)
    q = pooled_quantiles([(ones, 1.0), (twos, 9.0)])  # 10 groups of ones, 90 of twos
    np.testing.assert_array_equal(q, [[1.0] * 3, [2.0] * 3, [2.0] * 3])
    q = pooled_quantiles([(ones, 8.0), (twos, 2.0)])  # 80 of ones, 20 of twos
    np.testing.assert_array_equal(q, [[1.0] * 3, [1.0] * 3, [2.0] * 3])
    assert pooled_quantiles([(np.zeros((0, 0)), 0.0)]).shape == (3, 0)


def test_the_whole_images_calibration_stops_when_cancelled():
    """resolve_periodic checks the token before the calibration and passes it to the
    trial denoising, which checks it between chunks."""
    from kpca_denoise.core.grouped import resolve_options
    from kpca_denoise.core.grouped.driver import trial_denoiser
    from kpca_denoise.core.progress import Cancelled
    from kpca_denoise.tiling import resolve_periodic

    img = _scene((96, 96), 0)
    with pytest.raises(Cancelled):
        resolve_periodic(img, 20.0, DenoiseParams(noise_sigma=20.0), cancel=lambda: True)
    with pytest.raises(Cancelled):
        trial_denoiser(lambda: True)([img], 20.0, resolve_options(periodic=False))
    assert resolve_periodic(img, 20.0, DenoiseParams(noise_sigma=20.0),
                            cancel=lambda: False).grouped.periodic is not None


def _one_at_a_time(jobs, **kw):
    """A tile map: the tiles one after the other, each on all the threads."""
    import kpca_denoise.tiling as tiling

    return ((k, tiling.denoise_tile(r, t, **kw)) for k, r, t in jobs)


def _at_once_params():
    # 3 x 2 tiles of 64 px cores (an even count) and 2 x 3 of a wider image: a search of
    # 4 px keeps the halo small, as in test_tiled_grouped_equals_whole_image
    return DenoiseParams(noise_sigma=20.0, tile_size=64,
                         grouped={"search_radius": 4, "periodic": False})


needs_threads = pytest.mark.skipif(
    __import__("numba").config.NUMBA_NUM_THREADS < 2,
    reason="tiles run at once only on two threads or more")


@needs_threads
@pytest.mark.parametrize("shape", [(192, 160, 3), (200, 200)], ids=["colour-6", "grey-9"])
def test_tiles_at_once_give_the_pixels_of_one_tile_at_a_time(shape):
    import threading

    caller, seen = threading.get_ident(), []
    img = np.stack([_scene(shape[:2], c) for c in range(3)], -1) if len(shape) == 3 else \
        _scene(shape, 0)
    noisy = img.astype(np.uint8)
    p = _at_once_params()

    def progress(ev):
        assert threading.get_ident() == caller  # every event on the calling thread
        seen.append(ev)

    at_once = denoise_set([noisy], p, progress=progress)
    serial = denoise_set([noisy], p, tile_map=_one_at_a_time)
    a, b = at_once.images[0], serial.images[0]
    assert a.stats["grouped"][0]["tiles"] == len(plan(noisy.shape, p)) >= 6
    assert np.array_equal(a.outputs[None], b.outputs[None])
    assert [s["groups"] for s in a.stats["grouped"]] == [s["groups"] for s in b.stats["grouped"]]
    tiles = [ev.done for ev in seen if ev.stage == "tiles"]
    assert tiles == list(range(1, len(tiles) + 1)) and len(tiles) == a.stats["grouped"][0]["tiles"]
    # the calling thread's tiles report their steps (the others' stand beside them):
    # the stages add up to about the run's time, not to the tiles' summed time
    t = at_once.timings
    steps = sum(v for k, v in t.items() if k != "total")
    assert 0.5 * t["total"] <= steps <= 1.05 * t["total"] + 0.05


@needs_threads
@pytest.mark.parametrize("how", ["cancel", "interrupt"])
def test_tiles_at_once_stop_together(monkeypatch, how):
    """A cancel, or an interrupt on the calling thread (Ctrl-C), while another thread
    denoises a tile: that tile ends at its next chunk, and the interrupt (or the
    cancel) is what is raised."""
    import threading

    import kpca_denoise.tiling as tiling
    from kpca_denoise.core.progress import Cancelled

    caller, ended, inner = threading.get_ident(), [], tiling.denoise_tile
    helper_in, flag = threading.Event(), threading.Event()

    def recorded(region, tile, **kw):
        try:
            if threading.get_ident() == caller:  # once the other thread is in its tile
                assert helper_in.wait(60)
                if how == "interrupt":
                    raise KeyboardInterrupt
                flag.set()
            else:  # its tile starts once the run is stopping
                helper_in.set()
                assert kw["cancel"].stop.wait(60)
            out = inner(region, tile, **kw)
        except BaseException as e:
            ended.append(type(e).__name__)
            raise
        ended.append("done")
        return out

    monkeypatch.setattr(tiling, "denoise_tile", recorded)
    noisy = _scene((192, 160), 0).astype(np.uint8)
    with pytest.raises(KeyboardInterrupt if how == "interrupt" else Cancelled):
        denoise_set([noisy], _at_once_params(), cancel=flag)
    # the caller's tile and every other thread's that started (one at least; more on
    # more threads) end before the run does, none of them done
    first = "KeyboardInterrupt" if how == "interrupt" else "Cancelled"
    assert len(ended) >= 2 and ended.count(first) >= 1, ended
    assert set(ended) <= {first, "Cancelled"} and "done" not in ended, ended


@needs_threads
def test_on_more_threads_than_tiles_may_hold_memory_for_they_run_one_at_a_time(monkeypatch):
    """Each tile in flight holds its working set: above tile_threads.MAX_AT_ONCE threads
    the tiles run one after the other on all of them (the same pixels either way)."""
    import kpca_denoise.tiling as tiling

    calls = []
    at_once = tiling.tiles_at_once
    monkeypatch.setattr(tiling, "tiles_at_once", lambda *a: calls.append(1) or at_once(*a))
    noisy = _scene((192, 160), 0).astype(np.uint8)
    first = denoise_set([noisy], _at_once_params()).images[0].outputs[None]
    assert calls == [1]
    monkeypatch.setattr(tiling, "MAX_AT_ONCE", 1)  # two threads are now too many
    second = denoise_set([noisy], _at_once_params()).images[0].outputs[None]
    assert calls == [1] and np.array_equal(first, second)
