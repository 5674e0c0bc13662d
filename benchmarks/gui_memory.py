"""Peak memory of the desktop window on a big photo.

A script, not a test.  Opens FILE in the real window (offscreen unless
QT_QPA_PLATFORM says otherwise), runs the current parameters (the default
method, ranks 1, 2, 4, 8, auto), waits for the run and the views, saves a
screenshot, and prints the wall time and the peak resident memory of the GUI
process plus its compute process, sampled from /proc every 0.2 s (``time -v``
reports only the largest single process, and the window runs the pipeline in a
child process).

Usage::

    QT_QPA_PLATFORM=offscreen python benchmarks/gui_memory.py photo.jpg shot.png
"""
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

def tree_rss(pid):
    tot = 0
    pids = [pid]
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        kids = []
    for k in kids:
        pids += [int(k)]
        try:
            pids += [int(x) for x in Path(f"/proc/{k}/task/{k}/children").read_text().split()]
        except OSError:
            pass
    per = {}
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS"):
                    per[p] = int(line.split()[1]); tot += per[p]
        except OSError:
            pass
    return tot, per

peak = [0, {}]
stop = False
def sampler():
    while not stop:
        t, per = tree_rss(os.getpid())
        if t > peak[0]:
            peak[0], peak[1] = t, per
        time.sleep(0.2)
threading.Thread(target=sampler, daemon=True).start()

from PySide6.QtCore import QTimer, QSettings
from PySide6.QtWidgets import QApplication
app = QApplication(sys.argv[:1])
from kpca_denoise.gui.main_window import MainWindow
s = QSettings(os.path.join(tempfile.mkdtemp(), "s.ini"), QSettings.Format.IniFormat)
w = MainWindow(settings=s, persist=False)
w.resize(1366, 740); w.show()
t0 = time.time()
w.load_paths([sys.argv[1]])
def go():
    assert w.run_current()
    def poll():
        if w.runner.is_running():
            QTimer.singleShot(500, poll); return
        QTimer.singleShot(1500, finish)
    QTimer.singleShot(1000, poll)
def finish():
    global stop
    w.grab().save(sys.argv[2])
    stop = True
    print(f"wall {time.time() - t0:.0f} s; peak RSS of GUI + compute process {peak[0]/1024:.0f} MB "
          f"(per process at the peak: {', '.join(f'{v/1024:.0f}' for v in peak[1].values())} MB)")
    print("log:", w.log_view.toPlainText()[-600:])
    app.quit()
QTimer.singleShot(2000, go)
app.exec()
