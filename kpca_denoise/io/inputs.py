"""Finding the inputs: the supported suffixes, files and folder trees named on the
command line (or in the GUI) walked into the files to read and the names of their outputs."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .errors import InputError
from .raw import RAW_SUFFIXES

IMAGE_SUFFIXES = {".png": "PNG", ".tif": "TIFF", ".tiff": "TIFF", ".jpg": "JPEG",
                  ".jpeg": "JPEG", ".bmp": "BMP"}
PATCHSET_SUFFIXES = {".npy": "NPY", ".npz": "NPZ"}
#: camera RAW files (io/raw.py: LibRaw through rawpy, the 'raw' extra) are read too
SUPPORTED_SUFFIXES = {**IMAGE_SUFFIXES, **PATCHSET_SUFFIXES, **RAW_SUFFIXES}
#: folders read as one input: OME-Zarr images (kpca-denoise[zarr], io/zarr_io.py)
FOLDER_SUFFIXES = {".zarr": "OME-Zarr"}


@dataclass
class InputFile:
    """A file to read and the relative path (sub-folder + name) its outputs get."""

    path: Path
    rel: Path


def unsupported_type(p: Path) -> str:
    """The message for a file whose suffix is none of :data:`SUPPORTED_SUFFIXES`."""
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


def _inside_zarr(folder: Path) -> bool:
    """Whether ``folder`` is a Zarr array or group (its metadata file is there) or lies in a
    ``.zarr`` folder: a level of an OME-Zarr image given instead of the image."""
    meta = (".zarray", ".zgroup", "zarr.json")
    return (any((folder / m).is_file() for m in meta)
            or any(q.suffix.lower() == ".zarr" for q in folder.resolve().parents))


def collect_inputs(paths, *, exclude=None):
    """Files and folder trees -> ``(files, errors, skipped)``.

    ``files``: :class:`InputFile` in the order given, folders walked sorted (hidden
    entries and ``exclude``, the output folder, left out; linked folders followed, each
    real folder once), each file once; ``rel`` keeps
    the sub-folder, and names that would collide are taken from their nearest common
    folder so no two outputs share a name.  ``errors``: ``(path, message)`` for unusable
    inputs; ``skipped``: the unsupported files, broken links, pipes and sockets met
    inside folders.
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
        if p.is_dir() and p.suffix.lower() in FOLDER_SUFFIXES:
            add(p, Path(p.name))
            continue
        if p.is_dir():
            found = []
            walked: set = set()  # real folders already walked: a link back up is no loop
            unreadable, skipped_before = len(errors), len(skipped)

            def refused(exc: OSError) -> None:  # a folder the walk cannot list
                where = exc.filename or p
                errors.append((Path(where), f"{where}: cannot read the folder "
                                            f"({exc.strerror or exc}); check its permissions "
                                            "or leave it out"))

            for root, dirs, names in os.walk(p, followlinks=True, onerror=refused):
                walked.add(os.path.realpath(root))
                dirs[:] = sorted(d for d in dirs if not d.startswith(".")
                                 and not _within(Path(root) / d, exclude)
                                 and os.path.realpath(Path(root) / d) not in walked)
                # an image folder (OME-Zarr) is one input, not walked into
                found += [Path(root) / d for d in dirs if Path(d).suffix.lower() in FOLDER_SUFFIXES]
                dirs[:] = [d for d in dirs if Path(d).suffix.lower() not in FOLDER_SUFFIXES]
                for n in sorted(names):
                    f = Path(root) / n
                    if n.startswith("."):
                        continue
                    if not f.is_file():  # a broken link, a pipe or a socket: counted, not read
                        skipped.append(f)
                        continue
                    if f.suffix.lower() in SUPPORTED_SUFFIXES:
                        found.append(f)
                    else:
                        skipped.append(f)
            if not found and len(errors) == unreadable and _inside_zarr(p):
                del skipped[skipped_before:]  # its chunk files: no news once the error says it
                errors.append((p, f"{p}: a folder inside a Zarr image (a level or its chunks); "
                                  "give the .zarr folder that holds it"))
            elif not found and len(errors) == unreadable:
                errors.append((p, f"{p}: the folder has no supported files "
                                  f"({', '.join(sorted(SUPPORTED_SUFFIXES))})"))
            for f in found:
                add(f, f.relative_to(p))
        elif p.is_file():
            if p.suffix.lower() not in SUPPORTED_SUFFIXES:
                errors.append((p, unsupported_type(p)))
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
