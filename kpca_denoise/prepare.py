"""Every item of a set in working form: its values and shape checked, noise added if
asked, its noise measured (or its Poisson-Gaussian stabiliser built and checked), and
an item without noise to remove returned unchanged.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from .core.cfa import Mosaic, PlaneStabiliser, joint_noise_std
from .core.grouped.geometry import PATCH_SIZE as GROUPED_PATCH_SIZE
from .core.nlf import COARSE_RATIO, SIGNAL_DEPENDENT_RATIO, coarse_sigma, estimate_noise_model
from .core.noise import estimate_poisson_gaussian, estimate_sigma_image, estimate_sigma_pca
from .core.progress import report
from .core.vst import GeneralizedAnscombe
from .evaluation import noise_model_text, noisy_like
from .params import DenoiseParams
from .results import ImageResult, RunContext, result_keys
from .working import cast_like, channels, colour_part, luminance, luminance_bounds
from .tiling import GLOBAL_PATCH_SIZE


#: an estimated noise std below this fraction of the value range means "no noise":
#: the image is returned unchanged (a flat or synthetic image), with a note
NO_NOISE_FRACTION = 1e-4


@dataclass
class PreparedItem:
    """One item of the set in working form, with noise to remove.

    ``data`` is an image's noisy pixels in the input's dtype (tiles are converted one
    at a time) or a patch set's samples as rows of float64; a patch set's outputs take
    the shape and dtype of its ``source``, the input as given."""

    kind: str  # "image" or "patchset"
    data: np.ndarray
    result: ImageResult
    source: np.ndarray | None = None
    channels: int = 0  # an image's colour channels
    vst: GeneralizedAnscombe | None = None  # a 'poisson-gaussian' image's stabiliser
    flat: bool = False  # one value per channel (every sample alike): nothing to remove
    mosaic: Mosaic | None = None  # a camera mosaic: ``data`` holds its four CFA planes

    @property
    def is_patchset(self) -> bool:
        return self.kind == "patchset"


def prepare_items(run: RunContext, images: Sequence, results: list[ImageResult],
                   patch_sets: list, first_index: int) -> list[PreparedItem]:
    """The items with noise to remove; the others get their error, or their input back
    with a note."""
    n_items = len(results)
    items = []
    report(run.clock, "noise", 0, n_items)
    for i, img in enumerate(images):
        item = prepare_item(run.params, img, results[i], patch_sets[i],
                             seed=run.params.seed + first_index + i)
        if item is not None:
            items.append(item)
        report(run.clock, "noise", i + 1, n_items)
    return items


def prepare_item(params: DenoiseParams, image: np.ndarray, res: ImageResult,
                  is_patchset: bool, seed: int) -> PreparedItem | None:
    """One item read into working form, noise added (``params.add_noise``, from ``seed``)
    and measured; None when it failed (``res.error``) or has no noise to remove."""
    try:
        if isinstance(image, Mosaic):
            return prepare_mosaic(params, image, res, seed)
        a = check_image(image, res.name)
        check_item_shape(a, res.name, is_patchset, params)
        if params.add_noise:
            # the noisy input is what the source type can hold (rounded and clipped
            # for integer images): the file a user would have, and the one written
            # next to the results
            noisy = noisy_like(a, params.add_noise, seed)
        else:
            noisy = a.astype(np.float64) if is_patchset else a
        res.noisy = cast_like(noisy, a)
        item = _measure_patchset(params, a, noisy, res) if is_patchset else \
            measure_image(params, res)
        res.noise_estimated = params.noise_sigma is None or (
            is_patchset and params.noise_model == "poisson-gaussian")
        return _with_noise(params, a, item)
    except (ValueError, TypeError) as exc:
        msg = str(exc)
        res.error = msg if msg.startswith(res.name) else f"{res.name}: {msg}"
        return None


#: the largest pixel magnitude taken: its square and the sums of squares of a
#: patch stay finite in float64
MAX_MAGNITUDE = 1e150


def check_image(image: np.ndarray, name: str) -> np.ndarray:
    if isinstance(image, (str, bytes, os.PathLike)):
        raise ValueError(f"{name}: a file name, not an image; read it first "
                         "(kpca_denoise.io.read_item) or use the command line")
    a = np.asarray(image)
    if a.size == 0:
        raise ValueError(f"{name}: the image is empty")
    if a.dtype == np.bool_ or not (np.issubdtype(a.dtype, np.integer)
                                   or np.issubdtype(a.dtype, np.floating)):
        raise ValueError(f"{name}: unsupported pixel type {a.dtype}; use integer or float pixels")
    if a.ndim == 3 and a.shape[0] in (1, 2, 3, 4) and a.shape[2] not in (1, 2, 3, 4):
        raise ValueError(
            f"{name}: shape {a.shape} looks channels-first (C, H, W); pass the image as "
            "(H, W, C), e.g. np.moveaxis(image, 0, -1)")
    if np.issubdtype(a.dtype, np.floating) and not np.all(np.isfinite(a)):
        raise ValueError(
            f"{name}: the image contains NaN or Inf pixels; replace them (e.g. np.nan_to_num) first"
        )
    if np.issubdtype(a.dtype, np.floating):
        big = float(np.max(np.abs(a)))
        if big > MAX_MAGNITUDE:  # squared distances and variances would overflow float64
            raise ValueError(
                f"{name}: pixel values up to {big:.3g} are too large to square in float64; "
                f"scale the image into a range such as 0..1 or 0..255 first")
    return a


def check_item_shape(a: np.ndarray, name: str, is_patchset: bool,
                      params: DenoiseParams) -> None:
    """Refuse a patch set that is not (N, h, w), an image that is not (H, W[, C]) or
    is smaller than one patch."""
    if is_patchset:
        if a.ndim != 3:
            raise ValueError(f"{name}: a patch set must have shape (N, h, w), got {a.shape}")
        return
    side = params.patch_size or (GLOBAL_PATCH_SIZE if params.method == "global"
                                 else GROUPED_PATCH_SIZE)
    if a.ndim not in (2, 3) or (a.ndim == 3 and a.shape[2] not in (1, 2, 3, 4)):
        raise ValueError(f"{name}: expected a grayscale (H, W) or colour (H, W, 3|4) "
                         f"image, got shape {a.shape}")
    h, w = a.shape[:2]
    if (h - side + 1) * (w - side + 1) < 2 or min(h, w) < side:  # two patches at least
        fits = [q for q in range(min(h, w), 1, -1) if (h - q + 1) * (w - q + 1) >= 2]
        fix = (f"use a patch size of {fits[0]} or less" if fits
               else "an image needs at least 2x3 pixels")
        what = (f"is smaller than the {side}x{side} patch" if min(h, w) < side
                else f"holds fewer than two {side}x{side} patches")
        raise ValueError(f"{name}: image {w}x{h} {what}; {fix}")


def _measure_patchset(params: DenoiseParams, a: np.ndarray, noisy: np.ndarray,
                      res: ImageResult) -> PreparedItem:
    """A patch set's samples as rows and their noise level (``res.noise_sigma``)."""
    S = np.asarray(noisy, dtype=np.float64).reshape(a.shape[0], -1)
    # samples are not stabilised: a given sigma is the Gaussian model's only
    given = params.noise_sigma if params.noise_model != "poisson-gaussian" else None
    flat = bool(S.min() == S.max())  # one value: nothing to remove
    sigma = 0.0 if flat else given if given is not None else estimate_sigma_pca(S)
    res.noise_sigma = float(sigma)
    return PreparedItem("patchset", S, res, source=a, flat=flat)


