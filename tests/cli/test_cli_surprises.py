"""Nothing surprising on the command line (issue 64): a sidecar reused on real photographs
adds no noise, an interrupted batch resumes, a damaged TIFF header, a closed or full
stdout, a bad NUMBA_NUM_THREADS and a missing display each end in one line with the
documented exit code, and the help teaches.  Subprocesses where the terminal is the
point."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tifffile
from PIL import Image

import kpca_denoise.cli as cli
from cli_helpers import no_compute, run_cli, sidecars, smooth  # noqa: F401 (a fixture)
from kpca_denoise.cli import main
from kpca_denoise.display import debian_package, display_problem
from kpca_denoise.io.writing import host_tag

ROOT = Path(__file__).resolve().parents[2]
FAST = ["--noise-sigma", "15", "-q"]


def _command(args, tmp_path, env=None, shell_redirect=""):
    """The command in a fresh process: (exit code, stderr lines, stdout)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    env = {k: v for k, v in env.items() if v is not None}
    cmd = [sys.executable, "-m", "kpca_denoise", *args]
    if shell_redirect:
        cmd = ["sh", "-c", " ".join(f"'{c}'" for c in cmd) + " " + shell_redirect]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=not shell_redirect,
                          stderr=subprocess.PIPE if shell_redirect else None, text=True,
                          timeout=300)
    return proc.returncode, proc.stderr.strip().splitlines(), proc.stdout or ""


# -- a sidecar adds no noise to real photographs ------------------------------------------


def test_the_quick_starts_sidecar_adds_no_noise_to_a_real_photo(tmp_path, capsys):
    clean = tmp_path / "samples"
    clean.mkdir()
    Image.fromarray(np.asarray(Image.open(ROOT / "sample_images" / "camera.png"))[:64, :64]).save(
        clean / "camera.png")
    # the README's quick start: kpca-denoise denoise sample_images --add-noise 25 -o results
    rc, errs, _ = run_cli(["denoise", str(clean), "--add-noise", "25", "-o",
                           str(tmp_path / "results"), "-q"], capsys)
    assert rc == 0, errs
    (side,) = sidecars(tmp_path / "results")
    data = json.loads(side.read_text())
    assert data["trial"] == {"add_noise": 25.0} and "add_noise" not in data["params"]
    photo = tmp_path / "my.png"  # a real noisy photograph: its noise is its own
    Image.fromarray(smooth((64, 64), seed=3)).save(photo)
    rc, errs, cap = run_cli(["denoise", str(photo), "-o", str(tmp_path / "out"), "--params",
                             str(side), "-q"], capsys)
    assert rc == 0, errs
    assert errs == [f"note: --params {side}: took nothing but the defaults; left out add_noise "
                    "25.0 (a trial on clean images: give --add-noise or --reference again to "
                    "repeat it)"]
    assert sorted(p.name for p in (tmp_path / "out").glob("*.png")) == ["my_kpca.png"]
    (mine,) = sidecars(tmp_path / "out")
    assert "trial" not in json.loads(mine.read_text())
    rc, _, _ = run_cli(["denoise", str(photo), "-o", str(tmp_path / "plain"), "-q"], capsys)
    assert rc == 0
    assert np.array_equal(np.asarray(Image.open(tmp_path / "out" / "my_kpca.png")),
                          np.asarray(Image.open(tmp_path / "plain" / "my_kpca.png")))
    # asked again, the trial is repeated
    rc, errs, _ = run_cli(["denoise", str(photo), "-o", str(tmp_path / "again"), "--params",
                           str(side), "--add-noise", "25", "-q"], capsys)
    assert rc == 0 and (tmp_path / "again" / "my_noisy.png").is_file()
    assert "left out" not in errs[0]


# -- batches resume ---------------------------------------------------------------------


def _folder(tmp_path, names=("a/x.png", "b/x.png", "c.png")):
    src = tmp_path / "in"
    for k, name in enumerate(names):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(smooth((32, 32), seed=k)).save(src / name)
    return src


