"""Reading and writing images, stacks and patch sets: nothing is lost.

What is kept (read, then written back in the same format):

* **format and bit depth**: PNG, TIFF, JPEG, BMP; 8- and 16-bit grey, grey+alpha, RGB
  and RGBA (16 bits per channel in PNG and TIFF), 32/64-bit float TIFF.  Pillow reduces
  16-bit colour PNG to 8 bits and cannot write it, so those go through ``imagecodecs``
  (libpng/libspng; by tifffile's author, with wheels for every platform).
* **pages**: a multi-page TIFF (a microscopy stack, a time-lapse) is read with
  ``tifffile`` as one item of kind ``"stack"`` whose pages are the images of a set, and is
  written back with the same page count, shape, dtype and order.
* **metadata**: the EXIF block (with its orientation tag, so a phone photo displays the
  same way), the ICC colour profile and the resolution (DPI) of PNG, JPEG, TIFF and BMP.
* **patch sets**: ``.npy`` arrays of shape (N, h, w), or ``.npz`` archives holding one
  such array (or one named ``images``; other arrays such as ``target`` are carried along).

Writes are atomic (a temporary file in the target folder, then a rename), get the
permissions of a normal file under the user's umask, never replace a file that was read
as an input, and by default never replace any existing file (``replace=False``).
Images larger than :data:`MAX_PIXELS` are refused before they are decoded
(decompression bombs); ``max_pixels`` raises the limit deliberately.
"""

from __future__ import annotations

import os
import struct
import tempfile
import threading
import time
import warnings
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

__all__ = [
    "IMAGE_SUFFIXES",
    "PATCHSET_SUFFIXES",
    "SUPPORTED_SUFFIXES",
    "MAX_PIXELS",
    "InputError",
    "OutputExistsError",
    "LoadedItem",
    "InputFile",
    "collect_inputs",
    "expand_inputs",
    "read_item",
    "read_items",
    "write_item",
    "output_path",
    "check_not_input",
    "atomic_write",
    "write_sidecar",
    "jsonable",
    "rank_tag",
    "display_oriented",
]

IMAGE_SUFFIXES = {".png": "PNG", ".tif": "TIFF", ".tiff": "TIFF", ".jpg": "JPEG",
                  ".jpeg": "JPEG", ".bmp": "BMP"}
PATCHSET_SUFFIXES = {".npy": "NPY", ".npz": "NPZ"}
SUPPORTED_SUFFIXES = {**IMAGE_SUFFIXES, **PATCHSET_SUFFIXES}

#: default limit on the pixels of one image (per page), Pillow's own default
#: (about 9459 x 9459): above it a header is taken for a decompression bomb.
MAX_PIXELS = int(Image.MAX_IMAGE_PIXELS or 89_478_485)

_DTYPES = (np.uint8, np.uint16, np.float32, np.float64)
_PIL_LIMIT_LOCK = threading.Lock()
_UMASK_LOCK = threading.Lock()
_EXIF_ORIENTATION = 274


class InputError(ValueError):
    """A file or folder that cannot be used, with the reason and the fix."""


class OutputExistsError(InputError):
    """An output file already exists and replacing it was not asked for."""


