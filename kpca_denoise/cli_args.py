"""The command line's arguments: ``kpca-denoise denoise`` and ``kpca-denoise gui``, and the
option that sets each parameter (for error messages in the user's terms).  argparse's
errors are one line, as every other error of the command."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from . import __version__
from .io import MAX_PIXELS, OUTPUT_FORMATS, SUPPORTED_SUFFIXES
from .params import (METHODS, NOISE_MODELS, PROFILES, SEQUENCE_CHOICES, ParamError, parse_ranks,
                     too_many_workers)

__all__ = ["OPTIONS", "UsageError", "build_parser"]

class UsageError(ValueError):
    """Bad usage found before computing: exit code 2."""


#: parameter name -> the command-line option that sets it (for error messages)
OPTIONS = {"method": "--method", "ranks": "--ranks", "patch_size": "--patch-size",
           "stride": "--stride", "gamma": "--gamma", "n_train": "--train-patches",
           "n_landmarks": "--landmarks", "preimage_iterations": "--iterations",
           "noise_sigma": "--noise-sigma", "kernel": "--kernel", "seed": "--seed",
           "add_noise": "--add-noise", "noise_model": "--noise-model",
           "poisson_gain": "--poisson-gain", "tile_size": "--tile-size",
           "strength": "--strength", "sequence": "--sequence", "profile": "--profile"}


def _ranks_option(text: str) -> tuple:
    """--ranks as :func:`~kpca_denoise.params.parse_ranks` reads it: a value that is not
    a rank is argparse's error (as --patch-size abc), a rank below 1 or given twice the
    parameters' check (as --patch-size 0)."""
    try:
        return parse_ranks(text, check=False)
    except ParamError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return v


def _workers(text: str) -> int:
    """--workers: a positive integer, at most ``params.WORKERS_PER_CPU`` per CPU of this
    machine (each worker is a process: an unbounded count would exhaust the memory)."""
    v = _positive_int(text)
    if (why := too_many_workers(v)) is not None:
        raise argparse.ArgumentTypeError(why)
    return v


class _Parser(argparse.ArgumentParser):
    """argparse with its errors in one line, as every other error of the command (it
    printed the whole usage first)."""

    #: the arguments of the last parse (a name starting with '-' is explained with them)
    _args: list = []

    def parse_known_args(self, args=None, namespace=None):
        _Parser._args = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str):
        self.exit(2, f"error: {message}{self._dash_hint()} (see '{self.prog} -h')\n")

    def _dash_hint(self) -> str:
        """A file whose name starts with '-' is read as an option ('-dash.png' alone
        gave "the following arguments are required: INPUT"): say how to name it."""
        options = {o for p in (self, *self._subparsers_of()) for o in p._option_string_actions}
        args = _Parser._args[:_Parser._args.index("--")] if "--" in _Parser._args else _Parser._args
        for a in args:
            if (a.startswith("-") and a != "-" and a.split("=")[0] not in options
                    and (Path(a).suffix.lower() in SUPPORTED_SUFFIXES or os.path.exists(a))):
                return (f"; {a} starts with '-' and was read as an option: write ./{a}, or "
                        f"put it after --")
        return ""

    def _subparsers_of(self):
        return getattr(self, "commands", {}).values()


#: the top-level help: the commands a user starts with
START = """\
Kernel-PCA image denoising: photographs, scans, microscope stacks, patch sets.

start with:
  kpca-denoise denoise photo.png -o results   denoise images or folders (results/photo_kpca.png)
  kpca-denoise gui                            open the desktop application
  kpca-denoise gui --demo                     the sample images, noise added, methods compared

'kpca-denoise denoise -h' explains every option, how outputs are named and the sidecar."""

#: the end of ``denoise --help``: how outputs are named, the sidecar, resuming, examples
DENOISE_EPILOG = """\
outputs:
  Each input IMG.EXT gives OUTDIR/IMG_kpca.EXT (its sub-folder below the input folder
  kept); with several --ranks one file a rank, IMG_kpca_rK.EXT; with --add-noise also
  IMG_noisy.EXT.  Inputs and existing files are never replaced (--overwrite replaces
  outputs).  Each run writes a sidecar OUTDIR/kpca-denoise-<date>-<time>-<pid>-<n>.json:
  its parameters and every file it wrote, with noise levels and metrics.

resuming:
  A run into a folder that holds an earlier run's outputs made with the same parameters
  skips those inputs and computes the rest ("12 of 500 inputs already done, skipped"):
  run an interrupted batch again to finish it.  Outputs made with other parameters are
  refused unless --overwrite.

examples:
  kpca-denoise denoise photo.jpg -o out
  kpca-denoise denoise photos/ -o out --profile fast
  kpca-denoise denoise clean.png --add-noise 25 --ranks 4,8,16 -o trial
  kpca-denoise denoise scans/ -o out --noise-model poisson-gaussian
  kpca-denoise denoise more/ -o out2 --params out/kpca-denoise-20250101-120000-42-1.json
"""


def build_parser() -> argparse.ArgumentParser:
    raw = argparse.RawDescriptionHelpFormatter
    ap = _Parser(prog="kpca-denoise", description=START, formatter_class=raw)
    ap.add_argument("--version", action="version", version=f"kpca-denoise {__version__}")
    sub = ap.add_subparsers(dest="command", required=True, title="commands",
                            metavar="{denoise,gui}")
    ap.commands = sub.choices  # the sub-commands' parsers (their options, for _dash_hint)
    d = sub.add_parser("denoise", help="denoise images, folders, stacks and patch sets",
                       description="Denoise images, folders (walked recursively), multi-page "
                                   "TIFFs,\nOME-Zarr images and .npy/.npz patch sets.",
                       epilog=DENOISE_EPILOG, formatter_class=raw)
    _denoise_options(d)
    g = sub.add_parser("gui", help="open the desktop application",
                       description="Open the desktop application (a display is needed).")
    g.add_argument("files", nargs="*", metavar="FILE", help="images to open")
    g.add_argument("--demo", action="store_true", help="load the sample images, add noise, run a comparison")
    g.add_argument("--screenshot", metavar="PATH", help="with --demo: save a screenshot and exit")
    return ap


