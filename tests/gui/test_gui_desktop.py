"""The desktop window, part 2 (issue 35): the preview of a region, exports that the
command line reproduces, the format of exports, the window's layout and keys.

pytest-qt, offscreen, small images; the fixtures are ``conftest.py``'s.
"""

from __future__ import annotations

import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"  # before anything imports Qt

import json

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("pytestqt")

import pyqtgraph as pg  # noqa: E402

from kpca_denoise import cli  # noqa: E402
from kpca_denoise.io import read_item  # noqa: E402
from kpca_denoise.params import DenoiseParams  # noqa: E402
from kpca_denoise.pipeline import denoise_set  # noqa: E402
from gui_support import RUN_TIMEOUT_MS, run, settle, trial_args  # noqa: E402


def _camera(side: int, tmp_path, name="camera.png"):
    from kpca_denoise.samples import sample_images_dir

    a = np.asarray(Image.open(sample_images_dir() / "camera.png"))[64:64 + side, 96:96 + side]
    path = tmp_path / name
    Image.fromarray(a).save(path)
    return path, a


def _preview(qtbot, w, box=None):
    """Show the preview rectangle (moved to ``box`` = x0, y0, x1, y1) and wait for its result."""
    with qtbot.waitSignal(w.runner.finished, timeout=RUN_TIMEOUT_MS):
        if w.preview_roi is None:
            w.toggle_preview()
        else:
            w.request_preview()
    if box is not None:
        x0, y0, x1, y1 = box
        with qtbot.waitSignal(w.runner.finished, timeout=RUN_TIMEOUT_MS):
            w.preview_roi.setPos([x0, y0])
            w.preview_roi.setSize([x1 - x0, y1 - y0])  # ends with sigRegionChangeFinished
    settle(qtbot, w)
    return w.session.preview(w.current_entry(), w.current_params())


@pytest.mark.parametrize("params", [
    DenoiseParams(ranks=(1, 4, None), add_noise=20.0),
    DenoiseParams(method="global", ranks=(4, None), n_train=300, preimage_iterations=30,
                  add_noise=20.0),
], ids=["grouped", "global"])
def test_the_preview_equals_the_full_result_in_its_region(window, tmp_path, qtbot, params):
    path, _ = _camera(96, tmp_path)
    window.load_paths([path])
    window.params_panel.set_params(params)
    pv = _preview(qtbot, window, (40, 20, 72, 60))
    assert pv is not None and not pv.error
    y0, y1, x0, x1 = pv.box
    # widened to the tiles' grid (multiples of 40 px), a region of the image
    assert (y0, x0) <= (20, 40) and (y1, x1) >= (60, 72) and y1 - y0 <= 80 < 96
    # the rank views show it, in place
    panel = window.grid.rank_panels[params.ranks[0]]
    assert panel.metrics.text().startswith("PSNR") and panel.metrics.toolTip().endswith(
        "in the preview's region")
    assert panel.frame is not None and panel.frame.isVisible()
    shown = panel.data
    np.testing.assert_array_equal(shown[y0:y1, x0:x1], pv.outputs[params.ranks[0]])
    # the full run: the same pixels there, every rank
    run(qtbot, window, params)
    rec = window.session.record(window.current_entry(), params)
    for r in params.ranks:
        np.testing.assert_array_equal(rec.ranks[r].output[y0:y1, x0:x1], pv.outputs[r])
    assert window.grid.rank_panels[params.ranks[0]].metrics.text().startswith("PSNR")


def test_a_preview_of_an_image_run_in_tiles_is_its_result_there(tmp_path):
    """The full run in 2 x 2 tiles (their calibration made once for the whole image);
    the preview's tile is none of them."""
    from kpca_denoise.gui.jobs import JobItem
    from kpca_denoise.gui.image_preview import run_preview

    _, a = _camera(96, tmp_path)
    params = DenoiseParams(ranks=(2, None), add_noise=20.0, tile_size=64)
    full = denoise_set([a], params).images[0]
    pv = run_preview(JobItem("k", "camera", a, False, params.ranks), params, (20, 60, 40, 72),
                     None, None)
    y0, y1, x0, x1 = pv.box
    # the region asked for, widened to the tiles' grid (twice the pilot's stride, 8 px,
    # and stage 2's, 5 px: multiples of 40)
    assert not pv.error and (y0, y1, x0, x1) == (0, 80, 40, 80)
    for r in params.ranks:
        np.testing.assert_array_equal(full.outputs[r][y0:y1, x0:x1], pv.outputs[r])


