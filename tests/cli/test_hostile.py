"""Hostile and unusual input, as a new user brings it: every case ends in a lossless
output or a one-line error naming the problem and the fix, with no traceback, no
compute before a foreseeable failure, and nothing overwritten or silently dropped.

Each test checks the exit code, the message, and the files on disk.
"""

import io
import json
import os
import struct
import tempfile
import zlib

import numpy as np
import pytest
import tifffile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image, ImageCms

import kpca_denoise.cli as cli
from cli_helpers import md5, no_compute, run_cli, sidecars, smooth  # noqa: F401 (a fixture)
from kpca_denoise import denoise_image, denoise_set
from kpca_denoise.cli import load_params_file, main
from kpca_denoise.io import InputError, OutputExistsError, atomic_write, read_item
from kpca_denoise.params import DenoiseParams

FAST = ["--method", "global", "--ranks", "4", "--train-patches", "300", "-q"]


# -- lossless ---------------------------------------------------------------------------


def test_16_bit_rgb_png_and_tiff_stay_16_bit(tmp_path, capsys):
    a = smooth((40, 44, 3), np.uint16)
    import imagecodecs

    (tmp_path / "rgb16.png").write_bytes(imagecodecs.png_encode(a))
    tifffile.imwrite(tmp_path / "rgb16.tif", a, photometric="rgb")
    rc, errs, _ = run_cli(["denoise", str(tmp_path / "rgb16.png"), str(tmp_path / "rgb16.tif"),
                        "-o", str(tmp_path / "o"), *FAST], capsys)
    assert rc == 0, errs
    png = imagecodecs.png_decode((tmp_path / "o" / "rgb16_kpca_r4.png").read_bytes())
    tif = tifffile.imread(tmp_path / "o" / "rgb16_kpca_r4.tif")
    for out in (png, tif):
        assert out.dtype == np.uint16 and out.shape == a.shape
        assert np.any(out % 257 != 0)  # real 16-bit values, not 8-bit ones scaled up
        assert np.abs(out.astype(float) - a).mean() < 0.05 * 65535


def test_multi_page_tiff_is_a_set_and_comes_back_with_every_page(tmp_path, capsys):
    pages = np.stack([smooth((36, 40), np.uint16, seed=s) for s in range(3)])
    tifffile.imwrite(tmp_path / "stack.tif", pages, photometric="minisblack")
    rc, errs, _ = run_cli(["denoise", str(tmp_path / "stack.tif"), "-o", str(tmp_path / "o"),
                        "--add-noise", "2000", *FAST], capsys)
    assert rc == 0, errs
    for tag in ("kpca_r4", "noisy"):
        with tifffile.TiffFile(tmp_path / "o" / f"stack_{tag}.tif") as tf:
            assert len(tf.pages) == 3
            out = tf.asarray()
        assert out.dtype == np.uint16 and out.shape == pages.shape
    out = tifffile.imread(tmp_path / "o" / "stack_kpca_r4.tif")
    # the same order: each output page is nearest to its own input page
    for k in range(3):
        d = [np.abs(out[k].astype(float) - pages[j]).mean() for j in range(3)]
        assert int(np.argmin(d)) == k


def test_exif_orientation_icc_and_dpi_are_carried_over(tmp_path, capsys):
    a = smooth((40, 56, 3))
    exif = Image.Exif()
    exif[274] = 6  # rotate 90 degrees clockwise to display
    icc = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    im = Image.fromarray(a)
    im.save(tmp_path / "phone.jpg", quality=95, exif=exif.tobytes(), icc_profile=icc, dpi=(300, 300))
    im.save(tmp_path / "scan.png", exif=exif.tobytes(), icc_profile=icc, dpi=(600, 600))
    rc, errs, _ = run_cli(["denoise", str(tmp_path / "phone.jpg"), str(tmp_path / "scan.png"),
                        "-o", str(tmp_path / "o"), *FAST], capsys)
    assert rc == 0, errs
    for name, dpi in (("phone_kpca_r4.jpg", 300), ("scan_kpca_r4.png", 600)):
        with Image.open(tmp_path / "o" / name) as out:
            assert out.getexif().get(274) == 6
            assert out.info.get("icc_profile") == icc
            assert round(out.info["dpi"][0]) == dpi
            # displayed the same way as the input: upright after the orientation tag
            from PIL import ImageOps

            assert ImageOps.exif_transpose(out).size == (40, 56)


def test_16_bit_colour_png_keeps_its_metadata_too(tmp_path):
    from kpca_denoise.io import write_item

    a = smooth((20, 24, 3), np.uint16)
    icc = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    exif = Image.Exif()
    exif[274] = 3
    item = read_item(_write_png16(tmp_path / "in.png", a))
    item.meta.update(icc=icc, dpi=(300.0, 300.0), exif=exif.tobytes(), orientation=3)
    out = write_item(item, a, tmp_path / "out.png")
    back = read_item(out)
    np.testing.assert_array_equal(back.array, a)
    assert back.meta["icc"] == icc and back.meta["orientation"] == 3
    assert round(back.meta["dpi"][0]) == 300


def _write_png16(path, a):
    import imagecodecs

    path.write_bytes(imagecodecs.png_encode(a))
    return path


