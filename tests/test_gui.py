"""Tests of the desktop GUI (pytest-qt, offscreen).

Small synthetic images and method='global' keep every run to a second or two.
No sleeps: waits are on signals (``qtbot.waitSignal``) or conditions
(``qtbot.waitUntil``).  An autouse fixture fails any test that leaves a
worker thread running, and another keeps QSettings inside ``tmp_path``.
"""

from __future__ import annotations

import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"  # before anything imports Qt

import json
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("pytestqt")
from PySide6.QtCore import QMimeData, QPointF, QSettings, Qt, QTimer, QUrl  # noqa: E402
from PySide6.QtGui import QDropEvent  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from kpca_denoise import cli  # noqa: E402
from kpca_denoise.gui import app as gui_app  # noqa: E402
from kpca_denoise.gui.main_window import MainWindow, rank_tag  # noqa: E402
from kpca_denoise.gui.views import format_value  # noqa: E402
from kpca_denoise.gui.worker import active_threads, params_key  # noqa: E402
from kpca_denoise.io import read_item  # noqa: E402
from kpca_denoise.params import DenoiseParams  # noqa: E402
from kpca_denoise.pipeline import denoise_set  # noqa: E402
from helpers import assert_same_result

# every job of a test is one the test starts and waits for: no background preview decisions
# (tests/test_gui_desktop.py turns them on for the one test about them)
MainWindow.prepare_delay_ms = None

RUN_TIMEOUT_MS = 60_000
FAST = DenoiseParams(method="global", ranks=(2, 4, 8), n_train=300, preimage_iterations=30)


# -- fixtures -------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def temp_settings(tmp_path_factory):
    """Every QSettings in the test (including the default constructor's) lives in tmp."""
    d = tmp_path_factory.mktemp("settings")
    QSettings.setDefaultFormat(QSettings.Format.IniFormat)
    QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, str(d))
    QSettings.setPath(QSettings.Format.NativeFormat, QSettings.Scope.UserScope, str(d))
    return d


@pytest.fixture(autouse=True)
def no_thread_left_running(qapp):
    """Fail a test that leaves a worker thread running (then stop it, so others are clean)."""
    yield
    QApplication.processEvents()
    left = active_threads()
    for t in left:
        t.wait(10_000)
    QApplication.processEvents()
    assert not left, f"worker thread(s) still running after the test: {[t.objectName() for t in left]}"


def _smooth(h: int, w: int, peak: float, seed: int = 0) -> np.ndarray:
    y, x = np.mgrid[0:h, 0:w]
    img = 0.5 + 0.3 * np.sin(x / 5.0) * np.cos(y / 7.0) + 0.15 * (x > w / 2)
    rng = np.random.default_rng(seed)
    return np.clip(img * peak + rng.normal(0, 0.03 * peak, img.shape), 0, peak)


@pytest.fixture
def images(tmp_path) -> dict:
    """48x48 uint8 and uint16 PNGs, a patch set, a corrupt PNG, a 96x96 image."""
    d = tmp_path / "in"
    d.mkdir()
    out = {}
    out["u8"] = d / "gray8.png"
    Image.fromarray(_smooth(48, 48, 255).astype(np.uint8)).save(out["u8"])
    out["u16"] = d / "gray16.png"
    Image.fromarray(_smooth(48, 48, 4000, 1).astype(np.uint16)).save(out["u16"])
    rng = np.random.default_rng(2)
    out["npz"] = tmp_path / "patches.npz"
    np.savez(out["npz"], images=rng.integers(0, 255, (40, 8, 8)).astype(np.uint8))
    out["bad"] = tmp_path / "broken.png"
    out["bad"].write_bytes(b"\x89PNG\r\n\x1a\n this is not an image")
    out["big"] = tmp_path / "big96.png"
    Image.fromarray(_smooth(96, 96, 255, 3).astype(np.uint8)).save(out["big"])
    out["dir"] = d
    return out


@pytest.fixture
def window(qtbot, tmp_path):
    settings = QSettings(str(tmp_path / "window.ini"), QSettings.Format.IniFormat)
    w = MainWindow(settings=settings)
    # no modal question when pytest-qt closes a window whose run a failed test left going
    w.ask = lambda title, text, choices: choices[0]
    qtbot.addWidget(w)
    w.resize(1280, 820)
    w.show()
    qtbot.waitExposed(w)
    yield w
    w.shutdown()


def _run(qtbot, w: MainWindow, params: DenoiseParams, run=None):
    w.params_panel.set_params(params)
    w._auto_timer.stop()  # the test starts this run itself: no run of missing ranks first
    # the run's own end: a preview or the background decisions it stops end first
    with qtbot.waitSignal(w.runner.finished, timeout=RUN_TIMEOUT_MS,
                          check_params_cb=lambda s: s.job.purpose in ("run", "export")) as blocker:
        started = (run or w.run_current)()
        assert started, w.banner.text()
    _settle(qtbot, w)
    return blocker.args[0]


def _settle(qtbot, w: MainWindow) -> None:
    """Results are drawn at the next event-loop turn after they arrive."""
    qtbot.waitUntil(lambda: not w._refresh_pending, timeout=5000)


# -- loading -------------------------------------------------------------------------


def test_load_folder_files_and_keyboard_navigation(window, images, qtbot):
    n = window.load_paths([images["dir"]])
    assert n == 2 and window.imageset.count() == 2
    assert window.load_paths([images["npz"]]) == 1
    assert window.current_index() == 2  # the newly loaded patch set is shown
    mosaic = window.grid.input_panel.image.image
    assert mosaic.ndim == 2 and mosaic.shape[0] > 8 and mosaic.shape[1] > 8  # a grid of samples
    assert window.load_paths([images["u8"]]) == 0  # already loaded: not duplicated
    assert window.imageset.count() == 3
    window.imageset.set_current(0)
    window.activateWindow()
    window.grid.setFocus()
    qtbot.keyClick(window, Qt.Key.Key_PageDown)
    assert window.current_index() == 1
    qtbot.keyClick(window, Qt.Key.Key_PageUp)
    assert window.current_index() == 0
    icon = window.imageset.list.item(0).icon()
    assert not icon.isNull()


def test_drop_files_loads_them(window, images):
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(images["u8"])), QUrl.fromLocalFile(str(images["u16"]))])
    ev = QDropEvent(QPointF(5, 5), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                    Qt.KeyboardModifier.NoModifier)
    window.imageset.list.dropEvent(ev)
    assert [e.name for e in window.entries] == ["gray8.png", "gray16.png"]


def test_corrupt_file_is_reported_and_the_rest_stays_usable(window, images, qtbot):
    window.load_paths([images["u8"], images["bad"]])
    assert [e.name for e in window.entries] == ["gray8.png"]
    assert window.banner.isVisible() and "broken.png" in window.banner.text()
    assert any("broken.png" in line and line.startswith("error") for line in window.log_view.lines)
    assert "broken.png" in window.statusBar().currentMessage()
    assert QApplication.activeModalWidget() is None  # no blocking dialog
    summary = _run(qtbot, window, FAST.replace(ranks=(2,)))  # the good image still runs
    assert summary.status == "done" and summary.done == 1


# -- running -------------------------------------------------------------------------


def test_run_to_completion_shows_every_rank_with_metrics(window, images, qtbot):
    window.load_paths([images["u8"]])
    summary = _run(qtbot, window, FAST.replace(add_noise=20.0))
    assert summary.status == "done" and summary.failed == 0
    assert not window.runner.is_running() and not active_threads()
    e = window.entries[0]
    rec = window.cache.get(e.key, params_key(window.params_panel.params()))
    assert set(rec.ranks) == {2, 4, 8}
    for r in (2, 4, 8):
        out = rec.ranks[r].output
        assert out.shape == e.array.shape and out.dtype == np.uint8
        panel = window.grid.rank_panels[r]
        assert panel.has_image()
        assert "PSNR" in panel.metrics.text() and "SSIM" in panel.metrics.text()
        assert window.grid.resid_panels[r].has_image()
    assert "PSNR" in window.grid.input_panel.metrics.text()  # noisy against the clean input
    # the spectrum shows the final eigenvalues with the compared ranks marked
    xs, ys = window.spectrum.curve.getData()
    assert len(xs) == 8 and np.all(np.diff(ys) <= 1e-9)
    assert set(window.spectrum._rank_lines) == {2, 4, 8}
    assert window.params_panel.gamma.chosen.text()  # the automatic kernel width is shown


def test_the_spectrum_axes_say_only_what_is_there(qtbot):
    # an empty plot ticked components 0.1 ... 0.9; the log axis put "(x0.001)" in front
    # of its label; the right axis stood with no curve; near ranks' labels overlapped
    from kpca_denoise.gui.spectrum import SpectrumPlot

    plot = SpectrumPlot()
    qtbot.addWidget(plot)
    plot.resize(500, 300)
    bottom, left, right = (plot.getPlotItem().getAxis(n) for n in ("bottom", "left", "right"))
    ticks = [v for _, vals in bottom.tickValues(0.5, 8.5, 400) for v in vals]
    assert ticks and all(float(v).is_integer() for v in ticks)
    assert [v for _, vals in bottom.tickValues(0.6, 1.4, 400) for v in vals] == [1.0]
    assert not left.autoSIPrefix and not right.isVisible()
    ev = np.geomspace(100.0, 1e-3, 40)
    plot.set_eigenvalues(ev)  # live: no cumulative curve yet
    assert not right.isVisible()
    plot.set_eigenvalues(ev, final=True, total_variance=float(ev.sum()))
    assert right.isVisible() and len(plot.cum_curve.getData()[0]) == 40
    plot.clear_spectrum("nothing")
    assert not right.isVisible()
    plot.set_ranks((8, 16, None), auto_rank=12)
    heights = [line.label.orthoPos for line in plot._rank_lines.values()]
    assert len(set(heights)) == 3


def test_without_reference_metrics_show_remaining_noise(window, images, qtbot):
    window.load_paths([images["u8"]])
    _run(qtbot, window, FAST.replace(ranks=(4,)))
    assert "remaining noise" in window.grid.rank_panels[4].metrics.text()
    assert window.params_panel.noise_sigma.chosen.text().startswith("estimated")
    # a clean reference turns it into PSNR / SSIM
    assert window.set_reference(images["u8"])
    assert "PSNR" in window.grid.rank_panels[4].metrics.text()


def test_empty_views_say_why_inside_their_panel(window, images, qtbot):
    # the message of an empty view was drawn in the view's coordinates at the image's
    # centre; the reference panel, with no image of its own, put it at (0.5, 0.5) of
    # the linked views: cut at the panel's left edge.  Titles wider than a panel were
    # cut at both ends.
    window.resize(1000, 700)
    window.load_paths([images["u8"]])
    _settle(qtbot, window)
    ref = window.grid.ref_panel
    assert ref.placeholder.isVisible() and "no clean reference" in ref.placeholder.text()
    inside = ref.view.rect()
    assert inside.contains(ref.placeholder.geometry())
    lines = ref.placeholder.fontMetrics().boundingRect(
        ref.placeholder.geometry(), int(ref.placeholder.alignment() | Qt.TextFlag.TextWordWrap),
        ref.placeholder.text())
    assert lines.width() <= inside.width(), (lines, inside)
    for r, panel in window.grid.rank_panels.items():
        assert panel.placeholder.isVisible() and "not computed" in panel.placeholder.text()
        assert panel.view.rect().contains(panel.placeholder.geometry())
        # the title keeps its whole text (and tooltip) however narrow the panel
        label = "auto" if r is None else str(r)
        assert window.grid.resid_panels[r].title.text() == f"residual {label}"
    _run(qtbot, window, FAST.replace(ranks=(4,)))
    assert not window.grid.rank_panels[4].placeholder.isVisible()
    assert ref.placeholder.isVisible()
    # a metrics line wider than its panel breaks between its parts, a number kept with
    # its name, in the panel's two lines (a third line, number and all, was cut off)
    m = window.grid.rank_panels[4].metrics
    m.setText("remaining noise σ ≈ 0.27 · eff. rank 3.2 · ≈ previous rank 2")
    m.resize(150, m.height())
    lines, fm = m.lines(), m.fontMetrics()
    assert len(lines) == 2 and lines[0] == "remaining noise" and lines[1].startswith("σ ≈ 0.27 ")
    assert lines[1].endswith(" …") and m.text().endswith("rank 2")
    assert all(fm.horizontalAdvance(fm.elidedText(t, Qt.TextElideMode.ElideRight, 150)) <= 150
               for t in lines)


