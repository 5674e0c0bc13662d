"""Reading images, stacks and patch sets, keeping what is written back.

PNG, TIFF, JPEG and BMP in 8/16-bit grey, grey+alpha, RGB, RGBA and float TIFF (16-bit
colour PNG through ``imagecodecs``: Pillow reduces it to 8 bits); a multi-page TIFF is one
``"stack"`` item; ``.npy``/``.npz`` hold (N, h, w) patch sets; a camera RAW file is its mosaic (H, W)
uint16 with ``meta["raw"]`` (:mod:`.raw`).  EXIF (orientation), ICC
profile and DPI are kept.  Headers over :data:`MAX_PIXELS` are refused before decoding.
"""

from __future__ import annotations

import threading
import warnings
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from .errors import InputError
from .inputs import IMAGE_SUFFIXES, PATCHSET_SUFFIXES, SUPPORTED_SUFFIXES, InputFile, unsupported_type
from .lazy_tiff import lazy_tiff_layout, open_lazy_tiff
from .raw import RAW_SUFFIXES, read_raw
from .tiff import EXIF_ORIENTATION, tiff_header, tiff_pages, tifffile_messages
from .zarr_io import FORMAT as ZARR_FORMAT
from .zarr_io import ZARR_SUFFIX, read_layout

#: default limit on the pixels of one image (per page), Pillow's own default
#: (about 9459 x 9459): above it a header is taken for a decompression bomb.
MAX_PIXELS = int(Image.MAX_IMAGE_PIXELS or 89_478_485)

_DTYPES = (np.uint8, np.uint16, np.float32, np.float64)
_PIL_LIMIT_LOCK = threading.Lock()


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
    format: str  # PNG, TIFF, JPEG, BMP, NPY, NPZ; a camera RAW's (DNG, CR2, NEF, ...)
    npz_key: str | None = None
    npz_extra: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    rel: Path | None = None
    max_pixels: int | None = None  # the limit it was read with (for :meth:`reread`)
    _shape: tuple = field(default=(), repr=False)
    _dtype: np.dtype | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        """Its name in messages: ``rel`` (a sub-folder tells apart two files of one
        name), else the file's name."""
        return self.rel.as_posix() if self.rel is not None else self.path.name

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
        if self.is_lazy:
            raise InputError(f"{self.path}: this image is read lazily, chunk by chunk "
                             "(LoadedItem.open_lazy), never whole")
        a = read_item(self.path, max_pixels=self.max_pixels).array
        if a.shape != self._shape or a.dtype != self._dtype:
            raise InputError(f"{self.path}: the file changed while the run was going "
                             f"(now {a.dtype} {a.shape}, was {self._dtype} {self._shape}); "
                             "run again")
        return a

    @property
    def is_lazy(self) -> bool:
        """An OME-Zarr image, or a TIFF too large to hold (``read_item``'s ``lazy_bytes``):
        its pixels are read chunk by chunk (:meth:`open_lazy`), never held whole."""
        return self.format == ZARR_FORMAT or "lazy" in self.meta

    def open_lazy(self):
        """A lazy item's pixels as a Dask array of its shape; nothing is read yet."""
        if self.format == ZARR_FORMAT:
            from .zarr_io import open_lazy

            return open_lazy(self.path, self.meta["zarr"])
        return open_lazy_tiff(self)

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
        if EXIF_ORIENTATION in exif:
            meta["orientation"] = int(exif[EXIF_ORIENTATION])
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


def _read_tiff(path: Path, max_pixels: int) -> tuple[np.ndarray, dict, bool]:
    """(array, meta, is_stack); pages of the first series, samples last."""
    import tifffile

    with tifffile_messages(), tifffile.TiffFile(path) as tf:
        series, axes, shape, meta = tiff_header(tf, path)
        _check_tiff_size(path, axes, shape, max_pixels)
        s = series[0]
        a = s.asarray() if len(series) == 1 else np.stack([x.asarray() for x in series])
    return tiff_pages(path, a, axes, meta)


