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
