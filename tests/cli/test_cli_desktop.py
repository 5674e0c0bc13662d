"""The command line, part 2 (issue 35): the output format, a stack of 1x1 pages."""

from __future__ import annotations

import numpy as np
import pytest
import tifffile
from PIL import Image

from kpca_denoise.cli import main
from kpca_denoise.io import read_item


def _run(args, capsys):
    try:
        rc = main(args)
    except SystemExit as exc:
        rc = exc.code
    return rc, capsys.readouterr().err.strip().splitlines()


def test_a_jpeg_is_written_as_png_when_asked(tmp_path, capsys):
    rng = np.random.default_rng(0)
    a = np.clip(128 + 40 * np.sin(np.arange(32)[:, None] / 4) + rng.normal(0, 15, (32, 32)), 0, 255)
    Image.fromarray(a.astype(np.uint8)).save(tmp_path / "photo.jpg", quality=90)
    rc, err = _run(["denoise", str(tmp_path / "photo.jpg"), "-o", str(tmp_path / "o"),
                    "--format", "PNG", "--noise-sigma", "15", "-q"], capsys)
    assert rc == 0, err
    out = read_item(tmp_path / "o" / "photo_kpca.png")
    assert out.format == "PNG" and out.array.shape == (32, 32) and out.array.dtype == np.uint8


@pytest.mark.parametrize("name, array, fmt, message", [
    ("deep.tif", np.full((16, 16), 40000, np.uint16), "jpeg",
     "deep.tif: cannot be written as JPEG: JPEG cannot store 16-bit images; choose png or tiff"),
    ("pages.tif", np.zeros((5, 16, 16), np.uint8), "png",
     "pages.tif: cannot be written as PNG: a stack of 5 pages needs a multi-page format; "
     "choose tiff"),
    ("float.tif", np.zeros((16, 16), np.float32), "bmp",
     "float.tif: cannot be written as BMP: BMP cannot store floating-point pixels; choose tiff"),
])
def test_a_format_that_cannot_hold_the_input_is_refused_before_any_compute(
        tmp_path, capsys, name, array, fmt, message):
    tifffile.imwrite(tmp_path / name, array)
    rc, err = _run(["denoise", str(tmp_path / name), "-o", str(tmp_path / "o"), "--format", fmt,
                    "-q"], capsys)
    assert rc == 2 and err == [f"error: {message}"]
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


def test_an_unknown_format_is_one_line(tmp_path, capsys):
    rc, err = _run(["denoise", "x.png", "-o", str(tmp_path / "o"), "--format", "gif"], capsys)
    assert rc == 2 and len(err) == 1 and "invalid choice: 'gif'" in err[0]


def test_a_stack_of_1x1_pages_is_read_and_refused_in_one_line(tmp_path, capsys):
    """tifffile records a (5, 1, 1) array with axes 'YQX': it was refused as an
    unsupported axis order; it is 5 pages of 1x1, too small for any patch."""
    tifffile.imwrite(tmp_path / "dots.tif", np.arange(5, dtype=np.uint8).reshape(5, 1, 1))
    item = read_item(tmp_path / "dots.tif")
    assert item.is_stack and item.array.shape == (5, 1, 1)
    rc, err = _run(["denoise", str(tmp_path / "dots.tif"), "-o", str(tmp_path / "o"), "-q"], capsys)
    assert rc == 1
    assert err[0].startswith("error: dots.tif [page 1/5]: image 1x1 is smaller than the 5x5 patch")
    assert "Traceback" not in "\n".join(err)