def test_poisson_noise_is_described_by_gain_and_sigma(window, tmp_path, qtbot):
    """Under the Poisson-Gaussian model the denoiser works at sigma 1 after the
    transform; the window shows the estimated gain and Gaussian part instead of that
    1 (and a 16-bit image is denoised: it used to come back unchanged)."""
    rng = np.random.default_rng(4)
    clean = _smooth(64, 64, 40000.0, 5)
    noisy = np.clip(64.0 * rng.poisson(clean / 64.0) + rng.normal(0, 300.0, clean.shape), 0, 65535)
    path = tmp_path / "pg16.png"
    Image.fromarray(noisy.astype(np.uint16)).save(path)
    window.load_paths([path])
    _run(qtbot, window, DenoiseParams(ranks=(None,), noise_model="poisson-gaussian"))
    text = window.info.text()
    assert "Poisson-Gaussian gain" in text and "σ estimated" not in text, text
    assert window.grid.input_panel.metrics.text().startswith("gain "), \
        window.grid.input_panel.metrics.text()
    assert window.params_panel.noise_sigma.chosen.text() == ""
    rec = window.cache.get(window.entries[0].key, params_key(window.params_panel.params()))
    out = rec.ranks[None].output
    assert out.dtype == np.uint16 and np.abs(out.astype(float) - noisy.astype(np.uint16)).mean() > 50


def test_event_loop_stays_responsive_and_spectrum_is_live(window, images, qtbot):
    """The longest gap between 10 ms timer ticks during a run stays under 100 ms.

    The machine is shared: another process can take a core from the GUI thread
    for 100 ms whatever the GUI does.  So up to three runs are measured (new
    seed each, nothing cached) and the best must pass; a GUI that blocks on the
    computation (measured: 115-400 ms with the pipeline in a thread of this
    process) fails every one of them.
    """
    window.load_paths([images["big"]])
    live = []
    window.runner.spectrum.connect(lambda ev: live.append(ev.size))
    worst_per_run = []
    for seed in range(3):
        # 1600 training patches: the iterative eigensolver, which reports every iteration
        params = DenoiseParams(method="global", ranks=(4, 8), n_train=1600, preimage_iterations=20,
                               seed=seed)
        window.params_panel.set_params(params)  # builds the rank panels: before the measurement
        ticks = []
        timer = QTimer()
        timer.setTimerType(Qt.TimerType.PreciseTimer)
        timer.setInterval(10)
        timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
        timer.start()
        try:
            with qtbot.waitSignal(window.runner.finished, timeout=RUN_TIMEOUT_MS) as blocker:
                assert window.run_current()
        finally:
            timer.stop()
        assert blocker.args[0].status == "done"
        # a run counts only if the timer ticked often enough to measure it (over
        # 100 ms of run; a run starved by another process is measured again; a GUI
        # blocked by the computation gets one or two ticks and one long gap)
        gap = float(np.diff(ticks).max()) if len(ticks) > 1 else float("inf")
        worst_per_run.append((gap, len(ticks)))
        if gap < 0.100 and len(ticks) > 10:
            break
    assert any(g < 0.100 and n > 10 for g, n in worst_per_run), (
        "longest event-loop gap per run (ticks): "
        + ", ".join(f"{1000 * g:.0f} ms ({n})" for g, n in worst_per_run))
    assert len(live) >= 2, "the eigen-spectrum should update while the eigensolver iterates"
    assert window.spectrum.n_updates >= 2


def test_cancel_stops_quickly_and_keeps_previous_results(window, images, qtbot):
    window.load_paths([images["big"]])
    base = DenoiseParams(method="global", ranks=(2,), n_train=1600, preimage_iterations=200)
    assert _run(qtbot, window, base).status == "done"
    key = window.entries[0].key
    pkey = params_key(base)
    before = window.cache.get(key, pkey).ranks[2].output.copy()
    window._auto_timer.setInterval(10**6)  # start the second run by hand
    window.params_panel.set_params(base.replace(ranks=(2, 16, 32)))
    stages = []
    window.runner.progress.connect(lambda s, d, t, m: stages.append(s))
    with qtbot.waitSignal(window.runner.finished, timeout=RUN_TIMEOUT_MS) as blocker:
        assert window.run_current()
        qtbot.waitUntil(lambda: "gram" in stages or "eigensolver" in stages, timeout=RUN_TIMEOUT_MS)
        # quitting during a run asks first (it lost the run silently); "Cancel" keeps both
        asked = []
        window.ask = lambda title, text, choices: (asked.append((title, choices)), "Cancel")[1]
        assert not window.close() and window.isVisible() and window.runner.is_running()
        assert asked == [("Quit", ("Quit", "Cancel"))]
        t0 = time.perf_counter()
        window.cancel_run()
    elapsed = time.perf_counter() - t0
    assert blocker.args[0].status == "cancelled"
    assert elapsed < 1.5, f"cancel took {elapsed:.2f} s"
    assert not window.runner.is_running() and not active_threads()
    rec = window.cache.get(key, pkey)
    assert set(rec.ranks) == {2}  # nothing half-done was stored
    np.testing.assert_array_equal(rec.ranks[2].output, before)
    assert window.grid.rank_panels[2].has_image()  # previous result still shown
    assert not window.grid.rank_panels[16].has_image()
    assert any("cancel" in line for line in window.log_view.lines)


def test_rank_switching_reuses_cached_ranks(window, images, qtbot):
    window.load_paths([images["u8"]])
    _run(qtbot, window, FAST.replace(ranks=(2, 4)))
    jobs = []
    window.runner.started.connect(jobs.append)
    # a subset of computed ranks: shown at once, nothing computed
    window.params_panel.set_ranks((4,))
    assert not window.runner.is_running() and jobs == []
    assert window.grid.rank_panels[4].has_image()
    # one more rank: only the missing one is computed (automatically)
    with qtbot.waitSignal(window.runner.finished, timeout=RUN_TIMEOUT_MS):
        window.params_panel.set_ranks((2, 4, 8))
    assert [tuple(it.ranks) for it in jobs[0].items] == [(8,)]
    qtbot.waitUntil(lambda: all(window.grid.rank_panels[r].has_image() for r in (2, 4, 8)), timeout=5000)
    # run again: nothing to do
    assert window.run_current() is False
    # keyboard and view clicks select a rank
    window.select_rank_index(0)
    assert window.selected_rank == 2
    window.grid.rank_panels[4].clicked.emit()
    assert window.selected_rank == 4


def test_clicking_the_spectrum_selects_a_rank(window, images, qtbot):
    window.load_paths([images["u8"]])
    _run(qtbot, window, FAST.replace(ranks=(2, 4, 8)))
    window.select_rank(8)
    window.dock_spectrum.raise_()  # on a short screen it shares a tabbed dock with the progress
    plot = window.spectrum
    qtbot.waitUntil(lambda: plot.getPlotItem().vb.width() > 50)
    vb = plot.getPlotItem().vb
    y = float(np.log10(plot.eigenvalues[3]))  # the y axis is logarithmic
    scene_pt = vb.mapViewToScene(QPointF(4.0, y))
    view_pt = plot.mapFromScene(scene_pt)
    with qtbot.waitSignal(plot.rankClicked, timeout=2000) as blocker:
        qtbot.mouseClick(plot.viewport(), Qt.MouseButton.LeftButton, pos=view_pt)
    assert blocker.args == [4]
    assert window.selected_rank == 4
    assert window.rank_combo.currentData() == 4


def test_views_share_zoom_and_split_slider(window, images, qtbot):
    window.load_paths([images["u8"]])
    _run(qtbot, window, FAST.replace(ranks=(2, 8)))
    window.grid.master.setRange(xRange=(10, 30), yRange=(10, 30), padding=0)
    window.grid.master.sigRangeChangedManually.emit([True, True])  # as the mouse does
    QApplication.processEvents()
    def same_view(a, b):
        # linked: same centre; the extent differs only by a panel's aspect ratio (lockAspect)
        (ax, ay), (bx, by) = np.asarray(a.viewRange()), np.asarray(b.viewRange())
        np.testing.assert_allclose([ax.mean(), ay.mean()], [bx.mean(), by.mean()], atol=1e-6)
        np.testing.assert_allclose([np.ptp(ax), np.ptp(ay)], [np.ptp(bx), np.ptp(by)], rtol=0.05)

    for vb in window.grid.viewboxes():
        same_view(vb, window.grid.master)
    # really zoomed in, not reset: the 20 pixels asked for across the view's narrower side
    assert min(np.ptp(r) for r in window.grid.master.viewRange()) == pytest.approx(20, rel=0.05)
    # zooming any other panel moves the master too
    window.grid.rank_panels[8].vb.setRange(xRange=(0, 24), yRange=(0, 24), padding=0)
    window.grid.rank_panels[8].vb.sigRangeChangedManually.emit([True, True])  # as the mouse does
    QApplication.processEvents()
    for vb in window.grid.viewboxes():
        same_view(vb, window.grid.rank_panels[8].vb)
    # the split view takes over the same centre
    (x0, x1), (y0, y1) = window.grid.master.viewRange()
    window.tabs.setCurrentIndex(1)
    qtbot.waitUntil(lambda: abs(np.mean(window.split.vb.viewRange()[0]) - (x0 + x1) / 2) < 0.5)
    # before/after: left of the split is the noisy input, right of it the selected rank
    window.select_rank(8)
    window.split.set_fraction(0.25)
    comp = window.split.composite()
    rec = window.cache.get(window.entries[0].key, params_key(window.params_panel.params()))
    x = window.split.split_column()
    assert x == 12
    np.testing.assert_array_equal(comp[:, :x], rec.noisy[:, :x])
    np.testing.assert_array_equal(comp[:, x:], rec.ranks[8].output[:, x:])
    assert window.split.line.value() == pytest.approx(x)


