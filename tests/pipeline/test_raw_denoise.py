"""Camera mosaics through the pipeline (docs/raw.md): the Poisson-Gaussian parameters of
each CFA plane estimated from the mosaic, the four planes denoised jointly, tiles aligned
to the pattern, and RAW files through denoise_image and the command line."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kpca_denoise import DenoiseParams, denoise_image, denoise_mosaic
from kpca_denoise.core.cfa import POSITIONS, Mosaic, PlaneStabiliser, decorrelation
from kpca_denoise.prepare import mosaic_stabiliser

rawpy = pytest.importorskip("rawpy")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "io"))
from test_raw import make_dng  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

#: an ISO 6400-like 14-bit sensor: gain (DN per electron) and read noise (DN) per plane
GAIN = np.array([3.0, 2.5, 2.5, 3.5])
READ = np.array([16.0, 14.0, 14.0, 18.0])
BLACK, WHITE = 512, 16383


def scene(h, w):
    """A smooth scene above black (DN): a ramp in x times a wave in y, dark to bright."""
    yy, xx = np.mgrid[0:h, 0:w] / max(h, w)
    return (0.02 + 0.98 * xx ** 2) * (0.6 + 0.4 * np.cos(3 * yy)) * 3000


def sensor(clean, seed):
    """``clean`` (DN above black) with Poisson-Gaussian noise per CFA position, the black
    level added, clipped to the white level, as uint16."""
    rng = np.random.default_rng(seed)
    out = np.empty_like(clean)
    for k, (y, x) in enumerate(POSITIONS):
        c = clean[y::2, x::2]
        out[y::2, x::2] = GAIN[k] * rng.poisson(c / GAIN[k]) + rng.normal(0, READ[k], c.shape)
    return np.clip(np.rint(out + BLACK), 0, WHITE).astype(np.uint16)


def test_the_poisson_gaussian_parameters_of_each_plane_are_within_10_percent():
    noisy = sensor(scene(320, 320), seed=2)
    noisy[5, 7] = WHITE  # a hot photosite and a clipped one are left out of the fit
    noisy[100, 100] = 16000
    m = Mosaic(noisy, "RGGB", BLACK, WHITE)
    vst = mosaic_stabiliser(m.planes(), m, DenoiseParams())
    np.testing.assert_allclose(vst.gain, GAIN, rtol=0.1)
    np.testing.assert_allclose(vst.sigma, READ, rtol=0.1)
    np.testing.assert_array_equal(vst.offset, [BLACK] * 4)


def test_clipped_highlights_do_not_pull_the_gain_down():
    clean = scene(320, 320)
    clean[:, 200:] = 20000  # a third of the frame saturated at the white level
    m = Mosaic(sensor(clean, seed=3), "RGGB", BLACK, WHITE)
    vst = mosaic_stabiliser(m.planes(), m, DenoiseParams())
    np.testing.assert_allclose(vst.gain, GAIN, rtol=0.15)


def textured_mosaic(gain, read, seed):
    """sample_images/camera.png's 192x192 centre as a grey scene's RGGB mosaic (linear,
    up to 12000 DN above black), with Poisson-Gaussian noise of one gain and read noise;
    and the noise std at the mosaic's median level."""
    from PIL import Image

    a = np.asarray(Image.open(ROOT / "sample_images" / "camera.png"), dtype=np.float64)
    a = a[160:352, 160:352] / 255.0
    clean = np.where(a <= 0.04045, a / 12.92, ((a + 0.055) / 1.055) ** 2.4) * 12000.0
    rng = np.random.default_rng(seed)
    noisy = gain * rng.poisson(clean / gain) + rng.normal(0.0, read, clean.shape)
    noisy = np.clip(np.rint(noisy + BLACK), 0, WHITE).astype(np.uint16)
    return noisy, float(np.sqrt(gain * np.median(clean) + read ** 2))


def test_a_photographs_texture_is_not_read_as_noise_by_much():
    # each half-resolution plane alone read 2.3 to 2.9 times the noise std here (its
    # texture); the four stabilised planes' joint patches bring that down
    noisy, true = textured_mosaic(1.5, 6.0, seed=8)
    m = Mosaic(noisy, "RGGB", BLACK, WHITE)
    vst = mosaic_stabiliser(m.planes(), m, DenoiseParams())
    level = np.median(noisy.astype(float)) - BLACK
    read = np.sqrt(vst.gain * level + vst.sigma ** 2) / true
    assert np.all(read < 1.6) and np.all(read > 0.8), read


