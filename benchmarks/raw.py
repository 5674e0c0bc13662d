"""Camera RAW files: denoising the mosaic against denoising the developed image.

A script, not a test (issue 63).  Each clean image (a 256x256 centre crop; grey images
taken as a neutral scene in all three colours) becomes a RAW file: its sRGB values made
linear, divided by the as-shot white balance (R 2.0, B 1.6), an RGGB mosaic at most 80 %
of a 14-bit sensor's range above a black level of 512, Poisson-Gaussian noise per
photosite at two ISO-like levels (``LEVELS``: gain in DN per electron and read noise in
DN), clipped to the white level 16383, written as a DNG (io/writing.py's DNG writer;
its colour matrix makes LibRaw's camera -> sRGB matrix the identity).  The same file
without noise is the reference.

Everything is developed alike by LibRaw (``io.raw.develop``: AHD, camera white balance,
sRGB, 16 bits, no automatic brightening) and compared with the clean file developed
alike (PSNR over 16 bits, 8 px borders left out):

* ``noisy``: the noisy RAW developed;
* ``mosaic``: ours on the mosaic (``denoise_mosaic``, nothing given), then developed;
* ``told``: the same told the true gain and read noise (what the noise fit costs);
* ``developed``: ours on the developed noisy image, blind (nothing given);
* ``cbm3d``: CBM3D (``bm3d.bm3d_rgb``) on the developed noisy image told the true noise
  std (the RMS of developed noisy less developed clean).

Images: ``sample_images/astronaut.png`` and ``camera.png``, scikit-image's ``coins``,
``moon`` and ``grass`` (grey).  Usage::

    python -m benchmarks.raw [--images astronaut,camera] [--levels iso3200,iso12800]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

from kpca_denoise import denoise_image, denoise_mosaic
from kpca_denoise.core.cfa import POSITIONS
from kpca_denoise.core.metrics import psnr
from kpca_denoise.io import read_item
from kpca_denoise.io.raw import develop
from kpca_denoise.io.writing import write_dng

ROOT = Path(__file__).resolve().parent.parent
BLACK, WHITE, CROP, BORDER = 512, 16383, 256, 8
WB = (2.0, 1.0, 1.6)
#: (gain DN / electron, read noise DN) of a 14-bit sensor
LEVELS = {"iso3200": (1.5, 6.0), "iso12800": (6.0, 14.0)}
#: sRGB (D65) -> XYZ: a colour matrix of XYZ -> sRGB makes LibRaw's camera -> sRGB the identity
XYZ_RGB = np.array([[0.412453, 0.357580, 0.180423], [0.212671, 0.715160, 0.072169],
                    [0.019334, 0.119193, 0.950227]])


def clean_images(names):
    from skimage import data

    out = {}
    for n in names:
        if (ROOT / "sample_images" / f"{n}.png").is_file():
            a = np.asarray(Image.open(ROOT / "sample_images" / f"{n}.png").convert("RGB")
                           if n == "astronaut" else Image.open(ROOT / "sample_images" / f"{n}.png"))
        else:
            a = getattr(data, n)()
        if a.ndim == 2:
            a = np.repeat(a[..., None], 3, axis=2)
        h, w = a.shape[:2]
        y, x = (h - CROP) // 2, (w - CROP) // 2
        out[n] = a[y:y + CROP, x:x + CROP, :3]
    return out


def linear(srgb8):
    c = srgb8.astype(np.float64) / 255.0
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def mosaic_of_scene(rgb8):
    """The sensor's signal above black (DN), RGGB, before noise."""
    lin = linear(rgb8) / np.array(WB)
    chan = {(0, 0): 0, (0, 1): 1, (1, 0): 1, (1, 1): 2}
    m = np.empty(rgb8.shape[:2])
    for y, x in POSITIONS:
        m[y::2, x::2] = lin[y::2, x::2, chan[(y, x)]]
    return m * 0.8 * (WHITE - BLACK)


def with_noise(signal, gain, read, seed):
    rng = np.random.default_rng(seed)
    z = gain * rng.poisson(signal / gain) + rng.normal(0.0, read, signal.shape)
    return np.clip(np.rint(z + BLACK), 0, WHITE).astype(np.uint16)


