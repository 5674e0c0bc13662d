"""Real camera noise: the PolyU pairs (a noisy JPEG and the mean of many shots of the
same static scene), ours blind and told against CBM3D and BM3D told the noise spectrum.

A script, not a test (issue 61).  The data are PolyU's real-world noisy image dataset
(Xu, Li, Liang, Zhang & Zhang 2018, arXiv:1804.02603): 100 pairs of 512x512 sRGB JPEG
crops, ``<camera>_<f-number>_<exposure>_<ISO>_<scene>_<k>_real.JPG`` and its
``..._mean.JPG``, from five cameras.  Research and personal use only: the images are
read from ``--data`` (default ``../shared/data/polyu-real`` beside the repository) and
never copied into it.

The cameras are split into two fixed halves (:data:`HALVES`): ``develop`` (Canon 5D
Mark II, Canon 80D, Sony A7 II: what a noise model may be tuned on) and ``check``
(Canon 600D, Nikon D800: kept for confirming it).  Both are reported.

Per pair, PSNR (dB, 0..255, against the mean image) of

* ``noisy``: the noisy shot;
* ``blind``: ours with nothing given (``denoise_set`` with the default parameters);
* ``told``: ours told the true std, the per-pixel std of noisy - mean over the pixels
  and the three channels (``noise_sigma``);
* ``CBM3D``: ``bm3d.bm3d_rgb`` told that std;
* ``BM3D-psd``: BM3D told the true noise spectrum, per channel of the orthonormal
  opponent transform (``kpca_denoise.core.color``): the noise (noisy - mean) of each
  channel gives its power spectrum (:func:`noise_psd`: the periodogram smoothed by a
  Gaussian of :data:`PSD_SMOOTH` frequency bins, in ``bm3d``'s units, where white noise
  of std s is ``s^2 M N`` everywhere), and ``bm3d.bm3d(channel, sigma_psd=psd)``
  denoises each channel; back to RGB.  What the best classical method does when it
  knows the noise.

Then the means per camera and ISO, per camera, and per half, with the gains over the
noisy input and ours blind against BM3D told the spectrum.

Usage::

    python -m benchmarks.real_noise [--limit N] [--cameras Canon5D2,Sony] [--data DIR]
                                    [--columns blind,told,cbm3d,bm3d-psd]

``--limit N``: at most N pairs per camera, evenly spread over its pairs sorted by ISO
and name (every pair by default: 100 pairs take about 1.5 hours on 2 cores).
``--columns``: which of the denoised columns to run (the others print ``nan``).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.common import ROOT, exit_on_help, psnr, results_header

#: where the PolyU pairs are read from by default (never inside the repository)
DATA = ROOT.parent / "shared" / "data" / "polyu-real"
#: the fixed split of the cameras (the file names' first field)
HALVES = {"develop": ("Canon5D2", "Canon80D", "Sony"), "check": ("Canon600D", "NikonD800")}
#: the denoised columns, in the table's order
COLUMNS = ("blind", "told", "cbm3d", "bm3d-psd")
#: the std (in frequency bins) of the Gaussian that smooths the noise periodogram
PSD_SMOOTH = 2.0


def pairs(data: Path) -> list[tuple[str, int, Path, Path]]:
    """Every pair of ``data``: ``(camera, ISO, noisy file, mean file)``, sorted by
    camera, ISO and name."""
    out = []
    for noisy in sorted(data.glob("*_real.JPG")):
        mean = noisy.with_name(noisy.name[: -len("_real.JPG")] + "_mean.JPG")
        if not mean.exists():
            continue
        fields = noisy.name.split("_")
        out.append((fields[0], int(fields[3]), noisy, mean))
    return sorted(out, key=lambda p: (p[0], p[1], p[2].name))


def chosen(all_pairs: list, cameras, limit: int | None) -> list:
    """The pairs of ``cameras``, at most ``limit`` per camera, evenly spread over each
    camera's pairs (sorted by ISO and name)."""
    out = []
    for cam in cameras:
        mine = [p for p in all_pairs if p[0] == cam]
        if limit is not None and len(mine) > limit:
            idx = np.unique(np.round(np.linspace(0, len(mine) - 1, limit)).astype(int))
            mine = [mine[i] for i in idx]
        out += mine
    return out


def read_rgb(path: Path) -> np.ndarray:
    """An image file as (H, W, 3) uint8."""
    from PIL import Image

    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def noise_psd(noise: np.ndarray, smooth: float = PSD_SMOOTH) -> np.ndarray:
    """The power spectrum of a 2-D noise field in ``bm3d``'s units (``E|FFT(n)|^2``:
    white noise of std s gives ``s^2 M N`` in every bin): its periodogram, the mean
    taken out, smoothed by a Gaussian of ``smooth`` bins (circularly; the sum, hence
    the variance, kept)."""
    from scipy.ndimage import gaussian_filter

    n = np.asarray(noise, dtype=np.float64)
    P = np.abs(np.fft.fft2(n - n.mean())) ** 2
    return gaussian_filter(P, smooth, mode="wrap")


def ours(noisy: np.ndarray, sigma: float | None = None) -> np.ndarray:
    from kpca_denoise import DenoiseParams, denoise_set

    res = denoise_set([noisy], DenoiseParams(noise_sigma=sigma)).images[0]
    if res.error:
        raise RuntimeError(res.error)
    return res.outputs[None].astype(np.float64)


