"""Camera RAW files (io/raw.py): DNGs made here from synthetic mosaics, read back through
LibRaw (rawpy) with their pattern, levels, white balance, colour and orientation."""

import builtins
import sys

import numpy as np
import pytest

from kpca_denoise.io import InputError, read_item, read_items, write_item
from kpca_denoise.io.raw import MISSING_RAWPY
from kpca_denoise.io.writing import write_dng

rawpy = pytest.importorskip("rawpy")

#: XYZ -> camera (D65) of a plausible sensor, rows summing to 1 as LibRaw normalises them
CAM_XYZ = np.array([[0.70, 0.10, 0.20], [-0.20, 1.10, 0.10], [0.05, -0.25, 1.20]])


def raw_meta(cfa="RGGB", black=(510, 512, 514, 516), white=4095, wb=(2.0, 1.0, 1.6, 1.0),
             orientation=1, make="Kpca", model="Test One", iso=6400):
    """The ``meta`` of a RAW item as :func:`kpca_denoise.io.raw.read_raw` gives it."""
    return {"raw": dict(cfa=cfa, black=[float(b) for b in black], white=int(white),
                        wb=list(wb), color_matrix=CAM_XYZ.tolist(), make=make, model=model,
                        iso=iso),
            "orientation": orientation, "output_suffix": ".dng"}


def make_dng(path, mosaic, **kw):
    """A DNG of ``mosaic`` (H, W) uint16 with :func:`raw_meta`'s metadata (``kw``)."""
    write_dng(path, np.asarray(mosaic, dtype=np.uint16), raw_meta(**kw))
    return path


def test_a_dng_reads_as_its_mosaic_with_pattern_levels_and_metadata(tmp_path):
    rng = np.random.default_rng(0)
    m = rng.integers(500, 4000, (40, 60)).astype(np.uint16)
    p = make_dng(tmp_path / "shot.dng", m, cfa="GRBG", orientation=6)
    it = read_item(p)
    assert it.kind == "image" and it.format == "DNG" and it.dtype == np.uint16
    np.testing.assert_array_equal(it.array, m)
    r = it.meta["raw"]
    assert r["cfa"] == "GRBG" and r["white"] == 4095
    assert r["black"] == [510.0, 512.0, 514.0, 516.0]  # per CFA position
    assert (r["make"], r["model"], r["iso"]) == ("Kpca", "Test One", 6400)
    assert it.meta["orientation"] == 6
    np.testing.assert_allclose(np.array(r["wb"][:3]) / r["wb"][1], [2.0, 1.0, 1.6], rtol=1e-4)
    np.testing.assert_allclose(r["color_matrix"], CAM_XYZ, atol=2e-3)


def test_the_dng_written_back_keeps_the_metadata_and_the_dtype(tmp_path):
    rng = np.random.default_rng(1)
    m = rng.integers(500, 4000, (32, 48)).astype(np.uint16)
    src = read_item(make_dng(tmp_path / "a.dng", m, cfa="BGGR", orientation=3))
    out = m.copy()
    out[::2, ::2] += 7
    target = write_item(src, out, tmp_path / "out" / "a_kpca.dng")
    back = read_item(target)
    assert back.dtype == np.uint16
    np.testing.assert_array_equal(back.array, out)
    for key in ("cfa", "black", "white", "make", "model", "iso"):
        assert back.meta["raw"][key] == src.meta["raw"][key], key
    assert back.meta["orientation"] == 3
    np.testing.assert_allclose(back.meta["raw"]["wb"], src.meta["raw"]["wb"], rtol=1e-4)
    np.testing.assert_allclose(back.meta["raw"]["rgb_cam"], src.meta["raw"]["rgb_cam"],
                               atol=1e-3)
    with rawpy.imread(str(target)) as r:  # LibRaw develops it as it develops the input
        assert r.raw_pattern.tolist() == src.meta["raw"]["pattern"]
        assert r.white_level == 4095 and r.sizes.flip == 3


