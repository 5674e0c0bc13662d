import os

import numpy as np
import pytest
from PIL import Image

from kpca_denoise.io import (InputError, LoadedItem, expand_inputs, read_item, read_items,
                             write_item)


def _save(path, array, **kw):
    Image.fromarray(array).save(path, **kw)  # uint16 -> I;16, float32 -> F
    return path


CASES = [
    ("png", np.uint8, 1), ("png", np.uint8, 3), ("png", np.uint8, 4), ("png", np.uint16, 1),
    ("tif", np.uint8, 1), ("tif", np.uint16, 1), ("tif", np.float32, 1), ("tiff", np.uint8, 3),
    ("bmp", np.uint8, 1), ("bmp", np.uint8, 3),
]


@pytest.mark.parametrize("ext,dtype,channels", CASES)
def test_lossless_round_trip_keeps_format_and_bit_depth(tmp_path, rng, ext, dtype, channels):
    shape = (17, 23) if channels == 1 else (17, 23, channels)
    hi = 1.0 if dtype == np.float32 else np.iinfo(dtype).max
    a = (rng.uniform(0, hi, shape)).astype(dtype)
    src = _save(tmp_path / f"in.{ext}", a)
    item = read_item(src)
    assert item.kind == "image" and item.array.dtype == dtype and item.array.shape == shape
    np.testing.assert_array_equal(item.array, a)
    out = write_item(item, item.array, tmp_path / "out" / f"res.{ext}", inputs=[src])
    back = read_item(out)
    assert back.array.dtype == dtype
    np.testing.assert_array_equal(back.array, a)
    with Image.open(out) as im:
        assert im.format == item.format


def test_jpeg_round_trip_is_close(tmp_path, rng):
    a = np.tile(np.linspace(0, 255, 32), (32, 1)).astype(np.uint8)
    src = _save(tmp_path / "in.jpg", a)
    item = read_item(src)
    out = write_item(item, item.array, tmp_path / "o.jpg")
    assert np.abs(read_item(out).array.astype(int) - a).mean() < 3


def test_patch_sets_npy_and_npz(tmp_path, rng):
    a = rng.uniform(size=(10, 8, 8))
    np.save(tmp_path / "s.npy", a)
    np.savez(tmp_path / "s.npz", images=a.astype(np.float32), target=np.arange(10))
    np.savez(tmp_path / "one.npz", anything=a)
    it = read_item(tmp_path / "s.npy")
    assert it.kind == "patchset" and it.array.shape == (10, 8, 8)
    it2 = read_item(tmp_path / "s.npz")
    assert it2.npz_key == "images" and "target" in it2.npz_extra
    assert read_item(tmp_path / "one.npz").npz_key == "anything"
    out = write_item(it2, it2.array * 2, tmp_path / "o" / "s_out.npz")
    with np.load(out) as z:
        np.testing.assert_allclose(z["images"], a.astype(np.float32) * 2)
        np.testing.assert_array_equal(z["target"], np.arange(10))
    out = write_item(it, it.array, tmp_path / "o" / "s_out.npy")
    np.testing.assert_array_equal(np.load(out), a)


@pytest.mark.parametrize("maker,msg", [
    (lambda p: p.write_bytes(b""), "the file is empty"),
    (lambda p: p.write_bytes(b"\x89PNG\r\n\x1a\nthis is not a png"), "not a readable image"),
])
def test_bad_image_files(tmp_path, maker, msg):
    p = tmp_path / "bad.png"
    maker(p)
    with pytest.raises(InputError, match=msg):
        read_item(p)


def test_truncated_png(tmp_path, rng):
    p = _save(tmp_path / "t.png", rng.integers(0, 255, (64, 64), dtype=np.uint8))
    p.write_bytes(p.read_bytes()[:200])
    with pytest.raises(InputError, match="t.png"):
        read_item(p)


def test_unsupported_and_missing(tmp_path):
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(InputError, match="unsupported file type '.txt'"):
        read_item(tmp_path / "notes.txt")
    with pytest.raises(InputError, match="unsupported file type"):
        expand_inputs([tmp_path / "notes.txt"])
    with pytest.raises(InputError, match="no such file or folder"):
        expand_inputs([tmp_path / "missing.png"])


def test_empty_folder(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "readme.txt").write_text("x")
    with pytest.raises(InputError, match="the folder has no supported files"):
        expand_inputs([tmp_path / "empty"])


def test_folder_lists_supported_files_sorted(tmp_path, rng):
    for name in ("b.png", "a.tif", "c.npy"):
        if name.endswith(".npy"):
            np.save(tmp_path / name, rng.uniform(size=(3, 4, 4)))
        else:
            _save(tmp_path / name, rng.integers(0, 255, (8, 8), dtype=np.uint8))
    (tmp_path / "skip.txt").write_text("x")
    assert [p.name for p in expand_inputs([tmp_path])] == ["a.tif", "b.png", "c.npy"]


