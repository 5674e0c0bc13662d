"""What the window's tests share besides their fixtures (``conftest.py``): a smooth
synthetic image, a run waited for, its results drawn.  No sleeps: waits are on signals
(``qtbot.waitSignal``) or conditions (``qtbot.waitUntil``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

os.environ["QT_QPA_PLATFORM"] = "offscreen"  # before anything imports Qt

import numpy as np  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip("pytestqt")

from kpca_denoise.core.progress import CancelToken  # noqa: E402
from kpca_denoise.gui.compute import run_job  # noqa: E402
from kpca_denoise.gui.jobs import ItemOutcome, Job, JobItem  # noqa: E402
from kpca_denoise.gui.main_window import MainWindow  # noqa: E402
from kpca_denoise.params import DenoiseParams  # noqa: E402

__all__ = ["RUN_TIMEOUT_MS", "FAST", "smooth", "run", "settle", "outcome_of", "trial_args"]

RUN_TIMEOUT_MS = 60_000
FAST = DenoiseParams(method="global", ranks=(2, 4, 8), n_train=300, preimage_iterations=30)


def smooth(h: int, w: int, peak: float, seed: int = 0) -> np.ndarray:
    y, x = np.mgrid[0:h, 0:w]
    img = 0.5 + 0.3 * np.sin(x / 5.0) * np.cos(y / 7.0) + 0.15 * (x > w / 2)
    rng = np.random.default_rng(seed)
    return np.clip(img * peak + rng.normal(0, 0.03 * peak, img.shape), 0, peak)


def run(qtbot, w: MainWindow, params: DenoiseParams, run=None):
    w.params_panel.set_params(params)
    w._auto_timer.stop()  # the test starts this run itself: no run of missing ranks first
    # the run's own end: a preview or the background decisions it stops end first
    with qtbot.waitSignal(w.runner.finished, timeout=RUN_TIMEOUT_MS,
                          check_params_cb=lambda s: s.job.purpose in ("run", "export")) as blocker:
        started = (run or w.run_current)()
        assert started, w.banner.text()
    settle(qtbot, w)
    return blocker.args[0]


def settle(qtbot, w: MainWindow) -> None:
    """Results are drawn at the next event-loop turn after they arrive."""
    qtbot.waitUntil(lambda: not w._refresh_pending, timeout=5000)



def outcome_of(array: np.ndarray, params: DenoiseParams, name: str = "n.png") -> ItemOutcome:
    """The compute process's outcome of one image at ``params`` (its ranks), computed in
    this process by the compute loop's :func:`~kpca_denoise.gui.compute.run_job`."""
    outs: list = []
    item = JobItem(key="k", name=name, array=array, is_patchset=False, ranks=tuple(params.ranks))
    summary = run_job(Job([item], params), lambda kind, payload: outs.append((kind, payload)),
                      CancelToken())
    items = [p for kind, p in outs if kind == "item"]
    assert summary["status"] == "done" and len(items) == 1, (summary, items)
    return items[0]


def trial_args(sidecar) -> list:
    """The command line's flags for a sidecar's trial settings (its added noise), which
    ``--params`` leaves out: a run that reproduces the window's trial asks for them."""
    data = json.loads(Path(sidecar).read_text())
    noise = (data.get("trial") or {}).get("add_noise") or data["params"].get("add_noise")
    return ["--add-noise", str(noise)] if noise else []
