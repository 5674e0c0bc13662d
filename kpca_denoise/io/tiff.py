"""The TIFF header and pages as the readers take them: the series read as one image or
stack, their axes, and the metadata written back (:func:`tiff_header`); the decoded (or
lazy) array with its samples last and its leading axes made pages (:func:`tiff_pages`).
Used by the whole-file reader (:mod:`.reading`) and the lazy one (:mod:`.lazy_tiff`)."""

from __future__ import annotations

import contextlib
import logging
import math
import threading
from pathlib import Path

import numpy as np

from .errors import InputError

__all__ = ["EXIF_ORIENTATION", "tifffile_messages", "tiff_header", "tiff_pages"]

#: the orientation tag (EXIF and TIFF: the same number), read and written back
EXIF_ORIENTATION = 274

#: ImageJ metadata written back with an ImageJ TIFF (what the reader gives and
#: ``tifffile.imwrite(imagej=True)`` takes; the counts of images, channels, slices and
#: frames follow from the axes and the shape)
_IMAGEJ_KEYS = ("spacing", "unit", "finterval", "fps", "loop", "mode", "min", "max",
                "xorigin", "yorigin", "zorigin", "Labels", "Ranges", "LUTs", "Info",
                "Properties")


def tiff_header(tf, path: Path) -> tuple[list, str, tuple, dict]:
    """(series, axes, shape, meta) of an open TIFF, nothing decoded: the series read as
    one image or stack (one, or several alike), their axes and shape, and the metadata
    written back; InputError for what is not supported."""
    series = [s for s in tf.series if s.shape]
    if not series:
        raise InputError(f"{path}: the TIFF holds no image")
    s = series[0]
    _check_data_listed(s.pages[0] if s.pages else tf.pages[0], path, tf.filehandle.size)
    axes, shape = s.axes, tuple(s.shape)
    # pages written one by one (each its own series, e.g. each with a description)
    # are the pages of one stack when they are alike
    alike = all(x.shape == s.shape and x.dtype == s.dtype and x.axes == s.axes
                and len(x.pages) == 1 for x in series)
    if len(series) > 1 and not alike:
        shapes = ", ".join("x".join(map(str, x.shape)) for x in series)
        raise InputError(
            f"{path}: the TIFF holds {len(series)} image series of different shapes "
            f"({shapes}); save each series as its own file")
    if len(series) > 1:
        axes, shape = "Q" + axes, (len(series),) + shape
    if "Y" not in axes or "X" not in axes:
        raise InputError(f"{path}: the TIFF's axes {axes!r} have no image plane (Y, X)")
    page = s.pages[0] if s.pages else tf.pages[0]
    photometric = int(page.photometric)
    if photometric not in (0, 1, 2):  # miniswhite, minisblack, rgb
        raise InputError(
            f"{path}: TIFF photometric {page.photometric.name} is not supported; save it "
            "as greyscale or RGB")
    # shaped: tifffile recorded the array it was given (tiff_pages reads its axes then)
    meta: dict = {"photometric": photometric, "shaped": bool(tf.is_shaped)}
    if page.extrasamples:  # grey + alpha, RGBA: which samples are extra, and how
        meta["extrasamples"] = tuple(int(e) for e in page.extrasamples)
    # the user's description and software, not a layout tifffile or ImageJ wrote
    desc = page.description or ""
    if desc and not desc.lstrip().startswith("{") and not (tf.is_imagej or tf.is_ome):
        meta["description"] = desc
    if page.software and not str(page.software).startswith("tifffile"):
        meta["software"] = str(page.software)
    tags = page.tags
    if "XResolution" in tags and "YResolution" in tags:
        meta["resolution"] = (tags["XResolution"].value, tags["YResolution"].value)
        if "ResolutionUnit" in tags:
            meta["resolutionunit"] = int(tags["ResolutionUnit"].value)
    if EXIF_ORIENTATION in tags:
        meta["orientation"] = int(tags[EXIF_ORIENTATION].value)
    icc = page.iccprofile if hasattr(page, "iccprofile") else None
    if icc:
        meta["icc"] = bytes(icc)
    if tf.is_imagej and tf.imagej_metadata:
        # an ImageJ hyperstack stays one: its axes, calibration and display settings
        ij = tf.imagej_metadata
        meta["imagej"] = {"axes": axes, **{k: ij[k] for k in _IMAGEJ_KEYS if k in ij}}
    return series, axes, shape, meta