def test_split_view_follows_zoom_and_pan_live_both_ways(window, images, qtbot):
    window.load_paths([images["u8"]])
    _run(qtbot, window, FAST.replace(ranks=(2, 8)))
    window.select_rank(8)
    grid, split = window.grid, window.split.vb
    # before the split view was ever shown it already follows the centre
    grid.rank_panels[8].vb.setRange(xRange=(4, 16), yRange=(6, 18), padding=0)
    grid.rank_panels[8].vb.sigRangeChangedManually.emit([True, True])  # as the mouse does
    np.testing.assert_allclose([np.mean(r) for r in split.viewRange()], [10, 12], atol=1e-6)
    window.tabs.setCurrentIndex(1)  # shown once: every view has its real size
    window.tabs.setCurrentIndex(0)
    switches = []
    window.tabs.currentChanged.connect(switches.append)

    def upp(vb):  # zoom: data units per screen pixel
        (x0, x1), (y0, y1) = vb.viewRange()
        return max((x1 - x0) / vb.width(), (y1 - y0) / vb.height())

    def follows(dst, src, centre):
        # same centre and the same zoom; the extents differ by the views' shapes
        for vb in (dst, src):
            np.testing.assert_allclose([np.mean(r) for r in vb.viewRange()], centre, atol=1e-6)
        assert upp(dst) == pytest.approx(upp(src), rel=1e-6)

    # grid visible: zooming a rank panel moves the split view at once
    grid.rank_panels[8].vb.setRange(xRange=(22, 28), yRange=(22, 28), padding=0)
    grid.rank_panels[8].vb.sigRangeChangedManually.emit([True, True])  # as the mouse does
    follows(split, grid.master, (25, 25))
    assert upp(split) < 0.5 * max(48 / split.width(), 48 / split.height())  # really zoomed in
    # panning the grid (scaleBy / translateBy, as the mouse does) too
    grid.master.translateBy(x=-5, y=3)
    grid.master.sigRangeChangedManually.emit([True, True])  # as the mouse does
    follows(split, grid.master, (20, 28))
    grid.master.scaleBy((0.5, 0.5))
    grid.master.sigRangeChangedManually.emit([True, True])  # as the mouse does
    follows(split, grid.master, (20, 28))
    # split view visible: zooming it moves every grid panel
    window.tabs.setCurrentIndex(1)
    switches.clear()
    split.setRange(xRange=(8, 16), yRange=(8, 16), padding=0)
    split.sigRangeChangedManually.emit([True, True])  # as the mouse does
    follows(grid.master, split, (12, 12))
    for vb in grid.viewboxes():
        np.testing.assert_allclose([np.mean(r) for r in vb.viewRange()], (12, 12), atol=1e-6)
    split.translateBy(x=10, y=0)
    split.sigRangeChangedManually.emit([True, True])  # as the mouse does
    follows(grid.master, split, (22, 12))
    # no feedback: the range set stays as it is
    before = np.array(split.viewRange())
    for _ in range(3):
        QApplication.processEvents()
    np.testing.assert_allclose(np.array(split.viewRange()), before)
    assert switches == []  # all of it without a tab switch
    # the reset zoom fits the visible view; the other follows
    window.act_reset_zoom.trigger()
    assert np.ptp(split.viewRange()[1]) >= 47.9 or np.ptp(split.viewRange()[0]) >= 47.9
    follows(grid.master, split, [np.mean(r) for r in split.viewRange()])


def test_run_set_fits_one_model_for_the_set_like_the_command_line(window, images, tmp_path, qtbot):
    tiny = tmp_path / "tiny.png"  # smaller than a patch: fails, the others must not be lost
    Image.fromarray(np.full((6, 6), 100, np.uint8)).save(tiny)
    window.load_paths([images["u8"], images["u16"], tiny])
    entries = list(window.entries)
    params = FAST.replace(ranks=(2, 4))
    jobs, solver_runs, messages = [], [], []
    window.runner.started.connect(jobs.append)
    window.runner.progress.connect(lambda s, d, t, m: (messages.append(m),
                                                       solver_runs.append(1) if s == "eigensolver" and d == 0
                                                       else None))
    summary = _run(qtbot, window, params, run=window.run_set_fit)
    assert summary.status == "done" and summary.done == 2 and summary.failed == 1
    assert jobs[0].sets == [(0, 1, 2)]
    assert len(solver_runs) == 1  # one eigendecomposition for the whole set
    assert "tiny.png" in window.banner.text()
    # the same as the pipeline (and the command line) on the set
    names = [e.name for e in entries]
    direct = denoise_set([e.array for e in entries], params.replace(ranks=(2, 3, 4)), names=names)
    assert direct.images[2].error and len(direct.resolved["models"]) == 1
    for i, e in enumerate(entries[:2]):
        rec = window.cache.get(e.key, window.result_key(e, params))
        assert rec.fit_set == tuple(x.key for x in entries)
        assert [m["items"] for m in rec.resolved["models"]] == [["gray8.png", "gray16.png"]]
        assert rec.resolved["n_train"] == direct.resolved["n_train"]
        for r in (2, 4):
            assert_same_result(rec.ranks[r].output, direct.images[i].outputs[r])
    # not what the image fitted alone gives
    alone = denoise_set([entries[0].array], params).images[0].outputs[4]
    rec0 = window.cache.get(entries[0].key, window.result_key(entries[0], params))
    assert not np.array_equal(alone, rec0.ranks[4].output)
    # shown per image as before
    window.imageset.set_current(1)
    _settle(qtbot, window)
    assert window.grid.rank_panels[4].has_image()
    assert "one model for 2 of the 3 images" in window.info.text()
    # a rank added later comes from the same model: the set again, its model reused
    messages.clear()
    with qtbot.waitSignal(window.runner.finished, timeout=RUN_TIMEOUT_MS):
        window.params_panel.set_ranks((2, 3, 4))
    assert jobs[1].sets == [(0, 1, 2)] and {it.ranks for it in jobs[1].items} == {(3,)}
    assert "reused the fitted model" in messages
    rec1 = window.cache.get(entries[1].key, window.result_key(entries[1], params))
    assert_same_result(rec1.ranks[3].output, direct.images[1].outputs[3])


def test_set_of_grey_and_colour_images_keeps_each_models_spectrum():
    """One denoise_set call fits one model per kind of image (as the CLI); each
    image's outcome carries the spectrum and kernel width of its own model."""
    from kpca_denoise.core.progress import CancelToken
    from kpca_denoise.gui.compute import Job, JobItem, run_job

    grey, grey2 = (_smooth(48, 48, 255, s).astype(np.uint8) for s in (0, 1))
    colour = np.stack([_smooth(48, 48, 255, s) for s in (4, 5, 6)], axis=-1).astype(np.uint8)
    arrays = {"grey": grey, "colour": colour, "grey2": grey2}
    params = FAST.replace(ranks=(2, 4))
    items = [JobItem(key=k, name=f"{k}.png", array=a, is_patchset=False, ranks=(2, 4))
             for k, a in arrays.items()]
    sent = []
    summary = run_job(Job(items=items, params=params, sets=[(0, 1, 2)]),
                      lambda kind, payload: sent.append((kind, payload)), CancelToken())
    assert summary["status"] == "done" and summary["done"] == 3
    assert ("item_started", (-1, 3, "set of 3 images fitted together")) in sent
    outs = {o.key: o for kind, o in sent if kind == "item"}
    direct = denoise_set(list(arrays.values()), params, names=[f"{k}.png" for k in arrays])
    assert [m["items"] for m in direct.resolved["models"]] == [["grey.png", "grey2.png"], ["colour.png"]]
    for i, k in enumerate(arrays):
        assert outs[k].fit_set == ("grey", "colour", "grey2")
        for r in (2, 4):
            assert_same_result(outs[k].outputs[r], direct.images[i].outputs[r])
    np.testing.assert_allclose(outs["grey2"].eigenvalues, direct.eigenvalues)
    assert outs["grey2"].total_variance > 0
    # the colour model is not returned by denoise_set: its spectrum comes from its fit's
    # reports, and equals the one of the colour image fitted alone (sampled the same way)
    alone = denoise_set([colour], params)
    np.testing.assert_allclose(outs["colour"].eigenvalues, alone.eigenvalues, rtol=1e-9)
    assert outs["colour"].resolved["items"] == ["colour.png"]
    assert outs["colour"].resolved["gamma"] == alone.resolved["gamma"] != outs["grey"].resolved["gamma"]


def test_run_set_can_be_cancelled_and_keeps_earlier_results(window, images, qtbot):
    window.load_paths([images["u8"], images["big"]])
    window.imageset.set_current(0)
    base = DenoiseParams(method="global", ranks=(2,), n_train=1600, preimage_iterations=200)
    assert _run(qtbot, window, base).status == "done"  # the current image alone
    e0, e1 = window.entries
    before = window.cache.get(e0.key, params_key(base)).ranks[2].output.copy()
    stages = []
    window.runner.progress.connect(lambda s, d, t, m: stages.append(s))
    with qtbot.waitSignal(window.runner.finished, timeout=RUN_TIMEOUT_MS) as blocker:
        assert window.run_all()
        qtbot.waitUntil(lambda: "gram" in stages or "eigensolver" in stages, timeout=RUN_TIMEOUT_MS)
        window.cancel_run()
    assert blocker.args[0].status == "cancelled"
    assert not window.runner.is_running() and not active_threads()
    # nothing of the set was stored; the earlier result is still the one shown
    assert window.result_key(e0, base) == params_key(base)
    assert window.cache.records_for(e1.key) == []
    np.testing.assert_array_equal(window.cache.get(e0.key, params_key(base)).ranks[2].output, before)
    _settle(qtbot, window)
    assert window.grid.rank_panels[2].has_image()


def test_nystrom_landmarks_in_the_panel_the_run_and_the_sidecar(window, images, tmp_path, qtbot):
    panel = window.params_panel
    panel.set_params(DenoiseParams())  # 'grouped': landmarks do not apply
    assert not panel.landmarks_on.isEnabled() and not panel.n_landmarks.isEnabled()
    assert panel.params().n_landmarks is None
    assert "O(n_train·m²)" in panel.landmarks_on.toolTip()
    params = FAST.replace(ranks=(4, 8), n_train=400, n_landmarks=64, add_noise=15.0)
    panel.set_params(params)
    assert panel.landmarks_on.isChecked() and panel.n_landmarks.isEnabled()
    assert panel.n_landmarks.value() == 64 and panel.params() == params
    panel.landmarks_on.setChecked(False)
    assert panel.params().n_landmarks is None and not panel.n_landmarks.isEnabled()
    panel.landmarks_on.setChecked(True)
    panel.method.setCurrentIndex(panel.method.findData("grouped"))
    assert panel.params().n_landmarks is None and not panel.n_landmarks.isEnabled()
    panel.method.setCurrentIndex(panel.method.findData("global"))
    assert panel.params() == params
    panel.n_landmarks.setValue(6)  # fewer than the largest rank: named at once
    assert "landmarks" in panel.error.text()
    panel.n_landmarks.setValue(64)
    assert panel.error.text() == ""
    # run, export: the sidecar carries it and the command line reproduces the result
    window.load_paths([images["u8"]])
    _run(qtbot, window, params)
    rec = window.cache.get(window.entries[0].key, params_key(params))
    assert rec.resolved["n_landmarks"] == 64 and "Nyström, 64 landmarks" in window.info.text()
    window.select_rank(8)
    window.export_current(tmp_path / "gui")
    sidecar = tmp_path / "gui" / "gray8_kpca_r8.json"
    data = json.loads(sidecar.read_text())
    assert data["params"]["n_landmarks"] == 64
    assert DenoiseParams.from_dict(data["params"]) == params.replace(ranks=(8,))
    rc = cli.main(["denoise", str(images["u8"]), "-o", str(tmp_path / "cli"), "--params", str(sidecar), "-q"])
    assert rc == 0
    a = read_item(tmp_path / "gui" / "gray8_kpca_r8.png").array.astype(int)
    b = read_item(tmp_path / "cli" / "gray8_kpca_r8.png").array.astype(int)
    assert np.abs(a - b).max() <= 1
    # and the remembered settings bring it back
    window.save_settings()
    w2 = MainWindow(settings=window.settings)
    qtbot.addWidget(w2)
    assert w2.params_panel.params() == params


