"""Camera noise: the strength factor, the noise estimate on correlated and signal-dependent
noise, the reported noise model and the command line's hint (docs/noise.md)."""

import numpy as np
import pytest

from kpca_denoise import DenoiseParams, denoise_set
from kpca_denoise.cli import main
from kpca_denoise.params import ParamError


def _smooth_scene(n=96, seed=0):
    y, x = np.mgrid[0:n, 0:n] / n
    return 128 + 60 * np.sin(5 * x) * np.cos(3 * y)


def test_strength_multiplies_the_level_given_to_the_denoiser():
    rng = np.random.default_rng(1)
    clean = _smooth_scene()
    noisy = clean + rng.normal(0, 10, clean.shape)
    runs = {s: denoise_set([noisy], DenoiseParams(strength=s)).images[0] for s in (0.5, 1.0, 2.0)}
    base = runs[1.0].noise_sigma
    assert 9 < base < 11
    assert runs[0.5].noise_sigma == pytest.approx(0.5 * base)
    assert runs[2.0].noise_sigma == pytest.approx(2.0 * base)
    # half the level leaves noise in: the result lies further from the clean image
    err = {s: np.mean((r.outputs[None] - clean) ** 2) for s, r in runs.items()}
    assert err[0.5] > 1.3 * err[1.0]


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), 11.0, "2"])
def test_strength_out_of_range_is_named(bad):
    with pytest.raises(ParamError, match=r"^strength must be a number > 0 and at most 10 "):
        DenoiseParams(strength=bad).validate()


def test_cli_strength_option_is_named(tmp_path, capsys):
    from PIL import Image

    Image.fromarray(np.full((32, 32), 7, np.uint8)).save(tmp_path / "a.png")
    rc = main(["denoise", str(tmp_path / "a.png"), "-o", str(tmp_path / "o"), "--strength", "0"])
    err = capsys.readouterr().err
    assert rc != 0 and err.startswith("error: --strength must be a number > 0 and at most 10")
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


def _correlated_noise(shape, sigma, seed):
    """White noise through the separable [1, 2, 1] x [1, 2, 1] filter (unit energy, so
    the per-pixel std stays ``sigma``): the PSD of bilinear demosaicing, neighbours
    correlated by 2/3."""
    from scipy.ndimage import convolve

    k = np.outer([1.0, 2.0, 1.0], [1.0, 2.0, 1.0])
    k /= np.sqrt(np.sum(k * k))
    return sigma * convolve(np.random.default_rng(seed).normal(0, 1, shape), k, mode="wrap")


@pytest.mark.parametrize("sigma", [4.0, 12.0])
def test_correlated_noise_of_known_psd_is_read_within_ten_percent(sigma):
    from kpca_denoise.core.nlf import estimate_noise_model
    from kpca_denoise.core.noise import estimate_sigma_image

    noisy = _smooth_scene(192) + _correlated_noise((192, 192), sigma, 3)
    white = estimate_sigma_image(noisy)
    assert white < 0.5 * sigma  # the finest scale sees a third of it
    model = estimate_noise_model(noisy, white)
    assert model.kind == "correlated" and model.neighbour > 0.55
    assert abs(model.sigma / sigma - 1) < 0.10, model
    # and the pipeline tells the denoiser that level, reporting the model
    res = denoise_set([noisy], DenoiseParams(method="global", ranks=(4,), n_train=300)).images[0]
    assert res.noise_sigma == pytest.approx(model.level)
    assert res.stats["noise"]["kind"] == "correlated"
    back = type(model).from_dict(res.stats["noise"])
    assert back.sigma == pytest.approx(model.sigma) and back.level == pytest.approx(model.level)
    assert back.describe(ascii=True).startswith(f"correlated noise, sigma {model.sigma:.3g} (")
    assert back.describe(ascii=True).endswith(f"removed at {model.level:.3g}")


def test_the_strict_refit_reads_pure_correlated_noise_as_the_usual_fit():
    """The texture guard's premise: on pure correlated noise the refit at the strict
    own-energy confidence reads the per-pixel variance the usual fit does (so the
    guard, which acts only when it reads TEXTURE_DRIFT less, leaves noise alone)."""
    from kpca_denoise.core.nlf import channel_covariance, channel_fits
    from kpca_denoise.core.noise import estimate_sigma_image

    for seed, sigma in ((0, 8.0), (1, 4.0)):
        noisy = _smooth_scene(160) + _correlated_noise((160, 160), sigma, seed)
        args = (estimate_sigma_image(noisy), None, 7, 3, 20000, 1 << 20, 256, 0)
        usual, strict = channel_fits(noisy, *args)
        assert abs(np.sqrt(strict[0] / usual[0]) - 1) < 0.02
        assert abs(np.sqrt(strict[0]) / sigma - 1) < 0.05
        np.testing.assert_array_equal(channel_covariance(noisy, *args), usual)


