"""Would a per-region patch geometry pay?  The default (5x5 patches, a reference every
4 px) against 6x6 patches at stride 5 on the same photographs, and the two combined
block by block.

A script, not a test.  Both settings run whole through :func:`kpca_denoise.denoise_set`
(noise level given, white Gaussian noise, seed 1); the combination takes each 32x32
block from one of the two outputs, so it measures what a per-region choice could
gain, not its time (the core has one geometry per pass).  Rules printed:

* ``oracle``: each block from the output closer to the clean image (an upper bound);
* ``band T``: 6x6 where the block's band-pass energy of the noisy image (Gaussian
  0.7 minus Gaussian 1.5 of the luminance, squared and averaged over the block, the
  noise's share subtracted: known from the noise level) is below ``T`` grey levels^2
  of 0..255 data: the smooth regions.

Images: as :mod:`benchmarks.knob_sweep` (grey: camera and the development set;
``--colour``: the sample astronaut and every photograph in ``--dir``), centre crops of
``--crop`` px.  Prints per image and noise level each rule's PSNR against the
default's and the share of pixels it gives to 6x6, then the means and the worst.

Usage::

    python -m benchmarks.region_geometry --colour --dir ~/mate
    python -m benchmarks.region_geometry
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.ndimage import gaussian_filter, uniform_filter

from benchmarks.common import add_noise, psnr, results_header
from benchmarks.knob_sweep import images
from kpca_denoise import DenoiseParams, denoise_set

BLOCK = 32
THRESHOLDS = (1.0, 2.0, 4.0, 8.0)
WIDE = dict(patch_size=6, grouped={"stride": 5})


def band_energy(noisy: np.ndarray, sigma: float) -> np.ndarray:
    """Per pixel: the band-pass energy of the luminance averaged over a block around
    it, less the noise's expected share (grey levels^2)."""
    lum = noisy.mean(axis=-1) if noisy.ndim == 3 else noisy
    noise_var = sigma * sigma / (noisy.shape[-1] if noisy.ndim == 3 else 1)

    def band(x):
        return gaussian_filter(x, 0.7) - gaussian_filter(x, 1.5)

    delta = np.zeros((41, 41))
    delta[20, 20] = 1.0
    h = band(delta)
    b = band(lum)
    return uniform_filter(b * b, BLOCK) - noise_var * float((h * h).sum())


def blocks(mask_blocks: np.ndarray, shape: tuple) -> np.ndarray:
    """A per-block boolean array spread over the image (the last partial blocks: False)."""
    m = np.zeros(shape[:2])
    full = np.kron(mask_blocks, np.ones((BLOCK, BLOCK)))
    m[:full.shape[0], :full.shape[1]] = full
    return m


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--colour", action="store_true")
    ap.add_argument("--dir", help="--colour: a folder of colour photographs to add")
    ap.add_argument("--crop", type=int, default=384)
    ap.add_argument("--sigmas", default="15,25,50")
    args = ap.parse_args(argv)
    sigmas = [float(s) for s in args.sigmas.split(",")]
    print(results_header(), flush=True)
    ims = images(args.colour, args.dir, args.crop)
    warm = np.random.default_rng(1).normal(128.0, 25.0, (64, 64, 3) if args.colour else (64, 64))
    denoise_set([warm], DenoiseParams(noise_sigma=25.0))
    rules = ["6x6", "oracle"] + [f"band {t:g}" for t in THRESHOLDS]
    gain = {(r, s): [] for r in rules for s in sigmas}
    cpu = np.zeros(2)
    print(f"{'image':14s} sigma  default | " + " ".join(f"{r:>14s}" for r in rules)
          + "   (dB against the default, share of pixels in 6x6)")
    for name, im in ims.items():
        for s in sigmas:
            noisy = add_noise(im, s, 1)
            outs = []
            for i, extra in enumerate(({}, WIDE)):
                t = time.process_time()
                res = denoise_set([noisy], DenoiseParams(noise_sigma=s, **extra))
                cpu[i] += time.process_time() - t
                outs.append(next(iter(res.images[0].outputs.values())))
            d, w = outs
            ref = psnr(im, d)
            H, W = d.shape[:2]
            nb = (H // BLOCK, W // BLOCK)

            def block_sums(e):
                e = e.sum(axis=-1) if e.ndim == 3 else e
                return e[:nb[0] * BLOCK, :nb[1] * BLOCK].reshape(
                    nb[0], BLOCK, nb[1], BLOCK).sum(axis=(1, 3))

            e_d, e_w = block_sums((d - im) ** 2), block_sums((w - im) ** 2)
            energy = band_energy(noisy, s)[BLOCK // 2:nb[0] * BLOCK:BLOCK,
                                           BLOCK // 2:nb[1] * BLOCK:BLOCK]
            picks = {"6x6": np.ones(nb, bool), "oracle": e_w < e_d}
            picks.update({f"band {t:g}": energy < t for t in THRESHOLDS})
            cells = []
            for r in rules:
                m = blocks(picks[r], d.shape)
                m = m[..., None] if d.ndim == 3 else m
                g = psnr(im, d * (1 - m) + w * m) - ref
                gain[(r, s)].append((g, name))
                cells.append(f"{g:+.3f} ({picks[r].mean():.2f})")
            print(f"{name:14s} {s:5g} {ref:8.3f} | " + " ".join(f"{c:>14s}" for c in cells),
                  flush=True)
    print(f"CPU of 6x6 at stride 5 over the set: {cpu[1] / cpu[0]:.2f} of the default's")
    for r in rules:
        line = f"{r:10s}"
        for s in sigmas:
            v = gain[(r, s)]
            worst = min(v)
            line += (f" | sigma {s:g}: mean {np.mean([g for g, _ in v]):+.3f}, "
                     f"worst {worst[0]:+.3f} ({worst[1]})")
        print(line)


if __name__ == "__main__":
    main()
