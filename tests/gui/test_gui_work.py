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