@dataclass
class LoadedItem:
    """One file as read: ``array`` is (H, W[, C]) for an image, (P, H, W[, C]) for a
    stack of P pages, (N, h, w) for a patch set.  ``meta`` holds what is written back
    (``exif``, ``icc``, ``dpi``, ``orientation``; TIFF ``photometric``, ``resolution``,
    ``resolutionunit``, ``shape``).  ``rel`` is where its outputs go below the output
    folder (its sub-folder and name; by default just the name)."""

    path: Path
    array: np.ndarray | None
    kind: str  # 'image', 'stack' or 'patchset'
    format: str  # PNG, TIFF, JPEG, BMP, NPY, NPZ
    npz_key: str | None = None
    npz_extra: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    rel: Path | None = None
    max_pixels: int | None = None  # the limit it was read with (for :meth:`reread`)
    _shape: tuple = field(default=(), repr=False)
    _dtype: np.dtype | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def shape(self) -> tuple:
        return self.array.shape if self.array is not None else self._shape

    @property
    def dtype(self) -> np.dtype:
        return self.array.dtype if self.array is not None else self._dtype

    @property
    def n_pages(self) -> int:
        return self.shape[0] if self.is_stack else 1

    def release(self) -> None:
        """Drop the pixels, keeping what is known of them (shape, dtype, pages, metadata),
        so that a large set is not held in memory; :meth:`reread` reads them again."""
        if self.array is not None:
            self._shape, self._dtype = self.array.shape, self.array.dtype
            self.array = None

    def reread(self) -> np.ndarray:
        """The pixels: held, or read from the file again after :meth:`release` (not kept).

        Raises InputError if the file no longer reads as it did."""
        if self.array is not None:
            return self.array
        a = read_item(self.path, max_pixels=self.max_pixels).array
        if a.shape != self._shape or a.dtype != self._dtype:
            raise InputError(f"{self.path}: the file changed while the run was going "
                             f"(now {a.dtype} {a.shape}, was {self._dtype} {self._shape}); "
                             "run again")
        return a

    @property
    def is_patchset(self) -> bool:
        return self.kind == "patchset"

    @property
    def is_stack(self) -> bool:
        return self.kind == "stack"

    @property
    def pages(self) -> list[np.ndarray]:
        """The images this item holds: its pages for a stack, else the array itself."""
        return list(self.array) if self.is_stack else [self.array]

    def page_names(self) -> list[str]:
        if not self.is_stack:
            return [self.name]
        n = self.n_pages
        return [f"{self.name} [page {k + 1}/{n}]" for k in range(n)]


@dataclass
class InputFile:
    """A file to read and the relative path (sub-folder + name) its outputs get."""

    path: Path
    rel: Path


# -- finding the inputs --------------------------------------------------------------


def _unsupported(p: Path) -> str:
    return (f"{p}: unsupported file type '{p.suffix or '(none)'}'; "
            f"use one of {', '.join(sorted(SUPPORTED_SUFFIXES))}")


def _within(p: Path, folder: Path | None) -> bool:
    if folder is None:
        return False
    try:
        p.resolve().relative_to(folder.resolve())
        return True
    except ValueError:
        return False


def collect_inputs(paths, *, exclude=None):
    """Files and folder trees -> ``(files, errors, skipped)``.

    ``files`` are :class:`InputFile` in the order given, folders walked recursively in
    sorted order (hidden entries and anything inside ``exclude``, the output folder,
    are left out).  A file from a folder keeps its sub-folder in ``rel``; two inputs
    that would get the same ``rel`` (``a/img.png`` and ``b/img.png`` named on the
    command line) get their paths from the nearest common folder instead, so no two
    outputs of a run share a name.  The same file named twice is read once.
    ``errors`` are ``(path, message)`` for inputs that cannot be used (missing,
    unsupported type, a folder with nothing usable); ``skipped`` lists the unsupported
    files met inside folders.
    """
    exclude = Path(exclude) if exclude is not None else None
    files: list[InputFile] = []
    errors: list[tuple[Path, str]] = []
    skipped: list[Path] = []
    seen: set = set()

    def add(f: Path, rel: Path) -> None:
        key = os.path.normcase(str(f.resolve()))
        if key not in seen:
            seen.add(key)
            files.append(InputFile(f, rel))

    for raw in paths:
        p = Path(raw)
        if not str(raw).strip():
            errors.append((p, "an empty input name (\"\"); name a file or a folder"))
            continue
        if p.is_dir() and _within(p, exclude):
            # the walk leaves out the output folder: holding this one, it left out all
            errors.append((p, f"{p}: the output folder {exclude} is this folder or holds it, so "
                              "the results would mix with the inputs; use an -o outside it, "
                              f"e.g. -o {p.resolve().name}_denoised"))
            continue
        if p.is_dir():
            found = []
            for root, dirs, names in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith(".")
                                 and not _within(Path(root) / d, exclude))
                for n in sorted(names):
                    f = Path(root) / n
                    if n.startswith(".") or not f.is_file():
                        continue
                    if f.suffix.lower() in SUPPORTED_SUFFIXES:
                        found.append(f)
                    else:
                        skipped.append(f)
            if not found:
                errors.append((p, f"{p}: the folder has no supported files "
                                  f"({', '.join(sorted(SUPPORTED_SUFFIXES))})"))
            for f in found:
                add(f, f.relative_to(p))
        elif p.is_file():
            if p.suffix.lower() not in SUPPORTED_SUFFIXES:
                errors.append((p, _unsupported(p)))
            else:
                add(p, Path(p.name))
        elif p.is_symlink():
            errors.append((p, f"{p}: a link to nothing (broken, or a loop); name its target"))
        elif p.exists():
            errors.append((p, f"{p}: not a regular file or folder (a device, pipe or socket); "
                              "save the image to a file first"))
        else:
            errors.append((p, f"{p}: no such file or folder"))
    # names that collide: take the paths from the nearest folder they share
    by_rel: dict = {}
    for f in files:
        by_rel.setdefault(os.path.normcase(str(f.rel)), []).append(f)
    for group in by_rel.values():
        if len(group) > 1:
            common = Path(os.path.commonpath([str(g.path.resolve().parent) for g in group]))
            for g in group:
                g.rel = g.path.resolve().relative_to(common)
    return files, errors, skipped


