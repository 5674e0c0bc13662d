"""Reading and writing images, stacks and patch sets: nothing is lost.

A file is read and written back in the same format, bit depth, page layout and
metadata (EXIF, ICC profile, DPI, TIFF and ImageJ tags).  One module a job:

* :mod:`.inputs`: the supported suffixes and the files named on the command line;
* :mod:`.reading`: the readers (Pillow, tifffile, NumPy), :class:`LoadedItem`;
* :mod:`.writing`: atomic writes, output names and the per-format writers;
* :mod:`.zarr_io`: OME-Zarr image folders, read lazily and written chunk by chunk
  (through :func:`.writing.write_lazy`);
* :mod:`.lazy_tiff`: TIFFs too large to hold, read lazily through the same path;
* :mod:`.raw`: camera RAW files (LibRaw through ``rawpy``): the mosaic in, a DNG out;
* :mod:`.errors`: :class:`InputError` and :class:`OutputExistsError`.
"""

from .errors import InputError, OutputExistsError
from .inputs import (FOLDER_SUFFIXES, IMAGE_SUFFIXES, PATCHSET_SUFFIXES, SUPPORTED_SUFFIXES,
                     InputFile, collect_inputs, expand_inputs)
from .reading import MAX_PIXELS, LoadedItem, display_oriented, read_item, read_items
from .writing import (OUTPUT_FORMATS, atomic_write, atomic_write_dir, check_not_input, in_format,
                      jsonable, output_path, rank_tag, remove_stale_parts, write_item,
                      write_lazy, write_sidecar, write_zarr)

__all__ = [
    "IMAGE_SUFFIXES",
    "PATCHSET_SUFFIXES",
    "SUPPORTED_SUFFIXES",
    "FOLDER_SUFFIXES",
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
    "in_format",
    "OUTPUT_FORMATS",
    "write_zarr",
    "write_lazy",
    "atomic_write_dir",
    "output_path",
    "check_not_input",
    "atomic_write",
    "write_sidecar",
    "remove_stale_parts",
    "jsonable",
    "rank_tag",
    "display_oriented",
]
