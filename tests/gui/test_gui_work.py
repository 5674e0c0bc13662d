"""The window keeps the user's work and nothing of a trial (issue 65): a trial's added
noise is not carried into the next session, switching the method keeps both methods'
results and rank lists, P and S work from any focus (pytest-qt, offscreen; the fixtures
are ``conftest.py``'s)."""

from __future__ import annotations

import json

from PySide6.QtCore import QSettings

from kpca_denoise.gui.main_window import MainWindow
from kpca_denoise.params import DenoiseParams


def _window(qtbot, path) -> MainWindow:
    w = MainWindow(settings=QSettings(str(path), QSettings.Format.IniFormat))
    w.ask = lambda title, text, choices: choices[0]
    qtbot.addWidget(w)
    return w


def test_a_trials_added_noise_is_not_restored_in_the_next_session(qtbot, tmp_path):
    ini = tmp_path / "w.ini"
    w = _window(qtbot, ini)
    w.params_panel.set_params(DenoiseParams(add_noise=25.0, strength=0.8, method="global"))
    w.save_settings()
    w.close()
    saved = json.loads(str(QSettings(str(ini), QSettings.Format.IniFormat).value("params")))
    assert saved.get("add_noise") is None
    w2 = _window(qtbot, ini)
    p = w2.params_panel.params()
    assert p.add_noise is None and not w2.params_panel.add_noise_on.isChecked()
    assert p.strength == 0.8 and p.method == "global"  # the user's choices are kept
    w2.close()
    # settings written before (with the noise in them) are not applied either
    QSettings(str(ini), QSettings.Format.IniFormat).setValue(
        "params", json.dumps(DenoiseParams(add_noise=14.0).to_dict()))
    w3 = _window(qtbot, ini)
    assert w3.params_panel.params().add_noise is None
    w3.close()


def test_switching_the_method_keeps_each_methods_rank_list(window):
    panel = window.params_panel
    panel.set_params(DenoiseParams(method="grouped", ranks=(1, 2, 4, 8, None)))
    panel.method.setCurrentIndex(panel.method.findData("global"))
    assert panel.params().ranks == (4, 8, 32, None)  # the method's own suggestion, first time
    panel.ranks.setText("3, 6")
    panel.ranks.editingFinished.emit()
    panel.method.setCurrentIndex(panel.method.findData("grouped"))
    assert panel.params().ranks == (1, 2, 4, 8, None)  # not 4, 8, auto, 32 kept
    panel.method.setCurrentIndex(panel.method.findData("global"))
    assert panel.params().ranks == (3, 6)


def test_p_and_s_reach_the_window_from_a_parameter_field(window, images, qtbot):
    # P after editing the strength did nothing: the focused field took the key
    window.load_paths([images["u8"]])
    triggered = []

    def on_split(*_):
        triggered.append("S")

    def on_preview(*_):
        triggered.append("P")

    window.act_split.triggered.connect(on_split)
    window.act_preview.triggered.connect(on_preview)
    for field in (window.params_panel.strength, window.params_panel.ranks):
        field.setFocus()
        qtbot.waitUntil(lambda: window.focusWidget() is not None and (
            window.focusWidget() is field or field.isAncestorOf(window.focusWidget())), timeout=2000)
        triggered.clear()
        qtbot.keyClick(window.focusWidget(), "s")
        qtbot.keyClick(window.focusWidget(), "p")
        assert triggered == ["S", "P"], field
        window.toggle_split()
        if window.preview_roi is not None:
            window.toggle_preview()
    window.act_split.triggered.disconnect(on_split)
    window.act_preview.triggered.disconnect(on_preview)


def test_the_grouped_spectrum_is_live_during_the_run(window, images, qtbot, monkeypatch):
    from gui_support import run

    from kpca_denoise.gui.running import LIVE_GROUPS_TEXT

    live = []
    plot = window.spectrum
    shown = plot.set_group_spectrum

    def spy(spectrum, what, spread=None):
        if what == LIVE_GROUPS_TEXT and window.runner.busy():
            live.append(len(spectrum))
        shown(spectrum, what, spread)

    monkeypatch.setattr(plot, "set_group_spectrum", spy)
    window.load_paths([images["big"]])
    run(qtbot, window, DenoiseParams(method="grouped", ranks=(2, None), add_noise=20.0))
    assert live and all(n > 1 for n in live), live  # the mean spectrum, as it is gathered
    assert "spread" not in plot.status_text() or "band" in plot.status_text()


def test_rank_labels_sit_clear_of_the_curve_and_the_axis_label_is_short(qtbot):
    import numpy as np

    from kpca_denoise.gui.spectrum import SpectrumPlot

    plot = SpectrumPlot()
    qtbot.addWidget(plot)
    ev = 1000.0 * 0.5 ** np.arange(31)
    plot.set_group_spectrum(ev, "groups")
    plot.set_ranks((1, 2, 4, 8, 16, None), selected=8, auto_rank=2.5)
    lo, hi = plot._yrange
    heights = plot.label_heights()
    for key, at in heights.items():
        k = int(round(plot._rank_lines[key].value()))
        curve = (np.log10(ev[k - 1]) - lo) / (hi - lo)
        assert abs(at - curve) > 0.2, (key, at, curve)
    assert len(plot.getPlotItem().getAxis("left").labelText) <= 12