def expand_inputs(paths) -> list[Path]:
    """Files and folders -> the supported files (folders walked recursively, sorted).

    Raises InputError for the first path that does not exist, a folder with no
    supported file, or an explicitly named file of an unsupported type.
    """
    files, errors, _ = collect_inputs(paths)
    if errors:
        raise InputError(errors[0][1])
    return [f.path for f in files]


# -- reading ---------------------------------------------------------------------------


def _too_many_pixels(path: Path, w: int, h: int, limit: int) -> InputError:
    return InputError(
        f"{path}: the file says it holds {w}x{h} pixels ({w * h / 1e6:.0f} megapixels), more "
        f"than the limit of {limit / 1e6:.0f} megapixels that guards against decompression "
        f"bombs; if the image is genuine, raise the limit (--max-pixels {w * h})")


def _check_pixels(path: Path, a: np.ndarray) -> np.ndarray:
    if a.dtype == np.int32 or a.dtype.byteorder == ">" or a.dtype == np.dtype(">u2"):
        # Pillow's 'I' / 'I;16B' modes: 16-bit data in a wider or big-endian type
        if a.size and (a.min() < 0 or a.max() > 65535):
            raise InputError(f"{path}: 32-bit integer images are not supported; use 8 or 16 bits")
        a = a.astype(np.uint16)
    if a.dtype == np.bool_:
        a = a.astype(np.uint8) * 255
    if not any(a.dtype == d for d in _DTYPES):
        raise InputError(f"{path}: unsupported pixel type {a.dtype}; use unsigned 8- or 16-bit "
                         "integers (uint8, uint16) or 32/64-bit floats")
    if a.size == 0:
        raise InputError(f"{path}: the image is empty (0 pixels)")
    if np.issubdtype(a.dtype, np.floating) and not np.all(np.isfinite(a)):
        raise InputError(f"{path}: the image contains NaN or Inf pixels")
    return np.ascontiguousarray(a)


def _png_header(path: Path) -> tuple[int, int] | None:
    """(bit depth, colour type) of a PNG file, or None if it is not one."""
    with open(path, "rb") as fh:
        head = fh.read(29)
    if len(head) < 29 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return head[24], head[25]


def _pil_meta(im: Image.Image) -> dict:
    meta: dict = {}
    icc = im.info.get("icc_profile")
    if icc:
        meta["icc"] = bytes(icc)
    dpi = im.info.get("dpi")
    if dpi:
        meta["dpi"] = tuple(float(v) for v in dpi)
    try:
        exif = im.getexif()
    except Exception:  # a malformed EXIF block: the pixels are still good
        exif = None
    if exif:
        meta["exif"] = exif.tobytes()
        if _EXIF_ORIENTATION in exif:
            meta["orientation"] = int(exif[_EXIF_ORIENTATION])
    if im.format == "JPEG":  # written back with the same chroma sampling and scan order
        from PIL import JpegImagePlugin

        sampling = JpegImagePlugin.get_sampling(im)
        meta["jpeg"] = {"subsampling": sampling if sampling in (0, 1, 2) else None,
                        "progressive": bool(im.info.get("progressive")
                                            or im.info.get("progression"))}
    text = getattr(im, "text", None) if im.format == "PNG" else None
    if text:  # tEXt / iTXt chunks (a comment, an author, a camera's notes)
        meta["text"] = {str(k): str(v) for k, v in text.items()
                        if not str(k).startswith("Raw profile type")}  # EXIF: kept as EXIF
    return meta


