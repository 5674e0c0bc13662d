"""Refusals in one line, found by a sweep of hostile inputs: numbers too large for a
float, a set that is not a list of images, folders the run cannot list, a closed or full
stdout, paths that lead nowhere, options another method uses, inputs of one name in two
folders.  Each test checks the message, the exit code and the files on disk.
"""

import os

import numpy as np
import pytest
from PIL import Image

from kpca_denoise import denoise_image, denoise_set
from kpca_denoise.cli import main
from kpca_denoise.params import DenoiseParams
from cli_helpers import no_compute, run_cli, smooth  # noqa: F401 (a fixture)


def test_a_missing_reference_and_a_dangling_output_link_are_named(tmp_path, capsys, no_compute):
    # "unsupported file type '(none)'" and "cannot create the output folder (File exists)"
    Image.fromarray(smooth((32, 32))).save(tmp_path / "x.png")
    (tmp_path / "gone").symlink_to(tmp_path / "nowhere")
    for args, msg in (
            (["-o", str(tmp_path / "o"), "--reference", str(tmp_path / "nodir") + "/"],
             f"error: --reference {tmp_path / 'nodir'}/: no such file or folder; give the clean "
             "image"),
            (["-o", str(tmp_path / "gone")],
             f"error: {tmp_path / 'gone'}: the output path is a link to nothing "
             f"({tmp_path / 'nowhere'}); create its target or choose another folder with -o")):
        rc, errs, _ = run_cli(["denoise", str(tmp_path / "x.png"), *args, "-q"], capsys)
        assert rc == 2 and len(errs) == 1 and errs[0].startswith(msg), errs
    assert not (tmp_path / "o").exists() and not (tmp_path / "nowhere").exists()


def test_two_failing_files_of_one_name_are_told_apart(tmp_path, capsys):
    # both said "img.png: ..."; a 1x1 image was told to use a smaller patch than exists
    for sub, side in (("x", 1), ("y", 3)):
        (tmp_path / sub).mkdir()
        Image.fromarray(np.zeros((side, side), np.uint8)).save(tmp_path / sub / "img.png")
    rc, errs, out = run_cli(["denoise", str(tmp_path / "x" / "img.png"),
                          str(tmp_path / "y" / "img.png"), "-o", str(tmp_path / "o"), "-q"], capsys)
    assert rc == 1 and errs == [
        "error: x/img.png: image 1x1 is smaller than the 5x5 patch; an image needs at least 2x3 "
        "pixels",
        "error: y/img.png: image 3x3 is smaller than the 5x5 patch; use a patch size of 2 or less"]
    # a patch as large as the image is one patch: nothing to group with
    res = denoise_set([np.zeros((3, 3), np.uint8)], DenoiseParams(patch_size=3, noise_sigma=5.0))
    assert res.images[0].error == ("image 0: image 3x3 holds fewer than two 3x3 patches; use a "
                                   "patch size of 2 or less")
    assert out.out == ""  # no table of nothing
    assert not list((tmp_path / "o").rglob("*.png"))


def test_the_library_executor_bounds_its_workers_as_the_command_does():
    from kpca_denoise.executor import Executor, ExecutorError
    from kpca_denoise.params import WORKERS_PER_CPU

    most = WORKERS_PER_CPU * (os.cpu_count() or 1)
    with pytest.raises(ExecutorError, match=f"--workers must be at most {most} "):
        Executor(workers=most + 1)
    assert Executor(workers=most).workers == most  # nothing started until entered


def test_numbers_too_large_for_a_float_are_named():
    # an int beyond float range raised OverflowError from math.isfinite
    from kpca_denoise.params import ParamError

    huge = 10 ** 400
    cases = [(dict(noise_sigma=huge), "noise_sigma must be a finite number"),
             (dict(gamma=huge), "gamma must be a finite number"),
             (dict(grouped={"kappa2": huge}), "grouped kappa2 must be a finite number"),
             (dict(grouped={"group_size": huge}), "grouped group_size must be an integer from"),
             (dict(patch_size=2 ** 31), "patch_size must be an integer >= 2 (pixels), got "
                                        "2147483648 (at most 2147483647)"),
             (dict(ranks=[10 ** 20]), "(at most 2147483647)")]
    for kw, words in cases:
        with pytest.raises(ParamError) as exc:
            DenoiseParams(**kw).validate()
        assert words in str(exc.value), (kw, str(exc.value))


