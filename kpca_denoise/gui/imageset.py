"""Loaded images and the image-set panel (list with thumbnails, drag and drop).

An :class:`ImageEntry` is one loaded file (:class:`kpca_denoise.io.LoadedItem`)
plus what the GUI attaches to it: an optional clean reference and display
levels.  Display helpers turn any supported array into something an
``ImageItem`` or a ``QImage`` can show: patch sets (N, h, w) become a mosaic
of samples.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QIcon, QImage, QPainter, QPixmap
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QHBoxLayout,
    QListWidget,
    QListWidgetItem,
    QStyle,
    QStyledItemDelegate,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ..io import SUPPORTED_SUFFIXES
from .model import MOSAIC_MAX_SAMPLES, ImageEntry, display_array, patch_mosaic  # noqa: F401 - re-exported

__all__ = [
    "ImageEntry",
    "ImageSetPanel",
    "patch_mosaic",
    "display_array",
    "display_levels",
    "to_uint8",
    "qimage_from_array",
]



def display_levels(a: np.ndarray) -> tuple[float, float]:
    """Black and white points shared by the input and every result.

    8-bit data uses the full 0..255 so brightness means the same in every
    view; 16-bit and float data use robust percentiles, because a 12-bit
    camera in a 16-bit file would otherwise look black.
    """
    a = np.asarray(a)
    if a.dtype == np.uint8:
        return 0.0, 255.0
    flat = a.ravel()
    flat = flat[:: max(1, flat.size // 500_000)]  # percentiles of a sample are plenty
    lo, hi = np.percentile(flat, [0.5, 99.5])
    if not hi > lo:
        hi = lo + 1.0
    return float(lo), float(hi)


def to_uint8(a: np.ndarray, levels: tuple[float, float]) -> np.ndarray:
    """Scale to 0..255 with the given levels (for thumbnails and the PNG sheet)."""
    lo, hi = levels
    f = (np.asarray(a, dtype=np.float64) - lo) * (255.0 / max(hi - lo, 1e-12))
    return np.clip(np.rint(f), 0, 255).astype(np.uint8)


def qimage_from_array(a8: np.ndarray) -> QImage:
    """A detached QImage from a (H, W) or (H, W, 3) uint8 array."""
    a8 = np.ascontiguousarray(a8)
    h, w = a8.shape[:2]
    if a8.ndim == 2:
        img = QImage(a8.data, w, h, w, QImage.Format.Format_Grayscale8)
    else:
        img = QImage(a8.data, w, h, 3 * w, QImage.Format.Format_RGB888)
    # copy: the QImage must not outlive the numpy buffer it wraps
    return img.copy()


def make_thumbnail(entry: ImageEntry, size: int = 72) -> QIcon:
    """The image scaled into a ``size`` square, centred on a transparent one: every entry
    of the list is as tall, a 300 x 4 image too (its 72 x 1 icon made the list's rows,
    which share one height, too low for their lines)."""
    a = entry.display(entry.array)
    step = max(1, int(max(a.shape[:2]) // (2 * size)))  # cheap decimation before smooth scaling
    small = a[::step, ::step]
    img = qimage_from_array(to_uint8(small, display_levels(entry.array)))
    pix = QPixmap.fromImage(img).scaled(size, size, Qt.AspectRatioMode.KeepAspectRatio,
                                        Qt.TransformationMode.SmoothTransformation)
    square = QPixmap(size, size)
    square.fill(Qt.GlobalColor.transparent)
    p = QPainter(square)
    p.drawPixmap((size - pix.width()) // 2, (size - pix.height()) // 2, pix)
    p.end()
    return QIcon(square)


class _EntryDelegate(QStyledItemDelegate):
    """Draws an entry's lines (name, description, status) in the room the list gives
    them: the name on one line, elided in the middle ("frame_0…0012.png" keeps which
    frame); the description broken after a comma onto a second line where the entry has
    one to spare; the status always on its own last line.  What does not fit is elided
    at its end ("✓ 5 ranks · other par…"); the tooltip has it all."""

    def initStyleOption(self, option, index) -> None:  # noqa: N802 (Qt's name)
        super().initStyleOption(option, index)
        if option.rect.width() <= 0 or not option.text:
            return  # measuring the entry's size: its lines as they are
        style = option.widget.style() if option.widget is not None else QApplication.style()
        rect = style.subElementRect(QStyle.SubElement.SE_ItemViewItemText, option, option.widget)
        fm, sep = option.fontMetrics, "\u2028"  # Qt's line separator in the option's text
        # the style draws the text inside margins of the focus frame's, plus one
        margin = style.pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, option.widget) + 1
        width = rect.width() - 2 * margin
        lines = option.text.replace("\n", sep).split(sep)
        room = max(len(lines), rect.height() // max(fm.lineSpacing(), 1))
        shown = [fm.elidedText(lines[0], Qt.TextElideMode.ElideMiddle, width)]
        for k, line in enumerate(lines[1:], 1):
            shown += _wrap(line, fm, width, room - len(shown) - (len(lines) - 1 - k))
        option.text = sep.join(shown)


def _wrap(line: str, fm, width: int, n: int) -> list[str]:
    """``line`` in at most ``n`` lines of ``width`` pixels, broken after its commas, the
    last elided at its end."""
    if n <= 1 or fm.horizontalAdvance(line) <= width:
        return [fm.elidedText(line, Qt.TextElideMode.ElideRight, width)]
    cuts = [i + 1 for i, c in enumerate(line) if c == ","
            and fm.horizontalAdvance(line[:i + 1]) <= width]
    if not cuts:
        return [fm.elidedText(line, Qt.TextElideMode.ElideRight, width)]
    return [line[:cuts[-1]]] + _wrap(line[cuts[-1]:].lstrip(), fm, width, n - 1)


class _DropList(QListWidget):
    """A list that accepts files and folders dropped from a file manager."""

    pathsDropped = Signal(list)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAcceptDrops(True)
        self.setDragDropMode(QAbstractItemView.DragDropMode.DropOnly)

    def dragEnterEvent(self, event) -> None:  # noqa: N802 (Qt naming)
        if event.mimeData().hasUrls():
            event.acceptProposedAction()
        else:
            super().dragEnterEvent(event)

    def dragMoveEvent(self, event) -> None:  # noqa: N802
        if event.mimeData().hasUrls():
            event.acceptProposedAction()
        else:
            super().dragMoveEvent(event)

    def dropEvent(self, event) -> None:  # noqa: N802
        urls = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        if urls:
            event.acceptProposedAction()
            self.pathsDropped.emit(urls)
        else:
            super().dropEvent(event)


class ImageSetPanel(QWidget):
    """The list of loaded images with thumbnails; emits the current index."""

    currentChanged = Signal(int)
    pathsDropped = Signal(list)
    openFilesRequested = Signal()
    openFolderRequested = Signal()
    removeRequested = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.list = _DropList(self)
        self.list.setIconSize(QSize(72, 72))
        self.list.setUniformItemSizes(True)
        self.list.setSpacing(2)
        # the name, the description and the status laid out by _EntryDelegate: a description
        # broken over two lines pushed the status ("✓ 5 ranks") out of the entry (word wrap
        # stays on: it keeps the entries as wide as the list)
        self.list.setWordWrap(True)
        self.list.setItemDelegate(_EntryDelegate(self.list))
        self.list.setToolTip(
            "Drop image files (" + ", ".join(sorted(SUPPORTED_SUFFIXES)) + ") or folders here.\n"
            "PageDown / PageUp: next / previous image."
        )
        self.list.currentRowChanged.connect(self.currentChanged)
        self.list.pathsDropped.connect(self.pathsDropped)

        bar = QHBoxLayout()
        bar.setContentsMargins(0, 0, 0, 0)
        for text, tip, sig in (("Open…", "Open image files or patch sets (Ctrl+O)", self.openFilesRequested),
                               ("Folder…", "Open every supported file in a folder (Ctrl+Shift+O)",
                                self.openFolderRequested)):
            b = QToolButton(self)
            b.setText(text)
            b.setToolTip(tip)
            b.clicked.connect(sig)
            bar.addWidget(b)
        rm = self.remove_button = QToolButton(self)
        rm.setText("Remove")
        rm.setToolTip("Remove the selected image from the set (Delete)")
        rm.clicked.connect(lambda: self.removeRequested.emit(self.list.currentRow()))
        bar.addWidget(rm)
        bar.addStretch(1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(bar)
        lay.addWidget(self.list, 1)

    def add_entry(self, entry: ImageEntry) -> None:
        it = QListWidgetItem(make_thumbnail(entry), f"{entry.name}\n{entry.describe()}")
        it.setData(Qt.ItemDataRole.UserRole, str(entry.path))
        self.list.addItem(it)
        self._set_tooltip(it)

    @staticmethod
    def _set_tooltip(it: QListWidgetItem) -> None:
        """The entry's lines whole (the list elides them) and the file's path."""
        it.setToolTip(it.text() + "\n" + it.data(Qt.ItemDataRole.UserRole))

    def remove_row(self, row: int) -> None:
        self.list.takeItem(row)

    def set_status(self, row: int, text: str | None) -> None:
        """Append a short status (e.g. 'denoised', 'error') to an entry's label."""
        it = self.list.item(row)
        if it is None:
            return
        base = it.text().split("\n")[:2]
        it.setText("\n".join(base + ([text] if text else [])))
        self._set_tooltip(it)

    def set_current(self, row: int) -> None:
        self.list.setCurrentRow(row)

    def current(self) -> int:
        return self.list.currentRow()

    def count(self) -> int:
        return self.list.count()
