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

__all__ = ["OPTIONS", "build_parser"]

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


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="kpca-denoise", description="Kernel-PCA image denoising.")
    ap.add_argument("--version", action="version", version=f"kpca-denoise {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)
    ap.commands = sub.choices  # the sub-commands' parsers (their options, for _dash_hint)
    d = sub.add_parser("denoise", help="denoise images, folders and patch sets")
    d.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="image files, folders (walked recursively), .npy/.npz patch sets")
    d.add_argument("-o", "--output", required=True, metavar="OUTDIR",
                   help="folder for the results (sub-folders of the inputs are kept)")
    d.add_argument("--method", choices=METHODS, help="'grouped' (default, non-local) or 'global' (Mika et al.)")
    d.add_argument("--profile", choices=tuple(PROFILES),
                   help="; ".join(f"'{k}': {v}" for k, v in PROFILES.items()))
    d.add_argument("--ranks", type=_ranks_option, help="components to compare, e.g. 4,8,16 ('auto': no cap)")
    d.add_argument("--patch-size", type=int, help="patch side in pixels")
    d.add_argument("--stride", type=int, help="step between patches ('global')")
    d.add_argument("--gamma", type=float, help="RBF kernel parameter ('global' and patch sets; default: automatic)")
    d.add_argument("--train-patches", type=int, dest="n_train", help="training patches ('global')")
    d.add_argument("--landmarks", type=int, dest="n_landmarks", metavar="M",
                   help="Nystrom approximation with M landmarks ('global'; default: exact)")
    d.add_argument("--iterations", type=int, dest="preimage_iterations",
                   help="pre-image iteration cap (default: 100 for 'global', 1 per group for 'grouped')")
    d.add_argument("--noise-sigma", type=float, help="noise std in pixel units (default: estimated)")
    d.add_argument("--kernel", choices=("rbf", "linear"), help="'linear' is the plain-PCA ablation")
    d.add_argument("--noise-model", choices=NOISE_MODELS,
                   help="'poisson-gaussian' for camera/microscope noise (variance-stabilised; "
                        "--noise-sigma is then its Gaussian part)")
    d.add_argument("--sequence", choices=SEQUENCE_CHOICES,
                   help="denoise a stack's pages with their neighbours: 'auto' (default: when "
                        "they show one scene), 'yes', 'no'; 'yes' also takes the separate "
                        "images given as one ordered sequence (docs/stacks.md)")
    d.add_argument("--poisson-gain", type=float, metavar="ALPHA",
                   help="Poisson gain in pixel units per photon (default: estimated)")
    d.add_argument("--strength", type=float, metavar="FACTOR",
                   help="factor on the noise level the denoiser is given (default 1; below 1 "
                        "keeps more detail, above 1 smooths more)")
    d.add_argument("--seed", type=int, help="random seed (>= 0)")
    d.add_argument("--add-noise", type=float, metavar="SIGMA", help="add Gaussian noise of this std first")
    d.add_argument("--reference", metavar="CLEAN", help="clean image (or folder of them, matched by name) for PSNR")
    d.add_argument("--params", metavar="JSON", help="parameters from a sidecar written by the GUI or a run")
    d.add_argument("--overwrite", action="store_true",
                   help="replace output files that already exist (inputs are never replaced)")
    d.add_argument("--max-pixels", type=_positive_int, default=MAX_PIXELS, metavar="N",
                   help=f"largest image accepted, in pixels per image or page (default {MAX_PIXELS}); "
                        "larger headers are refused as decompression bombs")
    d.add_argument("--tile-size", type=int, metavar="PX",
                   help="side of the overlapping tiles images are denoised in (bounds memory; "
                        "default: automatic, the result does not depend on it)")
    d.add_argument("--workers", type=_workers, metavar="N",
                   help="spread the images over N local Dask worker processes "
                        "(needs kpca-denoise[distributed])")
    d.add_argument("--scheduler", metavar="ADDRESS",
                   help="spread the images over an existing Dask cluster, e.g. tcp://host:8786")
    d.add_argument("--format", choices=(*OUTPUT_FORMATS, "tif", "jpg"), type=str.lower,
                   metavar="{" + ",".join(OUTPUT_FORMATS) + "}",
                   help="write the images in this format (default: each input's own; png or "
                        "tiff are lossless)")
    d.add_argument("--to-zarr", action="store_true",
                   help="write the outputs of TIFFs read lazily (too large to hold) as OME-Zarr "
                        "folders NAME_kpca.zarr (needs kpca-denoise[zarr]; default: tiled TIFF)")
    d.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    g = sub.add_parser("gui", help="open the desktop application")
    g.add_argument("files", nargs="*")
    g.add_argument("--demo", action="store_true", help="load the sample images, add noise, run a comparison")
    g.add_argument("--screenshot", metavar="PATH", help="with --demo: save a screenshot and exit")
    return ap