# -- errors --------------------------------------------------------------------------


def test_failed_run_is_reported_not_raised(window, tmp_path, qtbot):
    tiny = tmp_path / "tiny.png"
    Image.fromarray(np.full((6, 6), 100, np.uint8)).save(tiny)
    window.load_paths([tiny])
    summary = _run(qtbot, window, FAST.replace(ranks=(2,), patch_size=8))
    assert summary.failed == 1
    assert window.banner.isVisible() and "smaller" in window.banner.text()
    assert window.banner.text().count("tiny.png") == 1, window.banner.text()
    assert any(line.startswith("error") for line in window.log_view.lines)
    assert QApplication.activeModalWidget() is None
    assert window.act_run.isEnabled()  # the window is usable again


def test_invalid_parameters_are_reported(window, images):
    window.load_paths([images["u8"]])
    window.params_panel.set_params(FAST)
    window.params_panel.ranks.setText("4, x")
    window.params_panel.ranks.editingFinished.emit()
    assert "ranks" in window.params_panel.error.text()
    assert window.run_current() is False
    assert "ranks" in window.banner.text()


# -- export --------------------------------------------------------------------------


def test_export_keeps_format_and_bit_depth_and_never_overwrites(window, images, tmp_path, qtbot):
    window.load_paths([images["u16"], images["u8"]])
    _run(qtbot, window, FAST.replace(ranks=(4,)))
    window.select_rank(4)
    outdir = tmp_path / "out"
    written = window.export_current(outdir)
    target = outdir / "gray16_kpca_r4.png"
    assert target in written and (outdir / "gray16_kpca_r4.json").is_file()
    back = read_item(target)
    assert back.array.dtype == np.uint16 and back.format == "PNG"
    rec = window.cache.get(window.entries[0].key, params_key(window.params_panel.params()))
    np.testing.assert_array_equal(back.array, rec.ranks[4].output)
    assert not list(outdir.glob(".*"))  # no temporary files left behind

    # export into a folder where the output name is one of the inputs: refused, original intact
    clash_dir = tmp_path / "clash"
    clash_dir.mkdir()
    src = clash_dir / "a.png"
    Image.fromarray(_smooth(48, 48, 255, 5).astype(np.uint8)).save(src)
    victim = clash_dir / f"a_{rank_tag(4)}.png"
    Image.fromarray(np.zeros((48, 48), np.uint8)).save(victim)
    original = victim.read_bytes()
    window.load_paths([src, victim])
    window.imageset.set_current(window.session.row_of(next(e.key for e in window.entries if e.path == src)))
    _run(qtbot, window, FAST.replace(ranks=(4,)))
    assert window.export_current(clash_dir) == []
    assert victim.read_bytes() == original
    assert window.banner.isVisible() and "overwrite" in window.banner.text()


def test_export_set_asks_before_computing_missing_then_writes_all(window, images, tmp_path, qtbot):
    window.load_paths([images["u8"], images["u16"]])
    window.imageset.set_current(0)
    _run(qtbot, window, FAST.replace(ranks=(2,)))  # only the first image is computed
    outdir = tmp_path / "set"
    asked = []
    window.ask = lambda title, text, choices: (asked.append(text), "Cancel")[1]
    jobs = []
    window.runner.started.connect(jobs.append)
    assert window.export_set(outdir) == [] and not outdir.exists() and jobs == []  # cancelled: nothing
    assert "gray16.png" in asked[0] and "method = global" in asked[0] and "n train = 300" in asked[0]
    window.ask = lambda title, text, choices: "Export the computed only"
    assert window.export_set(outdir) and (outdir / "gray8_kpca_r2.png").is_file()
    assert not (outdir / "gray16_kpca_r2.png").exists() and jobs == []
    window.ask = lambda title, text, choices: "Compute and export"
    with qtbot.waitSignal(window.runner.finished, timeout=RUN_TIMEOUT_MS):
        assert window.export_set(tmp_path / "set2") == []  # computing first
    assert [it.name for it in jobs[0].items] == ["gray16.png"]  # only what was missing
    outdir = tmp_path / "set2"
    _settle(qtbot, window)
    qtbot.waitUntil(lambda: (outdir / "gray16_kpca_r2.png").is_file())
    assert (outdir / "gray8_kpca_r2.png").is_file()
    assert read_item(outdir / "gray16_kpca_r2.png").array.dtype == np.uint16
    assert read_item(outdir / "gray8_kpca_r2.png").array.dtype == np.uint8


def test_export_error_is_shown(window, images, tmp_path, qtbot):
    window.load_paths([images["u8"]])
    _run(qtbot, window, FAST.replace(ranks=(2,)))
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("a file where the folder should be")
    assert window.export_current(blocker) == []
    assert window.banner.isVisible() and "cannot write" in window.banner.text()
    assert QApplication.activeModalWidget() is None


def test_an_export_refused_by_the_system_names_the_target(window, images, tmp_path, qtbot,
                                                          monkeypatch):
    # a read-only folder refused the hidden temporary file, and the banner named that
    import kpca_denoise.gui.export as export

    window.load_paths([images["u8"]])
    _run(qtbot, window, FAST.replace(ranks=(2,)))

    def refused(item, out, target, **kw):
        raise PermissionError(13, "Permission denied",
                              str(target.parent / f".{target.name}.kpca-host-1-abc.part"))

    monkeypatch.setattr(export, "write_item", refused)
    assert window.export_current(tmp_path / "ro") == []
    text = window.banner.text()
    assert "gray8_kpca_r2.png: cannot write (Permission denied)" in text, text
    assert ".part" not in text


def test_comparison_sheet_png(window, images, tmp_path, qtbot):
    # the export dialogs open in the last export's folder, else the inputs', never in the
    # shipped samples' (inside the installed package)
    from kpca_denoise.gui.app import sample_images_dir

    window.load_paths([sample_images_dir() / "camera.png"])
    assert window.export_start() == str(Path.home())
    window.load_paths([images["u8"]])
    assert window.export_start() == str(images["u8"].parent)
    _run(qtbot, window, FAST.replace(ranks=(2, 4, 8), add_noise=20.0))
    path = window.export_sheet(tmp_path / "sheet.png")
    assert path is not None and path.is_file()
    with Image.open(path) as im:
        w, h = im.size
        assert im.format == "PNG"
    assert w > 3 * h  # clean, noisy and three ranks side by side
    # the ranks compared on screen, not every rank computed (it held all of them)
    window.params_panel.set_ranks((8, 2))
    assert window.shown_ranks() == (2, 8)
    path = window.export_sheet(tmp_path / "two.png")
    with Image.open(path) as im:  # 48 px tiles enlarged to 160, 12 px apart
        assert im.size == (12 + 4 * (160 + 12), h)
    window.export_current(tmp_path / "exported")
    assert window.export_start() == str(tmp_path / "exported")
    # the sheet cannot replace an input
    assert window.export_sheet(images["u8"]) is None
    assert read_item(images["u8"]).array.shape == (48, 48)


def test_sidecar_round_trip_through_the_command_line(window, images, tmp_path, qtbot):
    window.load_paths([images["u8"]])
    params = FAST.replace(ranks=(4, 8), add_noise=15.0, seed=3)
    _run(qtbot, window, params)
    window.select_rank(8)
    gui_out = tmp_path / "gui"
    window.export_current(gui_out)
    sidecar = gui_out / "gray8_kpca_r8.json"
    data = json.loads(sidecar.read_text())
    assert set(data) >= {"params", "resolved"}
    assert DenoiseParams.from_dict(data["params"]) == params.replace(ranks=(8,))
    assert data["resolved"]["gamma"] > 0
    cli_out = tmp_path / "cli"
    rc = cli.main(["denoise", str(images["u8"]), "-o", str(cli_out), "--params", str(sidecar), "-q"])
    assert rc == 0
    a = read_item(gui_out / "gray8_kpca_r8.png").array.astype(int)
    b = read_item(cli_out / "gray8_kpca_r8.png").array.astype(int)
    assert np.abs(a - b).max() <= 1  # same parameters, same result (rounding aside)


# -- settings, about, entry point ----------------------------------------------------------


def test_settings_are_remembered_in_the_temporary_location(qtbot, tmp_path, images, temp_settings):
    w = MainWindow()  # the default constructor: must land in the temporary settings path
    qtbot.addWidget(w)
    w.params_panel.set_params(FAST.replace(ranks=(3, 6), seed=7))
    w.load_paths([images["u8"]])
    w.close()
    files = list(Path(temp_settings).rglob("*.ini"))
    assert files, "settings were not written to the temporary location"
    w2 = MainWindow()
    qtbot.addWidget(w2)
    p = w2.params_panel.params()
    assert p.ranks == (3, 6) and p.seed == 7 and p.method == "global"
    assert Path(w2.last_dir) == images["u8"].parent


def test_about_box_lists_the_references(window):
    dlg = window.show_about()
    text = dlg.browser.toPlainText()
    for ref in ("Schölkopf", "Neural Computation", "Mika", "NIPS", "LPG-PCA", "Zhang", "Dabov", "BM3D"):
        assert ref in text
    assert not dlg.isModal()


def test_gui_entry_point_errors(monkeypatch, tmp_path, capsys):
    assert gui_app.main([], demo=False, screenshot=str(tmp_path / "x.png")) == 2
    monkeypatch.setattr(gui_app, "sample_images_dir", lambda: tmp_path / "missing")
    assert gui_app.main([], demo=True, screenshot=str(tmp_path / "x.png")) == 2
    assert "sample images" in capsys.readouterr().err


def test_throttle_always_delivers_the_final_spectrum():
    """Iterations faster than the plot's update interval are thinned out, but
    the converged eigenvalues reach the plot when the next stage starts."""
    from kpca_denoise.core.progress import ProgressEvent
    from kpca_denoise.gui.compute import _Throttle

    sent = []
    th = _Throttle(lambda kind, payload: sent.append((kind, payload)))
    for it in range(1, 6):  # converges at iteration 5 of at most 200, all within microseconds
        th(ProgressEvent("eigensolver", it, 200, eigenvalues=np.full(3, float(it))))
    th(ProgressEvent("projection", 0, 10))
    spectra = [p for k, p in sent if k == "spectrum"]
    assert len(spectra) == 2
    np.testing.assert_array_equal(spectra[0], 1.0)
    np.testing.assert_array_equal(spectra[-1], 5.0)


def test_patch_set_auto_rank_is_marked_on_the_spectrum(window, images, qtbot):
    window.load_paths([images["npz"]])
    summary = _run(qtbot, window, DenoiseParams(ranks=(None, 4), noise_sigma=40.0))
    assert summary.status == "done"
    rec = window.cache.get(window.entries[0].key, window.result_key(window.entries[0],
                                                                   window.current_params()))
    auto = rec.resolved["auto_rank"]
    assert 1 <= auto <= 20  # at most half of the 40 samples
    assert set(rec.ranks) == {None, 4}
    line = window.spectrum._rank_lines[None]
    assert line.value() == auto and line.label.format == f"auto={auto}"
    assert window.spectrum._rank_lines[4].value() == 4


# -- issue 10: export what is shown, set fit beside own results --------------------------


def _displayed(window, rank) -> np.ndarray:
    return np.asarray(window.grid.rank_panels[rank].image.image)


