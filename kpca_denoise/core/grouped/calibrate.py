"""Decisions the grouped method makes from the image before it denoises: whether
it is a regular texture (and its two periods), its contrast, and how much coarse
detail it has against its noise.

Each is measured on the central :data:`PERIODIC_CROP` square, so the tiled engine
calls :func:`calibrate` once on the whole image's centre and every tile gets the
decisions one piece would.  The thresholds and the measurements behind them:
``docs/options.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from .options import GroupedOptions

__all__ = ["calibrate", "Calibration", "central_crop", "coarse_detail", "periodic_lags",
           "periodic_lags_channels", "periodic_trial", "texture_contrast", "texture_noise",
           "noise_fraction",
           "PERIODIC", "PERIODIC_CROP", "BORDERLINE", "TRIAL_ALPHA", "TRIAL_SEED",
           "TEXTURE_SPAN", "DETAIL_BLOCK"]

#: periodicity score (:func:`periodic_lags`) above which an image is a regular texture
#: (photographs score 0.03-0.15, synthetic bricks and weaves 0.6-0.8)
PERIODIC = 0.3
#: side of the central crop every measure is taken on
PERIODIC_CROP = 256
#: scores above the first value and up to the second are borderline: a trial decides
#: (:func:`periodic_trial`), not :data:`PERIODIC`
BORDERLINE = (0.15, 0.45)
#: how much of the trial's recorrupting noise goes into the image it denoises
#: (``a`` of :func:`periodic_trial`; the trial then judges at 1.12 sigma)
TRIAL_ALPHA = 0.5
#: seed of the trial's recorrupting noise (fixed: the same image gets the same settings)
TRIAL_SEED = 2028
#: a regular texture's contrast times this is the span its noise is also measured
#: against (:func:`texture_noise`): a faint texture gets a wider stage-1 window
TEXTURE_SPAN = 10.0
#: the side of the blocks whose means :func:`coarse_detail` compares
DETAIL_BLOCK = 4

#: ``denoise(channels, sigma, options) -> estimates``: the grouped denoiser, for the trial
Denoiser = Callable[[list, float, GroupedOptions], list]


def central_crop(image: np.ndarray, size: int = PERIODIC_CROP) -> np.ndarray:
    """Return the central crop where the calibration measures an image.

    The central ``size x size`` part of ``image`` (its first two axes; all of an
    axis shorter than ``size``): where :func:`periodic_lags` and :func:`coarse_detail`
    measure, so that a tiled image can be measured as the core measures one piece."""
    H, W = image.shape[:2]
    h, w = min(H, size), min(W, size)
    return image[(H - h) // 2:(H - h) // 2 + h, (W - w) // 2:(W - w) // 2 + w]


def coarse_detail(image: np.ndarray, sigma: float, size: int = PERIODIC_CROP) -> float | None:
    """Measure how much a noisy image varies at a coarse scale, against its noise.

    How much a noisy image varies at a coarse scale, against its noise: the RMS
    difference between neighbouring means of ``DETAIL_BLOCK``-pixel blocks, less the
    noise's share (``2 sigma^2 / DETAIL_BLOCK^2``), over ``sigma``; on the central
    ``size x size`` crop, as :func:`periodic_lags` measures.

    Low for a smooth image (an out-of-focus background, a sky, an upscaled image)
    and for a faint one: there the 7x7 window's distances are mostly noise and a
    wider one groups better (:data:`SMOOTH`).  The block means take the noise down
    16-fold, so the value hardly moves with a few per cent of error in ``sigma``,
    unlike the same measure on single pixels (a difference of two nearly equal
    numbers).  Measured values: ``docs/options.md``.  None for an image under two
    blocks a side (too small to tell).
    """
    a = central_crop(np.asarray(image, dtype=np.float64), size)
    b = DETAIL_BLOCK
    h, w = a.shape[0] - a.shape[0] % b, a.shape[1] - a.shape[1] % b
    if h < 2 * b or w < 2 * b:
        return None  # too small to tell: the default window
    m = a[:h, :w].reshape(h // b, b, w // b, b).mean(axis=(1, 3))
    e = 0.5 * (float(np.mean(np.diff(m, axis=0) ** 2)) + float(np.mean(np.diff(m, axis=1) ** 2)))
    s2 = float(sigma) ** 2
    return math.sqrt(max(e - 2.0 * s2 / (b * b), 0.0) / s2)



def periodic_lags(image: np.ndarray, sigma: float, data_range: float | None = None,
                  size: int = PERIODIC_CROP) -> tuple[float, tuple, tuple]:
    """Measure how strongly an image repeats itself in two directions, and the lags.

    ``(score, v1, v2)``: how strongly ``image`` repeats itself in two directions,
    the normalised autocorrelation of its detail at its second period, a shift of 8
    to 40 pixels at least 30 degrees away from the best one (0 = nothing repeats, 1 =
    an exact two-dimensional period), and the two shifts.

    Computed on the central ``size x size`` crop, smoothed by a Gaussian of width
    ``1 + 10 sigma / range`` (``range``: ``data_range`` or the crop's span) so that
    the noise does not mask the repeat, less its 15x15 local mean (the detail).
    Shifts under 8 px are left out (every smooth image correlates with itself
    there), and so are the shifts along the best one: a long edge or a set of
    parallel lines matches itself along its own direction, a texture of bricks or
    a weave repeats in two.  ``v1`` and ``v2`` are the two shifts ``(dy, dx)`` (the
    periods, for :func:`search_mask`).  Images under 48 px on a side score 0 (with
    zero shifts).
    """
    from scipy.fft import irfft2, rfft2
    from scipy.ndimage import gaussian_filter, uniform_filter

    a = central_crop(np.asarray(image, dtype=np.float64), size)
    h, w = a.shape
    none = (0.0, (0, 0), (0, 0))
    if h < 48 or w < 48:
        return none
    span = float(data_range) if data_range is not None else float(np.ptp(a))
    # a channel varying by a billionth of the noise holds rounding only (the chrominance
    # of a grey image stored as colour): nothing repeats, and its span would blow the
    # blur below up
    if not (span > 0.0 and float(np.ptp(a)) > 1e-9 * float(sigma)):
        return none
    x = gaussian_filter(a, 1.0 + 10.0 * float(sigma) / span)
    x = x - uniform_filter(x, 15)
    x -= x.mean()
    ac = irfft2(np.abs(rfft2(x, s=(2 * h, 2 * w))) ** 2, s=(2 * h, 2 * w))
    if not ac[0, 0] > 0.0:
        return none
    L = min(40, h // 3, w // 3)
    dy = np.arange(-L, L + 1)[:, None].astype(np.float64)
    dx = np.arange(0, L + 1)[None, :].astype(np.float64)
    c = ac[np.arange(-L, L + 1)[:, None] % (2 * h), np.arange(0, L + 1)[None, :]] / ac[0, 0]
    r2 = dy * dy + dx * dx
    c = np.where(r2 >= 64.0, c, -np.inf)
    i, j = np.unravel_index(np.argmax(c), c.shape)
    cos = (dy * dy[i, 0] + dx * dx[0, j]) / np.sqrt(np.maximum(r2 * r2[i, j], 1e-300))
    c = np.where(np.abs(cos) < math.cos(math.radians(30.0)), c, -np.inf)
    k, q = np.unravel_index(np.argmax(c), c.shape)
    return (float(max(c[k, q], 0.0)), (int(dy[i, 0]), int(dx[0, j])),
            (int(dy[k, 0]), int(dx[0, q])))


def periodic_lags_channels(chans: Sequence[np.ndarray], sigma: float,
                           data_range: float | None = None,
                           size: int = PERIODIC_CROP) -> tuple[float, tuple, tuple]:
    """Run :func:`periodic_lags` on the channel that repeats most.

    :func:`periodic_lags` of the channel that repeats most (the first of equals),
    every channel measured against ``data_range`` (channel 0's span): a colour texture
    can repeat in its chrominance more than in its luminance."""
    return max((periodic_lags(c, sigma, data_range, size) for c in chans),
               key=lambda r: r[0])


def texture_contrast(chans: Sequence[np.ndarray], sigma: float,
                     size: int = PERIODIC_CROP) -> float:
    """Return the signal's std over the channels on their central crop.

    The signal's std over the channels on their central ``size x size`` crop:
    ``sqrt(max(sum_c var(c) - C sigma^2, 0))``, the norm over the channels, as the
    matching's SSD sums them."""
    crops = [central_crop(np.asarray(c, dtype=np.float64), size) for c in chans]
    v = float(sum(np.var(c) for c in crops)) - len(crops) * float(sigma) ** 2
    return math.sqrt(max(v, 0.0))


def texture_noise(noise_fraction: float | None, sigma: float, contrast: float,
                  C: int = 1) -> float:
    """Return the noise fraction a regular texture's stage-1 window follows.

    The noise fraction a regular texture's stage-1 window follows
    (:func:`.geometry.texture_match_extra`): the larger of the noise against one
    channel's span (``noise_fraction`` is against the first channel's, the luminance
    of colour, which spans ``sqrt(C)`` times an input channel) and the noise against
    :data:`TEXTURE_SPAN` times the texture's own ``contrast`` (0: the widest window)."""
    own = sigma / (TEXTURE_SPAN * contrast) if contrast > 0.0 else math.inf
    if noise_fraction is None:
        return own
    return max(float(noise_fraction * math.sqrt(C)), own)


def noise_fraction(options: GroupedOptions, sigma: float, C: int = 1) -> float | None:
    """Return the noise fraction calibrated options resolve their windows at.

    The noise fraction calibrated ``options`` resolve their windows at
    (:func:`.geometry.resolve_geometry`): ``sigma`` against the data range, or a regular
    texture's :func:`texture_noise`."""
    o = options
    nf = None if o.data_range is None else sigma / float(o.data_range)
    return texture_noise(nf, sigma, o.contrast, C) if o.periodic else nf


def periodic_trial(chans: Sequence[np.ndarray], sigma: float, options: GroupedOptions,
                   denoise: Denoiser) -> dict:
    """Tell by a trial on the central crop which settings denoise better.

    Which settings denoise ``chans`` better, by a trial on their central crop:
    ``{"photo": mse, "texture": mse}``, unbiased estimates of each setting's mean
    squared error at noise ``sigma sqrt(1 + a^2)`` (``a``: :data:`TRIAL_ALPHA`).

    Recorrupted-to-recorrupted (Pang et al., CVPR 2021): with ``z`` white noise of
    std ``sigma``, ``y1 = y + a z`` and ``y2 = y - z / a`` carry independent noise, so
    for a denoiser ``f`` told ``sigma sqrt(1 + a^2)``, ``E ||f(y1) - y2||^2 / N = E
    ||f(y1) - x||^2 / N + sigma^2 (1 + 1 / a^2)``: the settings are compared on the
    image itself, with no clean copy.  ``denoise`` runs each setting (``options`` with
    ``periodic`` set); ``z`` is drawn from :data:`TRIAL_SEED`, so the choice repeats.
    """
    a = TRIAL_ALPHA
    crop = [np.ascontiguousarray(central_crop(np.asarray(c, dtype=np.float64))) for c in chans]
    rng = np.random.default_rng(TRIAL_SEED)
    z = [rng.standard_normal(c.shape) * float(sigma) for c in crop]
    y1 = [c + a * zz for c, zz in zip(crop, z)]
    y2 = [c - zz / a for c, zz in zip(crop, z)]
    s1 = float(sigma) * math.sqrt(1.0 + a * a)
    out = {}
    for name, per in (("photo", False), ("texture", True)):
        res = denoise(y1, s1, options.replace(periodic=per))
        err = float(np.mean([np.mean((r - b) ** 2) for r, b in zip(res, y2)]))
        out[name] = err - float(sigma) ** 2 * (1.0 + 1.0 / (a * a))
    return out


@dataclass(frozen=True)
class Calibration:
    """What :func:`calibrate` decided, and the measures it decided from."""

    #: the options with ``periodic``, ``lags``, ``contrast`` and ``detail`` decided
    #: (each as given when it was given)
    options: GroupedOptions
    #: the periodicity score of :func:`periodic_lags_channels`
    score: float
    #: the trial's error estimates (:func:`periodic_trial`), None when none ran
    trial: dict | None


def calibrate(chans: Sequence[np.ndarray], sigma: float, options: GroupedOptions,
              denoise: Denoiser) -> Calibration:
    """Decide the image-dependent options of an image's channels at noise ``sigma``.

    Decide the image-dependent options of ``chans`` (2-D arrays of one size) at
    noise ``sigma``, keeping those given in ``options``.

    ``periodic``: the score above :data:`PERIODIC`, or in :data:`BORDERLINE` the
    better of the trial's two settings (``denoise`` runs them); ``lags``: a texture's
    two periods (``()`` when nothing repeats); ``contrast``: a texture's
    :func:`texture_contrast`; ``detail``: channel 0's :func:`coarse_detail` (not for a
    texture, nor when ``match_size1`` is given).
    """
    o = options
    score, v1, v2 = periodic_lags_channels(chans, sigma, o.data_range)
    periodic, trial = o.periodic, None
    if periodic is None:
        periodic = score > PERIODIC
        if BORDERLINE[0] < score <= BORDERLINE[1]:
            trial = periodic_trial(chans, sigma, o, denoise)
            periodic = trial["texture"] < trial["photo"]
    periodic = bool(periodic)
    lags = o.lags
    if not periodic:
        lags = ()
    elif lags is None:
        lags = (v1, v2) if score > 0.0 else ()
    contrast = o.contrast
    if periodic and contrast is None:
        contrast = texture_contrast(chans, sigma)
    detail = o.detail
    if detail is None and not periodic and o.match_size1 is None:
        detail = coarse_detail(chans[0], sigma)
    return Calibration(o.replace(periodic=periodic, lags=lags, contrast=contrast, detail=detail),
                       score, trial)