def test_folder_tree_and_same_names_never_collide(tmp_path, capsys):
    for sub in ("a", "b", "b/deep"):
        (tmp_path / "in" / sub).mkdir(parents=True)
        Image.fromarray(smooth((32, 32), seed=len(sub))).save(tmp_path / "in" / sub / "img.png")
    rc, errs, _ = run_cli(["denoise", str(tmp_path / "in"), "-o", str(tmp_path / "o"), *FAST], capsys)
    assert rc == 0, errs
    outs = sorted(p.relative_to(tmp_path / "o").as_posix() for p in (tmp_path / "o").rglob("*.png"))
    assert outs == ["a/img_kpca_r4.png", "b/deep/img_kpca_r4.png", "b/img_kpca_r4.png"]
    # the same names given as files: made unique from their nearest common folder
    rc, errs, _ = run_cli(["denoise", str(tmp_path / "in" / "a" / "img.png"),
                        str(tmp_path / "in" / "b" / "img.png"), "-o", str(tmp_path / "o2"), *FAST],
                       capsys)
    assert rc == 0, errs
    assert (tmp_path / "o2" / "a" / "img_kpca_r4.png").is_file()
    assert (tmp_path / "o2" / "b" / "img_kpca_r4.png").is_file()


def test_outputs_get_normal_permissions(tmp_path, capsys):
    Image.fromarray(smooth((32, 32))).save(tmp_path / "x.png")
    old = os.umask(0o022)
    try:
        rc, errs, _ = run_cli(["denoise", str(tmp_path / "x.png"), "-o", str(tmp_path / "o"), *FAST],
                           capsys)
    finally:
        os.umask(old)
    assert rc == 0, errs
    files = list((tmp_path / "o").iterdir())
    assert len(files) == 2  # the output and the run's sidecar
    for f in files:
        assert f.stat().st_mode & 0o777 == 0o644, f


def test_existing_outputs_are_refused_before_computing(tmp_path, capsys, monkeypatch):
    Image.fromarray(smooth((32, 32))).save(tmp_path / "x.png")
    (tmp_path / "o").mkdir()
    Image.fromarray(smooth((32, 32), seed=5)).save(tmp_path / "o" / "x_noisy.png")
    before = md5(tmp_path / "o" / "x_noisy.png")
    called = []
    monkeypatch.setattr(cli, "denoise_set", lambda *a, **k: called.append(1))
    rc, errs, _ = run_cli(["denoise", str(tmp_path / "x.png"), "-o", str(tmp_path / "o"),
                        "--add-noise", "20", *FAST], capsys)
    assert rc == 2 and not called
    assert errs == [f"error: {tmp_path / 'o' / 'x_noisy.png'}: the output already exists; use "
                    "--overwrite to replace it or choose another folder with -o"]
    assert md5(tmp_path / "o" / "x_noisy.png") == before
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["x_noisy.png"]


def test_overwrite_replaces_and_each_run_has_its_own_sidecar(tmp_path, capsys):
    Image.fromarray(smooth((32, 32))).save(tmp_path / "x.png")
    args = ["denoise", str(tmp_path / "x.png"), "-o", str(tmp_path / "o"), *FAST]
    assert run_cli(args, capsys)[0] == 0
    rc, errs, _ = run_cli(args, capsys)  # done with these parameters: skipped
    assert rc == 0 and errs[0].startswith("note: 1 of 1 inputs already done")
    assert run_cli(args + ["--seed", "1"], capsys)[0] == 2  # refused: other parameters
    rc, errs, _ = run_cli(args + ["--overwrite", "--seed", "1"], capsys)
    assert rc == 0, errs
    sides = sidecars(tmp_path / "o")
    assert len(sides) == 2
    for s in sides:
        data = json.loads(s.read_text())
        assert data["files"] == ["x_kpca_r4.png"]
    assert {json.loads(s.read_text())["params"]["seed"] for s in sides} == {0, 1}


def test_a_file_that_appears_meanwhile_is_not_replaced(tmp_path, capsys, monkeypatch):
    """Two runs into one folder: what the other run wrote stays, and this run's sidecar
    lists only what this run wrote."""
    for n in ("x", "y"):
        Image.fromarray(smooth((32, 32))).save(tmp_path / f"{n}.png")
    real = cli.denoise_set

    def other_run_writes_first(*a, **k):
        res = real(*a, **k)
        (tmp_path / "o" / "y_kpca_r4.png").write_bytes(b"from the other run")
        return res

    monkeypatch.setattr(cli, "denoise_set", other_run_writes_first)
    rc, errs, _ = run_cli(["denoise", str(tmp_path / "x.png"), str(tmp_path / "y.png"), "-o",
                        str(tmp_path / "o"), *FAST], capsys)
    assert rc == 1
    assert errs == [f"error: {tmp_path / 'o' / 'y_kpca_r4.png'}: the file already exists (another "
                    "run may have written it meanwhile) and was left as it is; choose another "
                    "output folder or allow replacing it (--overwrite)"]
    assert (tmp_path / "o" / "y_kpca_r4.png").read_bytes() == b"from the other run"
    (side,) = sidecars(tmp_path / "o")
    assert json.loads(side.read_text())["files"] == ["x_kpca_r4.png"]


