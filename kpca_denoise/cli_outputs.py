"""The output folder of a run: checked and made, every output named and checked before
any compute (an input an earlier run already denoised with these parameters is skipped,
an existing output otherwise refused), the stale temporary files below it removed, and
the summary table of what was written."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from .cli_args import UsageError
from .cli_params import trial_settings
from .cli_resume import Folders, RecordedOutputs, remove_stale_parts_below
from .io import check_not_input, output_path, rank_tag
from .params import DenoiseParams
from .pipeline import result_keys

__all__ = ["check_output_folder", "clean_stale_parts", "note_done", "plan_outputs",
           "print_table"]


def check_output_folder(outdir: Path, folders: Folders) -> None:
    """The output folder, made if missing (noted in ``folders``); UsageError for a path
    that cannot be one."""
    if outdir.exists() and not outdir.is_dir():
        raise UsageError(f"{outdir}: the output path is an existing file; give a folder with -o")
    if outdir.is_symlink() and not outdir.exists():
        raise UsageError(f"{outdir}: the output path is a link to nothing ({os.readlink(outdir)}); "
                         "create its target or choose another folder with -o")
    try:
        folders.make(outdir)
    except OSError as exc:
        raise UsageError(f"{outdir}: cannot create the output folder ({exc.strerror or exc}); "
                         "choose another folder with -o") from None


def _check_writable(folder: Path, folders: Folders) -> None:
    try:
        folders.make(folder)
        fd, probe = tempfile.mkstemp(prefix=".kpca-denoise-probe-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UsageError(f"{folder}: cannot write to the output folder ({exc.strerror or exc}); "
                         "choose another folder with -o") from None


def _item_targets(it, params: DenoiseParams, outdir: Path, inputs, to_zarr: bool) -> dict | None:
    """An input's output paths ``{key: path}``, key a rank, ``None`` (automatic) or
    ``"noisy"``; None (its error printed) when one cannot be named (a name too long)."""
    keys = list(result_keys(params, it.is_patchset)) + (["noisy"] if params.add_noise else [])
    targets = {}
    for k in keys:
        target = output_path(it, outdir, "noisy" if k == "noisy" else rank_tag(k))
        if to_zarr and it.is_lazy:  # a large TIFF's outputs as OME-Zarr, when asked
            target = target.with_suffix(".zarr")
        try:
            check_not_input(target, inputs)
        except OSError as exc:
            print(f"error: {target}: cannot write ({exc.strerror or exc}); rename "
                  f"{it.path.name} or choose another folder with -o", file=sys.stderr)
            return None
        targets[k] = target
    return targets


def plan_outputs(items, run_args, params: DenoiseParams, outdir: Path, inputs,
                  folders: Folders) -> tuple[dict, list]:
    """Every output file of the run, checked before anything is computed:
    ``({id(item): {key: path}}, the items already done)``.  An input whose outputs an
    earlier run recorded with the same parameters is done (skipped); an existing output
    is otherwise refused unless --overwrite; an item whose outputs cannot be named is
    left out with its error printed, and the others go on."""
    plan: dict = {}
    taken: dict = {}
    done: list = []
    recorded = RecordedOutputs(outdir)
    trial = trial_settings(params, run_args)
    for it in items:
        targets = _item_targets(it, params, outdir, inputs, run_args.to_zarr)
        if targets is None:
            continue
        if not run_args.overwrite and recorded.done(targets.values(), it.path, params, trial):
            done.append(it)
            continue
        for target in targets.values():
            other = taken.get(target)
            if other is not None:  # collect_inputs makes names unique; never trust that blindly
                raise UsageError(f"{target}: {it.path} and {other} would both be written here; "
                                 "rename one of them")
            taken[target] = it.path
            if target.is_dir() and not it.is_lazy:  # an OME-Zarr output is a folder
                raise UsageError(f"{target}: a folder has the output's name; rename it or choose "
                                 "another folder with -o")
            if target.exists() and not run_args.overwrite:
                side = recorded.made_with(target, params, trial)
                how = (f", made with other parameters ({side})" if isinstance(side, str) and side
                       else "")
                raise UsageError(f"{target}: the output already exists{how}; use --overwrite to "
                                 "replace it or choose another folder with -o")
        plan[id(it)] = targets
    for folder in sorted({t.parent for ts in plan.values() for t in ts.values()}):
        _check_writable(folder, folders)
    return plan, done


def clean_stale_parts(outdir: Path) -> None:
    """The temporary files a killed run (SIGKILL, a power cut) left in the output folder
    and its sub-folders are removed, with a note; those of a run still writing stay."""
    removed = remove_stale_parts_below(outdir)
    if removed:
        where = ", ".join(sorted({str(p.parent) for p in removed}))
        print(f"note: removed {len(removed)} temporary file(s) an interrupted run left "
              f"in {where}", file=sys.stderr)


def note_done(done, n_items: int, outdir: Path) -> None:
    """One line for the inputs an earlier run already denoised with these parameters."""
    if done:
        names = ", ".join(it.name for it in done[:3]) + (", ..." if len(done) > 3 else "")
        print(f"note: {len(done)} of {n_items} inputs already done in {outdir} with these "
              f"parameters ({names}), skipped; --overwrite computes them again",
              file=sys.stderr)


def _fmt(v, spec):
    """``v`` in ``spec``, or '-' in the same width."""
    return format("-", ">" + spec.split(".")[0]) if v is None else format(v, spec)


def print_table(rows, outdir: Path) -> None:
    """The summary: a row an output, its input and output named below their folders
    (a/img.png and b/img.png are told apart)."""
    head = f"{'image':<24} {'rank':>5} {'sigma':>7} {'noisy dB':>9} {'PSNR dB':>8} {'SSIM':>6} {'time s':>7}  output"
    print(head)
    print("-" * len(head))
    for name, rank, sigma, pn, p, s, sec, target in rows:
        name = name if len(name) <= 24 else "..." + name[-21:]
        if not isinstance(sigma, str):  # a str: 'vst', the stabilised domain's
            # 16-bit: 4930; far outside any pixel range: 1.2e+36
            sigma = format(sigma, ".3g") if not 1000 <= sigma < 1e7 else f"{sigma:.0f}"
        shown = target.relative_to(outdir) if target.is_relative_to(outdir) else target
        print(f"{name:<24} {rank:>5} {sigma:>7} {_fmt(pn, '9.2f')} {_fmt(p, '8.2f')} "
              f"{_fmt(s, '6.3f')} {sec:>7.1f}  {shown.as_posix()}")