def _denoise_options(d: argparse.ArgumentParser) -> None:
    """``denoise``'s options in the groups its help shows."""
    io = d.add_argument_group("input and output")
    io.add_argument("inputs", nargs="+", metavar="INPUT",
                    help="image files, folders (walked recursively), .npy/.npz patch sets")
    io.add_argument("-o", "--output", required=True, metavar="OUTDIR",
                    help="folder for the results (sub-folders of the inputs are kept)")
    io.add_argument("--format", choices=(*OUTPUT_FORMATS, "tif", "jpg"), type=str.lower,
                    metavar="{" + ",".join(OUTPUT_FORMATS) + "}",
                    help="write the images in this format (default: each input's own; png or "
                         "tiff are lossless)")
    io.add_argument("--to-zarr", action="store_true",
                    help="write the outputs of TIFFs read lazily (too large to hold) as OME-Zarr "
                         "folders NAME_kpca.zarr (needs kpca-denoise[zarr]; default: tiled TIFF)")
    io.add_argument("--max-pixels", type=_positive_int, default=MAX_PIXELS, metavar="N",
                    help=f"largest image accepted, in pixels per image or page (default "
                         f"{MAX_PIXELS}); larger headers are refused as decompression bombs")
    noise = d.add_argument_group("noise")
    noise.add_argument("--noise-sigma", type=float, metavar="SIGMA",
                       help="noise std in pixel units (default: estimated)")
    noise.add_argument("--noise-model", choices=NOISE_MODELS,
                       help="auto (default): measured per image (white, correlated as a camera's "
                            "JPEG leaves it, or growing with the signal); white or correlated: "
                            "take it as that; poisson-gaussian: camera/microscope counts "
                            "(variance-stabilised; --noise-sigma is then its Gaussian part)")
    noise.add_argument("--poisson-gain", type=float, metavar="ALPHA",
                       help="Poisson gain in pixel units per photon (default: estimated)")
    noise.add_argument("--strength", type=float, metavar="FACTOR",
                       help="factor on the noise level the denoiser is given (default 1; below 1 "
                            "keeps more detail, above 1 smooths more)")
    noise.add_argument("--add-noise", type=float, metavar="SIGMA",
                       help="add Gaussian noise of this std first, to try the method on clean "
                            "images (a trial: --params does not repeat it)")
    noise.add_argument("--reference", metavar="CLEAN",
                       help="clean image (or folder of them, matched by name) for PSNR and SSIM")
    _method_options(d.add_argument_group("method"))
    perf = d.add_argument_group("performance")
    perf.add_argument("--tile-size", type=int, metavar="PX",
                      help="side of the overlapping tiles images are denoised in (bounds memory; "
                           "default: automatic, the result does not depend on it)")
    perf.add_argument("--workers", type=_workers, metavar="N",
                      help="spread the images over N local Dask worker processes "
                           "(needs kpca-denoise[distributed])")
    perf.add_argument("--scheduler", metavar="ADDRESS",
                      help="spread the images over an existing Dask cluster, e.g. tcp://host:8786")
    batch = d.add_argument_group("batch")
    batch.add_argument("--params", metavar="FILE.json",
                       help="the parameters of an earlier run's sidecar (or the GUI's); options "
                            "given here win; its --add-noise and --reference are left out")
    batch.add_argument("--overwrite", action="store_true",
                       help="replace outputs that exist (inputs are never replaced); without it "
                            "inputs already done with the same parameters are skipped")
    batch.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def _method_options(m) -> None:
    m.add_argument("--method", choices=METHODS,
                   help="'grouped' (default, non-local) or 'global' (Mika et al.)")
    m.add_argument("--profile", choices=tuple(PROFILES),
                   help="the grouped method's preset: "
                        + "; ".join(f"'{k}': {v}" for k, v in PROFILES.items()))
    m.add_argument("--ranks", type=_ranks_option, metavar="LIST",
                   help="components kept, one output each, e.g. 4,8,16 (default 'auto')")
    m.add_argument("--patch-size", type=int, metavar="PX", help="patch side in pixels")
    m.add_argument("--sequence", choices=SEQUENCE_CHOICES,
                   help="denoise a stack's pages with their neighbours: 'auto' (default: when "
                        "they show one scene), 'yes', 'no'; 'yes' also takes the separate "
                        "images given as one ordered sequence (docs/stacks.md)")
    m.add_argument("--kernel", choices=("rbf", "linear"), help="'linear' is the plain-PCA ablation")
    m.add_argument("--seed", type=int, metavar="N", help="random seed (>= 0)")
    m.add_argument("--stride", type=int, metavar="PX", help="step between patches ('global')")
    m.add_argument("--gamma", type=float, metavar="G",
                   help="RBF kernel width ('global' and patch sets; default: automatic)")
    m.add_argument("--train-patches", type=int, dest="n_train", metavar="N",
                   help="training patches ('global')")
    m.add_argument("--landmarks", type=int, dest="n_landmarks", metavar="M",
                   help="Nystrom approximation with M landmarks ('global'; default: exact)")
    m.add_argument("--iterations", type=int, dest="preimage_iterations", metavar="N",
                   help="pre-image iteration cap (default: 100 for 'global', 1 per group for "
                        "'grouped')")