def test_npz_mixed_and_missing(tmp_path, rng):
    np.savez(tmp_path / "mixed.npz", a=rng.uniform(size=(5, 4, 4)), b=rng.uniform(size=(3, 2)))
    np.savez(tmp_path / "none.npz")
    np.save(tmp_path / "flat.npy", rng.uniform(size=(5, 16)))
    with pytest.raises(InputError, match="mixes several arrays"):
        read_item(tmp_path / "mixed.npz")
    with pytest.raises(InputError, match="holds no arrays"):
        read_item(tmp_path / "none.npz")
    with pytest.raises(InputError, match=r"shape \(N, h, w\)"):
        read_item(tmp_path / "flat.npy")


def test_nan_pixels_rejected(tmp_path):
    a = np.ones((8, 8), np.float32)
    a[3, 3] = np.nan
    with pytest.raises(InputError, match="NaN or Inf"):
        read_item(_save(tmp_path / "n.tif", a))
    np.save(tmp_path / "n.npy", np.full((3, 4, 4), np.inf))
    with pytest.raises(InputError, match="NaN or Inf"):
        read_item(tmp_path / "n.npy")


def test_read_items_keeps_the_good_ones(tmp_path, rng):
    good = _save(tmp_path / "g.png", rng.integers(0, 255, (8, 8), dtype=np.uint8))
    bad = tmp_path / "b.png"
    bad.write_bytes(b"garbage")
    items, errors = read_items([good, bad])
    assert [i.path for i in items] == [good]
    assert errors[0][0] == bad and "not a readable image" in errors[0][1]