def _read_pil(path: Path, max_pixels: int) -> tuple[np.ndarray, dict]:
    header = _png_header(path) if path.suffix.lower() == ".png" else None
    with _PIL_LIMIT_LOCK:
        old = Image.MAX_IMAGE_PIXELS
        Image.MAX_IMAGE_PIXELS = None  # our own limit below, before decoding
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with Image.open(path) as im:
                    w, h = im.size
                    if w * h > max_pixels:
                        raise _too_many_pixels(path, w, h, max_pixels)
                    if getattr(im, "n_frames", 1) > 1:
                        raise InputError(
                            f"{path}: the file holds {im.n_frames} frames (an animation); save "
                            "the frames as a multi-page TIFF or as separate images")
                    meta = _pil_meta(im)
                    if header is not None and header[0] == 16 and header[1] != 0:
                        # 16-bit colour (or grey+alpha): Pillow would reduce it to 8 bits
                        import imagecodecs

                        a = imagecodecs.png_decode(path.read_bytes())
                    else:
                        im.load()
                        mode = im.mode
                        if mode == "1":
                            im = im.convert("L")
                        elif mode == "P":
                            im = im.convert("RGBA" if "transparency" in im.info else "RGB")
                        elif mode in ("CMYK", "YCbCr", "LAB", "HSV"):
                            im = im.convert("RGB")
                            meta.pop("icc", None)  # the profile described the old space
                        a = np.asarray(im)
        finally:
            Image.MAX_IMAGE_PIXELS = old
    return a, meta


#: ImageJ metadata written back with an ImageJ TIFF (what the reader gives and
#: ``tifffile.imwrite(imagej=True)`` takes; the counts of images, channels, slices and
#: frames follow from the axes and the shape)
_IMAGEJ_KEYS = ("spacing", "unit", "finterval", "fps", "loop", "mode", "min", "max",
                "xorigin", "yorigin", "zorigin", "Labels", "Ranges", "LUTs", "Info",
                "Properties")


def _imagej_metadata(ij: dict | None, data: np.ndarray, photometric: str) -> dict | None:
    """The metadata to write an ImageJ TIFF with, or None where ImageJ cannot hold the
    data as read (it is then written as a plain TIFF): ImageJ takes 8 / 16-bit and
    float32 pixels, axes in TZCYXS order, RGB only as 8-bit samples last, and an ASCII
    description (other characters escaped as ImageJ writes them, ``\\u00b5m``)."""
    if not ij or data.dtype not in (np.uint8, np.uint16, np.float32):
        return None
    axes, order = str(ij.get("axes", "")), "TZCYXS"
    if (len(axes) != data.ndim or any(c not in order for c in axes)
            or [order.index(c) for c in axes] != sorted(order.index(c) for c in axes)):
        return None
    rgb = photometric == "rgb"
    if (rgb and not (data.dtype == np.uint8 and axes.endswith("YXS")
                     and data.shape[-1] in (3, 4))) or (not rgb and "S" in axes):
        return None
    tagged = ("Labels", "Ranges", "LUTs", "Info", "Properties")  # not in the description
    return {k: "".join(ch if ord(ch) < 128 else f"\\u{ord(ch):04x}" for ch in v)
            if isinstance(v, str) and k not in tagged else v for k, v in ij.items()}


