"""Image views: one panel per image, the comparison grid, the split view.

Every panel owns a pyqtgraph ``ViewBox``; the panels of the grid are linked
with ``setXLink``/``setYLink``, and :class:`ZoomLink` keeps the split view on
the grid's centre and zoom, so zoom and pan are shared everywhere.  The
views only draw arrays they are given; nothing here computes a result.
"""

from __future__ import annotations

import re

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QIcon, QImage, QPainter, QPen, QPixmap
from PySide6.QtWidgets import (
    QComboBox,
    QFrame,
    QGraphicsRectItem,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QSlider,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

# the texts under the views are built without Qt (texts.py); kept importable from here
from .model import LARGE_VIEW_PIXELS, SplitComposite, sampled
from .texts import format_metrics, format_value, region_stats

__all__ = ["ImagePanel", "DrawingViewBox", "ComparisonGrid", "SplitView", "ZoomLink", "format_metrics",
           "format_value", "region_stats", "one_to_one", "zoom_to", "view_scale", "ZOOM_STEPS",
           "MARK_MIN", "ThumbStrip", "thumbnail", "to_qimage", "Loupe", "LOUPE_PIXELS", "LOUPE_ZOOM"]

# images are (row, column) arrays everywhere in this project
pg.setConfigOptions(imageAxisOrder="row-major", antialias=True)

#: smallest side of an image view; the grid chooses the number of columns that gives
#: the views the largest image (at least :data:`CELL_WIDTH` pixels wide each) and wraps
#: the rest onto further rows
MIN_VIEW = 80
#: side of a thumbnail in the strip under a view shown alone
THUMB = 72
#: the loupe: image pixels a side, screen pixels per image pixel
LOUPE_PIXELS = 48
LOUPE_ZOOM = 4
#: the zoom steps (screen pixels per image pixel) of View › Zoom, besides fit
ZOOM_STEPS = (0.5, 1.0, 2.0, 4.0)
#: screen pixels a marked region (the preview's) is drawn at least: a 256 px region of a
#: 12 Mpx photo at fit zoom was a 10 px box
MARK_MIN = 28
CELL_WIDTH = 90
#: the height a view keeps where the grid is short (a message over it, a low window) or
#: the image thin (300 x 4 is a line in any view): below it the grid scrolls rather than
#: squeeze the titles and the lines under the views over the images
MIN_VIEW_SQUEEZED = 32

_SELECTED_STYLE = "ImagePanel { border: 2px solid #2f7bd8; border-radius: 3px; }"
_NORMAL_STYLE = "ImagePanel { border: 2px solid transparent; }"


class _ElidedLabel(QLabel):
    """A one-line label that, when its panel is narrower than the text, drops a closing
    remark in brackets ("auto (shrinkage)" -> "auto") or else is drawn elided in the
    middle ("resi…ank auto"), instead of cut at both ends, so which view it is stays
    readable; ``text()`` and the tooltip keep it all."""

    def paintEvent(self, event) -> None:  # noqa: N802
        r = self.contentsRect()
        fm = self.fontMetrics()
        text = self.text()
        if fm.horizontalAdvance(text) <= r.width():
            super().paintEvent(event)
            return
        p = QPainter(self)
        p.drawText(r, int(self.alignment()), self.shown(r.width()))
        p.end()

    def shown(self, width: int) -> str:
        """What fits in ``width`` pixels: the text, without its closing remark in
        brackets, or elided in the middle."""
        fm, text = self.fontMetrics(), self.text()
        if fm.horizontalAdvance(text) <= width:
            return text
        head = text.split(" (")[0] if text.endswith(")") else text
        return head if fm.horizontalAdvance(head) <= width else fm.elidedText(
            head, Qt.TextElideMode.ElideMiddle, width)


#: a remark in brackets, words only, closing a part of a line under a view ("(all kept)")
_REMARK = re.compile(r" \([^()\d]*\)(?= · |\n|$)")


def fit_lines(text: str, width_of, width: float, n: int) -> list[str]:
    """``text`` in at most ``n`` lines of ``width``: broken at its newlines, then between
    its " · " parts, then between words (a number kept with the word before it); the
    last line, when more would follow, keeps the whole parts that fit and ends in " …"
    (its first part alone when the mark does not fit too; cut within a part only when
    that does not fit); a line still too wide is elided where it is drawn.  Before any of
    that, a remark in brackets of words only (" (all kept)") is left out, the last first,
    where the text does not fit with it.  ``width_of(s)`` measures a string."""
    lines = _fit_lines(text, width_of, width, n)
    remarks = list(_REMARK.finditer(text))
    if remarks:
        last = remarks[-1]
        # its part on one line ("eff. rank 31.0 (all kept)", not "eff." and the rest below)
        start = max(text.rfind(" · ", 0, last.start()) + 3, text.rfind("\n", 0, last.start()) + 1)
        if len(lines) > n or width_of(text[start:last.end()]) > width:
            return fit_lines(text[:last.start()] + text[last.end():], width_of, width, n)
    return _fit_lines(text, width_of, width, n, mark=True) if len(lines) > n else lines


def _fit_lines(text: str, width_of, width: float, n: int, mark: bool = False) -> list[str]:
    """:func:`fit_lines` without leaving remarks out: every line the text breaks into, or
    with ``mark``, ``n`` lines, the last marked."""
    sep = " · "
    lines: list[str] = []
    for para in text.split("\n"):
        cur = ""
        for part in para.split(sep):
            # a number stays with its name ("σ ≈ 0.27", "PSNR 30.1 dB")
            pieces = [part] if width_of(part) <= width else re.split(r" (?![\d≈∞+\-]|dB\b)", part)
            for k, piece in enumerate(pieces):
                glue = (sep if k == 0 else " ") if cur else ""
                if cur and width_of(cur + glue + piece) > width:
                    lines.append(cur)
                    cur = piece
                else:
                    cur += glue + piece
        lines.append(cur)
    if mark and len(lines) > n:
        tail = sep.join(lines[n - 1:])
        # whole parts first ("σ ≈ 0.32 …", not "σ ≈ 0.3…"), characters only if none fits
        parts = tail.split(sep)
        keep = next((k for k in range(len(parts) - 1, 0, -1)
                     if width_of(sep.join(parts[:k]) + " …") <= width), 0)
        if keep:
            tail = sep.join(parts[:keep]) + " …"
        elif width_of(parts[0]) <= width:  # no room for the mark: the tooltip has the rest
            tail = parts[0]
        else:
            while tail and width_of(tail + "…") > width:
                tail = tail[:-1]
            tail = tail.rstrip(" ·") + "…"
        lines = lines[:n - 1] + [tail]
    return lines


class _FittedLines(QLabel):
    """A label of a fixed number of lines that breaks its text between its parts
    (:func:`fit_lines`) rather than anywhere, and marks what it leaves out with "…"
    (a wrapped third line was cut off, number and all); ``text()`` and the tooltip keep
    it all."""

    def __init__(self, n_lines: int, parent: QWidget | None = None) -> None:
        super().__init__("", parent)
        self.n_lines = 0
        self.set_lines(n_lines)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)

    def set_lines(self, n_lines: int) -> None:
        if n_lines != self.n_lines:
            self.n_lines = n_lines
            self.setFixedHeight(n_lines * self.fontMetrics().lineSpacing() + 2)
            self.update()

    def lines(self) -> list[str]:
        fm = self.fontMetrics()
        # a few pixels spare: elidedText, which paints, wants a little more than the advance
        return fit_lines(self.text(), fm.horizontalAdvance, self.contentsRect().width() - 4,
                         self.n_lines) if self.text() else []

    def paintEvent(self, event) -> None:  # noqa: N802
        r, fm = self.contentsRect(), self.fontMetrics()
        lines = self.lines()
        p = QPainter(self)
        top = r.top() + (r.height() - len(lines) * fm.lineSpacing()) // 2
        for i, line in enumerate(lines):
            p.drawText(r.left(), top + i * fm.lineSpacing(), r.width(), fm.lineSpacing(),
                       int(Qt.AlignmentFlag.AlignCenter), fm.elidedText(
                           line, Qt.TextElideMode.ElideRight, r.width()))
        p.end()


