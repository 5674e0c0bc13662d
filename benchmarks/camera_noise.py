"""Camera noise through a simulated camera pipeline: blind estimate and denoising against CBM3D.

A script, not a test (issue 33).  Each clean 8-bit sRGB image (256x256 centre crop) goes
through a camera: sRGB made linear, an RGGB Bayer mosaic, Poisson-Gaussian noise on the
mosaic (variance ``a * y + b^2`` of the linear signal ``y`` in 0..1, clipped to 0..1 as a
sensor saturates), demosaicing (``bilinear``: OpenCV's ``COLOR_BayerBG2RGB``; ``ea``:
OpenCV's edge-aware ``COLOR_BayerBG2RGB_EA``, on 16 bits), the sRGB curve, 8 bits, and
optionally JPEG (Pillow, 4:4:4: no chroma subsampling, whose loss of colour
detail no denoiser can undo) of quality 85, 90 or 95.  The reference ("clean") is the
same pipeline without noise (the same demosaicing, no rounding, no JPEG): what is left
against it is the noise, and its RMS over pixels and channels is the true noise std.

Light levels (``LEVELS``): ``bright`` (a 0.002, b 0.003: about 500 photo-electrons at
white) and ``dim`` (a 0.01, b 0.01: 100, with more read noise).

Per image, level and pipeline: PSNR of the noisy image, of ours with nothing given (the
defaults; ``est`` is the per-pixel std it measured, ``level`` the level it told the
denoiser), of ours told the true std (``noise_sigma``), of CBM3D (``bm3d.bm3d_rgb``)
told the true std and of CBM3D told scikit-image's ``estimate_sigma`` (averaged over the
channels), and our blind estimate of the noise std against the true one.  ``--estimate``
prints the estimates only (fast; every pipeline, JPEG 85 / 90 / 95 included).
``--no-cbm3d-est`` leaves the CBM3D-with-scikit-image's-estimate column out (``nan``;
it costs a quarter of the run and stays within 0.3 dB of the noisy input).
``--cost`` times the noise model against the denoising of a 512x512 colour crop
(astronaut, dim, edge-aware, JPEG 90), both in this one process.  ``--whiten F1,F2``
compares the default with whitening the fitted correlated noise (:func:`whitened`), told
the fitted per-pixel std times each factor (with ``--pipelines``, on those).

Images: ``sample_images/astronaut.png`` and, with ``--dir DIR``, every PNG in DIR.  The
figures in ``benchmarks/results/camera_noise.txt`` used four photographs of Debian 12's
``mate-backgrounds`` 1.26 (``apt-get download mate-backgrounds``; ``Aqua``, ``Blinds``,
``Dune`` and ``Garden`` of ``usr/share/backgrounds/mate/nature``, scaled with Pillow's
Lanczos filter to 512 px on the short side and saved as PNG).

Usage::

    python -m benchmarks.camera_noise [--dir DIR] [--estimate] [--pipelines bilinear,ea-q90]
                                      [--no-cbm3d-est] [--cost] [--whiten 1.15]
"""

from __future__ import annotations

import io
import sys
import time

import numpy as np

from benchmarks.common import (SAMPLES, bm3d_denoise, centre_crop, exit_on_help, image_files,
                               psnr, results_header)

#: light level -> (Poisson gain a, read-noise std b), linear signal in 0..1
LEVELS = {"bright": (0.002, 0.003), "dim": (0.01, 0.01)}
#: pipeline name -> (demosaicing, JPEG quality or None)
PIPELINES = {"bilinear": ("bilinear", None), "ea": ("ea", None),
             "bilinear-q90": ("bilinear", 90), "ea-q90": ("ea", 90),
             "bilinear-q85": ("bilinear", 85), "ea-q95": ("ea", 95)}
#: what a full run denoises (``--estimate`` reads every pipeline)
DEFAULT_PIPELINES = ("bilinear", "ea-q90", "bilinear-q85", "ea-q95")
CROP = 256


def srgb_to_linear(v: np.ndarray) -> np.ndarray:
    return np.where(v <= 0.04045, v / 12.92, ((v + 0.055) / 1.055) ** 2.4)


def linear_to_srgb(v: np.ndarray) -> np.ndarray:
    v = np.clip(v, 0.0, 1.0)
    return np.where(v <= 0.0031308, 12.92 * v, 1.055 * v ** (1 / 2.4) - 0.055)


def mosaic(linear: np.ndarray) -> np.ndarray:
    """The RGGB Bayer mosaic (H, W) of a linear RGB image (R at even rows and columns)."""
    m = linear[..., 1].copy()
    m[0::2, 0::2] = linear[0::2, 0::2, 0]
    m[1::2, 1::2] = linear[1::2, 1::2, 2]
    return m