def _read_tiff(path: Path, max_pixels: int) -> tuple[np.ndarray, dict, bool]:
    """(array, meta, is_stack); pages of the first series, samples last."""
    import tifffile

    with tifffile.TiffFile(path) as tf:
        series = [s for s in tf.series if s.shape]
        if not series:
            raise InputError(f"{path}: the TIFF holds no image")
        s = series[0]
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
        h, w = shape[axes.index("Y")], shape[axes.index("X")]
        if w * h > max_pixels:
            raise _too_many_pixels(path, w, h, max_pixels)
        page = s.pages[0] if s.pages else tf.pages[0]
        photometric = int(page.photometric)
        if photometric not in (0, 1, 2):  # miniswhite, minisblack, rgb
            raise InputError(
                f"{path}: TIFF photometric {page.photometric.name} is not supported; save it "
                "as greyscale or RGB")
        a = s.asarray() if len(series) == 1 else np.stack([x.asarray() for x in series])
        meta: dict = {"photometric": photometric}
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
        if _EXIF_ORIENTATION in tags:
            meta["orientation"] = int(tags[_EXIF_ORIENTATION].value)
        icc = page.iccprofile if hasattr(page, "iccprofile") else None
        if icc:
            meta["icc"] = bytes(icc)
        if tf.is_imagej and tf.imagej_metadata:
            # an ImageJ hyperstack stays one: its axes, calibration and display settings
            ij = tf.imagej_metadata
            meta["imagej"] = {"axes": axes, **{k: ij[k] for k in _IMAGEJ_KEYS if k in ij}}
    if (meta["photometric"] == 2 and "S" not in axes and axes.endswith("CYX")
            and a.shape[-3] in (3, 4)):
        axes = axes[:-3] + "SYX"  # planar RGB that tifffile reads as ImageJ channels
    if "S" in axes and axes.index("S") < axes.index("Y"):  # planar: samples first
        a = np.moveaxis(a, axes.index("S"), -1)
        axes = axes.replace("S", "") + "S"
        meta["planar"] = True  # written back planar
    if axes[-2:] != "YX" and axes[-3:] != "YXS":
        raise InputError(f"{path}: unsupported TIFF axis order {axes!r}")
    lead = axes.index("Y")
    meta["shape"] = a.shape  # written back in this shape, pages in this order
    if lead == 0:
        return a, meta, False
    pages = int(np.prod(a.shape[:lead]))
    a = a.reshape((pages,) + a.shape[lead:])
    if pages == 1:
        return a[0], meta, False
    return a, meta, True


def _check_patchset(path: Path, a: np.ndarray, what: str) -> np.ndarray:
    if a.dtype == object or not np.issubdtype(a.dtype, np.number) or a.dtype.kind == "c":
        raise InputError(f"{path}: {what} must hold real numbers, got dtype {a.dtype}")
    if a.ndim != 3 or a.shape[0] < 1:
        raise InputError(
            f"{path}: {what} must have shape (N, h, w) with one sample per item, got {a.shape}"
        )
    if a.shape[0] < 2 or a.shape[1] * a.shape[2] < 4:
        raise InputError(f"{path}: {what} is too small ({a.shape}); need N >= 2 samples of >= 4 values")
    if np.issubdtype(a.dtype, np.floating) and not np.all(np.isfinite(a)):
        raise InputError(f"{path}: {what} contains NaN or Inf values")
    return np.ascontiguousarray(a)


def _read_patchset(path: Path) -> tuple[np.ndarray, str | None, dict]:
    try:
        loaded = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise InputError(f"{path}: not a readable NumPy file ({exc})") from None
    if isinstance(loaded, np.ndarray):
        return _check_patchset(path, loaded, "the array"), None, {}
    with loaded:
        try:
            arrays = {k: loaded[k] for k in loaded.files}
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
            raise InputError(f"{path}: cannot read the archive ({exc})") from None
    if not arrays:
        raise InputError(f"{path}: the .npz archive holds no arrays; save an (N, h, w) array in it")
    if "images" in arrays:
        key = "images"
    elif len(arrays) == 1:
        key = next(iter(arrays))
    else:
        shapes = ", ".join(f"{k}{v.shape}" for k, v in arrays.items())
        raise InputError(
            f"{path}: the .npz archive mixes several arrays ({shapes}); keep one (N, h, w) "
            "array or name the samples 'images'"
        )
    a = _check_patchset(path, arrays.pop(key), f"array '{key}'")
    return a, key, arrays