class DrawingViewBox(pg.ViewBox):
    """A ViewBox on which Shift + left drag draws a rectangle (rubber band) instead of
    panning; ``regionDrawn`` gives it in view coordinates (x0, y0, x1, y1)."""

    regionDrawn = Signal(object)

    def mouseDragEvent(self, ev, axis=None) -> None:  # noqa: N802 (pyqtgraph's name)
        if (ev.button() != Qt.MouseButton.LeftButton
                or not ev.modifiers() & Qt.KeyboardModifier.ShiftModifier):
            super().mouseDragEvent(ev, axis)
            return
        ev.accept()
        if ev.isFinish():
            self.rbScaleBox.hide()
            a, b = self.mapToView(ev.buttonDownPos()), self.mapToView(ev.pos())
            self.regionDrawn.emit((min(a.x(), b.x()), min(a.y(), b.y()),
                                   max(a.x(), b.x()), max(a.y(), b.y())))
        else:
            self.updateScaleBox(ev.buttonDownPos(), ev.pos())


class ImagePanel(QFrame):
    """A titled image view with a line of metrics under it.

    ``data`` is the array drawn, in the source's units (display only drops an
    alpha channel or tiles a patch set); ``hovered`` reports the pixel under
    the mouse.
    """

    clicked = Signal()
    doubleClicked = Signal()
    hovered = Signal(object)  # (x, y, value) in image pixels, or None off the image

    def __init__(self, title: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ImagePanel")
        self.setStyleSheet(_NORMAL_STYLE)
        self.title = _ElidedLabel(title, self)
        f = QFont(self.title.font())
        f.setBold(True)
        self.title.setFont(f)
        self.title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.view = pg.GraphicsView(self)
        self.view.setBackground("#202020")
        self.vb = DrawingViewBox(lockAspect=True, invertY=True, enableMenu=False)
        self.vb.setDefaultPadding(0.0)
        self.view.setCentralItem(self.vb)
        # drawn at screen resolution: a 12 Mpx photo in a small panel is drawn from a
        # screen-sized reduction, not from a full-size ARGB copy per panel
        self.image = pg.ImageItem(autoDownsample=True)
        self.vb.addItem(self.image, ignoreBounds=True)  # the view's bounds: self._extent
        # a large image is drawn from the part in view, every s-th pixel of it for a
        # screen-sized picture (s from the zoom): pyqtgraph's own reduction of a whole
        # 12 Mpx photo took 0.1-0.2 s per view and per zoom step on the window's thread
        self._part: tuple | None = None  # (y0, y1, x0, x1, step) drawn of a large image
        # the whole image's extent, unseen, so that fitting the view fits the image, not the part
        self._extent = QGraphicsRectItem()
        self._extent.setPen(QPen(Qt.PenStyle.NoPen))
        self.vb.addItem(self._extent)
        self._levels = None
        self.vb.sigRangeChanged.connect(lambda *_: self._draw_part())
        # the message of an empty view, over the view's widget (not in its coordinates,
        # which a linked view may have panned anywhere): centred, wrapped to its width
        self.placeholder = QLabel("", self.view)
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setWordWrap(True)
        self.placeholder.setStyleSheet("color: #bbbbbb; background: transparent;")
        self.placeholder.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.placeholder.hide()
        self.view.installEventFilter(self)
        # narrow panels break the line (PSNR, SSIM, effective rank, "converged") between
        # its parts; two lines in every panel: linked views must keep one height per row
        # (pyqtgraph links views by their screen extent); the full text is in the tooltip
        self.metrics = _FittedLines(2, self)
        self.title.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.view.setMinimumSize(MIN_VIEW, MIN_VIEW)
        self.view.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.view.scene().sigMouseClicked.connect(self._on_click)
        self.view.scene().sigMouseMoved.connect(self._on_move)
        self.roi_text = _ElidedLabel("", self)  # elided in the middle, not cut at both ends
        self.roi_text.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.roi_text.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.roi_text.hide()
        self.data: np.ndarray | None = None
        self.frame = None  # the preview's region, when the panel shows a preview
        self.mark = None  # a mark around it while it is small on screen
        self._frame_box: tuple | None = None
        self.vb.sigRangeChanged.connect(lambda *_: self._place_mark())
        self.vb.sigResized.connect(lambda *_: self._place_mark())
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.setSpacing(1)
        lay.addWidget(self.title)
        lay.addWidget(self.view, 1)
        lay.addWidget(self.metrics)
        lay.addWidget(self.roi_text)

    def value_at(self, x: float, y: float):
        """``(col, row, value)`` of the pixel at view coordinates (x, y), None outside."""
        if self.data is None or not self.image.isVisible():
            return None
        c, r = int(np.floor(x)), int(np.floor(y))
        h, w = self.data.shape[:2]
        if 0 <= r < h and 0 <= c < w:
            return c, r, self.data[r, c]
        return None

    def _on_move(self, pos) -> None:
        if not self.vb.sceneBoundingRect().contains(pos):
            self.hovered.emit(None)
            return
        p = self.vb.mapSceneToView(pos)
        self.hovered.emit(self.value_at(p.x(), p.y()))

    def set_roi_text(self, text: str) -> None:
        self.roi_text.setText(text)
        self.roi_text.setToolTip(text)
        self.roi_text.setVisible(bool(text))

    def _on_click(self, ev) -> None:
        if ev.button() != Qt.MouseButton.LeftButton:
            return
        if ev.double():
            self.doubleClicked.emit()
        else:
            self.clicked.emit()

    def set_image(self, a: np.ndarray | None, levels: tuple[float, float] | None = None,
                  placeholder: str = "") -> None:
        """Show ``a`` (or an empty view with a centred message)."""
        self.data = a
        self._part, self._levels = None, levels
        if a is not None:
            self._extent.setRect(0, 0, a.shape[1], a.shape[0])
        if a is None:
            self.image.clear()
            self.image.setVisible(False)
        elif a.shape[0] * a.shape[1] < LARGE_VIEW_PIXELS:
            self.data = a = np.asarray(a)
            self.image.setVisible(True)
            self.image.setAutoDownsample(True)
            # the image first: setRect scales the item from the image it holds, and a view
            # cleared ("computing…") held none, so the next image was drawn 256 times too
            # large, one flat colour (a rank that arrived after its placeholder)
            self.image.setImage(np.asarray(a), levels=levels, autoLevels=levels is None)
            self.image.setRect(0, 0, a.shape[1], a.shape[0])
        else:
            self.image.setVisible(True)
            self.image.setAutoDownsample(False)
            if self._levels is None:  # the whole image's range, from a sample of it
                s = np.asarray(sampled(a if isinstance(a, np.ndarray) else np.asarray(a)))
                self._levels = (float(s.min()), float(s.max()))
            self._draw_part()
        self.placeholder.setText(placeholder)
        self.placeholder.setGeometry(self.view.rect().adjusted(4, 0, -4, 0))
        self.placeholder.setVisible(bool(placeholder))

    def _draw_part(self) -> None:
        """Draw the part of a large image in view (with a margin of half a view around
        it), every s-th pixel, s the image pixels per screen pixel; again only when the
        view leaves that part or the zoom changes s."""
        a = self.data
        if a is None or a.shape[0] * a.shape[1] < LARGE_VIEW_PIXELS:
            return
        h, w = a.shape[:2]
        (vx0, vx1), (vy0, vy1) = self.vb.viewRange()
        px = max(self.vb.width(), 1.0)
        step = max(1, int((vx1 - vx0) / px))
        mx, my = 0.5 * (vx1 - vx0), 0.5 * (vy1 - vy0)
        want = (max(0, int(vy0)), min(h, int(np.ceil(vy1)) + 1),
                max(0, int(vx0)), min(w, int(np.ceil(vx1)) + 1))
        if want[1] <= want[0] or want[3] <= want[2]:
            return
        cur = self._part
        if (cur is not None and cur[4] == step and cur[0] <= want[0] and want[1] <= cur[1]
                and cur[2] <= want[2] and want[3] <= cur[3]):
            return
        y0, y1 = max(0, int(vy0 - my)) // step * step, min(h, int(np.ceil(vy1 + my)))
        x0, x1 = max(0, int(vx0 - mx)) // step * step, min(w, int(np.ceil(vx1 + mx)))
        part = np.asarray(a[y0:y1:step, x0:x1:step])
        self._part = (y0, y1, x0, x1, step)
        self.image.setImage(part, levels=self._levels, autoLevels=False)
        self.image.setRect(x0, y0, part.shape[1] * step, part.shape[0] * step)

    def eventFilter(self, obj, event) -> bool:  # noqa: N802
        if obj is self.view and event.type() == QEvent.Type.Resize:
            self.placeholder.setGeometry(self.view.rect().adjusted(4, 0, -4, 0))
        return False

    def set_frame(self, box: tuple | None, dashed: bool = True) -> None:
        """A dashed frame around ``box`` (y0, y1, x0, x1; the preview's region), or none;
        where the region is smaller than :data:`MARK_MIN` screen pixels at this zoom, a
        solid mark of that size around it as well (``dashed`` False: the mark alone, for
        a view that draws the region itself)."""
        self._frame_box = box
        if box is None:
            if self.frame is not None:
                self.frame.hide()
            self._place_mark()
            return
        if self.frame is None:
            self.frame = QGraphicsRectItem()
            self.frame.setPen(pg.mkPen("#39c5e0", width=2, style=Qt.PenStyle.DashLine, cosmetic=True))
            self.frame.setZValue(10)
            self.vb.addItem(self.frame, ignoreBounds=True)
        y0, y1, x0, x1 = box
        self.frame.setRect(x0, y0, x1 - x0, y1 - y0)
        self.frame.setVisible(dashed)
        self._place_mark()

    def _place_mark(self) -> None:
        """The region's mark at the current zoom (shown while the region is small on screen)."""
        box = self._frame_box
        (vx0, vx1), (vy0, vy1) = self.vb.viewRange()
        w, h = self.vb.width(), self.vb.height()
        upp = max((vx1 - vx0) / w, (vy1 - vy0) / h) if min(w, h) >= 1 else 0.0
        if box is None or upp <= 0 or min(box[1] - box[0], box[3] - box[2]) / upp >= MARK_MIN:
            if self.mark is not None:
                self.mark.hide()
            return
        if self.mark is None:
            self.mark = QGraphicsRectItem()
            self.mark.setPen(pg.mkPen("#ffd84a", width=2, cosmetic=True))
            self.mark.setZValue(11)
            self.vb.addItem(self.mark, ignoreBounds=True)
        y0, y1, x0, x1 = box
        half = MARK_MIN * upp / 2
        hw, hh = max(half, (x1 - x0) / 2), max(half, (y1 - y0) / 2)
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        self.mark.setRect(cx - hw, cy - hh, 2 * hw, 2 * hh)
        self.mark.show()

    def set_title(self, text: str) -> None:
        self.title.setText(text)
        self.title.setToolTip(text)

    def set_metrics(self, text: str) -> None:
        self.metrics.setText(text)
        self.metrics.setToolTip(text)

    def set_selected(self, on: bool) -> None:
        self.setStyleSheet(_SELECTED_STYLE if on else _NORMAL_STYLE)

    def has_image(self) -> bool:
        return self.image.isVisible() and self.image.image is not None


def to_qimage(a: np.ndarray, levels: tuple | None) -> QImage:
    """An image (grey, or colour's first three channels) in ``levels`` as an 8-bit QImage
    (its own copy of the pixels)."""
    small = np.asarray(a, dtype=np.float64)
    if small.ndim == 3 and small.shape[2] not in (3, 4):
        small = small[..., 0]
    lo, hi = levels if levels is not None else (float(np.nanmin(small)), float(np.nanmax(small)))
    u8 = np.clip((small - lo) / max(hi - lo, 1e-12) * 255, 0, 255).astype(np.uint8)
    if u8.ndim == 3:
        u8 = np.ascontiguousarray(u8[..., :3])
        img = QImage(u8.data, u8.shape[1], u8.shape[0], 3 * u8.shape[1], QImage.Format.Format_RGB888)
    else:
        u8 = np.ascontiguousarray(u8)
        img = QImage(u8.data, u8.shape[1], u8.shape[0], u8.shape[1], QImage.Format.Format_Grayscale8)
    return img.copy()


def thumbnail(a: np.ndarray | None, levels: tuple | None, side: int = THUMB) -> QPixmap:
    """A ``side``-pixel picture of image ``a`` (every s-th pixel, in ``levels``), for the
    strip under a view shown alone."""
    pm = QPixmap(side, side)
    pm.fill(QColor("#202020"))
    if a is None or a.ndim < 2 or min(a.shape[:2]) < 1:
        return pm
    step = max(1, int(np.ceil(max(a.shape[:2]) / side)))
    pic = QPixmap.fromImage(to_qimage(a[::step, ::step], levels))
    p = QPainter(pm)
    p.drawPixmap((side - pic.width()) // 2, (side - pic.height()) // 2, pic)
    p.end()
    return pm


class Loupe(QLabel):
    """A magnifier beside the cursor: :data:`LOUPE_PIXELS` image pixels around it, each
    :data:`LOUPE_ZOOM` screen pixels wide (View › Loupe)."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.setStyleSheet("border: 2px solid #ffd84a; background: #202020;")
        self.hide()

    def show_at(self, a: np.ndarray, col: int, row: int, levels: tuple | None, pos) -> None:
        """The pixels of ``a`` around (``col``, ``row``), beside ``pos`` (the cursor, in the
        parent's coordinates)."""
        n = LOUPE_PIXELS // 2
        h, w = a.shape[:2]
        r0, c0 = min(max(row - n, 0), max(h - LOUPE_PIXELS, 0)), min(max(col - n, 0), max(w - LOUPE_PIXELS, 0))
        patch = np.asarray(a[r0:r0 + LOUPE_PIXELS, c0:c0 + LOUPE_PIXELS])
        img = to_qimage(patch, levels)
        pm = QPixmap.fromImage(img.scaled(img.width() * LOUPE_ZOOM, img.height() * LOUPE_ZOOM,
                                          Qt.AspectRatioMode.IgnoreAspectRatio,
                                          Qt.TransformationMode.FastTransformation))
        self.setPixmap(pm)
        self.resize(pm.width() + 4, pm.height() + 4)
        par = self.parentWidget()
        x, y = pos.x() + 24, pos.y() + 24
        if x + self.width() > par.width():
            x = pos.x() - 24 - self.width()
        if y + self.height() > par.height():
            y = pos.y() - 24 - self.height()
        self.move(max(x, 0), max(y, 0))
        self.raise_()
        self.show()


class ThumbStrip(QWidget):
    """Under the view shown alone: a thumbnail of the input and of each rank (and the
    reference); a click shows that one alone instead."""

    chosen = Signal(object)  # the ImagePanel clicked

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.row = QHBoxLayout(self)
        self.row.setContentsMargins(0, 2, 0, 0)
        self.row.setSpacing(4)
        self.buttons: list = []  # (button, panel)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        # a fixed height: the buttons added to a shown strip are shown (and counted in its
        # size hint) only at the next event-loop turn, after the grid has fitted the view
        probe = QToolButton(self)
        probe.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextUnderIcon)
        probe.setIconSize(QSize(THUMB, THUMB))
        probe.setIcon(QIcon(QPixmap(THUMB, THUMB)))
        probe.setText("rank")
        self.setFixedHeight(probe.sizeHint().height() + 2)
        probe.deleteLater()

    def show_panels(self, panels: list, current) -> None:
        """One button per panel (its picture and title), ``current`` checked."""
        for b, _ in self.buttons:
            self.row.removeWidget(b)
            b.deleteLater()
        self.buttons = []
        for panel in panels:
            b = QToolButton(self)
            b.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextUnderIcon)
            b.setIcon(QIcon(thumbnail(panel.data, panel.image.levels)))
            b.setIconSize(QSize(THUMB, THUMB))
            b.setText(panel.title.text())
            b.setToolTip(f"{panel.title.text()} (double-click the large view: every view again)")
            b.setCheckable(True)
            b.setChecked(panel is current)
            b.clicked.connect(lambda _=False, panel=panel: self.chosen.emit(panel))
            self.row.addWidget(b)
            self.buttons.append((b, panel))
        self.row.addStretch(1)


class ComparisonGrid(QWidget):
    """Noisy input and one cell per rank; residuals (noisy − denoised) below each.

    A double-click shows one panel alone, as large as the grid; another puts them all back.
    Layout (ranks r1..rk) when the width allows k + 1 columns::

        noisy / input   | rank r1   | ... | rank rk
        reference/blank | resid. r1 | ... | resid. rk

    A narrower grid wraps the cells onto more rows (at least :data:`CELL_WIDTH`
    pixels per column) instead of asking the window to grow.
    All panels share one zoom and pan.
    """

    rankClicked = Signal(object)  # rank (int or None)
    regionDrawn = Signal(object)  # Shift + drag on a panel: (x0, y0, x1, y1) in image pixels
    userZoomed = Signal()  # the user zoomed or panned a panel (mouse wheel, drag)
    layoutChanged = Signal()  # a panel was shown large, or all of them again
    hovered = Signal(object, object)  # panel, (x, y, value) or None

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.grid = QGridLayout(self)
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.grid.setSpacing(4)
        self.input_panel = ImagePanel("input", self)
        self.ref_panel = ImagePanel("reference", self)
        self.master = self.input_panel.vb
        for p in (self.input_panel, self.ref_panel):
            p.vb.sigRangeChangedManually.connect(lambda *_: self.userZoomed.emit())
            p.vb.regionDrawn.connect(self.regionDrawn)
            p.hovered.connect(lambda info, p=p: self.hovered.emit(p, info))
            p.doubleClicked.connect(lambda p=p: self.toggle_large(p))
        #: the one panel shown large (double-click a panel; again to go back), or None
        self.large: ImagePanel | None = None
        #: under the panel shown alone: the input and every rank as thumbnails
        self.strip = ThumbStrip(self)
        self.strip.chosen.connect(self.show_alone)
        self.strip.hide()
        self.rank_panels: dict = {}
        self.resid_panels: dict = {}
        self.ranks: tuple = ()
        self.show_residuals = True
        self.columns = 1
        self.aspect = 1.0
        self.setMinimumWidth(CELL_WIDTH)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Ignored)
        self._relayout()

    def columns_for(self, width: int, height: int) -> int:
        """Columns of cells (the input and one per rank) that show the image largest in a
        ``width`` × ``height`` grid, each column at least :data:`CELL_WIDTH` wide, among
        those whose views keep the height they need (:meth:`_view_need`) under their
        titles and lines; when none does, the one whose views are tallest."""
        cells = len(self.ranks) + 1
        best, best_key = 1, None
        for cols in range(1, cells + 1):
            if cols > 1 and width / cols < CELL_WIDTH:
                break
            col_w, view_h = self._cell_size(width, height, cols, 2)
            fits = view_h >= self._view_need(col_w)
            # the image's width in a panel: limited by the column width or the view height
            key = (fits, min(col_w, self.aspect * max(view_h, 1)) if fits else view_h)
            if best_key is None or key > (best_key[0], best_key[1] + 0.5):
                best, best_key = cols, key
        return best

    def _rows(self, cols: int) -> int:
        """Rows of panels (a cell is two with the residuals) for ``cols`` columns."""
        return -(-(len(self.ranks) + 1) // max(cols, 1)) * (2 if self.show_residuals else 1)

    def _overhead(self, n_lines: int) -> int:
        """A panel's height besides its view: frame, title, ``n_lines`` under the view (and
        the ROI's line when it shows)."""
        p = self.input_panel
        lay = p.layout()
        m, lm = p.contentsMargins(), lay.contentsMargins()
        h = (m.top() + m.bottom() + lm.top() + lm.bottom() + p.title.sizeHint().height()
             + n_lines * p.metrics.fontMetrics().lineSpacing() + 2 + 2 * lay.spacing())
        if p.roi_text.isVisibleTo(p):
            h += p.roi_text.sizeHint().height() + lay.spacing()
        return h

    def _cell_size(self, width: int, height: int, cols: int, n_lines: int) -> tuple[float, float]:
        """(column width, view height) of a panel in a ``width`` × ``height`` grid."""
        rows, space = self._rows(cols), self.grid.spacing()
        return ((width - (cols - 1) * space) / cols,
                (height - (rows - 1) * space) / rows - self._overhead(n_lines))

    def _view_need(self, col_w: float) -> float:
        """The height a view needs in a column ``col_w`` wide: its image's, between
        :data:`MIN_VIEW_SQUEEZED` (a thin image) and :data:`MIN_VIEW`."""
        return min(MIN_VIEW, max(MIN_VIEW_SQUEEZED, col_w / max(self.aspect, 1e-6)))

    def set_aspect(self, aspect: float) -> None:
        """Width / height of the image shown (to choose the columns)."""
        if aspect > 0 and abs(aspect - self.aspect) > 1e-6:
            self.aspect = aspect
            self._relayout()

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        if self.large is not None:
            self._fit_heights()
            self.layoutChanged.emit()  # the large view is no view the window watches
        elif self.columns_for(self.width(), self._height()) != self.columns:
            self._relayout()
        else:
            self._fit_heights()

    def _fit_heights(self) -> None:
        """Fit the panels to the grid's height: three lines under every view where narrow
        columns leave the views room to spare (PSNR, SSIM and the effective rank whole at
        1366x768), else two; one count for all, so that linked views keep one height per
        row.  The views get the rest, down to :data:`MIN_VIEW_SQUEEZED`, and the grid asks
        for that much (the scroll area scrolls below it): a panel is never squeezed under
        its own height, which drew its lines over its view (a thin image, a message over
        the grid)."""
        if self.large is not None:
            n, rows = 2, 1
            view_h = self._height() - self._overhead(n) - self.strip.height() - self.grid.spacing()
        else:
            col_w, view_h = self._cell_size(self.width(), self._height(), self.columns, 3)
            need = max(self._view_need(col_w), col_w / max(self.aspect, 1e-6))
            n = 3 if view_h >= need else 2
            view_h = self._cell_size(self.width(), self._height(), self.columns, n)[1]
            view_h = min(view_h, self._view_need(col_w))
            rows = self._rows(self.columns)
        view_min = int(max(MIN_VIEW_SQUEEZED, view_h))
        for p in self.panels():
            p.metrics.set_lines(n)
            p.view.setMinimumHeight(view_min)
        strip = self.strip.height() + self.grid.spacing() if self.large is not None else 0
        self.setMinimumHeight(rows * (self._overhead(n) + view_min)
                              + (rows - 1) * self.grid.spacing() + strip)

    def _height(self) -> int:
        # inside a scroll area the grid may be taller than what is visible: use the view's height
        vp = self.parentWidget()
        return vp.height() if vp is not None and vp.objectName() == "qt_scrollarea_viewport" else self.height()

    def panels(self) -> list[ImagePanel]:
        return [self.input_panel, self.ref_panel, *self.rank_panels.values(),
                *self.resid_panels.values()]

    def viewboxes(self) -> list[pg.ViewBox]:
        return [p.vb for p in self.panels()]

    def set_ranks(self, ranks: tuple) -> None:
        """Create one column per rank; existing panels are reused."""
        ranks = tuple(ranks)
        if ranks == self.ranks:
            return
        for r in list(self.rank_panels):
            if r not in ranks:
                for d in (self.rank_panels, self.resid_panels):
                    p = d.pop(r)
                    if p is self.large:
                        self.large = None
                        self.layoutChanged.emit()
                    self.grid.removeWidget(p)
                    p.setParent(None)
                    p.deleteLater()
        for r in ranks:
            if r not in self.rank_panels:
                label = "auto" if r is None else str(r)
                p = ImagePanel(f"rank {label}", self)
                p.clicked.connect(lambda r=r: self.rankClicked.emit(r))
                q = ImagePanel(f"residual {label}", self)
                q.clicked.connect(lambda r=r: self.rankClicked.emit(r))
                for panel in (p, q):
                    panel.doubleClicked.connect(lambda panel=panel: self.toggle_large(panel))
                    panel.vb.sigRangeChangedManually.connect(lambda *_: self.userZoomed.emit())
                    panel.vb.regionDrawn.connect(self.regionDrawn)
                    panel.hovered.connect(lambda info, panel=panel: self.hovered.emit(panel, info))
                    panel.vb.setXLink(self.master)
                    panel.vb.setYLink(self.master)
                self.rank_panels[r], self.resid_panels[r] = p, q
        self.ranks = ranks
        self._relayout()

    def set_show_residuals(self, on: bool) -> None:
        self.show_residuals = on
        if not on and (self.large is self.ref_panel or self.large in self.resid_panels.values()):
            self.large = None
        self._relayout()

    def toggle_large(self, panel: ImagePanel | None) -> None:
        """Show ``panel`` alone, as large as the grid (a double-click), or, when it is
        already, every panel again.  The large panel is unlinked while it is alone (the
        panels it follows are hidden); the window puts the zoom back (``layoutChanged``)."""
        old, self.large = self.large, None if panel is None or panel is self.large else panel
        if old is not None and old.vb is not self.master:
            old.vb.setXLink(self.master)
            old.vb.setYLink(self.master)
        if self.large is not None and self.large.vb is not self.master:
            self.large.vb.setXLink(None)
            self.large.vb.setYLink(None)
        self._relayout()
        self.layoutChanged.emit()

    def show_alone(self, panel: ImagePanel) -> None:
        """Show ``panel`` alone (the strip's choice), keeping the others' zoom."""
        if panel is not self.large:
            vr = self.current_vb().viewRange()
            self.toggle_large(panel)
            panel.vb.setRange(xRange=vr[0], yRange=vr[1], padding=0)

    def strip_panels(self) -> list:
        """The panels the strip offers: the input, the reference when shown, each rank."""
        ref = [self.ref_panel] if self.ref_panel.has_image() and self.show_residuals else []
        return [self.input_panel, *ref, *(self.rank_panels[r] for r in self.ranks)]

    def update_strip(self) -> None:
        """The strip's pictures again (after the panels were drawn)."""
        if self.large is not None:
            self.strip.show_panels(self.strip_panels(), self.large)

    def current_vb(self) -> pg.ViewBox:
        """The view the others follow: the large panel's, else the input's."""
        return self.large.vb if self.large is not None else self.master

    def _relayout(self) -> None:
        for p in self.panels():
            self.grid.removeWidget(p)
        self.ref_panel.vb.setXLink(self.master)
        self.ref_panel.vb.setYLink(self.master)
        self.grid.removeWidget(self.strip)
        if self.large is not None:
            for p in self.panels():
                p.setVisible(p is self.large)
            self.grid.addWidget(self.large, 0, 0)
            self.grid.addWidget(self.strip, 1, 0)
            self.strip.show()
            self.update_strip()
            for c in range(self.grid.columnCount()):
                self.grid.setColumnStretch(c, 1 if c == 0 else 0)
            for r in range(self.grid.rowCount()):
                self.grid.setRowStretch(r, 1 if r == 0 else 0)
            self._fit_heights()
            return
        self.strip.hide()
        cols = self.columns = self.columns_for(self.width(), self._height())
        per = 2 if self.show_residuals else 1  # grid rows per row of cells
        cells = [(self.input_panel, self.ref_panel)] + [(self.rank_panels[r], self.resid_panels[r])
                                                        for r in self.ranks]
        for i, (top, below) in enumerate(cells):
            row, col = divmod(i, cols)
            self.grid.addWidget(top, per * row, col)
            top.show()
            if self.show_residuals:
                self.grid.addWidget(below, per * row + 1, col)
                below.show()
            else:
                below.hide()
        used_rows = per * (-(-len(cells) // cols))
        for c in range(self.grid.columnCount()):
            self.grid.setColumnStretch(c, 1 if c < cols else 0)
        for r in range(self.grid.rowCount()):
            self.grid.setRowStretch(r, 1 if r < used_rows else 0)
        self._fit_heights()

    def set_selected(self, rank) -> None:
        for r, p in self.rank_panels.items():
            p.set_selected(r == rank)
            self.resid_panels[r].set_selected(r == rank)

    def auto_range(self) -> None:
        self.current_vb().autoRange(padding=0.0)


def zoom_to(vb: pg.ViewBox, scale: float) -> None:
    """Zoom ``vb`` so that one image pixel is ``scale`` screen pixels (1: actual pixels),
    around the current centre."""
    (x0, x1), (y0, y1) = vb.viewRange()
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    w, h = max(vb.width(), 1.0) / scale, max(vb.height(), 1.0) / scale
    vb.setRange(xRange=(cx - w / 2, cx + w / 2), yRange=(cy - h / 2, cy + h / 2), padding=0)


def one_to_one(vb: pg.ViewBox) -> None:
    """Zoom ``vb`` so that one image pixel is one screen pixel, around the current centre."""
    zoom_to(vb, 1.0)


def view_scale(vb: pg.ViewBox) -> float:
    """Screen pixels per image pixel in ``vb`` now."""
    (x0, x1), (y0, y1) = vb.viewRange()
    upp = max((x1 - x0) / max(vb.width(), 1.0), (y1 - y0) / max(vb.height(), 1.0))
    return 1.0 / upp if upp > 0 else 1.0


class SplitView(QWidget):
    """A/B: one image left of a draggable line, another right of it; A and B chosen
    among the input, the reference and every rank shown (by default the noisy input and
    the selected rank)."""

    choiceChanged = Signal()  # the user chose another A or B

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.panel = ImagePanel("before ◀ ▶ after", self)
        self.vb = self.panel.vb
        self.line = pg.InfiniteLine(angle=90, movable=True,
                                    pen=pg.mkPen("#ffd84a", width=2),
                                    hoverPen=pg.mkPen("#ffffff", width=3))
        self.vb.addItem(self.line, ignoreBounds=True)
        self.slider = QSlider(Qt.Orientation.Horizontal, self)
        self.slider.setRange(0, 1000)
        self.slider.setValue(500)
        self.slider.setToolTip("Drag to move the split between A (left) and B (right)")
        self.a_combo, self.b_combo = QComboBox(self), QComboBox(self)
        for combo, side in ((self.a_combo, "left"), (self.b_combo, "right")):
            combo.setToolTip(f"what the {side} side shows: the input, the reference or a rank")
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
            combo.activated.connect(self._on_choice)
        self.left_label = QLabel("A ◀", self)
        self.right_label = QLabel("▶ B", self)
        row = QHBoxLayout()
        row.addWidget(self.a_combo)
        row.addWidget(self.left_label)
        row.addWidget(self.slider, 1)
        row.addWidget(self.right_label)
        row.addWidget(self.b_combo)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.panel, 1)
        lay.addLayout(row)
        self.before: np.ndarray | None = None
        self.after: np.ndarray | None = None
        self.levels: tuple | None = None
        self.labels = ("noisy", "denoised")
        #: the user's A and B (keys of :meth:`set_sources`), None: the defaults
        self.choice: list = [None, None]
        self._sources: dict = {}
        self.slider.valueChanged.connect(self._on_slider)
        self.line.sigPositionChanged.connect(self._on_line)
        self._syncing = False

    def set_sources(self, sources: dict, levels: tuple | None, default_a, default_b) -> None:
        """What A and B may show: ``{key: (label, image or None)}`` in order; the user's
        choice is kept while its key is there, else ``default_a`` / ``default_b``."""
        self._sources = dict(sources)
        keys = list(self._sources)
        picked = []
        for side, (combo, default) in enumerate(((self.a_combo, default_a),
                                                 (self.b_combo, default_b))):
            key = self.choice[side] if self.choice[side] in self._sources else default
            picked.append(key)
            combo.blockSignals(True)
            combo.clear()
            for k in keys:
                combo.addItem(self._sources[k][0], k)
            if key in self._sources:
                combo.setCurrentIndex(keys.index(key))
            combo.blockSignals(False)
        (la, a), (lb, b) = (self._sources.get(k, ("", None)) for k in picked)
        self.set_images(a, b, levels, la or "", lb or "")

    def _on_choice(self, _i: int) -> None:
        self.choice = [self.a_combo.currentData(), self.b_combo.currentData()]
        self.set_sources(self._sources, self.levels, *self.choice)
        self.choiceChanged.emit()

    def fraction(self) -> float:
        return self.slider.value() / 1000.0

    def set_fraction(self, f: float) -> None:
        self.slider.setValue(int(round(1000 * min(max(f, 0.0), 1.0))))

    def set_images(self, before: np.ndarray | None, after: np.ndarray | None,
                   levels: tuple | None, before_label: str = "noisy",
                   after_label: str = "denoised") -> None:
        self.before, self.after, self.levels = before, after, levels
        self.labels = (before_label, after_label)
        self.panel.set_title(f"A: {before_label}  |  B: {after_label}")
        self._redraw()

    def values_at(self, col: int, row: int) -> list[tuple[str, object]]:
        """``[(label, value)]`` of both images at a pixel, the side shown there first
        (the composite's own value would carry the result's name left of the split)."""
        out = [(lab, a[row, col]) for lab, a in zip(self.labels, (self.before, self.after))
               if a is not None and a.shape == self.before.shape]
        return out[::-1] if col >= self.split_column() else out

    def split_column(self) -> int:
        if self.before is None:
            return 0
        return int(round(self.fraction() * self.before.shape[1]))

    def composite(self) -> np.ndarray | None:
        """Left of the split from ``before``, right of it from ``after``."""
        if self.before is None:
            return None
        if self.after is None or self.after.shape != self.before.shape:
            return self.before
        return SplitComposite(self.before, self.after, self.split_column())

    def _redraw(self) -> None:
        comp = self.composite()
        if comp is None:
            self.panel.set_image(None, placeholder="load an image")
            self.line.hide()
            return
        self.panel.set_image(comp, self.levels,
                             placeholder="" if self.after is not None else "run to see the result")
        self.line.setVisible(self.after is not None)
        self._syncing = True
        self.line.setValue(self.split_column())
        self._syncing = False

    def _on_slider(self, _v: int) -> None:
        self._redraw()

    def _on_line(self) -> None:
        if self._syncing or self.before is None:
            return
        self.set_fraction(self.line.value() / max(1, self.before.shape[1]))


class ZoomLink(QObject):
    """Keeps two ViewBoxes of different shapes on one centre and one zoom, live.

    The zoom is the scale, data units per screen pixel, so a wide view shows
    more of the image around the same centre instead of distorting it.
    ``setXLink``/``setYLink`` copy the ranges instead (or line the views up
    by their screen positions when they overlap), which fights the aspect
    lock when the views differ in shape.  A range change of either view is
    copied to the other at once; the copy's own signal is ignored (no
    feedback loop), and so is a change caused by a view being resized (the
    aspect lock refitting the range is not a pan or a zoom, and a view on a
    hidden tab only learns its size when it is shown).
    """

    def __init__(self, a: pg.ViewBox, b: pg.ViewBox, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.views = (a, b)
        self._copying = False
        self._size = {id(v): self._size_of(v) for v in self.views}
        for v in self.views:
            v.sigRangeChanged.connect(lambda *_, v=v: self._on_range(v))
            v.sigResized.connect(lambda *_, v=v: self._size.__setitem__(id(v), self._size_of(v)))

    @staticmethod
    def _size_of(v: pg.ViewBox) -> tuple[float, float]:
        return (float(v.width()), float(v.height()))

    def _on_range(self, src: pg.ViewBox) -> None:
        if self._copying:
            return
        if self._size_of(src) != self._size[id(src)]:
            return  # a resize under way (sigResized comes after): not the user's zoom
        self.copy(src, self.views[1] if src is self.views[0] else self.views[0])

    def copy(self, src: pg.ViewBox, dst: pg.ViewBox) -> None:
        """Give ``dst`` the centre and the scale (data units per pixel) of ``src``."""
        (x0, x1), (y0, y1) = src.viewRange()
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        sw, sh = src.width(), src.height()
        dw, dh = dst.width(), dst.height()
        if min(sw, sh, dw, dh) < 1:
            xr, yr = (x0, x1), (y0, y1)  # not laid out yet: the same region
        else:
            upp = max((x1 - x0) / sw, (y1 - y0) / sh)
            xr = (cx - upp * dw / 2, cx + upp * dw / 2)
            yr = (cy - upp * dh / 2, cy + upp * dh / 2)
        self._copying = True
        try:
            dst.setRange(xRange=xr, yRange=yr, padding=0)
        finally:
            self._copying = False
