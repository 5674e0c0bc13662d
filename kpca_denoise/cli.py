"""Batch command line: ``kpca-denoise denoise INPUT... -o OUTDIR``.

Exit codes: 0 all inputs denoised; 1 some inputs failed (the others are
written); 2 bad usage or nothing could be done.  Errors are one line on
stderr; the progress bar is on stderr; the summary table on stdout.

Everything that can be checked before computing is: the parameters, every
input, the output folder and every output name.  Outputs keep the input's
sub-folder below OUTDIR, never replace an input, and never replace an existing
file unless ``--overwrite`` is given; an input an earlier run's sidecar records as
denoised with the same parameters is skipped (a batch resumes).  Each run writes its own
sidecar ``kpca-denoise-<date>-<time>-<pid>-<n>.json`` listing exactly the files it wrote.
The steps live beside it: :mod:`.cli_args` (the options), :mod:`.cli_params` (the
parameters), :mod:`.cli_outputs` (the output folder, the table), :mod:`.cli_resume`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import __version__  # (its import chooses numba's cache folder: numba_cache.py)
from .cli_args import UsageError, build_parser
from .cli_outputs import (check_output_folder, clean_stale_parts, note_done, plan_outputs,
                          print_table)
from .cli_params import load_params_file, read_params_file  # noqa: F401 (the command's API)
from .cli_params import params_from_args, trial_settings
from .cli_progress import ProgressBar, RunEstimate, work_weight
from .cli_resume import Folders
from .core.progress import Cancelled
from .io import (SUPPORTED_SUFFIXES, InputError, collect_inputs, in_format, read_item, read_items,
                 write_item, write_sidecar)
from .io.lazy_tiff import memory_budget
from .display import display_problem
from .numba_cache import announce_compile
from .lazy_inputs import write_lazy_item
from .mosaic import mosaic_of
from .executor import Executor, ExecutorError
from .params import DenoiseParams
from .evaluation import noise_notes, rank_notes
from .pipeline import denoise_set, evaluate, remaining_noise, result_keys
from .tiling import plan
from .stack_tiling import plan_stack
from .signals import interrupted_code, signals_held, stop_signals_interrupt

INTERRUPTED = "error: interrupted; files already written are complete, nothing partial was left"


def _load_reference(ref: str | None, items, max_pixels: int) -> dict:
    if not ref:
        return {}
    refpath = Path(ref)
    if not refpath.exists():
        raise UsageError(f"--reference {ref}: no such file or folder; give the clean image "
                         "(or a folder of them, named as the inputs)")
    if refpath.is_dir():
        out = {}
        for it in items:
            cand = refpath / (it.rel if it.rel is not None else it.path.name)
            if not cand.is_file():
                cand = refpath / it.path.name
            if cand.is_file():
                out[id(it)] = read_item(cand, max_pixels=max_pixels).array
                _check_reference(cand, out[id(it)], it)
        missing = [it for it in items if id(it) not in out]
        if missing:  # a folder matching no name gave no PSNR, and said nothing
            names = ", ".join(str(it.rel or it.path.name) for it in missing[:3])
            names += ", ..." if len(missing) > 3 else ""
            if len(missing) == len(items):
                what = f"no file there has an input's name ({names}); PSNR and SSIM are not shown"
            else:
                what = (f"no file there has the name of {len(missing)} of {len(items)} inputs "
                        f"({names}); their PSNR and SSIM are not shown")
            print(f"note: --reference {refpath}: {what}", file=sys.stderr)
        return out
    arr = read_item(refpath, max_pixels=max_pixels).array
    if len(items) != 1:
        raise UsageError("--reference FILE needs exactly one input; give a folder to match several by name")
    _check_reference(refpath, arr, items[0])
    return {id(items[0]): arr}


def _check_reference(path: Path, ref: np.ndarray, it) -> None:
    """A reference is the clean version of its input: the same shape and pixel type
    (a 16-bit reference of an 8-bit image gave -43 dB; a smaller one was skipped after
    the compute with exit code 0)."""
    def size(shape) -> str:
        return "x".join(map(str, shape))

    if ref.shape != tuple(it.shape):
        raise UsageError(f"--reference {path} is {size(ref.shape)}, {it.path} is {size(it.shape)}; "
                         "give the clean version of the same image")
    if ref.dtype != it.dtype and not (ref.dtype.kind == it.dtype.kind == "f"):
        raise UsageError(f"--reference {path} holds {ref.dtype} pixels, {it.path} {it.dtype}; "
                         "give the reference in the image's own pixel type")


#: memory the engine needs beside an image's own pixels: the interpreter and its
#: libraries (about 180 MB) and the working set of one default tile (about 250 MB);
#: measured with /usr/bin/time -v on 0.25-12 Mpx images (README, "Large images")
ENGINE_MEMORY = 450 * 2**20


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation (Linux MemAvailable, the process's
    limits and its memory cgroup's), or None where that is not known."""
    return memory_budget()