def tiff_pages(path: Path, a, axes: str, meta: dict):
    """(array, meta, is_stack): the series' array (numpy, or a lazy Dask array) with its
    samples last and its leading axes made pages; ``meta`` gets the shape to write back."""
    if (meta["photometric"] == 2 and "S" not in axes and axes.endswith("CYX")
            and a.shape[-3] in (3, 4)):
        axes = axes[:-3] + "SYX"  # planar RGB that tifffile reads as ImageJ channels
    if "S" in axes and axes.index("S") < axes.index("Y"):  # planar: samples first
        a = np.moveaxis(a, axes.index("S"), -1)
        axes = axes.replace("S", "") + "S"
        meta["planar"] = True  # written back planar
    if axes[-2:] != "YX" and axes[-3:] != "YXS" and meta.get("shaped"):
        # tifffile's own record of the array it was given (a 5-page 1x1 stack came back
        # as 'YQX'): pages first, as the array was
        axes = _array_axes(a.shape, meta["photometric"])
    if axes[-2:] != "YX" and axes[-3:] != "YXS":
        raise InputError(f"{path}: unsupported TIFF axis order {axes!r}")
    lead = axes.index("Y")
    meta["shape"] = a.shape  # written back in this shape, pages in this order
    meta["axes"] = axes
    if lead == 0:
        return a, meta, False
    pages = int(np.prod(a.shape[:lead]))
    a = a.reshape((pages,) + a.shape[lead:])
    if pages == 1:
        return a[0], meta, False
    return a, meta, True


def _array_axes(shape: tuple, photometric: int) -> str:
    """The axes of an array written by tifffile with its shape recorded: (pages...,) rows,
    columns, and the samples last for RGB(A)."""
    rgb = photometric == 2 and len(shape) >= 3 and shape[-1] in (3, 4)
    return "Q" * (len(shape) - 2 - rgb) + "YX" + "S" * rgb


class _Kept(logging.Handler):
    def __init__(self, into: list) -> None:
        super().__init__(logging.DEBUG)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record.getMessage())


_QUIET = threading.Lock()
_quiet_blocks = [0, True]  # open blocks, tifffile's logger's propagate flag before them


@contextlib.contextmanager
def tifffile_messages():
    """tifffile's log messages while the block runs (``<tifffile.TiffPage 0 @8>
    incorrect StripOffsets count ...``), kept in the list it yields instead of printed:
    the reader says what is wrong in a line of its own."""
    logger = logging.getLogger("tifffile")
    kept: list = []
    handler = _Kept(kept)
    with _QUIET:
        if _quiet_blocks[0] == 0:
            _quiet_blocks[1] = logger.propagate
            logger.propagate = False
        _quiet_blocks[0] += 1
        logger.addHandler(handler)
    try:
        yield kept
    finally:
        with _QUIET:
            logger.removeHandler(handler)
            _quiet_blocks[0] -= 1
            if _quiet_blocks[0] == 0:
                logger.propagate = _quiet_blocks[1]


def _check_data_listed(page, path: Path, file_size: int) -> None:
    """Refuse a header whose image is not where it says: fewer strips or tiles listed
    than its size needs (a 100000x100000 header over a few bytes), or uncompressed data
    past the end of the file."""
    h, w, d = int(page.imagelength), int(page.imagewidth), int(page.imagedepth or 1)
    planes = int(page.samplesperpixel) if int(page.planarconfig) == 2 else 1
    if page.is_tiled:
        need = (math.ceil(h / page.tilelength) * math.ceil(w / page.tilewidth)
                * math.ceil(d / (page.tiledepth or 1)) * planes)
        what = "tiles"
    else:
        need = math.ceil(h / max(int(page.rowsperstrip or h), 1)) * d * planes
        what = "strips"
    listed = min(len(page.dataoffsets), len(page.databytecounts))
    end = max((o + c for o, c in zip(page.dataoffsets, page.databytecounts)), default=0)
    if listed < need or (int(page.compression) == 1 and end > file_size):
        found = (f"it lists {listed} of the {need} {what} of its {w}x{h} pixels" if listed < need
                 else f"its {w}x{h} pixels run past the end of the file")
        raise InputError(f"{path}: the TIFF's header is damaged ({found}); the file is corrupt "
                         "or cut short: save it again from its source")

