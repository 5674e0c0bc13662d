"""A camera RAW file in the window: read by the command line's reader (its mosaic, the
array denoised), shown developed (issue 65 with issue 63's io/raw.py)."""

from __future__ import annotations

import numpy as np
import pytest
from gui_support import settle

from kpca_denoise.gui.model import raw_view
from kpca_denoise.io import read_item
from kpca_denoise.io.writing import write_dng

pytest.importorskip("rawpy")


def _dng(path, mosaic, cfa="RGGB"):
    meta = {"raw": dict(cfa=cfa, black=[64.0] * 4, white=4095, wb=[2.0, 1.0, 1.5, 1.0],
                        color_matrix=np.eye(3).tolist(), make="Kpca", model="Test", iso=800),
            "orientation": 1, "output_suffix": ".dng"}
    write_dng(path, np.asarray(mosaic, dtype=np.uint16), meta)
    return path


def test_a_raw_opens_as_its_mosaic_and_is_shown_developed(window, tmp_path, qtbot):
    # red photosites bright, green and blue dark: a red picture, not a grey checkerboard
    m = np.full((64, 96), 64, np.uint16)
    m[0::2, 0::2] = 2000
    path = _dng(tmp_path / "shot.dng", m)
    window.load_paths([path])
    settle(qtbot, window)
    e = window.current_entry()
    np.testing.assert_array_equal(e.array, read_item(path).array)  # the reader's mosaic
    shown = window.grid.input_panel.data
    assert shown.shape == (64, 96, 3) and shown.dtype == np.uint8  # the mosaic's coordinates
    r, g, b = (shown[..., c].mean() for c in range(3))
    assert r > 150 and g < 5 and b < 5
    assert window._levels_for(e) == (0.0, 255.0)


def test_the_developed_view_follows_the_pattern_white_balance_and_an_odd_size():
    raw = dict(cfa="GRBG", black=[0.0] * 4, white=1000, wb=[2.0, 1.0, 1.0, 1.0])
    m = np.zeros((5, 7), np.uint16)
    m[0::2, 1::2] = 250  # R in GRBG: (0, 1); the white balance doubles it
    v = raw_view(m, raw)
    assert v.shape == (5, 7, 3)
    expect = round(255 * 0.5 ** (1 / 2.2))
    assert abs(int(v[0, 0, 0]) - expect) <= 1 and v[..., 1].max() == 0 and v[..., 2].max() == 0
    assert (v[4] == v[3]).all() and (v[:, 6] == v[:, 5]).all()  # the odd row and column


def test_a_raw_is_denoised_as_the_command_line_denoises_it(window, tmp_path, qtbot):
    """The run takes the mosaic with its pattern and levels (``mosaic_of``, the command
    line's), not a grey picture of it; the preview of a region is refused in one line."""
    from gui_support import run

    from kpca_denoise.mosaic import mosaic_of
    from kpca_denoise.params import DenoiseParams
    from kpca_denoise.pipeline import denoise_set

    rng = np.random.default_rng(3)
    yy, xx = np.mgrid[0:48, 0:64]
    clean = 600 + 1500 * (0.5 + 0.5 * np.sin(xx / 6.0) * np.cos(yy / 9.0))
    m = np.clip(rng.poisson(clean / 4.0) * 4.0 + rng.normal(0, 20, clean.shape), 0, 4095)
    path = _dng(tmp_path / "noisy.dng", m)
    window.load_paths([path])
    p = DenoiseParams(ranks=(None,), profile="fast")
    run(qtbot, window, p)
    rec = window.session.shown(window.current_entry(), window.current_params()).record
    want = denoise_set([mosaic_of(read_item(path))], p).images[0].outputs[None]
    np.testing.assert_array_equal(rec.ranks[None].output, want)
    assert window.grid.rank_panels[None].data.shape == (48, 64, 3)  # shown developed
    window.toggle_preview()
    assert window.preview_roi is None and "denoised whole" in window.banner.label.text() + \
        window.statusBar().currentMessage()


def test_a_raws_export_is_a_dng_of_the_denoised_mosaic(window, tmp_path, qtbot):
    from gui_support import run

    from kpca_denoise.params import DenoiseParams

    rng = np.random.default_rng(4)
    m = np.clip(1000 + rng.normal(0, 40, (32, 48)), 0, 4095)
    path = _dng(tmp_path / "flat.dng", m)
    window.load_paths([path])
    run(qtbot, window, DenoiseParams(ranks=(None,), profile="fast"))
    window.export_current(tmp_path / "gui")
    outs = [p for p in (tmp_path / "gui").iterdir() if p.suffix.lower() == ".dng"]
    assert len(outs) == 1
    rec = window.session.shown(window.current_entry(), window.current_params()).record
    np.testing.assert_array_equal(read_item(outs[0]).array, rec.ranks[None].output)