def test_a_colour_preview_on_the_images_edge_is_its_result_there(tmp_path):
    """The preview's tile computes only what its core depends on (the driver's ``core``):
    a colour image, the region on its top and right edges."""
    from kpca_denoise.samples import sample_images_dir
    from kpca_denoise.gui.jobs import JobItem
    from kpca_denoise.gui.image_preview import run_preview

    a = np.asarray(Image.open(sample_images_dir() / "astronaut.png"))[40:136, 200:296]
    params = DenoiseParams(ranks=(2, None), add_noise=20.0, grouped={"search_radius": 8})
    full = denoise_set([a], params).images[0]
    pv = run_preview(JobItem("c", "astronaut", a, False, params.ranks), params, (0, 30, 60, 96),
                     None, None)
    y0, y1, x0, x1 = pv.box
    assert not pv.error and (y0, x1) == (0, 96) and y1 >= 30 and x0 <= 60
    assert pv.group_spectra[0]["groups"] < 0.8 * full.stats["grouped"][0]["groups"]
    for r in params.ranks:
        assert pv.outputs[r].shape == (y1, x1 - x0, 3)
        np.testing.assert_array_equal(full.outputs[r][y0:y1, x0:x1], pv.outputs[r])


def test_the_preview_halo_is_this_noise_levels_and_exact(tmp_path):
    """At sigma 10 the stage-1 matching window is narrower than the widest any noise level
    gets: the preview's tile takes the narrower halo, the core's own geometry for this
    image, and its core is still the full run's pixels (a search radius of 4 keeps the
    tile inside the image)."""
    from kpca_denoise.gui.jobs import JobItem
    from kpca_denoise.gui.image_preview import image_decisions, run_preview
    from kpca_denoise.tiling import grouped_geometry, grouped_halo

    _, a = _camera(128, tmp_path)
    params = DenoiseParams(ranks=(2, None), add_noise=10.0, grouped={"search_radius": 4})
    full = denoise_set([a], params)
    item = JobItem("halo", "camera", a, False, params.ranks)
    noisy, sigma, vst, calibrated = image_decisions(item, params, None, None)[:4]
    halo, _ = grouped_halo(noisy, sigma, calibrated)
    g = full.images[0].stats["grouped"][0]["params"]  # the geometry the core resolved
    p = g["patch_size"]
    assert halo == (2 * (g["search_radius1"] + p) + g["match_size1"] - p
                    + 2 * (g["search_radius"] + p) + g["match_size"] - p)
    assert halo < grouped_geometry(calibrated)[0]
    pv = run_preview(item, params, (40, 80, 40, 80), None, None)
    y0, y1, x0, x1 = pv.box
    assert not pv.error and (y0, y1, x0, x1) == (40, 80, 40, 80)
    for r in params.ranks:
        np.testing.assert_array_equal(full.images[0].outputs[r][y0:y1, x0:x1], pv.outputs[r])


def test_a_parameter_change_updates_the_preview(window, tmp_path, qtbot):
    path, _ = _camera(64, tmp_path)
    window.load_paths([path])
    window.params_panel.set_params(DenoiseParams(ranks=(2, None), noise_sigma=10.0))
    first = _preview(qtbot, window)
    assert first is not None and first.noise_sigma == 10.0
    with qtbot.waitSignal(window.runner.finished, timeout=RUN_TIMEOUT_MS):
        window.params_panel.noise_sigma.set_value(30.0)
        window.params_panel.noise_sigma.changed.emit()
    settle(qtbot, window)
    second = window.session.preview(window.current_entry(), window.current_params())
    assert second is not None and second.noise_sigma == 30.0
    # more noise removed: the result moves further from the input
    assert (np.abs(second.outputs[None].astype(float) - first.outputs[None]).mean() > 0.5)


# -- exports the command line reproduces --------------------------------------------------


def test_a_rank_exported_from_a_multi_rank_run_is_what_its_sidecar_gives(window, tmp_path, qtbot):
    """'auto' (= 16) exported from a run comparing auto and 32 came from the model fitted
    for 32, and the sidecar said ranks [auto]: the command line gave other pixels (the
    iterative eigensolver's top 16 of 32 are not its top 16 alone), under another name."""
    path, a = _camera(128, tmp_path)
    window.load_paths([path])
    params = DenoiseParams(method="global", ranks=(None, 32), n_train=1600, add_noise=25.0)
    run(qtbot, window, params)
    window.select_rank(None)
    gui_out = tmp_path / "gui"
    written = window.export_current(gui_out)
    target = gui_out / "camera_kpca_r16.png"  # the command line's name for rank 16
    assert target in written, written
    sidecar = json.loads((gui_out / "camera_kpca_r16.json").read_text())
    assert sidecar["rank"] is None and sidecar["params"]["ranks"] == [None, 32]
    cli_out = tmp_path / "cli"
    rc = cli.main(["denoise", str(path), "-o", str(cli_out), "--params",
                   str(gui_out / "camera_kpca_r16.json"), "-q",
                   *trial_args(gui_out / "camera_kpca_r16.json")])
    assert rc == 0
    np.testing.assert_array_equal(read_item(target).array, read_item(cli_out / target.name).array)
    # what the record is for: 'auto' fitted alone is another result
    alone = denoise_set([a], params.replace(ranks=(None,))).images[0].outputs[16]
    assert np.any(alone != read_item(target).array)


