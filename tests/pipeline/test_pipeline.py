import numpy as np
import pytest

from kpca_denoise import CancelToken, Cancelled, DenoiseParams, denoise_image, denoise_set
from kpca_denoise.core.metrics import psnr
from kpca_denoise.core.noise import estimate_sigma_image
from kpca_denoise.pipeline import add_noise, evaluate


def _smooth(shape, rng):
    y, x = np.mgrid[0:shape[0], 0:shape[1]]
    img = 128 + 60 * np.sin(x / 7.0) * np.cos(y / 11.0) + 30 * (x > shape[1] // 2)
    return img


FAST = dict(method="global", ranks=8, n_train=600)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32, np.float64])
def test_denoise_image_keeps_shape_and_dtype(rng, dtype):
    scale = {np.uint8: 1, np.uint16: 256, np.float32: 1 / 255, np.float64: 1 / 255}[dtype]
    clean = _smooth((40, 44), rng) * scale
    noisy = add_noise(clean, 12 * scale, seed=1)
    if np.issubdtype(dtype, np.integer):
        noisy = np.clip(np.rint(noisy), 0, np.iinfo(dtype).max)
    noisy = noisy.astype(dtype)
    out = denoise_image(noisy, noise_sigma=12 * scale, **FAST)
    assert out.shape == noisy.shape and out.dtype == dtype
    assert psnr(clean, out, 255 * scale) > psnr(clean, noisy, 255 * scale) + 3


def test_colour_image_rgb_and_rgba(rng):
    base = _smooth((36, 40), rng)
    rgb = np.stack([base, base * 0.8 + 20, 255 - base], axis=-1)
    noisy = np.clip(add_noise(rgb, 15, seed=2), 0, 255).astype(np.uint8)
    out = denoise_image(noisy, noise_sigma=15, **FAST)
    assert out.shape == noisy.shape and out.dtype == np.uint8
    assert psnr(rgb, out, 255) > psnr(rgb, noisy, 255) + 3
    alpha = np.full(base.shape, 200, np.uint8)
    rgba = np.dstack([noisy, alpha])
    out4 = denoise_image(rgba, noise_sigma=15, **FAST)
    assert out4.shape == rgba.shape
    np.testing.assert_array_equal(out4[..., 3], alpha)  # alpha passes through


def test_noise_estimate_is_close_on_a_photo(camera):
    # measured 10.06 / 25.06 / 49.62 for 10 / 25 / 50 with weak-texture patch
    # selection (scikit-image's wavelet estimate: 11.2 / 25.7 / 50.4)
    for sigma, tol in ((10, 0.05), (25, 0.03), (50, 0.03)):
        est = estimate_sigma_image(add_noise(camera, sigma, seed=3))
        assert abs(est - sigma) < tol * sigma, (sigma, est)


def test_noise_estimate_is_not_fooled_by_texture():
    # grass is texture everywhere: the weak-texture fraction alone read 11.8 / 18.3
    # for 5 / 15; the iterated noise-consistency selection reads 6.1 / 15.3
    # (python -m benchmarks.noise_estimate)
    from skimage import data

    grass = data.grass().astype(np.float64)
    rng = np.random.default_rng(2)
    for sigma, tol in ((5, 0.3), (15, 0.06)):
        noisy = grass + rng.normal(0, sigma, grass.shape)
        est = estimate_sigma_image(noisy)
        first = estimate_sigma_image(noisy, iterations=0)
        assert abs(est - sigma) < tol * sigma, (sigma, est)
        assert abs(est - sigma) < 0.5 * abs(first - sigma), (sigma, est, first)


