"""The fixtures of the window's tests (pytest-qt, offscreen): QSettings kept inside the
test's temporary folder, a failure for a test that leaves a worker thread running, small
synthetic images and a window.  Helpers without fixtures are in :mod:`gui_support`."""

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # before anything imports Qt

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

pytest.importorskip("pytestqt")

from gui_support import smooth  # noqa: E402
from PySide6.QtCore import QSettings  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from kpca_denoise.gui.main_window import MainWindow  # noqa: E402
from kpca_denoise.gui.worker import active_threads  # noqa: E402

# no background decisions after a selection: a test asks for what it needs
MainWindow.prepare_delay_ms = None


@pytest.fixture(autouse=True)
def temp_settings(tmp_path_factory):
    """Every QSettings in the test (including the default constructor's) lives in tmp."""
    d = tmp_path_factory.mktemp("settings")
    QSettings.setDefaultFormat(QSettings.Format.IniFormat)
    QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, str(d))
    QSettings.setPath(QSettings.Format.NativeFormat, QSettings.Scope.UserScope, str(d))
    return d


@pytest.fixture(autouse=True)
def no_thread_left_running(request):
    """Fail a window's test that leaves a worker thread running (then stop it, so others
    are clean); napari's tests run on napari's own application."""
    if not request.module.__name__.startswith("test_gui"):
        yield
        return
    request.getfixturevalue("qapp")
    yield
    QApplication.processEvents()
    left = active_threads()
    for t in left:
        t.wait(10_000)
    QApplication.processEvents()
    assert not left, f"worker thread(s) still running after the test: {[t.objectName() for t in left]}"



@pytest.fixture
def images(tmp_path) -> dict:
    """48x48 uint8 and uint16 PNGs, a patch set, a corrupt PNG, a 96x96 image."""
    d = tmp_path / "in"
    d.mkdir()
    out = {}
    out["u8"] = d / "gray8.png"
    Image.fromarray(smooth(48, 48, 255).astype(np.uint8)).save(out["u8"])
    out["u16"] = d / "gray16.png"
    Image.fromarray(smooth(48, 48, 4000, 1).astype(np.uint16)).save(out["u16"])
    rng = np.random.default_rng(2)
    out["npz"] = tmp_path / "patches.npz"
    np.savez(out["npz"], images=rng.integers(0, 255, (40, 8, 8)).astype(np.uint8))
    out["bad"] = tmp_path / "broken.png"
    out["bad"].write_bytes(b"\x89PNG\r\n\x1a\n this is not an image")
    out["big"] = tmp_path / "big96.png"
    Image.fromarray(smooth(96, 96, 255, 3).astype(np.uint8)).save(out["big"])
    out["dir"] = d
    return out


@pytest.fixture
def window(qtbot, tmp_path):
    settings = QSettings(str(tmp_path / "window.ini"), QSettings.Format.IniFormat)
    w = MainWindow(settings=settings)
    # no modal question when pytest-qt closes a window whose run a failed test left going
    w.ask = lambda title, text, choices: choices[0]
    qtbot.addWidget(w)
    w.resize(1280, 820)
    w.show()
    qtbot.waitExposed(w)
    yield w
    w.shutdown()
