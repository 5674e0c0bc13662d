"""What the window keeps between sessions, and where it goes on the screen.

A mixin of :class:`~kpca_denoise.gui.main_window.MainWindow`.  The settings
(parameters but a trial's added noise, last folder, geometry, dock layout, the residuals box) are read
once when the window is built and written when the parameters change and on
close (the geometry only from a shown window).  Without a saved geometry the window
takes most of the screen, and a saved one is never restored smaller than
:meth:`WindowSettings.minimum_window_size` or off-screen; on a short screen the
bottom docks are lower, side by side.
"""

from __future__ import annotations

import json

from PySide6.QtCore import QByteArray, QRect, Qt
from PySide6.QtGui import QGuiApplication

from ..io import OUTPUT_FORMATS
from ..params import DenoiseParams

__all__ = ["WindowSettings", "SETTINGS_ORG", "SETTINGS_APP", "session_params"]

#: pixels between two windows opened one after the other
CASCADE = 32
#: screens lower than this (available pixels) get the compact layout
SHORT_SCREEN = 900
#: a restored window takes at least this share of the screen's width and height
MIN_SCREEN_SHARE = 0.75
SETTINGS_ORG = "kpca-denoise"
SETTINGS_APP = "kpca-denoise"


def session_params(params: DenoiseParams) -> DenoiseParams:
    """The parameters a later session starts from: a trial's added noise belongs to the
    session it was set in (a photo opened next time must not get synthetic noise; the
    clean reference, an image's, is never kept either)."""
    return params.replace(add_noise=None)


class WindowSettings:
    """Restore and save the settings; place the window and its docks (mixed into the window)."""

    def _restore_settings(self) -> None:
        # read everything first: restoring the parameters saves the settings (params changed),
        # which would overwrite the saved geometry with this not yet placed window's
        geo = self.settings.value("geometry")
        state = self.settings.value("window_state")
        raw = self.settings.value("params")
        if raw:
            try:
                saved = DenoiseParams.from_dict(json.loads(str(raw)))
            except (ValueError, TypeError) as exc:
                self.log(f"ignored the saved parameters ({exc})", "warning")
            else:
                self.params_panel.set_params(session_params(saved))
        self._geometry_restored = isinstance(geo, QByteArray) and self.restoreGeometry(geo)
        self._available: QRect | None = None
        self._placed = False
        self._state_restored = isinstance(state, QByteArray) and self.restoreState(state)
        if not self._geometry_restored:  # a restored geometry is applied when shown, then kept on screen
            self.place_on_screen()
        self._arrange_docks_for_height()
        fmt = str(self.settings.value("export_format") or "")
        self.set_export_format(fmt if fmt in OUTPUT_FORMATS else None)
        res = self.settings.value("show_residuals")
        if res is not None:
            self.residuals_box.setChecked(str(res).lower() in ("true", "1"))

    def save_settings(self) -> None:
        """Write the parameters, last folder, geometry, dock layout and residuals box."""
        if not self.persist:
            return
        try:
            kept = session_params(self.params_panel.params())
            self.settings.setValue("params", json.dumps(kept.to_dict()))
        except ValueError:
            pass  # keep the last valid parameters
        self.settings.setValue("last_dir", self.last_dir)
        if self.isVisible():  # a window not yet shown has Qt's placeholder size (640x480)
            self.settings.setValue("geometry", self.saveGeometry())
            self.settings.setValue("window_state", self.saveState())
        self.settings.setValue("show_residuals", self.residuals_box.isChecked())
        self.settings.sync()

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
        if self._geometry_restored:  # never smaller than the layout needs
            min_w, min_h = self.minimum_window_size(available)
            w, h = max(self.width(), min_w), max(self.height(), min_h)
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
        x, y = self._cascaded(x, y, w + extra_w, h + extra_h, available)
        self.move(x, y)

    def _open_windows(self) -> list[tuple[int, int]]:
        """Where the other open kpca-denoise windows are: this process's, and the other
        processes' from the settings (``open_windows/<pid>``, an entry of a process that
        has ended is dropped)."""
        import os

        from PySide6.QtWidgets import QApplication

        here = [(w.x(), w.y()) for w in QApplication.topLevelWidgets()
                if w is not self and isinstance(w, WindowSettings) and w.isVisible()]
        if not self.persist:
            return here
        self.settings.beginGroup("open_windows")
        try:
            for pid in self.settings.childKeys():
                if not pid.isdigit() or int(pid) == os.getpid():
                    continue
                try:
                    os.kill(int(pid), 0)
                except ProcessLookupError:
                    self.settings.remove(pid)
                    continue
                except OSError:
                    pass  # alive, another user's
                try:
                    here.append(tuple(int(v) for v in str(self.settings.value(pid)).split(",")[:2]))
                except ValueError:
                    self.settings.remove(pid)
        finally:
            self.settings.endGroup()
        return here

    def _cascaded(self, x: int, y: int, w: int, h: int, available: QRect) -> tuple[int, int]:
        """``(x, y)``, moved down and right by :data:`CASCADE` while another kpca-denoise
        window is there (two windows opened exactly on top of each other), back to the
        screen's corner when that runs off it."""
        taken = self._open_windows()
        for _ in range(len(taken) + 1):
            if not any(abs(x - ox) < CASCADE // 2 and abs(y - oy) < CASCADE // 2 for ox, oy in taken):
                break
            x, y = x + CASCADE, y + CASCADE
            if x + w > available.right() + 1 or y + h > available.bottom() + 1:
                x, y = available.x(), available.y()
        return x, y

    def register_open_window(self, open_: bool = True) -> None:
        """Note (or forget) where this window is, for the next window's cascade."""
        import os

        if not self.persist:
            return
        key = f"open_windows/{os.getpid()}"
        if open_:
            self.settings.setValue(key, f"{self.x()},{self.y()}")
        else:
            self.settings.remove(key)
        self.settings.sync()

    def minimum_window_size(self, available: QRect) -> tuple[int, int]:
        """The smallest size a saved geometry is restored at: what the layout needs and
        :data:`MIN_SCREEN_SHARE` of the screen, whichever is larger (a window saved small
        after an abnormal exit opened with its comparison grid in slivers)."""
        hint = self.minimumSizeHint()
        return (max(hint.width(), int(available.width() * MIN_SCREEN_SHARE)),
                max(hint.height(), int(available.height() * MIN_SCREEN_SHARE)))

    def _arrange_docks_for_height(self) -> None:
        """On a short screen the progress panel puts its stages in two columns and the
        bottom docks are lower (no saved layout), so the images keep most of the height
        while the spectrum and the progress stay side by side, both in view."""
        screen = self.screen() or QGuiApplication.primaryScreen()
        avail = self._available or (screen.availableGeometry() if screen is not None else None)
        short = avail is not None and avail.height() < SHORT_SCREEN
        self.progress.set_columns(2 if short else 1)
        if self._state_restored:
            return
        if short:
            self.resizeDocks([self.dock_spectrum, self.dock_progress], [185, 185],
                             Qt.Orientation.Vertical)
            self.resizeDocks([self.dock_images], [150], Qt.Orientation.Horizontal)
        if self.tabifiedDockWidgets(self.dock_spectrum):  # side by side again
            # (splitDockWidget on a tabbed dock would only add another tab)
            self.removeDockWidget(self.dock_progress)
            self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.dock_progress)
            self.splitDockWidget(self.dock_spectrum, self.dock_progress, Qt.Orientation.Horizontal)
            self.dock_progress.show()
