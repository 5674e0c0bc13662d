"""The window's widgets: the views in the middle, the docks around them, the status bar.

A mixin of :class:`~kpca_denoise.gui.main_window.MainWindow`: it creates the
widgets and lays them out, nothing more; the window connects them
(``MainWindow._connect``) and the other mixins fill them.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDockWidget,
    QFrame,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QSizePolicy,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from .imageset import ImageSetPanel
from .panels import LogView, MessageBanner, ProgressPanel
from .params_panel import ParamsPanel
from .spectrum import SpectrumPlot
from .views import ComparisonGrid, SplitView, ZoomLink

__all__ = ["WindowLayout", "WELCOME_TEXT"]

#: the line over the views while no image is loaded
WELCOME_TEXT = "Open images (Ctrl+O), a folder (Ctrl+Shift+O), or drop files here."


class WindowLayout:
    """Builds the central views, the four docks and the status bar (mixed into the window)."""

    def _build_ui(self) -> None:
        # central: banner, view controls, grid / split tabs
        central = QWidget(self)
        v = QVBoxLayout(central)
        v.setContentsMargins(4, 4, 4, 4)
        v.setSpacing(4)
        self.banner = MessageBanner(central)
        v.addWidget(self.banner)
        self.info = QLabel(WELCOME_TEXT, central)
        self.info.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # the whole width, broken between words when narrow (1366x768 cut it at "(wl"); it
        # must not widen the window
        self.info.setWordWrap(True)
        self.info.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        v.addWidget(self.info)
        self.mismatch = QLabel("", central)
        self.mismatch.setWordWrap(True)
        self.mismatch.setStyleSheet("background:#fff4e5; color:#663c00; border:1px solid #ffd8a8; "
                                    "border-radius:4px; padding:3px;")
        self.mismatch.hide()
        v.addWidget(self.mismatch)
        v.addLayout(self._build_views(central), 1)
        self._syncing_levels = False
        self.roi: pg.RectROI | None = None
        self.setCentralWidget(central)
        self._build_docks()
        self.cursor_label = QLabel("", self)
        self.cursor_label.setToolTip("pixel under the mouse: column x, row y and value, in the "
                                     "source's units")
        self.statusBar().addPermanentWidget(self.cursor_label)
        self.statusBar().showMessage("ready")

    def _build_view_bar(self, parent: QWidget) -> QWidget:
        """The controls beside the view tabs: the selected rank, residuals, set fit."""
        box = QWidget(parent)
        bar = QHBoxLayout(box)
        bar.setContentsMargins(0, 0, 2, 2)
        bar.addWidget(QLabel("rank:", box))
        self.rank_combo = QComboBox(box)
        self.rank_combo.setToolTip("rank shown in the split view and exported (keys 1–9, or click "
                                   "a view or the spectrum)")
        self.rank_combo.setMinimumContentsLength(5)
        bar.addWidget(self.rank_combo)
        self.residuals_box = QCheckBox("residuals", box)
        self.residuals_box.setChecked(True)
        self.residuals_box.setToolTip("show noisy − denoised under each rank")
        bar.addWidget(self.residuals_box)
        self.set_fit_box = QCheckBox("set fit", box)
        self.set_fit_box.setToolTip("show (and export) the results of the set fit, one model for the "
                                    "images of one kind (Run ▸ Set fit); unticked: each image's own fit")
        bar.addWidget(self.set_fit_box)
        return box

    def _build_views(self, central: QWidget) -> QHBoxLayout:
        """The rank grid and the before/after split on two tabs, and the contrast histogram."""
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
        self.tabs.addTab(self.split, "A / B split")
        # the rank controls on the tabs' row: the line over the views gets the whole width
        # (the tabs' titles elided in a narrow window rather than widen it)
        self.tabs.setElideMode(Qt.TextElideMode.ElideRight)
        self.tabs.setUsesScrollButtons(True)
        self.tabs.setCornerWidget(self._build_view_bar(central), Qt.Corner.TopRightCorner)
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
        return row

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

    def _build_docks(self) -> None:
        """Images on the left, parameters on the right, spectrum and progress/log below."""
        # the parameters take the right side down to the status bar: under the bottom docks
        # their last group (the clean reference's buttons) was cut at 1920x1080
        self.setCorner(Qt.Corner.BottomRightCorner, Qt.DockWidgetArea.RightDockWidgetArea)
        self.imageset = ImageSetPanel()
        self.dock_images = self._add_dock("Images", "dock_images", self.imageset,
                                          Qt.DockWidgetArea.LeftDockWidgetArea)
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
        self._first_dock_sizes()

    def _first_dock_sizes(self) -> None:
        self.resizeDocks([self.dock_spectrum], [200], Qt.Orientation.Vertical)
        self.resizeDocks([self.dock_images, self.dock_params], [180, 290], Qt.Orientation.Horizontal)
        self.resizeDocks([self.dock_spectrum, self.dock_progress], [560, 420], Qt.Orientation.Horizontal)

    def reset_layout(self) -> None:
        """Every dock back where a first start puts it, shown, at its first sizes (View ›
        Reset layout): docks squeezed by a window made small, closed or floated come back,
        and the layout saved for the next start is this one."""
        areas = ((self.dock_images, Qt.DockWidgetArea.LeftDockWidgetArea),
                 (self.dock_params, Qt.DockWidgetArea.RightDockWidgetArea),
                 (self.dock_spectrum, Qt.DockWidgetArea.BottomDockWidgetArea),
                 (self.dock_progress, Qt.DockWidgetArea.BottomDockWidgetArea))
        for dock, area in areas:
            dock.setFloating(False)
            self.removeDockWidget(dock)
            self.addDockWidget(area, dock)
            dock.show()
        self.splitDockWidget(self.dock_spectrum, self.dock_progress, Qt.Orientation.Horizontal)
        self._first_dock_sizes()
        self._state_restored = False
        self._arrange_docks_for_height()
        self.save_settings()