def lazy_bytes() -> int:
    """Decoded size above which a TIFF is read lazily: where the image and three copies
    (its outputs, the writer's) would not fit beside the engine; 4 GB where the memory
    available is not known."""
    avail = available_memory()
    return 4 << 30 if avail is None else max(avail - ENGINE_MEMORY, 0) // 4


def _check_memory(items, params: DenoiseParams) -> None:
    """Refuse, before any compute, an input whose pixels cannot fit in memory even
    though the engine works tile by tile: the input, one output per rank (a stack's
    pages are written together) and the engine's own working set."""
    avail = available_memory()
    if avail is None:
        return
    for it in items:
        if it.is_lazy:  # read and written chunk by chunk: the tiled engine's bound
            continue
        copies = 2 + len(result_keys(params, it.is_patchset)) + bool(params.add_noise)
        need = int(np.prod(it.shape)) * it.dtype.itemsize * copies + ENGINE_MEMORY
        if need > avail:
            raise UsageError(
                f"{it.path}: needs about {need / 2**30:.1f} GB of memory (the image, "
                f"{copies - 2} output(s) and the engine), {avail / 2**30:.1f} GB is available; "
                "ask for fewer --ranks, free memory, or split the file")


def _note_output_folder_left_out(inputs, outdir: Path) -> None:
    """A note when an input folder's walk left out the output folder inside it and
    images there were not read (collect_inputs takes them for earlier results)."""
    if not outdir.is_dir():
        return
    held = [p for p in map(Path, inputs) if p.is_dir() and outdir.resolve() != p.resolve()
            and outdir.resolve().is_relative_to(p.resolve())]
    n = sum(1 for f in outdir.rglob("*") if f.suffix.lower() in SUPPORTED_SUFFIXES)
    if held and n:
        print(f"note: {n} file(s) in the output folder {outdir} (inside the input folder "
              f"{held[0]}) were not read, as results of an earlier run would not be; to denoise "
              "them, choose an -o outside the input folder", file=sys.stderr)


@dataclass
class _Run:
    """What a run's steps share once its inputs are read and its outputs planned."""

    args: argparse.Namespace
    params: DenoiseParams
    outdir: Path
    inputs: list  # the input paths: never written to
    plan: dict  # id(item) -> {key: output path}
    refs: dict  # id(item) -> the clean reference
    failed: int  # inputs that could not be read, named or written
    position: dict = field(default_factory=dict)  # id(item) -> its row in the table
    finished: dict = field(default_factory=dict)  # position -> (sidecar entry, table rows)


def _denoise(args) -> int:
    """``kpca-denoise denoise``: check everything that can be checked, then compute and
    write input by input, then record the run; the exit code.  The folders it made and
    left empty are removed (an interruption before the first output leaves none)."""
    folders = Folders()
    try:
        return _denoise_into(args, folders)
    finally:
        folders.remove_empty()


