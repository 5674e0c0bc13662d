"""Photographs at real sizes: time and PSNR of the default and the fast profile next to
BM3D, OpenCV's NLM and scikit-image's NLM, all in one process.

A script, not a test.  Images: ``camera`` (grey) and ``astronaut`` (colour, the shipped
sample) at 512x512 (0.26 Mpx) and upscaled with a cubic spline to 1024x1024 and
2048x2048 (1 and 4 Mpx), astronaut resized to 600x900 (0.54 Mpx) and, with ``--sizes
4000x3000``, to a 12 Mpx phone photograph's size; white Gaussian
noise of sigma 25 (seed 0, not clipped), noise level given to every method.  Ours runs
through :func:`kpca_denoise.denoise_set` (``noise_sigma=25``) after a warm-up call that
compiles the numba kernels.  Baselines: ``bm3d.bm3d`` / ``bm3d.bm3d_rgb`` (single
thread), OpenCV's ``fastNlMeansDenoising`` / ``fastNlMeansDenoisingColored`` (h = sigma,
7x7 template, 21x21 search, on the noisy image rounded and clipped to uint8) and
``skimage.restoration.denoise_nl_means`` (``common.nlm_denoise``'s settings; skipped above 1 Mpx,
as BM3D is unless ``--bm3d-all``).  Then the default's time per stage
(``stats["grouped"][0]["seconds"]``, summed over channels) and its counts: references
and distances per pixel (stage 2's predicted candidates counted at their most),
kernel evaluations and pre-image iterations per patch.  ``--tile-size`` sets our
tiles' core side (``DenoiseParams.tile_size``; the pixels do not change).

Usage::

    python -m benchmarks.photo_speed                 # 0.25, 0.54 and 1 Mpx
    python -m benchmarks.photo_speed --sizes 512 1024 2048 --bm3d-all
    python -m benchmarks.photo_speed --methods fast opencv-nlm --repeats 3
    python -m benchmarks.photo_speed --sizes 4000x3000 --methods default fast opencv-nlm
    python -m benchmarks.photo_speed --sizes 4000x3000 --methods default --tile-size 2048
    python -m benchmarks.photo_speed --sizes 512 --repeats 2 --fast-variants '{}' '{"group_size1": 20}'

``--fast-variants`` compares configurations of the fast profile instead: each a JSON
dictionary of grouped knobs (and ``patch_size``) applied on top of it, its time as a
multiple of OpenCV's NLM's in the same round and its PSNR above OpenCV's (the fastest
of ``--repeats`` rounds).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from benchmarks.common import psnr, results_header, sample_image
from kpca_denoise import DenoiseParams, denoise_set
from kpca_denoise.core.grouped.driver import PREDICT
from kpca_denoise.core.grouped.matching import search_mask

SIGMA = 25.0
#: the methods compared, in the table's order
METHODS = ("default", "fast", "bm3d", "opencv-nlm", "skimage-nlm")


def photos(sizes) -> dict:
    """name -> clean image (float64, 0..255): per size ``N`` camera and astronaut at
    ``N x N``; per size ``WxH`` astronaut (colour) resized to ``H`` rows, ``W`` columns."""
    from skimage import data
    from skimage.transform import resize

    cam = data.camera().astype(np.float64)
    ast = sample_image("astronaut.png")[..., :3].astype(np.float64)
    out = {}
    for s in sizes:
        if "x" in str(s):  # a phone photograph's size, colour only
            w, h = (int(v) for v in str(s).split("x"))
            out[f"astronaut {w}x{h}"] = np.clip(
                resize(ast, (h, w, 3), order=3, preserve_range=True), 0, 255)
            continue
        s = int(s)
        for name, im in (("camera", cam), ("astronaut", ast)):
            shape = (s, s) + im.shape[2:]
            out[f"{name} {s}x{s}"] = im if s == 512 else np.clip(
                resize(im, shape, order=3, preserve_range=True), 0, 255)
        if s == 512:  # a colour photograph of the size
            out["astronaut 600x900"] = np.clip(
                resize(ast, (600, 900, 3), order=3, preserve_range=True), 0, 255)
    return out


def opencv_nlm(noisy: np.ndarray) -> np.ndarray:
    import cv2

    u8 = np.clip(np.rint(noisy), 0, 255).astype(np.uint8)
    if u8.ndim == 3:  # OpenCV's colour NLM works in BGR order (Lab inside)
        return cv2.fastNlMeansDenoisingColored(u8[..., ::-1].copy(), None, SIGMA, SIGMA, 7,
                                               21)[..., ::-1]
    return cv2.fastNlMeansDenoising(u8, None, SIGMA, 7, 21)


def skimage_nlm(noisy: np.ndarray) -> np.ndarray:
    """``common.nlm_denoise``'s settings, colour channels as channels."""
    from skimage.restoration import denoise_nl_means

    return denoise_nl_means(noisy, h=0.8 * SIGMA, sigma=SIGMA, fast_mode=True, patch_size=7,
                            patch_distance=11, channel_axis=-1 if noisy.ndim == 3 else None)


