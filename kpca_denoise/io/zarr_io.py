"""OME-Zarr images (``.zarr`` folders, OME-NGFF 0.4 and 0.5): read lazily, written
chunk by chunk.

Plain ``zarr`` (the optional extra ``kpca-denoise[zarr]``) and the OME-NGFF image
metadata read and written here: an image is a group whose ``multiscales`` name its
axes (``t``, ``c``, ``z`` before ``y``, ``x``), their physical scale and its
resolution levels.  The full-resolution level (the first dataset) is read as a Dask
array; a channel axis of 3 or 4 is the colour of each image, every other leading
axis (time, depth, more channels) gives pages, each denoised on its own.

:func:`create_ome_zarr` makes the output, in the temporary folder
:func:`kpca_denoise.io.writing.atomic_write_dir` gives it: the denoised full
resolution (no lower levels), its chunks, axes, scale and the input's other OME
metadata (``omero`` channels, the name); :func:`kpca_denoise.io.writing.write_lazy`
fills it band by band (:func:`band_selection`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import InputError

ZARR_SUFFIX = ".zarr"
FORMAT = "OME-Zarr"
_DTYPES = (np.uint8, np.uint16, np.float32, np.float64)
_LEADING = {"t": "time", "c": "channel", "z": "space"}


@dataclass
class ZarrLayout:
    """How a full-resolution level is seen as the images the engine takes:
    ``perm`` puts the page axes first, then y, x, then the colour axis (if any);
    the page axes (``page_shape``) are flattened into ``pages``."""

    level: str  # the dataset path of the full resolution
    zarr_format: int
    shape: tuple  # the level's shape, in its axes' order
    chunks: tuple
    dtype: np.dtype
    axes: list  # the OME axes as written (dicts)
    perm: tuple
    page_shape: tuple
    colour: int | None  # colour channels, or None
    attrs: dict  # the group's attributes, written back

    @property
    def pages(self) -> int:
        return int(np.prod(self.page_shape)) if self.page_shape else 1

    @property
    def is_stack(self) -> bool:
        return bool(self.page_shape)

    @property
    def image_shape(self) -> tuple:
        """The shape the engine sees: (P, H, W[, C]) for a stack, else (H, W[, C])."""
        y, x = (self.shape[self.perm[i]] for i in (len(self.page_shape), len(self.page_shape) + 1))
        return (((self.pages,) if self.page_shape else ()) + (y, x)
                + ((self.colour,) if self.colour else ()))


def _zarr(path: Path):
    try:
        import zarr
    except ImportError:
        raise InputError(f"{path}: reading OME-Zarr needs the zarr package; install "
                         "kpca-denoise[zarr]") from None
    return zarr


def _ome(attrs: dict) -> dict:
    """The OME metadata of a group's attributes: 0.5 keeps it under ``ome``."""
    return attrs["ome"] if isinstance(attrs.get("ome"), dict) else attrs


