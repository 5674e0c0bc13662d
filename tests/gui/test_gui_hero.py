"""The image is the hero (issue 65, item 2): zoom steps, one view alone with a strip of
thumbnails, an A/B split between any two results, the preview's region marked at any
zoom, a loupe."""

from __future__ import annotations

import numpy as np
import pytest
from gui_support import run, settle
from PIL import Image

from kpca_denoise.gui.views import MARK_MIN, view_scale
from kpca_denoise.params import DenoiseParams

GLOBAL = DenoiseParams(method="global", ranks=(2, 4), n_train=300, preimage_iterations=30)


@pytest.mark.parametrize("pct", [50, 100, 200, 400])
def test_zoom_steps_from_the_menu_give_their_scale(window, images, qtbot, pct):
    window.load_paths([images["big"]])
    settle(qtbot, window)
    act = window.act_one_to_one if pct == 100 else window.act_zoom[pct]
    assert act.shortcut().toString()  # a key, shown in the menu
    act.trigger()
    assert view_scale(window.grid.master) == pytest.approx(pct / 100, rel=0.02)
    assert not window.fitted
    window.act_reset_zoom.trigger()  # fit: the whole 96 px image in view
    assert window.fitted
    qtbot.waitUntil(lambda: view_scale(window.grid.master) * 96 <= window.grid.master.width() + 1,
                    timeout=2000)


def test_zoom_in_and_out_step_through_the_steps(window, images, qtbot):
    window.load_paths([images["big"]])
    settle(qtbot, window)
    window.zoom_percent(100)
    window.act_zoom_in.trigger()
    assert view_scale(window.grid.master) == pytest.approx(2.0, rel=0.02)
    window.act_zoom_out.trigger()
    window.act_zoom_out.trigger()
    assert view_scale(window.grid.master) == pytest.approx(0.5, rel=0.02)
    window.act_zoom_out.trigger()  # below the smallest step: fit
    assert window.fitted


def test_one_view_alone_with_a_strip_of_the_input_and_every_rank(window, images, qtbot):
    window.load_paths([images["big"]])
    run(qtbot, window, GLOBAL)
    grid = window.grid
    small = grid.rank_panels[4].view.width()
    window.select_rank_index(1)  # rank 4
    window.act_single.trigger()
    panel = grid.rank_panels[4]
    assert grid.large is panel and grid.strip.isVisible()
    qtbot.waitUntil(lambda: panel.view.width() > 2 * small, timeout=2000)
    # the view fills most of the views' space: at least 60 % of its height, and its lines
    # stay under it, clear of the strip (the strip's height was counted as 0 at first)
    assert panel.view.height() > 0.6 * window.grid_scroll.viewport().height()
    assert panel.metrics.geometry().top() >= panel.view.geometry().bottom()
    assert panel.geometry().bottom() < grid.strip.geometry().top()
    assert grid.strip.height() >= 72
    titles = [b.text() for b, _ in grid.strip.buttons]
    assert titles[0] == grid.input_panel.title.text() and titles[-2:] == ["rank 2", "rank 4"]
    assert [b.isChecked() for b, _ in grid.strip.buttons][-1]
    assert not grid.strip.buttons[0][0].icon().isNull()
    # a thumbnail click shows that one alone, at the same zoom
    window.zoom_percent(200)
    grid.strip.buttons[-2][0].click()
    assert grid.large is grid.rank_panels[2]
    qtbot.waitUntil(lambda: view_scale(grid.rank_panels[2].vb) == pytest.approx(2.0, rel=0.05),
                    timeout=2000)
    window.act_single.trigger()  # the grid again
    assert grid.large is None and not grid.strip.isVisible()
    assert grid.rank_panels[4].isVisible() and grid.input_panel.isVisible()


def test_the_split_compares_any_two_results(window, images, qtbot):
    window.load_paths([images["big"]])
    run(qtbot, window, GLOBAL)
    split = window.split
    window.act_split.trigger()
    keys = [split.a_combo.itemData(i) for i in range(split.a_combo.count())]
    assert keys[0] == "input" and ("rank", 2) in keys and ("rank", 4) in keys
    assert split.labels[0] == "noisy"  # by default the input
    rec = window.session.shown(window.current_entry(), window.current_params()).record
    # rank 2 left, rank 4 right
    split.a_combo.setCurrentIndex(keys.index(("rank", 2)))
    split.a_combo.activated.emit(split.a_combo.currentIndex())
    split.b_combo.setCurrentIndex(keys.index(("rank", 4)))
    split.b_combo.activated.emit(split.b_combo.currentIndex())
    assert split.labels == ("rank 2", "rank 4")
    np.testing.assert_array_equal(split.before, rec.ranks[2].output)
    np.testing.assert_array_equal(split.after, rec.ranks[4].output)
    col = split.split_column()
    assert split.values_at(col - 1, 5)[0] == ("rank 2", rec.ranks[2].output[5, col - 1])
    assert split.values_at(col + 1, 5)[0] == ("rank 4", rec.ranks[4].output[5, col + 1])
    # the choice stays when the views are drawn again (another rank selected)
    window.select_rank_index(0)
    settle(qtbot, window)
    assert split.labels == ("rank 2", "rank 4")