def test_atomic_write_without_replace_keeps_the_existing_file(tmp_path):
    t = tmp_path / "t.txt"
    t.write_text("first")
    with pytest.raises(OutputExistsError):
        atomic_write(t, lambda p: p.write_text("second"), replace=False)
    assert t.read_text() == "first"
    assert list(tmp_path.iterdir()) == [t]  # no temporary file left


# -- fail before computing ------------------------------------------------------------


def test_output_path_that_is_a_file(tmp_path, capsys, no_compute):
    Image.fromarray(smooth((32, 32))).save(tmp_path / "x.png")
    (tmp_path / "taken").write_text("a file")
    rc, errs, _ = run_cli(["denoise", str(tmp_path / "x.png"), "-o", str(tmp_path / "taken"), *FAST],
                       capsys)
    assert rc == 2
    assert errs == [f"error: {tmp_path / 'taken'}: the output path is an existing file; "
                    "give a folder with -o"]
    assert (tmp_path / "taken").read_text() == "a file"


def test_unwritable_output_folder(tmp_path, capsys, no_compute, monkeypatch):
    Image.fromarray(smooth((32, 32))).save(tmp_path / "x.png")
    out = tmp_path / "ro"
    out.mkdir()
    if os.geteuid() == 0:  # root writes anywhere: make the probe fail as it would
        def denied(*a, **k):
            raise PermissionError(13, "Permission denied")

        monkeypatch.setattr(tempfile, "mkstemp", denied)
    else:
        out.chmod(0o500)
    try:
        rc, errs, _ = run_cli(["denoise", str(tmp_path / "x.png"), "-o", str(out), *FAST], capsys)
    finally:
        out.chmod(0o700)
    assert rc == 2
    assert errs == [f"error: {out}: cannot write to the output folder (Permission denied); "
                    "choose another folder with -o"]
    assert list(out.iterdir()) == []


# -- tracebacks become one-line errors ----------------------------------------------------


def _png_bomb(path, w=60000, h=60000):
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
                     + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b""))


def _bmp_bomb(path, w=60000, h=60000):
    header = struct.pack("<2sIHHI", b"BM", 54 + 16, 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, w, h, 1, 8, 0, 16, 2835, 2835, 0, 0)
    path.write_bytes(header + info + b"\x00" * 16)


@pytest.mark.parametrize("maker,name", [(_png_bomb, "bomb.png"), (_bmp_bomb, "bomb.bmp")])
def test_decompression_bomb_is_refused_and_the_rest_are_written(tmp_path, capsys, maker, name):
    Image.fromarray(smooth((32, 32))).save(tmp_path / "good.png")
    maker(tmp_path / name)
    rc, errs, _ = run_cli(["denoise", str(tmp_path / name), str(tmp_path / "good.png"), "-o",
                        str(tmp_path / "o"), *FAST], capsys)
    assert rc == 1
    assert errs == [f"error: {tmp_path / name}: the file says it holds 60000x60000 pixels (3600 "
                    "megapixels), more than the limit of 89 megapixels that guards against "
                    "decompression bombs; if the image is genuine, raise the limit "
                    "(--max-pixels 3600000000)"]
    assert (tmp_path / "o" / "good_kpca_r4.png").is_file()
    assert not list((tmp_path / "o").glob("bomb*"))


def test_raising_the_pixel_limit_deliberately(tmp_path):
    _png_bomb(tmp_path / "wide.png", w=3000, h=2)
    with pytest.raises(InputError, match="--max-pixels 6000"):
        read_item(tmp_path / "wide.png", max_pixels=5000)
    # raised: the header passes and the (truncated) data is what fails, in one line
    with pytest.raises(InputError, match="cannot read the image"):
        read_item(tmp_path / "wide.png", max_pixels=6000)


