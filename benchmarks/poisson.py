"""Poisson-Gaussian (signal-dependent) noise: the variance-stabilised path against the rest.

A script, not a test.  Development images only (coins, moon, grass, gravel, hubble
deep field, camera, astronaut in grey; 256x256 centre crops, 0..255) get simulated
camera noise ``z = gain * Poisson(y / gain) + N(0, sigma_g^2)`` (not clipped) at the
gains below with ``sigma_g = 2``.  Columns (PSNR in dB against the clean crop):

* ``noisy``;
* ``default``    - the product with nothing given (``denoise_set`` with the defaults):
  the Gaussian model, which chooses the stabiliser itself when the measured noise is
  white and grows with the signal (``prepare._chosen_stabiliser``); the table's last
  column says whether it did (``vst``) or kept one Gaussian level (``awgn``);
* ``awgn``       - the Gaussian model at the one level the default path measures
  (``prepare.noise_model_of``), told as ``noise_sigma``: what the default did before it
  could choose;
* ``awgn-eq``    - the grouped method told the equivalent sigma ``sqrt(mean(gain y + sigma_g^2))``;
* ``vst``        - the product with ``noise_model="poisson-gaussian"``: gain and sigma_g
  estimated (:func:`kpca_denoise.core.noise.estimate_poisson_gaussian`), generalised
  Anscombe transform, grouped kernel PCA at sigma 1, exact unbiased inverse;
* ``vst-lin``    - the same with the linear kernel (ablation);
* ``vst-nlm``    - scikit-image non-local means on the same stabilised data;
* ``vst-bm3d``   - ``bm3d.bm3d(f, 1.0)`` on the same stabilised data, same inverse.

With ``--estimate`` it first prints the accuracy of the gain / sigma estimator on the
full-size images (as ``benchmarks/noise_estimate.py`` does for sigma): the estimates,
and the relative error of the predicted noise std ``sqrt(gain y + sigma_g^2)`` at the
10th, 50th and 90th percentiles of the clean signal, beside the same for the coarse
block fit alone (one of the estimator's two fits, and the whole estimator before
2026-11-26).  The "clean" images carry their own grain (hubble's sky, grass),
which any estimator reads as noise: part of their error is the images' own.  ``--dir DIR``
runs the estimator part on the photographs in a folder instead (for instance the
wallpapers of ``benchmarks/outside.py``).

Usage::

    python -m benchmarks.poisson              # denoising table
    python -m benchmarks.poisson --columns default,awgn,vst   # some columns only
    python -m benchmarks.poisson --estimate   # estimator accuracy, then the table
    python -m benchmarks.poisson --estimate --no-denoise
    python -m benchmarks.poisson --estimate --no-denoise --dir DIR
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks.common import bm3d_denoise, image_files, load, nlm_denoise, psnr, results_header
from kpca_denoise import denoise_image
from kpca_denoise.core.grouped import denoise_grouped
from kpca_denoise.core.noise import block_fit, estimate_poisson_gaussian
from kpca_denoise.core.vst import GeneralizedAnscombe

NAMES = ("coins", "moon", "grass", "gravel", "hubble", "camera", "astronaut")
GAINS = (1.0, 4.0, 16.0)
SIGMA_G = 2.0


def simulate(img: np.ndarray, gain: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return gain * rng.poisson(img / gain) + rng.normal(0.0, SIGMA_G, img.shape)


def estimator_table(images) -> None:
    """``images``: (name, clean image) pairs."""
    print(f"{'image':12s} {'gain':>5s} {'est gain':>9s} {'est sig':>8s}  "
          "std err @p10 / p50 / p90      coarse fit alone: std err @p10 / p50 / p90")
    errs, block_errs = [], []
    for name, img in images:
        lv = np.percentile(img, (10, 50, 90))
        for gain in GAINS:
            z = simulate(img, gain, 3)
            a, s = estimate_poisson_gaussian(z)
            ab, sb = block_fit(z, 8, None, None, 10, 0.999)
            truth = np.sqrt(gain * lv + SIGMA_G ** 2)
            e = np.sqrt(a * lv + s * s) / truth - 1.0
            eb = np.sqrt(ab * lv + sb * sb) / truth - 1.0
            errs.append(np.abs(e))
            block_errs.append(np.abs(eb))
            print(f"{name[:12]:12s} {gain:5.0f} {a:9.2f} {s:8.2f}  "
                  + " / ".join(f"{100 * v:+5.1f} %" for v in e) + "      "
                  + " / ".join(f"{100 * v:+5.1f} %" for v in eb), flush=True)
    for label, e in (("", errs), ("coarse fit alone: ", block_errs)):
        e = np.asarray(e)
        print(f"{label}predicted noise std: mean relative error {100 * e.mean():.1f} %, "
              f"median {100 * np.median(e):.1f} %, worst {100 * e.max():.1f} %")
    print()


def photos(folder: str):
    """(name, luminance 0..255) of every image in ``folder``, in file-name order."""
    from PIL import Image

    for f in image_files(folder):
        with Image.open(f) as im:
            yield f.stem, np.asarray(im.convert("L"), dtype=np.float64)


COLUMNS = ("noisy", "default", "awgn", "awgn-eq", "vst", "vst-lin", "vst-nlm", "vst-bm3d")


def _default(z: np.ndarray, chose: list):
    """The product with nothing given; appends whether it chose the stabiliser."""
    from kpca_denoise import DenoiseParams, denoise_set

    res = denoise_set([z], DenoiseParams()).images[0]
    chose.append(bool(res.stats.get("noise_model", {}).get("chosen")))
    return res.outputs[None]


def _one_level(z: np.ndarray) -> float:
    """The Gaussian level the default path measures (no stabiliser)."""
    from kpca_denoise.prepare import noise_model_of

    white, model = noise_model_of(z)
    return white if model is None else model.level


def denoise_table(crop: int, gains, cols=COLUMNS) -> None:
    try:
        import bm3d
    except ImportError:  # pragma: no cover
        bm3d = None  # the vst-bm3d column then repeats the noisy one
    chose: list = []
    print(f"{'image':10s} {'gain':>5s} " + " ".join(f"{c:>8s}" for c in cols)
          + ("   chosen" if "default" in cols else ""))
    rows, times = [], {c: 0.0 for c in cols}
    for gain in gains:
        for name in NAMES:
            img = load(name, crop)
            z = simulate(img, gain, 1)
            s_eq = float(np.sqrt(np.mean(gain * np.clip(img, 0, None) + SIGMA_G ** 2)))
            vst = GeneralizedAnscombe(*estimate_poisson_gaussian(z))
            f = vst.forward(z)
            run = {
                "noisy": lambda: z,
                "default": lambda: _default(z, chose),
                "awgn": lambda: denoise_image(z, noise_sigma=_one_level(z)),
                "awgn-eq": lambda: denoise_grouped(z, s_eq)[0][None],
                "vst": lambda: denoise_image(z, noise_model="poisson-gaussian"),
                "vst-lin": lambda: vst.inverse(denoise_grouped(f, 1.0, kernel="linear")[0][None]),
                "vst-nlm": lambda: vst.inverse(nlm_denoise(f, 1.0)),
                "vst-bm3d": (lambda: vst.inverse(bm3d_denoise(f, 1.0))) if bm3d else (lambda: z),
            }
            row = []
            for c in cols:
                t = time.perf_counter()
                out = run[c]()
                times[c] += time.perf_counter() - t
                row.append(psnr(img, out))
            rows.append((gain, row))
            print(f"{name:10s} {gain:5.0f} " + " ".join(f"{v:8.2f}" for v in row)
                  + (("      vst" if chose[-1] else "     awgn") if "default" in cols else ""),
                  flush=True)
    print()
    for gain in gains:
        m = np.mean([r for g, r in rows if g == gain], axis=0)
        print(f"{'mean':10s} {gain:5.0f} " + " ".join(f"{v:8.2f}" for v in m))
    allr = np.asarray([r for _, r in rows])
    i = {c: k for k, c in enumerate(cols)}

    def diff(what: str, a: str, b) -> None:
        if a in i and all(c in i for c in b):
            d = allr[:, i[a]] - np.max(allr[:, [i[c] for c in b]], axis=1)
            print(f"{what:<26s} mean {d.mean():+.2f} dB, worst {d.min():+.2f} dB")
    print()
    diff("vst - best awgn path:", "vst", ("awgn", "awgn-eq"))
    diff("vst - vst-bm3d:", "vst", ("vst-bm3d",))
    diff("default - awgn:", "default", ("awgn",))
    diff("default - vst:", "default", ("vst",))
    if chose:
        print(f"the default chose the stabiliser in {sum(chose)} of {len(chose)} cases")
    print("seconds (sum): " + ", ".join(f"{c} {t:.1f}" for c, t in times.items() if c != "noisy"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--estimate", action="store_true", help="estimator accuracy first")
    ap.add_argument("--no-denoise", action="store_true", help="skip the denoising table")
    ap.add_argument("--crop", type=int, default=256)
    ap.add_argument("--gains", type=float, nargs="+", default=list(GAINS))
    ap.add_argument("--columns", default=",".join(COLUMNS),
                    help="the denoising table's columns, comma-separated (default: all)")
    ap.add_argument("--dir", help="--estimate on the photographs in this folder (luminance) "
                                  "instead of the development images")
    a = ap.parse_args()
    print(results_header(), flush=True)
    if a.estimate:
        estimator_table(photos(a.dir) if a.dir else ((n, load(n, None)) for n in NAMES))
    if not a.no_denoise:
        cols = tuple(c for c in a.columns.split(",") if c)
        bad = [c for c in cols if c not in COLUMNS]
        if bad:
            ap.error(f"unknown column {bad[0]!r}; choose from {', '.join(COLUMNS)}")
        denoise_table(a.crop, a.gains, cols)


if __name__ == "__main__":
    main()
