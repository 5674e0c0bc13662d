"""The main window: image set, comparison views, parameters, spectrum, progress, log.

The window is glue.  It reads files through :mod:`kpca_denoise.io`, builds a
:class:`~kpca_denoise.params.DenoiseParams` from the form, asks the
:class:`~kpca_denoise.gui.worker.RunController` for the ranks that are not in
the :class:`~kpca_denoise.gui.worker.ResultCache` yet, and draws what comes
back.  Errors (unreadable files, failed runs, exports that cannot be written)
go to the inline banner, the status bar and the log; nothing here opens a
blocking dialog except the file choosers the user asked for.
"""

from __future__ import annotations

import gc
import json
import time
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QByteArray, QRect, QSettings, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QComboBox,
    QDockWidget,
    QFrame,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMessageBox,
    QScrollArea,
    QSizePolicy,
    QSplitter,
    QTabWidget,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from .. import __version__
from ..io import (
    SUPPORTED_SUFFIXES,
    InputError,
    collect_inputs,
    jsonable,
    rank_tag,
    read_item,
    read_items,
)
from ..params import DenoiseParams
from ..pipeline import noise_model_text
from .export import ExportActions
from .imageset import ImageSetPanel, display_levels
from .model import (
    FitRecord,
    ImageEntry,
    ResultCache,
    Session,
    describe_params,
    PATCH_SET_RANKS,
    auto_neighbours,
    converged_with,
    entries_for,
    param_differences,
)
from .panels import AboutDialog, HelpDialog, LogView, MessageBanner, ProgressPanel, help_html
from .params_panel import ParamsPanel
from .spectrum import SpectrumPlot
from .views import (
    ComparisonGrid,
    SplitView,
    ZoomLink,
    format_metrics,
    format_value,
    one_to_one,
    region_stats,
)
from .worker import (
    Job,
    RunController,
    RunSummary,
    compute_metrics,
    compute_server,
    rank_label,
    rank_sort_key,
)

__all__ = ["MainWindow", "SETTINGS_ORG", "SETTINGS_APP", "rank_tag", "jsonable"]

SETTINGS_ORG = "kpca-denoise"
SETTINGS_APP = "kpca-denoise"
_FILE_FILTER = "Images and patch sets (" + " ".join(f"*{s}" for s in sorted(SUPPORTED_SUFFIXES)) + ")"


def _residual(e: ImageEntry, noisy: np.ndarray, out: np.ndarray) -> np.ndarray:
    """noisy - output as one float32 map (colour: the mean over R, G, B; alpha untouched),
    built channel by channel so a 12 Mpx photo needs no float64 copies of its planes."""
    noisy, out = np.asarray(noisy), np.asarray(out)
    if noisy.ndim == 3 and not e.is_patchset:
        chans = range(3 if noisy.shape[2] >= 3 else 1)
        r = np.zeros(noisy.shape[:2], np.float32)
        for c in chans:
            r += noisy[..., c].astype(np.float32)
            r -= out[..., c].astype(np.float32)
        r /= len(chans)
    else:
        r = noisy.astype(np.float32) - out.astype(np.float32)
    return e.display(r)


def rank_metrics_text(rec: FitRecord, rank, prev, sigma) -> str:
    """The line under a rank: PSNR/SSIM or remaining noise, the effective rank (grouped:
    mean kept components per group) and whether it converged with the rank before it."""
    rr = rec.ranks[rank]
    parts = [format_metrics(rr.metrics)]
    eff = rec.effective_rank(rank)
    if eff is not None:
        parts.append(f"eff. rank {eff:.1f}")
    conv = converged_with(prev, rr, sigma)
    if conv:
        parts.append(f"≈ previous rank {conv}")
    return " · ".join(p for p in parts if p)


def _shared_model_text(resolved: dict, n_set: int) -> str:
    """Which images of a set fitted together share this image's model.

    The pipeline fits one model per kind of item (grey, colour, patch sets of
    one size), as the command line does for a folder.
    """
    n = len(resolved.get("items") or ())
    if n > 1:
        return f"one model for {n} of the {n_set} images" if n < n_set else f"one model for {n} images"
    return f"own model (only one of its kind in the set of {n_set})"


