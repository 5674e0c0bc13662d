"""denoise_dask: a lazy Dask array whose computed pixels are denoise_image's, whatever the
chunking and the scheduler."""

import numpy as np
import pytest

from kpca_denoise import DenoiseParams, denoise_dask, denoise_image, required_halo
from kpca_denoise.pipeline import add_noise
from helpers import assert_same_result

da = pytest.importorskip("dask.array")

#: small tiles, so that every test image is cut into several
TILE = 64


def _noisy(shape, sigma=15.0, seed=0, channels=None):
    y, x = np.mgrid[0:shape[0], 0:shape[1]]
    clean = 120 + 60 * np.sin(x / (5.0 + seed)) * np.cos(y / 9.0)
    if channels:
        clean = np.stack([clean, clean[::-1], 255 - clean][:channels], axis=-1)
    return np.clip(add_noise(clean, sigma, seed=seed), 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def grey():
    img = _noisy((150, 170))
    return img, denoise_image(img)


@pytest.fixture(scope="module")
def rgb():
    img = _noisy((120, 140), seed=1, channels=3)
    return img, denoise_image(img)


def _same_layout(out, a):
    assert isinstance(out, da.Array)
    assert out.shape == a.shape and out.dtype == a.dtype and out.chunks == a.chunks


def test_grey_with_odd_chunks_gives_the_whole_image_pixels(grey):
    img, ref = grey
    a = da.from_array(img, chunks=(37, 53))
    out = denoise_dask(a, tile_size=TILE)
    _same_layout(out, a)
    assert_same_result(out.compute(scheduler="threads"), ref)


def test_colour_with_its_channels_cut_gives_the_whole_image_pixels(rgb):
    img, ref = rgb
    a = da.from_array(img, chunks=(37, 53, 2))
    out = denoise_dask(a, tile_size=TILE)
    _same_layout(out, a)
    assert_same_result(out.compute(scheduler="threads"), ref)


def test_a_stack_is_denoised_page_by_page():
    pages = np.stack([_noisy((96, 112), sigma=s, seed=k) for k, s in enumerate((8, 15, 25))])
    a = da.from_array(pages, chunks=(2, 37, 53))
    out = denoise_dask(a, tile_size=TILE)
    _same_layout(out, a)
    got = out.compute(scheduler="threads")
    for k in range(len(pages)):  # each page its own noise level
        assert_same_result(got[k], denoise_image(pages[k]))


def test_threads_of_a_local_cluster_give_the_same_pixels(grey):
    distributed = pytest.importorskip("distributed")
    img, ref = grey
    a = da.from_array(img, chunks=(37, 53))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster):
        out = denoise_dask(a, tile_size=TILE)  # the decisions' reads run on the cluster too
        got = out.compute()
    assert_same_result(got, ref)


def test_worker_processes_give_the_same_pixels(rgb):
    """Two worker processes: every task (and its arguments) goes through pickle."""
    distributed = pytest.importorskip("distributed")
    img, ref = rgb
    a = da.from_array(img, chunks=(61, 47, 3))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=":0") as cluster, \
            distributed.Client(cluster):
        got = denoise_dask(a, tile_size=TILE).compute()
    assert_same_result(got, ref)


def test_nothing_is_denoised_until_compute(grey, monkeypatch):
    import kpca_denoise.tiling as tiling

    calls = []
    tile = tiling.denoise_tile

    def counted(*args, **kwargs):
        calls.append(1)
        return tile(*args, **kwargs)

    monkeypatch.setattr(tiling, "denoise_tile", counted)
    img, ref = grey
    params = DenoiseParams(tile_size=TILE)
    out = denoise_dask(da.from_array(img, chunks=(37, 53)), params=params)
    assert calls == []
    got = out.compute(scheduler="sync")
    assert len(calls) == len(tiling.plan(img.shape, params)) > 1  # each tile once
    assert_same_result(got, ref)


@pytest.mark.parametrize("params", [DenoiseParams(), DenoiseParams(tile_size=TILE),
                                    DenoiseParams(method="global"),
                                    DenoiseParams(method="global", patch_size=6, stride=2)])
def test_required_halo_is_the_tilers(params):
    from kpca_denoise.tiling import plan

    halo = required_halo(params)
    tiles = plan((4000, 4000), params.replace(tile_size=2 * halo + 64))
    inner = next(t for t in tiles if t.y0 > halo)
    assert inner.y0 - inner.ry0 == halo


def test_required_halo_takes_the_keywords():
    assert required_halo(method="global", patch_size=6, stride=2) == \
        required_halo(DenoiseParams(method="global", patch_size=6, stride=2))
    # the call docs/dask.md gives for a regular texture's wider search
    texture = required_halo({"grouped": {"periodic": True}})
    assert texture == required_halo(DenoiseParams(grouped={"periodic": True})) > required_halo()


def test_global_method_and_poisson_noise_give_the_whole_image_pixels(grey):
    img = grey[0][:120, :130]
    a = da.from_array(img, chunks=(37, 53))
    kw = dict(method="global", ranks=8, n_train=300)
    assert_same_result(denoise_dask(a, tile_size=TILE, **kw).compute(), denoise_image(img, **kw))
    kw = dict(noise_model="poisson-gaussian")
    assert_same_result(denoise_dask(a, tile_size=TILE, **kw).compute(), denoise_image(img, **kw))