def cbm3d(noisy: np.ndarray, sigma: float) -> np.ndarray:
    import bm3d

    return bm3d.bm3d_rgb(noisy.astype(np.float64), float(sigma))


def bm3d_psd(noisy: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """BM3D told the noise spectrum of each opponent channel (module docstring)."""
    import bm3d

    from kpca_denoise.core.color import opponent_to_rgb, rgb_to_opponent

    if not hasattr(np, "trapz"):  # bm4d 4.2's spectrum analysis calls it (numpy 2.x: trapezoid)
        np.trapz = np.trapezoid

    z = rgb_to_opponent(noisy)
    n = z - rgb_to_opponent(mean)
    out = np.stack([bm3d.bm3d(np.ascontiguousarray(z[..., c]), noise_psd(n[..., c]))
                    for c in range(3)], axis=-1)
    return np.clip(opponent_to_rgb(out), 0.0, 255.0)


def run_pair(noisy: np.ndarray, mean: np.ndarray, columns) -> tuple[float, list[float]]:
    """``(true std, [PSNR of noisy, blind, told, CBM3D, BM3D-psd])`` of one pair
    (``nan`` for a column not asked)."""
    ref = mean.astype(np.float64)
    s_true = float(np.sqrt(np.mean((noisy.astype(np.float64) - ref) ** 2)))
    runs = {"blind": lambda: ours(noisy), "told": lambda: ours(noisy, s_true),
            "cbm3d": lambda: cbm3d(noisy, s_true), "bm3d-psd": lambda: bm3d_psd(noisy, ref)}
    ps = [psnr(ref, noisy)]
    ps += [psnr(ref, np.clip(runs[c](), 0.0, 255.0)) if c in columns else float("nan")
           for c in COLUMNS]
    return s_true, ps


def half_of(camera: str) -> str:
    return next((h for h, cams in HALVES.items() if camera in cams), "other")


def summary(what: str, rows: list) -> str:
    """One line of means over ``rows`` (each ``(.., std, noisy, blind, told, cbm3d,
    psd)``): PSNRs, gains over the noisy input and ours blind - BM3D told the spectrum."""
    r = np.array([row[-6:] for row in rows], dtype=np.float64)
    m = r.mean(axis=0)
    g = m[2:] - m[1]
    d = r[:, 2] - r[:, 5]
    return (f"{what:<24} {len(rows):3d} {m[0]:6.2f} {m[1]:6.2f} {m[2]:6.2f} {m[3]:6.2f} "
            f"{m[4]:6.2f} {m[5]:8.2f}   {g[0]:+6.2f} {g[1]:+6.2f} {g[2]:+6.2f} {g[3]:+6.2f}"
            f"   {d.mean():+7.2f} {np.min(d) if d.size else np.nan:+7.2f}")


def main(argv: list[str]) -> None:
    exit_on_help(argv, __doc__)

    def opt(name: str, default=None):
        return argv[argv.index(name) + 1] if name in argv else default

    data = Path(opt("--data", DATA))
    limit = int(opt("--limit")) if "--limit" in argv else None
    cameras = tuple(opt("--cameras").split(",")) if "--cameras" in argv else \
        tuple(c for h in HALVES.values() for c in h)
    columns = tuple(opt("--columns").split(",")) if "--columns" in argv else COLUMNS
    bad = [c for c in columns if c not in COLUMNS]
    if bad:
        raise SystemExit(f"unknown column {bad[0]!r}; choose from {', '.join(COLUMNS)}")
    if not data.is_dir():
        raise SystemExit(f"{data}: no such folder; give the PolyU pairs with --data DIR")
    todo = chosen(pairs(data), cameras, limit)
    if not todo:
        raise SystemExit(f"no pairs of {', '.join(cameras)} in {data}")
    print(results_header())
    print(f"{'pair':<40} {'half':<7} {'std':>5} {'noisy':>6} {'blind':>6} {'told':>6} "
          f"{'CBM3D':>6} {'BM3D-psd':>8}")
    rows = []
    t0 = time.perf_counter()
    for cam, iso, f_noisy, f_mean in todo:
        s_true, ps = run_pair(read_rgb(f_noisy), read_rgb(f_mean), columns)
        name = f_noisy.name[: -len("_real.JPG")]
        rows.append((cam, iso, half_of(cam), s_true, *ps))
        print(f"{name:<40} {half_of(cam):<7} {s_true:5.2f} " + " ".join(
            f"{p:{8 if k == 5 else 6}.2f}" for k, p in enumerate(ps, 1)), flush=True)
    print()
    print(f"{'mean over':<24} {'n':>3} {'std':>6} {'noisy':>6} {'blind':>6} {'told':>6} "
          f"{'CBM3D':>6} {'BM3D-psd':>8}   gains over noisy: blind, told, CBM3D, BM3D-psd"
          f"   blind - BM3D-psd: mean, worst")
    for cam, iso in sorted({(r[0], r[1]) for r in rows}):
        print(summary(f"{cam} ISO {iso}", [r for r in rows if r[:2] == (cam, iso)]))
    for cam in dict.fromkeys(r[0] for r in rows):
        print(summary(cam, [r for r in rows if r[0] == cam]))
    for half in dict.fromkeys(r[2] for r in rows):
        print(summary(f"{half} half", [r for r in rows if r[2] == half]))
    print(summary("all", rows))
    print(f"# {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
