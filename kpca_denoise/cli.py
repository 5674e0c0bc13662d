"""Batch command line: ``kpca-denoise denoise INPUT... -o OUTDIR``.

Exit codes: 0 all inputs denoised; 1 some inputs failed (the others are
written); 2 bad usage or nothing could be done.  Errors are one line on
stderr; the progress bar is on stderr; the summary table on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from . import __version__
from .core.progress import Cancelled, ProgressEvent
from .io import (InputError, atomic_write, check_not_input, expand_inputs, jsonable, output_path,
                 rank_tag, read_item, read_items, write_item)
from .params import METHODS, DenoiseParams
from .pipeline import denoise_set, evaluate, remaining_noise

SIDECAR = "kpca-denoise.json"


class ProgressBar:
    """A one-line progress bar on stderr (plain lines when stderr is not a terminal)."""

    def __init__(self, stream=None, enabled=True):
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last_stage = None
        self._last_draw = 0.0

    def __call__(self, ev: ProgressEvent) -> None:
        if not self.enabled or ev.stage == "done":
            return
        now = time.monotonic()
        new_stage = ev.stage != self._last_stage
        finished = ev.total and ev.done >= ev.total
        if not (new_stage or finished or now - self._last_draw > 0.2):
            return
        self._last_draw = now
        frac = ev.done / ev.total if ev.total else 0.0
        width = 30
        bar = "#" * int(width * frac) + "-" * (width - int(width * frac))
        text = f"{ev.stage:<12} [{bar}] {ev.done}/{ev.total}"
        if self.tty:
            self.stream.write("\r" + text.ljust(70))
            if finished:
                self.stream.write("\n")
        elif new_stage or finished:
            self.stream.write(text + "\n")
        self.stream.flush()
        self._last_stage = ev.stage


def _parse_ranks(text: str) -> tuple:
    ranks = []
    for part in text.split(","):
        part = part.strip().lower()
        if part in ("auto", "none", "all"):
            ranks.append(None)
            continue
        try:
            ranks.append(int(part))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"ranks must be integers separated by commas (e.g. 4,8,16) or 'auto', got {text!r}"
            ) from None
    return tuple(ranks)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="kpca-denoise", description="Kernel-PCA image denoising.")
    ap.add_argument("--version", action="version", version=f"kpca-denoise {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)
    d = sub.add_parser("denoise", help="denoise images, folders and patch sets")
    d.add_argument("inputs", nargs="+", metavar="INPUT", help="image files, folders, .npy/.npz patch sets")
    d.add_argument("-o", "--output", required=True, metavar="OUTDIR", help="folder for the results")
    d.add_argument("--method", choices=METHODS, help="'grouped' (default, non-local) or 'global' (Mika et al.)")
    d.add_argument("--ranks", type=_parse_ranks, help="components to compare, e.g. 4,8,16 ('auto': no cap)")
    d.add_argument("--patch-size", type=int, help="patch side in pixels")
    d.add_argument("--stride", type=int, help="step between patches ('global')")
    d.add_argument("--gamma", type=float, help="RBF kernel parameter (default: automatic)")
    d.add_argument("--train-patches", type=int, dest="n_train", help="training patches ('global')")
    d.add_argument("--landmarks", type=int, dest="n_landmarks", metavar="M",
                   help="Nystrom approximation with M landmarks ('global'; default: exact)")
    d.add_argument("--iterations", type=int, dest="preimage_iterations", help="pre-image iteration cap")
    d.add_argument("--noise-sigma", type=float, help="noise std in pixel units (default: estimated)")
    d.add_argument("--kernel", choices=("rbf", "linear"), help="'linear' is the plain-PCA ablation")
    d.add_argument("--seed", type=int, help="random seed")
    d.add_argument("--add-noise", type=float, metavar="SIGMA", help="add Gaussian noise of this std first")
    d.add_argument("--reference", metavar="CLEAN", help="clean image (or folder of them, matched by name) for PSNR")
    d.add_argument("--params", metavar="JSON", help="parameters from a sidecar written by the GUI or a run")
    d.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    g = sub.add_parser("gui", help="open the desktop application")
    g.add_argument("files", nargs="*")
    g.add_argument("--demo", action="store_true", help="load the sample images, add noise, run a comparison")
    g.add_argument("--screenshot", metavar="PATH", help="with --demo: save a screenshot and exit")
    return ap


def _params_from_args(args) -> DenoiseParams:
    base = DenoiseParams()
    if args.params:
        try:
            data = json.loads(Path(args.params).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise InputError(f"{args.params}: cannot read the parameter file ({exc})") from None
        base = DenoiseParams.from_dict(data.get("params", data))
    changes = {}
    for name in ("method", "ranks", "patch_size", "stride", "gamma", "n_train", "n_landmarks",
                 "preimage_iterations", "noise_sigma", "kernel", "seed", "add_noise"):
        v = getattr(args, name)
        if v is not None:
            changes[name] = v
    if "ranks" not in changes and changes.get("method", base.method) == "global" and None in base.ranks:
        changes["ranks"] = (4, 8, 16)
    return base.replace(**changes).validate()


def _load_reference(ref: str | None, items) -> dict:
    if not ref:
        return {}
    refpath = Path(ref)
    if refpath.is_dir():
        out = {}
        for it in items:
            cand = refpath / it.path.name
            if cand.is_file():
                out[id(it)] = read_item(cand).array
        return out
    arr = read_item(refpath).array
    if len(items) != 1:
        raise InputError("--reference FILE needs exactly one input; give a folder to match several by name")
    return {id(items[0]): arr}


def _denoise(args) -> int:
    params = _params_from_args(args)
    paths = expand_inputs(args.inputs)
    items, errors = read_items(paths)
    for p, msg in errors:
        print(f"error: {msg}", file=sys.stderr)
    if not items:
        print("error: none of the inputs could be read", file=sys.stderr)
        return 2
    refs = _load_reference(args.reference, items)
    outdir = Path(args.output)
    # refuse before computing anything if an output would replace an input
    planned = [output_path(it, outdir, rank_tag(r)) for it in items for r in (params.ranks or (None,))]
    for target in planned:
        check_not_input(target, paths)
    bar = ProgressBar(enabled=not args.quiet)
    result = denoise_set([it.array for it in items], params, names=[it.name for it in items],
                         patch_sets=[it.is_patchset for it in items], progress=bar)
    rows = []
    failed = len(errors)
    sidecar = {"params": params.to_dict(), "resolved": jsonable(result.resolved),
               "timings": result.timings, "items": []}
    for it, res in zip(items, result.images):
        if res.error:
            print(f"error: {res.error}", file=sys.stderr)
            failed += 1
            continue
        clean = refs.get(id(it))
        if clean is None and params.add_noise:
            clean = it.array
        entry = {"input": str(it.path), "noise_sigma": res.noise_sigma,
                 "noise_estimated": res.noise_estimated, "seconds": res.seconds,
                 "stats": res.stats, "outputs": {}}
        if params.add_noise:
            target = output_path(it, outdir, "noisy")
            write_item(it, res.noisy, target, inputs=paths)
            entry["noisy"] = str(target)
        noisy_psnr = None
        if clean is not None and np.shape(clean) == np.shape(res.noisy):
            noisy_psnr = evaluate(clean, res.noisy, it.array.dtype)["psnr"]
        for rank, out in res.outputs.items():
            target = output_path(it, outdir, rank_tag(rank))
            try:
                write_item(it, out, target, inputs=paths)
            except (InputError, OSError) as exc:
                print(f"error: {target}: cannot write ({exc})", file=sys.stderr)
                failed += 1
                continue
            m = {}
            if clean is not None:
                if np.shape(clean) != np.shape(out):
                    print(f"error: reference for {it.name} has shape {np.shape(clean)}, "
                          f"output has {np.shape(out)}; PSNR skipped", file=sys.stderr)
                else:
                    m = evaluate(clean, out, it.array.dtype)
            elif not it.is_patchset:
                m = {"remaining_noise": remaining_noise(out)}
            entry["outputs"][str(rank)] = {"file": str(target), **m}
            rows.append((it.name, "auto" if rank is None else str(rank), res.noise_sigma, noisy_psnr,
                         m.get("psnr"), m.get("ssim"), res.seconds, target))
        sidecar["items"].append(entry)
    _write_sidecar(outdir / SIDECAR, sidecar)
    _print_table(rows)
    print(f"results in {outdir.resolve()}")
    return 1 if failed else 0


def _write_sidecar(path: Path, data: dict) -> None:
    text = json.dumps(jsonable(data), indent=2)
    atomic_write(path, lambda tmp: tmp.write_text(text))


def _fmt(v, spec):
    return "-" if v is None else format(v, spec)


def _print_table(rows) -> None:
    head = f"{'image':<24} {'rank':>5} {'sigma':>7} {'noisy dB':>9} {'PSNR dB':>8} {'SSIM':>6} {'time s':>7}  output"
    print(head)
    print("-" * len(head))
    for name, rank, sigma, pn, p, s, sec, target in rows:
        print(f"{name[:24]:<24} {rank:>5} {sigma:>7.3g} {_fmt(pn, '9.2f')} {_fmt(p, '8.2f')} "
              f"{_fmt(s, '6.3f')} {sec:>7.1f}  {target.name}")


def main(argv=None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.command == "gui":
        from .gui.app import main as gui_main

        return gui_main(args.files, demo=args.demo, screenshot=args.screenshot)
    try:
        return _denoise(args)
    except (InputError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Cancelled:
        print("error: cancelled", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("\nerror: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
