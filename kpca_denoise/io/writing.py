"""Writing files: the one place that does.

An item is written back in its format, bit depth, pages and metadata.  Writes are atomic
(a temporary file in the target folder, then a rename), get a normal file's permissions
under the umask, never replace an input, and with ``replace=False`` no existing file.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import socket
import struct
import tempfile
import threading
import time
import zlib
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import numpy as np
from PIL import Image

from .errors import InputError, OutputExistsError
from .reading import LoadedItem
from .tiff import EXIF_ORIENTATION

_UMASK_LOCK = threading.Lock()


#: the formats an image may be written in instead of its own (``--format``, the window's
#: export): name -> (format, suffix)
OUTPUT_FORMATS = {"png": ("PNG", ".png"), "tiff": ("TIFF", ".tif"), "jpeg": ("JPEG", ".jpg"),
                  "bmp": ("BMP", ".bmp")}
_FORMAT_NAMES = {"tif": "tiff", "jpg": "jpeg"}


def in_format(item: LoadedItem, fmt: str | None) -> LoadedItem:
    """``item`` to be written in the output format ``fmt`` (a key of
    :data:`OUTPUT_FORMATS`, 'tif' and 'jpg' too; None or its own format: ``item`` itself):
    the same pixels and metadata, its outputs named with that format's suffix.  Raises
    InputError in one line, before anything is computed, when that format cannot hold
    the item (a patch set, a stack in a one-page format, 16-bit or float pixels, alpha in
    a JPEG)."""
    if fmt is None:
        return item
    key = _FORMAT_NAMES.get(fmt.lower().lstrip("."), fmt.lower().lstrip("."))
    if key not in OUTPUT_FORMATS:
        raise InputError(f"unknown output format {fmt!r}; choose one of {', '.join(OUTPUT_FORMATS)}")
    name, suffix = OUTPUT_FORMATS[key]
    if name == item.format:
        return item
    if "raw" in item.meta:  # a camera mosaic: developed by LibRaw into 16 (TIFF) or 8 bits
        if name == "BMP":
            raise InputError(f"{item.path.name}: a RAW file is written as DNG, or developed "
                             "as tiff, png or jpeg; choose one of those")
        return replace(item, format=name, meta={**item.meta, "output_suffix": suffix})
    where = f"{item.path.name}: cannot be written as {name}"
    if item.is_patchset or item.is_lazy:
        raise InputError(f"{where}: {'a patch set' if item.is_patchset else 'an image read lazily'} "
                         f"is written in its own format ({item.format}); drop the format choice")
    if item.is_stack and name != "TIFF":
        raise InputError(f"{where}: a stack of {item.n_pages} pages needs a multi-page format; "
                         "choose tiff")
    dt = np.dtype(item.dtype)
    if dt.kind == "f" and name != "TIFF":
        raise InputError(f"{where}: {name} cannot store floating-point pixels; choose tiff")
    if dt == np.uint16 and name in ("JPEG", "BMP"):
        raise InputError(f"{where}: {name} cannot store 16-bit images; choose png or tiff")
    if len(item.shape) == 3 and item.shape[-1] in (2, 4) and name in ("JPEG", "BMP"):
        raise InputError(f"{where}: {name} has no alpha channel; choose png or tiff")
    meta = {k: v for k, v in item.meta.items() if k not in ("jpeg", "shape", "planar")}
    return replace(item, format=name, meta={**meta, "output_suffix": suffix})


def output_path(item: LoadedItem, outdir, tag: str) -> Path:
    """``OUTDIR/<sub-folder>/<stem>_<tag><suffix>``, the suffix the source's, or that of
    the format it is written in (:func:`in_format`)."""
    rel = item.rel if item.rel is not None else Path(item.path.name)
    return Path(outdir) / rel.parent / f"{rel.stem}_{tag}{item.meta.get('output_suffix', rel.suffix)}"


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


def _umask() -> int:
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def _file_mode() -> int:
    """What ``open(path, 'w')`` would give: 0666 less the umask."""
    return 0o666 & ~_umask()


def atomic_write(target, write, *, replace: bool = True) -> Path:
    """Write a file through a temporary file in the target folder, then rename.

    ``write(tmp_path)`` writes the content; on failure the temporary file is removed,
    so no half-written ``target`` appears.  With ``replace=False`` an existing target is
    never replaced (a hard link fails atomically if another process made it meanwhile):
    :class:`OutputExistsError`.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    if not replace and target.exists():
        raise OutputExistsError(f"{target}: the file already exists (another run may have "
                                "written it meanwhile) and was left as it is; choose another "
                                "output folder or allow replacing it (--overwrite)")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.stem}.{_part_tag()}",
                               suffix=target.suffix + ".part", dir=target.parent)
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