def bm3d(noisy: np.ndarray) -> np.ndarray:
    import bm3d as _bm3d

    return (_bm3d.bm3d_rgb if noisy.ndim == 3 else _bm3d.bm3d)(noisy, SIGMA)


def ours(profile: str, tile_size: int | None = None):
    params = DenoiseParams(noise_sigma=SIGMA, profile=profile, tile_size=tile_size)

    def run(noisy):
        res = denoise_set([noisy], params)
        run.stats = res.images[0].stats["grouped"]
        return res.images[0].outputs[None]
    return run


def fast_variant(knobs: dict):
    """The fast profile with ``knobs`` (grouped knobs, ``patch_size``) on top."""
    g = dict(knobs)
    extra = {"patch_size": g.pop("patch_size")} if "patch_size" in g else {}
    params = DenoiseParams(noise_sigma=SIGMA, profile="fast", grouped=g, **extra)
    return lambda noisy: denoise_set([noisy], params).images[0].outputs[None]


def compare_fast_variants(variants: list, sizes, repeats: int) -> None:
    """Each variant's time against OpenCV's NLM (same round) and PSNR above it."""
    runs = {v: fast_variant(json.loads(v)) for v in variants}
    warm = np.random.default_rng(1).normal(128, 25, (96, 96))
    for fn in runs.values():
        fn(warm)
        fn(np.dstack([warm] * 3))
    print("fast-profile variants: time / OpenCV NLM's (same round, fastest of "
          f"{repeats}), PSNR - OpenCV's (dB)")
    for name, clean in photos(sizes).items():
        noisy = clean + np.random.default_rng(0).normal(0.0, SIGMA, clean.shape)
        best: dict = {}
        for _ in range(repeats):
            t_cv, out = timed(opencv_nlm, noisy)
            cv_db = psnr(clean, out)
            for v, fn in runs.items():
                t, out = timed(fn, noisy)
                if v not in best or t / t_cv < best[v][0]:
                    best[v] = (t / t_cv, psnr(clean, out) - cv_db)
        print(f"{name:20s} OpenCV {cv_db:.2f} dB: " + "; ".join(
            f"{v} {r:.2f}x {d:+.2f}" for v, (r, d) in best.items()), flush=True)


def timed(fn, noisy):
    t = time.perf_counter()
    out = fn(noisy)
    return time.perf_counter() - t, out


