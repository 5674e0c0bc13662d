"""Small widgets of the main window: progress per stage, log, message banner, About."""

from __future__ import annotations

import html
import re
import time

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QFont, QPainter, QTextCursor
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QTextBrowser,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

import numpy as np

from .. import __version__
from ..cli_progress import RunEstimate, work_weight
from ..core.progress import ProgressEvent
from ..stack_tiling import plan_stack
from ..tiling import plan

__all__ = ["run_estimate", "ProgressPanel", "LogView", "MessageBanner", "AboutDialog", "HelpDialog", "help_html", "STAGES"]

#: (stage name sent by the pipeline, label); the order is the order of the work
STAGES = (
    ("noise", "noise estimate"),
    ("gram", "Gram matrix"),
    ("grouping", "grouping"),
    ("eigensolver", "eigensolver"),
    ("projection", "projection"),
    ("preimage", "pre-image"),
    ("reassembly", "reassembly"),
    ("image", "images"),  # images denoised with a set's model (shown for a set fitted together)
    ("page", "pages"),  # the reference pages of a sequence's sweep (grouped: a set is a sequence)
    ("metrics", "metrics"),
)


def run_estimate(job) -> RunEstimate | None:
    """The whole run's estimate of the time left for a run or export ``job`` (a
    :class:`~kpca_denoise.gui.jobs.Job`), the command line's
    (:class:`~kpca_denoise.cli_progress.RunEstimate`): each image weighed by the pixels it is
    denoised in, with the tiles it is planned in, alone or in its sequence; None for a
    preview (one region: its stages say it)."""
    if job.purpose in ("preview", "prepare") or not job.items:
        return None
    params = job.params
    weights, tiles, as_one = {}, {}, {}
    for i, item in enumerate(job.items):
        shape = item.array.shape
        weights[i] = work_weight(shape, item.is_patchset)
        try:
            planned = [] if item.is_patchset else plan(shape, params)
        except ValueError:  # refused by the pipeline, which says why
            planned = []
        if len(planned) > 1:
            area = sum((t.ry1 - t.ry0) * (t.rx1 - t.rx0) for t in planned)
            weights[i] *= area / (shape[0] * shape[1])
        tiles[i] = max(len(planned), 1)
    if params.method == "grouped":
        for group in job.sets:
            shape = (len(group), *job.items[group[0]].array.shape)
            try:
                n = len(plan_stack(shape, params, np.zeros((len(group) - 1, 2))))
            except ValueError:
                n = 1
            as_one.update(dict.fromkeys(group, n))
    two = params.method == "grouped" and params.grouped.two_stage
    return RunEstimate(weights, stages=2 if two else 1, tiles=tiles, stack_tiles=as_one,
                       clock=lambda: time.monotonic())