def _denoise_into(args, folders: Folders) -> int:
    params = params_from_args(args)
    if not args.output.strip():
        raise UsageError("-o is empty; give a folder for the results")
    outdir = Path(args.output)
    if outdir.exists() and not outdir.is_dir():
        raise UsageError(f"{outdir}: the output path is an existing file; give a folder with -o")
    files, failed = _gather_inputs(args, outdir)
    if not files:
        return 2
    items, read_failed = _read_inputs(files, args, params)
    if not items:
        return 2
    inputs = [f.path for f in files]
    eager = [it for it in items if not it.is_lazy]
    refs = _load_reference(args.reference, eager, args.max_pixels) if eager else {}
    _check_memory(items, params)
    check_output_folder(outdir, folders)
    clean_stale_parts(outdir)
    plan, done = plan_outputs(items, args, params, outdir, inputs + (
        [Path(args.reference)] if args.reference else []), folders)
    note_done(done, len(items), outdir)
    run = _Run(args, params, outdir, inputs, plan, refs,
               failed + read_failed + len(items) - len(plan) - len(done))
    items = [it for it in items if id(it) in plan]
    if not items:
        return 2 if not done else 1 if run.failed else 0
    run.position = {id(it): k for k, it in enumerate(items)}  # the table keeps the input order
    return _compute_and_record(run, items)


def _gather_inputs(args, outdir: Path) -> tuple[list, int]:
    """The files the inputs name (folders walked), each problem said in a line:
    ``(files, inputs that failed)``; no files: the run ends (exit 2)."""
    files, errors, skipped = collect_inputs(args.inputs, exclude=outdir)
    for _, msg in errors:
        print(f"error: {msg}", file=sys.stderr)
    if skipped:
        names = ", ".join(str(p) for p in skipped[:3]) + (", ..." if len(skipped) > 3 else "")
        print(f"note: skipped {len(skipped)} unsupported file(s), broken link(s) or pipe(s) in "
              f"the folders ({names})",
              file=sys.stderr)
    _note_output_folder_left_out(args.inputs, outdir)
    if not files and not errors:
        print("error: no inputs given", file=sys.stderr)
    return files, len(errors)


def _read_inputs(files, args, params: DenoiseParams) -> tuple[list, int]:
    """Every file read (a bad one is reported before any compute), then its pixels let
    go: they are read again when their turn comes (_PageSource).  ``(items, inputs that
    failed)``; the options that do not fit the inputs are refused or noted here."""
    items, read_errors = read_items(files, max_pixels=args.max_pixels, keep_pixels=False,
                                    lazy_bytes=lazy_bytes())
    for _, msg in read_errors:
        print(f"error: {msg}", file=sys.stderr)
    if not items:
        print("error: none of the inputs could be read", file=sys.stderr)
        return [], len(read_errors)
    try:  # a format that cannot hold an input is refused before any compute
        items = [in_format(it, args.format) for it in items]
    except InputError as exc:
        raise UsageError(str(exc)) from None
    lazy = [it for it in items if it.is_lazy]
    if lazy and params.add_noise:
        raise UsageError(f"{lazy[0].path}: --add-noise is not available for inputs read "
                         "lazily (OME-Zarr, TIFFs too large to hold; read chunk by chunk); add "
                         "the noise to the image first")
    _note_global_only(args, params, items)
    if args.to_zarr and not any(it.format == "TIFF" for it in lazy):
        print("note: --to-zarr: no TIFF is read lazily here; the outputs keep their inputs' "
              "formats", file=sys.stderr)
    if lazy and args.reference:
        print(f"note: --reference: PSNR and SSIM are not computed for inputs read lazily "
              f"({lazy[0].path.name})", file=sys.stderr)
    return items, len(read_errors)