def test_the_planes_are_decorrelated_orthonormally_for_every_bayer_pattern():
    rng = np.random.default_rng(9)
    x = rng.normal(size=(5, 6, 4))
    for cfa in ("RGGB", "BGGR", "GRBG", "GBRG"):
        M = decorrelation(cfa)
        np.testing.assert_allclose(M @ M.T, np.eye(4), atol=1e-12)
        v = PlaneStabiliser(np.ones(4), np.ones(4), cfa=cfa)
        np.testing.assert_allclose(v.correlate(v.decorrelate(x)), x, atol=1e-12)
        w = v.decorrelate(np.ones((1, 1, 4)))  # a grey cell: all in the sum, none in the rest
        np.testing.assert_allclose(w[0, 0], [2.0, 0.0, 0.0, 0.0], atol=1e-12)
    # the two greens' difference is the last channel, R - B the second
    M = decorrelation("GBRG")
    assert M[3, 0] > 0 > M[3, 3] and M[1, 2] > 0 > M[1, 1]


def test_the_mosaic_is_denoised_in_its_dtype_and_the_noise_recorded():
    clean = scene(96, 128)
    noisy = sensor(clean, seed=4)
    out, stats = denoise_mosaic(noisy, black=BLACK, white=WHITE, return_stats=True)
    assert out.shape == noisy.shape and out.dtype == np.uint16

    def err(a):
        return np.sqrt(np.mean((a.astype(float) - BLACK - clean) ** 2))
    assert err(out) < 0.6 * err(noisy)
    nm = stats["noise_model"]
    assert nm["model"] == "poisson-gaussian" and len(nm["gain"]) == 4 and nm["cfa"] == "RGGB"
    # no bias at the black-level floor: the exact unbiased inverse
    assert abs(np.mean(out[:, :16].astype(float) - BLACK - clean[:, :16])) < 2.0


def test_tiles_aligned_to_the_pattern_give_the_whole_result():
    noisy = sensor(scene(256, 320), seed=5)  # planes 128x160: tiles of 64
    whole = denoise_mosaic(noisy, black=BLACK, white=WHITE, profile="fast")
    tiled = denoise_mosaic(noisy, black=BLACK, white=WHITE, profile="fast", tile_size=64)
    np.testing.assert_array_equal(tiled, whole)


def test_a_raw_path_goes_through_denoise_image(tmp_path):
    noisy = sensor(scene(64, 96), seed=6)
    p = make_dng(tmp_path / "shot.dng", noisy, black=(BLACK,) * 4, white=WHITE)
    out = denoise_image(p, profile="fast")
    np.testing.assert_array_equal(out, denoise_mosaic(noisy, black=BLACK, white=WHITE,
                                                      profile="fast"))


def test_the_command_line_writes_a_dng_beside_the_jpeg_and_records_the_noise(tmp_path):
    from PIL import Image

    noisy = sensor(scene(64, 96), seed=7)
    make_dng(tmp_path / "photo.dng", noisy, black=(BLACK,) * 4, white=WHITE)
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 255, (48, 48, 3), dtype=np.uint8)).save(tmp_path / "photo.jpg")
    bad = tmp_path / "broken.cr2"
    bad.write_bytes(b"II*\x00" + bytes(300))
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "kpca_denoise", "denoise", str(tmp_path), "-o",
                        str(out), "--profile", "fast", "-q"], capture_output=True, text=True)
    assert r.returncode == 1, r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "broken.cr2" in errors[0]
    assert (out / "photo_kpca.dng").is_file() and (out / "photo_kpca.jpg").is_file()
    with rawpy.imread(str(out / "photo_kpca.dng")) as raw:
        assert raw.raw_image_visible.dtype == np.uint16
        assert raw.raw_image_visible.shape == noisy.shape and raw.white_level == WHITE
        assert raw.black_level_per_channel == [BLACK] * 4
    side = json.loads(next(out.glob("*.json")).read_text())
    entry = next(e for e in side["items"] if e["input"].endswith("photo.dng"))
    assert len(entry["stats"]["noise_model"]["gain"]) == 4
    assert (tmp_path / "photo.dng").read_bytes()  # the original stays