class MainWindow(ExportActions, QMainWindow):
    """The kpca-denoise desktop window."""

    viewsRefreshed = Signal()

    def __init__(self, settings: QSettings | None = None, *, persist: bool = True) -> None:
        super().__init__()
        self.setWindowTitle(f"kpca-denoise {__version__}")
        self.setAcceptDrops(True)
        self.settings = settings if settings is not None else QSettings(
            QSettings.Format.IniFormat, QSettings.Scope.UserScope, SETTINGS_ORG, SETTINGS_APP)
        self.persist = persist
        self.session = Session()
        self.runner = RunController(self)
        self._levels: dict[str, tuple[float, float]] = {}
        self._pending_export: tuple | None = None
        self._running_keys: set[str] = set()
        self._current_job_method = "global"
        self._last_params: DenoiseParams | None = None
        self._about: AboutDialog | None = None
        self._help: HelpDialog | None = None
        self._refresh_pending = False
        self.fitted = True  # views fit the image until the user zooms or pans
        self._user_view: tuple | None = None  # (centre x, centre y, image pixels per screen pixel)
        self._fit_pending = False
        self.last_dir = str(self.settings.value("last_dir", str(Path.home())))
        self._build_ui()
        self._build_actions()
        self._connect()
        self._restore_settings()
        self._update_actions()
        self.refresh_views()
        # start the compute process now: its imports and numba caches load while the user picks files
        compute_server()
        # the widgets, Qt wrappers and modules above live as long as the window; a full
        # cyclic-GC pass over them took 100+ ms in the GUI thread mid-run, so exempt them
        gc.collect()
        gc.freeze()

    # the state lives in the Qt-free session (model.py); these read it
    @property
    def entries(self) -> list[ImageEntry]:
        return self.session.entries

    @property
    def cache(self) -> ResultCache:
        return self.session.cache

    @property
    def selected_rank(self):
        return self.session.selected_rank

    @selected_rank.setter
    def selected_rank(self, rank) -> None:
        self.session.selected_rank = rank

    # ------------------------------------------------------------------ UI

    def _add_dock(self, title: str, name: str, widget, area) -> QDockWidget:
        """A movable, floatable, closable dock holding ``widget`` (View menu brings it back)."""
        dock = QDockWidget(title, self)
        dock.setObjectName(name)
        dock.setWidget(widget)
        dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable
                         | QDockWidget.DockWidgetFeature.DockWidgetFloatable
                         | QDockWidget.DockWidgetFeature.DockWidgetClosable)
        self.addDockWidget(area, dock)
        return dock

    def _build_ui(self) -> None:
        # central: banner, view controls, grid / split tabs
        central = QWidget(self)
        v = QVBoxLayout(central)
        v.setContentsMargins(4, 4, 4, 4)
        v.setSpacing(4)
        self.banner = MessageBanner(central)
        v.addWidget(self.banner)
        bar = QHBoxLayout()
        self.info = QLabel("Open images (Ctrl+O), a folder (Ctrl+Shift+O), or drop files here.", central)
        self.info.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # a long line is cut (full text in the tooltip), it must not widen the window
        self.info.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        bar.addWidget(self.info, 1)
        bar.addWidget(QLabel("selected rank:", central))
        self.rank_combo = QComboBox(central)
        self.rank_combo.setToolTip("rank shown in the split view and exported (keys 1–9, or click "
                                   "a view or the spectrum)")
        self.rank_combo.setMinimumContentsLength(5)
        bar.addWidget(self.rank_combo)
        self.residuals_box = QCheckBox("residuals", central)
        self.residuals_box.setChecked(True)
        self.residuals_box.setToolTip("show noisy − denoised under each rank")
        bar.addWidget(self.residuals_box)
        self.set_fit_box = QCheckBox("set fit", central)
        self.set_fit_box.setToolTip("show (and export) the results of the set fit, one model for the "
                                    "images of one kind (Run ▸ Set fit); unticked: each image's own fit")
        bar.addWidget(self.set_fit_box)
        v.addLayout(bar)
        self.mismatch = QLabel("", central)
        self.mismatch.setWordWrap(True)
        self.mismatch.setStyleSheet("background:#fff4e5; color:#663c00; border:1px solid #ffd8a8; "
                                    "border-radius:4px; padding:3px;")
        self.mismatch.hide()
        v.addWidget(self.mismatch)
        self.tabs = QTabWidget(central)
        self.grid = ComparisonGrid()
        self.split = SplitView()
        # the grid wraps its cells onto more rows when narrow (never widens the window);
        # on a very short screen it scrolls vertically rather than squash the views
        self.grid_scroll = QScrollArea(central)
        self.grid_scroll.setWidgetResizable(True)
        self.grid_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.grid_scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.grid_scroll.setWidget(self.grid)
        self.tabs.addTab(self.grid_scroll, "Compare ranks")
        self.tabs.addTab(self.split, "Before / after")
        # the grid's panels are linked (setXLink/setYLink); the split view is a
        # wider widget on another tab, where copying ranges would fight the
        # aspect lock, so it follows the grid's centre and scale live (ZoomLink)
        # and never auto-ranges by itself (that would pull the grid along)
        self.split.vb.disableAutoRange()
        self.zoom_link = ZoomLink(self.grid.master, self.split.vb, self)
        self._tab = 0
        # contrast: one histogram with black/white points for every view (napari/Fiji style)
        self.hist = pg.HistogramLUTWidget(central)
        self.hist.setMinimumWidth(90)
        self.hist.setMaximumWidth(100)
        self.hist.item.setImageItem(self.grid.input_panel.image)
        self.hist.setToolTip("Drag the black and white points: the contrast of every view follows")
        row = QHBoxLayout()
        row.setSpacing(2)
        row.addWidget(self.tabs, 1)
        row.addWidget(self.hist)
        v.addLayout(row, 1)
        self._syncing_levels = False
        self.roi: pg.RectROI | None = None
        self.setCentralWidget(central)

        # left: the image set
        self.imageset = ImageSetPanel()
        self.dock_images = self._add_dock("Images", "dock_images", self.imageset,
                                          Qt.DockWidgetArea.LeftDockWidgetArea)

        # right: parameters
        self.params_panel = ParamsPanel()
        self.dock_params = self._add_dock("Parameters", "dock_params", self.params_panel,
                                          Qt.DockWidgetArea.RightDockWidgetArea)

        # bottom: spectrum | progress + log, two docks: either can be closed (View menu) or
        # tabbed, so the images get the space
        self.spectrum = SpectrumPlot()
        self.progress = ProgressPanel()
        self.log_view = LogView()
        right = QSplitter(Qt.Orientation.Vertical)
        right.addWidget(self.progress)
        right.addWidget(self.log_view)
        right.setStretchFactor(0, 0)
        right.setStretchFactor(1, 1)
        self.progress_splitter = right
        self.dock_spectrum = self._add_dock("Eigen-spectrum", "dock_spectrum", self.spectrum,
                                            Qt.DockWidgetArea.BottomDockWidgetArea)
        self.dock_progress = self._add_dock("Progress · log", "dock_progress", right,
                                            Qt.DockWidgetArea.BottomDockWidgetArea)
        self.splitDockWidget(self.dock_spectrum, self.dock_progress, Qt.Orientation.Horizontal)
        self.resizeDocks([self.dock_spectrum], [200], Qt.Orientation.Vertical)
        self.resizeDocks([self.dock_images, self.dock_params], [180, 290], Qt.Orientation.Horizontal)
        self.resizeDocks([self.dock_spectrum, self.dock_progress], [560, 420], Qt.Orientation.Horizontal)
        self.cursor_label = QLabel("", self)
        self.cursor_label.setToolTip("pixel under the mouse: column x, row y and value, in the "
                                     "source's units")
        self.statusBar().addPermanentWidget(self.cursor_label)
        self.statusBar().showMessage("ready")

    def _act(self, text: str, slot, shortcut=None, tip: str = "") -> QAction:
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
        self.act_split = self._act("Toggle split view", self.toggle_split, "S",
                                   "Switch between the rank grid and the before/after split")
        self.act_reset_zoom = self._act("Reset zoom", self.auto_range, "Ctrl+0", "Fit the image")
        self.act_one_to_one = self._act("Actual pixels (1:1)", self.zoom_one_to_one, "Ctrl+1",
                                        "One image pixel per screen pixel")
        self.act_roi = self._act("ROI statistics", self.toggle_roi, "R",
                                 "A rectangle on the input; mean and std inside it under every view")
        self.act_roi.setCheckable(True)
        self.act_help = self._act("Help", self.show_help, QKeySequence.StandardKey.HelpContents,
                                  "Keys, methods, where the documentation is")
        self.act_about = self._act("About", self.show_about, None, "Method, references, licence")
        self.act_quit = self._act("Quit", self.close, QKeySequence.StandardKey.Quit, "Quit")
        for k in range(1, 10):
            self._act(f"Select rank {k}", lambda k=k: self.select_rank_index(k - 1), str(k))

        tb = QToolBar("Main", self)
        tb.setObjectName("toolbar_main")
        tb.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        for a in (self.act_open, self.act_folder, None, self.act_run, self.act_run_all, self.act_cancel,
                  None, self.act_export, self.act_export_set, self.act_sheet, None, self.act_help):
            if a is None:
                tb.addSeparator()
            else:
                tb.addAction(a)
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, tb)

        m = self.menuBar()
        f = m.addMenu("&File")
        for a in (self.act_open, self.act_folder, self.act_remove, None, self.act_export,
                  self.act_export_set, self.act_sheet, None, self.act_quit):
            f.addSeparator() if a is None else f.addAction(a)
        r = m.addMenu("&Run")
        for a in (self.act_run, self.act_run_all, self.act_set_fit, self.act_cancel):
            r.addAction(a)
        vw = m.addMenu("&View")
        for a in (self.act_next, self.act_prev, self.act_split, self.act_reset_zoom, self.act_one_to_one,
                  self.act_roi):
            vw.addAction(a)
        vw.addSeparator()
        for d in (self.dock_images, self.dock_params, self.dock_spectrum, self.dock_progress):
            vw.addAction(d.toggleViewAction())
        self.dock_progress.toggleViewAction().setShortcut(QKeySequence("Ctrl+L"))
        h = m.addMenu("&Help")
        h.addAction(self.act_help)
        h.addAction(self.act_about)

    def _connect(self) -> None:
        self.imageset.currentChanged.connect(self._on_current_changed)
        self.imageset.pathsDropped.connect(self.load_paths)
        self.imageset.openFilesRequested.connect(self.open_files_dialog)
        self.imageset.openFolderRequested.connect(self.open_folder_dialog)
        self.imageset.removeRequested.connect(self.remove_image)
        self.params_panel.changed.connect(self._on_params_changed)
        self.params_panel.referenceRequested.connect(self.choose_reference)
        self.params_panel.referenceCleared.connect(lambda: self.set_reference(None))
        self.params_panel.suggestRequested.connect(self.suggest_ranks)
        self.grid.rankClicked.connect(self.select_rank)
        self.spectrum.rankClicked.connect(self._on_spectrum_click)
        self.rank_combo.activated.connect(lambda i: self.select_rank(self.rank_combo.itemData(i)))
        self.residuals_box.toggled.connect(self.grid.set_show_residuals)
        self.residuals_box.toggled.connect(lambda _on: self.keep_fit())
        self.grid.userZoomed.connect(self._on_user_zoom)
        self.grid.hovered.connect(self._on_hover)
        self.split.panel.hovered.connect(lambda info: self._on_hover(self.split.panel, info))
        self.hist.item.sigLevelsChanged.connect(self._on_levels_changed)
        self.split.vb.sigRangeChangedManually.connect(lambda *_: self._on_user_zoom())
        for vb in (self.grid.master, self.split.vb):
            vb.sigResized.connect(lambda *_: self.keep_fit())
        self.set_fit_box.toggled.connect(self._on_set_fit_toggled)
        self.mismatch.linkActivated.connect(lambda _l: self.use_shown_params())
        self.progress.cancelRequested.connect(self.cancel_run)
        self.runner.started.connect(self._on_run_started)
        self.runner.itemStarted.connect(self.progress.item_started)
        self.runner.progress.connect(self.progress.update_stage)
        self.runner.progress.connect(self._on_stage)
        self.runner.spectrum.connect(self._on_live_spectrum)
        self.runner.itemDone.connect(self._on_item_done)
        self.runner.finished.connect(self._on_run_finished)
        self.tabs.currentChanged.connect(self._on_tab_changed)
        # rank edits that only need ranks missing from a fitted image run by themselves,
        # after a short pause so typing "16, 32" does not start two runs
        self._auto_timer = QTimer(self)
        self._auto_timer.setSingleShot(True)
        self._auto_timer.setInterval(400)
        self._auto_timer.timeout.connect(self._auto_run_missing)

    # ------------------------------------------------------------- settings
    def _restore_settings(self) -> None:
        # read everything first: restoring the parameters saves the settings (params changed),
        # which would overwrite the saved geometry with this not yet placed window's
        geo = self.settings.value("geometry")
        state = self.settings.value("window_state")
        raw = self.settings.value("params")
        if raw:
            try:
                self.params_panel.set_params(DenoiseParams.from_dict(json.loads(str(raw))))
            except (ValueError, TypeError) as exc:
                self.log(f"ignored the saved parameters ({exc})", "warning")
        self._geometry_restored = isinstance(geo, QByteArray) and self.restoreGeometry(geo)
        self._available: QRect | None = None
        self._placed = False
        self._state_restored = isinstance(state, QByteArray) and self.restoreState(state)
        if not self._geometry_restored:  # a restored geometry is applied when shown, then kept on screen
            self.place_on_screen()
        self._arrange_docks_for_height()
        res = self.settings.value("show_residuals")
        if res is not None:
            self.residuals_box.setChecked(str(res).lower() in ("true", "1"))

    def place_on_screen(self, available: QRect | None = None) -> None:
        """Keep the window inside the screen's available area: a saved geometry is kept
        (moved and shrunk into the area if it no longer fits), else the window takes 96 % of
        it, centred."""
        if available is not None:
            self._available = available  # kept: placed again once shown (the frame is known then)
            self._arrange_docks_for_height()
        available = available or self._available
        if available is None:
            screen = self.screen() or QGuiApplication.primaryScreen()
            if screen is None:
                return
            available = screen.availableGeometry()
        frame = self.frameGeometry()
        extra_w = max(0, frame.width() - self.width())
        extra_h = max(0, frame.height() - self.height())
        if self._geometry_restored:
            w, h = self.width(), self.height()
        else:  # most of the screen: the images are what the window is for
            w, h = int(available.width() * 0.96), int(available.height() * 0.96)
        w = min(w, available.width() - extra_w)
        h = min(h, available.height() - extra_h)
        self.resize(w, h)
        x, y = (self.x(), self.y()) if self._geometry_restored else (
            available.x() + (available.width() - w - extra_w) // 2,
            available.y() + (available.height() - h - extra_h) // 2)
        x = min(max(x, available.x()), available.right() + 1 - w - extra_w)
        y = min(max(y, available.y()), available.bottom() + 1 - h - extra_h)
        self.move(x, y)

    def _arrange_docks_for_height(self) -> None:
        """On a short screen (no saved layout) the spectrum and progress/log docks share one
        tabbed area, so the images keep most of the height."""
        if self._state_restored:
            return
        screen = self.screen() or QGuiApplication.primaryScreen()
        avail = self._available or (screen.availableGeometry() if screen is not None else None)
        if avail is not None and avail.height() < 900:
            self.tabifyDockWidget(self.dock_spectrum, self.dock_progress)
            self.dock_progress.raise_()
            self.resizeDocks([self.dock_spectrum], [185], Qt.Orientation.Vertical)
        elif self.tabifiedDockWidgets(self.dock_spectrum):  # a taller screen: side by side again
            # (splitDockWidget on a tabbed dock would only add another tab)
            self.removeDockWidget(self.dock_progress)
            self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.dock_progress)
            self.splitDockWidget(self.dock_spectrum, self.dock_progress, Qt.Orientation.Horizontal)
            self.dock_progress.show()

    def save_settings(self) -> None:
        if not self.persist:
            return
        try:
            self.settings.setValue("params", json.dumps(self.params_panel.params().to_dict()))
        except ValueError:
            pass  # keep the last valid parameters
        self.settings.setValue("last_dir", self.last_dir)
        self.settings.setValue("geometry", self.saveGeometry())
        self.settings.setValue("window_state", self.saveState())
        self.settings.setValue("show_residuals", self.residuals_box.isChecked())
        self.settings.sync()

    # ------------------------------------------------------------- messages
    def log(self, text: str, level: str = "info") -> None:
        self.log_view.log(text, level)

    def report_error(self, text: str, details: list[str] | None = None) -> None:
        """Banner + status bar + log; never a modal dialog."""
        self.banner.show_message(text, "error")
        self.statusBar().showMessage(text.splitlines()[0], 15000)
        self.log(text, "error")
        for d in details or []:
            self.log(d, "error")

    def ask(self, title: str, text: str, choices: tuple[str, ...]) -> str | None:
        """A question with one button per choice; returns the choice, None when dismissed.
        (Tests replace this method; the window asks only before it discards or computes.)"""
        box = QMessageBox(QMessageBox.Icon.Question, title, text, parent=self)
        buttons = {box.addButton(c, QMessageBox.ButtonRole.RejectRole if c == "Cancel"
                                 else QMessageBox.ButtonRole.AcceptRole): c for c in choices}
        box.exec()
        return buttons.get(box.clickedButton())

    def confirm(self, title: str, text: str) -> bool:
        return self.ask(title, text, ("OK", "Cancel")) == "OK"

    def report_info(self, text: str, banner: bool = False) -> None:
        if banner:
            self.banner.show_message(text, "info")
        self.statusBar().showMessage(text, 10000)
        self.log(text)

    # ---------------------------------------------------------------- loading
    def open_files_dialog(self) -> None:
        files, _ = QFileDialog.getOpenFileNames(self, "Open images or patch sets", self.last_dir,
                                                _FILE_FILTER + ";;All files (*)")
        if files:
            self.load_paths(files)

    def open_folder_dialog(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Open a folder of images", self.last_dir)
        if folder:
            self.load_paths([folder])

    def load_paths(self, paths) -> int:
        """Load files and folders; bad ones are reported, the rest are kept. Returns how many loaded.

        A multi-page TIFF becomes one image per page (exported back as one stack)."""
        found, problems, skipped = collect_inputs(paths)
        args = [Path(p).absolute() for p in paths]

        def given_at(path) -> int:  # which argument named this file (or its folder)
            q = Path(path).absolute()
            return next((k for k, a in enumerate(args) if q == a or a in q.parents), len(args))

        errors = [(given_at(p), msg) for p, msg in problems]
        known = {e.path.resolve(): i for i, e in enumerate(self.entries)}
        fresh = [f for f in found if f.path.resolve() not in known]
        QApplication.setOverrideCursor(Qt.CursorShape.WaitCursor)
        try:
            items, bad = read_items(fresh)
        finally:
            QApplication.restoreOverrideCursor()
        errors.extend((given_at(p), msg) for p, msg in bad)
        # in the order given ("First:" named a missing file given after a broken one)
        errors = [msg for _, msg in sorted(errors, key=lambda e: e[0])]
        first_new = len(self.entries)
        new = [e for it in items for e in entries_for(it)]
        for e in new:
            self.session.add(e)
            self.imageset.add_entry(e)
            self.log(f"loaded {e.name} ({e.describe()}) from {e.path}")
        if skipped:
            self.log(f"skipped {len(skipped)} file{'s' if len(skipped) != 1 else ''} of an unsupported "
                     f"type ({', '.join(sorted(SUPPORTED_SUFFIXES))} are read): "
                     + ", ".join(str(f) for f in skipped), "warning")
        if paths:
            p0 = Path(paths[0])
            self.last_dir = str(p0 if p0.is_dir() else p0.parent)
        if errors:
            n = len(errors)
            if items:
                rest = f"the other {len(items)} are" if len(items) > 1 else "the other is"
                head = errors[0] if n == 1 else (f"{n} inputs could not be read; {rest} "
                                                 f"loaded. First: {errors[0]}")
            else:
                head = errors[0] if n == 1 else f"None of the {n} inputs could be read. First: {errors[0]}"
            self.report_error(head, errors if n > 1 else None)
        elif skipped and not items:
            self.report_error(f"Nothing loaded: {len(skipped)} file(s) of an unsupported type were "
                              f"skipped ({', '.join(f.name for f in skipped[:5])}); the log lists them.")
        if new:
            self.imageset.set_current(first_new)
            if not errors:  # an error message must stay visible, not be replaced
                extra = f"; skipped {len(skipped)} unsupported (see the log)" if skipped else ""
                self.statusBar().showMessage(f"loaded {len(new)} image{'s' if len(new) != 1 else ''}{extra}",
                                             8000)
        elif not errors and found:
            # everything was already loaded: show the first of them
            self.imageset.set_current(known.get(found[0].path.resolve(), self.current_index()))
        self._update_actions()
        return len(new)

    def remove_image(self, row: int) -> None:
        if not 0 <= row < len(self.entries):
            return
        e = self.entries[row]
        if self.session.has_results(e) and not self.confirm(
                "Remove image", f"Remove {e.name} from the set?  Its computed results are discarded."):
            return
        self.session.remove(row)
        self._levels.pop(e.key, None)
        self.imageset.remove_row(row)
        self.log(f"removed {e.name} from the set")
        if self.entries:
            self.imageset.set_current(min(row, len(self.entries) - 1))
        self._update_actions()
        self.refresh_views()

    def choose_reference(self) -> None:
        if self.current_entry() is None:
            self.report_error("Load an image first, then choose its clean reference.")
            return
        f, _ = QFileDialog.getOpenFileName(self, "Clean reference image", self.last_dir, _FILE_FILTER)
        if f:
            self.set_reference(f)

    def set_reference(self, path) -> bool:
        """Attach a clean reference to the current image (None clears it)."""
        e = self.current_entry()
        if e is None:
            return False
        if path is None:
            e.reference, e.reference_path = None, None
        else:
            try:
                ref = read_item(path)
            except InputError as exc:
                self.report_error(f"Reference not loaded: {exc}")
                return False
            if ref.array.shape != e.array.shape:
                self.report_error(f"Reference not loaded: {ref.path.name} is {ref.array.shape}, "
                                  f"{e.name} is {e.array.shape}; they must have the same size and channels.")
                return False
            e.reference, e.reference_path = ref.array, ref.path
            self.log(f"reference for {e.name}: {ref.path}")
        self.params_panel.set_reference_text(str(e.reference_path) if e.reference_path else None)
        # metrics of cached results now mean something else: recompute them
        for rec in self.cache.records_for(e.key):
            self._recompute_metrics(e, rec)
        self.refresh_views()
        return True

    def _clean_for(self, e: ImageEntry, params: DenoiseParams) -> np.ndarray | None:
        if e.reference is not None:
            return e.reference
        return e.array if params.add_noise else None

    def _recompute_metrics(self, e: ImageEntry, rec: FitRecord) -> None:
        clean = self._clean_for(e, rec.params)
        dtype = e.array.dtype
        if clean is not None:
            rec.noisy_metrics = compute_metrics(rec.noisy, clean, dtype, e.is_patchset)
        elif not e.is_patchset:
            rec.noisy_metrics = {"noise_sigma": rec.noise_sigma}
        for rr in rec.ranks.values():
            rr.metrics = compute_metrics(rr.output, clean, dtype, e.is_patchset)

    # ------------------------------------------------------------- navigation
    def current_index(self) -> int:
        return self.imageset.current()

    def current_entry(self) -> ImageEntry | None:
        i = self.current_index()
        return self.entries[i] if 0 <= i < len(self.entries) else None

    def next_image(self) -> None:
        if self.entries:
            self.imageset.set_current((self.current_index() + 1) % len(self.entries))

    def previous_image(self) -> None:
        if self.entries:
            self.imageset.set_current((self.current_index() - 1) % len(self.entries))

    def _on_current_changed(self, _row: int) -> None:
        e = self.current_entry()
        self.params_panel.set_reference_text(str(e.reference_path) if e and e.reference_path else None)
        self.cursor_label.setText("")  # the last image's values are not this one's
        self.refresh_views(reset_zoom=True)

    def _on_set_fit_toggled(self, on: bool) -> None:
        self.session.show_set_fit = on
        self.refresh_views()

    def toggle_split(self) -> None:
        self.tabs.setCurrentIndex(1 - self.tabs.currentIndex())

    def _on_tab_changed(self, i: int) -> None:
        src, dst = (self.grid.master, self.split.vb) if i == 1 else (self.split.vb, self.grid.master)
        if i == self._tab:
            return
        self._tab = i
        # the views follow each other live (ZoomLink); the view just shown has its
        # real size only now, so its scale is set again from the one left.  At
        # once, not deferred: a zoom made right after the switch must not be undone
        self.zoom_link.copy(src, dst)
        self.keep_fit()

    # ------------------------------------------------------------- viewer
    def _on_hover(self, panel, info) -> None:
        """Cursor readout: position and value under the mouse, and the input's value there."""
        if info is None:
            self.cursor_label.setText("")
            return
        c, r, val = info
        if panel is self.split.panel:  # both sides, the one under the cursor first
            self.cursor_label.setText(f"x {c}, y {r} · " + " · ".join(
                f"{lab}: {format_value(v)}" for lab, v in self.split.values_at(c, r)))
            return
        text = f"x {c}, y {r} · {panel.title.text()}: {format_value(val)}"
        inp = self.grid.input_panel
        if panel is not inp and inp.data is not None and inp.data.shape[:2] == panel.data.shape[:2]:
            text += f" · {inp.title.text()}: {format_value(inp.data[r, c])}"
        self.cursor_label.setText(text)

    def _image_panels(self):
        """The panels showing pixel values (the residuals keep their own symmetric scale)."""
        return [self.grid.input_panel, self.grid.ref_panel, *self.grid.rank_panels.values(),
                self.split.panel]

    def _on_levels_changed(self, *_a) -> None:
        """The histogram's black and white points apply to every view of the image."""
        if self._syncing_levels:
            return
        e = self.current_entry()
        lo, hi = self.hist.item.getLevels()
        if e is None or not hi > lo:
            return
        self._levels[e.key] = (float(lo), float(hi))
        for p in self._image_panels():
            if p.has_image():
                p.image.setLevels((lo, hi))
        self.split.levels = (lo, hi)

    def _sync_histogram(self, levels) -> None:
        self._syncing_levels = True
        try:
            self.hist.item.setLevels(*levels)
        finally:
            self._syncing_levels = False

    def zoom_one_to_one(self) -> None:
        """One image pixel per screen pixel in the visible view (kept until Ctrl+0)."""
        one_to_one(self._visible_vb())
        self._on_user_zoom()

    def toggle_roi(self) -> None:
        """Show or remove the ROI on the input view; its statistics appear under every view."""
        if self.roi is not None:
            self.grid.input_panel.vb.removeItem(self.roi)
            self.roi = None
            for p in self.grid.panels():
                p.set_roi_text("")
            self.act_roi.setChecked(False)
            return
        data = self.grid.input_panel.data
        h, w = data.shape[:2] if data is not None else (64, 64)
        self.roi = pg.RectROI([w / 4, h / 4], [max(2, w // 2), max(2, h // 2)], pen=pg.mkPen("#ffd84a", width=2))
        self.grid.input_panel.vb.addItem(self.roi)
        self.roi.sigRegionChanged.connect(self.update_roi_stats)
        self.act_roi.setChecked(True)
        self.update_roi_stats()

    def roi_box(self) -> tuple[int, int, int, int] | None:
        """The ROI as whole pixels ``(x0, y0, x1, y1)``."""
        if self.roi is None:
            return None
        (x, y), (w, h) = self.roi.pos(), self.roi.size()
        return int(round(x)), int(round(y)), int(round(x + w)), int(round(y + h))

    def update_roi_stats(self) -> None:
        box = self.roi_box()
        if box is None:
            return
        for p in self.grid.panels():
            p.set_roi_text(region_stats(p.data, *box) if p.has_image() else "")

    def _visible_vb(self):
        return self.split.vb if self.tabs.currentIndex() == 1 else self.grid.master

    def _on_user_zoom(self) -> None:
        """The user zoomed or panned: keep that centre and scale from now on, until Ctrl+0."""
        self.fitted = False
        vb = self._visible_vb()
        (x0, x1), (y0, y1) = vb.viewRange()
        upp = max((x1 - x0) / max(vb.width(), 1.0), (y1 - y0) / max(vb.height(), 1.0))
        self._user_view = ((x0 + x1) / 2, (y0 + y1) / 2, upp)

    def keep_fit(self) -> None:
        """After whatever changed the views' size or content: fit them again while they are
        fitted, else put back the user's centre and scale (a re-laid-out, linked view would
        otherwise show another region); once, at the next event-loop turn (after layout)."""
        if not self._fit_pending:
            self._fit_pending = True
            QTimer.singleShot(0, self._fit_now)

    def _fit_now(self) -> None:
        self._fit_pending = False
        if self.fitted:
            self._auto_range()
        elif self._user_view is not None:
            cx, cy, upp = self._user_view
            vb = self._visible_vb()
            w, h = vb.width(), vb.height()
            if min(w, h) >= 1:
                vb.setRange(xRange=(cx - upp * w / 2, cx + upp * w / 2),
                            yRange=(cy - upp * h / 2, cy + upp * h / 2), padding=0)

    def auto_range(self) -> None:
        """Fit the image in the visible view (Ctrl+0); the views stay fitted until the user zooms."""
        self.fitted = True
        self._auto_range()

    def _auto_range(self) -> None:
        if self.tabs.currentIndex() == 1:
            self.split.vb.autoRange(padding=0.0)
        else:
            self.grid.auto_range()

    # ---------------------------------------------------------------- params
    def current_params(self) -> DenoiseParams | None:
        try:
            p = self.params_panel.params()
        except ValueError:
            return self._last_params
        self._last_params = p
        return p

    def _on_params_changed(self) -> None:
        p = self.current_params()
        if p is None:
            return
        self.save_settings()
        self.refresh_views()
        e = self.current_entry()
        if e is not None and not self.runner.is_running():
            rkey = self.result_key(e, p)
            rec = self.cache.get(e.key, rkey)
            if rec is not None and self.cache.missing(e.key, rkey, p.ranks):
                self._auto_timer.start()

    def _auto_run_missing(self) -> None:
        e, p = self.current_entry(), self.current_params()
        if e is None or p is None or self.runner.is_running():
            return
        if self.cache.get(e.key, self.result_key(e, p)) is not None:
            self.log("computing only the ranks not computed yet for these parameters")
            self.run_current()

    # ------------------------------------------------------------- ranks
    def suggest_ranks(self) -> None:
        """The suggested ranks for the method and the current image (patch set or image)."""
        e = self.current_entry()
        self.params_panel.suggest_ranks(e is not None and e.is_patchset)

    def _add_auto_neighbours(self) -> None:
        """A patch set compared at 'auto' only: once the fit chose the rank, compare its
        neighbours too (computed at once, from the same model)."""
        e, p = self.current_entry(), self.current_params()
        if e is None or p is None or not e.is_patchset or tuple(p.ranks) != PATCH_SET_RANKS:
            return
        rec = self.session.record(e, p)
        auto = rec.resolved.get("auto_rank") if rec is not None else None
        if auto:
            ranks = auto_neighbours(int(auto), e.array.shape[0])
            self.log(f"{e.name}: auto chose {auto} components; comparing with "
                     f"{', '.join(rank_label(r) for r in ranks if r is not None)} as well")
            self.params_panel.set_ranks(ranks)

    def compared_ranks(self) -> tuple:
        """The panel's ranks in order of components kept, 'auto' where its rank falls
        (once known; 16 for images under 'global'; else last: no cap keeps the most)."""
        p = self.current_params()
        if not p:
            return ()
        e = self.current_entry()
        rec = self.session.record(e, p) if e is not None else None
        auto = rec.resolved.get("auto_rank") if rec is not None else None
        if auto is None and p.method == "global" and e is not None and not e.is_patchset:
            auto = 16
        return tuple(sorted(p.ranks, key=lambda r: (rank_sort_key(auto if r is None else r), r is None)))

    @staticmethod
    def rank_title(e: ImageEntry, rec: FitRecord | None, r) -> str:
        """A rank's title in the views and on the sheet; 'auto' is marked with what it
        stood for, or that nothing capped it."""
        if r is not None:
            return f"rank {rank_label(r)}"
        auto = rec.resolved.get("auto_rank") if rec is not None else None
        return (f"auto = {auto}" if auto is not None else
                "auto (no cap)" if rec is not None and rec.params.method == "grouped"
                and not e.is_patchset else "rank auto")

    def shown_ranks(self) -> tuple:
        """The ranks the views show: the panel's, or those of the other parameters' result shown."""
        shown = self.session.shown(self.current_entry(), self.current_params())
        return self.compared_ranks() if shown.matches else shown.ranks

    def _show_mismatch(self, shown, p) -> None:
        """The marker over the views when the result shown came from other parameters."""
        if shown.record is None or shown.matches or p is None:
            self.mismatch.hide()
            return
        diff = param_differences(shown.record.params, p)
        what = "; ".join(diff[:3]) + (" …" if len(diff) > 3 else "") if diff else \
            ("the set fit is not shown" if shown.record.fit_set else "fitted in a set")
        self.mismatch.setText(f"⚠ Shown: results computed with other parameters than the panel's ({what}). "
                              f"<a href='use'>Use these parameters</a>")
        self.mismatch.setToolTip(describe_params(shown.record.params))
        self.mismatch.show()

    def use_shown_params(self) -> None:
        """Put the parameters of the shown result into the panel."""
        shown = self.session.shown(self.current_entry(), self.current_params())
        if shown.record is not None:
            self.params_panel.set_params(shown.record.params.replace(
                ranks=tuple(sorted(shown.record.ranks, key=rank_sort_key))))
            self.session.show_set_fit = bool(shown.record.fit_set)
            self.set_fit_box.setChecked(self.session.show_set_fit)
            self.refresh_views()

    def select_rank(self, rank) -> None:
        if rank not in self.shown_ranks():
            return
        self.selected_rank = rank
        self.refresh_views()

    def select_rank_index(self, i: int) -> None:
        ranks = self.shown_ranks()
        if 0 <= i < len(ranks):
            self.select_rank(ranks[i])

    def _on_spectrum_click(self, k: int) -> None:
        """Select the compared rank near the click, or add k to the comparison."""
        ranks = [r for r in self.compared_ranks() if r is not None]
        n = max(self.spectrum.eigenvalues.size, 1)
        near = [r for r in ranks if abs(r - k) <= max(0.5, 0.02 * n)]
        if near:
            self.select_rank(min(near, key=lambda r: abs(r - k)))
            return
        p = self.current_params()
        if p is None:
            return
        new = tuple(sorted(set(p.ranks) | {k}, key=rank_sort_key))
        self.selected_rank = k
        self.log(f"rank {k} added to the comparison (clicked on the spectrum)")
        self.params_panel.set_ranks(new)

    # ------------------------------------------------------------- running
    def result_key(self, e: ImageEntry, params: DenoiseParams) -> str:
        """Cache key of the result shown for ``e``: its set fit's (when shown) or its own."""
        return self.session.result_key(e, params)

    def _params_or_report(self) -> DenoiseParams | None:
        try:
            return self.params_panel.params()
        except ValueError as exc:
            self.report_error(f"Cannot run: {exc}")
            return None

    def run_current(self) -> bool:
        """Denoise the current image at the ranks not cached yet. Returns True if a run started."""
        e = self.current_entry()
        if e is None:
            self.report_error("Nothing to denoise: open an image first (Ctrl+O).")
            return False
        return self._start([e], "run")

    def run_all(self) -> bool:
        """Denoise every image, each with its own model."""
        if not self.entries:
            self.report_error("Nothing to denoise: open images first (Ctrl+O).")
            return False
        return self._start(list(self.entries), "run")

    def run_set_fit(self) -> bool:
        """The explicit set fit: one 'global' model per kind of image (as ``kpca-denoise denoise
        FOLDER`` fits), kept beside each image's own results and shown in their place."""
        p = self._params_or_report()
        if p is None:
            return False
        if p.method != "global":
            self.report_error("A set fit shares one kernel PCA between images: choose the method "
                              "'global' (the grouped method fits every image by itself).")
            return False
        groups = [g for g in self.session.kind_groups(list(self.entries)) if len(g) > 1]
        if not groups:
            self.report_error("A set fit needs at least two images of one kind (same channels; "
                              "images or patch sets of one size).")
            return False
        entries = [e for g in groups for e in g]
        self.set_fit_box.setChecked(True)
        return self._start(entries, "run", set_fit=True)

    def _start(self, entries: list[ImageEntry], purpose: str, ranks=None, set_fit: bool = False) -> bool:
        if self.runner.is_running():
            self.report_info("A run is in progress; wait for it or cancel it (Esc).")
            return False
        params = self._params_or_report()
        if params is None:
            return False
        items, sets = self.session.plan(entries, params, ranks, set_fit)
        if not items:
            if purpose == "run":
                self.report_info("All requested ranks are already computed for these parameters.")
            return False
        self._running_keys = {it.key for it in items}
        self._current_job_method = params.method
        self.banner.hide()
        return self.runner.start(Job(items=items, params=params, purpose=purpose, sets=sets))

    def cancel_run(self) -> None:
        if self.runner.is_running():
            self.runner.cancel()
            self.progress.overall.setText("cancelling…")
            self.log("cancel requested")
        self._pending_export = None

    def _on_run_started(self, job: Job) -> None:
        n = len(job.items)
        ranks = sorted({r for it in job.items for r in it.ranks}, key=rank_sort_key)
        self.progress.start(job.params.method, n, one_model=bool(job.sets))
        together = "".join(f", the set of {len(g)} images fitted together" for g in job.sets)
        self.log(f"run started: {n} image{'s' if n != 1 else ''}, method {job.params.method}, "
                 f"ranks {', '.join(rank_label(r) for r in ranks)}{together}")
        self.statusBar().showMessage("running…")
        e = self.current_entry()
        if e is not None and e.key in self._running_keys:
            self.spectrum.clear_spectrum("waiting for the eigensolver…" if job.params.method == "global"
                                         else "the grouped method fits one small kernel PCA per group;\n"
                                              "no single spectrum to show")
        self._update_actions()
        self.refresh_views()

    def _on_stage(self, stage: str, *_rest) -> None:
        if stage != "eigensolver":
            self.spectrum.solver_finished()

    def _on_live_spectrum(self, ev: np.ndarray) -> None:
        e = self.current_entry()
        if e is not None and e.key in self._running_keys and self._current_job_method == "global":
            self.spectrum.set_eigenvalues(ev, final=False)

    def _entry_row(self, key: str) -> int:
        return next((i for i, e in enumerate(self.entries) if e.key == key), -1)

    def _on_item_done(self, out) -> None:
        row = self._entry_row(out.key)
        if row < 0:
            return  # removed while it was computing
        if out.error:
            self.imageset.set_status(row, "⚠ failed")
            # the pipeline's message names the image already
            msg = out.error.removeprefix(f"{out.name}: ")
            self.report_error(f"Denoising failed for {out.name}: {msg}")
            return
        rec = self.session.add_outcome(out)
        ranks = ", ".join(rank_label(r) for r in out.outputs)
        e = self.entries[row]
        if e.is_patchset:
            # the pipeline fits one global kernel PCA for a patch set whatever the method says
            used = "global kernel PCA" + (" (patch sets always use it; 'grouped' applies to images)"
                                          if out.params.method != "global" else "")
            auto = out.resolved.get("auto_rank")
            ranks += f"; method {used}" + (f"; auto = {auto} components" if auto is not None else "")
        else:
            ranks += f"; method {out.params.method}"
        timing = ", ".join(f"{k} {v:.1f}s" for k, v in out.timings.items() if k not in ("total", "image"))
        if out.fit_set:
            self.log(f"{out.name}: ranks {ranks}; {_shared_model_text(out.resolved, len(out.fit_set))}, "
                     f"{out.seconds:.1f} s for the set ({timing})")
        else:
            self.log(f"{out.name}: ranks {ranks} in {out.seconds:.1f} s ({timing})")
        if out.resolved.get("noise_model"):
            self.log(f"{out.name}: Poisson-Gaussian noise, {noise_model_text(out.resolved['noise_model'])} "
                     "(denoised at σ 1 after the variance-stabilising transform)")
        elif out.noise_estimated:
            self.log(f"{out.name}: estimated noise σ ≈ {out.noise_sigma:.3g}")
        self._update_status(row)
        if row == self.current_index():
            self.schedule_refresh()

    def _update_status(self, row: int, p: DenoiseParams | None = None) -> None:
        """The thumbnail's line: how many ranks the image has for the panel's parameters,
        or, marked, for the other parameters it was computed with."""
        p = p or self.current_params()
        sh = self.session.shown(self.entries[row], p)
        if sh.record is None:
            return
        n = len(sh.record.ranks)
        text = f"✓ {n} rank{'s' if n != 1 else ''}"
        self.imageset.set_status(row, text if sh.matches else f"{text} · other parameters")

    def schedule_refresh(self) -> None:
        """Redraw once at the next event-loop turn, however many results arrived."""
        if not self._refresh_pending:
            self._refresh_pending = True
            QTimer.singleShot(0, self._deferred_refresh)

    def _deferred_refresh(self) -> None:
        if self._refresh_pending:
            self.refresh_views()

    def _on_run_finished(self, summary: RunSummary) -> None:
        self._running_keys = set()
        if summary.status == "cancelled":
            self.progress.finish(f"cancelled after {summary.seconds:.1f} s — earlier results kept")
            self.report_info(f"Run cancelled after {summary.seconds:.1f} s; earlier results are kept.")
        elif summary.status == "failed":
            self.progress.finish("failed")
            self.report_error(f"The run failed: {summary.message}")
        else:
            msg = f"done: {summary.done} image{'s' if summary.done != 1 else ''} in {summary.seconds:.1f} s"
            if summary.failed:
                msg += f", {summary.failed} failed"
            self.progress.finish(msg)
            self.statusBar().showMessage(msg, 10000)
            self.log(msg)
        self._update_actions()
        self.schedule_refresh()
        if summary.status == "done":
            self._add_auto_neighbours()
        pending, self._pending_export = self._pending_export, None
        if pending is not None and summary.status == "done" and summary.job.purpose == "export":
            self._export_after_run(*pending)

    def _update_actions(self) -> None:
        running = self.runner.is_running()
        has = bool(self.entries)
        self.act_run.setEnabled(has and not running)
        self.act_run_all.setEnabled(has and not running)
        self.act_set_fit.setEnabled(len(self.entries) > 1 and not running)
        self.act_cancel.setEnabled(running)
        self.progress.cancel_button.setEnabled(running)
        for a in (self.act_export, self.act_export_set, self.act_sheet):
            a.setEnabled(has and not running)

    # ------------------------------------------------------------- drawing
    def _levels_for(self, e: ImageEntry) -> tuple[float, float]:
        if e.key not in self._levels:
            self._levels[e.key] = display_levels(e.array)
        return self._levels[e.key]

    def refresh_views(self, reset_zoom: bool = False) -> None:
        """Draw the current image and every cached rank; only draws, never computes a result."""
        self._refresh_pending = False
        e = self.current_entry()
        p = self.current_params()
        shown = self.session.shown(e, p)
        rec = shown.record
        # results computed with other parameters are shown as they are, marked
        ranks = self.compared_ranks() if shown.matches else shown.ranks
        self._show_mismatch(shown, p)
        self.set_fit_box.setEnabled(e is not None and p is not None
                                    and bool(self.session.set_group(e, p)))
        for row in range(len(self.entries)):
            self._update_status(row, p)
        self.grid.set_ranks(ranks)
        if self.selected_rank not in ranks:
            self.selected_rank = ranks[-1] if ranks else None
        self.rank_combo.blockSignals(True)
        self.rank_combo.clear()
        for r in ranks:
            self.rank_combo.addItem(rank_label(r), r)
        if ranks:
            self.rank_combo.setCurrentIndex(ranks.index(self.selected_rank))
        self.rank_combo.blockSignals(False)
        self.grid.set_selected(self.selected_rank)
        # the rank the fit chose for 'auto' (patch sets) is marked on the spectrum
        self.spectrum.set_ranks(ranks, self.selected_rank,
                                rec.resolved.get("auto_rank") if rec is not None else None)
        if e is None:
            for panel in self.grid.panels():
                panel.set_image(None, placeholder="")
                panel.set_metrics("")
            self.grid.input_panel.set_image(None, placeholder="open or drop images")
            self.split.set_images(None, None, None)
            self.info.setText("Open images (Ctrl+O), a folder (Ctrl+Shift+O), or drop files here.")
            self.viewsRefreshed.emit()
            return
        levels = self._levels_for(e)
        running = e.key in self._running_keys
        noisy = rec.noisy if rec is not None else e.array
        noisy_d = e.display(noisy)
        title = "input"
        if rec is not None and rec.params.add_noise:
            title = f"noisy (input + σ {rec.params.add_noise:g})"
        elif rec is not None:
            title = "input (noisy)"
        self.grid.input_panel.set_title(title)
        self.grid.set_aspect(noisy_d.shape[1] / max(noisy_d.shape[0], 1))
        self.grid.input_panel.set_image(noisy_d, levels)
        self._sync_histogram(levels)
        self.grid.input_panel.set_metrics(format_metrics(rec.noisy_metrics) if rec else e.describe())

        clean = self._clean_for(e, p) if p is not None else None
        if clean is not None:
            self.grid.ref_panel.set_title("reference" if e.reference is not None else "clean (before noise)")
            self.grid.ref_panel.set_image(e.display(clean), levels)
            self.grid.ref_panel.set_metrics(str(e.reference_path.name) if e.reference_path else "")
        else:
            self.grid.ref_panel.set_title("no reference")
            self.grid.ref_panel.set_image(None, placeholder="no clean reference: the metrics "
                                                            "show the noise left")
            self.grid.ref_panel.set_metrics("")
        sigma = rec.noise_sigma if rec is not None and np.isfinite(rec.noise_sigma) else None
        prev = None
        for r in ranks:
            panel, rpanel = self.grid.rank_panels[r], self.grid.resid_panels[r]
            rr = rec.ranks.get(r) if rec is not None else None
            if r is None:
                panel.set_title(self.rank_title(e, rec, r))
            if rr is not None:
                panel.set_image(e.display(rr.output), levels)
                panel.set_metrics(rank_metrics_text(rec, r, prev, sigma))
                prev = rr
                res = _residual(e, rec.noisy, rr.output)
                span = 3.0 * (sigma if sigma else max(rr.residual_std, 1e-12))
                rpanel.set_image(res, (-span, span))
                rpanel.set_metrics(f"residual std {rr.residual_std:.3g}")
            else:
                msg = "computing…" if running else "not computed\nRun (Ctrl+R)"
                panel.set_image(None, placeholder=msg)
                panel.set_metrics("")
                rpanel.set_image(None, placeholder="")
                rpanel.set_metrics("")
        # split view: noisy left, selected rank right
        sel = rec.ranks.get(self.selected_rank) if rec is not None else None
        self.split.set_images(noisy_d, e.display(sel.output) if sel else None, levels,
                              "noisy", f"rank {rank_label(self.selected_rank)}")
        # spectrum and what 'auto' chose
        if not running:
            if rec is not None and rec.eigenvalues is not None and rec.eigenvalues.size:
                self.spectrum.set_eigenvalues(rec.eigenvalues, final=True, total_variance=rec.total_variance)
            elif rec is not None and rec.params.method == "grouped" and not e.is_patchset:
                self.spectrum.clear_spectrum("the grouped method has no single spectrum\n"
                                             "(choose 'global' to see one)")
            elif rec is not None:  # nothing fitted: no noise found, a flat image
                self.spectrum.clear_spectrum("no spectrum: no model was fitted\n"
                                             "for this result (see the log)")
            else:
                self.spectrum.clear_spectrum("run to see the eigen-spectrum")
        poisson = rec.resolved.get("noise_model") if rec is not None else None
        if rec is not None:
            self.params_panel.show_resolved(rec.resolved.get("gamma"),
                                            None if poisson else rec.noise_sigma,
                                            rec.noise_estimated)
        else:
            self.params_panel.show_resolved(None, None, False)
        parts = [f"<b>{e.name}</b>", e.describe()]
        if poisson:
            parts.append(f"Poisson-Gaussian {noise_model_text(poisson)}")
        elif rec is not None:
            parts.append(f"σ {'estimated ' if rec.noise_estimated else ''}{rec.noise_sigma:.3g}")
        if rec is not None:
            if rec.resolved.get("gamma"):
                parts.append(f"γ {rec.resolved['gamma']:.3g}")
            if rec.resolved.get("n_landmarks"):
                parts.append(f"Nyström, {rec.resolved['n_landmarks']} landmarks")
            if rec.fit_set:
                parts.append(_shared_model_text(rec.resolved, len(rec.fit_set)))
            parts.append(f"{rec.timings.get('total', 0):.1f} s")
        self.info.setText(" · ".join(parts))
        self.info.setToolTip(self.info.text().replace("<b>", "").replace("</b>", ""))
        self.update_roi_stats()
        if reset_zoom:
            self.fitted = True  # another image: fitted again
        # after the layout has given the views their size, or the fit is wrong
        self.keep_fit()
        self.viewsRefreshed.emit()

    # ------------------------------------------------------------- misc
    def show_help(self) -> HelpDialog:
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

    def dragEnterEvent(self, event) -> None:  # noqa: N802
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:  # noqa: N802
        urls = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        if urls:
            event.acceptProposedAction()
            self.load_paths(urls)

    def showEvent(self, event) -> None:  # noqa: N802
        super().showEvent(event)
        if not self._placed:  # the window frame exists now: fit it, frame included
            self._placed = True
            self._geometry_restored = True  # the size chosen before showing is kept
            self.place_on_screen()
        self.keep_fit()

    def shutdown(self, timeout_ms: int = 10_000) -> bool:
        """Cancel any run and wait for the worker thread; True if it stopped."""
        self._auto_timer.stop()
        if self.runner.is_running():
            self.runner.cancel()
            t = time.monotonic()
            ok = self.runner.wait(timeout_ms)
            # deliver the thread's finished signal so the controller forgets it
            QApplication.sendPostedEvents()
            QApplication.processEvents()
            self.log(f"worker stopped in {time.monotonic() - t:.2f} s")
            return ok
        return True

    def closeEvent(self, event) -> None:  # noqa: N802
        # a run going on is not thrown away unasked (quitting lost it silently)
        if self.runner.is_running() and self.ask(
                "Quit", "A run is going on; its unfinished results will be lost. Quit anyway?",
                ("Quit", "Cancel")) != "Quit":
            event.ignore()
            return
        self.shutdown()
        self.save_settings()
        for d in (self._about, self._help):
            if d is not None:
                d.close()
        super().closeEvent(event)