class ProgressPanel(QWidget):
    """One bar per pipeline stage with counts, an overall line and Cancel."""

    cancelRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        grid = QGridLayout()
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setHorizontalSpacing(6)
        grid.setVerticalSpacing(1)
        self.grid = grid
        self.columns = 1  # 2 on a short screen: the stages in two columns, half the height
        self.rows: dict[str, tuple[QLabel, QProgressBar]] = {}
        small = QFont(self.font())
        small.setPointSizeF(max(7.0, small.pointSizeF() * 0.9))
        for stage, label in STAGES:
            name = QLabel(label, self)
            name.setFont(small)
            bar = QProgressBar(self)
            bar.setRange(0, 1)
            bar.setValue(0)
            bar.setFormat("")
            bar.setTextVisible(True)
            bar.setFixedHeight(15)
            bar.setFont(small)
            self.rows[stage] = (name, bar)
        self.overall = _RightElided("idle", self)
        # fixed height and no word wrap: a new text must not re-layout the dock on every update
        self.overall.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.setToolTip("Stop the run (Esc); results computed so far are kept")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancelRequested)
        row = QHBoxLayout()
        row.addWidget(self.overall, 1)
        row.addWidget(self.cancel_button)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(grid)
        lay.addLayout(row)
        self._t0 = 0.0
        self.last_stage: str | None = None
        self._running = False
        self._item = ""
        self._detail = ""
        self._stage_t0 = 0.0
        self._last_done = 0
        self._passes = 1
        self._eta: float | None = None
        self._eta_of = "stage"  # what the panel's own estimate covers: the 'stage' or 'image'
        #: the whole run's estimate (the command line's), None for a preview
        self.estimate: RunEstimate | None = None
        self._sets: list = []  # the job's sets still to start
        self._begun: list = []  # the estimate's items under way
        self._tile = ""  # a large image's tiles written so far, on the overall line
        self._tiles_t0 = 0.0
        self.first_run = True  # the first run of a session loads (or compiles) the numeric code
        # the elapsed time ticks every second, not only when the pipeline reports
        self.clock = QTimer(self)
        self.clock.setInterval(1000)
        self.clock.timeout.connect(self._render)
        self.set_method("global")

    def set_method(self, method: str, one_model: bool = False, sets_only: bool = False) -> None:
        # 'global' builds one Gram matrix; 'grouped' groups similar patches instead;
        # one model for a set: its images are denoised one after another in one run;
        # under 'grouped' a set is a sequence, whose sweep reports its pages instead
        self.shown = [stage for stage, _ in STAGES
                      if not (stage == "gram" and method != "global")
                      and not (stage == "grouping" and method == "global")
                      and not (stage == "image" and (not one_model or method == "grouped"))
                      and not (stage == "page" and (not one_model or method != "grouped"))]
        if sets_only and method == "grouped":  # sequences only: their sweep reports its pages
            self.shown = [s for s in self.shown if s in ("noise", "page", "metrics")]
        self._place_rows()

    def set_columns(self, columns: int) -> None:
        """The stages in ``columns`` columns (2 on a short screen)."""
        self.columns = max(1, int(columns))
        self._place_rows()

    def _place_rows(self) -> None:
        """The shown stages, in order, down the columns."""
        for name, bar in self.rows.values():
            self.grid.removeWidget(name)
            self.grid.removeWidget(bar)
            name.hide()
            bar.hide()
        per = -(-len(self.shown) // self.columns)
        for i, stage in enumerate(self.shown):
            name, bar = self.rows[stage]
            col, row = divmod(i, per)
            self.grid.addWidget(name, row, 2 * col)
            self.grid.addWidget(bar, row, 2 * col + 1)
            name.show()
            bar.show()
        for c in range(4):
            self.grid.setColumnStretch(c, 1 if c % 2 and c < 2 * self.columns else 0)

    def start(self, method: str, n_items: int, one_model: bool = False,
              sets_only: bool = False, passes: int = 1, estimate: RunEstimate | None = None,
              sets=()) -> None:
        """A run begins: ``passes`` is how many passes a sequence's sweep makes (the
        grouped method's stages), for the estimate of the time left; ``estimate`` the
        whole run's (:func:`run_estimate`), its items the job's indices; ``sets`` the
        job's sets (tuples of indices) in the order they run."""
        self.estimate = estimate
        self._sets = [tuple(g) for g in sets if len(g) > 1]
        self._begun = []
        self.set_method(method, one_model, sets_only)
        self._passes = passes
        for _, bar in self.rows.values():
            bar.setRange(0, 1)
            bar.setValue(0)
            bar.setFormat("")
        self._t0 = time.monotonic()
        self.last_stage = None
        self._running = True
        self._eta = None
        self._item = f"starting ({n_items} image{'s' if n_items != 1 else ''})…"
        self._tile = ""
        self._detail = ""
        self.clock.start()
        self._render()
        self.cancel_button.setEnabled(True)

    def elapsed(self) -> float:
        return time.monotonic() - self._t0

    def _render(self) -> None:
        """The overall line: item, stage, elapsed seconds and the remaining-time estimate."""
        if not self._running:
            return
        el = self.elapsed()
        parts = [self._item + self._tile]
        if self._detail:
            parts.append(self._detail)
        elif self.last_stage is None and el >= 3:
            parts.append("loading the numeric code (numba compiles it on the first run after "
                         "an install: about 20 s)" if self.first_run else "preparing")
        # the times first: a narrow dock cuts the end of the line, not the estimate
        text = f"{el:.0f} s"
        run_left = self.run_left()
        if run_left is not None and run_left >= 1:
            text += f" · about {_duration(run_left)} left"
        if self.estimate is not None and self.estimate.fraction():
            text += f" (run {100 * self.estimate.fraction():.0f} %)"
        if (run_left is None or run_left < 1) and self._eta is not None and self._eta >= 1:
            # the whole run's rate not measured yet: this stage's (or image's), said so
            text += f" · this {self._eta_of} about {_duration(self._eta)}"
        text += " · " + " — ".join(parts)
        self.overall.setText(text)
        self.overall.setToolTip(text)

    def run_left(self) -> float | None:
        """Seconds left for the whole run (every image, tile, page and rank) at its rate so
        far (:class:`~kpca_denoise.cli_progress.RunEstimate`), None until measured."""
        return self.estimate.left() if self.estimate is not None else None

    def item_started(self, index: int, count: int, name: str) -> None:
        for _, bar in self.rows.values():
            bar.setRange(0, 1)
            bar.setValue(0)
            bar.setFormat("")
        # index -1: a set fitted together, ``name`` says what it is
        self._item = name if index < 0 else f"image {index + 1}/{count}: {name}"
        est = self.estimate
        if est is not None:
            for key in self._begun:  # the items before are through
                est.finish(key)
            self._begun = [index] if index >= 0 else list(self._sets.pop(0) if self._sets else ())
            for key in self._begun:
                est.begin(key)
        self._tile, self._tiles_t0 = "", time.monotonic()
        self._detail = ""
        self._eta = None
        self._render()

    def update_stage(self, stage: str, done: int, total: int, message: str = "") -> None:
        row = self.rows.get(stage)
        if self.last_stage == "eigensolver" and stage != "eigensolver":
            # the iterative solver stops early when converged: show it as complete
            _, ebar = self.rows["eigensolver"]
            if ebar.value() < ebar.maximum():
                ebar.setRange(0, max(1, ebar.value()))
                ebar.setFormat(f"converged, {ebar.value()} it.")
        now = time.monotonic()
        if stage == "tiles":  # a large image's tiles run at once: their count and pace
            # (not from the first alone: the tile beside it is then nearly done too)
            self._tile = f", tile {done}/{total}" if 0 < done < total else ""
            spent = now - self._tiles_t0
            self._eta = spent / done * (total - done) if done > 1 else None
            self._eta_of = "image"
            if self.estimate is not None:
                self.estimate(ProgressEvent(stage, done, total, message=message))
            self._render()
            return
        if stage != self.last_stage or done <= 0 or done < self._last_done:
            self._stage_t0 = now  # a new stage, or a new pass of it (a sequence's stage 2)
        self.last_stage = stage
        self._last_done = done
        self.first_run = False
        if self.estimate is not None:
            self.estimate(ProgressEvent(stage, done, total, message=message))
        if row is None:  # a step without a bar ('waiting'): its message on the line
            self._detail, self._eta = message, None
            self._render()
            return
        _, bar = row
        total = max(int(total), 1)
        bar.setRange(0, total)
        bar.setValue(min(int(done), total))
        extra = f"  ({message})" if message else ""
        text = f"{done:,} / {total:,}{extra}"
        if bar.fontMetrics().horizontalAdvance(text) > bar.width() - 6:  # a narrow bar
            text = f"{done:,}/{total:,}"  # (at 1366x768 "(stage 2)" ran over the bar's end)
        bar.setFormat(text)
        bar.setToolTip(f"{done:,} / {total:,}{extra}")
        label = dict(STAGES).get(stage, stage)
        self._detail = f"{label} {done:,}/{total:,}" + (f" ({message})" if message else "")
        self._eta = self._estimate(stage, done, total, message, now)
        self._eta_of = "stage"
        self._render()

    def _estimate(self, stage: str, done: int, total: int, message: str, now: float) -> float | None:
        """Seconds left in this stage from its rate so far; for the pre-image of "rank k of n"
        also the n - k ranks after it (each takes about as long).  None while unknown."""
        spent = now - self._stage_t0
        if done <= 0 or spent < 0.5 or stage == "eigensolver":  # the solver stops when it converges
            return None
        per_unit = spent / done
        left = per_unit * (total - done)
        k, n = _rank_of(message)
        if stage == "preimage" and n:
            left += (n - k) * per_unit * total
        if stage == "page" and message == "stage 1":  # the sweep's later passes, about as long
            left += (self._passes - 1) * per_unit * total
        return left

    def finish(self, text: str) -> None:
        self._running = False
        self.clock.stop()
        self._eta = None
        self.overall.setText(text)
        self.cancel_button.setEnabled(False)


class _RightElided(QLabel):
    """One line drawn with "…" at its end when it is wider than the label."""

    def paintEvent(self, event) -> None:  # noqa: N802
        r, fm = self.contentsRect(), self.fontMetrics()
        if fm.horizontalAdvance(self.text()) <= r.width():
            super().paintEvent(event)
            return
        p = QPainter(self)
        p.drawText(r, int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter),
                   fm.elidedText(self.text(), Qt.TextElideMode.ElideRight, r.width()))
        p.end()


