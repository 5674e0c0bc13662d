import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from kpca_denoise.cli import build_parser, load_params_file, main
from kpca_denoise.params import DenoiseParams, ParamError, parse_ranks
from helpers import fake_tiles


def sidecar_of(folder):
    """The one run sidecar in ``folder``."""
    found = sorted(folder.glob("kpca-denoise-*.json"))
    assert len(found) == 1, found
    return found[0]


def _img(path, rng, shape=(40, 40), dtype=np.uint8):
    y, x = np.mgrid[0:shape[0], 0:shape[1]]
    hi = np.iinfo(dtype).max
    clean = (hi * (0.5 + 0.3 * np.sin(x / 6) * np.cos(y / 9))).astype(dtype)
    Image.fromarray(clean).save(path)
    return clean


FAST = ["--method", "global", "--ranks", "4,8", "--train-patches", "400", "-q"]


def test_end_to_end_on_a_tiny_image(tmp_path, rng, capsys):
    clean = _img(tmp_path / "tiny.png", rng)
    out = tmp_path / "out"
    rc = main(["denoise", str(tmp_path / "tiny.png"), "-o", str(out), "--add-noise", "20",
               "--seed", "3", *FAST])
    assert rc == 0
    stdout = capsys.readouterr().out
    assert "tiny.png" in stdout and "PSNR dB" in stdout and str(out.resolve()) in stdout
    for tag in ("noisy", "kpca_r4", "kpca_r8"):
        f = out / f"tiny_{tag}.png"
        assert f.is_file()
        a = np.asarray(Image.open(f))
        assert a.dtype == np.uint8 and a.shape == clean.shape
    side = json.loads(sidecar_of(out).read_text())
    assert sorted(side["files"]) == sorted(p.name for p in out.glob("tiny_*.png"))
    r8 = side["items"][0]["outputs"]["8"]
    noisy = np.asarray(Image.open(out / "tiny_noisy.png")).astype(float)
    den = np.asarray(Image.open(out / "tiny_kpca_r8.png")).astype(float)
    mse = lambda a: np.mean((a - clean) ** 2)  # noqa: E731
    assert mse(den) < mse(noisy) / 2
    assert r8["psnr"] == pytest.approx(10 * np.log10(255**2 / mse(den)), abs=1e-6)
    # the sidecar reproduces the run (the trial's noise asked for again: --params leaves
    # it out, as it would add noise to a real photograph)
    out2 = tmp_path / "again"
    assert main(["denoise", str(tmp_path / "tiny.png"), "-o", str(out2), "--params",
                 str(sidecar_of(out)), "--add-noise", "20", "-q"]) == 0
    np.testing.assert_array_equal(np.asarray(Image.open(out2 / "tiny_kpca_r8.png")), den)


def test_sixteen_bit_tiff_with_reference(tmp_path, rng, capsys):
    clean = _img(tmp_path / "clean.tif", rng, dtype=np.uint16)
    noisy = np.clip(clean + rng.normal(0, 3000, clean.shape), 0, 65535).astype(np.uint16)
    Image.fromarray(noisy).save(tmp_path / "noisy.tif")
    rc = main(["denoise", str(tmp_path / "noisy.tif"), "-o", str(tmp_path / "o"),
               "--reference", str(tmp_path / "clean.tif"), *FAST])
    assert rc == 0
    a = np.asarray(Image.open(tmp_path / "o" / "noisy_kpca_r8.tif"))
    assert a.dtype == np.uint16
    row = capsys.readouterr().out.splitlines()[2].split()
    assert "-" not in row[4]  # a PSNR value is shown
    assert 2500 <= int(row[2]) <= 3500  # the noise level in whole 16-bit units, no exponent


