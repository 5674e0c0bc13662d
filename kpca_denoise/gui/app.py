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
import sys
from pathlib import Path

__all__ = ["main", "sample_images_dir", "DEMO_PARAMS", "DEMO_FILES"]

DEMO_FILES = ("camera.png", "astronaut.png", "digits.npz")
#: the demo: plain kernel PCA (its spectrum is the interesting one to show),
#: three ranks; n_train 1600 keeps the iterative eigensolver (live spectrum)
#: while the pre-image, the slowest step, stays short
DEMO_PARAMS = dict(method="global", ranks=(4, 8, 16), add_noise=25.0, n_train=1600, seed=0)
#: the window size of screenshots (the README's picture; at least 1200 x 800)
SCREENSHOT_SIZE = (1600, 1000)
DEMO_TIMEOUT_S = 900


def sample_images_dir() -> Path:
    """The shipped sample images: inside the installed package (a wheel carries them as
    ``kpca_denoise/sample_images``), else the source checkout's ``sample_images/``."""
    import kpca_denoise

    pkg = Path(kpca_denoise.__file__).resolve().parent
    packaged = pkg / "sample_images"
    return packaged if packaged.is_dir() else pkg.parent / "sample_images"


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

    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from ..params import DenoiseParams
    from .main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("kpca-denoise")
    app.setOrganizationName("kpca-denoise")
    win = MainWindow(persist=not screenshot)
    if screenshot:  # the README's picture has a fixed size; otherwise the window places itself
        from PySide6.QtCore import QRect

        win.place_on_screen(QRect(0, 0, *SCREENSHOT_SIZE))  # not clamped to the offscreen screen
        win.resize(*SCREENSHOT_SIZE)
    if files:
        win.load_paths(files)
    status = {"code": 0}

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
    rc = app.exec()
    return status["code"] or int(rc)


if __name__ == "__main__":
    sys.exit(main())