def meta():
    return {"raw": dict(cfa="RGGB", black=[float(BLACK)] * 4, white=WHITE,
                        wb=list(WB) + [1.0], color_matrix=np.linalg.inv(XYZ_RGB).tolist(),
                        make="kpca-denoise", model="synthetic", iso=None),
            "orientation": 1}


def score(ref, a):
    b = BORDER
    return psnr(ref[b:-b, b:-b].astype(np.float64), a[b:-b, b:-b].astype(np.float64), 65535.0)


def run_case(folder, name, rgb8, level, seed):
    import bm3d

    gain, read = LEVELS[level]
    signal = mosaic_of_scene(rgb8)
    clean_raw = np.clip(np.rint(signal + BLACK), 0, WHITE).astype(np.uint16)
    noisy_raw = with_noise(signal, gain, read, seed)
    path = folder / f"{name}-{level}.dng"
    write_dng(path, noisy_raw, meta())
    ref = develop(path, clean_raw)
    noisy = develop(path)
    true_std = float(np.sqrt(np.mean((noisy.astype(float) - ref.astype(float)) ** 2)))
    t = time.perf_counter()
    mos = denoise_mosaic(read_item(path).array, black=BLACK, white=WHITE)
    t_mos = time.perf_counter() - t
    ours_mosaic = develop(path, mos)
    told = develop(path, denoise_mosaic(read_item(path).array, black=BLACK, white=WHITE,
                                        noise_model="poisson-gaussian", poisson_gain=gain,
                                        noise_sigma=read))
    t = time.perf_counter()
    ours_dev = denoise_image(noisy)
    t_dev = time.perf_counter() - t
    cb = bm3d.bm3d_rgb(noisy / 65535.0, true_std / 65535.0)
    cb = np.clip(np.rint(cb * 65535.0), 0, 65535).astype(np.uint16)
    return dict(noisy=score(ref, noisy), mosaic=score(ref, ours_mosaic), told=score(ref, told),
                developed=score(ref, ours_dev), cbm3d=score(ref, cb), std=true_std / 257.0,
                t_mos=t_mos, t_dev=t_dev)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", default="astronaut,camera,coins,moon,grass")
    ap.add_argument("--levels", default=",".join(LEVELS))
    args = ap.parse_args(argv)
    imgs = clean_images(args.images.split(","))
    print(f"{'image':10s} {'level':9s} {'std8':>5s} {'noisy':>6s} {'mosaic':>7s} {'told':>6s} "
          f"{'devel.':>7s} {'cbm3d':>6s} {'m-dev':>6s} {'m-cb':>6s}  s(mosaic/devel.)")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for k, (name, rgb8) in enumerate(imgs.items()):
            for j, level in enumerate(args.levels.split(",")):
                r = run_case(Path(tmp), name, rgb8, level, seed=100 * k + j)
                rows.append(r)
                print(f"{name:10s} {level:9s} {r['std']:5.2f} {r['noisy']:6.2f} "
                      f"{r['mosaic']:7.2f} {r['told']:6.2f} {r['developed']:7.2f} {r['cbm3d']:6.2f} "
                      f"{r['mosaic'] - r['developed']:+6.2f} {r['mosaic'] - r['cbm3d']:+6.2f}"
                      f"  {r['t_mos']:.1f}/{r['t_dev']:.1f}", flush=True)
    mean = {k: float(np.mean([r[k] for r in rows])) for k in ("noisy", "mosaic", "told",
                                                               "developed", "cbm3d")}
    worst_dev = min(r["mosaic"] - r["developed"] for r in rows)
    worst_cb = min(r["mosaic"] - r["cbm3d"] for r in rows)
    print(f"{'mean':20s} {mean['noisy']:12.2f} {mean['mosaic']:7.2f} {mean['told']:6.2f} "
          f"{mean['developed']:7.2f} "
          f"{mean['cbm3d']:6.2f} {mean['mosaic'] - mean['developed']:+6.2f} "
          f"{mean['mosaic'] - mean['cbm3d']:+6.2f}")
    print(f"worst: mosaic - developed {worst_dev:+.2f} dB, mosaic - cbm3d {worst_cb:+.2f} dB")


if __name__ == "__main__":
    main()
