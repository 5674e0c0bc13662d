"""Stage 2 under another pilot: ours (stage 1's kernel PCA) against BM3D's basic estimate.

A script, not a test.  The grouped method's stage 1 (its kernel PCA, eigensolver and
pre-image) is about half of a default run's time; BM3D's first stage (collaborative hard
thresholding in a fixed transform) needs no eigenproblem.  This asks what our stage 2
gives with that pilot instead of ours: for each development image (camera and
``common.DEV``, ``--crop`` centre crops, white Gaussian noise of seed 1, not clipped,
noise level given) it prints the default's PSNR, our stage-1 estimate and stage 2 on it,
``bm3d``'s hard-thresholding estimate (``stage_arg=HARD_THRESHOLDING``) and stage 2 on
it, and BM3D's final estimate.  Stage 2 is the driver's final pass with a full search
(the pilot's groups, which predict it in the default, do not exist for BM3D's pilot).
``docs/speed.md`` ("Where a run's time goes now").

Usage::

    python -m benchmarks.pilot_ablation [--crop 384] [--sigmas 15,25,50]
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks.common import DEV, load, psnr, results_header
from kpca_denoise.core.grouped import driver
from kpca_denoise.core.grouped.run import check_inputs, resolve_run
from kpca_denoise.core.grouped.stats import ChannelStats


def stage2(noisy: np.ndarray, sigma: float, pilot: np.ndarray, opts) -> np.ndarray:
    """The driver's final pass on ``noisy`` guided by ``pilot`` (no predicted search)."""
    imgs, sigma, _ = check_inputs([noisy], sigma, (None,))
    cal = driver.calibrate(imgs, sigma, opts, driver.trial_denoiser(None))
    run = resolve_run(imgs, sigma, cal)
    return driver._run_pass(imgs, [pilot], 2, np.asarray([-1]), run, [ChannelStats()], {},
                            True, None, None)[0][0]


def main(argv=None) -> None:
    import bm3d

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--crop", type=int, default=384)
    ap.add_argument("--sigmas", default="15,25,50")
    args = ap.parse_args(argv)
    print(results_header(), flush=True)
    print("sigma image    default | our pilot -> stage 2 | BM3D basic -> stage 2 | BM3D")
    for sigma in (float(s) for s in args.sigmas.split(",")):
        for name in ("camera",) + DEV:
            im = load(name, args.crop)
            noisy = im + np.random.default_rng(1).normal(0, sigma, im.shape)
            opts = driver.resolve_options(None, data_range=255.0)
            default = driver.denoise_grouped(noisy, sigma, options=opts)[0][None]
            own = driver.denoise_grouped(noisy, sigma, options=opts.replace(two_stage=False))[0][None]
            basic = 255.0 * bm3d.bm3d(noisy / 255.0, sigma / 255.0,
                                      stage_arg=bm3d.BM3DStages.HARD_THRESHOLDING)
            final = 255.0 * bm3d.bm3d(noisy / 255.0, sigma / 255.0)
            print(f"{sigma:5g} {name:8s} {psnr(im, default):.3f} | {psnr(im, own):.3f} -> "
                  f"{psnr(im, stage2(noisy, sigma, own, opts)):.3f} | {psnr(im, basic):.3f} -> "
                  f"{psnr(im, stage2(noisy, sigma, basic, opts)):.3f} | {psnr(im, final):.3f}",
                  flush=True)


if __name__ == "__main__":
    main()
