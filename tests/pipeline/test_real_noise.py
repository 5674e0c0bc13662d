"""Real camera noise (docs/noise.md#real-photographs): a camera's JPEG carries
low-frequency luminance noise and almost none in the chroma (its chroma noise
reduction); the default reads it as correlated and removes it at its coarse-scale level,
while white noise, and correlated noise with noisy chroma, keep their levels."""

import numpy as np
import pytest

from kpca_denoise import DenoiseParams, denoise_image, denoise_set
from kpca_denoise.core.color import opponent_to_rgb, rgb_to_opponent
from kpca_denoise.core.nlf import COARSE_FACTOR, Box2, coarse_sigma


def _scene(n=192):
    y, x = np.mgrid[0:n, 0:n] / n
    grey = 128 + 50 * np.sin(5 * x) * np.cos(3 * y)
    return np.stack([grey, grey * 0.9 + 10, grey * 0.8 + 20], axis=-1)


def _low_frequency(shape, sigma, seed, size=4):
    """White noise through a size x size box (unit energy): std ``sigma``, its power at
    frequencies below 1 / size, as a camera's processing leaves it."""
    from scipy.ndimage import uniform_filter

    z = uniform_filter(np.random.default_rng(seed).normal(0, 1, shape), size, mode="wrap")
    return sigma * z / z.std()


def _camera_jpeg_like(sigma=3.0, seed=0):
    """The scene with low-frequency noise in the luminance only (the chroma clean), saved
    as a JPEG (quality 92, chroma subsampled) as a camera saves it."""
    import io

    from PIL import Image

    z = rgb_to_opponent(_scene())
    z[..., 0] += _low_frequency(z.shape[:2], sigma, seed)
    rgb = np.clip(np.rint(opponent_to_rgb(z)), 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, "JPEG", quality=92)
    return np.asarray(Image.open(buf).convert("RGB"))


def test_coarse_sigma_reads_white_noise_as_itself_and_box2_slices_lazily():
    rng = np.random.default_rng(3)
    noisy = 128 + rng.normal(0, 6, (256, 256))
    assert coarse_sigma(noisy) == pytest.approx(6, rel=0.1)
    b = Box2(noisy)
    assert b.shape == (128, 128)
    np.testing.assert_allclose(b[10:20, 30:41], noisy[20:40, 60:82].reshape(10, 2, 11, 2)
                               .mean(axis=(1, 3)))
    np.testing.assert_allclose(np.asarray(b)[10:20, 30:41], b[10:20, 30:41])


def test_a_camera_jpegs_low_frequency_noise_is_read_as_correlated_and_removed():
    noisy = _camera_jpeg_like()
    clean = np.clip(np.rint(_scene()), 0, 255)
    res = denoise_set([noisy], DenoiseParams()).images[0]
    model = res.stats["noise"]
    assert model["kind"] == "correlated" and model["chroma_sigma"] < 0.1 * model["white_sigma"]
    assert model["effective"] == pytest.approx(COARSE_FACTOR * model["coarse_sigma"])
    # the per-pixel std is 3 in the luminance: the finest scale reads a fraction of it,
    # the 2 x 2 scale most of it
    assert model["white_sigma"] < 1.0 and 1.5 < model["coarse_sigma"] < 4.0
    mse = lambda a: float(np.mean((a.astype(float) - clean) ** 2))  # noqa: E731
    white = denoise_image(noisy, noise_model="white")
    assert mse(res.outputs[None]) < 0.5 * mse(noisy)  # most of the noise removed
    assert mse(res.outputs[None]) < 0.6 * mse(white)  # where one white level removes little


def test_white_noise_keeps_todays_level_and_pixels():
    rng = np.random.default_rng(5)
    noisy = np.clip(np.rint(_scene() + rng.normal(0, 8, (192, 192, 3))), 0, 255).astype(np.uint8)
    auto = denoise_set([noisy], DenoiseParams()).images[0]
    assert auto.stats["noise"]["kind"] == "white"
    assert auto.noise_sigma == pytest.approx(8, rel=0.1)
    white = denoise_set([noisy], DenoiseParams(noise_model="white")).images[0]
    assert white.noise_sigma == auto.noise_sigma
    np.testing.assert_array_equal(white.outputs[None], auto.outputs[None])


def test_correlated_noise_with_noisy_chroma_keeps_its_fitted_level():
    # demosaiced noise in every channel (no chroma noise reduction): the covariance's level
    from scipy.ndimage import convolve

    k = np.outer([1.0, 2.0, 1.0], [1.0, 2.0, 1.0])[..., None]
    k /= np.sqrt(np.sum(k * k))
    grain = 6 * convolve(np.random.default_rng(2).normal(0, 1, (192, 192, 3)), k, mode="wrap")
    noisy = np.clip(np.rint(_scene() + grain), 0, 255).astype(np.uint8)
    model = denoise_set([noisy], DenoiseParams()).images[0].stats["noise"]
    assert model["kind"] == "correlated" and model["coarse_sigma"] == 0.0
    assert model["effective"] < 2.0 * model["sigma"]


def test_the_noise_model_can_be_forced_and_the_old_name_is_read():
    noisy = _camera_jpeg_like(seed=1)
    white = denoise_set([noisy], DenoiseParams(noise_model="white")).images[0].stats["noise"]
    assert white["kind"] == "white"
    forced = denoise_set([noisy[..., 0]], DenoiseParams(noise_model="correlated"))
    assert forced.images[0].stats["noise"]["kind"] == "correlated"
    assert DenoiseParams(noise_model="gaussian").noise_model == "auto"
    assert DenoiseParams.from_dict({"noise_model": "gaussian"}).noise_model == "auto"
