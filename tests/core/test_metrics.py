"""PSNR, SSIM and the residual std read a band of rows at a time: the results are
the whole-image ones (scikit-image's SSIM is the spec), across band boundaries."""

import numpy as np
import pytest
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from kpca_denoise.core import metrics
from kpca_denoise.core.metrics import psnr, residual_std, ssim


def _pair(shape, seed=0, dtype=np.uint8):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 256, shape).astype(dtype)
    b = np.clip(a + rng.normal(0, 20, shape), 0, 255).astype(dtype)
    return a, b


@pytest.mark.parametrize("band", [1, 7, 256])
@pytest.mark.parametrize("shape", [(600, 500), (300, 41, 3), (13, 11)])
def test_banded_measures_equal_scikit_image_whole_image(monkeypatch, band, shape):
    monkeypatch.setattr(metrics, "BAND_ROWS", band)
    a, b = _pair(shape)
    kw = dict(gaussian_weights=True, sigma=1.5, use_sample_covariance=True, data_range=255)
    if len(shape) == 3:
        kw["channel_axis"] = 2
    assert ssim(a, b, 255) == pytest.approx(structural_similarity(a, b, **kw), rel=1e-12)
    assert psnr(a, b, 255) == pytest.approx(peak_signal_noise_ratio(a, b, data_range=255), rel=1e-12)
    assert residual_std(a, b) == pytest.approx(np.std(a.astype(float) - b), rel=1e-12)


@pytest.mark.parametrize("shape", [(10, 9), (3, 40), (1, 1)])
def test_images_smaller_than_the_window_average_the_whole_map(monkeypatch, shape):
    a, b = _pair(shape, seed=2)
    whole = ssim(a, b, 255)
    monkeypatch.setattr(metrics, "BAND_ROWS", 2)
    assert ssim(a, b, 255) == pytest.approx(whole, rel=1e-12)
    assert 0.0 < whole < 1.0


def test_float_images_and_identical_images():
    a, b = _pair((70, 50), seed=3)
    af, bf = a / 255.0, b / 255.0
    assert psnr(af, bf, 1.0) == pytest.approx(psnr(a, b, 255), rel=1e-12)
    assert psnr(a, a, 255) == float("inf")
    assert ssim(a, a, 255) == pytest.approx(1.0)
    assert residual_std(a, a) == 0.0
    with pytest.raises(ValueError, match="shapes differ"):
        psnr(a, b[:-1], 255)