def test_poisson_model_says_what_it_estimated(tmp_path, capsys):
    # the table's sigma would be the stabilised domain's 1: it says 'vst', and a note
    # gives the estimated gain and Gaussian part; a 16-bit image is denoised (it used
    # to come back unchanged)
    rng = np.random.default_rng(6)
    y = np.linspace(2000.0, 50000.0, 96)[None, :] * np.ones((96, 1))
    z = np.clip(64.0 * rng.poisson(y / 64.0) + rng.normal(0, 300.0, y.shape), 0, 65535)
    Image.fromarray(z.astype(np.uint16)).save(tmp_path / "pg.tif")
    rc = main(["denoise", str(tmp_path / "pg.tif"), "-o", str(tmp_path / "o"),
               "--noise-model", "poisson-gaussian"])
    cap = capsys.readouterr()
    assert rc == 0
    assert cap.out.splitlines()[2].split()[2] == "vst"
    note = next(line for line in cap.err.splitlines() if "Poisson-Gaussian" in line)
    assert note.startswith("note: pg.tif: Poisson-Gaussian noise, gain 6") and note.isascii(), note
    out = np.asarray(Image.open(tmp_path / "o" / "pg_kpca.tif"))
    assert out.dtype == np.uint16 and np.abs(out.astype(float) - z.astype(np.uint16)).mean() > 100