def test_never_overwrites_an_input(tmp_path, rng):
    a = rng.integers(0, 255, (8, 8), dtype=np.uint8)
    src = _save(tmp_path / "x.png", a)
    before = src.read_bytes()
    item = read_item(src)
    with pytest.raises(InputError, match="would overwrite the input"):
        write_item(item, a // 2, src)
    link = tmp_path / "link.png"
    os.symlink(src, link)
    with pytest.raises(InputError, match="would overwrite the input"):
        write_item(item, a // 2, link)
    assert src.read_bytes() == before


def test_failed_write_leaves_no_partial_file(tmp_path, rng):
    src = _save(tmp_path / "x.bmp", rng.integers(0, 255, (8, 8), dtype=np.uint8))
    item = read_item(src)
    out = tmp_path / "out"
    with pytest.raises(InputError, match="BMP cannot store 16-bit"):
        write_item(item, np.zeros((8, 8), np.uint16), out / "y.bmp")
    assert not out.exists() or list(out.iterdir()) == []


def test_loaded_item_name(tmp_path):
    it = LoadedItem(tmp_path / "a.png", np.zeros((2, 2), np.uint8), "image", "PNG")
    assert it.name == "a.png" and not it.is_patchset


@pytest.mark.parametrize("shape,photometric", [((4, 19, 23), "rgb"), ((2, 3, 19, 23), "rgb"),
                                               ((3, 19, 23), "rgb")])
def test_planar_tiff_is_written_back_planar(tmp_path, rng, shape, photometric):
    # samples first on disk (planar configuration 'separate'): the pixels are read
    # samples last, and the file written back has the input's layout and array shape
    import tifffile

    a = rng.integers(0, 65535, shape, dtype=np.uint16)
    kw = {"extrasamples": ("unassalpha",)} if shape[-3] == 4 else {}
    tifffile.imwrite(tmp_path / "in.tif", a, photometric=photometric, planarconfig="separate",
                     **kw)
    item = read_item(tmp_path / "in.tif")
    assert item.array.shape[-1] == shape[-3] and item.array.shape[-3] == shape[-2]
    out = write_item(item, item.array, tmp_path / "out" / "res.tif", inputs=[tmp_path / "in.tif"])
    np.testing.assert_array_equal(tifffile.imread(out), a)
    with tifffile.TiffFile(out) as tf, tifffile.TiffFile(tmp_path / "in.tif") as src:
        assert tf.pages[0].planarconfig == tifffile.PLANARCONFIG.SEPARATE
        assert len(tf.pages) == len(src.pages)


def test_imagej_hyperstack_stays_one(tmp_path, rng):
    # a microscope's ImageJ stack: axes, calibration and pages come back as they were
    import tifffile

    a = rng.integers(0, 4000, (4, 2, 24, 30), dtype=np.uint16)
    tifffile.imwrite(tmp_path / "ij.tif", a, imagej=True, resolution=(5.0, 5.0),
                     metadata={"axes": "ZCYX", "spacing": 0.5, "unit": "um", "finterval": 2.0})
    item = read_item(tmp_path / "ij.tif")
    assert item.is_stack and item.array.shape == (8, 24, 30)
    out = write_item(item, item.array, tmp_path / "out" / "res.tif", inputs=[tmp_path / "ij.tif"])
    with tifffile.TiffFile(out) as tf:
        assert tf.is_imagej and tf.series[0].axes == "ZCYX"
        md = tf.imagej_metadata
        assert (md["spacing"], md["unit"], md["finterval"]) == (0.5, "um", 2.0)
        assert md["slices"] == 4 and md["channels"] == 2
        np.testing.assert_array_equal(tf.asarray(), a)


@pytest.mark.parametrize("case", ["iyx", "rgb16", "planar_rgb", "micro"])
def test_imagej_files_imagej_cannot_rewrite_come_back_as_plain_tiffs(tmp_path, rng, case):
    # described as ImageJ but in a layout ImageJ's writer refuses (no hyperstack axes,
    # 16-bit RGB, planar RGB) or with a non-ASCII unit: written all the same, pixels
    # and layout as read
    import tifffile

    u8 = rng.integers(0, 200, (3, 24, 28)).astype(np.uint8)
    desc = "ImageJ=1.53t\nimages=3\n"
    data, kw = {
        "iyx": (u8, {"photometric": "minisblack"}),
        "rgb16": (rng.integers(0, 60000, (24, 28, 3)).astype(np.uint16), {"photometric": "rgb"}),
        "planar_rgb": (u8, {"photometric": "rgb", "planarconfig": "separate"}),
        "micro": (u8, {"photometric": "minisblack"}),
    }[case]
    if case == "micro":
        desc += "slices=3\nunit=\u00b5m\n"
    tifffile.imwrite(tmp_path / "in.tif", data, description=desc.encode(), metadata=None, **kw)
    item = read_item(tmp_path / "in.tif")
    out = write_item(item, item.array, tmp_path / "out" / "res.tif", inputs=[tmp_path / "in.tif"])
    back = read_item(out)
    np.testing.assert_array_equal(back.array, item.array)
    assert back.is_stack == item.is_stack
    np.testing.assert_array_equal(tifffile.imread(out), tifffile.imread(tmp_path / "in.tif"))
    if case == "micro":
        with tifffile.TiffFile(out) as tf:
            assert tf.is_imagej and tf.imagej_metadata["unit"] in ("\\u00b5m", "\u00b5m")


def test_write_item_refuses_an_array_that_is_not_the_items(tmp_path):
    # a (3, 3) array was written for a (10, 4, 4) item, and NaN into a float TIFF that
    # read_item then refused
    import tifffile

    np.save(tmp_path / "s.npy", np.ones((10, 4, 4), np.float32))
    item = read_item(tmp_path / "s.npy")
    with pytest.raises(InputError, match=r"the array \(3, 3\) is not the shape of s.npy \(10, 4, 4\)"):
        write_item(item, np.zeros((3, 3)), tmp_path / "o.npy")
    tifffile.imwrite(tmp_path / "f.tif", np.ones((8, 8), np.float32))
    tif = read_item(tmp_path / "f.tif")
    with pytest.raises(InputError, match="holds NaN or Inf; nothing was written"):
        write_item(tif, np.full((8, 8), np.nan, np.float32), tmp_path / "o.tif")
    assert not (tmp_path / "o.npy").exists() and not (tmp_path / "o.tif").exists()



def test_files_are_written_only_by_io_writing():
    # one module a job: the readers and the input walk never create or replace a file
    import ast
    import pathlib

    import kpca_denoise.io as kio

    writers = {"imwrite", "save", "savez", "savez_compressed", "write_bytes", "write_text",
               "mkstemp", "replace", "link", "unlink", "chmod", "mkdir"}
    for f in pathlib.Path(kio.__file__).parent.glob("*.py"):
        if f.name == "writing.py":
            continue
        for node in ast.walk(ast.parse(f.read_text())):
            if not isinstance(node, ast.Call):
                continue
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if name == "replace" and not (isinstance(fn.value, ast.Name) and fn.value.id == "os"):
                continue  # str.replace
            modes = [a.value for a in node.args[1:2] if isinstance(a, ast.Constant)]
            assert name not in writers and not (name == "open" and modes and modes[0] != "rb"), \
                f"{f.name}:{node.lineno} {name}"
    assert all(hasattr(kio, name) for name in kio.__all__)


def test_folder_links_are_followed_once_and_odd_entries_are_counted(tmp_path):
    # a linked sub-folder was skipped silently, as were broken links and pipes
    import os

    from kpca_denoise.io import collect_inputs

    src = tmp_path / "elsewhere"
    src.mkdir()
    Image.fromarray(np.zeros((8, 8), np.uint8)).save(src / "far.png")
    top = tmp_path / "in"
    top.mkdir()
    Image.fromarray(np.zeros((8, 8), np.uint8)).save(top / "near.png")
    (top / "linked").symlink_to(src, target_is_directory=True)
    (top / "loop").symlink_to(top, target_is_directory=True)  # a link back up: no loop
    (top / "broken.png").symlink_to(tmp_path / "missing.png")
    os.mkfifo(top / "pipe.png")
    files, errors, skipped = collect_inputs([top])
    assert sorted(str(f.rel) for f in files) == ["linked/far.png", "near.png"]
    assert not errors
    assert sorted(p.name for p in skipped) == ["broken.png", "pipe.png"]