def test_noise_estimate_leaves_out_patches_near_the_clipping_bounds():
    # noise clipped to 8 bits has less variance near 0 and 255: astronaut's
    # luminance read 21.0 for 25 without the bounds, 23.9 with them
    from skimage import data

    from kpca_denoise.pipeline import noisy_like
    from kpca_denoise.working import luminance, luminance_bounds

    img = data.astronaut()
    noisy = noisy_like(img, 25.0, seed=0)
    lum = luminance(noisy)
    assert luminance_bounds(noisy) == pytest.approx((0.0, 255.0 * np.sqrt(3.0)))
    assert luminance_bounds(noisy.astype(np.float32)) is None
    blind = estimate_sigma_image(lum)
    aware = estimate_sigma_image(lum, bounds=luminance_bounds(noisy))
    assert blind < 22.0 and abs(aware - 25.0) < 0.06 * 25.0, (blind, aware)
    # the command line's path passes the bounds
    res = denoise_set([noisy[128:384, 128:384]], DenoiseParams(ranks=(None,))).images[0]
    sub = luminance(noisy[128:384, 128:384])
    assert res.noise_sigma == pytest.approx(
        estimate_sigma_image(sub, bounds=luminance_bounds(noisy)))
    # an image far from its bounds reads the same either way
    far = np.clip(add_noise(np.full((128, 128), 128.0), 10.0, seed=1), 0, 255).astype(np.uint8)
    assert estimate_sigma_image(far, bounds=(0, 255)) == estimate_sigma_image(far)


def test_noise_estimate_on_pure_noise_small_and_large():
    rng = np.random.default_rng(5)
    for side in (40, 256):
        est = estimate_sigma_image(rng.normal(0, 5, (side, side)))
        assert abs(est - 5) < 0.05 * 5, (side, est)
    assert estimate_sigma_image(np.full((30, 30), 3.0)) == 0.0


def test_several_ranks_from_one_eigendecomposition(camera):
    img = camera[200:264, 200:264]
    events = []
    res = denoise_set([img], DenoiseParams(method="global", ranks=(2, 4, 8), n_train=500,
                                           add_noise=20.0, noise_sigma=20.0),
                      progress=events.append)
    eig_starts = [e for e in events if e.stage == "eigensolver" and e.done == 0]
    assert len(eig_starts) == 1
    assert res.ranks == (2, 4, 8) and set(res.images[0].outputs) == {2, 4, 8}
    assert res.eigenvalues.shape == (8,)
    for stage in ("gram", "eigensolver", "projection", "preimage", "reassembly"):
        assert stage in res.timings
    assert res.resolved["gamma"] > 0 and res.resolved["noise_sigma"] == 20.0
    outs = [res.images[0].outputs[r] for r in (2, 4, 8)]
    assert not np.array_equal(outs[0], outs[2])


def test_set_fits_one_model_and_isolates_a_failing_image(rng):
    good1 = np.clip(add_noise(_smooth((40, 40), rng), 10, 1), 0, 255).astype(np.uint8)
    good2 = np.clip(add_noise(_smooth((32, 48), rng), 10, 2), 0, 255).astype(np.uint8)
    tiny = np.zeros((5, 5), np.uint8)
    res = denoise_set([good1, tiny, good2], DenoiseParams(method="global", ranks=(4,), n_train=400),
                      names=["a", "tiny", "b"])
    assert res.images[0].ok and res.images[2].ok
    assert "tiny" in res.images[1].error and "smaller than the 8x8 patch" in res.images[1].error
    assert len(res.resolved["models"]) == 1


def test_cancel_is_honoured(camera):
    tok = CancelToken()
    seen = []

    def progress(ev):
        seen.append(ev.stage)
        if ev.stage == "projection":
            tok.cancel()

    with pytest.raises(Cancelled):
        denoise_set([camera[:96, :96]], DenoiseParams(method="global", ranks=(4,), n_train=300),
                    progress=progress, cancel=tok)
    assert "preimage" not in seen


def test_patch_set_denoising_improves_digits():
    from sklearn.datasets import load_digits

    clean = load_digits().images[:600] / 16.0
    noisy = add_noise(clean, 0.25, seed=4)
    res = denoise_set([noisy], DenoiseParams(method="global", ranks=(32,), n_train=600,
                                             noise_sigma=0.25), patch_sets=[True])
    out = res.images[0].outputs[32]
    assert out.shape == clean.shape
    assert np.mean((out - clean) ** 2) < 0.5 * np.mean((noisy - clean) ** 2)