def test_poisson_model_refuses_what_it_cannot_model_and_keeps_the_rest(tmp_path, capsys):
    """Under the Poisson-Gaussian model: offset data (negative beyond read noise) and a
    given gain or sigma whose noise exceeds the value range are refused in one line
    each, with nothing written for them; dark data whose negatives are read noise, a
    flat image and a tiny image with both values given are denoised (or returned)."""
    import tifffile

    rng = np.random.default_rng(7)
    yy, xx = np.mgrid[0:64, 0:64]
    y = 40.0 + 100.0 * xx / 63.0
    z8 = np.clip(4.0 * rng.poisson(y / 4.0) + rng.normal(0, 2.0, y.shape), 0, 255)
    Image.fromarray(np.round(z8).astype(np.uint8)).save(tmp_path / "grey.png")
    # counts around a zero black level: read noise takes 6 % of the pixels below 0
    dark = rng.poisson(0.5 + 2.0 * yy / 63.0) + rng.normal(0, 1.0, y.shape)
    tifffile.imwrite(tmp_path / "dark.tif", dark.astype(np.float32))
    # a black level subtracted too far in a quarter of the frame
    tifffile.imwrite(tmp_path / "offset.tif", (dark - 8.0 * (xx < 16)).astype(np.float32))
    tifffile.imwrite(tmp_path / "flat.tif", np.full((32, 32), 0.5, np.float32))
    Image.fromarray(np.round(z8[:8, :8]).astype(np.uint8)).save(tmp_path / "tiny.png")
    pg = ["--noise-model", "poisson-gaussian"]

    rc, err = _run_err(["denoise", str(tmp_path / "dark.tif"), str(tmp_path / "offset.tif"),
                        str(tmp_path / "flat.tif"), "-o", str(tmp_path / "o"), *pg], capsys)
    assert rc == 1
    errors = [e for e in err if e.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: offset.tif: negative values")
    assert "add the black level back, or use the Gaussian noise model" in errors[0]
    written = sorted(p.name for p in (tmp_path / "o").iterdir() if p.suffix == ".tif")
    assert written == ["dark_kpca.tif", "flat_kpca.tif"]
    assert any("flat.tif: the image is flat" in e and "returned unchanged" in e for e in err)
    np.testing.assert_array_equal(tifffile.imread(tmp_path / "o" / "flat_kpca.tif"), 0.5)
    # a flat image is returned with a sigma given too, under either model (the given
    # value is not range-checked against a flat image's span of 0)
    for model in (["--noise-sigma", "0.05"], [*pg, "--noise-sigma", "0"]):
        assert main(["denoise", str(tmp_path / "flat.tif"), "-o", str(tmp_path / "f"), "-q",
                     "--overwrite", *model]) == 0
        np.testing.assert_array_equal(tifffile.imread(tmp_path / "f" / "flat_kpca.tif"), 0.5)
    # more than half below 0: the rule that fired is named
    tifffile.imwrite(tmp_path / "low.tif", (dark - 2.0).astype(np.float32))
    rc, err = _run_err(["denoise", str(tmp_path / "low.tif"), "-o", str(tmp_path / "l"), *pg],
                       capsys)
    assert rc == 1 and "% of the pixels are below 0 (noise around a zero signal" in err[-1], err
    out = tifffile.imread(tmp_path / "o" / "dark_kpca.tif")
    clean = 0.5 + 2.0 * yy / 63.0
    assert np.mean((out - clean) ** 2) < 0.5 * np.mean((dark - clean) ** 2)

    for extra, part in ((["--poisson-gain", "1000"], "the given Poisson gain 1000 means a noise std "
                         "of 505 at the top of this uint8 image's values"),
                        (["--noise-sigma", "300"], "the given sigma 300 means")):
        rc, err = _run_err(["denoise", str(tmp_path / "grey.png"), "-o", str(tmp_path / "g"),
                            *pg, *extra], capsys)
        errors = [e for e in err if e.startswith("error:")]
        assert rc == 1 and len(errors) == 1 and part in errors[0], err
        assert not any((tmp_path / "g").glob("*.png"))

    rc, err = _run_err(["denoise", str(tmp_path / "tiny.png"), "-o", str(tmp_path / "t"), *pg],
                       capsys)
    assert rc == 1 and "image 8x8 is too small to estimate its Poisson gain" in err[-1]
    # both given: nothing to estimate; pure Poisson noise is sigma 0
    rc = main(["denoise", str(tmp_path / "tiny.png"), "-o", str(tmp_path / "t2"), *pg,
               "--poisson-gain", "4", "--noise-sigma", "0"])
    assert rc == 0 and (tmp_path / "t2" / "tiny_kpca.png").is_file()
    rc, err = _run_err(["denoise", str(tmp_path / "tiny.png"), "-o", str(tmp_path / "t3"),
                        "--noise-sigma", "0"], capsys)
    assert rc == 2 and err[-1].startswith("error: --noise-sigma must be > 0")


def test_a_stack_reports_every_pages_noise_model(tmp_path, capsys):
    import tifffile

    rng = np.random.default_rng(8)
    y = np.linspace(2000.0, 50000.0, 64)[None, :] * np.ones((64, 1))
    pages = [np.clip(g * rng.poisson(y / g) + rng.normal(0, 200.0, y.shape), 0, 65535)
             for g in (16.0, 64.0)]
    tifffile.imwrite(tmp_path / "st.tif", np.stack(pages).astype(np.uint16))
    rc = main(["denoise", str(tmp_path / "st.tif"), "-o", str(tmp_path / "o"),
               "--noise-model", "poisson-gaussian"])
    err = capsys.readouterr().err
    assert rc == 0 and "(page 1 of 2; every page's in the JSON report)" in err
    item = json.loads(sidecar_of(tmp_path / "o").read_text())["items"][0]
    gains = [p["noise_model"]["gain"][0] for p in item["stats"]["pages"]]
    assert gains[0] == pytest.approx(16, rel=0.25) and gains[1] == pytest.approx(64, rel=0.25)


def _run_err(args, capsys):
    rc = main(args)
    err = capsys.readouterr().err.strip().splitlines()
    return rc, err


def test_missing_input(tmp_path, capsys):
    rc, err = _run_err(["denoise", str(tmp_path / "nope.png"), "-o", str(tmp_path / "o")], capsys)
    assert rc == 2 and err == [f"error: {tmp_path / 'nope.png'}: no such file or folder"]
    assert not (tmp_path / "o").exists()


def test_corrupt_file_fails_but_others_are_written(tmp_path, rng, capsys):
    _img(tmp_path / "good.png", rng)
    (tmp_path / "bad.png").write_bytes(b"not an image at all")
    rc, err = _run_err(["denoise", str(tmp_path), "-o", str(tmp_path / "o"), *FAST], capsys)
    assert rc == 1
    assert any("bad.png: not a readable image" in e for e in err)
    assert (tmp_path / "o" / "good_kpca_r8.png").is_file()
    assert not any(p.name.startswith("bad") for p in (tmp_path / "o").iterdir())


def test_empty_folder(tmp_path, capsys):
    (tmp_path / "e").mkdir()
    rc, err = _run_err(["denoise", str(tmp_path / "e"), "-o", str(tmp_path / "o")], capsys)
    assert rc == 2 and "the folder has no supported files" in err[-1]


def test_images_in_an_output_folder_inside_the_input_folder_are_named(tmp_path, rng, capsys):
    # the walk leaves the output folder out; images already there are said not read
    (tmp_path / "in" / "out").mkdir(parents=True)
    _img(tmp_path / "in" / "a.png", rng)
    _img(tmp_path / "in" / "out" / "b.png", rng)
    rc, err = _run_err(["denoise", str(tmp_path / "in"), "-o", str(tmp_path / "in" / "out"),
                        *FAST], capsys)
    assert rc == 0
    assert err[0] == (f"note: 1 file(s) in the output folder {tmp_path / 'in' / 'out'} (inside "
                      f"the input folder {tmp_path / 'in'}) were not read, as results of an "
                      "earlier run would not be; to denoise them, choose an -o outside the "
                      "input folder")
    assert (tmp_path / "in" / "out" / "a_kpca_r8.png").is_file()
    assert not (tmp_path / "in" / "out" / "out").exists()


def test_output_that_would_overwrite_an_input(tmp_path, rng, capsys):
    _img(tmp_path / "x.png", rng)
    # an input named like an output in the output folder itself
    _img(tmp_path / "x_kpca_r4.png", rng)
    before = (tmp_path / "x_kpca_r4.png").read_bytes()
    rc, err = _run_err(["denoise", str(tmp_path / "x.png"), str(tmp_path / "x_kpca_r4.png"),
                        "-o", str(tmp_path), *FAST], capsys)
    assert rc == 2 and "would overwrite the input" in err[-1]
    assert (tmp_path / "x_kpca_r4.png").read_bytes() == before
    assert not (tmp_path / "x_kpca_r8.png").exists()


@pytest.mark.parametrize("extra,msg", [
    (["--patch-size", "0"], "--patch-size must be an integer >= 2"),
    (["--gamma", "-1"], "--gamma must be > 0"),
    (["--gamma", "nan"], "--gamma must be a finite number"),
    (["--ranks", "0,4"], "--ranks must be integers >= 1"),
    (["--ranks", "500"], "more than the"),
    (["--patch-size", "64"], "smaller than the 64x64 patch"),
    (["--landmarks", "0"], "--landmarks must be an integer >= 1"),
    (["--landmarks", "2"], "n_landmarks=2 is fewer than rank 4"),
])
def test_bad_parameters_one_line_error_no_output(tmp_path, rng, capsys, extra, msg):
    _img(tmp_path / "x.png", rng)
    args = ["denoise", str(tmp_path / "x.png"), "-o", str(tmp_path / "o"), "--method", "global",
            "--ranks", "4", "--train-patches", "200", "-q", *extra]
    rc, err = _run_err(args, capsys)
    assert rc != 0
    assert any(msg in e for e in err), err
    assert all(e.startswith("error: ") for e in err)
    out = tmp_path / "o"
    assert not out.exists() or not any(p.suffix == ".png" for p in out.iterdir())


def test_bad_ranks_syntax(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["denoise", "x.png", "-o", "o", "--ranks", "a,b"])
    assert exc.value.code == 2
    assert "ranks must be integers separated by commas" in capsys.readouterr().err


@pytest.mark.parametrize("value,ranks", [
    ("4,8,auto", (4, 8, None)), ("all,8", (None, 8)), ("4 8, 16", (4, 8, 16)),
    (["all", 8], (None, 8)), ([None, 4], (None, 4)), ((16,), (16,)), (8, (8,)),
    ("none", (None,)), (None, (None,)),
])
def test_ranks_read_alike_by_every_front_end(tmp_path, value, ranks):
    # the command line took "all,8" while a parameter file with ["all", 8] was refused
    assert parse_ranks(value) == ranks
    assert DenoiseParams(ranks=value).validate().ranks == ranks
    assert DenoiseParams.from_dict({"ranks": value}).ranks == ranks
    (tmp_path / "p.json").write_text(json.dumps({"ranks": value}))
    assert load_params_file(tmp_path / "p.json").ranks == ranks
    if isinstance(value, str):
        assert build_parser().parse_args(["denoise", "x", "-o", "o", "--ranks", value]).ranks == ranks


@pytest.mark.parametrize("value,msg", [
    ("4,4", "ranks lists 4 twice; give each rank once"),
    ([8, 4, 8], "ranks lists 8 twice; give each rank once"),
    (["all", "auto"], "ranks lists auto twice; give each rank once"),
    ([4, 0], "ranks must be integers >= 1 or 'auto', got 0"),
    ("-2", "ranks must be integers >= 1 or 'auto', got -2"),
    ([2.5], "ranks must be integers >= 1 or 'auto', got 2.5"),
    ([True], "ranks must be integers >= 1 or 'auto', got True"),
    ("4,x", "ranks must be integers separated by commas (e.g. 4,8,16) or 'auto', got '4,x'"),
    ([], "ranks must be a non-empty list such as [4, 8, 16] or ['auto']"),
    ({"a": 1}, "ranks must be a list such as [4, 8, 16]"),
])
def test_bad_ranks_are_one_line_naming_ranks(value, msg):
    for parse in (parse_ranks, lambda v: DenoiseParams(ranks=v).validate(),
                  lambda v: DenoiseParams.from_dict({"ranks": v})):
        with pytest.raises(ParamError, match=re.escape(msg)) as exc:
            parse(value)
        assert exc.value.name == "ranks" and "\n" not in str(exc.value)


@pytest.mark.parametrize("how", ["option", "file"])
def test_a_rank_given_twice_is_named_before_any_compute(tmp_path, rng, capsys, monkeypatch, how):
    # "--ranks 4,4" said "in/x.png and in/x.png would both be written here; rename one"
    import kpca_denoise.cli as cli

    monkeypatch.setattr(cli, "denoise_set", None)  # not reached
    _img(tmp_path / "x.png", rng)
    (tmp_path / "p.json").write_text(json.dumps({"params": {"ranks": [4, 4]}}))
    ranks = ["--ranks", "4,4"] if how == "option" else ["--params", str(tmp_path / "p.json")]
    rc, err = _run_err(["denoise", str(tmp_path / "x.png"), "-o", str(tmp_path / "o"), *ranks],
                       capsys)
    where = "--ranks" if how == "option" else f"{tmp_path / 'p.json'}: ranks"
    assert rc == 2 and err == [f"error: {where} lists 4 twice; give each rank once"]
    assert not (tmp_path / "o").exists()


def test_a_file_written_as_the_run_is_stopped_is_in_its_sidecar(tmp_path, rng, capsys,
                                                                monkeypatch):
    # a signal landing between a file's rename and its record left it out of the sidecar
    import os
    import signal

    import kpca_denoise.cli as cli

    for k in range(3):
        _img(tmp_path / f"x{k}.png", rng)
    write = cli.write_item

    def write_then_stop(*args, **kwargs):
        written = write(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)  # the run's handler: as Ctrl-C
        return written

    monkeypatch.setattr(cli, "write_item", write_then_stop)
    rc, err = _run_err(["denoise", *(str(tmp_path / f"x{k}.png") for k in range(3)), "-o",
                        str(tmp_path / "o"), "--method", "global", "--ranks", "4",
                        "--train-patches", "200", "-q"], capsys)
    assert rc == 143 and err[-1].startswith("error: interrupted"), err
    side = json.loads(sidecar_of(tmp_path / "o").read_text())
    assert side["interrupted"] is True and side["files"] == ["x0_kpca_r4.png"]
    assert sorted(p.name for p in (tmp_path / "o").glob("*.png")) == ["x0_kpca_r4.png"]


def test_python_dash_m_entry_point():
    r = subprocess.run([sys.executable, "-m", "kpca_denoise", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("kpca-denoise ")


def test_a_long_set_is_not_held_in_memory(tmp_path, rng, monkeypatch, capsys):
    """Twelve 1-Mpx images cost about what two do: each file is read when its turn
    comes and its pixels are let go once written (inputs and outputs)."""
    import tracemalloc

    fake_tiles(monkeypatch)
    peaks = []
    for n in (2, 12):
        src = tmp_path / f"in{n}"
        src.mkdir()
        for k in range(n):
            _img(src / f"im{k:02d}.png", rng, shape=(1000, 1000))
        tracemalloc.start()
        try:
            assert main(["denoise", str(src), "-o", str(tmp_path / f"out{n}"), "-q",
                         "--noise-sigma", "10"]) == 0
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        assert len(list((tmp_path / f"out{n}").glob("*_kpca.png"))) == n
    # ten more images held as input and output would be 20 MB more
    assert peaks[1] - peaks[0] < 5e6, [p / 1e6 for p in peaks]


def test_a_file_changed_during_the_run_fails_alone(tmp_path, rng, monkeypatch, capsys):
    from kpca_denoise.io import LoadedItem

    fake_tiles(monkeypatch)
    src = tmp_path / "in"
    src.mkdir()
    for k in range(3):
        _img(src / f"im{k}.png", rng)
    reread = LoadedItem.reread

    def replaced_first(self):
        if self.path.name == "im1.png" and self.array is None:
            _img(self.path, rng, shape=(30, 50))  # another picture under the same name
        return reread(self)

    monkeypatch.setattr(LoadedItem, "reread", replaced_first)
    out = tmp_path / "out"
    assert main(["denoise", str(src), "-o", str(out), "-q", "--noise-sigma", "10"]) == 1
    err = capsys.readouterr().err
    assert f"error: {src / 'im1.png'}: the file changed while the run was going" in err
    assert "run again" in err
    assert sorted(p.name for p in out.glob("*.png")) == ["im0_kpca.png", "im2_kpca.png"]


def test_an_image_too_large_for_memory_is_refused_before_any_compute(tmp_path, rng, monkeypatch,
                                                                      capsys):
    import kpca_denoise.cli as cli

    src = tmp_path / "big.png"
    _img(src, rng, shape=(400, 500))
    # 200,000 pixels, 3 copies (the image, one output, the read) and the engine
    need = 400 * 500 * 3 + cli.ENGINE_MEMORY
    monkeypatch.setattr(cli, "available_memory", lambda: need - 1)
    out = tmp_path / "out"
    assert main(["denoise", str(src), "-o", str(out), "--noise-sigma", "10"]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: {src}: needs about {need / 2**30:.1f} GB of memory (the image, 1 "
                   f"output(s) and the engine), {(need - 1) / 2**30:.1f} GB is available; ask "
                   "for fewer --ranks, free memory, or split the file\n")
    assert not out.exists()
    monkeypatch.setattr(cli, "available_memory", lambda: need)
    fake_tiles(monkeypatch)
    assert main(["denoise", str(src), "-o", str(out), "-q", "--noise-sigma", "10"]) == 0


def test_a_patch_sets_metrics_are_the_windows(tmp_path, capsys):
    # a patch set (N, 8, 8) is measured on its samples side by side, as the window
    # measures it; SSIM read the array as an image of N rows and 8 channels (the
    # command line said 0.725 where the window said 0.969 for the same digits)
    from kpca_denoise.core.metrics import ssim
    from kpca_denoise.gui.jobs import compute_metrics
    from kpca_denoise.pipeline import sample_mosaic

    from pathlib import Path

    with np.load(Path(__file__).parents[2] / "sample_images" / "digits.npz") as z:
        clean = z["images"][:120]
    np.savez(tmp_path / "d.npz", digits=clean)
    assert main(["denoise", str(tmp_path / "d.npz"), "-o", str(tmp_path / "o"),
                 "--add-noise", "25", "--ranks", "16", "--seed", "1", "-q"]) == 0
    got = json.loads(sidecar_of(tmp_path / "o").read_text())["items"][0]["outputs"]["16"]
    with np.load(tmp_path / "o" / "d_kpca_r16.npz") as z:
        out = z["digits"]
    window = compute_metrics(out, clean, clean.dtype, True)
    assert got["ssim"] == pytest.approx(window["ssim"], abs=1e-12)
    assert got["psnr"] == pytest.approx(window["psnr"], abs=1e-12)
    assert got["ssim"] == pytest.approx(ssim(sample_mosaic(clean), sample_mosaic(out), 255.0))
    # PSNR over the samples alone (the mosaic's empty slot would dilute the error)
    mse = np.mean((out.astype(float) - clean) ** 2)
    assert got["psnr"] == pytest.approx(10 * np.log10(255.0 ** 2 / mse), abs=1e-9)
    assert sample_mosaic(np.ones((5, 2, 2))).shape == (2 * 2, 3 * 2)  # rows of 3


@pytest.mark.parametrize("args", [["-dash.png"], ["a.png", "-dash.png"]])
def test_a_name_starting_with_a_dash_says_how_to_give_it(tmp_path, capsys, monkeypatch, args):
    # '-dash.png' alone gave "the following arguments are required: INPUT"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "-dash.png").write_bytes(b"")
    with pytest.raises(SystemExit) as exc:
        main(["denoise", *args, "-o", "out"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1, err
    assert "-dash.png starts with '-' and was read as an option: write ./-dash.png, or put it " \
           "after --" in err[0]


def test_a_reference_folder_matching_no_name_says_so(tmp_path, rng, capsys, monkeypatch):
    # the run went on without PSNR and said nothing
    fake_tiles(monkeypatch)
    _img(tmp_path / "x.png", rng)
    (tmp_path / "clean").mkdir()
    _img(tmp_path / "clean" / "other.png", rng)
    rc, err = _run_err(["denoise", str(tmp_path / "x.png"), "-o", str(tmp_path / "o"),
                        "--reference", str(tmp_path / "clean"), "--noise-sigma", "10", "-q"],
                       capsys)
    assert rc == 0
    assert err[0] == (f"note: --reference {tmp_path / 'clean'}: no file there has an input's name "
                      "(x.png); PSNR and SSIM are not shown")


def test_the_command_runs_where_numba_cannot_cache_next_to_its_code(tmp_path):
    """A non-root user of a root-owned install with no writable home: numba found no
    cache folder and every command, --version included, ended in a traceback.  Made
    here (also as root) with an installed copy whose __pycache__ folders cannot be
    made (a file has the name) and a home that is not a folder."""
    import shutil

    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    inst = tmp_path / "site"
    shutil.copytree(root / "kpca_denoise", inst / "kpca_denoise",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for d in {p.parent for p in (inst / "kpca_denoise").rglob("*.py")}:
        (d / "__pycache__").write_bytes(b"")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NUMBA_CACHE_DIR", "XDG_CACHE_HOME", "PYTHONPATH"))}
    env.update(HOME="/dev/null/nohome", TMPDIR=str(tmp), PYTHONDONTWRITEBYTECODE="1")
    # the failure is real here: numba itself finds no cache folder for a module there
    (inst / "probe.py").write_text("import numba\n@numba.njit(cache=True)\ndef f():\n    return 1\n")
    (inst / "__pycache__").write_bytes(b"")
    r = subprocess.run([sys.executable, "-c", "import probe"], cwd=inst,
                       env=env, capture_output=True, text=True)
    assert r.returncode != 0 and "no locator available" in r.stderr
    # the library imported and used (not only the command line): no traceback, no word
    r = subprocess.run([sys.executable, "-c", "import numpy as np; import kpca_denoise.core.kernels; "
                        "from kpca_denoise import denoise_image; "
                        "print(denoise_image(np.full((24, 24), 9, np.uint8), noise_sigma=5).shape)"],
                       cwd=inst, env=env, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "(24, 24)" and r.stderr == "", r.stderr[-800:]
    shutil.rmtree(tmp / f"kpca-denoise-numba-{os.getuid()}")
    r = subprocess.run([sys.executable, "-m", "kpca_denoise", "--version"], cwd=inst, env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("kpca-denoise "), r.stderr[-800:]
    assert r.stderr == ""  # the user's own folder in the temporary folder: nothing to say
    assert (tmp / f"kpca-denoise-numba-{os.getuid()}").is_dir()
    # that folder taken by someone else (not trusted): a folder for this run, one line
    shutil.rmtree(tmp / f"kpca-denoise-numba-{os.getuid()}")
    (tmp / f"kpca-denoise-numba-{os.getuid()}").write_bytes(b"")
    r = subprocess.run([sys.executable, "-m", "kpca_denoise", "--version"], cwd=inst, env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("kpca-denoise "), r.stderr[-800:]
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith(
        "note: no writable cache folder for numba's compiled code; using "), r.stderr