def _psd_factor_121(patch=5):
    """The effective factor of the [1 2 1] x [1 2 1] noise, from its exact covariance:
    the Kronecker square of the 1-D Toeplitz matrix of r = (1, 2/3, 1/6)."""
    r = np.zeros(patch)
    r[:3] = [1.0, 2.0 / 3.0, 1.0 / 6.0]
    T = r[np.abs(np.subtract.outer(np.arange(patch), np.arange(patch)))]
    C = np.kron(T, T)
    return np.sqrt(np.linalg.norm(C) / patch)


def test_effective_factor_is_the_rms_of_the_patch_noise_spectrum():
    from kpca_denoise.core.nlf import autocovariance_lags, effective_factor

    lags = autocovariance_lags(3)
    white = np.zeros(len(lags))
    white[0] = 4.0
    assert effective_factor(white, 3) == 1.0  # white noise: told its own std
    r = {0: 1.0, 1: 2.0 / 3.0, 2: 1.0 / 6.0}
    R = np.array([9.0 * r.get(abs(dy), 0.0) * r.get(abs(dx), 0.0) for dy, dx in lags])
    assert effective_factor(R, 3) == pytest.approx(_psd_factor_121())
    assert 1.3 < effective_factor(R, 3) < 1.45


def test_correlated_noise_is_removed_above_its_per_pixel_std():
    """The fitted autocovariance gives the known PSD's factor within 5 %."""
    from kpca_denoise.core.nlf import estimate_noise_model
    from kpca_denoise.core.noise import estimate_sigma_image

    noisy = _smooth_scene(192) + _correlated_noise((192, 192), 8.0, 11)
    model = estimate_noise_model(noisy, estimate_sigma_image(noisy))
    assert abs(model.level / model.sigma / _psd_factor_121() - 1) < 0.05, model


def test_white_noise_keeps_the_finest_scale_estimate():
    from kpca_denoise.core.noise import estimate_sigma_image

    rng = np.random.default_rng(4)
    noisy = _smooth_scene(128) + rng.normal(0, 10, (128, 128))
    res = denoise_set([noisy], DenoiseParams(method="global", ranks=(4,), n_train=300)).images[0]
    assert res.stats["noise"]["kind"] == "white"
    assert res.noise_sigma == estimate_sigma_image(noisy)  # today's estimate, exactly
    assert abs(res.noise_sigma / 10 - 1) < 0.02
    # the level function is there to plot: one noise level per brightness level
    n = res.stats["noise"]
    assert len(n["levels"]) == len(n["level_sigmas"]) >= 2
    assert all(abs(s / 10 - 1) < 0.15 for s in n["level_sigmas"])


def test_noise_free_images_read_no_noise_and_come_back_unchanged():
    flat = np.full((64, 64, 3), 90, np.uint8)
    smooth = _smooth_scene(96)  # float: no rounding noise either
    out = denoise_set([flat, smooth], DenoiseParams(method="global", ranks=(4,), n_train=300))
    for res, image in zip(out.images, (flat, smooth)):
        assert res.noise_sigma < 1e-3 and "noise" not in res.stats
        np.testing.assert_array_equal(res.outputs[4], image)
        assert "returned unchanged" in res.stats["note"]


def test_cli_chooses_the_poisson_model_for_signal_dependent_noise(tmp_path, capsys):
    import json

    import tifffile

    rng = np.random.default_rng(5)
    y = np.linspace(200.0, 60000.0, 256)[None, :] * np.ones((192, 1))
    tifffile.imwrite(tmp_path / "counts.tif", rng.poisson(y).astype(np.uint16))
    rc = main(["denoise", str(tmp_path / "counts.tif"), "-o", str(tmp_path / "o"), "-q",
               "--method", "global", "--ranks", "4", "--train-patches", "300"])
    err = capsys.readouterr().err
    assert rc == 0
    # the Poisson-Gaussian model is chosen from the data, and the run says so
    assert ("note: counts.tif: the noise grows with the signal: denoised as Poisson-Gaussian "
            "noise; give --noise-sigma to remove one Gaussian level instead") in err
    assert "note: counts.tif: Poisson-Gaussian noise, gain " in err
    side = json.loads(next((tmp_path / "o").glob("kpca-denoise-*.json")).read_text())
    stats = side["items"][0]["stats"]
    assert stats["noise_model"]["chosen"] is True and stats["noise"]["signal_dependent"]
    # told the model, it says nothing of the kind, and gives the same pixels
    rc = main(["denoise", str(tmp_path / "counts.tif"), "-o", str(tmp_path / "p"), "-q",
               "--method", "global", "--ranks", "4", "--train-patches", "300",
               "--noise-model", "poisson-gaussian"])
    assert rc == 0 and "grows with the signal" not in capsys.readouterr().err
    chosen, told = (tifffile.imread(next((tmp_path / d).glob("*.tif"))) for d in "op")
    np.testing.assert_array_equal(chosen, told)