def test_exports_in_a_chosen_format_and_one_line_refusals(window, images, tmp_path, qtbot):
    window.load_paths([images["u8"], images["u16"]])
    params = DenoiseParams(method="global", ranks=(4,), n_train=300, preimage_iterations=30)
    run(qtbot, window, params)
    run(qtbot, window, params, window.run_all)
    window.select_rank(4)
    # the choice is in the File menu, remembered
    tiff = next(a for a in window.export_format_actions if a.data() == "tiff")
    tiff.trigger()
    assert window.export_format == "tiff" and window.settings.value("export_format") == "tiff"
    out = tmp_path / "out"
    written = window.export_current(out)
    assert out / "gray8_kpca_r4.tif" in written
    back = read_item(out / "gray8_kpca_r4.tif")
    rec = window.session.record(window.entries[0], params)
    assert back.format == "TIFF"
    np.testing.assert_array_equal(back.array, rec.ranks[4].output)
    # 16-bit into JPEG: refused in one line naming the fix; the 8-bit image is written
    next(a for a in window.export_format_actions if a.data() == "jpeg").trigger()
    written = window.export_set(tmp_path / "jpeg")
    assert [p.name for p in written if p.suffix == ".jpg"] == ["gray8_kpca_r4.jpg"]
    assert window.banner.isVisible()
    assert ("gray16.png: cannot be written as JPEG: JPEG cannot store 16-bit images; choose png "
            "or tiff") in window.banner.text()
    assert not (tmp_path / "jpeg" / "gray16_kpca_r4.jpg").exists()


# -- ranks under the default method --------------------------------------------------------


def test_ranks_differ_under_the_default_method_and_the_spectrum_shows_what_they_keep(
        window, tmp_path, qtbot):
    """Ranks 1, 2, 4, 8 and auto looked the same in the window under the grouped method
    (the shrinkage kept fewer components than the cap)."""
    path, _ = _camera(96, tmp_path)
    window.load_paths([path])
    params = DenoiseParams(ranks=(1, 2, 4, None), add_noise=25.0)
    run(qtbot, window, params)
    rec = window.session.record(window.current_entry(), params)
    psnr = {r: rec.ranks[r].metrics["psnr"] for r in params.ranks}
    explicit = [psnr[r] for r in (1, 2, 4)]
    assert min(abs(a - b) for a, b in zip(explicit, explicit[1:])) >= 0.2, psnr
    assert psnr[None] >= max(explicit) - 0.1, psnr
    for r in (1, 2, 4):  # the line under each rank: what it kept
        assert f"eff. rank {r:.1f}" in window.grid.rank_panels[r].metrics.text()
    # the spectrum: the groups' own kernel PCA, every compared rank marked, the selected
    # one's share of the variance said
    sp = window.spectrum
    assert sp.group_text == "groups' own kernel PCA: mean, 10–90 % band, dashed median"
    assert sp.eigenvalues.size > 4 and np.all(np.diff(sp.eigenvalues) <= 1e-9 * sp.eigenvalues[0])
    # the spread over the groups: the median and the band around the mean's components
    lo, med, hi = (c.yData for c in (sp.band_lo, sp.median, sp.band_hi))
    assert lo.size == med.size == hi.size == sp.eigenvalues.size
    assert np.all(lo <= med) and np.all(med <= hi) and np.any(lo < hi)
    assert lo[0] <= sp.eigenvalues[0] <= hi[0] and sp.band.isVisible()
    assert {key for key, _ in sp.ranks} == {1, 2, 4, None}
    auto_at = dict(sp.ranks)[None]
    assert 0 < auto_at < 8 and auto_at == round(rec.effective_rank(None), 1)
    window.select_rank(2)
    cum = sp.cum_curve.yData
    assert sp.status_text().endswith(
        f"rank 2 keeps {100 * cum[1]:.0f}% of the variance")
    # the status line sits over the plot, clear of the rank marks' labels inside it
    pi = sp.getPlotItem()
    assert pi.titleLabel.isVisible()
    assert pi.titleLabel.sceneBoundingRect().bottom() <= pi.vb.sceneBoundingRect().top() + 1
    assert all(not pi.titleLabel.sceneBoundingRect().intersects(line.label.sceneBoundingRect())
               for line in sp._rank_lines.values())
    sp.clear_spectrum("a run starts")  # no band left from the last result
    assert not sp.band.isVisible() and sp.median.yData is None


# -- the window at 1366 x 768, enlarged panels, keys, a second window ----------------------