def read_layout(path) -> ZarrLayout:
    """The layout of an OME-Zarr image folder; InputError naming what is missing or
    unsupported."""
    path = Path(path)
    if not path.is_dir():
        raise InputError(f"{path}: an OME-Zarr image is a folder; this is not one")
    zarr = _zarr(path)
    try:
        group = zarr.open_group(str(path), mode="r")
    except Exception as exc:
        raise InputError(f"{path}: not a Zarr group ({type(exc).__name__}: {exc}); give an "
                         "OME-Zarr image folder") from None
    attrs = json.loads(json.dumps(dict(group.attrs)))  # plain JSON values
    ms = _ome(attrs).get("multiscales")
    if not isinstance(ms, list) or not ms or not isinstance(ms[0], dict):
        raise InputError(f"{path}: no OME-NGFF 'multiscales' metadata (a plain Zarr, or a "
                         "plate / labels folder); give an OME-Zarr image")
    m = ms[0]
    axes, datasets = m.get("axes"), m.get("datasets")
    if not isinstance(datasets, list) or not datasets or "path" not in datasets[0]:
        raise InputError(f"{path}: the multiscales name no datasets; the OME metadata is "
                         "incomplete")
    if (not isinstance(axes, list) or not axes
            or not all(isinstance(a, (dict, str)) for a in axes)):
        raise InputError(f"{path}: the multiscales name no axes (OME-NGFF before 0.4 is not "
                         "supported); write the image as OME-NGFF 0.4 or 0.5")
    names = [str(a.get("name") if isinstance(a, dict) else a).lower() for a in axes]
    level = str(datasets[0]["path"])
    try:
        arr = group[level]
    except Exception:
        raise InputError(f"{path}: the full-resolution level '{level}' named in the "
                         "metadata is missing") from None
    if not hasattr(arr, "shape") or len(arr.shape) != len(names):
        raise InputError(f"{path}: level '{level}' has {len(getattr(arr, 'shape', ()))} axes, "
                         f"the metadata names {len(names)} ({', '.join(names)})")
    if names[-2:] != ["y", "x"] or len(set(names)) != len(names) or any(
            n not in _LEADING for n in names[:-2]):
        raise InputError(f"{path}: unsupported axes ({', '.join(names)}); an image's axes "
                         "must be some of t, c, z, then y, x")
    dtype = np.dtype(arr.dtype)
    if not any(dtype == d for d in _DTYPES):
        raise InputError(f"{path}: unsupported pixel type {dtype}; use unsigned 8- or "
                         "16-bit integers (uint8, uint16) or 32/64-bit floats")
    shape = tuple(int(s) for s in arr.shape)
    if 0 in shape:
        raise InputError(f"{path}: the image is empty (shape {shape})")
    lead = list(range(len(names) - 2))
    c = names.index("c") if "c" in names else None
    colour = shape[c] if c is not None and shape[c] in (3, 4) else None
    pages = [i for i in lead if not (colour and i == c)]
    perm = tuple(pages) + (len(names) - 2, len(names) - 1) + ((c,) if colour else ())
    return ZarrLayout(level, int(getattr(arr.metadata, "zarr_format", 2)), shape,
                      tuple(int(k) for k in arr.chunks), dtype, list(axes), perm,
                      tuple(shape[i] for i in pages), colour, attrs)


def open_lazy(path, layout: ZarrLayout):
    """The full resolution as a lazy Dask array in the engine's shape
    (:attr:`ZarrLayout.image_shape`); nothing is read yet."""
    import dask.array as da

    zarr = _zarr(Path(path))
    arr = zarr.open_group(str(path), mode="r")[layout.level]
    a = da.from_zarr(arr).transpose(layout.perm)
    return a.reshape(layout.image_shape) if len(layout.page_shape) > 1 else a


def _out_attrs(layout: ZarrLayout) -> dict:
    """The input's attributes with one resolution level: the full one, its scale kept."""
    attrs = json.loads(json.dumps(layout.attrs))
    ome = _ome(attrs)
    m = dict(ome["multiscales"][0])
    first = dict(m["datasets"][0], path="0")
    m["datasets"] = [first]
    for key in ("type", "metadata"):  # how the lower levels were made: none written
        m.pop(key, None)
    ome["multiscales"] = [m] + list(ome["multiscales"][1:])
    return attrs


def create_ome_zarr(tmp: Path, layout: ZarrLayout):
    """An empty OME-Zarr image in the empty folder ``tmp``: one level ``0`` of the
    input's shape, chunks, dtype, format and OME metadata; returns the level's array,
    filled by :func:`band_selection`'s pieces."""
    zarr = _zarr(tmp)
    kw: dict = {}
    if layout.zarr_format == 2:  # OME-NGFF 0.4: chunks in nested folders
        kw["chunk_key_encoding"] = {"name": "v2", "separator": "/"}
    else:
        names = [str(x.get("name") if isinstance(x, dict) else x) for x in layout.axes]
        kw["dimension_names"] = names
    root = zarr.open_group(str(tmp), mode="w", zarr_format=layout.zarr_format)
    out = root.create_array("0", shape=layout.shape, chunks=layout.chunks,
                            dtype=layout.dtype, fill_value=0, **kw)
    root.attrs.update(_out_attrs(layout))
    return out


def band_selection(layout: ZarrLayout, page: int, y0: int, y1: int) -> tuple[tuple, tuple]:
    """Where rows ``y0:y1`` of page ``page`` of the engine's image go in the level:
    ``(selection, order)``, the level's index and the transpose that puts a band
    (rows, x[, colour]) in the level's axis order."""
    n = len(layout.page_shape)
    sel: list = [slice(None)] * len(layout.shape)
    for ax, i in zip(layout.perm[:n], np.unravel_index(page, layout.page_shape) if n else ()):
        sel[ax] = int(i)
    sel[layout.perm[n]] = slice(y0, y1)
    return tuple(sel), tuple(int(i) for i in np.argsort(layout.perm[n:]))
