"""The parameters' undo and redo, named presets and a sidecar loaded into the panel.

A mixin of :class:`~kpca_denoise.gui.main_window.MainWindow`.  Every valid change of the
Parameters panel is a step of :class:`~kpca_denoise.gui.history.ParamsHistory` (Ctrl+Z,
Ctrl+Shift+Z); presets are kept in the window's settings under ``presets/NAME`` beside the
bundled ``default`` and ``fast``; File › Load parameters reads a sidecar or parameter file
with the command line's reader (``cli_params.read_params_file``: the trial settings left
out, as ``--params`` leaves them).
"""

from __future__ import annotations

import json

from PySide6.QtWidgets import QFileDialog, QInputDialog

from ..cli_params import read_params_file
from ..global_method import GLOBAL_PREIMAGE_ITERATIONS
from ..params import DenoiseParams
from .history import BUNDLED_PRESETS, ParamsHistory, preset_params

__all__ = ["ParamsTools"]

_GROUP = "presets"


class ParamsTools:
    """Undo/redo of the parameters, presets, parameters from a file (mixed into the window)."""

    def _init_params_tools(self) -> None:
        self.history = ParamsHistory()
        self._restoring_params = False
        self._record_params()

    def _record_params(self) -> None:
        """The panel changed: a step of the history when its parameters are valid."""
        if self._restoring_params:
            return
        try:
            p = self.params_panel.params()
        except ValueError:
            return
        self.history.record(p)
        self._update_history_actions()

    def _update_history_actions(self) -> None:
        if hasattr(self, "act_undo"):
            self.act_undo.setEnabled(self.history.can_undo())
            self.act_redo.setEnabled(self.history.can_redo())

    def _show_params(self, p: DenoiseParams) -> None:
        """Fill the panel with ``p`` without making it a step of the history."""
        self._restoring_params = True
        try:
            self.params_panel.set_params(p)
        finally:
            self._restoring_params = False
        self._update_history_actions()

    def undo_params(self) -> bool:
        """The parameters before the last change (Ctrl+Z); False when there is none."""
        return self._step_to(self.history.undo(), "undone")

    def redo_params(self) -> bool:
        """The change undone last again (Ctrl+Shift+Z); False when there is none."""
        return self._step_to(self.history.redo(), "redone")

    def _step_to(self, p: DenoiseParams | None, what: str) -> bool:
        if p is not None:
            self._show_params(p)
            self.statusBar().showMessage(f"parameters: {what}", 5000)
        return p is not None

    # -- presets ------------------------------------------------------------------------
    def preset_names(self) -> list[str]:
        """The bundled presets, then the user's in alphabetical order."""
        self.settings.beginGroup(_GROUP)
        try:
            mine = sorted(k for k in self.settings.childKeys() if k not in BUNDLED_PRESETS)
        finally:
            self.settings.endGroup()
        return [*BUNDLED_PRESETS, *mine]

    def preset(self, name: str) -> DenoiseParams | None:
        if name in BUNDLED_PRESETS:
            return BUNDLED_PRESETS[name]
        raw = self.settings.value(f"{_GROUP}/{name}")
        try:
            return DenoiseParams.from_dict(json.loads(str(raw))) if raw else None
        except (ValueError, TypeError) as exc:
            self.log(f"preset {name!r} cannot be read ({exc})", "warning")
            return None

    def save_preset(self, name: str | None = None) -> bool:
        """Keep the panel's parameters as preset ``name`` (asked for when None), the trial
        settings left out; the bundled names are not replaced."""
        if name is None:
            name, ok = QInputDialog.getText(self, "Save preset", "Name of the preset:")
            if not ok:
                return False
        name = name.strip().replace("/", "-")
        if not name:
            return False
        if name in BUNDLED_PRESETS:
            self.report_error(f"'{name}' is a bundled preset: choose another name")
            return False
        try:
            p = preset_params(self.params_panel.params())
        except ValueError as exc:
            self.report_error(f"Cannot save the preset: {exc}")
            return False
        self.settings.setValue(f"{_GROUP}/{name}", json.dumps(p.to_dict()))
        self.settings.sync()
        self._rebuild_presets_menu()
        self.log(f"preset {name!r} saved")
        return True

    def load_preset(self, name: str) -> bool:
        """Put preset ``name`` in the panel (one step of the history)."""
        p = self.preset(name)
        if p is None:
            self.report_error(f"No preset named {name!r}")
            return False
        self.params_panel.set_params(p)
        self.log(f"parameters of the preset {name!r}")
        return True

    def delete_preset(self, name: str) -> None:
        if name not in BUNDLED_PRESETS:
            self.settings.remove(f"{_GROUP}/{name}")
            self._rebuild_presets_menu()

    def _rebuild_presets_menu(self) -> None:
        menu = getattr(self, "presets_menu", None)
        if menu is None:
            return
        menu.clear()
        for name in self.preset_names():
            a = menu.addAction(name)
            a.setToolTip(("bundled: " if name in BUNDLED_PRESETS else "") + f"the parameters of {name!r}")
            a.triggered.connect(lambda _=False, name=name: self.load_preset(name))
        menu.addSeparator()
        menu.addAction(self.act_save_preset)
        mine = [n for n in self.preset_names() if n not in BUNDLED_PRESETS]
        if mine:
            delete = menu.addMenu("Delete preset")
            for name in mine:
                delete.addAction(name).triggered.connect(
                    lambda _=False, name=name: self.delete_preset(name))

    # -- a sidecar ----------------------------------------------------------------------
    def load_params_file(self, path=None) -> bool:
        """Fill the panel from a sidecar or parameter file (File › Load parameters), read
        as ``kpca-denoise denoise --params`` reads it: its trial settings left out (the log
        says which), and anything the panel cannot show named."""
        if path is None:
            path, _ = QFileDialog.getOpenFileName(self, "Load parameters", self.last_dir,
                                                  "Parameters (*.json);;All files (*)")
            if not path:
                return False
        try:
            p, trial = read_params_file(path)
        except ValueError as exc:
            self.report_error(str(exc))
            return False
        self.params_panel.set_params(p)
        note = f"parameters from {path}"
        if trial:
            note += " (trial settings left out: " + ", ".join(
                f"{k} {v}" for k, v in trial.items()) + ")"
        try:
            shown = self.params_panel.params()
        except ValueError:
            shown = None
        if p.method == "global" and p.preimage_iterations is None:  # the method's default, shown
            p = p.replace(preimage_iterations=GLOBAL_PREIMAGE_ITERATIONS)
        if shown is not None and shown != p:
            ours, theirs = shown.to_dict(), p.to_dict()
            left = sorted(k for k in theirs if ours.get(k) != theirs.get(k))
            note += "; the panel cannot show: " + ", ".join(left)
            self.report_info(note, banner=True)
        self.log(note)
        return True