def demosaic(raw: np.ndarray, method: str) -> np.ndarray:
    """A 0..1 RGGB mosaic to linear RGB in 0..1 with OpenCV (16 bits).  OpenCV names the
    pattern by the second row's first two pixels: RGGB is its ``BayerBG``."""
    import cv2

    code = cv2.COLOR_BayerBG2RGB if method == "bilinear" else cv2.COLOR_BayerBG2RGB_EA
    r16 = np.clip(np.rint(raw * 65535.0), 0, 65535).astype(np.uint16)
    return cv2.cvtColor(r16, code).astype(np.float64) / 65535.0


def jpeg(image: np.ndarray, quality: int) -> np.ndarray:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="JPEG", quality=quality, subsampling=0)
    buf.seek(0)
    with Image.open(buf) as im:
        return np.asarray(im.convert("RGB"))


def camera(srgb8: np.ndarray, level: str, pipeline: str, seed: int
           ) -> tuple[np.ndarray, np.ndarray]:
    """``(clean, noisy)``: the reference (float64, 0..255) and the camera's 8-bit output."""
    a, b = LEVELS[level]
    method, quality = PIPELINES[pipeline]
    lin = srgb_to_linear(srgb8.astype(np.float64) / 255.0)
    raw = mosaic(lin)
    rng = np.random.default_rng(seed)
    noisy_raw = np.clip(a * rng.poisson(raw / a) + rng.normal(0.0, b, raw.shape), 0.0, 1.0)
    clean = 255.0 * linear_to_srgb(demosaic(raw, method))
    noisy = np.clip(np.rint(255.0 * linear_to_srgb(demosaic(noisy_raw, method))), 0, 255)
    noisy = noisy.astype(np.uint8)
    if quality is not None:
        noisy = jpeg(noisy, quality)
    return clean, noisy


def images(directory: str | None) -> dict[str, np.ndarray]:
    from PIL import Image

    files = [SAMPLES / "astronaut.png"] + (image_files(directory) if directory else [])
    out = {}
    for f in files:
        with Image.open(f) as im:
            out[f.stem] = centre_crop(np.asarray(im.convert("RGB")), CROP)
    return out


def true_std(clean: np.ndarray, noisy: np.ndarray) -> float:
    return float(np.sqrt(np.mean((noisy.astype(np.float64) - clean) ** 2)))


def ours(noisy: np.ndarray, sigma: float | None = None):
    from kpca_denoise import DenoiseParams, denoise_set

    res = denoise_set([noisy], DenoiseParams(noise_sigma=sigma)).images[0]
    if res.error:
        raise RuntimeError(res.error)
    return res.outputs[None].astype(np.float64), res


def blind_estimate(noisy: np.ndarray) -> tuple[float, float]:
    """The per-pixel noise std the default path measures and its finest-scale
    (white-noise) estimate."""
    from kpca_denoise import DenoiseParams
    from kpca_denoise.prepare import prepare_item
    from kpca_denoise.results import ImageResult

    res = ImageResult(index=0, name="x")
    prepare_item(DenoiseParams(), noisy, res, False, seed=0)
    return measured(res), res.stats.get("noise", {}).get("white_sigma", res.noise_sigma)


def measured(res) -> float:
    """The per-pixel noise std a blind result measured (its level told, ``noise_sigma``,
    is above it for correlated noise)."""
    return res.stats.get("noise", {}).get("sigma", res.noise_sigma)


def skimage_sigma(noisy: np.ndarray) -> float:
    from skimage.restoration import estimate_sigma

    return float(estimate_sigma(noisy.astype(np.float64), channel_axis=-1, average_sigmas=True))


def cost() -> None:
    """The noise model's time against the denoising's, told the level (one process)."""
    from PIL import Image

    from kpca_denoise import DenoiseParams, denoise_set
    from kpca_denoise.prepare import noise_model_of

    with Image.open(SAMPLES / "astronaut.png") as im:
        src = centre_crop(np.asarray(im.convert("RGB")), 512)
    _, noisy = camera(src, "dim", "ea-q90", 7)
    noise_model_of(noisy[:64, :64])  # imports and compiled code out of the timing
    t0 = time.perf_counter()
    white, model = noise_model_of(noisy)
    t1 = time.perf_counter()
    denoise_set([noisy], DenoiseParams(noise_sigma=model.level))
    t2 = time.perf_counter()
    print(f"512x512 colour: noise model {t1 - t0:.1f} s, denoising told the level "
          f"{t2 - t1:.1f} s: the model costs {(t1 - t0) / (t2 - t1):.3f} of the denoising")


