"""Entry point of the desktop application: ``kpca-denoise gui [FILES] [--demo] [--screenshot PATH]``.

``--demo`` loads the shipped sample images (``sample_images/`` next to the
package), adds Gaussian noise (σ = 25) and runs a rank comparison on the
cameraman with the 'global' method.  With ``--screenshot PATH`` it waits for
the run, saves a screenshot of the whole window and exits (0 on success),
which also works headless with ``QT_QPA_PLATFORM=offscreen``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from ..samples import sample_images_dir
from ..signals import STOP_SIGNALS

__all__ = ["main", "platform_problem", "DEMO_PARAMS", "DEMO_FILES"]

DEMO_FILES = ("camera.png", "astronaut.png", "digits.npz")
#: the demo: plain kernel PCA (its spectrum is the interesting one to show),
#: three ranks; n_train 1600 keeps the iterative eigensolver (live spectrum)
#: while the pre-image, the slowest step, stays short
DEMO_PARAMS = dict(method="global", ranks=(4, 8, 16), add_noise=25.0, n_train=1600, seed=0)
#: the window size of screenshots (the README's picture; at least 1200 x 800)
SCREENSHOT_SIZE = (1600, 1000)
DEMO_TIMEOUT_S = 900


def _parse_argv(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="kpca-denoise-gui", description="kpca-denoise desktop application")
    ap.add_argument("files", nargs="*")
    ap.add_argument("--demo", action="store_true")
    ap.add_argument("--screenshot", metavar="PATH")
    return ap.parse_args(argv)


def main(files=None, *, demo: bool = False, screenshot: str | None = None) -> int:
    """Open the window; returns the exit status.

    Called by ``kpca-denoise gui`` with parsed arguments, or with no arguments
    by the ``kpca-denoise-gui`` launcher, in which case ``sys.argv`` is parsed.
    """
    if files is None and not demo and screenshot is None:
        ns = _parse_argv(sys.argv[1:])
        files, demo, screenshot = ns.files, ns.demo, ns.screenshot
    files = list(files or [])
    if screenshot and not demo:
        print("error: --screenshot needs --demo (it saves the demo's comparison)", file=sys.stderr)
        return 2
    demo_paths: list[Path] = []
    if demo:
        folder = sample_images_dir()
        demo_paths = [folder / f for f in DEMO_FILES]
        missing = [str(p) for p in demo_paths if not p.is_file()]
        if missing:
            print(f"error: the demo needs the sample images, not found: {', '.join(missing)}; "
                  "run it from a source checkout (sample_images/ next to the package)", file=sys.stderr)
            return 2
    if screenshot and not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        # a screenshot needs no screen: render offscreen rather than fail
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

    problem = platform_problem()
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2

    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from ..params import DenoiseParams
    from .main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("kpca-denoise")
    app.setOrganizationName("kpca-denoise")
    status = {"code": 0}
    windows: list = []
    # before the window starts its compute process: a signal from then on closes both
    handlers = _close_on_signals(app, windows, status)
    win = MainWindow(persist=not screenshot)
    windows.append(win)
    if screenshot:  # the README's picture has a fixed size; otherwise the window places itself
        from PySide6.QtCore import QRect

        win.place_on_screen(QRect(0, 0, *SCREENSHOT_SIZE))  # not clamped to the offscreen screen
        win.resize(*SCREENSHOT_SIZE)
    if files:
        win.load_paths(files)

    if demo:
        win.load_paths([str(p) for p in demo_paths])
        win.params_panel.set_params(DenoiseParams(**DEMO_PARAMS))
        win.imageset.set_current(0)  # the cameraman
        win.log("demo: sample images loaded, Gaussian noise σ=25 added, comparing ranks 4, 8, 16 "
                "with plain kernel PCA")

    if screenshot:
        target = Path(screenshot)

        def finish(summary) -> None:
            if summary.status != "done" or summary.failed:
                print(f"error: the demo run did not finish: {summary.status} {summary.message}",
                      file=sys.stderr)
                status["code"] = 1
            # let the last results paint before grabbing
            QTimer.singleShot(300, lambda: grab_and_quit())

        def grab_and_quit() -> None:
            app.processEvents()
            pix = win.grab()
            target.parent.mkdir(parents=True, exist_ok=True)
            if not pix.save(str(target)):
                print(f"error: cannot save the screenshot to {target}", file=sys.stderr)
                status["code"] = 1
            else:
                print(f"screenshot {pix.width()}x{pix.height()} saved to {target}")
            win.close()
            app.quit()

        def timeout() -> None:
            print(f"error: the demo did not finish within {DEMO_TIMEOUT_S} s", file=sys.stderr)
            status["code"] = 1
            win.shutdown(5000)
            grab_and_quit()

        win.runner.finished.connect(finish)
        QTimer.singleShot(DEMO_TIMEOUT_S * 1000, timeout)

    win.show()
    if demo:
        def start() -> None:
            if not win.run_current():
                print("error: the demo run could not start", file=sys.stderr)
                status["code"] = 1
                if screenshot:
                    app.quit()
        QTimer.singleShot(100, start)
    try:
        rc = app.exec()
    finally:
        handlers.restore()
    return status["code"] or int(rc)


#: the signals that close the window as its Quit does (Ctrl-C in the terminal that
#: started it, ``kill``, the session or the terminal ending, and the others whose
#: default ends the process: the command line's, kpca_denoise.signals)
CLOSE_SIGNALS = (signal.SIGINT, *STOP_SIGNALS)


class _SignalHandlers:
    """Python runs a signal handler only between bytecodes, and Qt's event loop runs in
    C++: the signal's byte on a socket (``signal.set_wakeup_fd``) wakes the loop, which
    then lets Python run the handler."""

    def __init__(self, app, handler) -> None:
        import socket

        from PySide6.QtCore import QSocketNotifier

        self.previous: dict = {}
        self.wakeup = None
        self._socks = socket.socketpair()
        for sock in self._socks:
            sock.setblocking(False)
        try:
            self.wakeup = signal.set_wakeup_fd(self._socks[1].fileno())
            # a signal the process started with ignored (nohup, a background job) stays
            # ignored, as the command line keeps it (kpca_denoise.signals)
            self.previous = {s: signal.signal(s, handler) for s in CLOSE_SIGNALS
                             if signal.getsignal(s) is not signal.SIG_IGN}
        except ValueError:  # not the main thread: the signals are not ours
            self.restore()
            return
        self.notifier = QSocketNotifier(self._socks[0].fileno(), QSocketNotifier.Type.Read, app)
        self.notifier.activated.connect(self._drain)

    def _drain(self, *args) -> None:
        try:
            while self._socks[0].recv(64):
                pass
        except OSError:
            pass

    def restore(self) -> None:
        for s, old in self.previous.items():
            signal.signal(s, signal.SIG_DFL if old is None else old)
        self.previous = {}
        if self.wakeup is not None:
            try:
                signal.set_wakeup_fd(self.wakeup)
            except ValueError:
                pass
            self.wakeup = None
        if getattr(self, "notifier", None) is not None:
            self.notifier.setEnabled(False)


def _close_on_signals(app, windows: list, status) -> _SignalHandlers:
    """SIGTERM, SIGHUP, Ctrl-C and the other stop signals close the window as Quit does,
    without asking (nobody is there to answer): the run is cancelled, the compute
    process stopped, the settings kept; the exit code is 128 + the signal's number.
    The signal's default action ended the window with its compute process still
    running."""
    from PySide6.QtCore import QTimer

    def close() -> None:
        for win in windows:
            win.shutdown(5000)  # cancel a run first: closing then does not ask
            win.close()
        app.quit()

    def handler(signum, frame) -> None:
        if not status.get("signal"):
            status["signal"] = signum
            status["code"] = 128 + signum
            QTimer.singleShot(0, close)  # in the event loop, also before it has started

    return _SignalHandlers(app, handler)


#: Debian/Ubuntu packages of the X11 (xcb) plugin's libraries that a desktop often lacks
XCB_PACKAGES = ("libxcb-cursor0", "libxcb-icccm4", "libxcb-image0", "libxcb-keysyms1",
                "libxcb-render-util0", "libxcb-shape0", "libxcb-xkb1", "libxkbcommon-x11-0")


def debian_package(soname: str) -> str:
    """The Debian package of a library, by Debian's naming rule: libxcb-cursor.so.0 ->
    libxcb-cursor0, libxkbcommon-x11.so.0 -> libxkbcommon-x11-0."""
    name, _, version = soname.partition(".so.")
    name = name.lower()
    version = version.split(".")[0]
    return f"{name}-{version}" if name[-1:].isdigit() else f"{name}{version}"


def _xcb_plugin() -> Path | None:
    import importlib.util

    spec = importlib.util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return None
    plugin = Path(list(spec.submodule_search_locations)[0]) / "Qt/plugins/platforms/libqxcb.so"
    return plugin if plugin.is_file() else None


def platform_problem(environ=None) -> str | None:
    """Why Qt's X11 plugin cannot start, in one line, or None.  Without a library it
    needs (``libxcb-cursor0`` is missing from many Debian and Ubuntu installs) Qt
    printed a screenful about plugins and aborted with a core dump.  Checked only where
    Qt will use that plugin: Linux, an X display, no Wayland, no other platform asked
    for.  The plugin is loaded as Qt would load it, so the loader names what is missing."""
    import ctypes

    env = os.environ if environ is None else environ
    platform = env.get("QT_QPA_PLATFORM", "")
    if (not sys.platform.startswith("linux") or not env.get("DISPLAY")
            or (platform and not platform.startswith("xcb"))
            or (not platform and env.get("WAYLAND_DISPLAY"))):
        return None
    plugin = _xcb_plugin()
    if plugin is None:
        return None
    try:
        ctypes.CDLL(str(plugin), mode=getattr(os, "RTLD_LAZY", 1) | getattr(ctypes, "RTLD_LOCAL", 0))
    except OSError as exc:
        text = str(exc)
        missing = text.split(":")[0].strip() if "cannot open shared object" in text else ""
        if missing and Path(missing).name != plugin.name:
            return (f"the window cannot open: Qt's X11 plugin needs {missing}, which is not "
                    f"installed; on Debian/Ubuntu: sudo apt install {debian_package(missing)} "
                    f"(all it needs: {' '.join(XCB_PACKAGES)})")
        return (f"the window cannot open: Qt's X11 plugin does not load ({text}); on "
                f"Debian/Ubuntu: sudo apt install {' '.join(XCB_PACKAGES)}")
    return None


if __name__ == "__main__":
    sys.exit(main())
