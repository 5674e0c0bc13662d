"""The command line's progress: one estimate of the time left for the whole run, and the
lines a log gets (kpca_denoise/cli_progress.py).  A fake clock, no sleeping."""

import io

import numpy as np
import pytest
from PIL import Image

from kpca_denoise import cli_progress
from kpca_denoise.cli import main
from kpca_denoise.cli_progress import ProgressBar, RunEstimate, work_weight
from kpca_denoise.core.progress import ProgressEvent


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def _piece(run, clock, chunks, seconds, stages=2):
    """One tile (or an untiled image) of the grouped method: its chunks of groups in each
    stage, every step reported as the driver does, ``seconds`` per chunk."""
    for stage in range(1, stages + 1):
        for c in range(1, chunks + 1):
            for step in ("grouping", "eigensolver", "projection", "preimage", "reassembly"):
                clock.t += seconds / 5
                run(ProgressEvent(step, c, chunks, message=f"stage {stage}"))


def test_the_time_left_is_the_whole_runs_by_pixels():
    # the bar's estimate covered only the current stage: "about 20 s left" at 21 s of 102
    clock = Clock()
    run = RunEstimate({0: 1e6, 1: 3e6}, clock=clock)
    run.begin(0)
    clock.t += 30.0  # the kernels' first compile: not the pace of the run
    _piece(run, clock, chunks=4, seconds=1.0)
    assert run.fraction() == pytest.approx(0.25)
    run(ProgressEvent("image", 1, 2))
    # measured from the first report inside the image (after the compile): 7.8 s for a
    # quarter of the run less that first step; three times as many pixels are left
    assert run.left() == pytest.approx(7.8 / (0.25 - 0.39 / 8 / 4) * 0.75)
    assert run.left() == pytest.approx(24.6, abs=0.1)  # the large image takes 24 s
    run.begin(1)
    _piece(run, clock, chunks=4, seconds=3.0)  # the large image: 3 s per chunk
    assert run.fraction() == pytest.approx(1.0) and run.left() == pytest.approx(0.0)


def test_tiles_and_stages_give_the_share_of_an_image():
    clock = Clock()
    run = RunEstimate({0: 4.0}, tiles={0: 4}, clock=clock)
    run.begin(0)
    assert run.fraction() == 0.0 and run.left() is None and run.text() == ""
    _piece(run, clock, chunks=2, seconds=5.0, stages=1)  # stage 1 of the first tile
    assert run.fraction() == pytest.approx(0.5 / 4)  # not half the image
    for step in ("grouping", "reassembly"):  # stage 2
        clock.t += 5.0
        run(ProgressEvent(step, 2, 2, message="stage 2"))
    run(ProgressEvent("tiles", 1, 4))
    assert run.fraction() == pytest.approx(0.25) and clock.t == 1020.0
    clock.t += 20.0
    run(ProgressEvent("tiles", 2, 4))
    # measured from the first step's report (1 s in): 39 s for half the image less it
    assert run.left() == pytest.approx(39.0 / (0.5 - 0.39 / 16) * 0.5)
    assert run.text() == "about 41 s left (run 50 %)"  # the other two tiles: 40 s
    # a stack denoised as one reports its pages; a one-stage profile has one pass
    one = RunEstimate({0: 1.0, 1: 1.0}, stages=1, clock=clock)
    one.begin(0), one.begin(1)
    one(ProgressEvent("page", 1, 4, message="stage 1"))
    assert one.fraction() == pytest.approx(0.25)


def test_weights_count_pages_and_colour():
    assert work_weight((100, 200)) == 20000
    assert work_weight((100, 200, 3)) == work_weight((100, 200, 4)) == 40000
    assert work_weight((5, 100, 200), stack=True) == 100000
    assert work_weight((1000, 64), patch_set=True) == 64000


