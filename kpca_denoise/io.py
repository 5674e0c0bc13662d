"""Reading and writing images and patch sets.

Images keep their format, mode and bit depth: 8- and 16-bit grayscale,
8-bit RGB/RGBA, float TIFF.  Patch sets are ``.npy`` arrays of shape
(N, h, w) or ``.npz`` archives holding one such array (or one named
``images``, other arrays such as ``target`` are carried along).
Writes are atomic (temporary file in the target folder, then rename) and
refuse to replace any file that was read as an input.
"""

from __future__ import annotations

import os
import tempfile
import warnings
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

__all__ = [
    "IMAGE_SUFFIXES",
    "PATCHSET_SUFFIXES",
    "SUPPORTED_SUFFIXES",
    "InputError",
    "LoadedItem",
    "expand_inputs",
    "read_item",
    "read_items",
    "write_item",
    "output_path",
    "check_not_input",
    "atomic_write",
    "jsonable",
    "rank_tag",
]

IMAGE_SUFFIXES = {".png": "PNG", ".tif": "TIFF", ".tiff": "TIFF", ".jpg": "JPEG",
                  ".jpeg": "JPEG", ".bmp": "BMP"}
PATCHSET_SUFFIXES = {".npy": "NPY", ".npz": "NPZ"}
SUPPORTED_SUFFIXES = {**IMAGE_SUFFIXES, **PATCHSET_SUFFIXES}


class InputError(ValueError):
    """A file or folder that cannot be used, with the reason and the fix."""


@dataclass
class LoadedItem:
    path: Path
    array: np.ndarray
    kind: str  # 'image' or 'patchset'
    format: str  # PNG, TIFF, JPEG, BMP, NPY, NPZ
    npz_key: str | None = None
    npz_extra: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def is_patchset(self) -> bool:
        return self.kind == "patchset"


def expand_inputs(paths) -> list[Path]:
    """Files and folders -> the supported files, folders listed in sorted order.

    Raises InputError for a path that does not exist, a folder with no
    supported file, or an explicitly named file of an unsupported type.
    """
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(f for f in p.iterdir()
                           if f.is_file() and f.suffix.lower() in SUPPORTED_SUFFIXES)
            if not found:
                raise InputError(
                    f"{p}: the folder has no supported files "
                    f"({', '.join(sorted(SUPPORTED_SUFFIXES))})"
                )
            out.extend(found)
        elif p.is_file():
            if p.suffix.lower() not in SUPPORTED_SUFFIXES:
                raise InputError(
                    f"{p}: unsupported file type '{p.suffix or '(none)'}'; "
                    f"use one of {', '.join(sorted(SUPPORTED_SUFFIXES))}"
                )
            out.append(p)
        else:
            raise InputError(f"{p}: no such file or folder")
    return out


def _read_image(path: Path) -> np.ndarray:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as im:
                im.load()
                mode = im.mode
                if mode == "1":
                    im = im.convert("L")
                elif mode == "P":
                    im = im.convert("RGBA" if "transparency" in im.info else "RGB")
                elif mode in ("CMYK", "YCbCr", "LAB", "HSV"):
                    im = im.convert("RGB")
                a = np.asarray(im)
    except UnidentifiedImageError:
        raise InputError(f"{path}: not a readable image (corrupt or wrong file type)") from None
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombWarning) as exc:
        raise InputError(f"{path}: cannot read the image ({exc})") from None
    if a.dtype == np.int32 or a.dtype.byteorder == ">":
        # Pillow's 'I' / 'I;16B' modes: 16-bit data in a wider or big-endian type
        if a.size and (a.min() < 0 or a.max() > 65535):
            raise InputError(f"{path}: 32-bit integer images are not supported; use 8 or 16 bits")
        a = a.astype(np.uint16)
    if a.dtype not in (np.uint8, np.uint16, np.float32, np.float64):
        raise InputError(f"{path}: unsupported pixel type {a.dtype}")
    if a.size == 0:
        raise InputError(f"{path}: the image is empty (0 pixels)")
    if np.issubdtype(a.dtype, np.floating) and not np.all(np.isfinite(a)):
        raise InputError(f"{path}: the image contains NaN or Inf pixels")
    return np.ascontiguousarray(a)


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
        except (ValueError, OSError, zipfile.BadZipFile) as exc:
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