def test_an_interrupted_batch_resumes_where_it_stopped(tmp_path, capsys, monkeypatch):
    src, out = _folder(tmp_path), tmp_path / "o"
    real, written = cli.write_item, []

    def stop_after_one(*a, **k):  # Ctrl-C as the second input is written
        if written:
            raise KeyboardInterrupt
        written.append(1)
        return real(*a, **k)

    monkeypatch.setattr(cli, "write_item", stop_after_one)
    assert run_cli(["denoise", str(src), "-o", str(out), *FAST], capsys)[0] == 130
    (side,) = sidecars(out)
    assert json.loads(side.read_text())["interrupted"] is True
    monkeypatch.setattr(cli, "write_item", real)
    rc, errs, cap = run_cli(["denoise", str(src), "-o", str(out), *FAST], capsys)
    assert rc == 0, errs
    assert errs == [f"note: 1 of 3 inputs already done in {out} with these parameters (c.png), "
                    "skipped; --overwrite computes them again"]
    assert "a/x_kpca.png" in cap.out and "b/x_kpca.png" in cap.out  # paths, not names
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.png")) == [
        "a/x_kpca.png", "b/x_kpca.png", "c_kpca.png"]
    rc, errs, _ = run_cli(["denoise", str(src), "-o", str(out), *FAST], capsys)
    assert rc == 0 and errs[0].startswith("note: 3 of 3 inputs already done")
    assert len(sidecars(out)) == 2  # nothing computed: no new sidecar


def test_other_parameters_refuse_and_a_part_in_a_sub_folder_is_cleaned(tmp_path, capsys,
                                                                       no_compute):
    src, out = _folder(tmp_path, ("a/x.png",)), tmp_path / "o"
    (out / "a").mkdir(parents=True)
    Image.fromarray(smooth((32, 32))).save(out / "a" / "x_kpca.png")  # of an unknown run
    stale = out / "a" / f".x_kpca.kpca-{host_tag()}-999999999-abc.png.part"
    stale.write_bytes(b"half")
    rc, errs, _ = run_cli(["denoise", str(src), "-o", str(out), *FAST], capsys)
    assert rc == 2 and not stale.exists()
    assert errs[-1] == (f"error: {out / 'a' / 'x_kpca.png'}: the output already exists; use "
                        "--overwrite to replace it or choose another folder with -o")


def test_outputs_of_other_parameters_are_named_as_such(tmp_path, capsys):
    src, out = _folder(tmp_path, ("x.png",)), tmp_path / "o"
    assert run_cli(["denoise", str(src), "-o", str(out), *FAST], capsys)[0] == 0
    (side,) = sidecars(out)
    rc, errs, _ = run_cli(["denoise", str(src), "-o", str(out), "--noise-sigma", "20", "-q"],
                          capsys)
    assert rc == 2 and errs == [f"error: {out / 'x_kpca.png'}: the output already exists, made "
                                f"with other parameters ({side.name}); use --overwrite to "
                                "replace it or choose another folder with -o"]
    assert run_cli(["denoise", str(src), "-o", str(out), "--noise-sigma", "20", "-q",
                    "--overwrite"], capsys)[0] == 0


def test_an_interruption_before_the_first_output_leaves_no_folder(tmp_path, capsys,
                                                                  monkeypatch):
    src, out = _folder(tmp_path), tmp_path / "new" / "o"

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "denoise_set", interrupted)
    rc, errs, _ = run_cli(["denoise", str(src), "-o", str(out), *FAST], capsys)
    assert rc == 130 and errs == [f"error: {cli.INTERRUPTED[len('error: '):]}"]
    assert not (tmp_path / "new").exists()  # nor its sub-folders a/ and b/


# -- one line each, the documented exit code ----------------------------------------------


def test_a_header_claiming_100000_squared_pixels_is_refused_before_reading(tmp_path):
    tifffile.imwrite(tmp_path / "small.tif", np.zeros((8, 8), np.uint8))
    data = bytearray((tmp_path / "small.tif").read_bytes())
    with tifffile.TiffFile(tmp_path / "small.tif") as tf:
        for tag in ("ImageWidth", "ImageLength"):
            t = tf.pages[0].tags[tag]
            data[t.valueoffset:t.valueoffset + 4] = (100000).to_bytes(4, "little")
    (tmp_path / "huge.tif").write_bytes(bytes(data))
    rc, err, _ = _command(["denoise", "huge.tif", "-o", "o", "-q"], tmp_path)
    assert rc == 2, err
    assert err == ["error: huge.tif: the TIFF's header is damaged (it lists 1 of the 12500 "
                   "strips of its 100000x100000 pixels); the file is corrupt or cut short: save "
                   "it again from its source", "error: none of the inputs could be read"]
    assert not (tmp_path / "o").exists()


def test_a_closed_stdout_is_one_line_before_any_compute(tmp_path):
    Image.fromarray(smooth((32, 32))).save(tmp_path / "x.png")
    rc, err, _ = _command(["denoise", "x.png", "-o", "o", *FAST], tmp_path,
                          shell_redirect=">&-")
    assert rc == 2 and err == ["error: standard output is closed; give the command one "
                               "(> summary.txt, or > /dev/null to drop the summary)"]
    assert not (tmp_path / "o").exists()