def test_without_weights_each_image_of_the_count_weighs_one():
    clock = Clock()
    run = RunEstimate(clock=clock)
    run(ProgressEvent("image", 0, 4))
    clock.t += 10.0
    run(ProgressEvent("image", 1, 4))
    # nothing measured inside an image (the global method's fit for the whole set, a
    # cluster's images): the first image's time is not taken for the pace
    assert run.fraction() == 0.25 and run.left() is None
    clock.t += 4.0
    run(ProgressEvent("image", 2, 4))
    assert run.left() == pytest.approx(8.0)


def test_a_log_gets_the_run_s_time_left_per_tile_and_per_image():
    clock = Clock()
    buf = io.StringIO()
    bar = ProgressBar(stream=buf, clock=clock, estimate=RunEstimate({0: 1.0, 1: 1.0}, clock=clock))
    bar(ProgressEvent("image", 0, 2))
    bar.begin(0)
    for t in range(1, 5):  # a large image's tiles, 10 s each
        clock.t += 10.0
        bar(ProgressEvent("tiles", t, 4))
    bar(ProgressEvent("image", 1, 2))
    bar.begin(1)
    clock.t += 40.0
    bar(ProgressEvent("image", 2, 2))
    assert buf.getvalue().splitlines() == [
        "tiles 1/4 (10 s), run 12 %",  # the rate is measured from the first tile's end
        "tiles 2/4 (20 s), about 60 s left (run 25 %)",
        "tiles 3/4 (30 s), about 50 s left (run 38 %)",
        "tiles 4/4 (40 s), about 40 s left (run 50 %)",
        "image 1/2 done (40.0 s, about 40 s left)",
        "image 2/2 done (80.0 s)"]


def test_tiles_finishing_in_pairs_each_get_a_line_and_many_fast_ones_a_tenth():
    """Tiles at once, one per thread, are written in pairs; every one of a 12-tile photo
    gets its line, while 200 quick tiles get one per tenth (or per 5 s)."""
    clock = Clock()
    buf = io.StringIO()
    bar = ProgressBar(stream=buf, clock=clock, estimate=RunEstimate({0: 1.0, 1: 1.0}, clock=clock))
    for image, total, pause in ((0, 12, 16.0), (1, 200, 0.2)):
        bar.begin(image)
        for t in range(1, total + 1):
            clock.t += pause if t % 2 else 0.01  # the second of a pair right after
            bar(ProgressEvent("tiles", t, total))
        bar(ProgressEvent("image", image + 1, 2))
    lines = [ln.split(" (")[0] for ln in buf.getvalue().splitlines() if ln.startswith("tiles")]
    assert lines[:12] == [f"tiles {t}/12" for t in range(1, 13)]
    # the second image starts its count again: a line at its 20th tile (a tenth), not
    # held back by the first image's 12
    assert lines[12:] == [f"tiles {t}/200" for t in range(20, 201, 20)]


def test_a_log_gets_a_line_every_half_minute_of_a_long_image():
    clock = Clock()
    buf = io.StringIO()
    bar = ProgressBar(stream=buf, clock=clock, estimate=RunEstimate({0: 1.0}, clock=clock))
    bar.begin(0)
    _piece(bar, clock, chunks=10, seconds=5.0)  # 100 s, no tiles
    lines = buf.getvalue().splitlines()
    beats = [ln for ln in lines if ln.endswith(" %)")]
    # 30 s after the last of the five stage lines (5 s in), and 30 s after each beat
    assert beats == ["35 s, about 67 s left (run 35 %)", "65 s, about 36 s left (run 65 %)",
                     "95 s, about 5 s left (run 95 %)"]
    assert len(lines) == 5 + 3


def test_a_terminal_bar_shows_the_run_s_estimate():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    clock = Clock()
    buf = Tty()
    bar = ProgressBar(stream=buf, clock=clock, estimate=RunEstimate({0: 1.0, 1: 1.0}, clock=clock))
    bar.begin(0)
    _piece(bar, clock, chunks=4, seconds=2.0)
    bar(ProgressEvent("image", 1, 2))
    last = buf.getvalue().split("\r")[-1]
    assert last.startswith("image") and "1/2, about 16 s left (run 50 %)" in last