def _compute_and_record(run: _Run, items) -> int:
    """Denoise the inputs (those read lazily first, on the executor's cluster if one was
    asked for), write each as soon as all its pages are back, and record the run in its
    sidecar, interrupted or not; the exit code."""
    args, params = run.args, run.params
    lazy = [it for it in items if it.is_lazy]  # OME-Zarr, large TIFFs: chunk by chunk
    items = [it for it in items if not it.is_lazy]
    # stacks: each page is an image of the set; pages are gathered again to be written
    images = _PageSource(items)
    owner = [it for it in items for _ in range(it.n_pages)]
    patch_sets = [it.is_patchset for it in owner]
    sequences = _sequences(items, params)
    bar = ProgressBar(enabled=not args.quiet,
                      estimate=_estimate(images, patch_sets, lazy, sequences, params))
    images.started = bar.begin
    try:
        executor = Executor(workers=args.workers, scheduler=args.scheduler)
    except ExecutorError as exc:  # before any compute
        raise UsageError(str(exc)) from None
    interrupted: KeyboardInterrupt | None = None
    workers: set = set()
    quiet_again = _note_first_compile(params, patch_sets + [it.is_patchset for it in lazy], bar)
    try:
        _connect(executor)
        workers = _workers_of(executor)
        for it in lazy:  # on the executor's cluster, if one was asked for
            bar.begin(("lazy", id(it)))
            with contextlib.ExitStack() as held:  # from its last band until recorded
                _finished(run, it, write_lazy_item(it, run.plan[id(it)], params, run.inputs,
                                                   args.overwrite, run.outdir, bar, held))
                bar.finish(("lazy", id(it)))
        names = [name for it in items for name in it.page_names()]
        _compute_images(run, executor, images, owner, names, sequences, bar)
    except KeyboardInterrupt as exc:
        # the files written are complete, and the run's sidecar lists them: no result
        # stands without a record of how it was made
        interrupted = exc
    except BaseException:
        quiet_again()
        executor.close()
        raise
    # from the end of the run until its sidecar is written, a second signal waits (it
    # left the files written without their record) and is delivered after
    with signals_held():
        quiet_again()
        _note_workers_replaced(workers, _workers_of(executor))
        executor.close()
        rows, run.failed = _record_run(executor.summary, params, run.finished, interrupted,
                                       run.outdir, run.failed, trial_settings(params, args))
    if interrupted:
        print(f"\n{INTERRUPTED}", file=sys.stderr)
        return interrupted_code(interrupted)
    return _print_summary(rows, run.outdir, 1 if run.failed else 0)


def _workers_of(executor: Executor) -> set:
    """The addresses of the cluster's workers (none without --workers or --scheduler)."""
    try:
        return set(executor.client.scheduler_info()["workers"]) if executor.client else set()
    except Exception:  # the cluster gone: nothing to compare
        return set()


def workers_lost_note(before: set, after: set) -> str | None:
    """The line for workers (addresses) the run started with that are gone at its end:
    died, or replaced by their nanny under a new address.  Dask ran their tasks again on
    the others, so the outputs are complete; None when none was lost."""
    gone = len(before - after) if before and after else 0
    if not gone:
        return None
    return (f"note: {gone} Dask worker(s) left the cluster during the run (died, or were "
            "replaced); their tasks ran again on the others, the outputs are complete (a "
            "worker out of memory is the usual cause: fewer --workers)")


def _note_workers_replaced(before: set, after: set) -> None:
    note = workers_lost_note(before, after)
    if note:
        print(note, file=sys.stderr)


def _finished(run: _Run, it, result: tuple) -> None:
    """An input done: ``result`` is (ok, sidecar entry, table rows)."""
    ok, entry, item_rows = result
    run.failed += not ok
    run.finished[run.position[id(it)]] = (entry, item_rows)


def _compute_images(run: _Run, executor, images, owner, names, sequences, bar) -> None:
    """The inputs read whole, page by page on the executor; each input is written as
    soon as all its pages are back (from a worker or here)."""
    done: dict = {}  # item -> {image index: ImageResult}
    patch_sets = [it.is_patchset for it in owner]
    for res in executor.run(images, run.params, names=names, patch_sets=patch_sets,
                            progress=bar, denoise=denoise_set,
                            sequences=sequences) if len(images) else ():
        it = owner[res.index]
        got = done.setdefault(id(it), {})
        got[res.index] = res
        if len(got) < it.n_pages:
            continue
        pages = [got[k] for k in sorted(done.pop(id(it)))]
        with signals_held():
            _finished(run, it, finish_item(it, pages, run.plan[id(it)], run.refs.get(id(it)),
                                            run.params, run.inputs, run.args.overwrite,
                                            run.outdir))


def _print_summary(rows, outdir: Path, code: int) -> int:
    """The table of the outputs on stdout (none: every input failed, each said why)."""
    try:
        if rows:
            print_table(rows, outdir)
            print(f"results in {outdir.resolve()}")
        sys.stdout.flush()
    except OSError as exc:  # stdout closed (a pipe's reader gone) or full: files are written
        _drop_stdout()
        if isinstance(exc, BrokenPipeError):  # `| head`: the reader had what it wanted
            return code
        print(f"error: the summary could not be printed ({exc.strerror or exc}); the "
              f"outputs and the sidecar are in {outdir}; send stdout to a file with room "
              "(> summary.txt)", file=sys.stderr)
        return max(code, 1)
    return code