def test_numba_num_threads_zero_is_one_line(tmp_path):
    rc, err, _ = _command(["denoise", "x.png", "-o", "o"], tmp_path,
                          env={"NUMBA_NUM_THREADS": "0"})
    assert rc == 2 and len(err) == 1 and err[0].startswith(
        "error: NUMBA_NUM_THREADS=0: the number of threads must be a whole number of at least 1")


def test_the_window_without_a_display_is_one_line(tmp_path):
    rc, err, _ = _command(["gui"], tmp_path, env={"DISPLAY": None, "WAYLAND_DISPLAY": None,
                                                   "QT_QPA_PLATFORM": None})
    if not sys.platform.startswith("linux"):
        pytest.skip("the display is checked on Linux")
    assert rc == 2 and err == [
        "error: no display for the window: DISPLAY is not set (no desktop session here); start "
        "it from a desktop session or over ssh -X, or use 'kpca-denoise denoise' on the "
        "command line"]


def test_a_missing_xcb_library_is_named_with_its_package(monkeypatch):
    import kpca_denoise.display as display

    assert debian_package("libxcb-icccm.so.4") == "libxcb-icccm4"
    assert debian_package("libxkbcommon-x11.so.0") == "libxkbcommon-x11-0"
    assert debian_package("libxcb-cursor.so.0") == "libxcb-cursor0"
    monkeypatch.setattr(display, "_x_server_running", lambda d: True)
    monkeypatch.setattr(display, "_missing_libraries", lambda plugin: ["libxcb-cursor.so.0"])
    assert display_problem({"DISPLAY": ":0"}, "linux") == (
        "the window cannot open: Qt's xcb platform plugin needs libxcb-cursor.so.0, missing "
        "here; install them (Debian/Ubuntu: sudo apt install libxcb-cursor0)")
    assert display_problem({"QT_QPA_PLATFORM": "offscreen"}, "linux") is None
    assert display_problem({}, "darwin") is None


def test_version_loads_neither_numpy_nor_numba(tmp_path):
    code = ("import sys; from kpca_denoise.entry import main; main(['--version']); "
            "print('numba' in sys.modules, 'kpca_denoise.cli' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert out.stdout.splitlines() == ["kpca-denoise 0.1.0", "False False"], out.stderr


# -- help that teaches, and the smaller items --------------------------------------------


def test_the_help_shows_where_to_start_and_explains_the_outputs(tmp_path):
    rc, _, top = _command(["--help"], tmp_path)
    assert rc == 0 and "start with:" in top
    assert "kpca-denoise denoise photo.png -o results" in top and "kpca-denoise gui" in top
    rc, _, text = _command(["denoise", "--help"], tmp_path)
    assert rc == 0
    for part in ("input and output:", "noise:", "method:", "performance:", "batch:",
                 "examples:", "_kpca", "_rK", "sidecar", "--train-patches N",
                 "--iterations N", "--params FILE.json"):
        assert part in text, part
    assert "N_TRAIN" not in text and "PREIMAGE_ITERATIONS" not in text


def test_workers_lost_during_a_run_are_named():
    assert cli.workers_lost_note({"tcp://a:1", "tcp://a:2"}, {"tcp://a:1", "tcp://a:2"}) is None
    assert cli.workers_lost_note(set(), set()) is None  # no cluster
    assert cli.workers_lost_note({"tcp://a:1", "tcp://a:2"}, {"tcp://a:1", "tcp://a:3"}) == (
        "note: 1 Dask worker(s) left the cluster during the run (died, or were replaced); their "
        "tasks ran again on the others, the outputs are complete (a worker out of memory is "
        "the usual cause: fewer --workers)")


def test_a_params_file_with_a_bom_or_a_grouped_preset_is_read(tmp_path, capsys):
    p = tmp_path / "p.json"
    p.write_text('{"grouped": "single-stage", "ranks": [4]}', encoding="utf-8-sig")
    params = cli.load_params_file(p)
    assert params.grouped.two_stage is False and params.ranks == (4,)
    p.write_text('{"grouped": {"kapa1": 4}}')
    with pytest.raises(cli.UsageError) as err:
        cli.load_params_file(p)
    assert "unknown grouped option 'kapa1'" in str(err.value)
    assert "kernel" not in str(err.value) and "patch_size" not in str(err.value)


def test_a_grouped_profile_with_the_global_method_is_refused(tmp_path, capsys, no_compute):
    Image.fromarray(smooth((32, 32))).save(tmp_path / "x.png")
    rc, errs, _ = run_cli(["denoise", str(tmp_path / "x.png"), "-o", str(tmp_path / "o"),
                           "--method", "global", "--profile", "fast", "-q"], capsys)
    assert rc == 2 and errs == ["error: --profile fast is a preset of the grouped method; "
                                "--method global does not use it: omit --profile"]