def measure_image(params: DenoiseParams, res: ImageResult) -> PreparedItem:
    """An image's noise level (``res.noise_sigma``; 1 after the stabiliser of the
    Poisson-Gaussian model, whose gain and sigma go to ``res.stats``)."""
    x = res.noisy  # pixels stay in the input's dtype: tiles are converted one at a time
    flat = is_flat(x)
    sigma, vst = measure_noise(x, params, res.stats, flat=flat)
    res.noise_sigma = float(sigma)
    return PreparedItem("image", x, res, channels=channels(x), vst=vst, flat=flat)


def measure_noise(x, params: DenoiseParams, stats: dict, *, flat: bool, lum=None, stub=None,
                  lo: float | None = None) -> tuple[float, GeneralizedAnscombe | None]:
    """The noise decision for one image, made in this one place for every path.

    Parameters
    ----------
    x : ndarray or dask.array.Array, shape (M, N[, C])
        The image in its own dtype (a Dask array is read only where sampled, and
        whole when a stabiliser is built).
    params : DenoiseParams
        ``noise_model``, ``noise_sigma``, ``poisson_gain`` decide what is measured.
    stats : dict
        Receives what was found: ``noise`` (the estimated model), ``noise_model``
        (a stabiliser's gain and sigma), ``hint``.
    flat : bool
        Every channel holds one value: nothing to measure (level 0).
    lum, stub, lo
        For a lazy ``x``: its luminance, an array of its dtype and extreme values, its
        no-noise level (:func:`estimated_noise`).

    Returns
    -------
    sigma : float
        The level the denoiser is told before the strength (1 after a stabiliser).
    vst : GeneralizedAnscombe or None
        The Poisson-Gaussian stabiliser, given or chosen, else None.
    """
    if flat:
        return 0.0, None  # one value per channel: nothing to stabilise or remove
    if params.noise_model != "poisson-gaussian":
        if params.noise_sigma is not None:
            return float(params.noise_sigma), None
        return estimated_noise(x, params, stats, lum=lum, stub=stub, lo=lo)
    x = np.asarray(x)
    vst = stabiliser_for(x, params)
    _check_counts(x, vst)
    _check_given_noise(x, vst, params)
    stats["noise_model"] = dict(model=params.noise_model, gain=np.ravel(vst.gain).tolist(),
                                sigma=np.ravel(vst.sigma).tolist())
    # both parts estimated: does the fitted line itself grow over the image's
    # brightness as the level function's "grows with the signal" asks?
    if params.poisson_gain is None and params.noise_sigma is None and \
            _growth(vst, *_brightness_range(x)) < SIGNAL_DEPENDENT_RATIO:
        stats["hint"] = FLAT_NOISE_HINT
    return 1.0, vst  # after the variance-stabilising transform