def _note_global_only(args, params: DenoiseParams, items) -> None:
    """A note for --stride and --train-patches given to the grouped method, which does
    not use them (patch sets, which take the global kernel PCA, use --train-patches)."""
    if params.method != "grouped":
        return
    unused = ["--stride (for --method global)"] if args.stride is not None else []
    if args.n_train is not None and not any(it.is_patchset for it in items):
        unused.append("--train-patches (for --method global and patch sets)")
    if unused:
        print(f"note: {' and '.join(unused)} not used: the grouped method sets its own "
              "(its stride: --params with {\"grouped\": {\"stride\": N}}, docs/options.md)",
              file=sys.stderr)


def _record_run(result, params: DenoiseParams, finished: dict, interrupted, outdir: Path,
                failed: int, trial: dict) -> tuple[list, int]:
    """The run's sidecar, listing every file written (``finished``: item position ->
    (entry, rows)), marked interrupted if it was: ``(rows of the table, failed)``."""
    rows, written = [], []
    recorded = params.to_dict()
    recorded.pop("add_noise", None)  # a trial setting: not taken back by --params
    sidecar = {"software": f"kpca-denoise {__version__}", "params": recorded,
               "resolved": getattr(result, "resolved", {}),
               "timings": getattr(result, "timings", {}), "items": []}
    if trial:
        sidecar["trial"] = trial
    if interrupted:
        sidecar["interrupted"] = True
    for k in sorted(finished):
        entry, item_rows = finished[k]
        rows += item_rows
        if entry is not None and entry["files"]:
            written += [Path(f) for f in entry["files"]]
            sidecar["items"].append(entry)
    if written:
        sidecar["files"] = [str(w) for w in written]
        try:
            side = write_sidecar(outdir, sidecar)
        except (InputError, OSError) as exc:
            print(f"error: {outdir}: cannot write the run's sidecar ({exc})", file=sys.stderr)
            failed += 1
        else:
            print(f"parameters and results in {side.name}", file=sys.stderr)
    return rows, failed