def _window_on(qtbot, tmp_path, avail, name="w.ini"):
    from PySide6.QtCore import QSettings

    from kpca_denoise.gui.main_window import MainWindow

    w = MainWindow(settings=QSettings(str(tmp_path / name), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    w.place_on_screen(avail)
    w.show()
    qtbot.waitExposed(w)
    return w


def test_at_1366x768_spectrum_and_progress_are_in_view_together(qtbot, tmp_path):
    from PySide6.QtCore import QRect
    from PySide6.QtWidgets import QApplication

    w = _window_on(qtbot, tmp_path, QRect(0, 0, 1366, 768))
    w.params_panel.set_params(DenoiseParams(ranks=(1, 2, 4)))
    QApplication.processEvents()
    assert not w.tabifiedDockWidgets(w.dock_spectrum)  # not two tabs of one dock
    spec, prog = w.dock_spectrum, w.dock_progress
    assert spec.isVisible() and prog.isVisible()
    assert not spec.geometry().intersects(prog.geometry())
    assert not w.spectrum.viewport().visibleRegion().isEmpty() and w.spectrum.height() >= 140
    assert not w.progress.visibleRegion().isEmpty()
    # the stages in two columns: every shown stage's bar is in view
    assert w.progress.columns == 2
    for stage in w.progress.shown:
        assert not w.progress.rows[stage][1].visibleRegion().isEmpty(), stage
    # the bottom docks leave the images most of the height
    assert spec.height() <= 0.3 * w.height()
    # titles fit their panels (not "noisy (i… + σ 25)")
    for panel in w.grid.panels():
        if panel.isVisible() and panel.title.text():
            fm = panel.title.fontMetrics()
            assert fm.horizontalAdvance(panel.title.text()) <= panel.title.contentsRect().width(), \
                panel.title.text()
    # five ranks at 1366x768: narrow columns, the views taller than their images, so a
    # third line under every view keeps PSNR, SSIM and the effective rank whole
    w.params_panel.set_params(DenoiseParams(ranks=(1, 2, 4, 8, None)))
    w.refresh_views()
    QApplication.processEvents()
    text = "PSNR 28.26 dB · SSIM 0.664 · eff. rank 1.0"
    panel = w.grid.rank_panels[1]
    panel.set_metrics(text)
    assert panel.metrics.n_lines == 3 and "…" not in " ".join(panel.metrics.lines())
    assert {p.metrics.n_lines for p in w.grid.panels()} == {3}  # one height per row
    # a long title drops its remark in brackets before it is elided ("auto …kage)")
    panel.set_title("auto (shrinkage of every group's components)")
    assert panel.title.shown(panel.title.contentsRect().width()) == "auto"
    # the line over the views: the whole width, broken between words, not cut by the
    # rank choice ("(wl")
    assert w.info.wordWrap() and w.info.width() >= w.grid_scroll.width()


def test_a_double_click_shows_one_rank_large_and_another_all_again(window, images, qtbot):
    window.load_paths([images["big"]])
    run(qtbot, window, DenoiseParams(method="global", ranks=(2, 4), n_train=300,
                                      preimage_iterations=30))
    panel = window.grid.rank_panels[4]
    small = panel.view.width()
    centre = panel.view.viewport().rect().center()
    _double_click(qtbot, panel.view.viewport(), centre)
    qtbot.waitUntil(lambda: window.grid.large is panel, timeout=2000)
    qtbot.waitUntil(lambda: panel.view.width() > 1.8 * small, timeout=2000)
    assert not window.grid.rank_panels[2].isVisible() and not window.grid.input_panel.isVisible()
    # the large view shows the whole image (fitted)
    qtbot.waitUntil(lambda: _covers(panel.vb, 96, 96), timeout=2000)
    _double_click(qtbot, panel.view.viewport(), panel.view.viewport().rect().center())
    qtbot.waitUntil(lambda: window.grid.large is None, timeout=2000)
    assert window.grid.rank_panels[2].isVisible() and window.grid.input_panel.isVisible()
    qtbot.waitUntil(lambda: abs(panel.view.width() - small) <= 2, timeout=2000)


def _double_click(qtbot, widget, pos) -> None:
    """What a mouse sends: press, release, then a double-click and its release."""
    from PySide6.QtCore import Qt

    qtbot.mouseClick(widget, Qt.MouseButton.LeftButton, pos=pos)
    qtbot.mouseDClick(widget, Qt.MouseButton.LeftButton, pos=pos)
    qtbot.mouseRelease(widget, Qt.MouseButton.LeftButton, pos=pos)


def _covers(vb, h, w) -> bool:
    (x0, x1), (y0, y1) = vb.viewRange()
    return x0 <= 0.5 and x1 >= w - 0.5 and y0 <= 0.5 and y1 >= h - 0.5


def test_the_first_esc_after_a_menu_cancels_the_run(window, tmp_path, qtbot):
    """A menu closed with Esc left the menu bar holding the keyboard: the next Esc only
    let go of it and the run went on."""
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    path, _ = _camera(128, tmp_path)
    window.load_paths([path])
    window.params_panel.set_params(DenoiseParams(method="global", ranks=(4, 8), n_train=1500))
    with qtbot.waitSignal(window.runner.finished, timeout=RUN_TIMEOUT_MS) as blocker:
        assert window.run_current()
        QTest.keyClick(window.menuBar(), Qt.Key.Key_Escape)  # where that Esc goes
    assert blocker.args[0].status == "cancelled"


def test_a_second_window_cascades_instead_of_stacking_exactly(qtbot, tmp_path):
    import os

    from PySide6.QtCore import QRect, QSettings

    from kpca_denoise.gui.settings import CASCADE

    avail = QRect(0, 0, 1920, 1080)
    a = _window_on(qtbot, tmp_path, avail, "shared.ini")
    b = _window_on(qtbot, tmp_path, avail, "shared.ini")  # would open exactly on top of a
    assert (b.x(), b.y()) != (a.x(), a.y())
    a.close()
    b.close()
    # a window of another process (its position in the settings) counts as well
    s = QSettings(str(tmp_path / "other.ini"), QSettings.Format.IniFormat)
    s.setValue(f"open_windows/{os.getppid()}", "0,0")
    s.setValue("open_windows/999999999", "40,40")  # a process that has ended: forgotten
    s.sync()
    from kpca_denoise.gui.main_window import MainWindow

    c = MainWindow(settings=QSettings(str(tmp_path / "other.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(c)
    c.resize(1000, 700)
    c._geometry_restored = True
    c.move(0, 0)
    c.place_on_screen(avail)
    assert (c.x(), c.y()) == (CASCADE, CASCADE)
    assert QSettings(str(tmp_path / "other.ini"), QSettings.Format.IniFormat).value(
        "open_windows/999999999") is None


def test_two_windows_running_at_once_each_get_their_own_results(qtbot, tmp_path):
    """The windows of one application share the compute process: a run started in a
    second window while the first's goes on waits its turn, and each window gets its
    own image's result (a window reading the shared queue used to drop the other's
    messages, and one run never ended).  A closed window starts nothing more."""
    from PySide6.QtCore import QRect

    avail = QRect(0, 0, 1920, 1080)
    a = _window_on(qtbot, tmp_path, avail, "a.ini")
    b = _window_on(qtbot, tmp_path, avail, "b.ini")
    pa, ia = _camera(56, tmp_path, "a.png")
    pb, ib = _camera(64, tmp_path, "b.png")
    a.load_paths([pa])
    b.load_paths([pb])
    params = DenoiseParams(ranks=(None,), add_noise=20.0)
    for w in (a, b):
        w.params_panel.set_params(params)
        w._auto_timer.stop()
    ends: dict = {"a": [], "b": []}
    a.runner.finished.connect(lambda s: ends["a"].append(s))
    b.runner.finished.connect(lambda s: ends["b"].append(s))
    ran = lambda s: s.job.purpose == "run"  # noqa: E731
    with qtbot.waitSignals([a.runner.finished, b.runner.finished], timeout=2 * RUN_TIMEOUT_MS,
                           check_params_cbs=[ran, ran]):
        assert a.run_current() and b.run_current()
    assert [(s.job.purpose, s.status) for s in ends["a"] + ends["b"]] == [("run", "done")] * 2
    for w, img in ((a, ia), (b, ib)):
        rec = w.session.record(w.current_entry(), params)
        assert rec is not None
        np.testing.assert_array_equal(rec.ranks[None].output,
                                      denoise_set([img], params).images[0].outputs[None])
    a.toggle_preview()  # a preview asked for, then the window closed before it starts
    a._preview_timer.start()
    a.close()
    assert not a._preview_timer.isActive() and not a._prepare_timer.isActive()
    assert not a.runner.is_running()
    b.close()


def test_the_strength_next_to_the_noise_level_updates_the_preview(window, tmp_path, qtbot):
    path, _ = _camera(64, tmp_path)
    window.load_paths([path])
    window.params_panel.set_params(DenoiseParams(ranks=(None,), add_noise=20.0))
    first = _preview(qtbot, window)
    assert first.params.strength == 1.0 and first.noise_estimated
    with qtbot.waitSignal(window.runner.finished, timeout=RUN_TIMEOUT_MS):
        window.params_panel.strength.setValue(2.0)  # the spin box beside the noise level
    settle(qtbot, window)
    second = window.session.preview(window.current_entry(), window.current_params())
    assert second is not None and second.params.strength == 2.0
    assert second.noise_sigma == pytest.approx(2 * first.noise_sigma)
    smoother = np.abs(np.diff(second.outputs[None].astype(float), axis=1)).mean()
    assert smoother < np.abs(np.diff(first.outputs[None].astype(float), axis=1)).mean()
    # the line over the views says the noise measured and the strength applied
    measured = first.noise_sigma
    assert (f"preview: noise σ estimated {measured:.3g}" in window.info.text()
            and f"× strength 2 = {2 * measured:.3g} removed" in window.info.text())


def test_the_noise_in_words():
    from kpca_denoise.gui.texts import noise_text

    assert noise_text(25.0, False) == "σ 25"
    assert noise_text(20.0, True, 1.0, {"kind": "white"}) == "σ estimated 20 (white)"
    assert noise_text(30.0, True, 1.5, {"kind": "correlated", "correlation": 1.42,
                                        "neighbour": 0.31}) == (
        "σ estimated 20 (correlated noise: 1.4× the finest scale, neighbours 0.31) "
        "× strength 1.5 = 30 removed")
    # the noise level against brightness, from the darkest level to the brightest
    nlf = {"kind": "correlated", "correlation": 1.42, "neighbour": 0.31, "levels": [20, 120, 230],
           "level_sigmas": [4.5, 9.0, 13.25], "signal_dependent": True}
    assert noise_text(13.0, True, 1.0, nlf) == (
        "σ estimated 13 (correlated noise: 1.4× the finest scale, neighbours 0.31; "
        "brightness 20→230: σ 4.5→13.2; grows with the signal)")
    assert noise_text(20.0, True, 1.0, {"kind": "white", "levels": [50.0, 200.0],
                                        "level_sigmas": [20.1, 19.9]}) == (
        "σ estimated 20 (white; brightness 50→200: σ 20.1→19.9)")
    # black's mean level is a float's round-off (it read "brightness 4.89e-15→207")
    assert noise_text(2.5, True, 1.0, {"kind": "white", "levels": [4.89e-15, 207.0],
                                       "level_sigmas": [0.0, 2.58]}) == (
        "σ estimated 2.5 (white; brightness 0→207: σ 0→2.58)")


def test_run_during_a_preview_stops_it_and_runs(window, tmp_path, qtbot):
    path, _ = _camera(64, tmp_path)
    window.load_paths([path])
    params = DenoiseParams(ranks=(2, None), noise_sigma=15.0)
    window.params_panel.set_params(params)
    window.toggle_preview()
    assert window.runner.purpose() == "preview"
    with qtbot.waitSignal(window.runner.started, timeout=RUN_TIMEOUT_MS,
                          check_params_cb=lambda job: job.purpose == "run"):
        assert window.run_current()  # not refused: the preview gives way
    with qtbot.waitSignal(window.runner.finished, timeout=RUN_TIMEOUT_MS):
        pass
    settle(qtbot, window)
    rec = window.session.record(window.current_entry(), params)
    assert rec is not None and set(rec.ranks) == {2, None}
    assert window.grid.rank_panels[2].metrics.text().startswith("remaining noise")


def test_the_preview_decisions_are_made_when_an_image_is_selected(window, tmp_path, qtbot):
    """Selected and left alone, an image gets its whole-image decisions in the background
    (quietly: Run stays enabled); the first preview then denoises only its region, and a
    run asked for during the decisions stops them and runs."""
    path, _ = _camera(64, tmp_path)
    other, _ = _camera(64, tmp_path, "other.png")
    window.prepare_delay_ms = 0
    window.params_panel.set_params(DenoiseParams(ranks=(None,), add_noise=20.0))
    with qtbot.waitSignal(window.runner.started, timeout=RUN_TIMEOUT_MS,
                          check_params_cb=lambda job: job.purpose == "prepare"):
        window.load_paths([path])
    assert window.act_run.isEnabled() and not window.progress.cancel_button.isEnabled()
    with qtbot.waitSignal(window.runner.finished, timeout=RUN_TIMEOUT_MS):
        pass
    pv = _preview(qtbot, window)
    assert pv is not None and not pv.error and pv.decided_before
    assert "(the image's decisions made before)" in window.log_view.toPlainText()
    # a run during the decisions of another image
    params = DenoiseParams(ranks=(None,), noise_sigma=15.0)
    window.params_panel.set_params(params)
    with qtbot.waitSignal(window.runner.started, timeout=RUN_TIMEOUT_MS,
                          check_params_cb=lambda job: job.purpose == "prepare"):
        window.load_paths([other])
    with qtbot.waitSignal(window.runner.finished, timeout=RUN_TIMEOUT_MS,
                          check_params_cb=lambda s: s.job.purpose == "run"):
        assert window.run_current()  # not refused: the decisions give way
    rec = window.session.record(window.current_entry(), params)
    assert rec is not None and None in rec.ranks


def test_the_background_decisions_stop_cleanly_when_cancelled(window, tmp_path, qtbot):
    """A run asked for during the decisions cancels them: they stop by themselves (the
    token checked between their steps, the measurement waited for), the compute process
    is not ended and started again."""
    from kpca_denoise.gui.worker import compute_server

    _, a = _camera(256, tmp_path)
    path = tmp_path / "big.png"
    Image.fromarray(np.tile(a, (3, 3))).save(path)  # 768 x 768
    window.prepare_delay_ms = 0
    window.params_panel.set_params(DenoiseParams(ranks=(None,), add_noise=20.0))
    pid = compute_server().proc.pid
    with qtbot.waitSignal(window.runner.started, timeout=RUN_TIMEOUT_MS,
                          check_params_cb=lambda job: job.purpose == "prepare"):
        window.load_paths([path])
    with qtbot.waitSignal(window.runner.finished, timeout=RUN_TIMEOUT_MS) as blocker:
        window.runner.cancel()
    summary = blocker.args[0]
    assert summary.job.purpose == "prepare" and summary.status == "cancelled"
    assert summary.message == "cancelled by the user"  # not "(compute process ended)"
    assert compute_server().proc.pid == pid


def test_the_profile_is_chosen_in_the_panel_and_runs_previews_and_is_remembered(
        window, tmp_path, qtbot):
    from PySide6.QtCore import Qt

    from kpca_denoise.gui.main_window import MainWindow
    from kpca_denoise.params import PROFILES

    panel = window.params_panel
    assert [panel.profile.itemData(i) for i in range(panel.profile.count())] == list(PROFILES)
    assert [panel.profile.itemData(i, Qt.ItemDataRole.ToolTipRole)
            for i in range(panel.profile.count())] == list(PROFILES.values())
    path, _ = _camera(64, tmp_path)
    window.load_paths([path])
    window.params_panel.set_params(DenoiseParams(ranks=(None,), add_noise=20.0))
    assert _preview(qtbot, window).params.profile == "default"
    # choosing 'fast' updates the preview, with the fast preset's grouped options
    with qtbot.waitSignal(window.runner.finished, timeout=RUN_TIMEOUT_MS):
        panel.profile.setCurrentIndex(panel.profile.findData("fast"))
    settle(qtbot, window)
    fast = DenoiseParams(ranks=(None,), add_noise=20.0, profile="fast")
    assert fast.grouped != DenoiseParams().grouped  # the preset changes something
    pv = window.session.preview(window.current_entry(), window.current_params())
    assert pv is not None and not pv.error and pv.params == fast
    # the run gets it
    with qtbot.waitSignal(window.runner.started, timeout=RUN_TIMEOUT_MS,
                          check_params_cb=lambda job: job.purpose == "run") as started:
        assert window.run_current()
    assert started.args[0].params == fast
    with qtbot.waitSignal(window.runner.finished, timeout=RUN_TIMEOUT_MS):
        pass
    # the sidecar of an export and the remembered settings bring it back
    settle(qtbot, window)
    window.export_current(tmp_path / "gui")
    sidecar = next((tmp_path / "gui").glob("*.json"))
    data = json.loads(sidecar.read_text())
    assert data["params"]["profile"] == "fast"
    panel.set_params(DenoiseParams(ranks=(None,), add_noise=20.0))
    assert panel.params().profile == "default"
    panel.set_params(DenoiseParams.from_dict(data["params"]))
    assert panel.params() == fast
    window.save_settings()
    w2 = MainWindow(settings=window.settings)
    qtbot.addWidget(w2)
    assert w2.params_panel.params() == fast.replace(add_noise=None)  # the trial's noise: not kept
    # 'global' has no profile: the choice is off and the parameters keep the default
    panel.method.setCurrentIndex(panel.method.findData("global"))
    assert not panel.profile.isEnabled() and panel.params().profile == "default"
    w2.shutdown()


# -- a stack as a sequence (issue 32), a region drawn -------------------------------------


def test_a_stacks_pages_run_as_a_sequence_and_say_which_neighbours_they_used(
        window, tmp_path, qtbot):
    """The sequence choice is in the panel; with 'yes' a page's run denoises the stack's
    pages together (the pipeline's sequence path: the same pixels as denoise_set on the
    pages), and the line over the views and the log say which neighbouring pages a
    page's groups took patches from; with 'no' the page runs alone."""
    tifffile = pytest.importorskip("tifffile")
    _, a = _camera(72, tmp_path)
    pages = np.stack([a[k:k + 48, k:k + 48] for k in range(3)])  # a view panning 1 px a page
    stack = tmp_path / "pan.tif"
    tifffile.imwrite(stack, pages, photometric="minisblack")
    window.load_paths([stack])
    panel = window.params_panel
    assert [panel.sequence.itemData(i) for i in range(panel.sequence.count())] == ["auto", "yes", "no"]
    params = DenoiseParams(ranks=(None,), add_noise=20.0, sequence="yes")
    window.imageset.set_current(1)
    run(qtbot, window, params)
    assert panel.params().sequence == "yes"
    want = denoise_set(list(pages), params)
    for k in range(3):
        window.imageset.set_current(k)
        rec = window.session.record(window.current_entry(), params)
        assert rec is not None and len(rec.fit_set) == 3
        np.testing.assert_array_equal(rec.ranks[None].output, want.images[k].outputs[None])
        seq = rec.resolved["page_sequence"]
        assert seq["decision"] == "sequence" and seq["page"] == k
        used = set(seq["neighbours_used"])
        assert "0" in used and used - {"0"} and used <= {str(j - k) for j in range(3)}
        assert sum(seq["neighbours_used"].values()) == pytest.approx(1.0, abs=1e-3)
    settle(qtbot, window)
    shares = ", ".join(f"{'this' if int(d) == 0 else int(d)} {100 * s:.0f}%" for d, s in sorted(
        seq["neighbours_used"].items(), key=lambda ds: int(ds[0])))
    assert f"page 3 of 3 with its neighbours (patches from pages {shares})" in window.info.text()
    assert any("page 2 of 3 with its neighbours" in line for line in window.log_view.lines)
    # the sidecar of the stack's export says it, so the command line gives these pages
    window.export_current(tmp_path / "gui")
    sidecar = json.loads(next((tmp_path / "gui").glob("*.json")).read_text())
    assert sidecar["params"]["sequence"] == "yes"
    # a page's preview goes through the stack path with its neighbours, as the run does,
    # and says so (parameters not run yet: no rank of a record is missing, nothing runs
    # by itself after the preview)
    with qtbot.waitSignal(window.runner.finished, timeout=RUN_TIMEOUT_MS):
        window.params_panel.set_params(params.replace(strength=1.5))
        window.toggle_preview()
    assert any("the preview denoised page 3 of 3 with pages 1–3" in line
               for line in window.log_view.lines), window.log_view.lines[-3:]
    window.toggle_preview()
    # 'no': the page alone, as the pipeline gives it alone
    alone = params.replace(sequence="no")
    run(qtbot, window, alone)
    rec = window.session.record(window.current_entry(), alone)
    assert rec.fit_set == () and "page_sequence" not in rec.resolved
    np.testing.assert_array_equal(rec.ranks[None].output,
                                  denoise_set([pages[2]], alone).images[0].outputs[None])
    window.save_settings()
    assert json.loads(window.settings.value("params"))["sequence"] == "no"


class _Drag:
    """A pyqtgraph mouse drag (one move from a to b, view coordinates) as a ViewBox reads it."""

    def __init__(self, vb, a, b, shift=True, finish=True):
        from PySide6.QtCore import Qt

        self.vb, self.a, self.b, self.finish = vb, a, b, finish
        self.mods = Qt.KeyboardModifier.ShiftModifier if shift else Qt.KeyboardModifier.NoModifier
        self.accepted = False

    def button(self):
        from PySide6.QtCore import Qt
        return Qt.MouseButton.LeftButton

    def modifiers(self):
        return self.mods

    def isFinish(self):  # noqa: N802
        return self.finish

    def isStart(self):  # noqa: N802
        return False

    def buttonDownPos(self, *_):  # noqa: N802
        return pg.Point(self.vb.mapFromView(self.a))

    def pos(self):
        return pg.Point(self.vb.mapFromView(self.b))

    def lastPos(self):  # noqa: N802 (one move from the press)
        return pg.Point(self.vb.mapFromView(self.a))

    def accept(self):
        self.accepted = True

    def ignore(self):
        pass


def test_shift_drag_draws_a_preview_region(window, tmp_path, qtbot):
    from PySide6.QtCore import QPointF

    path, _ = _camera(64, tmp_path)
    window.load_paths([path])
    window.params_panel.set_params(DenoiseParams(ranks=(None,), add_noise=20.0))
    settle(qtbot, window)
    vb = window.grid.input_panel.vb
    # a slip of the mouse (under 8 pixels) draws nothing
    vb.mouseDragEvent(_Drag(vb, QPointF(10, 10), QPointF(14, 30)))
    assert window.preview_roi is None
    with qtbot.waitSignal(window.runner.finished, timeout=RUN_TIMEOUT_MS):
        vb.mouseDragEvent(_Drag(vb, QPointF(40.2, 44), QPointF(8, 20.4)))  # any direction
    settle(qtbot, window)
    assert window.preview_box() == (20, 44, 8, 40)
    pv = window.session.preview(window.current_entry(), window.current_params())
    y0, y1, x0, x1 = pv.box
    assert (y0, x0) <= (20, 8) and (y1, x1) >= (44, 40)
    # drawn again on a rank's view (the views share their coordinates): the region moves
    rank_vb = window.grid.rank_panels[None].vb
    with qtbot.waitSignal(window.runner.finished, timeout=RUN_TIMEOUT_MS):
        rank_vb.mouseDragEvent(_Drag(rank_vb, QPointF(30, 30), QPointF(60, 50)))
    assert window.preview_box() == (30, 50, 30, 60)
    # without Shift a drag pans, as before
    before = vb.viewRange()
    vb.mouseDragEvent(_Drag(vb, QPointF(30, 30), QPointF(20, 20), shift=False))
    assert window.preview_box() == (30, 50, 30, 60) and vb.viewRange() != before


def test_the_decisions_grace_counts_the_compute_process_cpu_not_the_clock(monkeypatch):
    """A cancelled preview's decisions get PREPARE_GRACE CPU seconds of the compute
    process: a loaded machine stretches the clock, not the work; a process using no CPU
    is stuck after STALL_GRACE seconds."""
    import subprocess
    import sys
    import time

    from kpca_denoise.gui import worker

    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.3)  # both started
        monkeypatch.setattr(worker, "STALL_GRACE", 0.8)
        hot = worker.CancelClock(busy.pid, cpu=True)
        cold = worker.CancelClock(idle.pid, cpu=True)
        wall = worker.CancelClock(idle.pid, cpu=False)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.2:
            hot.spent(), cold.spent()
            time.sleep(0.05)
        assert 0.0 < hot.spent() <= time.monotonic() - t0 + 0.05 and not hot.stuck()
        assert cold.spent() < 0.05 and cold.stuck()  # asleep: no CPU, stuck
        assert wall.spent() >= 1.2 and not wall.stuck()  # the clock's seconds
        assert worker.process_cpu_seconds(idle.pid) is not None
    finally:
        busy.kill(), idle.kill()
        busy.wait(), idle.wait()
    assert worker.process_cpu_seconds(idle.pid) is None  # gone