#: what a run says when the Gaussian model's noise grows with the signal
SIGNAL_DEPENDENT_HINT = ("the noise grows with the signal: try --noise-model poisson-gaussian "
                         "(noise_model='poisson-gaussian')")


#: what a run says when it chose the Poisson-Gaussian model itself (white noise that
#: grows with the signal, under the default model with the level estimated)
CHOSEN_HINT = ("the noise grows with the signal: denoised as Poisson-Gaussian noise; give "
               "--noise-sigma to remove one Gaussian level instead")


#: the Poisson-Gaussian model is chosen when the fitted line's variance grows at least
#: this many times from the darkest level of the noise-level function to the brightest
#: (the line must agree with the level function's growth, :data:`~kpca_denoise.core.nlf.SIGNAL_DEPENDENT_RATIO`)
CHOSEN_GROWTH = 2.0


def _chosen_stabiliser(x: np.ndarray, params: DenoiseParams, stats: dict):
    """Under the Gaussian model with the level estimated, the Poisson-Gaussian
    stabiliser when the measured noise is white and grows with the signal (the hint's
    case) and the fitted gain and sigma agree (the variance grows by
    :data:`CHOSEN_GROWTH` over the level function's brightness levels) and the data
    are counts (:func:`_check_counts`); else None, the Gaussian level kept with the
    hint.  The stabiliser's gain and sigma go to ``stats['noise_model']``
    (``chosen``: true) and the one-line reason to ``stats['hint']``."""
    levels = stats["noise"]["levels"]
    vst = stabiliser_for(x, params)
    try:
        _check_counts(x, vst)
    except ValueError:
        return None
    if not _growth(vst, max(float(min(levels)), 0.0), float(max(levels))) >= CHOSEN_GROWTH:
        return None
    stats["noise_model"] = dict(model="poisson-gaussian", gain=np.ravel(vst.gain).tolist(),
                                sigma=np.ravel(vst.sigma).tolist(), chosen=True)
    stats["hint"] = CHOSEN_HINT
    return vst