def test_export_writes_the_displayed_pixels_and_a_set_fit_keeps_own_results(window, images, tmp_path, qtbot):
    window.load_paths([images["u8"], images["big"]])
    window.imageset.set_current(0)
    e0, e1 = window.entries
    own = FAST.replace(ranks=(2, 4, 8))
    _run(qtbot, window, own)
    window.select_rank(4)
    jobs = []
    window.runner.started.connect(jobs.append)
    window.ask = lambda *a: pytest.fail("nothing is missing: the export must not ask")
    written = window.export_current(tmp_path / "own")
    back = read_item(tmp_path / "own" / "gray8_kpca_r4.png").array
    assert written and np.array_equal(back, _displayed(window, 4)) and jobs == []
    umask = os.umask(0)
    os.umask(umask)
    assert all(f.stat().st_mode & 0o777 == 0o666 & ~umask for f in written)  # normal permissions
    asked = []
    window.ask = lambda title, text, choices: (asked.append(text), "Cancel")[1]
    assert window.export_current(tmp_path / "own") == [] and "2 file(s) already exist" in asked[0]
    window.ask = lambda title, text, choices: "Replace"
    assert window.export_current(tmp_path / "own") == written  # replaced only when confirmed
    window.ask = lambda *a: pytest.fail("nothing is missing: the export must not ask")
    # the explicit set fit (one model for both grey images) lives beside the own results
    summary = _run(qtbot, window, own.replace(ranks=(4,)), run=window.run_set_fit)
    assert summary.status == "done" and jobs[0].sets == [(0, 1)]
    assert window.set_fit_box.isChecked()
    set_rec = window.cache.get(e0.key, params_key(own, (e0.key, e1.key)))
    own_rec = window.cache.get(e0.key, params_key(own))
    assert set(own_rec.ranks) == {2, 4, 8} and set(set_rec.ranks) == {4}
    assert not np.array_equal(set_rec.ranks[4].output, own_rec.ranks[4].output)
    np.testing.assert_array_equal(_displayed(window, 4), set_rec.ranks[4].output)
    window.select_rank(4)
    window.export_set(tmp_path / "set")
    for i, e in enumerate(window.entries):
        window.imageset.set_current(i)
        _settle(qtbot, window)
        back = read_item(tmp_path / "set" / f"{e.path.stem}_kpca_r4.png").array
        assert np.array_equal(back, _displayed(window, 4)), e.name
    data = json.loads((tmp_path / "set" / "gray8_kpca_r4.json").read_text())
    assert len(data["fit_set"]) == 2
    # the own results are still there, three ranks, shown again when the set fit is unticked
    window.imageset.set_current(0)
    window.params_panel.set_params(own)
    window.set_fit_box.setChecked(False)
    _settle(qtbot, window)
    assert all(window.grid.rank_panels[r].has_image() for r in (2, 4, 8))
    np.testing.assert_array_equal(_displayed(window, 4), own_rec.ranks[4].output)
    assert len(jobs) == 1  # no export recomputed anything


def test_session_model_is_qt_free_and_keeps_results_per_parameters(tmp_path):
    import ast

    gui = Path(__file__).resolve().parents[1] / "kpca_denoise" / "gui"
    for name in ("model.py", "compute.py"):  # the model and what it imports from the gui package
        tree = ast.parse((gui / name).read_text())
        mods = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        mods += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        assert not [m for m in mods if m.startswith(("PySide6", "pyqtgraph", "."))
                    and m not in (".compute", "..io", "..params", "..pipeline", "..core.progress")], name
    from kpca_denoise.gui.compute import ItemOutcome
    from kpca_denoise.gui.model import ImageEntry, Session
    from kpca_denoise.io import LoadedItem

    def entry(name, shape):
        return ImageEntry(LoadedItem(path=tmp_path / name, array=np.zeros(shape, np.uint8),
                                     kind="image", format="PNG"))

    s = Session()
    a, b, c = entry("a.png", (8, 8)), entry("b.png", (8, 8)), entry("c.png", (8, 8, 3))
    for e in (a, b, c):
        s.add(e)
    assert [[e.name for e in g] for g in s.kind_groups(s.entries)] == [["a.png", "b.png"], ["c.png"]]
    p1, p2 = FAST.replace(ranks=(2,)), FAST.replace(ranks=(2,), seed=5)

    def outcome(e, p, r, fit_set=()):
        return ItemOutcome(key=e.key, name=e.name, params_key=params_key(p, fit_set), params=p,
                           outputs={r: np.full((8, 8), r, np.uint8)}, noisy=np.zeros((8, 8)),
                           fit_set=fit_set)

    s.add_outcome(outcome(a, p1, 2))
    s.add_outcome(outcome(a, p1, 4, (a.key, b.key)))  # a set fit: beside, not instead
    assert s.shown(a, p1).matches and set(s.shown(a, p1).record.ranks) == {2}
    s.show_set_fit = True
    assert set(s.shown(a, p1).record.ranks) == {4}
    ready, missing = s.export_plan([a, b], p1, 4)
    assert [e for e, _ in ready] == [a] and missing == [b]
    s.show_set_fit = False
    shown = s.shown(a, p2)  # the panel's parameters have no result: the latest is shown, marked
    assert not shown.matches and shown.record.params == p1
    items, sets = s.plan([a, b, c], p1, set_fit=True)
    assert [it.name for it in items] == ["a.png", "b.png", "c.png"] and sets == [(0, 1)]
    s.remove(0)
    assert s.cache.records_for(a.key) == [] and s.shown(a, p1).record is None


