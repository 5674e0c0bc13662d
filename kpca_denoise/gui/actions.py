"""The window's commands: actions with their keys, the toolbar, the menus, Help and About.

A mixin of :class:`~kpca_denoise.gui.main_window.MainWindow`.  Each action
calls one method of the window; :meth:`WindowActions._update_actions`
enables them for the images loaded and whether a run is going on.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QToolBar

from .panels import AboutDialog, HelpDialog, help_html
from .views import LOUPE_PIXELS, LOUPE_ZOOM

__all__ = ["WindowActions"]


class _EscAfterMenu(QObject):
    """A menu closed with Esc leaves the menu bar holding the keyboard (its titles
    navigable), so the next Esc only let go of it and the run went on: that Esc
    cancels too, as it does everywhere else in the window."""

    def __init__(self, cancel: QAction, parent: QObject) -> None:
        super().__init__(parent)
        self.cancel = cancel

    def eventFilter(self, obj, event) -> bool:  # noqa: N802
        if (event.type() == QEvent.Type.KeyPress and event.key() == Qt.Key.Key_Escape
                and self.cancel.isEnabled()):
            QTimer.singleShot(0, self.cancel.trigger)
        return False  # the menu bar lets go of the keyboard as usual


class WindowActions:
    """Actions, toolbar, menus and the Help/About dialogs (mixed into the window)."""

    def _act(self, text: str, slot, shortcut=None, tip: str = "") -> QAction:
        """An action of the window: its keys work even when the toolbar is hidden."""
        a = QAction(text, self)
        if shortcut is not None:
            seqs = shortcut if isinstance(shortcut, list) else [shortcut]
            a.setShortcuts([QKeySequence(s) for s in seqs])
        a.setToolTip(f"{tip or text} ({a.shortcut().toString()})" if shortcut else (tip or text))
        a.setStatusTip(tip or text)
        a.triggered.connect(lambda _=False: slot())
        self.addAction(a)  # shortcuts work even when the toolbar is hidden
        return a

    def _build_actions(self) -> None:
        self._create_actions()
        self._build_toolbar()
        self._build_menus()

    def _create_actions(self) -> None:
        self.act_open = self._act("Open…", self.open_files_dialog, QKeySequence.StandardKey.Open,
                                  "Open image files or patch sets")
        self.act_folder = self._act("Open folder…", self.open_folder_dialog, "Ctrl+Shift+O",
                                    "Open every supported file in a folder")
        self.act_run = self._act("Run", self.run_current, ["Ctrl+R", "F5"],
                                 "Denoise the current image at the missing ranks")
        self.act_run_all = self._act("Run all", self.run_all, "Ctrl+Shift+R",
                                     "Denoise every image of the set, each with its own model")
        self.act_set_fit = self._act("Set fit", self.run_set_fit, "Ctrl+Alt+R",
                                     "One 'global' model per kind of image (same channels; patch sets "
                                     "of one size), as the command line fits a folder; kept beside "
                                     "each image's own results")
        self.act_cancel = self._act("Cancel", self.cancel_run, "Esc", "Stop the run; earlier results are kept")
        self.act_preview = self._act("Preview", self.toggle_preview, "P",
                                     "Denoise a region (the rectangle on the input, first the part "
                                     "in view; Shift + drag on a view draws another) at every rank: "
                                     "the full run's pixels there, in seconds")
        self.act_preview.setCheckable(True)
        self.act_undo = self._act("Undo parameter change", self.undo_params, "Ctrl+Z",
                                  "The parameters before the last change")
        self.act_redo = self._act("Redo parameter change", self.redo_params,
                                  ["Ctrl+Shift+Z", "Ctrl+Y"], "The parameter change undone last")
        self.act_save_preset = self._act("Save preset…", self.save_preset, None,
                                         "Keep the parameters under a name (the trial's added "
                                         "noise left out)")
        self.act_load_params = self._act("Load parameters…", self.load_params_file, None,
                                         "The parameters of a sidecar (an export's .json), as "
                                         "kpca-denoise denoise --params reads them")
        self.act_export = self._act("Export…", self.export_current, "Ctrl+E",
                                    "Write the selected rank of the current image to a folder")
        self.act_export_set = self._act("Export set…", self.export_set, "Ctrl+Shift+E",
                                        "Write the selected rank of every image to a folder")
        self.act_sheet = self._act("Comparison sheet…", self.export_sheet, "Ctrl+Shift+S",
                                   "Save the ranks side by side as a PNG")
        self.act_next = self._act("Next image", self.next_image, ["PgDown", "]"], "Next image")
        self.act_prev = self._act("Previous image", self.previous_image, ["PgUp", "["], "Previous image")
        self.act_remove = self._act("Remove image", lambda: self.remove_image(self.current_index()),
                                    QKeySequence.StandardKey.Delete, "Remove the image from the set")
        self.act_split = self._act("A / B split", self.toggle_split, "S",
                                   "Switch between the rank grid and the A/B split (any two of the "
                                   "input, the reference and the ranks)")
        self.act_single = self._act("Single view", self.toggle_single, "V",
                                    "One view as large as the window allows (the selected rank), the "
                                    "input and the other ranks as thumbnails under it; again: the grid")
        self.act_loupe = self._act("Loupe", self.toggle_loupe, "L",
                                   f"A magnifier beside the cursor over any view: {LOUPE_PIXELS} "
                                   f"pixels a side at {LOUPE_ZOOM * 100} %")
        self.act_loupe.setCheckable(True)
        self.act_reset_zoom = self._act("Fit", self.auto_range, "Ctrl+0", "Fit the image in the view")
        self.act_one_to_one = self._act("Actual pixels (100 %)", self.zoom_one_to_one, "Ctrl+1",
                                        "One image pixel per screen pixel")
        self.act_zoom = {pct: self._act(f"Zoom {pct} %", lambda pct=pct: self.zoom_percent(pct), key,
                                        f"{pct / 100:g} screen pixels per image pixel")
                         for pct, key in ((50, "Ctrl+5"), (200, "Ctrl+2"), (400, "Ctrl+4"))}
        self.act_zoom_in = self._act("Zoom in", lambda: self.zoom_step(1), ["Ctrl++", "Ctrl+="],
                                     "The next zoom step: 50, 100, 200, 400 %")
        self.act_zoom_out = self._act("Zoom out", lambda: self.zoom_step(-1), "Ctrl+-",
                                      "The zoom step before (below 50 %: fit)")
        self.act_roi = self._act("ROI statistics", self.toggle_roi, "R",
                                 "A rectangle on the input; mean and std inside it under every view")
        self.act_roi.setCheckable(True)
        self.act_reset_layout = self._act("Reset layout", self.reset_layout, None,
                                          "Every panel back where it starts, at its first size")
        self.act_help = self._act("Help", self.show_help, QKeySequence.StandardKey.HelpContents,
                                  "Keys, methods, where the documentation is")
        self.act_about = self._act("About", self.show_about, None, "Method, references, licence")
        self.act_quit = self._act("Quit", self.close, QKeySequence.StandardKey.Quit, "Quit")
        for k in range(1, 10):
            self._act(f"Select rank {k}", lambda k=k: self.select_rank_index(k - 1), str(k))

    def _build_toolbar(self) -> None:
        tb = QToolBar("Main", self)
        tb.setObjectName("toolbar_main")
        tb.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        for a in (self.act_open, self.act_folder, None, self.act_preview, self.act_run, self.act_run_all,
                  self.act_cancel,
                  None, self.act_export, self.act_export_set, self.act_sheet, None, self.act_single,
                  self.act_split, None, self.act_help):
            if a is None:
                tb.addSeparator()
            else:
                tb.addAction(a)
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, tb)

    def _build_menus(self) -> None:
        m = self.menuBar()
        f = m.addMenu("&File")
        for a in (self.act_open, self.act_folder, self.act_remove, None, self.act_load_params,
                  None, self.act_export,
                  self.act_export_set, self.act_sheet):
            f.addSeparator() if a is None else f.addAction(a)
        self._build_format_menu(f.addMenu("Export &format"))
        f.addSeparator()
        f.addAction(self.act_quit)
        pm = m.addMenu("&Parameters")
        pm.addAction(self.act_undo)
        pm.addAction(self.act_redo)
        pm.addSeparator()
        self.presets_menu = pm.addMenu("Presets")
        self._rebuild_presets_menu()
        pm.addAction(self.act_load_params)
        r = m.addMenu("&Run")
        for a in (self.act_preview, self.act_run, self.act_run_all, self.act_set_fit, self.act_cancel):
            r.addAction(a)
        vw = m.addMenu("&View")
        for a in (self.act_next, self.act_prev, self.act_single, self.act_split, self.act_roi):
            vw.addAction(a)
        z = vw.addMenu("&Zoom")
        for a in (self.act_reset_zoom, self.act_zoom[50], self.act_one_to_one, self.act_zoom[200],
                  self.act_zoom[400], None, self.act_zoom_in, self.act_zoom_out, None,
                  self.act_loupe):
            z.addSeparator() if a is None else z.addAction(a)
        vw.addSeparator()
        for d in (self.dock_images, self.dock_params, self.dock_spectrum, self.dock_progress):
            vw.addAction(d.toggleViewAction())
        vw.addAction(self.act_reset_layout)
        self.dock_progress.toggleViewAction().setShortcut(QKeySequence("Ctrl+L"))
        h = m.addMenu("&Help")
        h.addAction(self.act_help)
        h.addAction(self.act_about)
        self._menu_esc = _EscAfterMenu(self.act_cancel, m)
        m.installEventFilter(self._menu_esc)

    def _build_format_menu(self, menu) -> None:
        """The format exports are written in: the source's, or one for every image."""
        group = QActionGroup(self)
        self.export_format_actions = []
        for key, text in (("", "As the source (JPEG stays JPEG)"), ("png", "PNG (lossless)"),
                          ("tiff", "TIFF (lossless; 16-bit, float, stacks)"), ("jpeg", "JPEG (quality 95)"),
                          ("bmp", "BMP")):
            a = QAction(text, self)
            a.setCheckable(True)
            a.setData(key)
            a.setChecked(key == "")
            a.triggered.connect(lambda _=False, key=key: self.set_export_format(key or None))
            group.addAction(a)
            menu.addAction(a)
            self.export_format_actions.append(a)

    def _update_actions(self) -> None:
        """Enable what can be done now: something loaded, no run going on."""
        running = self.runner.busy()
        has = bool(self.entries)
        self.act_run.setEnabled(has and not running)
        self.act_run_all.setEnabled(has and not running)
        self.act_set_fit.setEnabled(len(self.entries) > 1 and not running)
        self.act_cancel.setEnabled(running)
        self.progress.cancel_button.setEnabled(running)
        for a in (self.act_export, self.act_export_set, self.act_sheet):
            a.setEnabled(has and not running)
        self.act_remove.setEnabled(has)
        self.imageset.remove_button.setEnabled(has)

    def show_help(self) -> HelpDialog:
        """The help window: every key, the methods, where the documentation is."""
        if self._help is None:
            keys = [(a.text(), a.shortcut().toString()) for a in self.actions()
                    if not a.text().startswith("Select rank")]
            keys.append(("Select the k-th compared rank", "1 … 9"))
            readme = Path(__file__).resolve().parents[2] / "README.md"
            self._help = HelpDialog(help_html(keys, str(readme)), self)
        self._help.show()
        self._help.raise_()
        return self._help

    def show_about(self) -> AboutDialog:
        if self._about is None:
            self._about = AboutDialog(self)
        self._about.show()
        self._about.raise_()
        return self._about