def _growth(vst: GeneralizedAnscombe, lo, hi) -> float:
    """How many times the stabiliser's fitted noise variance ``gain * y + sigma^2``
    grows from brightness ``lo`` to ``hi`` (scalars or per channel), the channels' mean."""
    g, s = np.ravel(vst.gain), np.ravel(vst.sigma)
    lo, hi = np.maximum(np.asarray(lo, dtype=np.float64), 0.0), np.asarray(hi, dtype=np.float64)
    return float(np.mean((g * hi + s * s) / np.maximum(g * lo + s * s, 1e-300)))


def _brightness_range(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per colour channel, the 1/12 and 11/12 quantiles of an image's values (a strided
    sample of at most about a million): the mean brightness of the darkest and the
    brightest of the level function's six equal-count levels, roughly."""
    c = colour_part(np.asarray(x))
    c = c[..., None] if c.ndim == 2 else c
    step = max(1, int(np.sqrt(c.shape[0] * c.shape[1] / 1e6)))
    q = np.quantile(c[::step, ::step].reshape(-1, c.shape[2]).astype(np.float64),
                    [1 / 12, 11 / 12], axis=0)
    return q[0], q[1]


#: ... and when, under the Poisson-Gaussian model, it does not
FLAT_NOISE_HINT = ("the noise does not grow with the signal: the default model (--noise-model "
                   "auto) fits better")


def estimated_noise(x, params: DenoiseParams, stats: dict, *, lum=None, stub=None,
                    lo: float | None = None) -> tuple[float, GeneralizedAnscombe | None]:
    """Under the Gaussian model with the level estimated: ``(level, stabiliser)``, the
    level the denoiser is told (the finest-scale estimate, or the level of correlated
    (camera) noise, :func:`~kpca_denoise.core.nlf.estimate_noise_model`; 1 after a
    chosen stabiliser) and the Poisson-Gaussian stabiliser when the noise is white and
    grows with the signal (:func:`_chosen_stabiliser`), else None.  The model goes to
    ``stats['noise']``, the hint and the chosen stabiliser's parameters to
    ``stats['hint']`` and ``stats['noise_model']``.

    The one decision of the in-memory and the lazy (Dask) paths: ``x`` may be a Dask
    array, read only where sampled (and whole when a stabiliser is built); ``lum`` its
    luminance, ``stub`` an array of its dtype and extreme values, ``lo`` its no-noise
    level (:func:`_sigma_range`), each computed from ``x`` when not given."""
    kind = "auto" if params.noise_model in ("auto", "gaussian") else params.noise_model
    white, model = noise_model_of(x, lum=lum, stub=stub, lo=lo, kind=kind)
    if model is None:
        return white, None  # no noise: the image comes back unchanged
    stats["noise"] = model.to_dict()
    if noise_hint(model):
        stats["hint"] = noise_hint(model)
    if stats.get("hint") == SIGNAL_DEPENDENT_HINT and kind == "auto":
        vst = _chosen_stabiliser(np.asarray(x), params, stats)
        if vst is not None:
            return 1.0, vst
    return model.level, None


