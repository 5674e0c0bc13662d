"""The window keeps each image's results; its texts and model without widgets; its layout (pytest-qt, offscreen; the fixtures are :mod:`gui_support`'s).

Small synthetic images and method='global' keep every run to a second or two.
"""

from __future__ import annotations


import numpy as np
import pytest

from gui_support import FAST, RUN_TIMEOUT_MS, outcome_of, run, settle
from PySide6.QtCore import QSettings, Qt
from PySide6.QtWidgets import QApplication

from kpca_denoise.gui import app as gui_app
from kpca_denoise.gui.jobs import params_key
from kpca_denoise.gui.main_window import MainWindow
from kpca_denoise.gui.views import format_value
from kpca_denoise.params import DenoiseParams


def test_each_image_keeps_its_results_and_the_viewer_reads_source_values(window, images, qtbot):
    window.load_paths([images["u16"], images["u8"]])
    window.imageset.set_current(0)
    a = FAST.replace(ranks=(2, 4))
    run(qtbot, window, a)
    window.imageset.set_current(1)
    run(qtbot, window, FAST.replace(ranks=(2,), seed=5))
    window.imageset.set_current(0)  # its results came from seed 0: shown, and marked
    settle(qtbot, window)
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
    run(qtbot, window, params)
    rec = window.cache.get(window.entries[0].key, params_key(params))
    auto = rec.resolved["auto_rank"]
    qtbot.waitUntil(lambda: window.current_params().ranks != (None,), timeout=5000)
    expected = tuple(sorted({max(1, auto // 2), min(2 * auto, 39)} - {auto})) + (None,)
    assert window.current_params().ranks == expected
    qtbot.waitUntil(lambda: not window.runner.is_running() and set(rec.ranks) == set(expected),
                    timeout=RUN_TIMEOUT_MS)
    settle(qtbot, window)
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
    from kpca_denoise.gui.jobs import ItemOutcome

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
    assert {k: gui_app.debian_package(k) for k in names} == names


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

    flat = np.full((40, 40), 77, np.uint8)
    out = outcome_of(flat, DenoiseParams(ranks=(4, None)), "flat.png")
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


def _panel_on_a_fake_clock(qtbot, monkeypatch, images, tiles=1):
    """A progress panel whose clock is ``now[0]``, a grouped run of ``images`` of equal
    weight started, each planned in ``tiles`` tiles."""
    import kpca_denoise.gui.panels as panels
    from kpca_denoise.cli_progress import RunEstimate

    now = [100.0]
    monkeypatch.setattr(panels.time, "monotonic", lambda: now[0])
    p = panels.ProgressPanel()
    qtbot.addWidget(p)
    est = RunEstimate(dict.fromkeys(range(images), 1.0), stages=2,
                      tiles=dict.fromkeys(range(images), tiles), clock=lambda: now[0])
    p.start("grouped", images, estimate=est)
    return p, now


def test_a_large_images_tiles_are_counted_on_the_overall_line(qtbot, monkeypatch):
    # the tiles run at once and only the window's own thread's tiles send their steps:
    # the stage bars said nothing of how far the image was
    p, now = _panel_on_a_fake_clock(qtbot, monkeypatch, 1, tiles=12)
    p.item_started(0, 1, "phone.jpg")
    now[0] += 15.0
    p.update_stage("grouping", 258, 258, "stage 2")
    p.update_stage("tiles", 1, 12)  # the second tile, in flight beside it, nearly done
    assert "tile 1/12" in p.overall.text() and "left" not in p.overall.text()
    assert "(run 8 %)" in p.overall.text()  # one tile of 12
    now[0] += 1.0
    p.update_stage("tiles", 2, 12)  # two tiles in 16 s: ten more, 80 s
    assert "image 1/1: phone.jpg, tile 2/12" in p.overall.text()
    # the run's rate is not measured yet (1 s since its first work): the image's, said so
    assert "this image about 80 s" in p.overall.text()
    now[0] += 7.0
    p.update_stage("tiles", 4, 12)  # 3 tiles in 8 s since the first's end: 8 more, 21 s
    assert p.run_left() == pytest.approx(8.0 / 3 * 8, rel=0.01)
    assert "about 21 s left (run 33 %)" in p.overall.text()
    assert "this image" not in p.overall.text()
    p.update_stage("tiles", 12, 12)
    assert "tile" not in p.overall.text()
    p.item_started(0, 1, "next.png")
    assert "tile" not in p.overall.text()


def test_a_run_of_several_images_estimates_the_whole_run(qtbot, monkeypatch):
    # the estimate covered only the current stage ("about 55 s left" at 8 s of 210 s)
    p, now = _panel_on_a_fake_clock(qtbot, monkeypatch, 4)
    p.item_started(0, 4, "a.png")
    assert p.run_left() is None  # nothing done yet: no rate
    now[0] += 2.0
    p.update_stage("grouping", 1, 10, "stage 1")  # the first work measured: the rate's start
    now[0] += 9.0
    p.update_stage("preimage", 10, 10, "stage 2")  # a.png done in 9 s since then
    p.item_started(1, 4, "b.png")
    assert p.run_left() == pytest.approx(27.0, rel=0.05)  # three more of about 9 s
    now[0] += 5.0
    p.update_stage("preimage", 10, 10, "stage 1")  # b.png half done
    p.update_stage("preimage", 1, 10, "stage 2")
    # the whole run's, not the stage's: 1.5 images left at 9 s a piece
    assert p.run_left() == pytest.approx(21.5, rel=0.1)
    assert "about 21 s left (run" in p.overall.text() or "about 22 s left (run" in p.overall.text()
    assert "this stage" not in p.overall.text()


def test_the_elapsed_time_ticks_every_second_without_progress(qtbot):
    from kpca_denoise.gui.panels import ProgressPanel

    p = ProgressPanel()
    qtbot.addWidget(p)
    p.start("grouped", 1)
    p.item_started(0, 1, "a.png")
    assert p.overall.text().startswith("0 s")
    qtbot.waitUntil(lambda: p.overall.text().startswith("2 s"), timeout=4000)
    p.finish("done")
    assert not p.clock.isActive()


def test_a_runs_estimate_weighs_its_images_by_their_pixels_and_tiles():
    from kpca_denoise.gui.jobs import Job, JobItem
    from kpca_denoise.gui.panels import run_estimate

    small = JobItem("a", "a", np.zeros((64, 64), np.uint8), False, (None,))
    big = JobItem("b", "b", np.zeros((3000, 2000, 3), np.uint8), False, (None,))
    est = run_estimate(Job([small, big], DenoiseParams()))
    assert est.tiles[0] == 1 and est.tiles[1] > 1
    assert est.weights[1] > 2000 * 3000 * 2 > 64 * 64 == est.weights[0]  # colour, halos
    assert run_estimate(Job([small], DenoiseParams(), purpose="preview")) is None


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
    w.resizeDocks([w.dock_spectrum, w.dock_progress], [40, 2000], Qt.Orientation.Horizontal)
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
    view = next(a.menu() for a in w.menuBar().actions() if a.text() == "&View")
    assert "Reset layout" in [a.text() for a in view.actions()]


def test_removing_the_last_image_leaves_nothing_of_it(window, images, qtbot):
    """The spectrum and the histogram kept showing the image removed last, and Remove
    stayed enabled with nothing to remove."""
    w = window
    assert w.load_paths([images["u8"]]) == 1
    assert w.imageset.remove_button.isEnabled() and w.act_remove.isEnabled()
    run(qtbot, w, FAST.replace(ranks=(2,)))
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