@pytest.mark.parametrize("content,msg", [
    ("[1, 2]", "the parameters must be a JSON object"),
    ('{"ranks": "lots"}', "ranks must be integers >= 1 or 'auto'"),
    ('{"patch_size": "8"}', "patch_size must be an integer >= 2"),
    ('{"method": ["global"]}', "method must be a string"),
    ('{"nonsense_kw": 1}', "unknown parameter(s) ['nonsense_kw']"),
    ('{"params": {"grouped": {"nonsense_kw": 1}}}', "unknown grouped option 'nonsense_kw'"),
    ('{"grouped": {"gamma_scale2": 0}}', "grouped gamma_scale2 must be a finite number > "
                                         "0.001 and <= 1e+06, got 0"),
    # a file written before the options object calls them extra: read as grouped
    ('{"params": {"extra": {"window_beta": "x"}}}', "grouped window_beta must be a finite "
                                                   "number >= 0 and <= 50, got 'x'"),
    ('{"grouped": {"kernel": "linear"}}', "grouped sets kernel; set kernel of the parameters"),
    ('{"grouped": [4]}', "grouped must be a JSON object of grouped-method options"),
    ('{"seed": 1.5}', "seed must be a non-negative integer"),
    ("{not json", "cannot read the parameter file"),
])
def test_malformed_params_file_names_the_key(tmp_path, capsys, no_compute, content, msg):
    Image.fromarray(smooth((32, 32))).save(tmp_path / "x.png")
    (tmp_path / "p.json").write_text(content)
    rc, errs, _ = run_cli(["denoise", str(tmp_path / "x.png"), "-o", str(tmp_path / "o"),
                        "--params", str(tmp_path / "p.json")], capsys)
    assert rc == 2 and len(errs) == 1, errs
    assert errs[0].startswith(f"error: {tmp_path / 'p.json'}") and msg in errs[0], errs
    assert not (tmp_path / "o").exists()


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats(allow_nan=False)
    | st.text(max_size=8) | st.sampled_from(["auto", "global", "grouped", "rbf", "linear"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12)
_keys = st.sampled_from([f.name for f in DenoiseParams.__dataclass_fields__.values()] + ["bogus"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(_json, st.dictionaries(_keys, _json, max_size=5)))
def test_params_loader_fuzz_never_crashes(tmp_path, data):
    p = tmp_path / "fuzz.json"
    p.write_text(json.dumps(data))
    try:
        params = load_params_file(p)
    except cli.UsageError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(str(p))
    else:
        assert params.validate() is params


def test_extreme_noise_levels(tmp_path, capsys):
    Image.fromarray(smooth((32, 32))).save(tmp_path / "x.png")
    base = ["denoise", str(tmp_path / "x.png"), "-o", str(tmp_path / "o"), *FAST]
    rc, errs, _ = run_cli(base + ["--noise-sigma", "1e300"], capsys)
    assert rc == 2 and errs == ["error: --noise-sigma must be > 0 and at most 1e+06 (pixel units, "
                                "e.g. 25 for 8-bit images; omit it to estimate), got 1e+300"]
    rc, errs, _ = run_cli(base + ["--noise-sigma", "1e-300"], capsys)
    assert rc == 1 and len(errs) == 1, errs
    assert errs[0].startswith("error: x.png: noise sigma 1e-300 is outside the accepted range ")
    assert errs[0].endswith(" .. 255 for this uint8 image; give the noise std in the image's own "
                            "units (e.g. 25 for 8-bit data, 0.1 for 0..1 floats), or omit it to "
                            "estimate")
    assert not list((tmp_path / "o").glob("*.png"))


def test_a_flat_image_comes_back_as_it_is(tmp_path, capsys):
    flat = np.full((32, 40), 77, np.uint8)
    Image.fromarray(flat).save(tmp_path / "flat.png")
    rc, errs, _ = run_cli(["denoise", str(tmp_path / "flat.png"), "-o", str(tmp_path / "o"), "-q"],
                       capsys)
    assert rc == 0
    assert errs == ["note: flat.png: the image is flat (one value per channel); returned unchanged"]
    np.testing.assert_array_equal(np.asarray(Image.open(tmp_path / "o" / "flat_kpca.png")), flat)
    # a flat patch set too, with a sigma given (it was "outside the accepted range 0 .. 0")
    np.save(tmp_path / "same.npy", np.ones((100, 8, 8)))
    rc, errs, _ = run_cli(["denoise", str(tmp_path / "same.npy"), "-o", str(tmp_path / "o"),
                        "--noise-sigma", "0.1", "-q"], capsys)
    assert rc == 0 and errs == ["note: same.npy: every sample holds the same value; returned "
                                "unchanged"], errs
    np.testing.assert_array_equal(np.load(tmp_path / "o" / "same_kpca.npy"), 1.0)


def test_huge_gamma_is_a_degenerate_kernel(tmp_path, capsys):
    Image.fromarray(smooth((32, 32))).save(tmp_path / "x.png")
    rc, errs, _ = run_cli(["denoise", str(tmp_path / "x.png"), "-o", str(tmp_path / "o"), *FAST,
                        "--gamma", "1e300"], capsys)
    assert rc == 2 and len(errs) == 1
    assert errs[0].startswith("error: gamma=1e+300 makes the kernel matrix the identity")
    assert "omit it for the automatic width" in errs[0]
    assert not list((tmp_path / "o").glob("*.png"))


def test_argument_messages_name_the_option_and_the_real_patch(tmp_path, capsys):
    Image.fromarray(smooth((32, 32))).save(tmp_path / "good.png")
    rc, errs, _ = run_cli(["denoise", str(tmp_path / "good.png"), "-o", str(tmp_path / "o"),
                        "--seed", "-1", "--add-noise", "10"], capsys)
    assert rc == 2 and errs == ["error: --seed must be a non-negative integer, got -1"]
    # the default (grouped) patch is 5x5: 6x6 is denoised, 4x4 is named for what it is
    Image.fromarray(smooth((6, 6))).save(tmp_path / "six.png")
    Image.fromarray(smooth((4, 4))).save(tmp_path / "tiny.png")
    rc, errs, _ = run_cli(["denoise", str(tmp_path / "six.png"), str(tmp_path / "tiny.png"), "-o",
                        str(tmp_path / "o"), "-q"], capsys)
    assert rc == 1 and errs == ["error: tiny.png: image 4x4 is smaller than the 5x5 patch; use a "
                                "patch size of 3 or less"]
    assert (tmp_path / "o" / "six_kpca.png").is_file()


def test_library_argument_messages():
    rng = np.random.default_rng(0)
    chw = rng.integers(0, 255, (3, 32, 40)).astype(np.uint8)
    with pytest.raises(ValueError, match=r"looks channels-first \(C, H, W\); pass the image as "
                                         r"\(H, W, C\), e.g. np.moveaxis\(image, 0, -1\)"):
        denoise_image(chw, noise_sigma=20)
    img = smooth((32, 32))
    out = denoise_image(img, method="global", ranks=np.int64(4), n_train=300)
    assert out.shape == img.shape
    with pytest.raises(ValueError, match="names has 1 entries for 2 images; give one per image"):
        denoise_set([img, img], names=["one"])
    res = denoise_set([img], {"method": "global", "ranks": [4], "n_train": 300})
    assert res.images[0].ok and set(res.images[0].outputs) == {4}


def test_an_unsupported_file_among_good_ones_is_reported_and_the_rest_written(tmp_path, capsys):
    Image.fromarray(smooth((32, 32))).save(tmp_path / "good.png")
    frames = [Image.fromarray(smooth((16, 16), seed=s)) for s in range(3)]
    frames[0].save(tmp_path / "anim.gif", save_all=True, append_images=frames[1:])
    rc, errs, _ = run_cli(["denoise", str(tmp_path / "anim.gif"), str(tmp_path / "good.png"), "-o",
                        str(tmp_path / "o"), *FAST], capsys)
    assert rc == 1
    assert len(errs) == 1 and errs[0].startswith(f"error: {tmp_path / 'anim.gif'}: unsupported file type '.gif'")
    assert (tmp_path / "o" / "good_kpca_r4.png").is_file()


def test_an_animation_under_a_supported_name_is_refused_not_truncated(tmp_path):
    frames = [Image.fromarray(smooth((16, 16), seed=s)) for s in range(3)]
    frames[0].save(tmp_path / "anim.png", save_all=True, append_images=frames[1:])
    with pytest.raises(InputError, match="holds 3 frames"):
        read_item(tmp_path / "anim.png")


# -- options that did nothing ---------------------------------------------------------------


def test_gamma_with_the_grouped_method_is_refused_and_iterations_apply(tmp_path, capsys):
    Image.fromarray(smooth((40, 40))).save(tmp_path / "x.png")
    rc, errs, _ = run_cli(["denoise", str(tmp_path / "x.png"), "-o", str(tmp_path / "o"), "-q",
                        "--gamma", "0.01"], capsys)
    assert rc == 2 and len(errs) == 1 and "applies to method 'global' and to patch sets" in errs[0]
    outs = {}
    for it in (1, 6):
        rc, errs, _ = run_cli(["denoise", str(tmp_path / "x.png"), "-o", str(tmp_path / f"i{it}"),
                            "-q", "--noise-sigma", "20", "--iterations", str(it)], capsys)
        assert rc == 0
        outs[it] = np.asarray(Image.open(tmp_path / f"i{it}" / "x_kpca.png")).astype(int)
    assert np.abs(outs[1] - outs[6]).max() > 0  # the cap changes the grouped result


def test_patch_sets_get_the_automatic_rank_under_the_global_method(tmp_path, capsys):
    with np.load(os.path.join(os.path.dirname(__file__), "..", "..", "sample_images", "digits.npz")) as z:
        clean = z["images"][:300]
    rng = np.random.default_rng(0)
    noisy = np.clip(clean + rng.normal(0, 50, clean.shape), 0, 255).astype(np.uint8)
    np.save(tmp_path / "digits.npy", noisy)
    rc, errs, _ = run_cli(["denoise", str(tmp_path / "digits.npy"), "-o", str(tmp_path / "o"),
                        "--method", "global", "-q"], capsys)
    assert rc == 0, errs
    assert sorted(p.name for p in (tmp_path / "o").glob("*.npy")) == ["digits_kpca.npy"]
    out = np.load(tmp_path / "o" / "digits_kpca.npy").astype(float)
    mse = lambda a: np.mean((a - clean) ** 2)  # noqa: E731
    assert mse(out) < mse(noisy.astype(float))


# -- newcomer path ------------------------------------------------------------------------


def test_progress_is_one_line_per_stage_or_image_when_not_a_terminal():
    from kpca_denoise.core.progress import ProgressEvent

    buf = io.StringIO()
    bar = cli.ProgressBar(stream=buf)
    for image in range(3):
        for stage in ("noise", "grouping", "preimage", "grouping", "preimage"):
            for k in range(50):
                bar(ProgressEvent(stage, k + 1, 50))
        bar(ProgressEvent("image", image + 1, 3))
    lines = buf.getvalue().splitlines()
    assert len(lines) == 3 + 3  # three stages announced once, three images finished
    assert lines[-1].startswith("image 3/3 done")


def test_a_failed_image_is_reported_as_failed_not_done(tmp_path, capsys):
    # the command line's plain progress says which image failed as it goes (it said
    # "done" for every image, then the error after the last)
    Image.fromarray(smooth((6, 6))).save(tmp_path / "a_six.png")
    Image.fromarray(smooth((4, 4))).save(tmp_path / "b_tiny.png")
    rc = main(["denoise", str(tmp_path / "a_six.png"), str(tmp_path / "b_tiny.png"), "-o",
               str(tmp_path / "o"), "--noise-sigma", "10"])
    lines = capsys.readouterr().err.splitlines()
    assert rc == 1
    assert [ln.split(" (")[0] for ln in lines if ln.startswith("image ")] == [
        "image 1/2 done", "image 2/2 failed"]
    assert (tmp_path / "o" / "a_six_kpca.png").is_file()
    assert not (tmp_path / "o" / "b_tiny_kpca.png").exists()


# -- the image loader under fuzzing ---------------------------------------------------------


def _valid_files():
    a = smooth((24, 20, 3))
    out = {}
    for fmt, ext in (("PNG", "png"), ("BMP", "bmp"), ("JPEG", "jpg"), ("TIFF", "tif")):
        b = io.BytesIO()
        Image.fromarray(a).save(b, format=fmt)
        out[ext] = b.getvalue()
    return out


_FILES = _valid_files()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ext=st.sampled_from(sorted(_FILES)), flips=st.lists(
    st.tuples(st.integers(0, 63), st.integers(0, 7)), min_size=1, max_size=4))
def test_image_loader_fuzz_bit_flipped_headers(tmp_path, ext, flips):
    """Bit flips in the first 64 bytes (the headers: sizes, depths, offsets) give an
    image or an InputError, never another exception (DecompressionBombError was one)."""
    data = bytearray(_FILES[ext])
    for pos, bit in flips:
        data[pos] ^= 1 << bit
    p = tmp_path / f"f.{ext}"
    p.write_bytes(bytes(data))
    try:
        item = read_item(p)
    except InputError as exc:
        assert "\n" not in str(exc)
    else:
        assert item.array.size > 0


# -- a hostile sweep's findings --------------------------------------------------------


def test_an_output_folder_that_is_or_holds_an_input_folder_is_refused(tmp_path, capsys, no_compute):
    # the walk leaves the output folder out: -o the input folder (or its parent) left
    # out every sub-folder, silently, with exit code 0
    tree = tmp_path / "tree"
    (tree / "a" / "sub").mkdir(parents=True)
    for p in (tree / "top.png", tree / "a" / "x.png", tree / "a" / "sub" / "y.png"):
        Image.fromarray(smooth((32, 32))).save(p)
    before = {p: md5(p) for p in tree.rglob("*.png")}
    for inp, out in ((tree, tree), (tree / "a", tree)):
        rc, errs, _ = run_cli(["denoise", str(inp), "-o", str(out), *FAST], capsys)
        assert rc == 2 and len(errs) == 1, errs
        assert errs[0] == (f"error: {inp}: the output folder {out} is this folder or holds it, so "
                           "the results would mix with the inputs; use an -o outside it, e.g. "
                           f"-o {inp.name}_denoised")
    assert {p: md5(p) for p in tree.rglob("*.png")} == before and not sidecars(tree)


def test_an_output_folder_inside_the_input_folder_is_left_out_of_the_walk(tmp_path, capsys):
    tree = tmp_path / "tree"
    (tree / "a").mkdir(parents=True)
    for p in (tree / "top.png", tree / "a" / "x.png"):
        Image.fromarray(smooth((32, 32))).save(p)
    for _ in range(2):  # the second run must not take the first run's results as inputs
        rc, errs, _ = run_cli(["denoise", str(tree), "-o", str(tree / "out"), "--overwrite", *FAST],
                           capsys)
        assert rc == 0, errs
    assert sorted(p.relative_to(tree / "out").as_posix() for p in (tree / "out").rglob("*.png")) \
        == ["a/x_kpca_r4.png", "top_kpca_r4.png"]


@pytest.mark.parametrize("args,msg", [
    (["", "-o", "{o}"], 'error: an empty input name (""); name a file or a folder'),
    (["{x}", "-o", ""], "error: -o is empty; give a folder for the results"),
    (["{x}", "-o", "{o}", "--ranks", "a,b"], "error: argument --ranks: ranks must be integers"),
    (["{x}", "-o", "{o}", "--workers", "0"], "error: "),
    # each worker is a process: an unbounded count exhausted the memory
    (["{x}", "-o", "{o}", "--workers", "99999999999999999999"],
     "error: argument --workers: must be at most "),
    (["{x}", "-o", "{o}", "--noise-sigma", "abc"], "error: argument --noise-sigma"),
])
def test_usage_errors_are_one_line(tmp_path, capsys, monkeypatch, no_compute, args, msg):
    # argparse printed its whole usage block first; "" walked the current folder
    monkeypatch.chdir(tmp_path)
    Image.fromarray(smooth((32, 32))).save(tmp_path / "x.png")
    args = [a.format(x=tmp_path / "x.png", o=tmp_path / "o") for a in args]
    try:
        rc = main(["denoise", *args])
    except SystemExit as exc:
        rc = exc.code
    cap = capsys.readouterr()
    lines = cap.err.splitlines()
    assert rc == 2 and len(lines) == 1 and lines[0].startswith(msg), cap.err
    assert not (tmp_path / "o").exists() and not list(tmp_path.glob("x_*"))


def test_a_file_whose_content_is_not_its_name_is_refused(tmp_path, capsys, no_compute):
    # a 16-bit RGB TIFF named .png was read as 8 bits and written back as an 8-bit PNG
    tifffile.imwrite(tmp_path / "rgb16.png", smooth((32, 32, 3), np.uint16), photometric="rgb")
    Image.fromarray(smooth((32, 32, 3))).save(tmp_path / "photo.jpg", format="PNG")
    for name, held, ext in (("rgb16.png", "TIFF", ".tif"), ("photo.jpg", "PNG", ".png")):
        p = tmp_path / name
        rc, errs, _ = run_cli(["denoise", str(p), "-o", str(tmp_path / "o"), *FAST], capsys)
        assert rc == 2 and errs[0] == (f"error: {p}: holds a {held} image but is named "
                                       f"{p.suffix}; rename it to {p.stem}{ext}"), errs
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


def test_a_reference_that_is_not_the_images_clean_version_is_refused_first(tmp_path, capsys,
                                                                           no_compute):
    # a smaller reference was reported after the compute, with exit code 0; a 16-bit
    # reference of an 8-bit image gave -43 dB
    a = smooth((40, 40))
    Image.fromarray(a).save(tmp_path / "x.png")
    Image.fromarray(a[:32, :32]).save(tmp_path / "small.png")
    Image.fromarray(a.astype(np.uint16) * 257).save(tmp_path / "deep.png")
    for ref, msg in (("small.png", "is 32x32, {x} is 40x40; give the clean version of the same image"),
                     ("deep.png", "holds uint16 pixels, {x} uint8; give the reference in the "
                                  "image's own pixel type")):
        rc, errs, _ = run_cli(["denoise", str(tmp_path / "x.png"), "-o", str(tmp_path / "o"),
                            "--reference", str(tmp_path / ref), *FAST], capsys)
        assert rc == 2 and errs == [f"error: --reference {tmp_path / ref} "
                                    + msg.format(x=tmp_path / "x.png")], errs
    assert not (tmp_path / "o").exists()


def test_a_name_too_long_for_its_output_fails_alone(tmp_path, capsys):
    # the output name (the input's plus "_kpca_r4") passed the file system's 255 bytes:
    # a traceback, and the other image was not denoised
    long = tmp_path / ("a" * 245 + ".png")
    Image.fromarray(smooth((32, 32))).save(long)
    Image.fromarray(smooth((32, 32), seed=1)).save(tmp_path / "short.png")
    rc, errs, _ = run_cli(["denoise", str(long), str(tmp_path / "short.png"), "-o",
                        str(tmp_path / "o"), *FAST], capsys)
    assert rc == 1 and len(errs) == 1 and errs[0].startswith("error: ") \
        and "File name too long" in errs[0] and "rename " + long.name in errs[0], errs
    assert sorted(p.name for p in (tmp_path / "o").glob("*.png")) == ["short_kpca_r4.png"]
    # a path the system refuses anywhere else is one line too, not a traceback
    rc, errs, _ = run_cli(["denoise", str(tmp_path / "short.png"), "-o", str(tmp_path / ("b" * 300)),
                        *FAST], capsys)
    assert rc == 2 and len(errs) == 1 and "File name too long" in errs[0], errs


def test_grey_plus_alpha_tiff_and_pages_written_one_by_one_keep_their_layout(tmp_path, capsys):
    # grey + alpha came back as 64 pages of 64x2; pages written one by one (each its own
    # series) were refused as "series of different shapes (64x64, 64x64, ...)"
    la = smooth((40, 40, 2))
    tifffile.imwrite(tmp_path / "la.tif", la, photometric="minisblack", extrasamples=["unassalpha"])
    with tifffile.TiffWriter(tmp_path / "pages.tif") as tw:
        for k in range(3):
            tw.write(smooth((40, 40), seed=k), description=f"page {k}", contiguous=False)
    rc, errs, _ = run_cli(["denoise", str(tmp_path / "la.tif"), str(tmp_path / "pages.tif"), "-o",
                        str(tmp_path / "o"), *FAST], capsys)
    assert rc == 0, errs
    with tifffile.TiffFile(tmp_path / "o" / "la_kpca_r4.tif") as tf:
        assert len(tf.pages) == 1 and tf.series[0].shape == (40, 40, 2)
        assert tuple(tf.pages[0].extrasamples) == (2,)  # unassociated alpha
        np.testing.assert_array_equal(tf.asarray()[..., 1], la[..., 1])  # alpha kept as it was
    with tifffile.TiffFile(tmp_path / "o" / "pages_kpca_r4.tif") as tf:
        assert len(tf.pages) == 3 and tf.series[0].shape == (3, 40, 40)


def test_jpeg_sampling_png_text_and_tiff_description_are_kept(tmp_path, capsys):
    # a 4:4:4 progressive JPEG came back 4:2:0 baseline; PNG comments and a TIFF's
    # description and software were dropped
    from PIL import JpegImagePlugin, PngImagePlugin

    rgb = smooth((48, 48, 3))
    Image.fromarray(rgb).save(tmp_path / "fine.jpg", quality=95, subsampling=0, progressive=True)
    info = PngImagePlugin.PngInfo()
    info.add_text("Comment", "slide 4, stained")
    info.add_itxt("Author", "Zoë")
    Image.fromarray(rgb).save(tmp_path / "notes.png", pnginfo=info)
    tifffile.imwrite(tmp_path / "scan.tif", smooth((48, 48)), description="plate 7",
                     software="ScanTool 2", metadata=None)
    rc, errs, _ = run_cli(["denoise", *(str(tmp_path / n) for n in ("fine.jpg", "notes.png", "scan.tif")),
                        "-o", str(tmp_path / "o"), *FAST], capsys)
    assert rc == 0, errs
    with Image.open(tmp_path / "o" / "fine_kpca_r4.jpg") as im:
        assert JpegImagePlugin.get_sampling(im) == 0 and im.info.get("progressive")
    with Image.open(tmp_path / "o" / "notes_kpca_r4.png") as im:
        im.load()
        assert im.text == {"Comment": "slide 4, stained", "Author": "Zoë"}
    with tifffile.TiffFile(tmp_path / "o" / "scan_kpca_r4.tif") as tf:
        assert (tf.pages[0].description, tf.pages[0].software) == ("plate 7", "ScanTool 2")


def test_a_12_bit_image_and_an_outlier_do_not_pass_for_noise_free():
    # a 12-bit camera image in uint16 with noise 4 was "no noise" against the type's
    # 65535 (returned unchanged; given, sigma 4 was refused), and one pixel of 1e30 in a
    # float image made the whole image "noise free" the same way
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:96, 0:96]
    clean = 2000.0 + 300.0 * np.sin(x / 15.0) * np.cos(y / 20.0)
    twelve = np.clip(np.round(clean + rng.normal(0, 4.0, clean.shape)), 0, 4095).astype(np.uint16)
    for sigma in (None, 4.0):
        out = denoise_image(twelve, noise_sigma=sigma)
        assert out.dtype == np.uint16
        assert np.mean((out - clean) ** 2) < 0.5 * np.mean((twelve - clean) ** 2), sigma
    smooth = clean / 4.0
    noisy = smooth + rng.normal(0, 5.0, smooth.shape)
    noisy[10, 10] = 1e30
    out = denoise_image(noisy, noise_sigma=5.0)
    keep = np.ones(out.shape, bool)
    keep[:20, :20] = False  # the outlier's neighbourhood
    assert np.mean((out[keep] - smooth[keep]) ** 2) < 0.5 * np.mean((noisy[keep] - smooth[keep]) ** 2)


