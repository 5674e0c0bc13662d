"""What earlier runs left in the output folder, so that a batch resumes: the outputs their
sidecars record with the parameters that made them (an input whose outputs are all there,
made with this run's parameters, is skipped), the temporary files a killed run left in any
sub-folder, and the folders this run made that stay empty (removed at its end)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from .io import jsonable, remove_stale_parts

__all__ = ["Folders", "RecordedOutputs", "remove_stale_parts_below"]


class Folders:
    """The folders a run makes (the output folder, its sub-folders), so that those still
    empty at its end are removed: a run that wrote nothing leaves no folder."""

    def __init__(self) -> None:
        self.made: list[Path] = []

    def make(self, folder: Path) -> None:
        """``mkdir -p folder``, noting each folder it creates; OSError as mkdir's."""
        missing = [p for p in (folder, *folder.parents) if not p.exists()]
        folder.mkdir(parents=True, exist_ok=True)
        self.made += reversed(missing)

    def remove_empty(self) -> None:
        """Remove the folders made that are empty (the deepest first); never an error."""
        for folder in sorted(set(self.made), key=lambda p: len(p.parts), reverse=True):
            try:
                folder.rmdir()
            except OSError:  # not empty (a result, a sidecar), or gone
                pass
        self.made.clear()


def remove_stale_parts_below(outdir: Path) -> list[Path]:
    """The temporary files killed writers left in ``outdir`` and every sub-folder
    (:func:`kpca_denoise.io.remove_stale_parts`), removed; OME-Zarr folders are not
    walked into.  Returns the paths removed."""
    removed = []
    for folder, dirs, _ in os.walk(outdir):
        dirs[:] = [d for d in dirs if not d.lower().endswith((".zarr", ".part"))]
        removed += remove_stale_parts(folder)
    return removed


def _params_key(params: dict, trial: dict) -> str:
    """What makes two runs' outputs the same: their parameters and the noise a trial
    added (the reference only measures)."""
    params = dict(params)
    noise = params.pop("add_noise", None) or trial.get("add_noise")
    return json.dumps(jsonable({**params, "add_noise": noise or None}), sort_keys=True)


class RecordedOutputs:
    """The outputs the sidecars in ``outdir`` list, each with the key of the parameters
    that made it (the newest sidecar's where several list one file)."""

    def __init__(self, outdir: Path) -> None:
        self.outdir = outdir
        self.by_path: dict[Path, tuple[str, str]] = {}  # output -> (params key, sidecar)
        sidecars = []
        for side in outdir.glob("kpca-denoise-*.json"):
            try:
                sidecars.append((side.stat().st_mtime, side))
            except OSError:
                continue
        for _, side in sorted(sidecars):
            try:
                data = json.loads(side.read_text(encoding="utf-8-sig"))
                key = _params_key(data["params"], data.get("trial") or {})
                files = [Path(f) for f in data.get("files", [])]
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                continue  # not a sidecar this version can read: its files count as unknown
            for f in files:
                self.by_path[f if f.is_absolute() else outdir / f] = (key, side.name)

    def made_with(self, target: Path, params, trial: dict) -> bool | str:
        """True if ``target`` is recorded as made with these parameters; else the name of
        the sidecar that records it with others, or '' when none records it."""
        key, side = self.by_path.get(target, (None, ""))
        if key is None:
            return ""
        return True if key == _params_key(params.to_dict(), trial) else side

    def done(self, targets, source: Path, params, trial: dict) -> bool:
        """Whether every output of an input is there, made with these parameters from the
        input as it is now (not older than the input)."""
        try:
            since = source.stat().st_mtime
            return bool(targets) and all(
                t.exists() and self.made_with(t, params, trial) is True
                and t.stat().st_mtime >= since for t in targets)
        except OSError:
            return False
