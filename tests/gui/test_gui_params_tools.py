"""The parameters' undo/redo, presets, a sidecar loaded into the window, and the run's
queue on the image set (issue 65, item 8)."""

from __future__ import annotations

import json

from gui_support import FAST, RUN_TIMEOUT_MS, settle
from PySide6.QtCore import QSettings

from kpca_denoise.gui.history import ParamsHistory
from kpca_denoise.gui.main_window import MainWindow
from kpca_denoise.gui.texts import QUEUE_TEXTS
from kpca_denoise.params import DenoiseParams


def test_the_history_steps_back_and_forth_and_merges_quick_changes_of_one_field():
    now = [0.0]
    h = ParamsHistory(clock=lambda: now[0])
    a = DenoiseParams()
    h.record(a)
    assert not h.can_undo() and not h.can_redo()
    for s in (1.1, 1.2, 1.3):  # the strength's arrow held: one step
        now[0] += 0.1
        h.record(a.replace(strength=s))
    now[0] += 5.0
    h.record(a.replace(strength=1.3, ranks=(4,)))
    assert h.undo() == a.replace(strength=1.3)
    assert h.undo() == a
    assert h.undo() is None
    assert h.redo() == a.replace(strength=1.3)
    h.record(a.replace(strength=1.3, method="global"))  # a new change: redo is gone
    assert not h.can_redo()
    assert h.undo() == a.replace(strength=1.3)


def test_ctrl_z_undoes_a_parameter_change_and_ctrl_shift_z_redoes_it(window, qtbot):
    panel = window.params_panel
    before = window.current_params()
    panel.strength.setValue(1.5)
    window.history._last = None  # a later change, not the same step
    panel.ranks.setText("2,4")
    panel.ranks.editingFinished.emit()
    after = window.current_params()
    assert after.ranks == (2, 4) and after.strength == 1.5
    assert window.act_undo.isEnabled() and not window.act_redo.isEnabled()
    assert "Ctrl+Z" in window.act_undo.shortcut().toString()
    window.act_undo.trigger()
    assert window.current_params() == after.replace(ranks=before.ranks)
    window.act_undo.trigger()
    assert window.current_params() == before
    assert not window.act_undo.isEnabled()
    window.act_redo.trigger()
    window.act_redo.trigger()
    assert window.current_params() == after
    assert not window.act_redo.isEnabled()


def test_a_preset_round_trip_and_the_bundled_ones(window, tmp_path, qtbot):
    panel = window.params_panel
    mine = DenoiseParams(ranks=(2, 8), strength=1.3, add_noise=20.0, profile="fast")
    panel.set_params(mine)
    assert window.save_preset("night shots")
    assert not window.save_preset("default")  # the bundled names stay
    assert window.preset_names()[:2] == ["default", "fast"]
    assert "night shots" in window.preset_names()
    assert "night shots" in [a.text() for a in window.presets_menu.actions()]
    assert window.load_preset("fast")
    assert window.current_params() == DenoiseParams(profile="fast")
    assert window.load_preset("default")
    assert window.current_params() == DenoiseParams()
    assert window.load_preset("night shots")
    assert window.current_params() == mine.replace(add_noise=None)  # the trial left out
    # another window with the same settings has it
    settings = QSettings(str(tmp_path / "window.ini"), QSettings.Format.IniFormat)
    other = MainWindow(settings=settings, persist=False)
    qtbot.addWidget(other)
    try:
        assert other.preset("night shots") == mine.replace(add_noise=None)
    finally:
        other.shutdown()
    window.delete_preset("night shots")
    assert "night shots" not in window.preset_names()


def test_a_sidecar_loaded_into_the_window_equals_the_command_lines_parameters(window, tmp_path):
    from kpca_denoise.cli_args import build_parser
    from kpca_denoise.cli_params import params_from_args

    p = DenoiseParams(method="global", ranks=(4, None), patch_size=7, n_train=900,
                      strength=0.8, noise_model="gaussian", seed=3, preimage_iterations=40)
    side = tmp_path / "photo_rank-4.json"
    side.write_text(json.dumps({"params": p.to_dict(), "trial": {"add_noise": 25.0}}))
    assert window.load_params_file(side)
    cli = params_from_args(build_parser().parse_args(
        ["denoise", "x.png", "-o", str(tmp_path / "out"), "--params", str(side)]))
    assert window.current_params() == cli == p
    assert "trial settings left out: add_noise 25.0" in window.log_view.toPlainText()
    # one step of the history: Ctrl+Z goes back
    assert window.undo_params() and window.current_params() != cli
    # the command line's own default (no cap written): the panel shows the method's cap
    side.write_text(json.dumps({"params": p.replace(preimage_iterations=None).to_dict()}))
    window.log_view.clear()
    assert window.load_params_file(side)
    assert window.current_params() == p.replace(preimage_iterations=100)
    assert "cannot show" not in window.log_view.toPlainText()
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert not window.load_params_file(bad)
    assert "cannot read the parameter file" in window.banner.text()


def test_the_set_shows_each_images_place_in_the_runs_queue(window, images, qtbot):
    window.load_paths([images["u8"], images["big"]])
    settle(qtbot, window)
    window.params_panel.set_params(FAST)
    window._auto_timer.stop()
    seen = []

    def on_started(index, count, name):
        seen.append([window.imageset.list.item(r).text().split("\n")[-1] for r in range(2)])

    window.runner.itemStarted.connect(on_started)
    with qtbot.waitSignal(window.runner.finished, timeout=RUN_TIMEOUT_MS,
                          check_params_cb=lambda s: s.job.purpose == "run"):
        assert window.run_all()
        lines = [window.imageset.list.item(r).text().split("\n")[-1] for r in range(2)]
        assert lines == [QUEUE_TEXTS["queued"]] * 2
    settle(qtbot, window)
    # the first image running while the second waits, then the second running
    assert seen[0] == [QUEUE_TEXTS["running"], QUEUE_TEXTS["queued"]]
    assert seen[1][1] == QUEUE_TEXTS["running"] and seen[1][0].startswith("✓")
    lines = [window.imageset.list.item(r).text().split("\n")[-1] for r in range(2)]
    assert all(line.startswith("✓ 3 ranks") for line in lines)
    assert window.queue == {}

