"""The window loads images, runs, cancels and reports errors (pytest-qt, offscreen; the fixtures are :mod:`gui_support`'s).

Small synthetic images and method='global' keep every run to a second or two.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from PIL import Image

from gui_support import FAST, RUN_TIMEOUT_MS, run, settle, trial_args, smooth
from PySide6.QtCore import QMimeData, QPointF, Qt, QTimer, QUrl
from PySide6.QtGui import QDropEvent
from PySide6.QtWidgets import QApplication

from kpca_denoise import cli
from kpca_denoise.gui.jobs import params_key
from kpca_denoise.gui.worker import active_threads
from kpca_denoise.gui.main_window import MainWindow
from kpca_denoise.io import read_item
from kpca_denoise.params import DenoiseParams
from kpca_denoise.pipeline import denoise_set
from helpers import assert_same_result


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
    summary = run(qtbot, window, FAST.replace(ranks=(2,)))  # the good image still runs
    assert summary.status == "done" and summary.done == 1


# -- running -------------------------------------------------------------------------


def test_run_to_completion_shows_every_rank_with_metrics(window, images, qtbot):
    window.load_paths([images["u8"]])
    summary = run(qtbot, window, FAST.replace(add_noise=20.0))
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
    run(qtbot, window, FAST.replace(ranks=(4,)))
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
    settle(qtbot, window)
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
    run(qtbot, window, FAST.replace(ranks=(4,)))
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
    clean = smooth(64, 64, 40000.0, 5)
    noisy = np.clip(64.0 * rng.poisson(clean / 64.0) + rng.normal(0, 300.0, clean.shape), 0, 65535)
    path = tmp_path / "pg16.png"
    Image.fromarray(noisy.astype(np.uint16)).save(path)
    window.load_paths([path])
    run(qtbot, window, DenoiseParams(ranks=(None,), noise_model="poisson-gaussian"))
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
    assert run(qtbot, window, base).status == "done"
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
    run(qtbot, window, FAST.replace(ranks=(2, 4)))
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
    run(qtbot, window, FAST.replace(ranks=(2, 4, 8)))
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
    run(qtbot, window, FAST.replace(ranks=(2, 8)))
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
    run(qtbot, window, FAST.replace(ranks=(2, 8)))
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
    summary = run(qtbot, window, params, run=window.run_set_fit)
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
    settle(qtbot, window)
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
    from kpca_denoise.gui.compute import run_job
    from kpca_denoise.gui.jobs import Job, JobItem

    grey, grey2 = (smooth(48, 48, 255, s).astype(np.uint8) for s in (0, 1))
    colour = np.stack([smooth(48, 48, 255, s) for s in (4, 5, 6)], axis=-1).astype(np.uint8)
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
    assert run(qtbot, window, base).status == "done"  # the current image alone
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
    settle(qtbot, window)
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
    run(qtbot, window, params)
    rec = window.cache.get(window.entries[0].key, params_key(params))
    assert rec.resolved["n_landmarks"] == 64 and "Nyström, 64 landmarks" in window.info.text()
    window.select_rank(8)
    window.export_current(tmp_path / "gui")
    sidecar = tmp_path / "gui" / "gray8_kpca_r8.json"
    data = json.loads(sidecar.read_text())
    assert data["params"]["n_landmarks"] == 64
    assert DenoiseParams.from_dict(data["params"]) == params.replace(ranks=(8,))
    rc = cli.main(["denoise", str(images["u8"]), "-o", str(tmp_path / "cli"), "--params", str(sidecar), "-q",
                   *trial_args(sidecar)])
    assert rc == 0
    a = read_item(tmp_path / "gui" / "gray8_kpca_r8.png").array.astype(int)
    b = read_item(tmp_path / "cli" / "gray8_kpca_r8.png").array.astype(int)
    assert np.abs(a - b).max() <= 1
    # and the remembered settings bring it back
    window.save_settings()
    w2 = MainWindow(settings=window.settings)
    qtbot.addWidget(w2)
    assert w2.params_panel.params() == params.replace(add_noise=None)  # the trial's noise: not kept


# -- errors --------------------------------------------------------------------------


def test_failed_run_is_reported_not_raised(window, tmp_path, qtbot):
    tiny = tmp_path / "tiny.png"
    Image.fromarray(np.full((6, 6), 100, np.uint8)).save(tiny)
    window.load_paths([tiny])
    summary = run(qtbot, window, FAST.replace(ranks=(2,), patch_size=8))
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