@pytest.mark.parametrize("kw,msg", [
    (dict(patch_size=0), "patch_size must be an integer >= 2"),
    (dict(patch_size=-3), "patch_size must be an integer >= 2"),
    (dict(ranks=0), "ranks must be integers >= 1"),
    (dict(gamma=0.0), "gamma must be > 0"),
    (dict(gamma=float("nan")), "gamma must be a finite number"),
    (dict(noise_sigma=-1.0), "noise_sigma must be > 0 and at most"),
    (dict(method="magic"), "method must be one of"),
    (dict(n_landmarks=0), "n_landmarks must be an integer >= 1"),
    (dict(n_landmarks=2), "n_landmarks=2 is fewer than rank 4"),
    (dict(method="grouped", n_landmarks=100), "n_landmarks applies to method 'global' only"),
])
def test_bad_parameters(kw, msg):
    args = dict(method="global", ranks=4)
    args.update(kw)
    img = np.random.default_rng(0).integers(0, 255, (32, 32)).astype(np.uint8)
    with pytest.raises(ValueError, match=msg):
        denoise_image(img, **args)


def test_rank_more_than_training_samples():
    img = np.random.default_rng(0).integers(0, 255, (32, 32)).astype(np.uint8)
    with pytest.raises(ValueError, match="more than the 50 training samples"):
        denoise_image(img, method="global", ranks=60, n_train=50, noise_sigma=10)


def test_image_smaller_than_patch():
    with pytest.raises(ValueError,
                       match="smaller than the 8x8 patch; use a patch size of 6 or less"):
        denoise_image(np.zeros((6, 30), np.uint8), method="global", ranks=2)


def test_nan_pixels():
    a = np.ones((20, 20))
    a[1, 1] = np.inf
    with pytest.raises(ValueError, match="NaN or Inf pixels"):
        denoise_image(a, method="global", ranks=2)


def test_params_json_round_trip():
    p = DenoiseParams(method="global", ranks=(4, 8), gamma=1e-5, add_noise=25.0)
    assert DenoiseParams.from_dict(p.to_dict()) == p
    with pytest.raises(ValueError, match="unknown parameter"):
        DenoiseParams.from_dict({"rnaks": [1]})


def test_evaluate_reports_psnr_and_ssim(camera):
    noisy = add_noise(camera, 20, seed=0)
    m = evaluate(camera, noisy)
    assert 21 < m["psnr"] < 23 and 0 < m["ssim"] < 0.6
    assert evaluate(camera, camera)["ssim"] == pytest.approx(1.0)


def test_new_ranks_reuse_the_fitted_model(camera):
    img = camera[100:164, 100:164]
    p = DenoiseParams(method="global", ranks=(4, 8), n_train=400, noise_sigma=20.0, add_noise=20.0)
    first = denoise_set([img], p)
    events = []
    again = denoise_set([img], p.replace(ranks=(2, 6)), model=first.model, progress=events.append)
    assert not any(e.stage == "gram" for e in events)  # no new Gram matrix, no refit
    assert again.model is first.model and again.resolved["solver"] == "reused"
    fresh = denoise_set([img], p.replace(ranks=(2, 6)))
    for r in (2, 6):
        diff = np.abs(again.images[0].outputs[r].astype(int) - fresh.images[0].outputs[r].astype(int))
        assert diff.max() <= 1
    # a larger rank than the model holds is fitted anew
    bigger = denoise_set([img], p.replace(ranks=(12,)), model=first.model)
    assert bigger.model is not first.model and bigger.model.eigenvalues_.shape == (12,)


def test_landmarks_approach_exact_kernel_pca(camera):
    # Nystrom mode among 3000 training patches, against exact kernel PCA on them;
    # measured on this crop: noisy 22.1, exact 26.23, m = 100 / 200 / 500:
    # 25.53 / 25.86 / 26.10 dB (landmarks cut cost, not error: see
    # benchmarks/results/nystrom.txt)
    img = camera[96:224, 96:224]
    noisy = add_noise(img, 20, seed=2)
    base = dict(method="global", ranks=8, noise_sigma=20, n_train=3000)
    exact = psnr(img, denoise_image(noisy, **base), 255)
    p100, p500 = (psnr(img, denoise_image(noisy, n_landmarks=m, **base), 255) for m in (100, 500))
    assert exact > psnr(img, noisy, 255) + 3
    assert p100 < p500 < exact + 0.05
    assert exact - p500 < 0.25, (p500, exact)
    # a set smaller than n_landmarks: every training patch is a landmark (= exact)
    res = denoise_set([noisy[:40, :40]], DenoiseParams(method="global", ranks=(4,), n_train=100,
                                                       n_landmarks=5000, noise_sigma=20))
    assert res.images[0].ok and res.resolved["n_landmarks"] == 100


