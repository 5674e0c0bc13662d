"""Large TIFFs read lazily, chunk by chunk, through the OME-Zarr inputs' path.

A TIFF whose decoded pixels would exceed a memory budget (the caller's ``lazy_bytes``,
see :func:`memory_budget`) is not decoded: its first series is opened as a Dask array
(tifffile's Zarr view of its tiles or strips, ``TiffFile.aszarr``; an uncompressed image
stored in one piece is read by bands of rows straight from the file), so the tiled
engine reads only the tiles it needs.  The header is read as for any TIFF
(:func:`.tiff.tiff_header`): the same axes, pages and metadata, written back by
:func:`kpca_denoise.io.writing.write_lazy`.  Needs ``zarr`` and ``dask`` (the extra
``kpca-denoise[zarr]``).  See ``docs/large-images.md``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .errors import InputError
from .tiff import tiff_header, tiff_pages, tifffile_messages

#: values per chunk of an uncompressed image read by bands of rows
_BAND_VALUES = 1 << 23
_DTYPES = (np.uint8, np.uint16, np.float32, np.float64)


def memory_budget() -> int | None:
    """Bytes this process can still allocate, the least of what is known: Linux's
    MemAvailable, the address-space and data limits (``ulimit -v``, ``prlimit``) less
    what is already mapped, and the memory cgroup's limit less its usage; None where
    none is known."""
    try:
        import resource  # not on Windows
    except ImportError:
        resource = None
    known = []
    status = _proc_kib("/proc/self/status", ("VmSize", "VmData"))
    for limit, used in (("RLIMIT_AS", "VmSize"), ("RLIMIT_DATA", "VmData")):
        soft = resource.getrlimit(getattr(resource, limit))[0] if resource else -1
        if soft not in (-1, getattr(resource, "RLIM_INFINITY", -1)) and used in status:
            known.append(soft - status[used])
    mem = _proc_kib("/proc/meminfo", ("MemAvailable",))
    if "MemAvailable" in mem:
        known.append(mem["MemAvailable"])
    cg = _cgroup_headroom()
    if cg is not None:
        known.append(cg)
    return max(0, min(known)) if known else None


def _proc_kib(path: str, keys: tuple) -> dict:
    """``{key: bytes}`` of the ``key: N kB`` lines of a /proc file (empty if unreadable)."""
    out = {}
    try:
        with open(path) as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in keys:
                    out[k] = int(v.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return out


def _cgroup_headroom() -> int | None:
    """The memory cgroup's limit less its usage (cgroup v2, else v1), or None."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = [ln.strip().split(":", 2) for ln in f if ln.count(":") >= 2]
    except OSError:
        return None
    for _, ctrl, rel in lines:
        if ctrl == "":
            base, files = Path("/sys/fs/cgroup") / rel.lstrip("/"), ("memory.max", "memory.current")
        elif "memory" in ctrl.split(","):
            base = Path("/sys/fs/cgroup/memory") / rel.lstrip("/")
            files = ("memory.limit_in_bytes", "memory.usage_in_bytes")
        else:
            continue
        try:
            limit, usage = ((base / f).read_text().strip() for f in files)
            if limit != "max" and int(limit) < 1 << 60:
                return int(limit) - int(usage)
        except (OSError, ValueError):
            continue
    return None


def _needs_zarr(path: Path, nbytes: int) -> InputError:
    return InputError(f"{path}: the image ({nbytes / 1e9:.1f} GB decoded) is too large to "
                      "read whole here and reading it in parts needs zarr and dask; install "
                      "kpca-denoise[zarr]")