#: the first bytes of each image format read (TIFF: little and big endian, classic and BigTIFF)
_MAGIC = {"PNG": (b"\x89PNG\r\n\x1a\n",), "JPEG": (b"\xff\xd8\xff",), "BMP": (b"BM",),
          "TIFF": (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")}


def _sniff(path: Path) -> str | None:
    """The image format a file's first bytes announce, None when none of ours."""
    with open(path, "rb") as f:
        head = f.read(8)
    return next((fmt for fmt, magics in _MAGIC.items() if head.startswith(magics)), None)


def read_item(path, *, max_pixels: int | None = None) -> LoadedItem:
    """Read one supported file; raises InputError with the reason and the fix.

    ``max_pixels`` (default :data:`MAX_PIXELS`) bounds the pixels of one image or page;
    larger headers are refused before anything is decoded.
    """
    path = Path(path)
    limit = MAX_PIXELS if max_pixels is None else int(max_pixels)
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        raise InputError(_unsupported(path))
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    if path.stat().st_size == 0:
        raise InputError(f"{path}: the file is empty (0 bytes)")
    if suffix in PATCHSET_SUFFIXES:
        a, key, extra = _read_patchset(path)
        return LoadedItem(path, a, "patchset", PATCHSET_SUFFIXES[suffix], key, extra,
                          max_pixels=max_pixels)
    fmt = IMAGE_SUFFIXES[suffix]
    try:
        held = _sniff(path)
        if held is not None and held != fmt:
            # its output would be written as its name says: a 16-bit TIFF named .png
            # came back an 8-bit PNG
            ext = {"PNG": ".png", "TIFF": ".tif", "JPEG": ".jpg", "BMP": ".bmp"}[held]
            raise InputError(f"{path}: holds a {held} image but is named {path.suffix}; "
                             f"rename it to {path.stem}{ext}")
        if fmt == "TIFF":
            a, meta, stack = _read_tiff(path, limit)
        else:
            (a, meta), stack = _read_pil(path, limit), False
    except InputError:
        raise
    except MemoryError:
        raise InputError(f"{path}: the image does not fit in memory") from None
    except UnidentifiedImageError:
        raise InputError(f"{path}: not a readable image (corrupt or wrong file type)") from None
    except Exception as exc:  # any decoder failure is a bad file, never a traceback
        raise InputError(f"{path}: cannot read the image ({type(exc).__name__}: {exc})") from None
    a = _check_pixels(path, a)
    return LoadedItem(path, a, "stack" if stack else "image", fmt, meta=meta,
                      max_pixels=max_pixels)


def read_items(paths, *, max_pixels: int | None = None, keep_pixels: bool = True):
    """Read many files (paths or :class:`InputFile`); a bad file is reported in the
    second list ``(path, message)``, the rest are kept.  With ``keep_pixels`` false
    every file is still read in full (so that a bad one is found before any compute)
    but its pixels are released at once (:meth:`LoadedItem.release`): memory then
    holds one file, not the set."""
    items, errors = [], []
    for p in paths:
        rel = p.rel if isinstance(p, InputFile) else None
        p = p.path if isinstance(p, InputFile) else Path(p)
        try:
            item = read_item(p, max_pixels=max_pixels)
        except InputError as exc:
            errors.append((p, str(exc)))
            continue
        item.rel = rel
        if not keep_pixels:
            item.release()
        items.append(item)
    return items, errors


def display_oriented(array: np.ndarray, orientation: int | None) -> np.ndarray:
    """The pixels as a viewer shows them under an EXIF orientation tag (1-8)."""
    a = np.asarray(array)
    o = orientation or 1
    if o in (2, 4, 5, 7):
        a = a[:, ::-1]
    if o in (3, 4):
        a = a[::-1, ::-1]
    if o in (5, 6):
        a = np.rot90(a, -1)
    if o in (7, 8):
        a = np.rot90(a, 1)
    return a


# -- writing -----------------------------------------------------------------------------


def output_path(item: LoadedItem, outdir, tag: str) -> Path:
    """``OUTDIR/<sub-folder>/<stem>_<tag><suffix>``, in the source's format."""
    rel = item.rel if item.rel is not None else Path(item.path.name)
    return Path(outdir) / rel.parent / f"{rel.stem}_{tag}{rel.suffix}"


def check_not_input(target: Path, inputs) -> None:
    """Raise InputError if ``target`` is (or links to) one of the input files."""
    target = Path(target)
    for p in inputs:
        p = Path(p)
        same = target.resolve() == p.resolve()
        if not same and target.exists() and p.exists():
            same = os.path.samefile(target, p)
        if same:
            raise InputError(
                f"{target}: writing here would overwrite the input {p}; choose another output folder"
            )


def _file_mode() -> int:
    """What ``open(path, 'w')`` would give: 0666 less the umask."""
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return 0o666 & ~mask


def atomic_write(target, write, *, replace: bool = True) -> Path:
    """Write a file through a temporary file in the target folder, then rename.

    ``write(tmp_path)`` writes the content; on any failure the temporary file is
    removed, so a half-written file never appears under ``target``.  The file gets
    the permissions of a normal write under the umask.  With ``replace=False`` an
    existing ``target`` is never replaced (the rename is a hard link, which fails
    atomically if another process created the file meanwhile):
    :class:`OutputExistsError`.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    if not replace and target.exists():
        raise OutputExistsError(f"{target}: the file already exists (another run may have "
                                "written it meanwhile) and was left as it is; choose another "
                                "output folder or allow replacing it (--overwrite)")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.stem}.", suffix=target.suffix + ".part",
                               dir=target.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, _file_mode())
        if replace:
            os.replace(tmp, target)
        else:
            try:
                os.link(tmp, target)
            except FileExistsError:
                raise OutputExistsError(
                    f"{target}: the file appeared while this run was writing (another run "
                    "may have written it) and was left as it is") from None
            except OSError:  # no hard links on this file system: check, then rename
                if target.exists():
                    raise OutputExistsError(f"{target}: the file already exists") from None
                os.replace(tmp, target)
            else:
                os.unlink(tmp)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return target


def write_sidecar(folder, data: dict, *, stem: str = "kpca-denoise") -> Path:
    """Write ``data`` as ``FOLDER/<stem>-<date>-<time>-<n>.json``, a name no other run
    takes, atomically; returns the path.  ``kpca-denoise denoise --params`` reads it."""
    import json

    text = json.dumps(jsonable(data), indent=2)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1, 10_000):
        target = Path(folder) / f"{stem}-{stamp}-{os.getpid()}-{n}.json"
        try:
            return atomic_write(target, lambda tmp: tmp.write_text(text), replace=False)
        except OutputExistsError:
            continue
    raise InputError(f"{folder}: cannot find a free name for the run's sidecar")


def rank_tag(rank) -> str:
    """Output name tag of a rank: ``kpca_r8``, or ``kpca`` for the uncapped default."""
    return "kpca" if rank is None else f"kpca_r{rank}"


def jsonable(obj):
    """numpy scalars/arrays, tuples, paths and non-finite floats -> plain JSON values."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, float) and not np.isfinite(obj):
        return None if np.isnan(obj) else str(obj)
    return obj


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _png16_bytes(a: np.ndarray, meta: dict) -> bytes:
    """A 16-bit colour PNG (imagecodecs) with the ICC profile, DPI, EXIF and text chunks."""
    import imagecodecs

    png = imagecodecs.png_encode(np.ascontiguousarray(a))
    chunks = b""
    if meta.get("icc"):
        chunks += _png_chunk(b"iCCP", b"ICC Profile\x00\x00" + zlib.compress(meta["icc"]))
    if meta.get("dpi"):
        ppm = [max(1, round(v / 0.0254)) for v in meta["dpi"][:2]]
        chunks += _png_chunk(b"pHYs", struct.pack(">IIB", ppm[0], ppm[1], 1))
    exif = meta.get("exif")
    if exif:
        chunks += _png_chunk(b"eXIf", exif[6:] if exif.startswith(b"Exif\x00\x00") else exif)
    for key, value in (meta.get("text") or {}).items():  # UTF-8 text chunks
        chunks += _png_chunk(b"iTXt", key.encode("latin-1", "replace")[:79] + b"\x00\x00\x00\x00\x00"
                             + value.encode("utf-8"))
    end_ihdr = 8 + 8 + 13 + 4  # signature, IHDR length+type, IHDR data, CRC
    return png[:end_ihdr] + chunks + png[end_ihdr:]


def _image_writer(item: LoadedItem, a: np.ndarray):
    """A function writing ``a`` (the item's shape and dtype) to a path, or InputError
    before any file is created."""
    fmt, meta = item.format, item.meta
    if a.ndim == 3 and a.shape[2] == 1 and not item.is_stack:
        a = a[..., 0]
    floating = np.issubdtype(a.dtype, np.floating)
    if fmt == "TIFF":
        import tifffile

        shape = meta.get("shape")
        data = a.reshape(shape) if shape is not None and int(np.prod(shape)) == a.size else a
        photometric = {0: "miniswhite", 1: "minisblack", 2: "rgb"}.get(meta.get("photometric"))
        if photometric is None:
            photometric = "rgb" if a.shape[-1] in (3, 4) and a.ndim >= 3 and not (
                item.is_stack and a.ndim == 3) else "minisblack"
        kw: dict = {"photometric": photometric, "compression": "zlib"}
        if meta.get("extrasamples"):  # as read (grey + alpha stays one page of 2 samples)
            kw["extrasamples"] = meta["extrasamples"]
            kw["planarconfig"] = "contig"
        elif photometric == "rgb" and data.shape[-1] == 4:
            kw["extrasamples"] = ("unassalpha",)
        ij = _imagej_metadata(meta.get("imagej"), data, photometric)
        if meta.get("planar") and data.ndim >= 3:
            data = np.moveaxis(data, -1, -3)  # samples before rows, as read
            kw["planarconfig"] = "separate"
        if "resolution" in meta:
            kw["resolution"] = meta["resolution"]
            kw["resolutionunit"] = meta.get("resolutionunit", 2)
        if meta.get("icc"):
            kw["iccprofile"] = meta["icc"]
        if meta.get("orientation"):
            kw["extratags"] = [(_EXIF_ORIENTATION, "H", 1, int(meta["orientation"]), True)]
        for key in ("description", "software"):
            if meta.get(key):
                kw[key] = meta[key]

        def write(tmp: Path) -> None:
            if ij is not None:
                try:
                    plain = {k: v for k, v in kw.items() if k not in ("extrasamples", "description")}
                    tifffile.imwrite(tmp, data, imagej=True, metadata=ij, **plain)
                    return
                except (ValueError, TypeError):
                    pass  # a layout ImageJ cannot hold after all: a plain TIFF
            tifffile.imwrite(tmp, data, **kw)

        return write
    if floating:
        raise InputError(f"floating-point images can only be written as TIFF, not {fmt}")
    if a.dtype == np.uint16 and fmt in ("JPEG", "BMP"):
        raise InputError(f"{fmt} cannot store 16-bit images; use PNG or TIFF")
    if a.dtype not in (np.uint8, np.uint16):
        raise InputError(f"cannot write pixel type {a.dtype} as {fmt}")
    if a.dtype == np.uint16 and a.ndim == 3:  # 16-bit colour PNG

        def write(tmp: Path) -> None:
            tmp.write_bytes(_png16_bytes(a, meta))

        return write
    im = Image.fromarray(np.ascontiguousarray(a, dtype="<u2") if a.dtype == np.uint16 else a)
    opts: dict = {}
    if fmt == "JPEG":
        opts["quality"] = 95
        jpeg = meta.get("jpeg") or {}
        if jpeg.get("subsampling") is not None:
            opts["subsampling"] = jpeg["subsampling"]
        if jpeg.get("progressive"):
            opts["progressive"] = True
    if meta.get("text") and fmt == "PNG":
        from PIL import PngImagePlugin

        info = PngImagePlugin.PngInfo()
        for key, value in meta["text"].items():
            info.add_itxt(key, value)
        opts["pnginfo"] = info
    if meta.get("icc") and fmt in ("PNG", "JPEG"):
        opts["icc_profile"] = meta["icc"]
    if meta.get("dpi"):
        opts["dpi"] = meta["dpi"]
    if meta.get("exif") and fmt in ("PNG", "JPEG"):
        opts["exif"] = meta["exif"]

    def write(tmp: Path) -> None:
        im.save(tmp, format=fmt, **opts)

    return write


def write_item(item: LoadedItem, array: np.ndarray, target, *, inputs=(),
               replace: bool = True) -> Path:
    """Write ``array`` in ``item``'s format, bit depth, pages and metadata to ``target``
    atomically.

    For a stack, ``array`` holds all pages, (P, H, W[, C]).  Nothing is left behind on
    failure; ``inputs`` (the files that were read) are never overwritten, and with
    ``replace=False`` no existing file is.
    """
    target = Path(target)
    check_not_input(target, list(inputs) + [item.path])
    arr = np.asarray(array)
    if arr.size != int(np.prod(item.shape)):  # a (3, 3) array for a (10, 4, 4) item was written
        raise InputError(f"{target}: the array {arr.shape} is not the shape of {item.path.name} "
                         f"{tuple(item.shape)}; write the item's own result")
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():  # read back, it was refused
        raise InputError(f"{target}: the array holds NaN or Inf; nothing was written")
    if item.kind == "patchset":
        a = np.asarray(array).astype(item.dtype, copy=False)

        def write(tmp: Path) -> None:
            with open(tmp, "wb") as fh:
                if item.format == "NPY":
                    np.save(fh, a)
                else:
                    np.savez_compressed(fh, **{item.npz_key or "images": a}, **item.npz_extra)
    else:
        write = _image_writer(item, np.asarray(array))  # raises before any file is created
    return atomic_write(target, write, replace=replace)
