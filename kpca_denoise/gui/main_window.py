"""The main window: image set, comparison views, parameters, spectrum, progress, log.

The window is glue.  Its state lives in the Qt-free
:class:`~kpca_denoise.gui.model.Session`; each job of the window is a mixin
in a module of its own, and this module connects the widgets' signals to
them:

* :mod:`.layout` builds the widgets and docks, :mod:`.settings` restores and
  saves them and places the window, :mod:`.actions` holds the keys, toolbar
  and menus;
* :mod:`.loading` opens files and references, :mod:`.running` starts and
  cancels runs and takes in their results, :mod:`.export` writes them;
* :mod:`.drawing` draws the views, :mod:`.viewer` zooms, fits and reads
  pixels, :mod:`.ranks` chooses the ranks compared and selected;
* :mod:`.params_tools` undoes and redoes parameter changes, keeps presets and loads a
  sidecar's parameters;
* :mod:`.messages` reports to the log, the banner and the status bar, with
  texts from :mod:`.texts`.

Errors (unreadable files, failed runs, exports that cannot be written) go to
the inline banner, the status bar and the log; nothing here opens a blocking
dialog except the file choosers the user asked for.
"""

from __future__ import annotations

import gc
import time
from pathlib import Path

from PySide6.QtCore import QSettings, QTimer, Signal
from PySide6.QtWidgets import QApplication, QMainWindow

from .. import __version__
from ..io import jsonable, rank_tag
from ..params import DenoiseParams
from .actions import WindowActions
from .drawing import ViewDrawing
from .export import ExportActions
from .layout import WindowLayout
from .loading import ImageLoading
from .messages import Messages
from .model import ImageEntry, ResultCache, Session
from .panels import AboutDialog, HelpDialog
from .params_tools import ParamsTools
from .preview import PreviewControl
from .ranks import RankSelection
from .running import RunControl
from .settings import SETTINGS_APP, SETTINGS_ORG, WindowSettings
from .viewer import ImageViewer
from .worker import RunController, compute_server

__all__ = ["MainWindow", "SETTINGS_ORG", "SETTINGS_APP", "rank_tag", "jsonable"]


class MainWindow(WindowLayout, WindowSettings, WindowActions, Messages, ImageLoading, RunControl,
                 PreviewControl, RankSelection, ViewDrawing, ImageViewer, ExportActions, ParamsTools,
                 QMainWindow):
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
        #: the run's queue: image key -> 'queued', 'running' or 'failed' (shown on its line)
        self.queue: dict[str, str] = {}
        self._current_job_method = "global"
        self._last_params: DenoiseParams | None = None
        self._about: AboutDialog | None = None
        self._help: HelpDialog | None = None
        self._refresh_pending = False
        self.fitted = True  # views fit the image until the user zooms or pans
        self.loupe = None  # the magnifier (View › Loupe), made when first shown
        self.loupe_on = False
        self._user_view: tuple | None = None  # (centre x, centre y, image pixels per screen pixel)
        self._fit_pending = False
        self.last_dir = str(self.settings.value("last_dir", str(Path.home())))
        self._build_ui()
        self._init_preview()
        self._init_params_tools()
        self._build_actions()
        self._connect()
        self._restore_settings()
        self._init_params_tools()  # the restored parameters are where the history starts
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

    def _connect(self) -> None:
        """Every widget's signal to the method that handles it."""
        self.imageset.currentChanged.connect(self._on_current_changed)
        self.imageset.pathsDropped.connect(self.load_paths)
        self.imageset.openFilesRequested.connect(self.open_files_dialog)
        self.imageset.openFolderRequested.connect(self.open_folder_dialog)
        self.imageset.removeRequested.connect(self.remove_image)
        self.params_panel.changed.connect(self._on_params_changed)
        self.params_panel.changed.connect(self._record_params)
        self.params_panel.notice.connect(lambda text: self.statusBar().showMessage(text, 10000))
        self.params_panel.referenceRequested.connect(self.choose_reference)
        self.params_panel.referenceCleared.connect(lambda: self.set_reference(None))
        self.params_panel.suggestRequested.connect(self.suggest_ranks)
        self.grid.rankClicked.connect(self.select_rank)
        self.grid.regionDrawn.connect(self.draw_preview)
        self.spectrum.rankClicked.connect(self._on_spectrum_click)
        self.rank_combo.activated.connect(lambda i: self.select_rank(self.rank_combo.itemData(i)))
        self.residuals_box.toggled.connect(self.grid.set_show_residuals)
        self.residuals_box.toggled.connect(lambda _on: self.keep_fit())
        self.grid.userZoomed.connect(self._on_user_zoom)
        self.grid.layoutChanged.connect(self.keep_fit)
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
        self.runner.itemStarted.connect(self._queue_item_started)
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

    # -- Qt events -------------------------------------------------------------------
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
            self.register_open_window()
            QTimer.singleShot(0, self, self._arrange_docks_for_height)  # docks take sizes once laid out
        self.keep_fit()

    def shutdown(self, timeout_ms: int = 10_000) -> bool:
        """Cancel any run and wait for the worker thread; True if it stopped.  The
        window's timers stop too: a closed window starts nothing more (a preview
        asked for just before closing would otherwise run in the shared compute
        process after it)."""
        for timer in (self._auto_timer, self._preview_timer, self._prepare_timer):
            timer.stop()
        self._preview_pending = False
        self._queued_run = None
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
        # a run going on is not thrown away unasked (quitting would lose it silently)
        if self.runner.busy() and self.ask(
                "Quit", "A run is going on; its unfinished results will be lost. Quit anyway?",
                ("Quit", "Cancel")) != "Quit":
            event.ignore()
            return
        self.shutdown()
        self.save_settings()
        self.register_open_window(False)
        for d in (self._about, self._help):
            if d is not None:
                d.close()
        super().closeEvent(event)