def test_patch_set_auto_rank_comes_from_the_noise_level():
    # the shipped digits with noise 25 added and clipped (the quick start):
    # noisy 21.91 dB, a fixed 128 components 21.39, the noise rank (898 of
    # 1797) 22.84 (python -m benchmarks.noise_rank)
    import os

    with np.load(os.path.join(os.path.dirname(__file__), "..", "..", "sample_images", "digits.npz")) as z:
        clean = z[z.files[0]]
    res = denoise_set([clean], DenoiseParams(ranks=(None, 128), add_noise=25.0), patch_sets=[True])
    item = res.images[0]
    assert item.ok and set(item.outputs) == {None, 128}
    auto_rank = res.resolved["auto_rank"]
    assert 128 < auto_rank <= clean.shape[0] // 2
    p_noisy = psnr(clean, item.noisy, 255)
    p_auto, p_128 = (psnr(clean, item.outputs[r], 255) for r in (None, 128))
    assert p_auto > p_128 + 1.0 and p_auto > p_noisy + 0.5, (p_noisy, p_128, p_auto)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32, np.float64])
@pytest.mark.parametrize("shape", [(37, 23), (19, 11, 3), (5, 4, 4)])
def test_noise_added_in_bands_equals_noise_added_at_once(monkeypatch, dtype, shape):
    from kpca_denoise import evaluation
    from kpca_denoise.working import cast_like

    rng = np.random.default_rng(0)
    a = (rng.random(shape) * (200 if dtype == np.uint8 else 60000 if dtype == np.uint16 else 1.0)
         ).astype(dtype)
    once = cast_like(evaluation.add_noise(a, 30.0 if a.dtype.kind == "u" else 0.1, seed=7), a)
    monkeypatch.setattr(evaluation, "_NOISE_BAND", 20)  # a few rows per band
    banded = evaluation.noisy_like(a, 30.0 if a.dtype.kind == "u" else 0.1, seed=7)
    assert banded.dtype == a.dtype
    np.testing.assert_array_equal(banded, once)


def test_every_front_door_takes_params_and_their_fields():
    """One calling convention: (array, params=None, *, progress, cancel, **fields), the
    fields being DenoiseParams names; the old names warn and still work."""
    import inspect
    import warnings

    from kpca_denoise import denoise_dask, denoise_stack

    for door in (denoise_image, denoise_stack, denoise_dask):
        ps = list(inspect.signature(door).parameters.values())
        assert [p.name for p in ps[:2]] == [ps[0].name, "params"], door.__name__
        names = {p.name: p.kind for p in ps}
        assert names["progress"] == names["cancel"] == inspect.Parameter.KEYWORD_ONLY
        assert ps[-1].kind == inspect.Parameter.VAR_KEYWORD
    img = _noisy_ramp()
    want = denoise_set([img], DenoiseParams(profile="fast", strength=0.8, noise_sigma=20))
    want = want.images[0].outputs[None]
    np.testing.assert_array_equal(denoise_image(img, profile="fast", strength=0.8,
                                                noise_sigma=20), want)
    np.testing.assert_array_equal(denoise_image(img, DenoiseParams(profile="fast"),
                                                strength=0.8, noise_sigma=20), want)
    np.testing.assert_array_equal(denoise_image(img, {"profile": "fast", "strength": 0.8},
                                                noise_sigma=20), want)
    with pytest.raises(TypeError, match=r"unknown parameter\(s\) \['strenght'\]"):
        denoise_image(img, strenght=0.8)
    new = denoise_image(img, method="global", ranks=4, seed=3, n_train=300, noise_sigma=20)
    with pytest.warns(DeprecationWarning, match=r"denoise_image\(n_components=...\) is "
                                                r"deprecated; use ranks="):
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            old = denoise_image(img, method="global", n_components=4, random_state=3,
                                n_train=300, noise_sigma=20)
    np.testing.assert_array_equal(old, new)
    with pytest.raises(ValueError, match="^n_components must be an integer >= 1"):
        with pytest.warns(DeprecationWarning):
            denoise_image(img, n_components=0)


def _noisy_ramp():
    rng = np.random.default_rng(0)
    clean = np.tile(np.linspace(0, 255, 64), (64, 1))
    return np.clip(clean + rng.normal(0, 20, clean.shape), 0, 255).astype(np.uint8)