def read_item(path) -> LoadedItem:
    """Read one supported file; raises InputError with the reason."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        raise InputError(
            f"{path}: unsupported file type '{path.suffix or '(none)'}'; "
            f"use one of {', '.join(sorted(SUPPORTED_SUFFIXES))}"
        )
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    if path.stat().st_size == 0:
        raise InputError(f"{path}: the file is empty (0 bytes)")
    if suffix in PATCHSET_SUFFIXES:
        a, key, extra = _read_patchset(path)
        return LoadedItem(path, a, "patchset", PATCHSET_SUFFIXES[suffix], key, extra)
    return LoadedItem(path, _read_image(path), "image", IMAGE_SUFFIXES[suffix])


def read_items(paths) -> tuple[list[LoadedItem], list[tuple[Path, str]]]:
    """Read many files; a bad file is reported in the second list, the rest are kept."""
    items, errors = [], []
    for p in paths:
        try:
            items.append(read_item(p))
        except InputError as exc:
            errors.append((Path(p), str(exc)))
    return items, errors


def output_path(item: LoadedItem, outdir, tag: str) -> Path:
    """``OUTDIR/<stem>_<tag><suffix>``, in the source's format."""
    return Path(outdir) / f"{item.path.stem}_{tag}{item.path.suffix}"


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


def _to_pil(array: np.ndarray, fmt: str) -> Image.Image:
    a = np.asarray(array)
    if a.ndim == 3 and a.shape[2] == 1:
        a = a[..., 0]
    if a.dtype == np.uint16:
        if a.ndim != 2:
            raise InputError("16-bit colour images cannot be written; only 16-bit grayscale")
        if fmt in ("JPEG", "BMP"):
            raise InputError(f"{fmt} cannot store 16-bit images; use PNG or TIFF")
        return Image.fromarray(np.ascontiguousarray(a, dtype="<u2"))  # mode I;16
    if np.issubdtype(a.dtype, np.floating):
        if fmt != "TIFF" or a.ndim != 2:
            raise InputError(f"floating-point images can only be written as grayscale TIFF, not {fmt}")
        return Image.fromarray(np.ascontiguousarray(a, dtype=np.float32))  # mode F
    if a.dtype != np.uint8:
        raise InputError(f"cannot write pixel type {a.dtype}")
    return Image.fromarray(a)


def atomic_write(target, write) -> Path:
    """Write a file through a temporary file in the target folder, then rename.

    ``write(tmp_path)`` writes the content; on any failure the temporary file
    is removed, so a half-written file never appears under ``target``.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.stem}.", suffix=target.suffix + ".part",
                               dir=target.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return target


def rank_tag(rank) -> str:
    """Output name tag of a rank: ``kpca_r8``, or ``kpca`` for the uncapped default."""
    return "kpca" if rank is None else f"kpca_r{rank}"


def jsonable(obj):
    """numpy scalars/arrays, tuples and non-finite floats -> plain JSON values."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not np.isfinite(obj):
        return None if np.isnan(obj) else str(obj)
    return obj


def write_item(item: LoadedItem, array: np.ndarray, target, *, inputs=()) -> Path:
    """Write ``array`` in ``item``'s format to ``target`` atomically.

    Nothing is left behind on failure; ``inputs`` (the files that were read)
    are never overwritten.
    """
    target = Path(target)
    check_not_input(target, list(inputs) + [item.path])
    if item.kind == "patchset":
        a = np.asarray(array).astype(item.array.dtype, copy=False)

        def write(tmp: Path) -> None:
            with open(tmp, "wb") as fh:
                if item.format == "NPY":
                    np.save(fh, a)
                else:
                    np.savez_compressed(fh, **{item.npz_key or "images": a}, **item.npz_extra)
    else:
        im = _to_pil(array, item.format)  # raises before any file is created
        opts = {"quality": 95} if item.format == "JPEG" else {}
        if item.format == "TIFF":
            opts["compression"] = "tiff_deflate"

        def write(tmp: Path) -> None:
            im.save(tmp, format=item.format, **opts)

    return atomic_write(target, write)