def test_cli_hints_the_gaussian_model_for_noise_that_does_not_grow(tmp_path, capsys):
    from PIL import Image

    rng = np.random.default_rng(6)
    noisy = np.clip(np.rint(_smooth_scene(192) + rng.normal(0, 8, (192, 192))), 0, 255)
    Image.fromarray(noisy.astype(np.uint8)).save(tmp_path / "flat_noise.png")
    rc = main(["denoise", str(tmp_path / "flat_noise.png"), "-o", str(tmp_path / "o"), "-q",
               "--method", "global", "--ranks", "4", "--train-patches", "300",
               "--noise-model", "poisson-gaussian"])
    err = capsys.readouterr().err
    assert rc == 0
    assert ("note: flat_noise.png: the noise does not grow with the signal: the default "
            "model (--noise-model auto) fits better") in err


def test_cli_says_what_correlated_noise_it_removed(tmp_path, capsys):
    import json

    from PIL import Image

    noisy = np.clip(np.rint(_smooth_scene(160) + _correlated_noise((160, 160), 8.0, 7)), 0, 255)
    Image.fromarray(noisy.astype(np.uint8)).save(tmp_path / "demosaiced.png")
    rc = main(["denoise", str(tmp_path / "demosaiced.png"), "-o", str(tmp_path / "o"), "-q",
               "--method", "global", "--ranks", "4", "--train-patches", "300"])
    err = capsys.readouterr().err
    assert rc == 0
    note = next(line for line in err.splitlines() if "correlated noise" in line)
    assert note.startswith("note: demosaiced.png: correlated noise, sigma ")
    # the sidecar holds the model for a user to reproduce and adjust
    side = json.loads(next((tmp_path / "o").glob("kpca-denoise-*.json")).read_text())
    noise = side["items"][0]["stats"]["noise"]
    assert noise["kind"] == "correlated" and abs(noise["sigma"] / 8.0 - 1) < 0.15
    assert f"sigma {noise['sigma']:.3g} " in note


def test_no_poisson_hint_for_correlated_noise():
    """Noise that grows with the signal but is correlated (demosaiced) gets no hint
    towards the Poisson-Gaussian model, which assumes independent pixels; the same
    noise white gets it."""
    from kpca_denoise.core.nlf import NoiseModel
    from kpca_denoise.prepare import SIGNAL_DEPENDENT_HINT, noise_hint

    base = dict(sigma=10.0, white_sigma=4.0, signal_dependent=True)
    assert noise_hint(NoiseModel(kind="correlated", correlation=2.5, **base)) is None
    assert noise_hint(NoiseModel(kind="white", **base)) == SIGNAL_DEPENDENT_HINT
    assert noise_hint(NoiseModel(kind="white", **{**base, "signal_dependent": False})) is None
    # a 16-bit level reads as a whole number, not 4.93e+03
    assert "sigma 4931 " in NoiseModel(kind="correlated", sigma=4931.2, white_sigma=2000.0,
                                       correlation=2.47).describe(ascii=True)


def test_a_stack_of_signal_dependent_pages_shares_the_chosen_stabiliser():
    """Pages whose white noise grows with the signal are stabilised as the
    Poisson-Gaussian model chooses for one image; a sequence gets one gain and sigma,
    still reported as chosen on every page (the stack path's noise step)."""
    from kpca_denoise.prepare import prepare_item
    from kpca_denoise.results import ImageResult
    from kpca_denoise.sequence import give_shared_noise

    y = 20.0 + 220.0 * (_smooth_scene(192) - 68.0) / 120.0  # 20 .. 240
    rng = np.random.default_rng(8)
    pages = [2.0 * rng.poisson(y[:, 2 * k:2 * k + 184] / 2.0) for k in range(2)]
    params = DenoiseParams()
    items = [prepare_item(params, p, ImageResult(index=k, name=f"p{k}"), False, seed=k)
             for k, p in enumerate(pages)]
    assert all(it.vst is not None and it.result.stats["noise_model"]["chosen"] for it in items)
    assert give_shared_noise(params, items) == 1.0
    models = [it.result.stats["noise_model"] for it in items]
    assert models[0] == models[1] and models[0]["chosen"] is True
    assert models[0]["model"] == "poisson-gaussian" and 1.0 < models[0]["gain"][0] < 3.0
    assert items[0].vst is items[1].vst


def test_offset_counts_keep_one_gaussian_level_and_the_hint():
    """Noise that grows with the signal on data the Poisson-Gaussian model cannot take
    (a black level subtracted too far: 70 % of the pixels below 0) is not stabilised;
    the run keeps one Gaussian level and says which model to try."""
    from kpca_denoise.prepare import SIGNAL_DEPENDENT_HINT, prepare_item
    from kpca_denoise.results import ImageResult

    y = 20.0 + 220.0 * (_smooth_scene(192) - 68.0) / 120.0
    z = 2.0 * np.random.default_rng(9).poisson(y / 2.0) - 200.0
    res = ImageResult(index=0, name="offset")
    item = prepare_item(DenoiseParams(), z, res, False, seed=0)
    assert np.mean(z < 0) > 0.6 and res.stats["noise"]["signal_dependent"]
    assert item.vst is None and "noise_model" not in res.stats
    assert res.stats["hint"] == SIGNAL_DEPENDENT_HINT
    assert res.noise_sigma == pytest.approx(res.stats["noise"]["sigma"])