def fitted_autocovariance(noisy: np.ndarray) -> np.ndarray:
    """The noise autocovariance the default path fits (``core.nlf``, lags up to 3 px),
    the channels' mean, as its effective factor uses it."""
    from kpca_denoise.core import nlf
    from kpca_denoise.prepare import noise_model_of

    white = noise_model_of(noisy)[0]
    R = [nlf.channel_covariance(noisy[..., c], white, (0.0, 255.0), 7, 3, 20000, 1 << 20,
                                 256, 0) for c in range(noisy.shape[2])]
    return np.mean([r for r in R if r is not None], axis=0)


#: the whitening filter's floor, a fraction of the spectrum's peak (0.02 and 0.1 were
#: tried: docs/noise.md)
WHITEN_EPS = 0.02


def whitened(noisy: np.ndarray, factor: float, eps: float = WHITEN_EPS, pad: int = 16
             ) -> np.ndarray:
    """Denoised by whitening: each channel filtered by ``1 / sqrt(S + eps max S)`` (``S``
    the power spectrum of :func:`fitted_autocovariance`, scaled to keep the per-pixel
    variance), denoised told white noise of the fitted per-pixel std times ``factor``,
    and filtered back by the inverse."""
    from kpca_denoise import DenoiseParams, denoise_set
    from kpca_denoise.core.nlf import autocovariance_lags

    R = fitted_autocovariance(noisy)
    x = np.pad(noisy.astype(np.float64), ((pad, pad), (pad, pad), (0, 0)), mode="reflect")
    wy = 2 * np.pi * np.fft.fftfreq(x.shape[0])[:, None]
    wx = 2 * np.pi * np.fft.fftfreq(x.shape[1])[None, :]
    S = R[0] + sum(2 * r * np.cos(wy * dy + wx * dx)
                   for r, (dy, dx) in zip(R[1:], autocovariance_lags(3)[1:]))
    S = np.maximum(S, 0.0)
    h = 1.0 / np.sqrt(S + eps * S.max())
    h *= np.sqrt(R[0] / np.mean(S * h * h))
    xw = np.real(np.fft.ifft2(np.fft.fft2(x, axes=(0, 1)) * h[..., None], axes=(0, 1)))
    res = denoise_set([xw], DenoiseParams(noise_sigma=factor * float(np.sqrt(R[0])))).images[0]
    y = np.fft.ifft2(np.fft.fft2(res.outputs[None], axes=(0, 1)) / h[..., None], axes=(0, 1))
    return np.clip(np.real(y)[pad:-pad, pad:-pad], 0.0, 255.0)


#: the whitening filter's floor, a fraction of the spectrum's peak (0.02 and 0.1 were
#: tried: docs/noise.md)
WHITEN_EPS = 0.02
def whiten_main(directory: str | None, factors: tuple[float, ...], pipes) -> None:
    """``--whiten``: the default (blind) against whitening, per case and level factor."""
    imgs = images(directory)
    print(f"{'image':<12} {'level':<7} {'pipeline':<13} {'blind':>6} "
          + " ".join(f"{'white x' + str(f):>10}" for f in factors))
    gains = {f: [] for f in factors}
    for k, (name, im) in enumerate(imgs.items()):
        for level in LEVELS:
            for pipe in pipes:
                seed = 1000 * k + 10 * list(LEVELS).index(level) + list(PIPELINES).index(pipe)
                clean, noisy = camera(im, level, pipe, seed)
                p_blind = psnr(clean, ours(noisy)[0])
                ps = [psnr(clean, whitened(noisy, f)) for f in factors]
                for f, p in zip(factors, ps):
                    gains[f].append(p - p_blind)
                print(f"{name:<12} {level:<7} {pipe:<13} {p_blind:6.2f} "
                      + " ".join(f"{p:10.2f}" for p in ps), flush=True)
    for f, g in gains.items():
        print(f"whitened x{f} - blind: mean {np.mean(g):+.2f}, min {np.min(g):+.2f}, "
              f"max {np.max(g):+.2f} dB over {len(g)} cases")