def test_library_calls_name_their_bad_arguments():
    # each was an obscure error from deep inside (or, for patch_sets, a wrong answer)
    from kpca_denoise.core.grouped import denoise_grouped
    from kpca_denoise.pipeline import evaluate

    img = smooth((32, 32)).astype(np.float64)
    cases = [
        (lambda: denoise_grouped(img, 10.0, ranks=4), "ranks must be a list such as [4, 8] or [None], got 4"),
        (lambda: denoise_grouped(img, None), "sigma must be a positive finite number, got None"),
        (lambda: denoise_grouped(img, 1e300), "sigma 1e+300 is too large: its square overflows"),
        (lambda: denoise_set([img, img], DenoiseParams(noise_sigma=5.0), patch_sets=["no", "no"]),
         "patch_sets must hold True or False per image, got 'no'"),
        (lambda: denoise_image(img, preimage_iterations=10**9),
         "preimage_iterations must be an integer from 1 to 10000"),
        (lambda: evaluate(img, np.full_like(img, np.nan)), "the estimate contains NaN or Inf"),
        (lambda: evaluate(img + 0j, img), "the reference must be a non-empty array of real numbers"),
        (lambda: evaluate(np.zeros((0, 4)), np.zeros((0, 4))), "must be a non-empty array"),
        (lambda: evaluate(img, img[:30]), "the reference is (32, 32) and the estimate (30, 32)"),
        (lambda: evaluate(img, img, patchset=True), "a patch set is (N, h, w), got shape (32, 32)"),
    ]
    for call, words in cases:
        with pytest.raises(ValueError) as exc:
            call()
        assert words in str(exc.value), (words, str(exc.value))
    # a generator of images is a set like any other
    res = denoise_set((im for im in [img, img]), DenoiseParams(noise_sigma=5.0))
    assert len(res.images) == 2 and all(r.ok for r in res.images)