def noise_hint(model) -> str | None:
    """The hint a run gives under the Gaussian model: white noise that grows with the
    signal fits the Poisson-Gaussian model better.  Correlated (demosaiced) noise that
    grows with the signal gets none: the Poisson-Gaussian stabiliser assumes
    independent pixels and does worse there (docs/noise.md)."""
    return SIGNAL_DEPENDENT_HINT if model.signal_dependent and not model.correlated else None


def noise_model_of(x, *, lum=None, stub=None, lo: float | None = None, kind: str = "auto"):
    """Measure an image's ``(finest-scale sigma, NoiseModel)``.

    The model is None when the finest scale reads no noise (below ``lo``).  ``lum``,
    ``stub``, ``lo``: as :func:`estimated_noise`; ``kind``: 'auto', 'white' or
    'correlated' (:func:`~kpca_denoise.core.nlf.estimate_noise_model`)."""
    stub = x if stub is None else stub
    lum = luminance(x) if lum is None else lum
    lum_bounds = luminance_bounds(stub)
    white = estimate_sigma_image(lum, bounds=lum_bounds)
    lo = _sigma_range(x)[0] if lo is None else lo
    if white < lo:
        # a camera's JPEG can read no noise at the finest scale and carry it all at
        # coarser ones: a colour image is looked at there before it is called clean
        if (kind == "white" or channels(stub) < 3
                or coarse_sigma(lum, lum_bounds) < COARSE_RATIO * lo):
            return white, None
        white = lo  # the finest scale's reading, at least the no-noise level
    # the colour channels, sliced as they are (a Dask array stays lazy)
    c = x[..., :-1] if x.ndim == 3 and x.shape[2] in (2, 4) else x
    bounds = _value_bounds(colour_part(stub)) if np.issubdtype(stub.dtype, np.integer) else None
    return white, estimate_noise_model(c, white, luminance=lum, bounds=bounds, kind=kind,
                                       luminance_bounds=lum_bounds)


def noise_to_remove(sigma: float, lo: float, hi: float, dtype, *, given: bool,
                    flat: bool) -> bool:
    """Whether noise of std ``sigma`` is there to remove (at least ``lo``, the
    no-noise level); a ``given`` sigma outside ``lo .. hi`` (the accepted range of the
    image's values) is refused, naming the fix.  Shared by the in-memory and the Dask
    paths."""
    if given and not flat and not (lo <= sigma <= hi):
        raise ValueError(
            f"noise sigma {sigma:g} is outside the accepted range {lo:.3g} .. {hi:.3g} "
            f"for this {np.dtype(dtype)} image; give the noise std in the image's own units "
            "(e.g. 25 for 8-bit data, 0.1 for 0..1 floats), or omit it to estimate")
    return sigma > 0 and sigma >= lo


def _with_noise(params: DenoiseParams, a: np.ndarray, item: PreparedItem) -> PreparedItem | None:
    """The item if it has noise to remove; else None, its input kept as every output."""
    res, sigma = item.result, item.result.noise_sigma
    lo, hi = _sigma_range(a)
    if item.vst is not None:
        # the test below is where the denoiser works: in the stabilised domain,
        # whose noise std is 1 and whose span is the transformed value range
        lo = stabilised_span(a, item.vst) * NO_NOISE_FRACTION
    # a given sigma is the noise's own only under the Gaussian model (the
    # stabilised path checks its gain and sigma when it is built)
    given = params.noise_model != "poisson-gaussian" and params.noise_sigma is not None
    if noise_to_remove(sigma, lo, hi, a.dtype, given=given, flat=item.flat):
        # the level the denoiser is given: the measured (or given) one times the strength
        res.noise_sigma = float(sigma) * params.strength
        return item
    # a flat (or noise-free) image: nothing to remove, returned as it is
    for key in result_keys(params, item.is_patchset):
        res.outputs[key] = res.noisy.copy()
    if item.flat:
        note = ("every sample holds the same value" if item.is_patchset else
                "the image is flat (one value per channel)")
    elif item.vst is None:
        note = f"no noise measured (sigma {sigma:.3g})"
    else:
        noise = noise_model_text(res.stats["noise_model"], ascii=True)
        note = (f"the noise ({noise}) is under {NO_NOISE_FRACTION:g} of the value "
                "range after the variance-stabilising transform")
    res.stats["note"] = f"{res.name}: {note}; returned unchanged"
    return None