def lazy_tiff_layout(path, lazy_bytes: int):
    """What a lazy read of the TIFF at ``path`` holds, when its decoded pixels exceed
    ``lazy_bytes``: ``(shape, dtype, meta, is_stack)`` (pages first, samples last; ``meta``
    as :func:`~kpca_denoise.io.tiff.tiff_header` gives it, marked ``lazy``), else None
    (read it whole).  Nothing is decoded; InputError for what cannot be read in parts."""
    import tifffile

    path = Path(path)
    with tifffile_messages(), tifffile.TiffFile(path) as tf:
        series, axes, shape, meta = tiff_header(tf, path)
        dtype = np.dtype(series[0].dtype)
        nbytes = int(np.prod(shape)) * dtype.itemsize
        if nbytes <= lazy_bytes or not any(dtype.newbyteorder("=") == d for d in _DTYPES):
            return None  # small, or a pixel type the whole-file reader converts
        try:
            import dask.array  # noqa: F401
            import zarr  # noqa: F401
        except ImportError:
            raise _needs_zarr(path, nbytes) from None
        a = _lazy_series(tf, series, path, max(lazy_bytes // 4, 1 << 26))
        a, meta, stack = tiff_pages(path, a, axes, meta)
    meta["lazy"] = True
    return tuple(a.shape), np.dtype(dtype.newbyteorder("=")), meta, stack


def open_lazy_tiff(item):
    """A lazy TIFF item's pixels as a Dask array of its shape (pages first, samples last);
    nothing is read yet.  The file stays open while the array is used."""
    import tifffile

    with tifffile_messages():
        tf = tifffile.TiffFile(item.path)
        series, axes, _, meta = tiff_header(tf, item.path)
        a = _lazy_series(tf, series, item.path, None)
    a, _, _ = tiff_pages(item.path, a, axes, dict(meta))
    if tuple(a.shape) != tuple(item.shape) or a.dtype.newbyteorder("=") != item.dtype:
        raise InputError(f"{item.path}: the file changed while the run was going; run again")
    return a.astype(item.dtype) if a.dtype != item.dtype else a


def _lazy_series(tf, series, path: Path, max_chunk: int | None):
    """The series (one, or several alike stacked) as one Dask array in tifffile's axes;
    InputError when a stored piece exceeds ``max_chunk`` bytes (None: not checked)."""
    import dask.array as da

    parts = [_lazy_one(tf, s, path, max_chunk) for s in series]
    return parts[0] if len(parts) == 1 else da.stack(parts)


def _lazy_one(tf, s, path: Path, max_chunk: int | None):
    import dask.array as da

    page = s.pages[0] if s.pages else tf.pages[0]
    if s.dataoffset is not None and int(page.compression) == 1:
        # uncompressed in one piece: any band of rows is read at its offset
        return _contiguous(path, s, tf.byteorder)
    index = next(k for k, x in enumerate(tf.series) if x is s)
    view = _SeriesView(path, index)
    z = view.array()
    if max_chunk is not None:
        chunk = int(np.prod(z.chunks)) * np.dtype(z.dtype).itemsize
        if chunk > max_chunk:
            raise InputError(
                f"{path}: the image is stored compressed in pieces of {chunk / 1e6:.0f} MB "
                "that cannot be read in parts; save it tiled (e.g. tifffile.imwrite(..., "
                "tile=(256, 256), compression='zlib')) or as OME-Zarr")
    return da.from_array(view, chunks=z.chunks, lock=True, asarray=True,
                         name=f"kpca-tiff-{os.path.abspath(path)}-{index}")


class _SeriesView:
    """tifffile's Zarr view of one series (``TiffFile.aszarr``), opened in each process
    that reads it: the open file is never sent to a Dask worker."""

    def __init__(self, path: Path, index: int):
        self.path, self.index = path, index
        self._z = None
        z = self.array()
        self.shape, self.dtype, self.ndim = tuple(z.shape), np.dtype(z.dtype), len(z.shape)

    def array(self):
        if self._z is None:
            import tifffile
            import zarr

            self._z = zarr.open(tifffile.TiffFile(self.path).series[self.index].aszarr(),
                                mode="r")
        return self._z

    def __getitem__(self, key):
        return self.array()[key]

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_z": None}


def _contiguous(path: Path, s, byteorder: str):
    """An uncompressed series stored contiguously, as a Dask array of bands of rows."""
    import dask.array as da

    dtype = np.dtype(s.dtype).newbyteorder(byteorder)
    reader = _Rows(path, int(s.dataoffset), tuple(s.shape), s.axes.index("Y"), dtype)
    row = int(np.prod(s.shape[reader.ly + 1:]))
    chunks = (1,) * reader.ly + (max(1, _BAND_VALUES // max(row, 1)),) + s.shape[reader.ly + 1:]
    return da.from_array(reader, chunks=chunks, lock=False, asarray=True, fancy=False,
                         name=f"kpca-tiff-{os.path.abspath(path)}-{s.dataoffset}")


class _Rows:
    """Read-only array view of an uncompressed image in a file: ``[lead..., y0:y1, ...]``
    reads those rows at their offset (one read per leading index)."""

    def __init__(self, path: Path, offset: int, shape: tuple, ly: int, dtype: np.dtype):
        self.path, self.offset, self.shape, self.ly, self.dtype = path, offset, shape, ly, dtype
        self.ndim = len(shape)
        self.row = int(np.prod(shape[ly + 1:]))

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        key = key + (slice(None),) * (self.ndim - len(key))
        lead = [range(*k.indices(n)) if isinstance(k, slice) else [int(k)]
                for k, n in zip(key[:self.ly], self.shape[:self.ly])]
        ys = range(*key[self.ly].indices(self.shape[self.ly]))
        y0, y1 = (ys.start, ys.stop) if ys.step == 1 else (0, self.shape[self.ly])
        tail = self.shape[self.ly + 1:]
        out = []
        with open(self.path, "rb") as f:
            for idx in np.ndindex(*[len(r) for r in lead]):
                page = int(np.ravel_multi_index([r[i] for r, i in zip(lead, idx)],
                                                self.shape[:self.ly])) if self.ly else 0
                start = (page * self.shape[self.ly] + y0) * self.row
                f.seek(self.offset + start * self.dtype.itemsize)
                n = max(y1 - y0, 0) * self.row
                band = np.fromfile(f, self.dtype, n).reshape((max(y1 - y0, 0),) + tail)
                out.append(band if ys.step == 1 else band[key[self.ly]])
        block = np.stack(out).reshape(tuple(len(r) for r in lead) + out[0].shape)
        squeeze = tuple(i for i, k in enumerate(key[:self.ly]) if not isinstance(k, slice))
        block = block.squeeze(axis=squeeze) if squeeze else block
        return block[(Ellipsis,) + key[self.ly + 1:]] if any(
            k != slice(None) for k in key[self.ly + 1:]) else block


#: TIFF page axes that are OME-NGFF axes of the same name, in the order NGFF wants
_OME_ORDER = "TCZ"
#: micrometres per TIFF ResolutionUnit (2 inch, 3 centimetre)
_UM_PER_UNIT = {2: 25400.0, 3: 10000.0}


def zarr_layout(item, chunk: int = 512):
    """The OME-Zarr layout (OME-NGFF 0.4) a lazily read TIFF's outputs are written in
    when asked for: its page axes T, C, Z as ``t``, ``c``, ``z`` in NGFF's order (any
    other page axes, or a C beside colour samples, flattened into one ``z``), the
    samples (RGB, RGBA, grey + alpha) as a ``c`` axis, ``y`` and ``x`` with the TIFF's resolution as
    their scale in micrometres; chunks of ``chunk`` pixels a side, one page deep."""
    from .zarr_io import ZarrLayout

    meta, shape = item.meta, tuple(item.shape)
    samples = meta.get("axes", "").endswith("S") and len(shape) == 3 + item.is_stack
    colour = shape[-1] if samples else None  # RGB(A), or grey + alpha: a c axis
    stored = tuple(meta.get("shape") or shape)
    lead = meta.get("axes", "YX").index("Y")
    letters, sizes = meta.get("axes", "")[:lead], stored[:lead]
    if item.is_stack and not (set(letters) <= set(_OME_ORDER) and len(set(letters)) == len(letters)
                              and not (colour and "C" in letters)):
        letters, sizes = "Z", (item.n_pages,)
    if not item.is_stack:
        letters, sizes = "", ()
    names = sorted(letters, key=_OME_ORDER.index) + (["C"] if colour else [])
    names = sorted(names, key=_OME_ORDER.index) + ["Y", "X"]
    h, w = shape[1:3] if item.is_stack else shape[:2]
    size = {**dict(zip(letters, sizes)), "Y": h, "X": w, **({"C": colour} if colour else {})}
    level_shape = tuple(size[n] for n in names)
    perm = tuple(names.index(n) for n in letters) + (names.index("Y"), names.index("X")) + (
        (names.index("C"),) if colour else ())
    res, unit = meta.get("resolution"), meta.get("resolutionunit")
    um = _UM_PER_UNIT.get(unit)
    scale = {n: 1.0 for n in names}
    if res and um:
        scale["X"], scale["Y"] = (um / (v[0] / v[1]) if isinstance(v, tuple) else um / v
                                  for v in res)
    kinds = {"T": "time", "C": "channel", "Z": "space", "Y": "space", "X": "space"}
    axes = [{"name": n.lower(), "type": kinds[n],
             **({"unit": "micrometer"} if um and n in "YX" else {})} for n in names]
    chunks = tuple(min(chunk, size[n]) if n in "YX" else (size[n] if n == "C" and colour else 1)
                   for n in names)
    attrs = {"multiscales": [{"version": "0.4", "name": item.path.stem, "axes": axes,
                              "datasets": [{"path": "0", "coordinateTransformations": [
                                  {"type": "scale", "scale": [scale[n] for n in names]}]}]}]}
    return ZarrLayout("0", 2, level_shape, chunks, np.dtype(item.dtype), axes, perm,
                      tuple(size[n] for n in letters), colour, attrs)