def test_huge_numbers_in_a_params_file_are_one_line(tmp_path, capsys, no_compute):
    Image.fromarray(smooth((32, 32))).save(tmp_path / "x.png")
    (tmp_path / "p.json").write_text('{"noise_sigma": 1' + "0" * 400 + "}")
    rc = main(["denoise", str(tmp_path / "x.png"), "-o", str(tmp_path / "o"), "--params",
               str(tmp_path / "p.json"), "-q"])
    err = capsys.readouterr().err.splitlines()
    assert rc == 2 and len(err) == 1 and "noise_sigma must be a finite number" in err[0], err
    assert not (tmp_path / "o").exists()


def test_the_library_refuses_what_is_not_a_list_of_images():
    # a path looped over its characters, a dict over its keys, an int raised from list()
    img = smooth((32, 32))
    for images, kind in (("a.png", "str"), ({"a": img}, "dict"), (5, "int")):
        with pytest.raises(TypeError, match=f"images must be a list of arrays, got {kind}; "
                                            "read files first"):
            denoise_set(images)
    with pytest.raises(ValueError, match="image 0: a file name, not an image; read it first"):
        denoise_image("x.png")
    from kpca_denoise.params import ParamError

    with pytest.raises(ParamError, match="^n_components must be an integer >= 1, or None"):
        denoise_image(img, n_components=0)
    with pytest.raises(ParamError, match="^random_state must be a non-negative integer"):
        denoise_image(img, random_state=-1)
    with pytest.raises(ParamError, match=r"^profile must be one of default, fast, got \['fast'\]"):
        DenoiseParams(profile=["fast"]).validate()


