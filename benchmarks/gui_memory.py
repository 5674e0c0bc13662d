"""Peak memory of the desktop window on a big photo.

A script, not a test.  Opens FILE in the real window (offscreen unless
QT_QPA_PLATFORM says otherwise), runs the current parameters (the default
method, ranks 1, 2, 4, 8, auto), waits for the run and the views, saves a
screenshot, and prints the wall time and the peak resident memory of the GUI
process plus its compute process, sampled from /proc every 0.2 s (``time -v``
reports only the largest single process, and the window runs the pipeline in a
child process).

Usage::

    QT_QPA_PLATFORM=offscreen python -m benchmarks.gui_memory photo.jpg shot.png
"""
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.common import exit_on_help, results_header


def _status_kb(pid: int, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (the compute process and its helpers)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            todo += [int(c) for c in Path(f"/proc/{p}/task/{p}/children").read_text().split()]
        except OSError:
            pass
    return out


class Sampler(threading.Thread):
    """The largest sum of VmRSS over the process tree, sampled every 0.2 s."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak_kb = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            self.peak_kb = max(self.peak_kb,
                               sum(_status_kb(p, "VmRSS") for p in process_tree(os.getpid())))
            time.sleep(0.2)


def main() -> None:
    exit_on_help(sys.argv[1:], __doc__)
    if len(sys.argv) != 3:
        sys.exit(f"usage: python -m benchmarks.gui_memory FILE SCREENSHOT.png\n{__doc__}")
    path, shot = sys.argv[1], sys.argv[2]
    print(results_header(), flush=True)
    sampler = Sampler()
    sampler.start()
    from PySide6.QtCore import QSettings, QTimer
    from PySide6.QtWidgets import QApplication

    from kpca_denoise.gui.main_window import MainWindow

    app = QApplication(sys.argv[:1])
    settings = QSettings(os.path.join(tempfile.mkdtemp(), "s.ini"), QSettings.Format.IniFormat)
    w = MainWindow(settings=settings, persist=False)
    w.resize(1366, 740)
    w.show()
    t0 = time.time()
    w.load_paths([path])

    def poll() -> None:
        if w.runner.is_running():
            QTimer.singleShot(500, poll)
        else:
            QTimer.singleShot(1500, finish)  # the views are redrawn after the last result

    def start() -> None:
        assert w.run_current(), "the run did not start"
        QTimer.singleShot(1000, poll)

    def finish() -> None:
        w.grab().save(shot)
        own = {p: _status_kb(p, "VmHWM") for p in process_tree(os.getpid())}
        sampler.done.set()
        print(f"wall {time.time() - t0:.0f} s; peak RSS of the window and its compute process "
              f"together {sampler.peak_kb / 1024:.0f} MB; each process's own peak (VmHWM): "
              + ", ".join(f"{'window' if p == os.getpid() else p} {kb / 1024:.0f} MB"
                          for p, kb in own.items() if kb))
        print("log:", w.log_view.toPlainText()[-600:])
        app.quit()

    QTimer.singleShot(2000, start)
    app.exec()


if __name__ == "__main__":
    main()