def test_a_raw_is_developed_for_tiff_png_and_jpeg(tmp_path):
    from kpca_denoise.io import in_format

    m = np.empty((32, 48), np.uint16)  # a grey scene: RGGB, black 510-516, R / 2, B / 1.6
    for (y, x), black, wb in zip([(0, 0), (0, 1), (1, 0), (1, 1)], (510, 512, 514, 516),
                                 (2.0, 1.0, 1.0, 1.6)):
        m[y::2, x::2] = black + 800 / wb
    src = read_item(make_dng(tmp_path / "a.dng", m))
    tif = write_item(in_format(src, "tiff"), m, tmp_path / "a_kpca.tif")
    png = write_item(in_format(src, "png"), m, tmp_path / "a_kpca.png")
    t, p = read_item(tif), read_item(png)
    assert t.array.dtype == np.uint16 and t.array.shape[2] == 3
    assert p.array.dtype == np.uint8 and p.array.shape == t.array.shape
    assert np.ptp(t.array[4:-4, 4:-4].reshape(-1, 3).mean(0)) < 0.02 * t.array.mean()  # grey
    assert src.path.read_bytes()  # the original is never replaced


def test_a_mosaic_is_developed_on_the_files_white_level_not_its_brightest_photosite(tmp_path):
    from kpca_denoise.io.raw import develop

    rng = np.random.default_rng(3)
    m = (512 + rng.uniform(0.1, 0.85, (32, 48)) * (4095 - 512)).astype(np.uint16)
    p = make_dng(tmp_path / "a.dng", m, black=(512,) * 4)
    darker = (512 + (m - 512.0) * 0.9).astype(np.uint16)  # 10 % less light, brightest at 77 %
    a, b = develop(p).astype(float).mean(), develop(p, darker).astype(float).mean()
    assert b < 0.97 * a  # darker, not stretched back to the brightest photosite


def test_a_raw_beside_its_camera_jpeg_gives_two_outputs(tmp_path):
    from PIL import Image

    from kpca_denoise.io import collect_inputs, output_path

    make_dng(tmp_path / "photo.dng", np.full((32, 32), 900, np.uint16))
    Image.fromarray(np.zeros((32, 32, 3), np.uint8)).save(tmp_path / "photo.jpg")
    files, errors, _ = collect_inputs([tmp_path])
    items, bad = read_items(files)
    assert not errors and not bad
    names = {output_path(it, tmp_path / "o", "kpca").name for it in items}
    assert names == {"photo_kpca.dng", "photo_kpca.jpg"}


def test_a_corrupt_raw_is_refused_in_one_line_and_the_others_go_on(tmp_path):
    good = make_dng(tmp_path / "good.dng", np.full((32, 32), 900, np.uint16))
    bad = tmp_path / "bad.nef"
    bad.write_bytes(b"II*\x00" + bytes(range(256)) * 8)
    items, errors = read_items([bad, good])
    assert [it.path for it in items] == [good]
    (path, msg), = errors
    assert path == bad and "\n" not in msg and msg.startswith(str(bad))
    assert "not a readable camera RAW file" in msg


def test_without_rawpy_a_raw_gets_one_line_saying_how_to_install_it(tmp_path, monkeypatch):
    p = make_dng(tmp_path / "a.dng", np.full((32, 32), 900, np.uint16))
    real = builtins.__import__

    def no_rawpy(name, *a, **kw):
        if name == "rawpy":
            raise ImportError("No module named 'rawpy'")
        return real(name, *a, **kw)

    monkeypatch.delitem(sys.modules, "rawpy")
    monkeypatch.setattr(builtins, "__import__", no_rawpy)
    with pytest.raises(InputError) as exc:
        read_item(p)
    assert str(exc.value) == f"{p}: {MISSING_RAWPY}"
    assert MISSING_RAWPY == "RAW files need rawpy: pip install 'kpca-denoise[raw]'"