def test_an_unreadable_folder_in_a_tree_is_named(tmp_path, monkeypatch):
    # os.walk skipped a folder it could not list: its images were lost without a word
    import kpca_denoise.io.inputs as inputs
    from kpca_denoise.io import collect_inputs

    (tmp_path / "in" / "locked").mkdir(parents=True)
    Image.fromarray(smooth((32, 32))).save(tmp_path / "in" / "a.png")
    Image.fromarray(smooth((32, 32))).save(tmp_path / "in" / "locked" / "x.png")
    walk = os.walk

    def refusing(top, **kw):  # the folder as a user without read permission meets it
        for root, dirs, names in walk(top, **kw):
            if os.path.basename(root) == "locked":
                kw["onerror"](PermissionError(13, "Permission denied", root))
                continue
            yield root, dirs, names

    monkeypatch.setattr(inputs.os, "walk", refusing)
    files, errors, _ = collect_inputs([tmp_path / "in"])
    assert [f.rel.as_posix() for f in files] == ["a.png"]
    assert errors == [(tmp_path / "in" / "locked",
                       f"{tmp_path / 'in' / 'locked'}: cannot read the folder (Permission "
                       "denied); check its permissions or leave it out")]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_closed_or_full_stdout_loses_nothing(tmp_path):
    # the run's files were written, then the summary's write failed: exit 2 and "check
    # the path", later 0; now one line for a full stdout and exit 1 (the outputs are
    # there, the summary is not), and the run's own code when the reader left
    import subprocess
    import sys

    Image.fromarray(smooth((32, 32))).save(tmp_path / "x.png")
    cmd = [sys.executable, "-m", "kpca_denoise", "denoise", str(tmp_path / "x.png"), "-q",
           "--noise-sigma", "10"]
    with open("/dev/full", "w") as full:
        run = subprocess.run(cmd + ["-o", str(tmp_path / "o1")], stdout=full,
                             stderr=subprocess.PIPE, text=True)
    assert run.returncode == 1, run.stderr
    assert run.stderr.splitlines()[-1].startswith(
        "error: the summary could not be printed (No space left on device)"), run.stderr
    assert (tmp_path / "o1" / "x_kpca.png").is_file()
    proc = subprocess.Popen(cmd + ["-o", str(tmp_path / "o2")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    proc.stdout.close()  # the reader is gone before the summary
    err = proc.stderr.read()
    assert proc.wait() == 0, err
    assert "Traceback" not in err and "error" not in err, err
    assert (tmp_path / "o2" / "x_kpca.png").is_file()
    assert len(list((tmp_path / "o2").glob("kpca-denoise-*.json"))) == 1


def test_options_another_method_uses_are_named(tmp_path, capsys, no_compute):
    # --stride and --train-patches were ignored without a word under the grouped method,
    # and a width given to the linear kernel was judged as an RBF one
    Image.fromarray(smooth((32, 32))).save(tmp_path / "x.png")
    with pytest.raises(ValueError, match="gamma is the RBF kernel's width; the linear kernel "
                                         "has none: omit it"):
        DenoiseParams(method="global", kernel="linear", gamma=0.01).validate()
    rc, errs, _ = run_cli(["denoise", str(tmp_path / "x.png"), "-o", str(tmp_path / "o"),
                        "--method", "global", "--kernel", "linear", "--gamma", "0.01", "-q"],
                       capsys)
    assert rc == 2 and errs == ["error: --gamma is the RBF kernel's width; the linear kernel "
                                "has none: omit it"]
    with pytest.raises(AssertionError, match="denoise_set was called"):  # noted before
        main(["denoise", str(tmp_path / "x.png"), "-o", str(tmp_path / "o"), "--stride", "2",
              "--train-patches", "100", "-q"])
    note = capsys.readouterr().err.strip()
    assert note.startswith("note: --stride (for --method global) and --train-patches (for "
                           "--method global and patch sets) not used"), note


def test_a_rank_no_group_can_hold_gets_a_note(tmp_path, capsys):
    # rank 64 of groups of 32 patches kept every component (the output the input) silently
    Image.fromarray(smooth((48, 48))).save(tmp_path / "x.png")
    rc, errs, _ = run_cli(["denoise", str(tmp_path / "x.png"), "-o", str(tmp_path / "o"),
                        "--noise-sigma", "10", "--ranks", "4,64", "-q"], capsys)
    assert rc == 0 and errs == [
        "note: x.png: rank 64 above what a group of 32 patches holds (31 components): every "
        "component is kept, the noise too; use ranks up to 31"], errs
    assert sorted(p.name for p in (tmp_path / "o").glob("*.png")) == ["x_kpca_r4.png",
                                                                     "x_kpca_r64.png"]
    rc, errs, _ = run_cli(["denoise", str(tmp_path / "x.png"), "-o", str(tmp_path / "o2"),
                        "--noise-sigma", "10", "--ranks", "4,31", "-q"], capsys)
    assert rc == 0 and errs == []


def test_a_stride_above_the_patch_size_is_refused_before_any_image(tmp_path, capsys,
                                                                   no_compute):
    # it passed validate() and failed image by image with exit 1 (docs/options.md said before)
    from kpca_denoise.params import ParamError

    with pytest.raises(ParamError, match=r"grouped sets stride 6, above the patch size 5: a "
                                         r"stride must be in 1\.\.5 to cover every pixel"):
        DenoiseParams(grouped={"stride": 6}).validate()
    with pytest.raises(ParamError, match=r"grouped sets stride1 6, above the patch size 5: a "
                                         r"stride must be in 1\.\.5 to cover every pixel"):
        DenoiseParams(grouped={"stride1": 6}).validate()
    with pytest.raises(ParamError, match="patch_size 4 is below the stride 5 of profile 'fast'; "
                                         "use a patch size of 5 or more with it"):
        DenoiseParams(profile="fast", patch_size=4).validate()
    DenoiseParams(profile="fast", patch_size=4, grouped={"stride": 4}).validate()
    Image.fromarray(smooth((32, 32))).save(tmp_path / "x.png")
    (tmp_path / "p.json").write_text('{"grouped": {"stride": 6}}')
    rc = main(["denoise", str(tmp_path / "x.png"), "-o", str(tmp_path / "o"), "--params",
               str(tmp_path / "p.json"), "-q"])
    err = capsys.readouterr().err.splitlines()
    assert rc == 2 and len(err) == 1 and "above the patch size 5" in err[0], err
    assert not (tmp_path / "o").exists()