def _drop_stdout() -> None:
    """Send what is left for stdout to the null device, so that the exit's flush of a
    closed or full stdout raises nothing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def _note_first_compile(params: DenoiseParams, patch_sets, bar: ProgressBar):
    """One line as numba starts compiling the kernels the run needs, when its cache does not
    hold them (a first run: half a minute or more before any progress); returns the
    function that stops listening."""
    def say(seconds: float) -> None:
        bar.note(f"note: compiling the numba kernels once (about {seconds:.0f} s; cached for "
                 "later runs)")

    methods = {"global" if p or params.method == "global" else "grouped" for p in patch_sets}
    return announce_compile(methods, say)


def _sequences(items, params: DenoiseParams) -> list[tuple[int, int]]:
    """The ranges of pages denoised together (``params.sequence``, ``docs/stacks.md``):
    each stack's pages; with 'yes', also the separate images in the order given (one
    range: the pipeline refuses images of different sizes)."""
    if params.sequence == "no" or params.method != "grouped":
        return []
    out, start, singles = [], 0, []
    for it in items:
        if it.is_stack:
            out.append((start, start + it.n_pages))
        elif not it.is_patchset:
            singles.append(start)
        start += it.n_pages
    if params.sequence == "yes" and len(singles) > 1:
        if singles != list(range(singles[0], singles[0] + len(singles))):
            raise UsageError("--sequence yes: give the images of a sequence without stacks or "
                             "patch sets between them (or one multi-page TIFF)")
        out.append((singles[0], singles[-1] + 1))
    return sorted(out)


def _connect(executor: Executor) -> None:
    """Connect the executor, once (for --workers, its one cluster started; the caller
    closes it); a cluster that cannot be used is a usage error, before any compute."""
    try:
        executor.__enter__()
    except ExecutorError as exc:
        raise UsageError(str(exc)) from None


def _estimate(images, patch_sets, lazy, sequences, params: DenoiseParams) -> RunEstimate:
    """The run's estimate of the time left: each page and each input read lazily weighed
    by the pixels it is denoised in (cli_progress.work_weight; a tiled image's tiles
    with their overlaps), with the tiles it is planned in, alone and in its sequence
    (as planned for pages that do not move: the tiles' own events correct it)."""
    def planned(shape, patch_set=False, stack=False) -> tuple[float, int]:
        weight = work_weight(shape, patch_set, stack)
        try:
            tiles = [] if patch_set else plan(shape[1:] if stack else shape, params)
        except ValueError:  # an image the pipeline refuses (it says why)
            tiles = []
        if len(tiles) < 2:
            return weight, 1
        page = int(np.prod(shape[1:3] if stack else shape[:2]))
        area = sum((t.ry1 - t.ry0) * (t.rx1 - t.rx0) for t in tiles)
        return weight * area / page, len(tiles) * (shape[0] if stack else 1)

    weights, tiles = {}, {}
    for i in range(len(images)):
        weights[i], tiles[i] = planned(images.shape_of(i), patch_sets[i])
    for it in lazy:
        key = ("lazy", id(it))
        weights[key], tiles[key] = planned(it.shape, it.is_patchset, it.is_stack)
    as_one = {}
    for a, b in sequences:
        shape = (b - a, *images.shape_of(a))
        try:
            n = len(plan_stack(shape, params, np.zeros((b - a - 1, 2))))
        except ValueError:
            n = 1
        as_one.update(dict.fromkeys(range(a, b), n))
    two = params.method == "grouped" and params.grouped.two_stage
    return RunEstimate(weights, stages=2 if two else 1, tiles=tiles, stack_tiles=as_one)


class _PageSource(Sequence):
    """The set's images page by page, read from their files when asked for: one
    file's pixels are held at a time (the last one read, for a stack's pages).
    ``started(i)`` is called as page i is read (the run's estimate begins it)."""

    def __init__(self, items):
        self._index = [(it, k) for it in items for k in range(it.n_pages)]
        self._held: tuple = (None, None)
        self.started = None

    def __len__(self) -> int:
        return len(self._index)

    def shape_of(self, i: int) -> tuple:
        it, _ = self._index[i]
        return it.shape[1:] if it.is_stack else it.shape

    def __getitem__(self, i):
        it, k = self._index[i]
        if self.started is not None:
            self.started(i)
        if self._held[0] is not it:
            self._held = (None, None)  # let the previous file go before reading the next
            self._held = (it, it.reread())
        a = self._held[1]
        if "raw" in it.meta:  # a camera RAW: its mosaic with its pattern and levels
            return mosaic_of(it, a)
        return a[k] if it.is_stack else a


def finish_item(it, pages, targets, clean, params, inputs, overwrite, outdir):
    """Report an input's errors and notes, or write its outputs: (ok, entry, rows)."""
    bad = [r.error for r in pages if r.error]
    if bad:
        print(f"error: {bad[0]}" + (f" (and {len(bad) - 1} more pages)" if len(bad) > 1 else ""),
              file=sys.stderr)
        return False, None, []
    for r in pages:
        if r.stats.get("note"):
            print(f"note: {r.stats['note']}", file=sys.stderr)
    for note in noise_notes(it.name, [r.stats for r in pages]) + rank_notes(
            it.name, [r.stats for r in pages]):
        print(f"note: {note}", file=sys.stderr)
    seq = pages[0].stats.get("sequence")
    if seq and it.is_stack:
        how = "with its neighbouring pages" if seq["decision"] == "sequence" else "page by page"
        print(f"note: {it.name}: denoised {how} (sequence {seq['choice']}: {seq['reason']})",
              file=sys.stderr)
    return _write_item_outputs(it, pages, targets, clean, params, inputs, overwrite, outdir)


def _stacked(pages, key):
    outs = [r.outputs[key] for r in pages]
    return outs[0] if len(outs) == 1 else np.stack(outs)


def _write_item_outputs(it, pages, targets, clean, params, inputs, overwrite, outdir):
    """Write one input's outputs (all ranks, the noisy copy); returns (ok, sidecar entry, rows)."""
    stack = it.is_stack
    noisy = np.stack([r.noisy for r in pages]) if stack else pages[0].noisy
    sigma = float(np.median([r.noise_sigma for r in pages]))
    seconds = float(sum(r.seconds for r in pages))
    entry = {"input": str(it.path), "noise_sigma": sigma,
             "noise_estimated": pages[0].noise_estimated, "seconds": seconds,
             "stats": pages[0].stats if not stack else {"pages": [r.stats for r in pages]},
             "outputs": {}, "files": []}
    if pages[0].stats.get("sequence"):
        entry["sequence"] = {k: v for k, v in pages[0].stats["sequence"].items()
                             if k not in ("page", "neighbours_used")}
    if clean is None and params.add_noise:
        try:
            clean = it.reread()  # the input itself is the reference
        except InputError as exc:
            print(f"error: {exc}; PSNR skipped", file=sys.stderr)
    ok = True

    def write(array, target) -> bool:
        try:
            write_item(it, array, target, inputs=inputs, replace=overwrite)
        except InputError as exc:
            msg = str(exc)
            print(f"error: {msg if msg.startswith(str(target)) else f'{target}: {msg}'}",
                  file=sys.stderr)
            return False
        except OSError as exc:
            print(f"error: {target}: cannot write ({exc.strerror or exc})", file=sys.stderr)
            return False
        entry["files"].append(str(target.relative_to(outdir)) if target.is_relative_to(outdir)
                              else str(target))
        return True

    if "noisy" in targets:
        ok &= write(noisy, targets["noisy"])
        entry["noisy"] = entry["files"][-1] if ok else None
    noisy_psnr = None
    if clean is not None and np.shape(clean) == np.shape(noisy):
        noisy_psnr = evaluate(clean, noisy, it.dtype, it.is_patchset)["psnr"]
    rows = []
    for key, target in targets.items():
        if key == "noisy":
            continue
        out = _stacked(pages, key)
        if not write(out, target):
            ok = False
            continue
        m = {}
        if clean is not None:
            if np.shape(clean) != np.shape(out):
                print(f"error: reference for {it.name} has shape {np.shape(clean)}, "
                      f"output has {np.shape(out)}; PSNR skipped", file=sys.stderr)
            else:
                m = evaluate(clean, out, it.dtype, it.is_patchset)
        elif it.kind == "image" and params.noise_sigma is None:
            # informs only where nothing else does: no reference, sigma not given
            m = {"remaining_noise": remaining_noise(out)}
        entry["outputs"][str(key)] = {"file": entry["files"][-1], **m}
        rows.append((str(it.rel or it.name), "auto" if key is None else str(key),
                     "vst" if any(r.stats.get("noise_model") for r in pages) else sigma, noisy_psnr,
                     m.get("psnr"), m.get("ssim"), seconds, target))
    return ok, entry, rows


def main(argv=None) -> int:
    """``kpca-denoise`` with ``argv`` (default: the process's): the exit code."""
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.command == "gui":
        problem = display_problem()
        if problem is not None:  # before Qt is loaded: it aborts with its own screenful
            print(f"error: {problem}", file=sys.stderr)
            return 2
        from .gui.app import main as gui_main

        return gui_main(args.files, demo=args.demo, screenshot=args.screenshot)
    if sys.stdout is None:  # started with stdout closed (>&-): the summary has nowhere to go
        print("error: standard output is closed; give the command one (> summary.txt, or "
              "> /dev/null to drop the summary)", file=sys.stderr)
        return 2
    try:
        with stop_signals_interrupt():
            return _denoise(args)
    except (UsageError, InputError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except MemoryError:
        print("error: out of memory; denoise fewer or smaller images at once", file=sys.stderr)
        return 1
    except OSError as exc:  # a path the system refuses (too long, a loop) met on the way
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"error: {where}{exc.strerror or exc}; check the path or choose another",
              file=sys.stderr)
        return 2
    except Cancelled:
        print("error: cancelled", file=sys.stderr)
        return 130
    except KeyboardInterrupt as exc:
        print(f"\n{INTERRUPTED}", file=sys.stderr)
        return interrupted_code(exc)


if __name__ == "__main__":
    sys.exit(main())