def prepare_mosaic(params: DenoiseParams, mosaic: Mosaic, res: ImageResult,
                   seed: int) -> PreparedItem:
    """A camera mosaic in working form: its four CFA planes (noise added if asked) and
    their stabiliser (:func:`mosaic_stabiliser`); ``res.noisy`` is the noisy mosaic, the
    stabiliser's parameters go to ``res.stats['noise_model']``."""
    if params.method != "grouped":
        raise ValueError("a camera mosaic is denoised with the grouped method; drop method "
                         f"{params.method!r}")
    check_image(mosaic.data, res.name)
    noisy = mosaic.data
    if params.add_noise:
        noisy = cast_like(noisy_like(noisy, params.add_noise, seed), noisy)
    res.noisy = noisy
    planes = mosaic.planes(noisy)
    check_item_shape(planes, res.name, False, params)
    vst = mosaic_stabiliser(planes, mosaic, params)
    res.stats["noise_model"] = dict(
        model="poisson-gaussian", cfa=mosaic.cfa, gain=np.ravel(vst.gain).tolist(),
        sigma=np.ravel(vst.sigma).tolist(), black=list(mosaic.black), white=mosaic.white)
    res.noise_estimated = params.poisson_gain is None or params.noise_sigma is None
    res.noise_sigma = params.strength  # after the stabiliser: std 1
    return PreparedItem("image", planes, res, channels=4, vst=vst, mosaic=mosaic)


#: a photosite this many robust noise stds (those of its 16x16 block of the plane) above
#: the median of its plane's 3x3 neighbours (or below it) is hot (dead), and left out of
#: the noise fit
HOT_SIGMAS = 12.0