def host_tag() -> str:
    """A short tag of this machine, as temporary files' names carry it
    (``.<stem>.kpca-<host>-<pid>-...part``): a process number means something only on its own
    machine (a folder on a network share is written from several)."""
    return format(zlib.crc32(socket.gethostname().encode("utf-8", "replace")), "08x")


def _part_tag() -> str:
    """What a temporary file's name says of its writer: ``kpca-<host>-<pid>-``."""
    return f"kpca-{host_tag()}-{os.getpid()}-"


#: a temporary file of :func:`atomic_write`: ``.<stem>.kpca-<host>-<pid>-<random><suffix>.part``
_PART_NAME = re.compile(r"^\..*\.kpca-(?P<host>[0-9a-f]{8})-(?P<pid>\d+)-[^.]*(\.[^.]*)?\.part$")


def _process_alive(pid: int) -> bool:
    if pid <= 0:
        return True  # not a process number: never guess
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: another user's process
        return True
    return True


def remove_stale_parts(folder) -> list[Path]:
    """Remove the temporary files that writers killed mid-write (SIGKILL, a power cut)
    left in ``folder``: only names :func:`atomic_write` gives, made on this machine by a
    process that is gone; another run's files being written stay.  Returns the paths
    removed; a file that cannot be removed is left (never an error)."""
    removed = []
    host = host_tag()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        m = _PART_NAME.match(entry.name)
        if m is None or m["host"] != host or _process_alive(int(m["pid"])):
            continue
        try:
            if entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
            elif entry.is_dir(follow_symlinks=False):  # an OME-Zarr folder (atomic_write_dir)
                shutil.rmtree(entry.path)
                removed.append(Path(entry.path))
        except OSError:
            pass
    return removed


def _is_zarr_folder(p: Path) -> bool:
    return p.is_dir() and not p.is_symlink() and any(
        (p / n).is_file() for n in ("zarr.json", ".zgroup", ".zattrs"))


def _check_replaceable(target: Path, replace: bool, what: str) -> bool:
    """Whether ``target`` exists; OutputExistsError where it may not be replaced (not
    asked for, or not a Zarr folder)."""
    if not os.path.lexists(target):
        return False
    if not replace:
        raise OutputExistsError(f"{target}: the output {what} and was left as it is; choose "
                                "another output folder or allow replacing it (--overwrite)")
    if not _is_zarr_folder(target):
        raise OutputExistsError(f"{target}: a file or folder that is not a Zarr image has the "
                                "output's name and was left as it is; rename it or choose "
                                "another output folder")
    return True


