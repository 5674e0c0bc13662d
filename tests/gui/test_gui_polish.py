"""The desktop window, part 3: what a review of the window found drawn wrong or said too
little.  The grid under a message, thin images, the image list's lines, a number typed
out of its range, a rank no group can hold.

pytest-qt, offscreen, small images; the fixtures are ``conftest.py``'s.
"""

from __future__ import annotations

import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"  # before anything imports Qt

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("pytestqt")

from PySide6.QtCore import QPoint, QRect, Qt  # noqa: E402
from PySide6.QtWidgets import (QApplication, QStyle, QStyleOptionViewItem,  # noqa: E402
                               QToolButton)

from kpca_denoise.params import DenoiseParams  # noqa: E402
from gui_support import FAST, outcome_of, run, smooth  # noqa: E402


def _thin(tmp_path, name="thin.png"):
    """A 300 x 4 image: a line in any view."""
    rng = np.random.default_rng(4)
    x = np.arange(300)
    a = np.clip(128 + 60 * np.sin(x / 9.0) + rng.normal(0, 20, (4, 300)), 0, 255)
    path = tmp_path / name
    Image.fromarray(a.astype(np.uint8)).save(path)
    return path


def _grid_whole(w, in_view: bool = True) -> None:
    """Every panel of the grid shown: its title, view and lines one under the other, none
    over another panel, and (``in_view``) all of it in the part of the grid in view."""
    QApplication.processEvents()
    vp = w.grid_scroll.viewport()
    seen: list[QRect] = []
    for p in w.grid.panels():
        if not p.isVisible():
            continue
        t, v, m = p.title.geometry(), p.view.geometry(), p.metrics.geometry()
        name = p.title.text()
        assert t.bottom() < v.top() and v.bottom() < m.top(), (name, t, v, m)
        assert p.contentsRect().contains(m), (name, m, p.contentsRect())
        r = QRect(p.mapTo(vp, QPoint(0, 0)), p.size())
        assert not any(r.intersects(o) for o in seen), name
        seen.append(r)
        if in_view:
            assert vp.rect().contains(r), (name, r, vp.rect())
    assert seen
    if in_view:
        assert w.grid_scroll.verticalScrollBar().maximum() == 0


def test_an_export_message_leaves_every_caption_of_the_grid_in_view(window, images, tmp_path,
                                                                    qtbot):
    # the banner over the grid pushed the lines under its bottom row of views out of sight
    # (a window as low as a 1366x768 screen leaves it, the panel and the docks around it)
    window.resize(1280, 620)
    window.load_paths([images["u8"]])
    run(qtbot, window, FAST.replace(ranks=(1, 2, 4, 8, 16)))
    _grid_whole(window)
    height = window.grid_scroll.viewport().height()
    assert window.export_current(tmp_path / "out")
    assert window.banner.isVisible() and window.banner.text().startswith("Exported")
    QApplication.processEvents()
    assert window.grid_scroll.viewport().height() < height  # the message takes its room ...
    _grid_whole(window)  # ... and the grid fits in what is left, every caption in view
    # a message of two lines too, and the banner is dismissed as before
    window.report_error("Could not write /a/folder/with/a/rather/long/name/" + "x" * 120)
    QApplication.processEvents()
    _grid_whole(window)
    qtbot.mouseClick(window.banner.findChild(QToolButton), Qt.MouseButton.LeftButton)
    assert not window.banner.isVisible()
    QApplication.processEvents()
    assert window.grid_scroll.viewport().height() == height
    _grid_whole(window)


def test_a_thin_images_captions_stay_under_its_views(window, tmp_path, qtbot):
    # a 300 x 4 image (patch size 4): its views were squeezed to the height of a line and
    # the lines under them drawn over them
    window.load_paths([_thin(tmp_path)])
    run(qtbot, window, DenoiseParams(patch_size=4, ranks=(1, 2, 4, 8, None)))
    for size in ((1280, 820), (1366, 768), (1920, 1080)):
        window.resize(*size)
        _grid_whole(window)
        for r, p in window.grid.rank_panels.items():
            assert p.view.height() >= 2 * p.metrics.fontMetrics().lineSpacing(), (size, r)
            assert p.metrics.lines() and p.metrics.lines()[0], (size, r)
    # a window too low for the grid: it scrolls, still nothing drawn over anything
    window.resize(1000, 560)
    _grid_whole(window, in_view=False)


def _shown_lines(lst, row: int) -> tuple[list[str], QRect]:
    """The lines the list draws for ``row`` and the rectangle it draws them in (the text's,
    inside the margins the style keeps)."""
    it = lst.item(row)
    opt = QStyleOptionViewItem()
    lst.initViewItemOption(opt)
    opt.rect = lst.visualItemRect(it)
    lst.itemDelegate().initStyleOption(opt, lst.indexFromItem(it))
    style = lst.style()
    margin = style.pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, lst) + 1
    rect = style.subElementRect(QStyle.SubElement.SE_ItemViewItemText, opt, lst)
    return opt.text.replace("\u2028", "\n").split("\n"), rect.adjusted(margin, 0, -margin, 0)


