"""What per-image parameter calibration could gain at most: the oracle bound.

A script, not a test.  Self-supervised calibration (Noise2Self's J-invariant loss as
in Aydin, or Stein's unbiased risk estimate) picks a parameter per image without the
clean image.  No such estimate can do better than picking it *with* the clean
image, so this prints that oracle's gain over the defaults: for every image and
sigma, the best of the defaults and each one-parameter change given (JSON
dictionaries of keywords to :func:`kpca_denoise.core.grouped.denoise_grouped`), and
per image set and sigma the mean gain of each change and of the per-image best.

Images (256x256 centre crops, grey, white Gaussian noise of sigma 15 / 25 / 50, seed 1,
noise level given): the development photographs of ``benchmarks/quality.py`` plus
camera and astronaut (grey); the synthetic textures of ``benchmarks/textures.py``;
``aero`` and ``ascent`` and, with ``--dir DIR``, the images of ``DIR`` as
``benchmarks/outside.py`` reads them (report only: nothing is chosen on them).

Usage::

    python -m benchmarks.calibration_bound --dir DIR
    python -m benchmarks.calibration_bound '{"kappa2": 0.5}' '{"kappa2": 1.0}'
"""

from __future__ import annotations

import json
import sys

import numpy as np

from benchmarks.common import (DEV, GREY, add_noise, centre_crop, exit_on_help, load, psnr,
                               results_header)
from benchmarks.outside import images as outside_images
from benchmarks.textures import images as texture_images
from kpca_denoise.core.grouped import denoise_grouped

SIGMAS = (15, 25, 50)
CHANGES = ('{"kappa2": 0.5}', '{"kappa2": 1.0}', '{"kappa1": 3.5}', '{"kappa1": 5.5}',
           '{"gamma_scale": 8}', '{"gamma_scale": 32}', '{"gamma_scale2": 16}',
           '{"gamma_scale2": 64}', '{"match_size": 7}', '{"mean_kappa1": null}',
           '{"mean_kappa1": 1.5}')


def image_sets(directory: str | None) -> dict[str, dict[str, np.ndarray]]:
    from skimage import data

    dev = {n: load(n, 256) for n in DEV + ("camera",)}
    dev["astronaut"] = centre_crop(data.astronaut().astype(np.float64) @ GREY, 256)
    tex = {k: v for k, v in texture_images().items() if k in ("bricks", "weave")}
    return {"development": dev, "textures": tex,
            "outside": {n: centre_crop(a, 256)
                        for n, a in outside_images(directory, False).items()}}


def main(argv: list[str]) -> None:
    exit_on_help(argv, __doc__)
    print(results_header(), flush=True)
    directory = None
    if "--dir" in argv:
        i = argv.index("--dir")
        directory = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    changes = [json.loads(a) for a in (argv or CHANGES)]
    cfgs = [{}] + changes
    sets = image_sets(directory)
    res: dict = {}
    for set_name, imgs in sets.items():
        for name, im in imgs.items():
            for s in SIGMAS:
                noisy = add_noise(im, s, 1)
                res[name, s] = [psnr(im, denoise_grouped(noisy, float(s), data_range=255.0,
                                                         **c)[0][None]) for c in cfgs]
                best = int(np.argmax(res[name, s]))
                print(f"{set_name:11} {name:14} {s:3}  default {res[name, s][0]:6.2f}  best "
                      f"{json.dumps(cfgs[best])} {res[name, s][best] - res[name, s][0]:+.3f}",
                      flush=True)
    print("\nmean gain over the defaults (dB) per set and sigma: each change, and the "
          "per-image best of all (the oracle)")
    for set_name, imgs in sets.items():
        for s in SIGMAS:
            rows = np.array([res[n, s] for n in imgs])
            gain = rows - rows[:, :1]
            print(f"{set_name:11} sigma {s:3}: oracle {gain.max(axis=1).mean():+.3f} | "
                  + " ".join(f"{json.dumps(c)} {g:+.3f}"
                             for c, g in zip(changes, gain[:, 1:].mean(axis=0))))


if __name__ == "__main__":
    main(sys.argv[1:])
