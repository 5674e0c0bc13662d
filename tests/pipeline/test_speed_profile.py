"""The time per stage: the run's stage clock charges each interval to the stage that
did the work, and agrees with the grouped core's own measurement."""

import numpy as np

from kpca_denoise import DenoiseParams, denoise_set
from kpca_denoise.core.progress import ProgressEvent
from kpca_denoise.pipeline import add_noise
from kpca_denoise.results import StageClock


def test_stage_clock_charges_each_interval_to_the_stage_that_reports_it():
    now = [0.0]
    clock = StageClock(None, clock=lambda: now[0])
    # the grouped core reports each stage when it is finished, a global step marks its
    # start with done == 0 and its progress with done > 0
    for stage, done, spent in [("grouping", 1, 3.0), ("eigensolver", 1, 5.0),
                               ("projection", 1, 0.5), ("preimage", 1, 2.0),
                               ("reassembly", 1, 0.25), ("gram", 0, 0.125),
                               ("gram", 1, 4.0), ("image", 1, 0.0625)]:
        now[0] += spent
        clock(ProgressEvent(stage, done, 1))
    now[0] += 1.0  # after the last event, until the run closes: the last stage
    clock.close()
    assert clock.seconds == {"grouping": 3.0, "eigensolver": 5.0, "projection": 0.5,
                             "preimage": 2.0, "reassembly": 0.25 + 0.125, "gram": 4.0,
                             "image": 0.0625 + 1.0}


def test_grouped_timings_match_the_cores_own_stage_times(camera):
    img = np.clip(add_noise(camera[100:196, 100:196].astype(float), 25, seed=3), 0, 255)
    res = denoise_set([img.astype(np.uint8)], DenoiseParams(noise_sigma=25.0))
    own = res.images[0].stats["grouped"][0]["seconds"]
    # the same intervals, measured by the core and by the clock around its events
    for stage in ("eigensolver", "projection", "preimage"):
        assert abs(res.timings[stage] - own[stage]) <= 0.05 * own[stage] + 0.005, (
            stage, res.timings, own)


def test_the_command_line_takes_the_fast_profile(tmp_path, capsys):
    from PIL import Image

    from kpca_denoise.cli import main

    rng = np.random.default_rng(5)
    Image.fromarray(rng.integers(0, 256, (150, 140), dtype=np.uint8)).save(tmp_path / "a.png")
    rc = main(["denoise", str(tmp_path / "a.png"), "-o", str(tmp_path / "out"), "--noise-sigma",
               "20", "--tile-size", "64", "--profile", "fast"])
    assert rc == 0
    err = capsys.readouterr().err  # captured: not a terminal
    assert "tiles 4/4" in err, err  # the last tile's line
    import json

    side = json.loads(next((tmp_path / "out").glob("*.json")).read_text())
    assert side["params"]["profile"] == "fast", side["params"]


def test_the_fast_profile_is_the_fast_preset_under_the_knobs_given():
    from kpca_denoise.core.grouped import GroupedOptions
    from kpca_denoise.params import PROFILES, ParamError

    assert set(PROFILES) == {"default", "fast"}
    fast = DenoiseParams(profile="fast")
    assert fast.grouped == GroupedOptions.preset("fast") != DenoiseParams().grouped
    mine = DenoiseParams(profile="fast", grouped={"search_radius": 7})
    assert mine.grouped == GroupedOptions.preset("fast").replace(search_radius=7)
    assert DenoiseParams.from_dict(mine.to_dict()) == mine  # a sidecar reads back the same
    try:
        DenoiseParams(profile="fastest").validate()
    except ParamError as exc:
        assert str(exc) == "profile must be one of default, fast, got 'fastest'"
    else:
        raise AssertionError("an unknown profile was accepted")


def test_the_fast_profile_is_deterministic_and_beats_the_noise(camera):
    clean = camera[64:192, 96:224].astype(float)
    noisy = add_noise(clean, 25, seed=4)
    p = DenoiseParams(noise_sigma=25.0, profile="fast")
    a = denoise_set([noisy], p).images[0].outputs[None]
    b = denoise_set([noisy], p).images[0].outputs[None]
    assert np.array_equal(a, b)
    from kpca_denoise.core.metrics import psnr

    assert psnr(clean, a, 255) > psnr(clean, noisy, 255) + 7.0


def test_a_grey_photograph_stored_as_colour_is_denoised_as_float():
    # its chrominance is rounding only: the texture measure once blurred it with a
    # kernel of 1e16 px and ran out of memory
    grey = add_noise(np.full((64, 64), 120.0), 20, seed=2)
    out = denoise_set([np.dstack([grey] * 3)], DenoiseParams(noise_sigma=20.0))
    img = out.images[0]
    assert img.error is None and np.ptp(img.outputs[None] - img.outputs[None][..., :1]) < 1e-6
    # the same noise in every channel is sqrt(3) times the given sigma in the luminance
    # (the noise model wants independent channels): less is removed, but some is
    assert np.std(img.outputs[None][..., 0]) < 0.8 * np.std(grey)


def test_a_chunk_taken_in_parts_gives_the_same_pixels(camera, monkeypatch):
    from kpca_denoise.core.grouped import denoise_grouped, driver

    # a part starts at a multiple of the pass's spectrum step (prime to the grid's rows,
    # stats.spectrum_every): the same groups are sampled whatever the parts' size
    noisy = add_noise(camera[150:246, 150:246].astype(float), 25, seed=4)
    runs = {}
    for part in (32, 10 ** 9):  # parts of 32 groups, and each chunk whole
        monkeypatch.setattr(driver, "PART_GROUPS", part)
        runs[part] = denoise_grouped(noisy, 25.0, ranks=(None, 3))
    (out_p, st_p), (out_w, st_w) = runs[32], runs[10 ** 9]
    for rank in (None, 3):  # the overlap sums in the same order: the same bits
        assert np.array_equal(out_p[rank], out_w[rank])
    assert st_p["groups"] == st_w["groups"]
    np.testing.assert_allclose(st_p["spectrum"], st_w["spectrum"], rtol=1e-12)