def atomic_write_dir(target, write, *, replace: bool = True) -> Path:
    """:func:`atomic_write` for a folder (an OME-Zarr image): ``write(tmp)`` fills a
    temporary folder ``.<stem>.kpca-<host>-<pid>-<random><suffix>.part`` beside the
    target, which is then renamed; on failure (or Ctrl-C) it is removed, so no half
    folder is left.  With ``replace`` an existing Zarr folder is replaced (moved aside,
    then removed); any other existing file or folder is never replaced."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    _check_replaceable(target, replace, "already exists (another run may have written it "
                                        "meanwhile)")
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.stem}.{_part_tag()}",
                                suffix=target.suffix + ".part", dir=target.parent))
    aside = None
    try:
        os.chmod(tmp, _dir_mode())  # mkdtemp's 0700: a normal folder's permissions
        write(tmp)
        if _check_replaceable(target, replace, "appeared while this run was writing "
                                               "(another run may have written it)"):
            aside = Path(tempfile.mkdtemp(prefix=f".{target.stem}.{_part_tag()}",
                                          suffix=target.suffix + ".part", dir=target.parent))
            os.rename(target, aside / "old")
        os.rename(tmp, target)  # fails on a folder made meanwhile that is not empty
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if aside is not None and (aside / "old").exists() and not os.path.lexists(target):
            os.rename(aside / "old", target)  # the old output back
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)
        raise
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)
    return target


def _dir_mode() -> int:
    """What ``os.mkdir`` would give: 0777 less the umask."""
    return 0o777 & ~_umask()


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


def _image_writer(item: LoadedItem, a: np.ndarray):
    """A function writing ``a`` (the item's shape and dtype) to a path, or InputError
    before any file is created."""
    if "raw" in item.meta:  # a camera mosaic: a DNG, or developed (io/raw.py)
        return _raw_writer(item, a)
    if a.ndim == 3 and a.shape[2] == 1 and not item.is_stack:
        a = a[..., 0]
    return _tiff_writer(item, a) if item.format == "TIFF" else _pil_writer(item, a)


def _raw_writer(item: LoadedItem, a: np.ndarray):
    """A camera mosaic (H, W) uint16: by default a DNG with the input's RAW metadata;
    as TIFF (16 bits), PNG or JPEG (8 bits) developed by LibRaw (camera white balance, sRGB)."""
    from .raw import develop

    if item.meta.get("output_suffix", ".dng") == ".dng":
        return lambda tmp: write_dng(tmp, a, item.meta)
    bits = 16 if item.format == "TIFF" else 8
    developed = replace(item, format=item.format, meta={})
    rgb = develop(item.path, a, bits=bits)  # before any file is created
    return _image_writer(developed, rgb)


def _rationals(values, signed: bool = False) -> list[int]:
    out: list[int] = []
    for v in np.ravel(values):
        f = Fraction(float(v)).limit_denominator(1_000_000 if not signed else 100_000)
        out += [f.numerator, f.denominator]
    return out


def dng_tags(raw: dict, orientation: int | None) -> list[tuple]:
    """tifffile's ``extratags`` of a DNG holding a mosaic of ``raw`` (``meta["raw"]``):
    DNG version, make, model, camera name, orientation, CFA pattern, black level per
    CFA position, white level, colour matrix (D65), as-shot neutral, ISO."""
    letters = {"R": 0, "G": 1, "B": 2}
    cfa = [letters.get(c, 1) for c in raw["cfa"]]
    wb = np.asarray(raw["wb"][:3], dtype=np.float64)
    wb = np.where(wb > 0, wb, 1.0)
    neutral = (1.0 / wb) / (1.0 / wb[1])
    make, model = raw.get("make") or "", raw.get("model") or ""
    tags = [(50706, "B", 4, (1, 4, 0, 0), True),  # DNGVersion
            (50707, "B", 4, (1, 1, 0, 0), True),  # DNGBackwardVersion
            (50708, "s", 0, f"{make} {model}".strip() or "kpca-denoise", True),
            (274, "H", 1, int(orientation or 1), True),
            (33421, "H", 2, (2, 2), True),  # CFARepeatPatternDim
            (33422, "B", 4, tuple(cfa), True),  # CFAPattern
            (50710, "B", 3, (0, 1, 2), True),  # CFAPlaneColor
            (50713, "H", 2, (2, 2), True),  # BlackLevelRepeatDim
            (50714, "2I", 4, _rationals(raw["black"]), True),  # BlackLevel
            (50717, "I", 1, int(raw["white"]), True),  # WhiteLevel
            (50721, "2i", 9, _rationals(raw["color_matrix"], signed=True), True),
            (50778, "H", 1, 21, True),  # CalibrationIlluminant1: D65
            (50728, "2I", 3, _rationals(neutral), True)]  # AsShotNeutral
    if make:
        tags.append((271, "s", 0, make, True))
    if model:
        tags.append((272, "s", 0, model, True))
    if raw.get("iso"):
        tags.append((34855, "H", 1, int(min(raw["iso"], 65535)), True))
    return tags


def write_dng(target, mosaic: np.ndarray, meta: dict) -> None:
    """Write ``mosaic`` (H, W) uint16 as an uncompressed DNG with ``meta``'s RAW tags
    (:func:`dng_tags`).  tifffile, not pidng: it writes the black level per CFA position
    (pidng one value) and needs no other package; LibRaw reads both alike."""
    import tifffile

    a = np.ascontiguousarray(np.asarray(mosaic), dtype=np.uint16)
    tifffile.imwrite(target, a, photometric=32803, subfiletype=0, compression=None,
                     software="kpca-denoise",
                     extratags=dng_tags(meta["raw"], meta.get("orientation")))


def _tiff_tags(item: LoadedItem, shape: tuple) -> dict:
    """tifffile's keywords for an item's pixels of ``shape`` (samples last): the
    photometric, extra samples, resolution, ICC profile, orientation, description and
    software as read, zlib compression."""
    meta = item.meta
    photometric = {0: "miniswhite", 1: "minisblack", 2: "rgb"}.get(meta.get("photometric"))
    if photometric is None:
        photometric = "rgb" if shape[-1] in (3, 4) and len(shape) >= 3 and not (
            item.is_stack and len(shape) == 3) else "minisblack"
    kw: dict = {"photometric": photometric, "compression": "zlib"}
    if meta.get("extrasamples"):  # as read (grey + alpha stays one page of 2 samples)
        kw["extrasamples"] = meta["extrasamples"]
        kw["planarconfig"] = "contig"
    elif photometric == "rgb" and shape[-1] == 4:
        kw["extrasamples"] = ("unassalpha",)
    if "resolution" in meta:
        kw["resolution"] = meta["resolution"]
        kw["resolutionunit"] = meta.get("resolutionunit", 2)
    if meta.get("icc"):
        kw["iccprofile"] = meta["icc"]
    if meta.get("orientation"):
        kw["extratags"] = [(EXIF_ORIENTATION, "H", 1, int(meta["orientation"]), True)]
    for key in ("description", "software"):
        if meta.get(key):
            kw[key] = meta[key]
    return kw


def _tiff_writer(item: LoadedItem, a: np.ndarray):
    """TIFF through tifffile: the shape, page order, photometric, samples, planar layout,
    resolution, ICC, orientation and ImageJ metadata as read."""
    import tifffile

    meta = item.meta
    shape = meta.get("shape")
    data = a.reshape(shape) if shape is not None and int(np.prod(shape)) == a.size else a
    kw = _tiff_tags(item, a.shape)
    photometric = kw["photometric"]
    ij = _imagej_metadata(meta.get("imagej"), data, photometric)
    if meta.get("planar") and data.ndim >= 3:
        data = np.moveaxis(data, -1, -3)  # samples before rows, as read
        kw["planarconfig"] = "separate"

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


def _pil_writer(item: LoadedItem, a: np.ndarray):
    """PNG, JPEG and BMP through Pillow (16-bit colour PNG through imagecodecs)."""
    fmt, meta = item.format, item.meta
    if np.issubdtype(a.dtype, np.floating):
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
    """Write ``array`` (for a stack all pages, (P, H, W[, C])) in ``item``'s format, bit
    depth, pages and metadata to ``target``, atomically.  ``inputs`` (the files that
    were read) are never overwritten, and with ``replace=False`` no existing file is.
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


def write_zarr(item: LoadedItem, image, target, *, inputs=(), replace: bool = True) -> Path:
    """Write ``image`` (lazy Dask, or numpy; the item's shape) as an OME-Zarr image with
    the input's axes, scale, chunks, dtype and OME metadata, chunk by chunk
    (:func:`write_lazy`).  ``inputs`` are never overwritten, and with ``replace=False``
    no existing output is."""
    return write_lazy(item, {Path(target): image}, inputs=inputs, replace=replace)[0]


#: side of the tiles a lazily read TIFF's outputs are written in
LAZY_TIFF_TILE = 256
#: a band of rows computed at once holds at least this many of the engine's tiles
#: (work for every thread) when it stays under :data:`_BAND_BYTES`
BAND_TILES = 4
_BAND_BYTES = 256 << 20


def write_lazy(item: LoadedItem, outputs: dict, *, inputs=(), replace: bool = True,
               layout=None, written=None) -> list[Path]:
    """Write the lazy outputs ``{target: array}`` of one item (Dask arrays of the item's
    shape, e.g. every rank of one :func:`kpca_denoise.dask_array.lazy_denoise` pass)
    band of rows by band of rows: each band is computed once for all targets (one
    ``dask.compute``, so tiles the outputs share run once) and written into each, so
    memory holds a band, not the image.  A ``.zarr`` target is an OME-Zarr image of
    ``layout`` (default: an OME-Zarr input's own, a TIFF's
    :func:`~kpca_denoise.io.lazy_tiff.zarr_layout`); any other a tiled,
    zlib-compressed TIFF (BigTIFF above 2 GB) with the metadata :func:`write_item`
    keeps, samples interleaved (``docs/large-images.md``).  The targets appear together
    at the end, each atomically; on an error or Ctrl-C none is left.  ``written()``, if
    given, is called once every band is written, before the targets are renamed into
    place (the command line holds signals from there until it has recorded them).
    Returns the targets."""
    import dask.array as da

    targets = [Path(t) for t in outputs]
    for t in targets:
        check_not_input(t, list(inputs) + [item.path])
    arrays = [da.asarray(a) for a in outputs.values()]
    layout = layout or item.meta.get("zarr")
    if layout is None and item.format == "TIFF" and any(t.suffix.lower() == ".zarr"
                                                        for t in targets):
        from .lazy_tiff import zarr_layout

        layout = zarr_layout(item)
    for t, a in zip(targets, arrays):
        if tuple(a.shape) != tuple(item.shape):
            raise InputError(f"{t}: the array {tuple(a.shape)} is not the shape of "
                             f"{item.path.name} {tuple(item.shape)}; write the item's own result")
        if t.suffix.lower() == ".zarr" and layout is None:
            raise InputError(f"{t}: no OME-Zarr layout for {item.path.name}; give one")
    arrays = [a.astype(item.dtype) for a in arrays]
    tmps: dict = {}

    def nested(k: int) -> None:
        if k == len(targets):
            _write_bands(item, arrays, [tmps[t] for t in targets], targets, layout)
            if written is not None:
                written()
            return
        t = targets[k]
        write = atomic_write_dir if t.suffix.lower() == ".zarr" else atomic_write
        write(t, lambda tmp: (tmps.__setitem__(t, tmp), nested(k + 1)), replace=replace)

    nested(0)
    return targets


def _bands(item: LoadedItem, a) -> list[tuple[int, int, int]]:
    """``(page, y0, y1)`` in file order: runs of the array's row chunks (the engine's
    tile rows) of at least :data:`BAND_TILES` tiles while under :data:`_BAND_BYTES`."""
    rows_axis = 1 if item.is_stack else 0
    ys = a.chunks[rows_axis]
    across = len(a.chunks[rows_axis + 1])
    row_bytes = int(np.prod(a.shape[rows_axis + 1:])) * a.dtype.itemsize
    out = []
    for page in range(item.n_pages):
        y0 = y = n = 0
        for h in ys:
            y, n = y + h, n + across
            if n >= BAND_TILES or (y - y0) * row_bytes >= _BAND_BYTES // 2:
                out.append((page, y0, y))
                y0, n = y, 0
        if y0 < y:
            out.append((page, y0, y))
    return out


def _write_bands(item: LoadedItem, arrays, tmps, targets, layout) -> None:
    """Compute the outputs band by band and feed every target: OME-Zarr written here,
    TIFFs by writer threads that pull their tiles from a queue."""
    import dask

    sinks = [ZarrSink(tmp, layout) if t.suffix.lower() == ".zarr" else TiffSink(item, tmp)
             for t, tmp in zip(targets, tmps)]
    ok = False
    try:
        for page, y0, y1 in _bands(item, arrays[0]):
            sel = (page, slice(y0, y1)) if item.is_stack else (slice(y0, y1),)
            for sink, band in zip(sinks, dask.compute(*[a[sel] for a in arrays])):
                sink.put(page, y0, band)
        ok = True
    finally:
        for sink in sinks:
            sink.close(ok)


class ZarrSink:
    """An OME-Zarr output of :func:`write_lazy`, fed bands of rows (``put``) into its
    chunks."""

    def __init__(self, tmp: Path, layout):
        from .zarr_io import create_ome_zarr

        self.layout = layout
        self.out = create_ome_zarr(tmp, layout)

    def put(self, page: int, y0: int, band: np.ndarray) -> None:
        from .zarr_io import band_selection

        sel, order = band_selection(self.layout, page, y0, y0 + band.shape[0])
        self.out[sel] = np.transpose(band, order)

    def close(self, ok: bool) -> None:
        pass


class TiffSink:
    """A tiled TIFF written by tifffile in a thread of its own, fed bands of rows in
    file order (page by page); the thread turns them into rows of tiles."""

    _END = object()

    def __init__(self, item: LoadedItem, tmp: Path):
        self.queue: queue.Queue = queue.Queue(maxsize=1)
        self.error: BaseException | None = None
        shape = tuple(item.shape)
        stored = item.meta.get("shape")
        self.height = shape[1] if item.is_stack else shape[0]
        kw = _tiff_tags(item, shape)
        if kw["photometric"] == "rgb" or "extrasamples" in kw:
            kw["planarconfig"] = "contig"  # samples interleaved: the tiles come in rows
        nbytes = int(np.prod(shape)) * np.dtype(item.dtype).itemsize
        args = dict(shape=tuple(stored) if stored is not None and int(np.prod(stored))
                    == int(np.prod(shape)) else shape, dtype=item.dtype,
                    tile=(LAZY_TIFF_TILE, LAZY_TIFF_TILE), bigtiff=nbytes > 2**31,
                    maxworkers=1, **kw)  # tiles compressed as they come (no read-ahead)
        self.thread = threading.Thread(target=self._write, args=(tmp, args), daemon=True,
                                       name=f"kpca-denoise-tiff-{tmp.name}")
        self.thread.start()

    def _write(self, tmp: Path, args: dict) -> None:
        import tifffile

        try:
            tifffile.imwrite(tmp, self._tiles(), **args)
        except BaseException as exc:  # seen by the feeding thread
            self.error = exc

    def _bands(self):
        while True:
            got = self.queue.get()
            if got is self._END:
                return
            if got is None:
                raise InputError("writing stopped")
            yield got

    def _tiles(self):
        t = LAZY_TIFF_TILE
        held = None
        for y0, band in self._bands():
            held = band if held is None else np.concatenate([held, band])
            end = y0 + band.shape[0] == self.height
            n = held.shape[0] if end else held.shape[0] - held.shape[0] % t
            for r in range(0, n, t):
                for c in range(0, held.shape[1], t):
                    yield np.ascontiguousarray(held[r:r + t, c:c + t])
            held = None if end or n == held.shape[0] else held[n:]

    def _offer(self, got) -> bool:
        """Hand ``got`` to the writer thread; False if it has ended."""
        while self.thread.is_alive():
            try:
                self.queue.put(got, timeout=0.1)
                return True
            except queue.Full:  # the writer is busy with the previous band
                continue
        return False

    def put(self, page: int, y0: int, band: np.ndarray) -> None:
        if not self._offer((y0, band)):
            raise self.error or InputError("the TIFF writer stopped")

    def close(self, ok: bool) -> None:
        """Let the writer finish (``ok``) or stop it (the band it waits for is dropped)."""
        if not ok:
            try:
                self.queue.get_nowait()
            except queue.Empty:
                pass
        self._offer(self._END if ok else None)
        self.thread.join()
        if ok and self.error is not None:
            raise self.error