def main(argv: list[str]) -> None:
    exit_on_help(argv, __doc__)
    if "--cost" in argv:
        print(results_header())
        return cost()
    directory = argv[argv.index("--dir") + 1] if "--dir" in argv else None
    if "--whiten" in argv:
        print(results_header())
        pipes = (tuple(argv[argv.index("--pipelines") + 1].split(",")) if "--pipelines" in argv
                 else DEFAULT_PIPELINES)
        return whiten_main(directory, tuple(float(f) for f in
                                            argv[argv.index("--whiten") + 1].split(",")), pipes)
    with_cbe = "--no-cbm3d-est" not in argv
    only_estimate = "--estimate" in argv
    pipes = (tuple(argv[argv.index("--pipelines") + 1].split(",")) if "--pipelines" in argv
             else tuple(PIPELINES) if only_estimate else DEFAULT_PIPELINES)
    print(results_header())
    imgs = images(directory)
    if only_estimate:
        print(f"{'image':<12} {'level':<7} {'pipeline':<13} {'true':>6} {'ours':>6} {'ratio':>6}"
              f" {'finest':>6} {'ratio':>6} {'skimage':>7} {'ratio':>6}")
    else:
        print(f"{'image':<12} {'level':<7} {'pipeline':<13} {'true':>6} {'est':>6} {'level':>6}"
              f" {'noisy':>6}"
              f" {'blind':>6} {'told':>6} {'CBM3D':>6} {'CB-est':>6}  blind-CBM3D  blind-told")
    rows = []
    t0 = time.perf_counter()
    for k, (name, im) in enumerate(imgs.items()):
        for level in LEVELS:
            for pipe in pipes:
                seed = 1000 * k + 10 * list(LEVELS).index(level) + list(PIPELINES).index(pipe)
                clean, noisy = camera(im, level, pipe, seed)
                s_true = true_std(clean, noisy)
                if only_estimate:
                    s_est, s_white = blind_estimate(noisy)
                    s_sk = skimage_sigma(noisy)
                    rows.append((name, level, pipe, s_true, s_est, s_white, s_sk))
                    print(f"{name:<12} {level:<7} {pipe:<13} {s_true:6.2f} {s_est:6.2f} "
                          f"{s_est / s_true:6.3f} {s_white:6.2f} {s_white / s_true:6.3f} "
                          f"{s_sk:7.2f} {s_sk / s_true:6.3f}", flush=True)
                    continue
                p_noisy = psnr(clean, noisy)
                out, res = ours(noisy)
                p_blind, s_est = psnr(clean, out), measured(res)
                p_told = psnr(clean, ours(noisy, s_true)[0])
                x = noisy.astype(np.float64)
                p_cb = psnr(clean, bm3d_denoise(x, s_true))
                p_cbe = (psnr(clean, bm3d_denoise(x, skimage_sigma(noisy))) if with_cbe
                         else float("nan"))
                rows.append((name, level, pipe, s_true, s_est, p_noisy, p_blind, p_told, p_cb,
                             p_cbe))
                print(f"{name:<12} {level:<7} {pipe:<13} {s_true:6.2f} {s_est:6.2f} "
                      f"{res.noise_sigma:6.2f} {p_noisy:6.2f} {p_blind:6.2f} {p_told:6.2f} "
                      f"{p_cb:6.2f} {p_cbe:6.2f}"
                      f"  {p_blind - p_cb:+10.2f}  {p_blind - p_told:+9.2f}", flush=True)
    print()
    r = np.array([row[3:] for row in rows], dtype=np.float64)
    ratio = r[:, 1] / r[:, 0]
    print(f"estimate / true std: mean {ratio.mean():.3f}, min {ratio.min():.3f}, "
          f"max {ratio.max():.3f} over {len(rows)} cases")
    if only_estimate:
        for what, k in (("finest scale", 2), ("skimage", 3)):
            q = r[:, k] / r[:, 0]
            print(f"{what} / true std: mean {q.mean():.3f}, min {q.min():.3f}, max {q.max():.3f}")
    if not only_estimate:
        groups = [("all", np.ones(len(rows), bool)),
                  ("no JPEG", np.array(["-q" not in row[2] for row in rows])),
                  ("JPEG", np.array(["-q" in row[2] for row in rows]))]
        groups += [(p, np.array([row[2] == p for row in rows])) for p in pipes]
        for what, sel in groups:
            if not sel.any():
                continue
            g = r[sel]
            d_cb, d_told = g[:, 3] - g[:, 5], g[:, 3] - g[:, 4]
            print(f"{what:<12} mean PSNR noisy {g[:, 2].mean():.2f}, blind {g[:, 3].mean():.2f}, "
                  f"told {g[:, 4].mean():.2f}, CBM3D told {g[:, 5].mean():.2f}, CBM3D est "
                  f"{g[:, 6].mean():.2f}; blind - CBM3D told: mean {d_cb.mean():+.2f}, worst "
                  f"{d_cb.min():+.2f}; blind - told: mean {d_told.mean():+.2f}, worst "
                  f"{d_told.min():+.2f}")
    print(f"# {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