def test_the_image_list_shows_each_status_whole(window, tmp_path):
    # "✓ 5 ranks" was cut under a description broken over two lines (and under every
    # entry once a thin image's icon made the list's rows low)
    import tifffile

    long_name = tmp_path / "a_rather_long_name_for_a_colour_frame_0012.tif"
    tifffile.imwrite(long_name, np.zeros((40, 60, 3), np.uint16))
    camera = tmp_path / "cam.png"
    Image.fromarray(smooth(48, 48, 255).astype(np.uint8)).save(camera)
    window.load_paths([_thin(tmp_path), long_name, camera])
    lst = window.imageset.list
    statuses = ["✓ 5 ranks", "✓ 5 ranks · other parameters", "✓ 1 rank"]
    for row, status in enumerate(statuses):
        window.imageset.set_status(row, status)
    QApplication.processEvents()
    fm = lst.fontMetrics()
    assert lst.horizontalScrollBar().maximum() == 0  # the entries as wide as the list
    for row, status in enumerate(statuses):
        assert lst.viewport().rect().contains(lst.visualItemRect(lst.item(row)))
        lines, rect = _shown_lines(lst, row)
        # none wider than the room (Qt would break or cut it), all of them in the entry
        assert all(fm.horizontalAdvance(ln) <= rect.width() for ln in lines), (lines, rect)
        assert 3 <= len(lines) and len(lines) * fm.lineSpacing() <= rect.height(), (lines, rect)
        assert lines[-1].startswith("✓ 5 ranks" if row < 2 else "✓ 1 rank"), lines
    # the description broken after a comma where the entry has a line to spare
    assert " ".join(_shown_lines(lst, 1)[0][1:-1]) == "60×40×3, uint16, TIFF"
    name = _shown_lines(lst, 1)[0][0]
    assert name.endswith("0012.tif") and "…" in name  # elided in the middle: which frame
    for row, status in enumerate(statuses):
        tip = lst.item(row).toolTip()  # every line whole in the tooltip, and the path
        assert lst.item(row).text() in tip and str(tmp_path) in tip


def _type(qtbot, spin, text: str) -> None:
    spin.setFocus()
    spin.selectAll()
    qtbot.keyClicks(spin, text)
    qtbot.keyClick(spin, Qt.Key.Key_Return)


def test_a_patch_size_typed_out_of_range_is_said_not_changed_silently(window, qtbot):
    spin, bar = window.params_panel.patch_size, window.statusBar()
    _type(qtbot, spin, "999")
    # what may be typed is as before (9: the third 9 was refused) ...
    assert spin.value() == 9 and window.params_panel.params().patch_size == 9
    assert bar.currentMessage() == "patch size: at most 64 pixels"  # ... and the user is told
    _type(qtbot, spin, "1")
    assert spin.text() == "auto" and window.params_panel.params().patch_size is None
    assert bar.currentMessage() == "patch size: 1 is below 2, so auto (2 to 64 pixels, or auto)"
    bar.clearMessage()
    _type(qtbot, spin, "16")
    assert spin.value() == 16 and bar.currentMessage() == ""
    # the range in the tooltips
    assert "2 to 64 pixels" in spin.toolTip()
    assert "1 to 64 pixels" in window.params_panel.stride.toolTip()


def test_a_rank_no_group_can_hold_says_all_kept_where_it_fits(qtbot):
    # "eff. rank 31.0" under rank 99999 said nothing of the noise kept with every component
    from kpca_denoise.gui import texts
    from kpca_denoise.gui.model import ResultCache
    from kpca_denoise.gui.views import ImagePanel, fit_lines

    noisy = np.random.default_rng(0).normal(128, 20, (40, 40)).clip(0, 255).astype(np.uint8)
    rec = ResultCache().add(outcome_of(noisy, DenoiseParams(ranks=(2, 99999))))
    text = texts.rank_metrics_text(rec, 99999, None, rec.noise_sigma)
    assert text.endswith("eff. rank 31.0 (all\u00a0kept)"), text
    assert "all" not in texts.rank_metrics_text(rec, 2, None, rec.noise_sigma)
    panel = ImagePanel("rank 99999")
    qtbot.addWidget(panel)
    panel.set_metrics(text)
    panel.metrics.set_lines(2)
    panel.resize(220, 200)
    panel.show()
    QApplication.processEvents()
    assert panel.metrics.lines()[-1] == "eff. rank 31.0 (all\u00a0kept)"
    # where it has no room the remark goes first, not the number ("eff." alone, "…")
    panel.metrics.set_lines(3)
    panel.resize(110, 200)
    QApplication.processEvents()
    assert panel.metrics.lines()[-1] == "eff. rank 31.0", panel.metrics.lines()
    assert panel.metrics.toolTip() == text
    n = len  # one unit per character
    assert fit_lines("noise σ ≈ 18.3 · eff. rank 31.0 (all kept)", n, 20, 3) == \
        ["noise σ ≈ 18.3", "eff. rank 31.0"]
    assert fit_lines("noise σ ≈ 18.3 · eff. rank 31.0 (all kept)", n, 25, 2) == \
        ["noise σ ≈ 18.3", "eff. rank 31.0 (all kept)"]
    # a remark with numbers is data, never left out unmarked
    assert fit_lines("≈ previous rank (Δ +0.10 dB)", n, 16, 2) == \
        ["≈ previous rank", "(Δ +0.10 dB)"]


def test_a_rank_no_group_can_hold_gets_the_command_lines_note_in_the_log():
    # ranks such as 99999 showed "eff. rank 31.0" with no word that the noise is all kept
    from kpca_denoise.gui import texts

    noisy = np.random.default_rng(0).normal(128, 20, (40, 40)).clip(0, 255).astype(np.uint8)
    out = outcome_of(noisy, DenoiseParams(ranks=(99999, 2)))
    assert out.error is None
    notes = [ln for ln in texts.outcome_log_lines(out, False) if "above what a group" in ln]
    assert notes == ["n.png: rank 99999 above what a group of 32 patches holds (31 components): "
                     "every component is kept, the noise too; use ranks up to 31"]
    out2 = outcome_of(noisy, DenoiseParams(ranks=(8, 2)))
    assert not [ln for ln in texts.outcome_log_lines(out2, False) if "above what a group" in ln]