def _rank_of(message: str) -> tuple[int, int]:
    """``(k, n)`` from a stage message containing "k of n" (the rank being computed)."""
    m = re.search(r"(\d+) of (\d+)", message or "")
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def _duration(s: float) -> str:
    return f"{s:.0f} s" if s < 90 else f"{s / 60:.0f} min"


class LogView(QPlainTextEdit):
    """Timestamped, read-only log; errors in red."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setReadOnly(True)
        self.setMaximumBlockCount(5000)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.setPlaceholderText("log")
        self.lines: list[str] = []

    def log(self, text: str, level: str = "info") -> None:
        stamp = time.strftime("%H:%M:%S")
        self.lines.append(f"{level}: {text}")
        colour = {"error": "#b71c1c", "warning": "#e65100"}.get(level, "#222222")
        prefix = {"error": "error: ", "warning": "warning: "}.get(level, "")
        self.appendHtml(f'<span style="color:#777">{stamp}</span> '
                        f'<span style="color:{colour}">{html.escape(prefix + text)}</span>')
        self.moveCursor(QTextCursor.MoveOperation.End)


class MessageBanner(QFrame):
    """An inline, non-modal message bar above the images (never a blocking dialog)."""

    _STYLES = {
        "error": "background:#fdecea; color:#611a15; border:1px solid #f5c6cb; border-radius:4px;",
        "warning": "background:#fff4e5; color:#663c00; border:1px solid #ffd8a8; border-radius:4px;",
        "info": "background:#e8f4fd; color:#0d3c61; border:1px solid #b6dcf7; border-radius:4px;",
    }

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.label = QLabel("", self)
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        close = QToolButton(self)
        close.setText("✕")
        close.setAutoRaise(True)
        close.setToolTip("Dismiss")
        close.clicked.connect(self.hide)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(8, 4, 4, 4)
        lay.addWidget(self.label, 1)
        lay.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)
        self.level = "info"
        self.hide()

    def show_message(self, text: str, level: str = "error") -> None:
        self.level = level
        self.setStyleSheet(f"MessageBanner {{{self._STYLES.get(level, self._STYLES['info'])}}}"
                           f" QLabel {{ border: none; background: transparent; }}")
        self.label.setText(text)
        self.show()

    def text(self) -> str:
        return self.label.text() if self.isVisible() else ""


ABOUT_HTML = f"""
<h2>kpca-denoise {__version__}</h2>
<p>Image denoising with kernel principal component analysis. Noisy patches are
mapped into an RBF feature space, projected onto the leading kernel principal
components, and brought back to pixel space by a fixed-point pre-image
iteration.</p>
<p><b>global</b>: one kernel PCA on patches of the image (Mika et al. 1998).<br>
<b>grouped</b>: kernel PCA on groups of similar patches with shrinkage, two
stages, in the spirit of LPG-PCA and BM3D.</p>
<h3>References</h3>
<ol>
<li>B. Schölkopf, A. Smola, K.-R. Müller. <i>Nonlinear component analysis as a
kernel eigenvalue problem.</i> Neural Computation 10(5):1299–1319, 1998.</li>
<li>S. Mika, B. Schölkopf, A. Smola, K.-R. Müller, M. Scholz, G. Rätsch.
<i>Kernel PCA and de-noising in feature spaces.</i> Advances in Neural
Information Processing Systems 11 (NIPS 1998), 536–542, 1999.</li>
<li>L. Zhang, W. Dong, D. Zhang, G. Shi. <i>Two-stage image denoising by
principal component analysis with local pixel grouping (LPG-PCA).</i> Pattern
Recognition 43(4):1531–1549, 2010.</li>
<li>K. Dabov, A. Foi, V. Katkovnik, K. Egiazarian. <i>Image denoising by sparse
3-D transform-domain collaborative filtering (BM3D).</i> IEEE Transactions on
Image Processing 16(8):2080–2095, 2007.</li>
</ol>
<p>Licence: BSD-3-Clause. Sample images: scikit-image and scikit-learn data
(see <code>sample_images/README.md</code>).</p>
"""


class TextDialog(QDialog):
    """Rich text with a Close button, shown with ``show()`` (non-modal: never blocks the event loop)."""

    def __init__(self, title: str, text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        self.setModal(False)
        self.browser = QTextBrowser(self)
        self.browser.setOpenExternalLinks(True)
        self.browser.setHtml(text)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.close)
        lay = QVBoxLayout(self)
        lay.addWidget(self.browser)
        lay.addWidget(buttons)
        self.resize(640, 540)


class AboutDialog(TextDialog):
    """Method, references, licence."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("About kpca-denoise", ABOUT_HTML, parent)


