"""The eigen-spectrum plot: live eigenvalues, cumulative explained variance, ranks.

One ``PlotDataItem`` per curve, updated with ``setData`` (the eigensolver
sends a new estimate every iteration; rebuilding the plot each time would
flicker and cost the GUI thread).  Clicking the plot selects the rank under
the cursor.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QWidget

__all__ = ["SpectrumPlot"]

#: the status line over the plot: its look, its height in pixels, and its empty text
_STATUS_STYLE = {"size": "9pt", "color": "#444444"}
_STATUS_HEIGHT = 18
_BLANK = "\u00a0"
#: the left axis of a fitted model's spectrum (of its centred Gram matrix); short, so a
#: low dock (1366x768) shows it whole
_EIGEN_LABEL = "eigenvalue λₖ"
#: the grouped method's left axis ("eigenvalue per group" was cut in a low dock)
_GROUP_LABEL = "λₖ per group"


class _ComponentAxis(pg.AxisItem):
    """Component numbers: whole numbers only (an empty plot ticked 0.1 ... 0.9)."""

    def tickValues(self, minVal, maxVal, size):  # noqa: N802 (pyqtgraph's name)
        levels = [(sp, [v for v in vals if float(v).is_integer()])
                  for sp, vals in super().tickValues(minVal, maxVal, size) if sp >= 1]
        return levels or [(1.0, [float(v) for v in range(int(np.ceil(minVal)),
                                                             int(np.floor(maxVal)) + 1)])]


class _DecadeAxis(pg.AxisItem):
    """A log axis labelled at whole decades only: over two decades or so its minor ticks
    (0.08, 0.06, ...) were labelled too, one over another."""

    def logTickStrings(self, values, scale, spacing):  # noqa: N802 (pyqtgraph's name)
        strings = super().logTickStrings(values, scale, spacing)
        return [s if abs(float(v) - round(float(v))) < 1e-6 else ""
                for v, s in zip(values, strings)]


class SpectrumPlot(pg.PlotWidget):
    """Eigenvalues λₖ (log scale, left axis) and cumulative explained variance (right)."""

    rankClicked = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent=parent, background="w",
                         axisItems={"bottom": _ComponentAxis(orientation="bottom"),
                                    "left": _DecadeAxis(orientation="left")})
        pi = self.getPlotItem()
        pi.setLogMode(x=False, y=True)
        # the y range is set in whole half-decades and only when the data leave it:
        # auto-ranging on every live update re-laid out the log axis each time, and
        # drawing its labels held the event loop for ~100 ms per update (measured)
        pi.enableAutoRange(y=False)
        self._yrange: tuple | None = None
        # the log axis's own y grid (with its minor ticks) took ~40 ms of software
        # rendering per repaint: decade lines drawn by _fit_y instead (measured 60 -> 20 ms)
        pi.showGrid(x=True, y=False, alpha=0.25)
        self._decade_lines: list = []
        pi.setLabel("bottom", "component k")
        pi.setLabel("left", _EIGEN_LABEL)
        # a log axis of values, not "(x0.001)" milli-units in front of the label
        pi.getAxis("left").enableAutoSIPrefix(False)
        # before any data: whole components, and whole decades (a log axis left to its
        # default range labelled 2 ... 9 over one another)
        pi.setXRange(0.5, 8.5, padding=0)
        pi.setYRange(-4.0, 1.0, padding=0)
        pi.setMenuEnabled(False)
        pi.hideButtons()
        # the grouped method's spread over its groups: a 10-90 % band and the median
        edge = pg.mkPen((31, 95, 191, 110), width=1)
        self.band_lo = pi.plot([], [], pen=edge)
        self.band_hi = pi.plot([], [], pen=edge)
        self.band = pg.FillBetweenItem(self.band_lo, self.band_hi, brush=(31, 95, 191, 45))
        pi.addItem(self.band)
        self.median = pi.plot([], [], pen=pg.mkPen("#1f5fbf", width=1, style=Qt.PenStyle.DashLine))
        self.curve = pi.plot([], [], pen=pg.mkPen("#1f5fbf", width=2), symbol="o", symbolSize=5,
                             symbolBrush="#1f5fbf", symbolPen=None, name="λₖ")
        # the cumulative curve lives in its own ViewBox bound to the right axis
        self.cum_vb = pg.ViewBox(enableMenu=False)
        pi.showAxis("right")
        pi.scene().addItem(self.cum_vb)
        right = pi.getAxis("right")
        right.linkToView(self.cum_vb)
        right.setLogMode(False, False)  # setLogMode(y=True) above switched every axis
        right.enableAutoSIPrefix(False)  # a fraction, not "x0.001" milli-units
        right.setLabel("cumulative variance", color="#c0392b")  # fits a 768-pixel screen's dock
        self.cum_vb.setXLink(pi)
        self.cum_vb.setYRange(0.0, 1.02, padding=0)
        self.cum_vb.setMouseEnabled(x=False, y=False)
        self.cum_curve = pg.PlotDataItem([], [], pen=pg.mkPen("#c0392b", width=2, style=Qt.PenStyle.DashLine))
        self.cum_vb.addItem(self.cum_curve)
        pi.vb.sigResized.connect(self._sync_views)
        self._show_cumulative(False)
        # the status line above the plot, not in it: inside, it covered the rank marks'
        # labels and the curves at the top; one low line, there even when empty, so the
        # plot does not jump when it appears
        pi.setTitle(_BLANK, **_STATUS_STYLE)
        pi.layout.setRowFixedHeight(0, _STATUS_HEIGHT)
        pi.titleLabel.setMaximumHeight(_STATUS_HEIGHT)
        self.message = pg.TextItem("", color="#777777", anchor=(0.5, 0.5))
        self.message.setParentItem(pi.vb)
        self._rank_lines: dict = {}
        self.ranks: tuple = ()
        self.selected = None
        self.eigenvalues = np.zeros(0)
        self.total_variance: float | None = None
        self.group_text = ""  # the grouped method's spectrum: which groups it is of
        self.n_updates = 0
        self.scene().sigMouseClicked.connect(self._on_click)
        self.setMinimumHeight(150)
        self.show_message("The eigen-spectrum appears here while the eigensolver runs.")

    def _sync_views(self) -> None:
        vb = self.getPlotItem().vb
        self.cum_vb.setGeometry(vb.sceneBoundingRect())
        self.cum_vb.linkedViewChanged(vb, self.cum_vb.XAxis)
        r = vb.boundingRect()
        self.message.setPos(r.width() / 2, r.height() / 2)

    def _show_cumulative(self, on: bool) -> None:
        """The right axis only with its curve (an axis with no curve read as a fault)."""
        self.getPlotItem().getAxis("right").setVisible(on)

    def show_message(self, text: str) -> None:
        self.message.setText(text)
        self._sync_views()

    def clear_spectrum(self, message: str = "") -> None:
        """No spectrum (``message`` says why); the compared ranks stay marked, but not
        where 'auto' fell: that was the spectrum's own (a new run's, another method's
        would be stale)."""
        if any(key is None for key, _ in self.ranks):
            self.set_ranks(tuple(key for key, _ in self.ranks if key is not None), self.selected)
        self.eigenvalues = np.zeros(0)
        self.total_variance = None
        self.group_text = ""
        self.curve.setData([], [])
        self._set_spread(None)
        self.cum_curve.setData([], [])
        self._show_cumulative(False)
        self.set_status("")
        self.show_message(message)

    def set_eigenvalues(self, eigenvalues: np.ndarray, *, final: bool = False,
                        total_variance: float | None = None) -> None:
        """Show the current estimate; ``final`` with the trace adds the cumulative curve."""
        ev = np.asarray(eigenvalues, dtype=np.float64).ravel()
        self.eigenvalues = ev
        self.group_text = ""
        self._set_spread(None)
        self.getPlotItem().setLabel("left", _EIGEN_LABEL)
        self.n_updates += 1
        k = np.arange(1, ev.size + 1)
        pos = ev > 0  # a log axis cannot show zeros (round-off clipped by the fit)
        self.curve.setData(k[pos], ev[pos])
        self._fit_y(ev[pos])
        _set_text(self.message, "" if ev.size else "no spectrum for this method")
        if final and total_variance and total_variance > 0 and ev.size:
            self.total_variance = total_variance
            cum = np.cumsum(np.clip(ev, 0, None)) / total_variance
            self.cum_curve.setData(k, cum)
            self._show_cumulative(True)
            self.set_status(f"top {ev.size}: {100 * cum[-1]:.1f}% of the variance")
            self.cum_vb.setYRange(0.0, 1.0, padding=0.02)
        elif not final:
            self.cum_curve.setData([], [])
            self._show_cumulative(False)
            self.set_status("eigensolver iterating…")
        else:
            # no trace known (e.g. a set's second model): no curve, not the last image's
            self.total_variance = None
            self.cum_curve.setData([], [])
            self._show_cumulative(False)
            self.set_status("")
        if ev.size:
            self.getPlotItem().setXRange(0.5, ev.size + 0.5, padding=0.02)
        self._update_rank_lines()

    def set_group_spectrum(self, spectrum: np.ndarray, what: str,
                           spread: np.ndarray | None = None) -> None:
        """The grouped method's mean spectrum of its groups' kernel PCA (``what`` says which
        groups, the status line shows it): the components an explicit rank keeps whole are its first ones, and the
        cumulative curve says the share of a group's variance that rank keeps.  ``spread``:
        the 10 %, 50 % and 90 % quantiles over the groups, (3, n), drawn as a band and a
        dashed median."""
        ev = np.clip(np.asarray(spectrum, dtype=np.float64).ravel(), 0.0, None)
        total = float(ev.sum()) or None
        if ev.size and ev[0] > 0:  # the centring's null component: no room on a log axis
            ev = ev[: max(1, int(np.count_nonzero(ev > 1e-6 * ev[0])))]
        self.set_eigenvalues(ev, final=True, total_variance=total)
        self.getPlotItem().setLabel("left", _GROUP_LABEL)
        if spread is not None and ev.size and ev[0] > 0:
            q = np.clip(np.asarray(spread, dtype=np.float64)[:, :ev.size], 1e-6 * ev[0], None)
            self._set_spread(q)
            self._fit_y(np.concatenate([ev[ev > 0], q.ravel()]))
            what += ": mean, 10–90 % band, dashed median"
        else:
            what += ": mean"
        self.group_text = what
        self._status_for_rank()

    def _set_spread(self, q: np.ndarray | None) -> None:
        """The band between the 10 % and 90 % quantiles and the median; None: none."""
        k = np.arange(1, q.shape[1] + 1) if q is not None else []
        for item, row in ((self.band_lo, 0), (self.median, 1), (self.band_hi, 2)):
            item.setData(k, q[row] if q is not None else [])
        self.band.setVisible(q is not None)  # the fill keeps its last shape when emptied

    def _status_for_rank(self) -> None:
        """The grouped spectrum's line: which groups, and what the selected rank keeps."""
        if not self.group_text:
            return
        text = self.group_text
        cum = self.cum_curve.yData
        if isinstance(self.selected, int) and cum is not None and 0 < self.selected <= len(cum):
            text += f"; rank {self.selected} keeps {100 * cum[self.selected - 1]:.0f}% of the variance"
        self.set_status(text)

    def status_text(self) -> str:
        """The status line above the plot ('' when empty)."""
        text = self.getPlotItem().titleLabel.text
        return "" if text == _BLANK else text

    def set_status(self, text: str) -> None:
        """Set the status line (only when it changes: setting it re-lays it out)."""
        if text != self.status_text():
            self.getPlotItem().titleLabel.setText(text or _BLANK, **_STATUS_STYLE)

    def solver_finished(self) -> None:
        """The run moved past the eigensolver: the estimate shown is its final one."""
        if self.status_text() == "eigensolver iterating…":
            self.set_status(f"eigensolver converged: {self.eigenvalues.size} components")

    def _fit_y(self, positive: np.ndarray) -> None:
        """Log10 y range in half-decade steps, changed only when the data leave it
        or use less than a third of it."""
        if positive.size == 0:
            return
        lo = float(np.log10(positive.min()))
        hi = float(np.log10(positive.max()))
        cur = self._yrange
        if cur is not None and cur[0] <= lo and hi <= cur[1] and (hi - lo) >= (cur[1] - cur[0]) / 3:
            return
        new = (np.floor(lo * 2 - 0.2) / 2, np.ceil(hi * 2 + 0.2) / 2)
        self._yrange = new
        pi = self.getPlotItem()
        pi.setYRange(*new, padding=0)
        for line in self._decade_lines:
            pi.removeItem(line)
        self._decade_lines = []
        for dec in range(int(np.ceil(new[0])), int(np.floor(new[1])) + 1):
            line = pg.InfiniteLine(pos=dec, angle=0, movable=False, pen=pg.mkPen((0, 0, 0, 60)))
            pi.addItem(line, ignoreBounds=True)
            self._decade_lines.append(line)

    def set_ranks(self, ranks: tuple, selected=None, auto_rank: float | None = None) -> None:
        """Mark the compared ranks; the selected one is drawn bold.  ``None`` (auto) is
        marked at ``auto_rank`` when the fit chose one (patch sets) or the grouped method's
        shrinkage kept that many components per group on average, else not at all."""
        marks = tuple((r, r) for r in ranks if r is not None)
        if None in ranks and auto_rank is not None:
            marks += ((None, round(float(auto_rank), 1)),)
        if marks != self.ranks:
            for line in self._rank_lines.values():
                self.getPlotItem().removeItem(line)
            self._rank_lines = {}
            # labels at staggered heights, so near ranks ("r=8", "r=16" on a plot of
            # 898 components) do not print over each other, nor over the centred message
            for i, (key, pos) in enumerate(sorted(marks, key=lambda m: m[1])):
                text = (f"r={pos}" if key is not None else f"auto={pos:g}" if float(pos).is_integer()
                        else f"auto≈{pos:g}")
                line = pg.InfiniteLine(pos=pos, angle=90, movable=False, label=text,
                                       labelOpts={"position": 0.9, "color": "#555",
                                                  "fill": (255, 255, 255, 200)})
                self.getPlotItem().addItem(line, ignoreBounds=True)
                self._rank_lines[key] = line
            self.ranks = marks
        self.selected = selected
        self._update_rank_lines()
        self._status_for_rank()

    def label_heights(self) -> dict:
        """Where each rank mark's label sits, 0 (bottom) to 1 (top) of the plot: on the side
        of the plot the curve leaves free at that rank (below a curve in its upper half,
        above it in its lower half), neighbours staggered so they do not print over each
        other."""
        ev = self.eigenvalues
        lo, hi = self._yrange if self._yrange is not None else (-4.0, 1.0)
        out, side_count = {}, {True: 0, False: 0}
        for key, line in sorted(self._rank_lines.items(), key=lambda kv: kv[1].value()):
            k = int(round(line.value()))
            y = ev[min(max(k, 1), ev.size) - 1] if ev.size else 0.0
            f = (np.log10(y) - lo) / max(hi - lo, 1e-9) if y > 0 else 0.0
            low = f > 0.5  # the curve is high here: the label goes under it
            n = side_count[low]
            side_count[low] += 1
            step = 0.13 * (n % 3)
            out[key] = 0.06 + step if low else 0.94 - step
        return out

    def _place_labels(self) -> None:
        for key, pos in self.label_heights().items():
            label = self._rank_lines[key].label
            if label.orthoPos != pos:
                label.setPosition(pos)

    def _update_rank_lines(self) -> None:
        self._place_labels()
        for r, line in self._rank_lines.items():
            sel = r == self.selected
            line.setPen(pg.mkPen("#e67e22" if sel else "#888888", width=3 if sel else 1,
                                 style=Qt.PenStyle.SolidLine if sel else Qt.PenStyle.DotLine))

    def rank_at(self, x: float) -> int | None:
        """The component index nearest to data coordinate x (None if outside)."""
        n = self.eigenvalues.size
        if n == 0:
            return None
        k = int(round(x))
        return min(max(k, 1), n)

    def _on_click(self, ev) -> None:
        if ev.button() != Qt.MouseButton.LeftButton:
            return
        vb = self.getPlotItem().vb
        if not vb.sceneBoundingRect().contains(ev.scenePos()):
            return
        k = self.rank_at(vb.mapSceneToView(ev.scenePos()).x())
        if k is not None:
            self.rankClicked.emit(k)


def _set_text(item: pg.TextItem, text: str) -> None:
    """Set a TextItem's text only when it changes (setting it re-renders it)."""
    if item.textItem.toPlainText() != text:
        item.setText(text)