def _check_tiff_size(path: Path, axes: str, shape: tuple, max_pixels: int) -> None:
    h, w = shape[axes.index("Y")], shape[axes.index("X")]
    if w * h > max_pixels:
        raise _too_many_pixels(path, w, h, max_pixels)


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


def read_item(path, *, max_pixels: int | None = None,
              lazy_bytes: int | None = None) -> LoadedItem:
    """Read one supported file; raises InputError with the reason and the fix.

    ``max_pixels`` (default :data:`MAX_PIXELS`) bounds the pixels of one image or page;
    larger headers are refused before anything is decoded.  A TIFF whose pixels would
    take more than ``lazy_bytes`` is not decoded but read lazily
    (:mod:`kpca_denoise.io.lazy_tiff`; no pixel limit then); None: never.
    """
    path = Path(path)
    limit = MAX_PIXELS if max_pixels is None else int(max_pixels)
    suffix = path.suffix.lower()
    if suffix == ZARR_SUFFIX and (path.is_dir() or not path.exists()):
        return _read_zarr(path, max_pixels)
    if suffix not in SUPPORTED_SUFFIXES:
        raise InputError(unsupported_type(path))
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    if path.stat().st_size == 0:
        raise InputError(f"{path}: the file is empty (0 bytes)")
    if suffix in PATCHSET_SUFFIXES:
        a, key, extra = _read_patchset(path)
        return LoadedItem(path, a, "patchset", PATCHSET_SUFFIXES[suffix], key, extra,
                          max_pixels=max_pixels)
    if suffix in RAW_SUFFIXES:  # the sensor's mosaic, its levels and pattern in meta["raw"]
        a, meta = read_raw(path, limit)
        return LoadedItem(path, a, "image", RAW_SUFFIXES[suffix], meta=meta, max_pixels=max_pixels)
    fmt = IMAGE_SUFFIXES[suffix]
    try:
        held = _sniff(path)
        if held is not None and held != fmt:
            # its output would be written as its name says: a 16-bit TIFF named .png
            # came back an 8-bit PNG
            ext = {"PNG": ".png", "TIFF": ".tif", "JPEG": ".jpg", "BMP": ".bmp"}[held]
            raise InputError(f"{path}: holds a {held} image but is named {path.suffix}; "
                             f"rename it to {path.stem}{ext}")
        lazy = None
        if fmt == "TIFF" and lazy_bytes is not None:
            lazy = lazy_tiff_layout(path, lazy_bytes)
        if lazy is not None:
            shape, dtype, meta, stack = lazy
            item = LoadedItem(path, None, "stack" if stack else "image", fmt, meta=meta,
                              max_pixels=max_pixels)
            item._shape, item._dtype = shape, dtype
            return item
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


def _read_zarr(path: Path, max_pixels) -> LoadedItem:
    """An OME-Zarr image: its layout only, the pixels stay in the folder (read lazily,
    :func:`kpca_denoise.io.zarr_io.open_lazy`).  No pixel limit: nothing is decoded
    whole."""
    if not path.exists():
        raise InputError(f"{path}: no such folder")
    layout = read_layout(path)
    item = LoadedItem(path, None, "stack" if layout.is_stack else "image", ZARR_FORMAT,
                      meta={"zarr": layout}, max_pixels=max_pixels)
    item._shape, item._dtype = layout.image_shape, layout.dtype
    return item


def read_items(paths, *, max_pixels: int | None = None, keep_pixels: bool = True,
               lazy_bytes: int | None = None):
    """Read many files (paths or :class:`InputFile`) -> ``(items, errors)``, a bad file
    reported as ``(path, message)``.  With ``keep_pixels`` false each file is still read
    in full (a bad one is found before any compute) but released at once: memory holds
    one file, not the set.  ``lazy_bytes``: as :func:`read_item`'s."""
    items, errors = [], []
    for p in paths:
        rel = p.rel if isinstance(p, InputFile) else None
        p = p.path if isinstance(p, InputFile) else Path(p)
        try:
            item = read_item(p, max_pixels=max_pixels, lazy_bytes=lazy_bytes)
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