def test_every_parameter_is_reachable_on_a_1366x768_screen(qtbot, tmp_path):
    from PySide6.QtCore import QPoint, QRect
    from PySide6.QtWidgets import QAbstractButton, QAbstractSpinBox, QComboBox, QLineEdit

    w = MainWindow(settings=QSettings(str(tmp_path / "w.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    avail = QRect(0, 0, 1366, 768)
    w.place_on_screen(avail)
    w.show()
    qtbot.waitExposed(w)
    w.params_panel.set_params(FAST.replace(ranks=(1, 2, 4, 8, 16)))  # five ranks widen nothing
    QApplication.processEvents()
    assert avail.contains(w.frameGeometry()), w.frameGeometry()
    from kpca_denoise.gui.views import CELL_WIDTH

    assert w.grid.width() <= w.width() and w.grid.width() / w.grid.columns >= CELL_WIDTH
    wide = w.grid.columns
    w.resize(1000, 768)  # narrower: the grid wraps onto more rows, the window stays narrow
    QApplication.processEvents()
    assert w.width() == 1000 and w.grid.columns < wide and w.grid.width() <= w.width()
    w.resize(1366, 768)
    panel = w.params_panel
    controls = [c for t in (QLineEdit, QAbstractSpinBox, QComboBox, QAbstractButton)
                for c in panel.widget().findChildren(t) if c.isVisibleTo(panel)]
    assert len(controls) >= 10
    for c in controls:
        panel.ensureWidgetVisible(c)
        QApplication.processEvents()
        assert not c.visibleRegion().isEmpty(), c.toolTip() or c.objectName()
        assert w.rect().contains(QRect(c.mapTo(w, QPoint(0, 0)), c.size())), c.toolTip()
    # a saved geometry larger than the screen is shrunk into it
    w.resize(1800, 1000)
    w.place_on_screen(avail)
    assert avail.contains(w.frameGeometry()), w.frameGeometry()
    # log and progress can be hidden: the images get the room
    w.dock_progress.toggleViewAction().trigger()
    assert not w.dock_progress.isVisible()


def _shows_whole_image(vb, h, w) -> bool:
    (x0, x1), (y0, y1) = vb.viewRange()
    covers = x0 <= 0.5 and x1 >= w - 0.5 and y0 <= 0.5 and y1 >= h - 0.5
    tight = min((x1 - x0) / w, (y1 - y0) / h) < 1.05  # fitted, not a postage stamp
    return covers and tight


def test_views_stay_fitted_until_the_user_zooms(window, images, qtbot):
    window.load_paths([images["big"]])
    _run(qtbot, window, FAST.replace(ranks=(2,)))
    master = window.grid.master
    qtbot.waitUntil(lambda: _shows_whole_image(master, 96, 96), timeout=5000)
    # adding ranks: new columns, the grid re-flows, the views are fitted again
    with qtbot.waitSignal(window.runner.finished, timeout=RUN_TIMEOUT_MS):
        window.params_panel.set_ranks((2, 4, 8, 16))
    _settle(qtbot, window)
    qtbot.waitUntil(lambda: _shows_whole_image(master, 96, 96), timeout=5000)
    for r in (2, 16):
        assert _shows_whole_image(window.grid.rank_panels[r].vb, 96, 96)
    window.residuals_box.setChecked(False)
    qtbot.waitUntil(lambda: _shows_whole_image(master, 96, 96), timeout=5000)
    # the user zooms: kept through a rank change and a resize
    master.scaleBy((0.25, 0.25))
    master.sigRangeChangedManually.emit([True, True])

    def region():  # the part of the image in view: its centre and its smaller extent
        (x0, x1), (y0, y1) = master.viewRange()
        return ((x0 + x1) / 2, (y0 + y1) / 2), min(x1 - x0, y1 - y0)

    centre, extent = region()
    assert extent < 60
    window.params_panel.set_ranks((2, 4))
    window.resize(window.width() - 40, window.height())
    # the same centre and scale stay in view after the re-layout, not refitted
    qtbot.waitUntil(lambda: not window._fit_pending, timeout=5000)
    QApplication.processEvents()
    centre_now, extent_now = region()
    assert not _shows_whole_image(master, 96, 96) and extent_now < 60
    assert np.allclose(centre, centre_now, atol=2)
    window.act_reset_zoom.trigger()  # Ctrl+0: fitted again, and kept fitted
    qtbot.waitUntil(lambda: _shows_whole_image(master, 96, 96), timeout=5000)


def test_cancel_keeps_the_ranks_that_finished_and_progress_says_which_rank(window, images, qtbot):
    window.load_paths([images["big"]])
    params = DenoiseParams(method="global", ranks=(2, 8, 32), n_train=1200, preimage_iterations=200)
    window.params_panel.set_params(params)
    messages, done = [], []
    window.runner.progress.connect(lambda s, d, t, m: messages.append((s, m)))
    window.runner.itemDone.connect(done.append)
    with qtbot.waitSignal(window.runner.finished, timeout=RUN_TIMEOUT_MS) as blocker:
        assert window.run_current()
        assert window.progress.clock.isActive() and window.progress.clock.interval() == 1000
        qtbot.waitUntil(lambda: bool(done), timeout=RUN_TIMEOUT_MS)  # the first rank is done
        window.cancel_run()
    assert blocker.args[0].status == "cancelled"
    assert done[0].partial and list(done[0].outputs) == [32]  # the largest first: one fit for all
    assert ("preimage", "rank 32, 1 of 3") in messages
    rec = window.cache.get(window.entries[0].key, params_key(params))
    assert 32 in rec.ranks and 2 not in rec.ranks  # finished kept, unfinished not invented
    _settle(qtbot, window)
    assert window.grid.rank_panels[32].has_image() and not window.grid.rank_panels[2].has_image()
    assert not window.progress.clock.isActive() and "cancelled" in window.progress.overall.text()
    assert window.spectrum.status_text() != "eigensolver iterating…"
    # running again computes only what is missing
    jobs, missing = [], {r for r in (2, 8) if r not in rec.ranks}
    window.runner.started.connect(jobs.append)
    with qtbot.waitSignal(window.runner.finished, timeout=RUN_TIMEOUT_MS):
        assert window.run_current()
    assert set(jobs[0].items[0].ranks) == missing


def test_pages_of_a_stack_are_the_sets_images_and_export_as_one_stack(window, images, tmp_path, qtbot):
    tifffile = pytest.importorskip("tifffile")
    pages = np.stack([_smooth(48, 48, 255, s).astype(np.uint8) for s in (7, 8, 9)])
    stack = tmp_path / "stack.tif"
    tifffile.imwrite(stack, pages, photometric="minisblack")
    gif = images["dir"] / "anim.gif"
    Image.fromarray(pages[0]).save(gif)
    assert window.load_paths([stack, images["dir"]]) == 5  # 3 pages + 2 images
    assert [e.name for e in window.entries[:3]] == [f"stack.tif [page {k}/3]" for k in (1, 2, 3)]
    assert any("skipped 1 file" in line and "anim.gif" in line for line in window.log_view.lines)
    window.imageset.set_current(1)
    params = FAST.replace(ranks=(2,))
    window.params_panel.set_params(params)
    window.ask = lambda title, text, choices: "Compute and export"
    with qtbot.waitSignal(window.runner.finished, timeout=RUN_TIMEOUT_MS):
        window.export_current(tmp_path / "out")  # one page shown: the stack needs all three
    qtbot.waitUntil(lambda: (tmp_path / "out" / "stack_kpca_r2.tif").is_file(), timeout=5000)
    back = read_item(tmp_path / "out" / "stack_kpca_r2.tif")
    assert back.is_stack and back.array.shape == (3, 48, 48)
    for k in range(3):
        window.imageset.set_current(k)
        _settle(qtbot, window)
        np.testing.assert_array_equal(back.array[k], _displayed(window, 2))
    # a format that cannot hold a stack: one error for the stack, not one per page
    window.set_export_format("png")
    window.imageset.set_current(0)
    window.export_current(tmp_path / "png")
    text = window.banner.text()
    assert text.startswith("Export: 1 problem. stack.tif: cannot be written as PNG: a stack of "
                           "3 pages needs a multi-page format"), text
    assert not (tmp_path / "png").exists() or not list((tmp_path / "png").iterdir())


def test_a_folder_of_only_bad_files_says_so(window, tmp_path):
    d = tmp_path / "bad"
    d.mkdir()
    for n in ("a.png", "b.png"):
        (d / n).write_bytes(b"not an image")
    assert window.load_paths([d]) == 0
    text = window.banner.text()
    assert text.startswith("None of the 2 inputs could be read") and "loaded" not in text


def test_each_image_keeps_its_results_and_the_viewer_reads_source_values(window, images, qtbot):
    window.load_paths([images["u16"], images["u8"]])
    window.imageset.set_current(0)
    a = FAST.replace(ranks=(2, 4))
    _run(qtbot, window, a)
    window.imageset.set_current(1)
    _run(qtbot, window, FAST.replace(ranks=(2,), seed=5))
    window.imageset.set_current(0)  # its results came from seed 0: shown, and marked
    _settle(qtbot, window)
    assert window.grid.rank_panels[4].has_image() and window.mismatch.isVisible()
    assert "seed: 0 → 5" in window.mismatch.text()
    assert window.imageset.list.item(0).text().endswith("✓ 2 ranks · other parameters")
    window.mismatch.linkActivated.emit("use")  # "Use these parameters"
    assert window.params_panel.params().seed == 0 and not window.mismatch.isVisible()
    assert window.imageset.list.item(0).text().endswith("✓ 2 ranks")
    # the reference label follows the chosen reference
    assert window.set_reference(images["u16"])
    assert "gray16.png" in window.params_panel.reference_label.text()
    # cursor readout in source units (16-bit stays 16-bit)
    src = window.entries[0].array
    panel = window.grid.input_panel
    c, r, v = panel.value_at(3.5, 5.2)
    assert (c, r) == (3, 5) and int(v) == int(src[5, 3]) > 255
    window._on_hover(window.grid.rank_panels[4], window.grid.rank_panels[4].value_at(3.5, 5.2))
    assert window.cursor_label.text().startswith("x 3, y 5 · rank 4: ") and f": {int(src[5, 3])}" in \
        window.cursor_label.text()
    # the split view names each side's value: left of the split the noisy one (it
    # was labelled with the rank's name), right of it the result, then the other side
    window.select_rank(4)
    window.split.set_fraction(0.5)
    noisy, res = window.grid.input_panel.data, window.grid.rank_panels[4].data
    w = noisy.shape[1]
    for c, first in ((w // 4, "noisy"), (3 * w // 4, "rank 4")):
        r = int(np.argmax(noisy[:, c] != res[:, c]))
        assert noisy[r, c] != res[r, c]
        window._on_hover(window.split.panel, window.split.panel.value_at(c + 0.5, r + 0.5))
        parts = {"noisy": f"noisy: {format_value(noisy[r, c])}",
                 "rank 4": f"rank 4: {format_value(res[r, c])}"}
        other = ({"noisy", "rank 4"} - {first}).pop()
        assert window.cursor_label.text() == f"x {c}, y {r} · {parts[first]} · {parts[other]}"
    window.imageset.set_current(1)  # another image: the readout is not carried over
    assert window.cursor_label.text() == ""
    window.imageset.set_current(0)
    # one histogram sets the contrast of every view
    window.hist.item.setLevels(100, 2000)
    for p in (window.grid.input_panel, *window.grid.rank_panels.values()):
        assert tuple(p.image.levels) == (100, 2000)
    # 1:1: one image pixel per screen pixel, kept (not refitted)
    window.zoom_one_to_one()
    (x0, x1), _ = window.grid.master.viewRange()
    assert abs((x1 - x0) - window.grid.master.width()) < 2 and not window.fitted
    # ROI statistics under every view
    window.toggle_roi()
    x0, y0, x1, y1 = window.roi_box()
    for rank, p in window.grid.rank_panels.items():
        out = window.cache.get(window.entries[0].key, params_key(a)).ranks[rank].output
        region = out[y0:y1, x0:x1].astype(float)
        assert p.roi_text.text() == f"ROI mean {region.mean():.4g} ± {region.std():.3g}"
    # the comparison sheet never shrinks the images
    rec = window.cache.get(window.entries[0].key, params_key(a))
    assert window.comparison_sheet(window.entries[0], rec).height() > 160
    # F1 is help (keys, docs), Delete asks before discarding results
    text = window.show_help().browser.toPlainText()
    assert "Ctrl+E" in text and "README" in text and "Help" in text
    window.ask = lambda title, text, choices: "Cancel"
    window.remove_image(0)
    assert len(window.entries) == 2
    window.ask = lambda title, text, choices: "OK"
    window.remove_image(0)
    assert [e.name for e in window.entries] == ["gray8.png"]


def test_suggested_ranks_include_auto_and_patch_sets_compare_its_neighbours(window, images, qtbot):
    from kpca_denoise.gui.model import DEFAULT_RANKS, FitRecord, RankRecord, converged_with
    from kpca_denoise.gui.texts import rank_metrics_text

    panel = window.params_panel
    panel.set_params(DenoiseParams())
    panel.suggest.click()
    assert panel.ranks.text() == "1, 2, 4, 8, auto" and DEFAULT_RANKS["grouped"][-1] is None
    panel.method.setCurrentIndex(panel.method.findData("global"))
    assert panel.ranks.text() == "4, 8, auto, 32"
    # a patch set at 'auto': once the fit chose the rank, its neighbours are compared too
    window.load_paths([images["npz"]])
    params = FAST.replace(ranks=(None,), noise_sigma=40.0)
    _run(qtbot, window, params)
    rec = window.cache.get(window.entries[0].key, params_key(params))
    auto = rec.resolved["auto_rank"]
    qtbot.waitUntil(lambda: window.current_params().ranks != (None,), timeout=5000)
    expected = tuple(sorted({max(1, auto // 2), min(2 * auto, 39)} - {auto})) + (None,)
    assert window.current_params().ranks == expected
    qtbot.waitUntil(lambda: not window.runner.is_running() and set(rec.ranks) == set(expected),
                    timeout=RUN_TIMEOUT_MS)
    _settle(qtbot, window)
    assert window.grid.rank_panels[None].title.text() == f"auto = {auto}"
    assert window.spectrum.ranks[-1] == (None, auto)  # marked on the spectrum
    # effective rank (grouped stats) and "converged" under the views
    one = RankRecord(np.zeros((4, 4)), {"psnr": 30.0, "ssim": 0.9}, 1.0)
    two = RankRecord(np.zeros((4, 4)), {"psnr": 30.1, "ssim": 0.9}, 1.0)
    fit = FitRecord(noisy=np.zeros((4, 4)), noise_sigma=1.0, noise_estimated=False, noisy_metrics={},
                    eigenvalues=None, total_variance=None,
                    resolved={"grouped": {"effective_rank": {8: 3.25, None: 3.5}}},
                    timings={}, params=DenoiseParams(), ranks={8: one, None: two})
    assert rank_metrics_text(fit, None, one, 1.0) == ("PSNR 30.10 dB · SSIM 0.900 · eff. rank 3.5 · "
                                                    "≈ previous rank (Δ +0.10 dB)")
    assert converged_with(one, RankRecord(np.zeros((4, 4)), {"psnr": 30.5, "ssim": 0.9}, 1.0), 1.0) == ""


def test_the_wheel_scrolls_the_parameters_and_leaves_their_values(window, qtbot):
    # scrolling the form past a list or a number field must not change it (it did:
    # the noise model switched while the panel scrolled); once clicked, the wheel steps it
    from PySide6.QtCore import QPoint, QPointF
    from PySide6.QtGui import QWheelEvent

    panel = window.params_panel

    def wheel(w, delta) -> None:  # delta > 0: up (a spin box's next value)
        QApplication.sendEvent(w, QWheelEvent(
            QPointF(5, 5), QPointF(w.mapToGlobal(QPoint(5, 5))), QPoint(0, 0), QPoint(0, delta),
            Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase,
            False))

    model, seed = panel.noise_model.currentIndex(), panel.seed.value()
    assert model == 0 and panel.noise_model.count() > 1  # the wheel down would step it
    wheel(panel.noise_model, -120)
    wheel(panel.seed, 120)
    assert (panel.noise_model.currentIndex(), panel.seed.value()) == (model, seed)
    window.activateWindow()
    panel.seed.setFocus()
    qtbot.waitUntil(panel.seed.hasFocus)
    wheel(panel.seed, 120)
    assert panel.seed.value() == seed + 1
    # a list keeps the focus after a pick; the wheel over it still scrolls the form
    # (it switched the noise model back unseen)
    panel.noise_model.setFocus()
    qtbot.waitUntil(panel.noise_model.hasFocus)
    wheel(panel.noise_model, -120)
    wheel(panel.noise_model, 120)
    assert panel.noise_model.currentIndex() == model


def test_fields_the_grouped_method_does_not_use_are_greyed_out(window):
    # the pre-image iteration field looked live for 'grouped' but was ignored
    panel = window.params_panel
    for method, live in (("grouped", False), ("global", True)):
        panel.method.setCurrentIndex(panel.method.findData(method))
        assert [w.isEnabled() for w in (panel.stride, panel.n_train, panel.gamma,
                                        panel.iterations)] == [live] * 4
        assert (panel.params().preimage_iterations is None) != live


def test_fit_lines_breaks_between_parts_and_marks_what_it_leaves_out():
    from kpca_denoise.gui.views import fit_lines

    n = len  # one unit per character
    assert fit_lines("PSNR 30.12 dB · SSIM 0.912", n, 30, 2) == ["PSNR 30.12 dB · SSIM 0.912"]
    assert fit_lines("PSNR 30.12 dB · SSIM 0.912", n, 16, 2) == ["PSNR 30.12 dB", "SSIM 0.912"]
    assert fit_lines("a · b · c", n, 3, 2) == ["a", "b …"]
    assert fit_lines("a · b · c", n, 2, 2) == ["a", "b"]
    # the last line keeps whole parts: the number stays, the part that does not fit goes
    assert fit_lines("remaining noise σ ≈ 0.32 · eff. rank 3.2", n, 15, 2) == \
        ["remaining noise", "σ ≈ 0.32 …"]
    assert fit_lines("remaining noise σ ≈ 0.32 · eff. rank 3.2", n, 14, 2) == \
        ["remaining", "noise σ ≈ 0.32"]  # no room for " …": the number, unmarked
    assert fit_lines("remaining noise σ ≈ 0.27", n, 16, 2) == ["remaining noise", "σ ≈ 0.27"]
    assert fit_lines("one\ntwo", n, 80, 2) == ["one", "two"]


def test_load_errors_come_in_the_order_given(window, images, tmp_path):
    # "First:" named a missing file given after a broken one (missing files were
    # listed before unreadable ones), and "the other 1 are loaded"
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"not an image")
    assert window.load_paths([broken, tmp_path / "nonexist.png", images["u8"]]) == 1
    text = window.banner.text()
    assert text.startswith("2 inputs could not be read; the other is loaded. First: "
                           f"{broken}"), text


# -- the texts and the model, without widgets ------------------------------------------


def _entry(tmp_path, name="a.png", shape=(4, 4), is_patchset=False):
    from kpca_denoise.gui.model import ImageEntry
    from kpca_denoise.io import LoadedItem

    return ImageEntry(LoadedItem(path=tmp_path / name, array=np.zeros(shape, np.uint8),
                                 kind="patchset" if is_patchset else "image", format="PNG"))


def _fit(params=None, **kw):
    from kpca_denoise.gui.model import FitRecord

    args = dict(noisy=np.zeros((4, 4)), noise_sigma=25.4, noise_estimated=True, noisy_metrics={},
                eigenvalues=None, total_variance=None, resolved={}, timings={"total": 7.94},
                params=params or DenoiseParams(method="global", ranks=(4, None)))
    args.update(kw)
    return FitRecord(**args)


def test_texts_under_and_over_the_views(tmp_path):
    from kpca_denoise.gui import texts

    e, pset = _entry(tmp_path), _entry(tmp_path, "p.npz", (10, 8, 8), is_patchset=True)
    assert pset.is_patchset
    glob, grouped = _fit(), _fit(DenoiseParams(method="grouped"))
    # a rank's title: 'auto' says what it stood for, or that nothing capped it
    assert texts.rank_title(e, glob, 8) == "rank 8"
    assert texts.rank_title(e, _fit(resolved={"auto_rank": 12}), None) == "auto = 12"
    assert texts.rank_title(e, grouped, None) == "auto (shrinkage)"
    assert texts.rank_title(pset, grouped, None) == texts.rank_title(e, None, None) == "rank auto"
    assert MainWindow.rank_title(e, grouped, None) == "auto (shrinkage)"  # the window's name for it
    assert texts.input_title(None) == "input"
    assert texts.input_title(glob) == "input (noisy)"
    assert texts.input_title(_fit(DenoiseParams(add_noise=25.0))) == "noisy (σ 25 added)"
    assert texts.info_html(e, None) == "<b>a.png</b> · 4×4, uint8, PNG"
    rec = _fit(resolved={"gamma": 4.1e-7, "n_landmarks": 500, "items": ["a", "b"]},
               fit_set=("k1", "k2", "k3"))
    assert texts.info_html(e, rec) == (
        "<b>a.png</b> · 4×4, uint8, PNG · σ estimated 25.4 · γ 4.1e-07 · "
        "Nyström, 500 landmarks · one model for 2 of the 3 images · 7.9 s")
    poisson = _fit(resolved={"noise_model": {"gain": [2.0], "sigma": [3.0]}})
    assert texts.info_html(e, poisson) == \
        "<b>a.png</b> · 4×4, uint8, PNG · Poisson-Gaussian gain 2 · σ 3 · 7.9 s"
    assert texts.shared_model_text({"items": ["a", "b"]}, 2) == "one model for 2 images"
    assert texts.shared_model_text({}, 3) == "own model (only one of its kind in the set of 3)"
    # the spectrum's messages
    assert texts.empty_spectrum_text(None, False) == "run to see the eigen-spectrum"
    assert texts.empty_spectrum_text(grouped, False).startswith("no group spectrum for this result")
    assert texts.empty_spectrum_text(grouped, True).startswith("no spectrum: no model was fitted")
    assert texts.waiting_spectrum_text("global") == "waiting for the eigensolver…"
    assert "the groups' mean spectrum appears" in texts.waiting_spectrum_text("grouped")
    # thumbnails, the mismatch marker, the cursor readout
    assert texts.status_text(1, True) == "✓ 1 rank"
    assert texts.status_text(3, False) == "✓ 3 ranks · other parameters"
    shown = _fit(DenoiseParams(method="global", seed=1))
    assert texts.mismatch_html(shown, DenoiseParams(method="global", seed=2)) == (
        "⚠ Shown: results computed with other parameters than the panel's (seed: 1 → 2). "
        "<a href='use'>Use these parameters</a>")
    set_fit = _fit(shown.params, fit_set=("a", "b"))
    assert "(the set fit is not shown)" in texts.mismatch_html(set_fit, shown.params)
    assert "(fitted in a set)" in texts.mismatch_html(shown, shown.params)
    assert texts.hover_text(3, 5, "rank 4", np.uint16(812)) == "x 3, y 5 · rank 4: 812"
    assert texts.hover_text(3, 5, "rank 4", 0.5, "input", np.array([1, 2, 3], np.uint8)) == \
        "x 3, y 5 · rank 4: 0.5 · input: (1, 2, 3)"
    assert texts.split_hover_text(1, 2, [("noisy", 3.0), ("rank 8", 2.25)]) == \
        "x 1, y 2 · noisy: 3 · rank 8: 2.25"
    # numbers under the views
    assert texts.format_metrics({"psnr": float("inf"), "ssim": 1.0}) == "PSNR ∞ dB · SSIM 1.000"
    assert texts.format_metrics({"remaining_noise": 3.14159}) == "remaining noise σ ≈ 3.14"
    assert texts.format_metrics({"error": "boom"}) == "⚠ boom" and texts.format_metrics(None) == ""
    assert texts.region_stats(np.arange(16.0).reshape(4, 4), 0, 0, 2, 2) == "ROI mean 2.5 ± 2.06"
    assert texts.region_stats(np.zeros((4, 4)), 5, 5, 9, 9) == "ROI outside the image"
    # the ranks are read as the command line reads them, shown in ascending order
    assert texts.parse_ranks("16, auto 4") == (4, 16, None)
    assert texts.format_ranks((4, None)) == "4, auto"
    with pytest.raises(ValueError, match="ranks lists 4 twice; give each rank once"):
        texts.parse_ranks("4, 16, 4")
    with pytest.raises(ValueError, match="ranks must be integers separated by commas"):
        texts.parse_ranks("4, x")


def test_texts_of_the_log_and_the_messages(tmp_path):
    from kpca_denoise.gui import texts
    from kpca_denoise.gui.compute import ItemOutcome

    p = DenoiseParams(method="grouped", ranks=(4, None))
    out = ItemOutcome(key="k", name="a.png", params_key="pk", params=p, outputs={4: None, None: None},
                      noise_sigma=25.43, noise_estimated=True, seconds=2.44,
                      timings={"noise": 0.21, "preimage": 1.96, "total": 2.4, "image": 2.3})
    assert texts.outcome_log_lines(out, False) == [
        "a.png: ranks 4, auto; method grouped in 2.4 s (noise 0.2s, preimage 2.0s)",
        "a.png: noise σ estimated 25.4"]
    out.resolved = {"auto_rank": 9, "items": ["a", "b"]}
    out.fit_set = ("k", "k2")
    out.noise_estimated = False
    assert texts.outcome_log_lines(out, True) == [
        "a.png: ranks 4, auto; method global kernel PCA (patch sets always use it; 'grouped' applies "
        "to images); auto = 9 components; one model for 2 images, 2.4 s for the set "
        "(noise 0.2s, preimage 2.0s)"]
    out.resolved = {"noise_model": {"gain": [2.0], "sigma": [3.0]}}
    assert texts.outcome_log_lines(out, False)[1] == (
        "a.png: Poisson-Gaussian noise, gain 2 · σ 3 (denoised at σ 1 after the "
        "variance-stabilising transform)")
    out.error = "a.png: no memory"
    assert texts.outcome_error_text(out) == "Denoising failed for a.png: no memory"
    assert texts.run_started_text(3, "global", {None, 8, 4}, [2]) == (
        "run started: 3 images, method global, ranks 4, 8, auto, the set of 2 images fitted together")
    assert texts.run_started_text(1, "grouped", {4}, []) == "run started: 1 image, method grouped, ranks 4"
    assert texts.run_end_texts("done", 53.94, done=1) == ("done: 1 image in 53.9 s",) * 2
    assert texts.run_end_texts("done", 2.0, done=3, failed=1)[1] == "done: 3 images in 2.0 s, 1 failed"
    assert texts.run_end_texts("cancelled", 1.25) == (
        "cancelled after 1.2 s — earlier results kept",
        "Run cancelled after 1.2 s; earlier results are kept.")
    # a first run cancelled has nothing to keep
    assert texts.run_end_texts("cancelled", 1.25, kept=False) == (
        "cancelled after 1.2 s", "Run cancelled after 1.2 s; nothing had been computed yet.")
    assert texts.run_end_texts("failed", 1.0, message="boom") == ("failed", "The run failed: boom")
    # loading
    assert texts.load_errors_text(["x: broken"], 0) == "x: broken"
    assert texts.load_errors_text(["x: broken", "y: missing"], 1) == (
        "2 inputs could not be read; the other is loaded. First: x: broken")
    assert texts.load_errors_text(["x", "y"], 3) == \
        "2 inputs could not be read; the other 3 are loaded. First: x"
    assert texts.load_errors_text(["x", "y"], 0) == "None of the 2 inputs could be read. First: x"
    skipped = [tmp_path / "a.doc", tmp_path / "b.txt"]
    assert texts.skipped_log_text(skipped, {".png", ".npz"}) == (
        f"skipped 2 files of an unsupported type (.npz, .png are read): {skipped[0]}, {skipped[1]}")
    assert texts.nothing_loaded_text(skipped) == (
        "Nothing loaded: 2 file(s) of an unsupported type were skipped (a.doc, b.txt); the log lists them.")
    assert texts.loaded_status_text(1, 0) == "loaded 1 image"
    assert texts.loaded_status_text(2, 1) == "loaded 2 images; skipped 1 unsupported (see the log)"


def test_session_rows_and_residual_maps(tmp_path):
    from kpca_denoise.gui.model import Session, residual_map

    s = Session()
    a, b = _entry(tmp_path, "a.png"), _entry(tmp_path, "b.png")
    s.add(a)
    s.add(b)
    assert s.row_of(b.key) == 1 and s.row_of("gone") == -1
    s.remove(0)
    assert s.row_of(b.key) == 0 and s.row_of(a.key) == -1
    # the residual of a colour image is the mean over R, G, B (alpha left out), in float32
    noisy = np.zeros((2, 3, 4), np.uint8)
    noisy[..., :3] = (30, 60, 90)
    noisy[..., 3] = 255
    colour = _entry(tmp_path, "c.png", (2, 3, 4))
    r = residual_map(colour, noisy, np.zeros_like(noisy))
    assert r.dtype == np.float32 and r.shape == (2, 3) and np.all(r == 60)
    grey = residual_map(a, np.full((4, 4), 10, np.uint8), np.full((4, 4), 12, np.uint8))
    assert np.all(grey == -2)


def test_a_missing_x11_library_is_one_line_naming_the_package(monkeypatch):
    """Without libxcb-cursor0 (missing on many Debian and Ubuntu installs) Qt printed a
    screenful and aborted with a core dump; the plugin is loaded first, and the library
    the loader names is said with its package."""
    import ctypes

    display = {"DISPLAY": ":0"}
    # this machine's own answer: nothing missing, or one line naming a missing library
    # and its package (a machine without the window's system libraries)
    here = gui_app.platform_problem(display)
    assert here is None or ("\n" not in here and here.startswith(
        "the window cannot open: Qt's X11 plugin needs ") and "sudo apt install" in here)
    # checked only where Qt will use the X11 plugin
    assert gui_app.platform_problem({}) is None
    assert gui_app.platform_problem({"DISPLAY": ":0", "QT_QPA_PLATFORM": "offscreen"}) is None
    assert gui_app.platform_problem({"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0"}) is None

    def missing(*args, **kwargs):
        raise OSError("libxcb-cursor.so.0: cannot open shared object file: No such file or "
                      "directory")

    monkeypatch.setattr(ctypes, "CDLL", missing)
    msg = gui_app.platform_problem(display)
    assert "\n" not in msg and msg.startswith(
        "the window cannot open: Qt's X11 plugin needs libxcb-cursor.so.0, which is not "
        "installed; on Debian/Ubuntu: sudo apt install libxcb-cursor0 (all it needs: ")
    assert gui_app.platform_problem({"DISPLAY": ":0", "QT_QPA_PLATFORM": "xcb"}) == msg

    def broken(*args, **kwargs):
        raise OSError("libqxcb.so: invalid ELF header")

    monkeypatch.setattr(ctypes, "CDLL", broken)
    msg = gui_app.platform_problem(display)
    assert "\n" not in msg and "does not load (libqxcb.so: invalid ELF header)" in msg
    assert "libxcb-cursor0" in msg


def test_the_window_says_it_and_stops_before_qt_aborts(monkeypatch, capsys):
    monkeypatch.setattr(gui_app, "platform_problem", lambda environ=None: "the window cannot open")
    assert gui_app.main([]) == 2
    assert capsys.readouterr().err == "error: the window cannot open\n"


def test_the_debian_package_of_a_library():
    names = {"libxcb-cursor.so.0": "libxcb-cursor0", "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
             "libEGL.so.1": "libegl1", "libdbus-1.so.3": "libdbus-1-3",
             "libxcb-render-util.so.0": "libxcb-render-util0"}
    assert {k: gui_app._debian_package(k) for k in names} == names


def test_a_saved_geometry_is_never_smaller_than_the_layout_needs(qtbot, tmp_path):
    # a window that was never shown saved Qt's 640x480 placeholder; restored, it opened
    # with the comparison grid in slivers
    from PySide6.QtCore import QRect

    path = str(tmp_path / "g.ini")
    w = MainWindow(settings=QSettings(path, QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    w.save_settings()  # not shown yet: no geometry is written
    assert QSettings(path, QSettings.Format.IniFormat).value("geometry") is None
    avail = QRect(0, 0, 1366, 768)
    w.place_on_screen(avail)
    w.show()
    qtbot.waitExposed(w)
    w.resize(500, 300)  # what an abnormal exit could leave behind
    w.save_settings()
    assert QSettings(path, QSettings.Format.IniFormat).value("geometry") is not None
    w.close()
    w2 = MainWindow(settings=QSettings(path, QSettings.Format.IniFormat))
    qtbot.addWidget(w2)
    w2.place_on_screen(avail)
    min_w, min_h = w2.minimum_window_size(avail)
    assert w2.width() >= min_w >= int(0.75 * 1366) and w2.height() >= min_h >= int(0.75 * 768)
    assert avail.contains(w2.frameGeometry()), w2.frameGeometry()


def test_an_image_without_noise_says_so_in_the_log():
    # a clean or flat image came back as five identical copies with no word
    from kpca_denoise.gui import texts
    from kpca_denoise.gui.compute import JobItem, _run_ranks, _Throttle

    flat = np.full((40, 40), 77, np.uint8)
    item = JobItem(key="k", name="flat.png", array=flat, is_patchset=False, ranks=(4, None))
    quiet = _Throttle(lambda *a: None)
    out = _run_ranks(item, DenoiseParams(ranks=(4, None)), (4, None), quiet, quiet, None)
    assert out.error is None and out.note and "returned unchanged" in out.note
    assert texts.outcome_log_lines(out, False)[-1] == out.note


def test_an_roi_of_a_larger_image_moves_inside_the_next_one(window, images):
    # a leftover ROI beyond the new image made Fit zoom out to it (a sliver of an image)
    window.load_paths([images["big"], images["u8"]])
    window.imageset.set_current(0)
    window.toggle_roi()
    window.roi.setPos([60, 60])
    window.roi.setSize([30, 30])
    window.imageset.set_current(1)  # 48x48: the ROI at 60..90 lies outside it
    x0, y0, x1, y1 = window.roi_box()
    assert 0 <= x0 < x1 <= 48 and 0 <= y0 < y1 <= 48
    window.auto_range()
    (vx0, vx1), (vy0, vy1) = window.grid.master.viewRange()
    # fitted to the 48 px image (to its height in a view wider than tall), not to the ROI
    assert min(vx1 - vx0, vy1 - vy0) < 60


def _panel_on_a_fake_clock(qtbot, monkeypatch, images):
    """A progress panel whose clock is ``now[0]``, a grouped run of ``images`` started."""
    import kpca_denoise.gui.panels as panels

    now = [100.0]
    monkeypatch.setattr(panels.time, "monotonic", lambda: now[0])
    p = panels.ProgressPanel()
    qtbot.addWidget(p)
    p.start("grouped", images)
    return p, now


def test_a_large_images_tiles_are_counted_on_the_overall_line(qtbot, monkeypatch):
    # the tiles run at once and only the window's own thread's tiles send their steps:
    # the stage bars said nothing of how far the image was
    p, now = _panel_on_a_fake_clock(qtbot, monkeypatch, 1)
    p.item_started(0, 1, "phone.jpg")
    now[0] += 15.0
    p.update_stage("grouping", 258, 258, "stage 2")
    p.update_stage("tiles", 1, 12)  # the second tile, in flight beside it, nearly done
    assert "tile 1/12" in p.overall.text() and "left" not in p.overall.text()
    now[0] += 1.0
    p.update_stage("tiles", 2, 12)  # two tiles in 16 s: ten more, 80 s
    assert "image 1/1: phone.jpg, tile 2/12" in p.overall.text()
    assert "about 80 s left" in p.overall.text()
    p.update_stage("tiles", 12, 12)
    assert "tile" not in p.overall.text()
    p.item_started(0, 1, "next.png")
    assert "tile" not in p.overall.text()


def test_a_run_of_several_images_estimates_the_whole_run(qtbot, monkeypatch):
    # the estimate covered only the current stage ("about 20 s left" at 21 s of 102 s)
    import kpca_denoise.gui.panels as panels

    p, now = _panel_on_a_fake_clock(qtbot, monkeypatch, 4)
    p.item_started(0, 4, "a.png")
    assert p.run_left() is None  # nothing done yet: no rate
    now[0] += 20.0
    p.item_started(1, 4, "b.png")  # one image took 20 s: three more of about 20 s
    assert p.run_left() == pytest.approx(60.0)
    now[0] += 5.0
    assert p.run_left() == pytest.approx(55.0)
    p._render()
    assert "the run about 55 s" in p.overall.text()
    single = panels.ProgressPanel()
    qtbot.addWidget(single)
    single.start("grouped", 1)
    single.item_started(0, 1, "only.png")
    now[0] += 30.0
    assert single.run_left() is None  # one image: the stage's estimate says it


def test_reset_layout_brings_every_dock_back_at_its_first_size(window, qtbot):
    """A window made small squeezed the docks for good (the squeezed layout was saved and
    restored at every start); View › Reset layout puts them back, and saves that."""
    w = window
    first = w.dock_spectrum.width()
    w.dock_params.setFloating(True)
    w.dock_images.close()
    w.resize(420, 320)
    QApplication.processEvents()
    w.resize(1280, 820)
    QApplication.processEvents()
    w.resizeDocks([w.dock_spectrum, w.dock_progress], [150, 900], Qt.Orientation.Horizontal)
    QApplication.processEvents()
    assert w.dock_spectrum.width() < 0.5 * first
    squeezed = w.saveState()
    w.act_reset_layout.trigger()
    QApplication.processEvents()
    for dock, area in ((w.dock_images, Qt.DockWidgetArea.LeftDockWidgetArea),
                       (w.dock_params, Qt.DockWidgetArea.RightDockWidgetArea),
                       (w.dock_spectrum, Qt.DockWidgetArea.BottomDockWidgetArea),
                       (w.dock_progress, Qt.DockWidgetArea.BottomDockWidgetArea)):
        assert dock.isVisible() and not dock.isFloating() and w.dockWidgetArea(dock) == area
    assert w.dock_spectrum.width() > 0.8 * first
    saved = w.settings.value("window_state")
    assert saved is not None and saved != squeezed  # the next start gets this layout
    assert "Reset layout" in [a.text() for a in w.menuBar().actions()[2].menu().actions()]


def test_removing_the_last_image_leaves_nothing_of_it(window, images, qtbot):
    """The spectrum and the histogram kept showing the image removed last, and Remove
    stayed enabled with nothing to remove."""
    w = window
    assert w.load_paths([images["u8"]]) == 1
    assert w.imageset.remove_button.isEnabled() and w.act_remove.isEnabled()
    _run(qtbot, w, FAST.replace(ranks=(2,)))
    assert w.spectrum.eigenvalues.size > 0
    def drawn(curves):
        return any(c.getData()[0] is not None and len(c.getData()[0]) for c in curves)

    assert drawn(w.hist.item.plots)
    w.confirm = lambda title, text: True
    w.remove_image(0)
    QApplication.processEvents()
    assert not w.entries
    assert w.spectrum.eigenvalues.size == 0
    assert not drawn(w.hist.item.plots)
    assert not w.imageset.remove_button.isEnabled() and not w.act_remove.isEnabled()


def test_the_spectrum_axis_labels_decades_only():
    # over about two decades the log axis labelled its minor ticks too, one over another
    from kpca_denoise.gui.spectrum import SpectrumPlot

    sp = SpectrumPlot()
    sp.resize(700, 220)
    sp.set_eigenvalues(np.geomspace(0.3, 0.004, 30), final=True)
    QApplication.processEvents()
    ax = sp.getPlotItem().getAxis("left")
    lo, hi = sp.getPlotItem().viewRange()[1]
    labels = [t for spacing, vals in ax.tickValues(lo, hi, 200)
              for t in ax.tickStrings(vals, 1.0, spacing) if t]
    assert labels and all(t in ("0.001", "0.01", "0.1", "1", "10") for t in labels), labels