def _local_spread(d: np.ndarray, side: int = 16) -> np.ndarray:
    """A robust std of ``d`` around each pixel: 1.4826 times the median of ``|d|`` over
    its ``side`` x ``side`` block (the last partial blocks take their neighbour's)."""
    H, W = d.shape
    if H < side or W < side:
        return np.full(d.shape, 1.4826 * float(np.median(np.abs(d))))
    hb, wb = H // side, W // side
    blocks = np.abs(d[:hb * side, :wb * side]).reshape(hb, side, wb, side)
    med = np.median(blocks.transpose(0, 2, 1, 3).reshape(hb, wb, -1), axis=-1)
    iy = np.minimum(np.arange(H) // side, hb - 1)
    ix = np.minimum(np.arange(W) // side, wb - 1)
    return 1.4826 * med[np.ix_(iy, ix)]


def mosaic_stabiliser(planes: np.ndarray, mosaic: Mosaic,
                      params: DenoiseParams) -> PlaneStabiliser:
    """The Poisson-Gaussian stabiliser of a mosaic's four CFA planes (H/2, W/2, 4).

    Per plane the gain and Gaussian sigma (``params.poisson_gain`` / ``noise_sigma``
    if given) are fitted on the plane less its black level
    (:func:`~kpca_denoise.core.noise.estimate_poisson_gaussian`), leaving out the clipped
    photosites (at the white level) and the hot and dead ones (:data:`HOT_SIGMAS`)
    with their neighbours.  Texture still raises those lines, so when neither part is
    given their level is set by the four stabilised planes together
    (:func:`~kpca_denoise.core.cfa.joint_noise_std`): each line is scaled (gain by
    ``s^2``, sigma by ``s``) until the planes read a std of 1, at most
    :data:`JOINT_ROUNDS` times.  The black level is the stabiliser's offset."""
    from scipy.ndimage import median_filter

    black = np.asarray(mosaic.black)
    gains, sigmas, outs = [], [], []
    for c in range(4):
        x = planes[..., c].astype(np.float64) - black[c]
        d = x - median_filter(x, size=3, mode="mirror")
        spread = _local_spread(d) + 1e-12
        out = (planes[..., c] >= mosaic.white) | (np.abs(d) > HOT_SIGMAS * spread)
        g, s = estimate_poisson_gaussian(x, gain=params.poisson_gain, sigma=params.noise_sigma,
                                         exclude=out if out.any() else None)
        gains.append(g)
        sigmas.append(s)
        outs.append(out)
    vst = PlaneStabiliser(np.array(gains), np.array(sigmas), offset=black, cfa=mosaic.cfa)
    if params.poisson_gain is None and params.noise_sigma is None:
        out = np.any(outs, axis=0)
        for _ in range(JOINT_ROUNDS):
            s = joint_noise_std(planes, out, transform=vst.forward)
            if not np.isfinite(s) or s <= 0 or abs(s - 1.0) < 0.02:
                break
            vst = replace(vst, gain=vst.gain * s * s, sigma=vst.sigma * s)
    return vst


#: at most this many rescalings of a mosaic's fitted lines by its planes' joint noise
JOINT_ROUNDS = 3


def stabiliser_for(image: np.ndarray, params: DenoiseParams):
    """The generalised Anscombe transform of a 'poisson-gaussian' image: gain and
    Gaussian sigma per colour channel, given or estimated."""
    x = colour_part(np.asarray(image))  # the estimator converts a band of rows at a time
    x = x[..., None] if x.ndim == 2 else x
    est = [estimate_poisson_gaussian(x[..., c], gain=params.poisson_gain,
                                     sigma=params.noise_sigma) for c in range(x.shape[2])]
    return GeneralizedAnscombe(np.array([e[0] for e in est]), np.array([e[1] for e in est]))


def is_flat(a: np.ndarray) -> bool:
    """Whether every colour channel of an image holds one value (alpha aside)."""
    x = colour_part(a)
    axes = (0, 1)
    return bool(np.all(np.min(x, axis=axes) == np.max(x, axis=axes)))


#: below 0, a Poisson-Gaussian image may reach this many times the noise std at a
#: signal of one photon (``sqrt(gain^2 + sigma^2)``: the estimated sigma alone can be
#: far too small where the Poisson part dominates) at its 0.1 % quantile (read noise
#: around a zero black level: -3.1 sigmas) ...
NEGATIVE_SIGMAS = 4.0


#: ... and have at most this fraction of its pixels below 0 (signal >= 0 plus
#: zero-mean noise leaves at most about half; an offset's sigma, which the fitted line
#: absorbs, can pass the first test)
NEGATIVE_SHARE = 0.6


def _check_counts(a: np.ndarray, vst: GeneralizedAnscombe) -> None:
    """Refuse an image whose negative values read noise alone cannot explain: the
    Poisson-Gaussian model has signal >= 0 (counts), and the inverse transform would
    clip such data to 0 (a black level subtracted too far, offset data)."""
    x = colour_part(a)
    if np.issubdtype(x.dtype, np.unsignedinteger):
        return
    x = x[..., None] if x.ndim == 2 else x
    sig = np.broadcast_to(np.hypot(np.asarray(vst.gain, dtype=np.float64),
                                   np.asarray(vst.sigma, dtype=np.float64)), (x.shape[2],))
    for c in range(x.shape[2]):
        mn = float(np.min(x[..., c]))
        if mn >= 0:
            continue
        # the 0.1 % quantile of about a million pixels (a strided sample: bounded memory)
        step = max(1, int(np.sqrt(x.shape[0] * x.shape[1] / 1e6)))
        sample = x[::step, ::step, c]
        q = float(np.quantile(sample, 0.001))
        share = np.count_nonzero(sample < 0) / sample.size
        why = (f"{100 * share:.0f} % of the pixels are below 0 (noise around a zero signal "
               f"leaves at most about half there)" if share > NEGATIVE_SHARE else
               f"negative values (down to {mn:.4g}, the lowest 0.1 % below {q:.4g}) that the "
               f"noise (std {sig[c]:.3g} at one photon's signal) cannot explain"
               if q < -NEGATIVE_SIGMAS * sig[c] else None)
        if why:
            raise ValueError(
                f"{why}; the Poisson-Gaussian model needs counts >= 0: add the black level "
                "back, or use the Gaussian noise model")


def _check_given_noise(a: np.ndarray, vst: GeneralizedAnscombe, params: DenoiseParams) -> None:
    """A given gain or sigma must not imply noise beyond the image's value range, as a
    given sigma must not under the Gaussian model (:func:`_sigma_range`); noise too
    small to remove is the stabilised domain's no-noise test's (:func:`stabilised_span`)."""
    if params.poisson_gain is None and params.noise_sigma is None:
        return
    lo, hi = _value_bounds(colour_part(a))
    span = hi - lo
    std = float(np.max(np.sqrt(np.asarray(vst.gain) * max(hi, 0.0)
                               + np.square(np.asarray(vst.sigma)))))
    if std > span:
        given = [f"{what} {v:g}" for what, v in (
            ("Poisson gain", params.poisson_gain), ("sigma", params.noise_sigma)) if v is not None]
        verb = "means" if len(given) == 1 else "mean"
        unit = ("the gain is in pixel units per photon" if params.poisson_gain is not None
                else "sigma is the Gaussian part in pixel units")
        raise ValueError(
            f"the given {' and '.join(given)} {verb} a noise std of {std:.3g} at the top of this "
            f"{a.dtype} image's values, more than their whole range {span:.3g}; {unit} (leave "
            "it out to estimate it)")


def _value_bounds(a: np.ndarray) -> tuple[float, float]:
    """The values an image can hold: its integer type's limits, or its data's for floats."""
    if np.issubdtype(a.dtype, np.integer):
        info = np.iinfo(a.dtype)
        return float(info.min), float(info.max)
    return (float(np.min(a)), float(np.max(a))) if a.size else (0.0, 0.0)


def value_range(a: np.ndarray) -> float:
    """The span of values an image can hold (:func:`_value_bounds`)."""
    lo, hi = _value_bounds(a)
    return hi - lo


def stabilised_span(a: np.ndarray, vst: GeneralizedAnscombe) -> float:
    """The span of values an image can hold (:func:`_value_bounds`, without a float
    image's alpha channel, as the stabiliser) after the variance-stabilising transform
    ``vst``, the widest over its channels."""
    ends = np.array(_value_bounds(colour_part(a)))  # a view
    f = vst.forward(np.repeat(ends[:, None], np.size(vst.gain), axis=1))
    return float(np.max(f[1] - f[0]))


def held_span(a: np.ndarray) -> float:
    """The span of the values an image holds, robustly: its 0.1 to 99.9 % quantiles (on
    at most about a million pixels, evenly strided), so that one hot pixel or fill
    value does not stand for the data."""
    x = np.asarray(a).reshape(-1)
    x = x[::max(1, x.size // 1_000_000)]
    if x.size == 0:
        return 0.0
    lo, hi = np.percentile(x.astype(np.float64), [0.1, 99.9])
    return float(hi - lo)


def _sigma_range(a: np.ndarray) -> tuple[float, float]:
    """The noise stds an image can carry: from :data:`NO_NOISE_FRACTION` of the span of
    the values it holds (robustly, :func:`held_span`: a 12-bit camera image in uint16
    with noise 4 was "no noise" against 65535, and one pixel of 1e30 in a float image
    made any noise "none") to the span of the values it can hold."""
    span = value_range(a)
    return min(span, held_span(a)) * NO_NOISE_FRACTION, span