def help_html(shortcuts: list[tuple[str, str]], readme: str) -> str:
    """The F1 help: keys, what the methods and ranks mean, where the documentation is."""
    rows = "".join(f"<tr><td><b>{html.escape(k)}</b></td><td>{html.escape(t)}</td></tr>"
                   for t, k in shortcuts if k)
    return f"""
<h2>kpca-denoise help</h2>
<h3>Keys</h3>
<table cellspacing="4">{rows}</table>
<p>Mouse: wheel zooms, drag pans (every view follows); click a view or the spectrum to select
a rank; drag the histogram's black and white points to change the contrast of every view.</p>
<h3>Method</h3>
<p><b>grouped</b> (default): kernel PCA on groups of similar patches with shrinkage, two
stages. A rank keeps that many of each group's kernel components whole (low ranks smooth, high
ranks keep noise); <i>auto</i> is the shrinkage, usually the best.
The effective rank under a view is the mean number of components kept per group.<br>
<b>global</b>: one kernel PCA on patches sampled from the image (Mika et al. 1998), with a live
eigen-spectrum; <i>auto</i> is 16 for images and the rank from the noise level for patch sets
(patch sets always use one global kernel PCA).<br>
<b>Set fit</b> (Run menu): one 'global' model for the images of one kind, kept beside each
image's own results (tick "set fit" to see it). Exports write exactly the results shown and
ask before computing anything missing.</p>
<h3>Documentation</h3>
<p>README: <code>{html.escape(readme)}</code> (method, parameters, file formats, benchmarks).<br>
Command line: <code>kpca-denoise --help</code>, <code>kpca-denoise denoise --help</code>; a sidecar
JSON written with every export re-runs it: <code>kpca-denoise denoise IN -o OUT --params SIDECAR</code>.</p>
"""


class HelpDialog(TextDialog):
    """F1: keys, methods, documentation."""

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__("kpca-denoise help", text, parent)