def test_the_command_line_estimates_a_run_of_several_images(tmp_path, capsys, monkeypatch):
    # the command line's own run (its pages begun as they are read, weighed by pixels):
    # a clock that moves 1 s per reading
    now = [0.0]

    def tick():
        now[0] += 1.0
        return now[0]

    monkeypatch.setattr(cli_progress, "_now", tick)
    rng = np.random.default_rng(0)
    for name, side in (("a.png", 24), ("b.png", 24), ("c.png", 48)):
        Image.fromarray(rng.integers(0, 255, (side, side), dtype=np.uint8)).save(tmp_path / name)
    rc = main(["denoise", *(str(tmp_path / n) for n in ("a.png", "b.png", "c.png")),
               "-o", str(tmp_path / "o"), "--noise-sigma", "20"])
    err = capsys.readouterr().err.splitlines()
    assert rc == 0
    images = [ln for ln in err if ln.startswith("image ")]
    assert [ln.split(" (")[0] for ln in images] == ["image 1/3 done", "image 2/3 done",
                                                     "image 3/3 done"]
    assert images[1].endswith(" left)") and images[2].endswith(" s)")


def test_a_stack_s_pages_count_one_by_one_or_as_one_in_its_tiles():
    # a stack's pages are begun together: denoised one by one, each page is a piece (the
    # first page's stages were taken for the whole stack); denoised as one ('page'
    # events), its tiles are the pieces (the first tile's pages were taken for the stack)
    clock = Clock()
    run = RunEstimate({0: 1.0, 1: 1.0, 2: 1.0}, clock=clock)
    for k in range(3):
        run.begin(k)
    _piece(run, clock, chunks=2, seconds=1.0)
    assert run.fraction() == pytest.approx(1 / 3)
    _piece(run, clock, chunks=2, seconds=1.0, stages=1)  # the second page's stage 1
    assert run.fraction() == pytest.approx(1.5 / 3)
    as_one = RunEstimate({0: 1.0, 1: 1.0}, stack_tiles={0: 4, 1: 4}, clock=clock)
    as_one.begin(0), as_one.begin(1)
    for stage in (1, 2):
        for page in (1, 2):
            as_one(ProgressEvent("page", page, 2, message=f"stage {stage}"))
    assert as_one.fraction() == pytest.approx(1 / 4)
    as_one(ProgressEvent("tiles", 1, 16))  # the motion widened the halo: 16 tiles
    as_one(ProgressEvent("page", 1, 2, message="stage 1"))
    assert as_one.fraction() == pytest.approx((1 + 0.25) / 16)


def test_a_real_tiled_colour_run_counts_each_tile_once():
    """The events of a real run (a colour photograph in tiles: three channels per chunk,
    the pilot's flat references filled after its chunks) give each tile one share: at
    the k-th tile's end the run is k/n done (the fill's events once read as a new pass,
    and a 12-tile phone photo said 'run 100 %' after six tiles)."""
    from kpca_denoise import denoise_set
    from kpca_denoise.samples import sample_images_dir
    from kpca_denoise.params import DenoiseParams

    img = np.asarray(Image.open(sample_images_dir() / "astronaut.png").convert("RGB"))[:, :300]
    est = RunEstimate({0: work_weight(img.shape)}, tiles={0: 4})
    est.begin(0)
    seen = []

    def listen(ev):
        est(ev)
        if ev.stage == "tiles":
            seen.append((ev.done, ev.total, est.fraction()))

    denoise_set([img], DenoiseParams(noise_sigma=20, tile_size=256), progress=listen)
    assert len(seen) > 1 and seen[-1][0] == seen[-1][1]
    assert [f for _, _, f in seen] == pytest.approx([d / n for d, n, _ in seen])