def test_library_misuse_is_named_in_one_line():
    # an image with 5 channels is named with its own shape, not a sample's; a progress
    # or cancel that cannot be called is named before any work
    from kpca_denoise import denoise_image

    img = np.random.default_rng(0).random((48, 48, 5)).astype(np.float32)
    with pytest.raises(ValueError, match=r"colour \(H, W, 3\|4\) image, got shape \(48, 48, 5\)"):
        denoise_image(img, noise_sigma=0.1)
    grey = img[..., 0]
    with pytest.raises(TypeError, match="progress must be a function taking a ProgressEvent"):
        denoise_image(grey, noise_sigma=0.1, progress=5)
    with pytest.raises(TypeError, match="cancel must be a CancelToken"):
        denoise_image(grey, noise_sigma=0.1, cancel="stop")


def test_pixel_values_too_large_to_square_are_named():
    # a patch set of values near 1e300 ended in LAPACK's "Eigenvalues did not converge"
    from kpca_denoise import DenoiseParams, denoise_set

    huge = np.random.default_rng(0).random((50, 8, 8)) * 1e300
    res = denoise_set([huge], DenoiseParams(), patch_sets=[True]).images[0]
    big = float(np.abs(huge).max())
    assert res.error == (f"image 0: pixel values up to {big:.3g} are too large to square in "
                         "float64; scale the image into a range such as 0..1 or 0..255 first")
    ok = denoise_set([huge * 1e-160], DenoiseParams(), patch_sets=[True]).images[0]
    assert ok.error is None