def counts(stats: list, shape: tuple) -> str:
    """References and distances per pixel, kernel evaluations and pre-image
    iterations per patch estimate, from a run's resolved parameters and counters."""
    p = stats[0]["params"]
    px = shape[0] * shape[1]
    groups = stats[0]["groups"]  # both stages
    two = p["two_stage"]
    refs = groups / (2 if two else 1)
    n1, n2 = p["group_size1"], p["group_size"]
    offs = [int(search_mask(p["search_radius1"], p["dense_radius"], p["lags"]).sum())]
    labels = [str(offs[0])]
    if two and p.get("regroup", True):
        offs.append(int(search_mask(p["search_radius"], p["dense_radius"], p["lags"]).sum()))
        labels.append(str(offs[1]))
        if PREDICT is not None and not p["periodic"]:  # stage 2's predicted candidates
            core, reach = PREDICT
            offs[1] = min(offs[1], (2 * core + 1) ** 2 + (4 * reach + 1) * n1)
            labels[1] = f"at most {offs[1]} predicted"
    members = refs * (n1 + (n2 if two else 0))
    d = p["patch_size"] ** 2
    # kernel evaluations per group: its Gram (n^2 / 2), stage 2's cross kernel (n^2)
    kev = refs * (n1 * n1 / 2 + ((n2 * n2 / 2 + n2 * n2) if two else 0))
    return (f"references/px {refs / px:.4f}, distances/px {refs * sum(offs) / px:.0f} "
            f"({' + '.join(labels)} offsets per reference), kernel evaluations/px "
            f"{kev / px:.0f} (of {d} values each), pre-image iterations per patch "
            f"{stats[0]['preimage_iterations'] / members:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", default=["512", "1024"],
                    help="N (camera and astronaut at NxN) or WxH (astronaut resized, colour)")
    ap.add_argument("--bm3d-all", action="store_true", help="BM3D above 1 Mpx too (slow)")
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS,
                    help="a subset (the ratios need default and bm3d, fast and opencv-nlm)")
    ap.add_argument("--repeats", type=int, default=1,
                    help="runs per method and image, interleaved; the fastest counts")
    ap.add_argument("--fast-variants", nargs="+", metavar="JSON",
                    help="compare these configurations of the fast profile instead")
    ap.add_argument("--tile-size", type=int, default=None,
                    help="our tiles' core side in px (default: the engine's)")
    args = ap.parse_args()
    print(results_header(), flush=True)
    if args.fast_variants:
        compare_fast_variants(args.fast_variants, args.sizes, args.repeats)
        return
    warm = np.random.default_rng(1).normal(128, 25, (96, 96))
    for prof in ("default", "fast"):
        ours(prof)(warm)
        ours(prof)(np.dstack([warm] * 3))
    every = {"default": ours("default", args.tile_size), "fast": ours("fast", args.tile_size),
             "bm3d": bm3d,
             "opencv-nlm": opencv_nlm, "skimage-nlm": skimage_nlm}
    methods = {m: every[m] for m in METHODS if m in args.methods}
    print(f"sigma {SIGMA:g}, noise level given; seconds (s/Mpx) and PSNR dB")
    print(f"{'image':20s} {'Mpx':>5s} | " + " | ".join(f"{m:>21s}" for m in methods)
          + " | default/bm3d fast/opencv fast-opencv dB")
    profiles = []
    for name, clean in photos(args.sizes).items():
        noisy = clean + np.random.default_rng(0).normal(0.0, SIGMA, clean.shape)
        mpx = clean.shape[0] * clean.shape[1] / 1e6
        row: dict = {}
        stats: dict = {}
        for _ in range(args.repeats):
            for m, fn in methods.items():
                if m in ("bm3d", "skimage-nlm") and mpx > 1.1 and not args.bm3d_all:
                    continue
                t, out = timed(fn, noisy)
                if m not in row or t < row[m][0]:
                    row[m] = (t, psnr(clean, out))
                    stats[m] = getattr(fn, "stats", None)  # of the fastest run
        cells = [f"{row[m][0]:7.2f} ({row[m][0] / mpx:5.1f}) {row[m][1]:5.2f}" if m in row
                 else f"{'-':>21s}" for m in methods]
        both = {"default", "bm3d"} <= set(row)
        ratio = f"{row['default'][0] / row['bm3d'][0]:6.3f}" if both else "     -"
        if {"fast", "opencv-nlm"} <= set(row):
            ratio += (f" {row['fast'][0] / row['opencv-nlm'][0]:6.2f} "
                      f"{row['fast'][1] - row['opencv-nlm'][1]:+6.2f}")
        print(f"{name:20s} {mpx:5.2f} | " + " | ".join(cells) + f" | {ratio}", flush=True)
        for prof in ("default", "fast"):
            st = stats.get(prof)
            if st is None:
                continue
            sec = {k: sum(s["seconds"][k] for s in st) for k in st[0]["seconds"]}
            profiles.append(f"{name:20s} {prof:8s} " + " ".join(
                f"{k} {v:.2f}" for k, v in sec.items()) + "\n" + " " * 30
                + counts(st, clean.shape))
    print("\nper stage (seconds, summed over channels; total is the core's wall time):")
    print("\n".join(profiles))


if __name__ == "__main__":
    main()
