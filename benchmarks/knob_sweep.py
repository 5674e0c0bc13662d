"""The default pipeline under other grouped knobs: PSNR and CPU time against the default.

A script, not a test.  Each JSON dictionary on the command line is a set of grouped
knobs (``DenoiseParams(grouped=...)``; ``patch_size`` as the parameters' own) run
through :func:`kpca_denoise.denoise_set`, noise level given, white Gaussian noise (seed
1, not clipped), on ``--crop`` x ``--crop`` centre crops (default 384).  Images: grey, the development set
(``common.DEV`` and camera; hubble is its central 256x256); ``--colour``, the sample
astronaut and every PNG / JPEG / TIFF in ``--dir`` (the project used the twelve
photographs of Debian 12's ``mate-backgrounds`` scaled to 512 px on the short side,
as ``benchmarks/outside.py`` describes).  Prints each image's PSNR per dictionary
and its difference to the first, then per dictionary the mean difference per noise
level and the CPU time over the set as a ratio to the first's.

Usage::

    python -m benchmarks.knob_sweep '{}' '{"group_size": 24}'
    python -m benchmarks.knob_sweep --colour --dir ~/mate '{}' '{"group_size1": 32}'
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from benchmarks.common import (DEV, add_noise, centre_crop, image_files, load, psnr,
                               results_header, sample_image)
from kpca_denoise import DenoiseParams, denoise_set


def images(colour: bool, directory: str | None, crop: int) -> dict:
    """name -> clean image (float64, 0..255), centre-cropped to ``crop``."""
    if not colour:
        return {n: load(n, crop) for n in ("camera",) + DEV}
    from PIL import Image

    out = {"astronaut": sample_image("astronaut.png")[..., :3].astype(np.float64)}
    for f in image_files(directory) if directory else []:
        with Image.open(f) as src:
            out[f.stem] = np.asarray(src.convert("RGB"), dtype=np.float64)
    return {k: centre_crop(v, crop) for k, v in out.items()}


def params(sigma: float, knobs: dict) -> DenoiseParams:
    """The parameters of one run: ``knobs`` as grouped options, ``patch_size`` (a
    parameter of every method) as the parameters' own."""
    knobs = dict(knobs)
    extra = {"patch_size": knobs.pop("patch_size")} if "patch_size" in knobs else {}
    return DenoiseParams(noise_sigma=sigma, grouped=knobs, **extra)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("knobs", nargs="+", help="JSON dictionaries of grouped knobs")
    ap.add_argument("--colour", action="store_true")
    ap.add_argument("--dir", help="--colour: a folder of colour photographs to add")
    ap.add_argument("--crop", type=int, default=384)
    ap.add_argument("--sigmas", default="15,25,50")
    args = ap.parse_args(argv)
    cfgs = [json.loads(k) for k in args.knobs]
    sigmas = [float(s) for s in args.sigmas.split(",")]
    print(results_header(), flush=True)
    ims = images(args.colour, args.dir, args.crop)
    warm = np.random.default_rng(1).normal(128.0, 25.0, (64, 64, 3) if args.colour else (64, 64))
    denoise_set([warm], DenoiseParams(noise_sigma=25.0))  # compile before any timing
    diff = np.zeros((len(cfgs), len(sigmas)))
    cpu = np.zeros(len(cfgs))
    print(f"{'image':14s} sigma " + " ".join(f"{i:>7d}" for i in range(len(cfgs)))
          + "  | difference to 0")
    for name, im in ims.items():
        for j, s in enumerate(sigmas):
            noisy = add_noise(im, s, 1)
            row = []
            for i, c in enumerate(cfgs):
                t = time.process_time()
                res = denoise_set([noisy], params(s, c))
                cpu[i] += time.process_time() - t
                row.append(psnr(im, next(iter(res.images[0].outputs.values()))))
                diff[i, j] += row[-1] - row[0]
            print(f"{name:14s} {s:5g} " + " ".join(f"{v:7.3f}" for v in row) + "  | "
                  + " ".join(f"{v - row[0]:+.3f}" for v in row[1:]), flush=True)
    for i, c in enumerate(cfgs):
        print(f"{i}: {json.dumps(c)}  mean difference per sigma "
              + " ".join(f"{d / len(ims):+.3f}" for d in diff[i])
              + f"  CPU {cpu[i]:.0f} s ({cpu[i] / cpu[0]:.2f})")


if __name__ == "__main__":
    main()