def test_the_preview_region_is_marked_at_any_zoom(window, tmp_path, qtbot):
    # a 256 px region of a 12 Mpx photo at fit zoom was a 10 px box
    rng = np.random.default_rng(0)
    path = tmp_path / "wide.png"
    Image.fromarray(rng.integers(0, 255, (300, 3000), dtype=np.uint8)).save(path)
    window.load_paths([path])
    settle(qtbot, window)
    window.params_panel.set_params(GLOBAL.replace(add_noise=20.0))
    assert window.draw_preview((10, 10, 74, 74))  # 64 px: a few screen pixels at fit zoom
    panel = window.grid.input_panel
    qtbot.waitUntil(lambda: panel.mark is not None and panel.mark.isVisible(), timeout=3000)
    rect = panel.mark.rect()
    assert rect.width() * view_scale(panel.vb) >= MARK_MIN - 1
    assert rect.contains(42, 42)  # around the region
    window.zoom_percent(100)  # 64 screen pixels: the region's own rectangle is enough
    qtbot.waitUntil(lambda: not panel.mark.isVisible(), timeout=2000)
    window.cancel_run()
    qtbot.waitUntil(lambda: not window.runner.is_running(), timeout=60_000)


def test_the_loupe_magnifies_the_pixels_under_the_cursor(window, images, qtbot):
    window.load_paths([images["big"]])
    settle(qtbot, window)
    window.act_loupe.trigger()
    assert window.act_loupe.isChecked()
    panel = window.grid.input_panel
    window._on_hover(panel, (40, 50, panel.data[50, 40]))
    assert window.loupe.isVisible()
    pm = window.loupe.pixmap()
    assert pm.width() == 48 * 4 and pm.height() == 48 * 4
    window._on_hover(panel, None)  # off the image
    assert not window.loupe.isVisible()
    window.act_loupe.trigger()
    window._on_hover(panel, (40, 50, panel.data[50, 40]))
    assert not window.loupe.isVisible()


def test_where_auto_fell_is_cleared_when_a_run_starts_or_the_method_changes(window, images, qtbot):
    # "auto≈2.5" of an earlier run stayed on the spectrum of another run and method
    window.load_paths([images["big"]])
    grouped = DenoiseParams(ranks=(2, None), add_noise=20.0, profile="fast")
    run(qtbot, window, grouped)
    spectrum = window.spectrum
    assert None in spectrum._rank_lines
    assert spectrum._rank_lines[None].label.textItem.toPlainText().startswith("auto")
    marks = []
    window.runner.started.connect(
        lambda job: marks.append(None in spectrum._rank_lines) if job.purpose == "run" else None)
    run(qtbot, window, GLOBAL.replace(ranks=(2, None), add_noise=20.0))
    assert marks == [False]  # gone as the global run started
    # the global method's auto rank is its own (16 for an image), not the grouped one's
    assert spectrum._rank_lines[None].value() == 16
    window.params_panel.set_params(grouped)  # back: its own result and its own mark
    settle(qtbot, window)
    assert None in spectrum._rank_lines and spectrum._rank_lines[None].value() != 16
    window.params_panel.set_params(GLOBAL.replace(ranks=(2, None), noise_model="poisson-gaussian",
                                                  add_noise=20.0))
    settle(qtbot, window)  # parameters nothing was computed with: no mark of another's
    assert None not in spectrum._rank_lines or spectrum._rank_lines[None].value() == 16


def test_an_image_after_an_empty_view_is_drawn_at_its_size(qtbot):
    # a rank arriving after its "computing…" placeholder was drawn 256 times too large
    from kpca_denoise.gui.views import ImagePanel

    panel = ImagePanel("rank 4")
    qtbot.addWidget(panel)
    a = np.arange(256 * 256, dtype=np.uint16).reshape(256, 256)
    panel.set_image(a, (0.0, 65535.0))
    panel.set_image(None, placeholder="computing…")
    panel.set_image(a, (0.0, 65535.0))
    assert panel.image.transform().m11() == 1.0 and panel.image.transform().m22() == 1.0
    assert panel.image.mapRectToParent(panel.image.boundingRect()).width() == 256