def test_a_numpy_array_is_wrapped_and_a_flat_one_returned_unchanged():
    flat = np.full((80, 90), 7, dtype=np.uint16)
    out = denoise_dask(flat)
    assert isinstance(out, da.Array)
    np.testing.assert_array_equal(out.compute(), denoise_image(flat))


@pytest.mark.parametrize("noise", ["white", "correlated"])
def test_the_noise_decisions_are_the_pipelines_on_a_large_image(noise):
    """Over a million pixels the estimators sample blocks: read lazily, the same ones;
    correlated (camera) noise is measured whole, and the strength applies, as in memory."""
    from scipy.ndimage import convolve

    from kpca_denoise.dask_array import decide_images
    from kpca_denoise.pipeline import ImageResult
    from kpca_denoise.prepare import prepare_item

    img = _noisy((1100, 1000), sigma=12 if noise == "white" else 0, seed=2, channels=3)
    if noise == "correlated":  # the [1 2 1] x [1 2 1] spread of bilinear demosaicing
        k = np.outer([1.0, 2.0, 1.0], [1.0, 2.0, 1.0])[..., None]
        k /= np.sqrt(np.sum(k * k))
        grain = 12 * convolve(np.random.default_rng(3).normal(0, 1, img.shape), k, mode="wrap")
        img = np.clip(img + grain, 0, 255).astype(np.uint8)
    params = DenoiseParams(strength=0.8).validate()
    res = ImageResult(index=0, name="image")
    prepare_item(params, img, res, False, seed=0)
    (d,) = decide_images([da.from_array(img, chunks=(300, 256, 3))], ["image"], params)
    assert d.sigma == res.noise_sigma and d.stats["noise"] == res.stats["noise"]
    assert (res.stats["noise"]["kind"] == "correlated") == (noise == "correlated")


def test_a_chosen_stabiliser_is_the_pipelines_and_so_are_the_pixels():
    """White noise that grows with the signal: read lazily, the same model is chosen
    (the Poisson-Gaussian stabiliser, its gain and sigma) as read whole, and the
    computed pixels are the whole image's."""
    from kpca_denoise.dask_array import decide_images
    from kpca_denoise.pipeline import ImageResult
    from kpca_denoise.prepare import CHOSEN_HINT, prepare_item

    y, x = np.mgrid[0:192, 0:176] / 192
    clean = 20.0 + 110.0 * (1 + np.sin(5 * x) * np.cos(3 * y))  # 20 .. 240
    img = (2.0 * np.random.default_rng(4).poisson(clean / 2.0)).astype(np.float32)
    params = DenoiseParams().validate()
    res = ImageResult(index=0, name="image")
    item = prepare_item(params, img, res, False, seed=0)
    (d,) = decide_images([da.from_array(img, chunks=(50, 64))], ["image"], params)
    assert item.vst is not None and d.vst is not None and res.stats["hint"] == CHOSEN_HINT
    assert d.stats == {k: res.stats[k] for k in ("noise", "hint", "noise_model")}
    np.testing.assert_array_equal(np.ravel(d.vst.gain), np.ravel(item.vst.gain))
    np.testing.assert_array_equal(np.ravel(d.vst.sigma), np.ravel(item.vst.sigma))
    assert d.sigma == res.noise_sigma == 1.0
    out = denoise_dask(da.from_array(img, chunks=(50, 64)), tile_size=TILE)
    assert_same_result(out.compute(scheduler="threads"), denoise_image(img))


@pytest.mark.parametrize("make,words", [
    (lambda: da.zeros((2, 40, 40, 7)), "move the channel axis last"),
    (lambda: da.zeros((2, 2, 40, 40, 3)), "expected an image"),
    (lambda: da.from_array(np.where(np.eye(40) > 0, np.nan, 0.5)), "NaN"),
    (lambda: da.zeros((3, 3)), "smaller than"),
    (lambda: [[1, 2], [3, 4]], "dask.array.from_array"),
    (lambda: da.zeros((40, 40), dtype=bool), "unsupported pixel type"),
])
def test_bad_input_is_one_line_naming_the_fix(make, words):
    with pytest.raises(ValueError) as err:
        denoise_dask(make())
    msg = str(err.value)
    assert words in msg and "\n" not in msg


def test_keywords_replace_the_fields_of_params():
    # the front doors' one convention: params, then DenoiseParams fields on top
    with pytest.raises(ValueError, match="outside the accepted range"):
        denoise_dask(da.from_array(_noisy((40, 40))), DenoiseParams(noise_sigma=5),
                     noise_sigma=1e5)
    with pytest.raises(TypeError, match=r"unknown parameter\(s\) \['sigma'\]"):
        denoise_dask(da.zeros((40, 40)), sigma=5)


def test_a_numpy_array_of_objects_gets_the_librarys_message_not_dasks():
    # "Can not use auto rechunking with object dtype" from dask's from_array, raw
    for bad in (np.empty((32, 32), object), np.zeros((32, 32), "U3")):
        with pytest.raises(ValueError, match=f"image: unsupported pixel type {bad.dtype}; use "
                                             "integer or float pixels"):
            denoise_dask(bad, noise_sigma=20.0)
