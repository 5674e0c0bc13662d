"""The denoising recipe: the only orchestrator every front end calls.

``denoise_set`` takes a set of images (or patch sets), fits what the method
needs, denoises every item at every requested rank, and returns a
:class:`SetResult` with the outputs, the eigen-spectrum, the resolved
parameters and per-stage timings.  ``denoise_image`` is the one-image
convenience wrapper.  Nothing here reads or writes files (see ``io``) or
knows about Qt.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .core.grouped.geometry import PATCH_SIZE as GROUPED_PATCH_SIZE
from .core.kpca import WIDTH_SCALE_IMAGE_PATCHES, WIDTH_SCALE_SAMPLES
from .core.metrics import data_range_for, psnr, ssim
from .core.noise import estimate_poisson_gaussian, estimate_sigma_image, estimate_sigma_pca
from .core.patches import patch_positions
from .core.progress import Cancelled, ProgressCallback, ProgressEvent, check_cancel, report
from .core.vst import GeneralizedAnscombe
from .estimator import KernelPCA
from .params import DenoiseParams
from .tiling import (GLOBAL_PATCH_SIZE, _cast_like, channels, colour_part, denoise_tiled,
                     denoise_with_model, luminance, luminance_bounds, training_patches)

__all__ = [
    "DenoiseParams",
    "ImageResult",
    "SetResult",
    "denoise_set",
    "denoise_image",
    "add_noise",
    "evaluate",
    "GLOBAL_PATCH_SIZE",
    "result_keys",
    "PATCH_SET_DEFAULT_RANK",
]

#: the global method's rank for images when the ranks say None
GLOBAL_DEFAULT_RANK = 16
#: the global method's pre-image iteration cap when ``preimage_iterations`` is None
GLOBAL_PREIMAGE_ITERATIONS = 100
#: an estimated noise std below this fraction of the value range means "no noise":
#: the image is returned unchanged (a flat or synthetic image), with a note
NO_NOISE_FRACTION = 1e-4
#: a fixed rank for patch sets (digits): noisy digits, sigma 0.25: MSE 0.0213 /
#: 0.0198 / 0.0188 at 32 / 64 / 128 components (benchmarks/gamma_rule.py).
#: When the ranks say ``None`` the rank comes from the noise level instead
#: (:meth:`KernelPCA.noise_rank`), out of at most half the training samples.
PATCH_SET_DEFAULT_RANK = 128


@dataclass
class ImageResult:
    """One item of the set: its outputs per rank, or the error that stopped it."""

    index: int
    name: str
    outputs: dict = field(default_factory=dict)  # rank -> array, input's shape and dtype
    noisy: np.ndarray | None = None  # the input actually denoised (noise added if asked)
    noise_sigma: float = float("nan")  # pixel units
    noise_estimated: bool = False
    seconds: float = 0.0
    stats: dict = field(default_factory=dict)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class SetResult:
    params: DenoiseParams
    ranks: tuple
    images: list
    eigenvalues: np.ndarray
    resolved: dict
    timings: dict
    model: KernelPCA | None = None
    #: every fitted global model, by the key of its group of items (what
    #: ``denoise_set(..., fitted_models=...)`` takes back)
    models: dict = field(default_factory=dict)


# -- helpers -------------------------------------------------------------------


class _StageClock:
    """Wraps a progress callback and attributes wall time to stages."""

    def __init__(self, inner: ProgressCallback | None):
        self.inner = inner
        self.seconds: dict[str, float] = {}
        self._last = time.perf_counter()
        self._stage: str | None = None

    def __call__(self, ev: ProgressEvent) -> None:
        now = time.perf_counter()
        stage = self._stage if self._stage is not None else ev.stage
        self.seconds[stage] = self.seconds.get(stage, 0.0) + (now - self._last)
        self._last = now
        self._stage = ev.stage
        if self.inner is not None:
            self.inner(ev)

    def close(self) -> None:
        self(ProgressEvent("done", 0, 0))


def _check_image(image: np.ndarray, name: str) -> np.ndarray:
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
    return a


def add_noise(image: np.ndarray, sigma: float, seed: int = 0) -> np.ndarray:
    """The image plus white Gaussian noise of std ``sigma`` (pixel units), float64, unclipped."""
    rng = np.random.default_rng(seed)
    a = np.asarray(image, dtype=np.float64)
    return a + rng.normal(0.0, sigma, a.shape)


#: elements per band when noise is added to a big image (a few MB of float64)
_NOISE_BAND = 1 << 20


def noisy_like(image: np.ndarray, sigma: float, seed: int = 0) -> np.ndarray:
    """``add_noise`` in the image's own dtype (rounded and clipped for integers), built a
    band of rows at a time: the same values, without float64 copies of the whole image
    (the generator's stream does not depend on how the draws are split)."""
    a = np.asarray(image)
    if a.ndim == 0 or a.size == 0:
        return _cast_like(add_noise(a, sigma, seed), a)
    rng = np.random.default_rng(seed)
    out = np.empty(a.shape, a.dtype)
    rows = max(1, _NOISE_BAND // max(1, a[0].size))
    for y0 in range(0, a.shape[0], rows):
        band = a[y0:y0 + rows]
        out[y0:y0 + rows] = _cast_like(band.astype(np.float64) + rng.normal(0.0, sigma, band.shape), a)
    return out


def evaluate(reference: np.ndarray, estimate: np.ndarray, dtype=None,
             patchset: bool = False) -> dict:
    """PSNR (dB) and SSIM of ``estimate`` against a clean ``reference``; a patch set's
    (N, h, w) SSIM is that of its samples side by side (:func:`sample_mosaic`), as the
    window shows them (it read (N, h, w) as an image of N rows and w channels).  Both
    must be real, finite and of one shape (NaN gave NaN, complex lost its imaginary
    part, an empty image divided by zero)."""
    for what, a in (("reference", reference), ("estimate", estimate)):
        a = np.asarray(a)
        if a.dtype.kind not in "uif" or a.size == 0:
            raise ValueError(f"the {what} must be a non-empty array of real numbers, got "
                             f"{a.dtype} of shape {a.shape}")
        if a.dtype.kind == "f" and not np.isfinite(a).all():
            raise ValueError(f"the {what} contains NaN or Inf; metrics need finite pixels")
    if np.shape(reference) != np.shape(estimate):
        raise ValueError(f"the reference is {np.shape(reference)} and the estimate "
                         f"{np.shape(estimate)}; metrics compare arrays of one shape")
    if patchset and np.ndim(reference) != 3:
        raise ValueError(f"a patch set is (N, h, w), got shape {np.shape(reference)}")
    dtype = np.asarray(reference).dtype if dtype is None else dtype
    rng = data_range_for(dtype, reference)
    s = ssim(sample_mosaic(reference), sample_mosaic(estimate), rng) if patchset else \
        ssim(reference, estimate, rng)
    return {"psnr": psnr(reference, estimate, rng), "ssim": s}


def sample_mosaic(a: np.ndarray, gap: int = 0, fill: float = 0.0,
                  max_samples: int | None = None) -> np.ndarray:
    """The samples of a patch set (N, h, w) (the first ``max_samples``) side by side in
    rows of ``ceil(sqrt(N))``, ``gap`` pixels of ``fill`` between them and after the
    last: the canvas its metrics are measured on (gap-free) and the window draws."""
    a = np.asarray(a)
    n = a.shape[0] if max_samples is None else min(a.shape[0], max_samples)
    h, w = a.shape[1:3]
    cols = int(np.ceil(np.sqrt(n)))
    rows = int(np.ceil(n / cols))
    out = np.full((rows * (h + gap) - gap, cols * (w + gap) - gap), fill, dtype=np.float64)
    for i in range(n):
        r, c = divmod(i, cols)
        out[r * (h + gap):r * (h + gap) + h, c * (w + gap):c * (w + gap) + w] = a[i]
    return out


def _stabiliser(image: np.ndarray, params: DenoiseParams):
    """The generalised Anscombe transform of a 'poisson-gaussian' image: gain and
    Gaussian sigma per colour channel, given or estimated."""
    x = colour_part(np.asarray(image))  # the estimator converts a band of rows at a time
    x = x[..., None] if x.ndim == 2 else x
    est = [estimate_poisson_gaussian(x[..., c], gain=params.poisson_gain,
                                     sigma=params.noise_sigma) for c in range(x.shape[2])]
    return GeneralizedAnscombe(np.array([e[0] for e in est]), np.array([e[1] for e in est]))


def _flat(a: np.ndarray) -> bool:
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
    small to remove is the stabilised domain's no-noise test's (:func:`_stabilised_span`)."""
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


def noise_model_text(model: dict, *, ascii: bool = False) -> str:
    """'gain 64.2 · σ 331' (``ascii``: 'gain 64.2, sigma 331', for a console of any
    encoding) for the ``noise_model`` an image's stats report under the
    Poisson-Gaussian model (per colour channel, separated by '/')."""
    def join(vals) -> str:
        return " / ".join(f"{float(v):.3g}" for v in vals)
    sep, sigma = (", ", "sigma") if ascii else (" · ", "σ")
    return f"gain {join(model['gain'])}{sep}{sigma} {join(model['sigma'])}"


def remaining_noise(image: np.ndarray) -> float:
    """Estimated noise std left in an image (luminance for colour), pixel units.

    Bounded memory: the estimator reads a bounded sample of the image."""
    return estimate_sigma_image(luminance(image))


# -- methods ----------------------------------------------------------------------


def _value_bounds(a: np.ndarray) -> tuple[float, float]:
    """The values an image can hold: its integer type's limits, or its data's for floats."""
    if np.issubdtype(a.dtype, np.integer):
        info = np.iinfo(a.dtype)
        return float(info.min), float(info.max)
    return (float(np.min(a)), float(np.max(a))) if a.size else (0.0, 0.0)


def _value_range(a: np.ndarray) -> float:
    """The span of values an image can hold (:func:`_value_bounds`)."""
    lo, hi = _value_bounds(a)
    return hi - lo


def _stabilised_span(a: np.ndarray, vst: GeneralizedAnscombe) -> float:
    """The span of values an image can hold (:func:`_value_bounds`, without a float
    image's alpha channel, as the stabiliser) after the variance-stabilising transform
    ``vst``, the widest over its channels."""
    ends = np.array(_value_bounds(colour_part(a)))  # a view
    f = vst.forward(np.repeat(ends[:, None], np.size(vst.gain), axis=1))
    return float(np.max(f[1] - f[0]))


def _held_span(a: np.ndarray) -> float:
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
    the values it holds (robustly, :func:`_held_span`: a 12-bit camera image in uint16
    with noise 4 was "no noise" against 65535, and one pixel of 1e30 in a float image
    made any noise "none") to the span of the values it can hold."""
    span = _value_range(a)
    return min(span, _held_span(a)) * NO_NOISE_FRACTION, span


def result_keys(params: DenoiseParams, is_patchset: bool) -> tuple:
    """The result keys an item gets (rank, or None for the method's automatic choice)."""
    if is_patchset:
        return tuple(sorted({r for r in params.ranks if r is not None})) + (
            (None,) if None in params.ranks else ())
    if params.method == "global":
        return _global_ranks(params)
    return tuple(params.ranks)


def _global_ranks(params: DenoiseParams) -> tuple[int, ...]:
    """The global method's ranks for images, ascending; None is :data:`GLOBAL_DEFAULT_RANK`."""
    return tuple(sorted({GLOBAL_DEFAULT_RANK if r is None else int(r) for r in params.ranks}))


# -- the run's state ----------------------------------------------------------------


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

    @property
    def is_patchset(self) -> bool:
        return self.kind == "patchset"


@dataclass
class GlobalGroup:
    """The items one global kernel PCA serves (samples of one dimension) and how
    their training patches are cut."""

    key: tuple  # ("patchset", sample size) or ("image", channels): SetResult.models' keys
    items: list[PreparedItem]
    patch_size: int
    stride: int
    ranks: tuple[int, ...]  # the explicit ranks, ascending
    auto: bool  # patch sets: also the rank from the noise level, stored under None

    @property
    def is_patchset(self) -> bool:
        return self.key[0] == "patchset"

    @property
    def step(self) -> int:
        """Pixels between candidate training patches."""
        return max(1, self.stride // 2)

    @property
    def keys(self) -> tuple:
        """The result keys of the group's items."""
        return self.ranks + ((None,) if self.auto else ())

    def candidates(self, item: PreparedItem) -> int:
        """How many training samples an item offers."""
        if item.is_patchset:
            return item.data.shape[0]
        H, W = item.data.shape[:2]
        p, step = self.patch_size, self.step
        return len(patch_positions(H, p, step)) * len(patch_positions(W, p, step))


@dataclass
class GlobalFit:
    """A group's kernel PCA: fitted here, with the noise level and the number of
    components it was fitted at, or given back (``fitted_models``), which says both."""

    model: KernelPCA
    noise_sigma: float | None = None
    n_components: int | None = None

    def auto_rank(self) -> int:
        """The rank from the noise level, out of the components fitted."""
        sigma = self.model.noise_sigma if self.noise_sigma is None else self.noise_sigma
        k = self.model.alphas_.shape[1] if self.n_components is None else self.n_components
        return min(self.model.noise_rank(sigma), k)


@dataclass
class _Run:
    """What the stages of one :func:`denoise_set` call share."""

    params: DenoiseParams
    clock: _StageClock
    cancel: Any = None
    tile_map: Any = None
    resolved: dict = field(default_factory=dict)


# -- the recipe -----------------------------------------------------------------------


def denoise_set(
    images: Sequence[np.ndarray],
    params: DenoiseParams | None = None,
    *,
    names: Sequence[str] | None = None,
    patch_sets: Sequence[bool] | None = None,
    progress: ProgressCallback | None = None,
    cancel: Any = None,
    model: KernelPCA | None = None,
    first_index: int = 0,
    fit_only: bool = False,
    fitted_models: dict | None = None,
    tile_map: Any = None,
) -> SetResult:
    """Denoise a set of images or patch sets at several ranks.

    Parameters
    ----------
    images : arrays (H, W), (H, W, 3|4) of uint8/uint16/float, or, where
        ``patch_sets[i]`` is true, (N, h, w) patch sets whose items are samples.
    params : :class:`DenoiseParams` (validated here).
    names : labels for messages (default ``image 0``, ...).
    progress : receives ProgressEvent; stages 'noise', 'gram', 'eigensolver',
        'projection', 'preimage', 'reassembly', 'grouping', and 'image'
        (done = images finished).
    cancel : token; raises :class:`~kpca_denoise.core.progress.Cancelled`.
    model : the ``SetResult.model`` of an earlier call on the same items with
        the same parameters except the ranks.  The global kernel PCA is then
        not fitted again when the model has at least ``max(ranks)``
        components: any smaller rank is a prefix of its eigendecomposition.
    first_index : the position of ``images[0]`` in a larger set that is
        denoised a few items at a time (:mod:`kpca_denoise.executor`): item
        indices, default names and the seeds of added noise follow it.
    fit_only : fit the global models (``SetResult.models``) and stop: no item is
        denoised.
    fitted_models : ``SetResult.models`` of a ``fit_only`` call on the whole set:
        these models are used as they are (no training patches, no fit), so a
        part of the set gets the pixels the whole set would.
    tile_map : where an image's tiles run (see
        :func:`kpca_denoise.tiling.denoise_tiled`); None runs them here.

    Returns
    -------
    SetResult.  An item that cannot be processed (too small, bad values) gets
    ``error`` set and the others are still denoised.
    """
    params = _checked_params(params)
    images, names, patch_sets = _checked_items(images, names, patch_sets, first_index)
    if params.method == "grouped" and params.gamma is not None and not all(patch_sets):
        raise ValueError(
            f"gamma={params.gamma:g} applies to method 'global' and to patch sets; the grouped "
            "method sets its kernel width per group from the noise level (drop gamma, or use "
            "method 'global')")
    run = _Run(params, _StageClock(progress), cancel, tile_map, {"method": params.method})
    t0 = time.perf_counter()
    results = [ImageResult(index=first_index + i, name=name) for i, name in enumerate(names)]

    # 1. every item in working form, its noise added and measured
    items = _prepare_items(run, images, results, patch_sets, first_index)
    check_cancel(cancel)
    # 2. global kernel PCA (method 'global', and patch sets under any method):
    #    one model per group of items whose samples have the same dimension
    groups = _global_groups(params, items)
    models = {g.key: _run_global(run, g, prior=model if len(groups) == 1 else None,
                                 given=(fitted_models or {}).get(g.key), fit_only=fit_only)
              for g in groups}
    model = models[groups[0].key] if groups else None
    eig = model.eigenvalues_.copy() if model is not None else np.zeros(0)
    ranks = groups[0].keys if groups else None
    # 3. the grouped method, image by image
    if params.method == "grouped" and not fit_only:
        eig_grouped = _run_grouped(run, items)
        ranks = tuple(params.ranks) if ranks is None else ranks
        if eig.size == 0:
            eig = eig_grouped
    run.clock.close()
    timings = dict(run.clock.seconds)
    timings.pop("done", None)
    timings["total"] = time.perf_counter() - t0
    if ranks is None:  # nothing was fitted (flat or failed items): the keys they got
        ranks = result_keys(params, bool(patch_sets) and all(patch_sets))
    return SetResult(params=params, ranks=tuple(ranks or ()), images=results,
                     eigenvalues=eig, resolved=run.resolved, timings=timings, model=model,
                     models=models)


def _checked_params(params) -> DenoiseParams:
    """The parameters, from a DenoiseParams or a dict, validated (None: the defaults)."""
    if isinstance(params, dict):
        params = DenoiseParams.from_dict(params)
    elif params is not None and not isinstance(params, DenoiseParams):
        raise TypeError(f"params must be a DenoiseParams or a dict, got {type(params).__name__}")
    return (params or DenoiseParams()).validate()


def _checked_items(images, names, patch_sets, first_index: int) -> tuple[Sequence, list, list]:
    """The images, their names and their patch-set flags, one of each per item."""
    if isinstance(images, np.ndarray) and images.ndim in (2, 3) and patch_sets is None:
        raise ValueError(f"images must be a list of arrays, got one array of shape {images.shape}; "
                         "pass [image] (or use denoise_image)")
    if not hasattr(images, "__len__"):  # a generator: its images are needed twice
        images = list(images)
    n_items = len(images)
    if n_items == 0:
        raise ValueError("no images given; pass at least one image")
    names = (list(names) if names is not None
             else [f"image {first_index + i}" for i in range(n_items)])
    patch_sets = list(patch_sets) if patch_sets is not None else [False] * n_items
    for what, seq in (("names", names), ("patch_sets", patch_sets)):
        if len(seq) != n_items:
            raise ValueError(f"{what} has {len(seq)} entries for {n_items} images; give one per image")
    bad = next((v for v in patch_sets if not isinstance(v, (bool, np.bool_))), None)
    if bad is not None:  # a string such as "no" would count as true
        raise ValueError(f"patch_sets must hold True or False per image, got {bad!r}")
    return images, names, patch_sets


# -- 1. items in working form -----------------------------------------------------------


def _prepare_items(run: _Run, images: Sequence, results: list[ImageResult],
                   patch_sets: list, first_index: int) -> list[PreparedItem]:
    """The items with noise to remove; the others get their error, or their input back
    with a note."""
    n_items = len(results)
    items = []
    report(run.clock, "noise", 0, n_items)
    for i, img in enumerate(images):
        item = _prepare_item(run.params, img, results[i], patch_sets[i],
                             seed=run.params.seed + first_index + i)
        if item is not None:
            items.append(item)
        report(run.clock, "noise", i + 1, n_items)
    return items


def _prepare_item(params: DenoiseParams, image: np.ndarray, res: ImageResult,
                  is_patchset: bool, seed: int) -> PreparedItem | None:
    """One item read into working form, noise added (``params.add_noise``, from ``seed``)
    and measured; None when it failed (``res.error``) or has no noise to remove."""
    try:
        a = _check_image(image, res.name)
        _check_item_shape(a, res.name, is_patchset, params)
        if params.add_noise:
            # the noisy input is what the source type can hold (rounded and clipped
            # for integer images): the file a user would have, and the one written
            # next to the results
            noisy = noisy_like(a, params.add_noise, seed)
        else:
            noisy = a.astype(np.float64) if is_patchset else a
        res.noisy = _cast_like(noisy, a)
        item = _measure_patchset(params, a, noisy, res) if is_patchset else \
            _measure_image(params, res)
        res.noise_estimated = params.noise_sigma is None or (
            is_patchset and params.noise_model != "gaussian")
        return _with_noise(params, a, item)
    except (ValueError, TypeError) as exc:
        msg = str(exc)
        res.error = msg if msg.startswith(res.name) else f"{res.name}: {msg}"
        return None


def _check_item_shape(a: np.ndarray, name: str, is_patchset: bool,
                      params: DenoiseParams) -> None:
    """Refuse a patch set that is not (N, h, w), an image that is not (H, W[, C]) or
    is smaller than one patch."""
    if is_patchset:
        if a.ndim != 3:
            raise ValueError(f"{name}: a patch set must have shape (N, h, w), got {a.shape}")
        return
    side = params.patch_size or (GLOBAL_PATCH_SIZE if params.method == "global"
                                 else GROUPED_PATCH_SIZE)
    if a.ndim not in (2, 3):
        raise ValueError(f"{name}: expected a grayscale (H, W) or colour (H, W, 3|4) "
                         f"image, got shape {a.shape}")
    if min(a.shape[:2]) < side:
        raise ValueError(
            f"{name}: image {a.shape[1]}x{a.shape[0]} is smaller than the "
            f"{side}x{side} patch; use a smaller patch size"
        )


def _measure_patchset(params: DenoiseParams, a: np.ndarray, noisy: np.ndarray,
                      res: ImageResult) -> PreparedItem:
    """A patch set's samples as rows and their noise level (``res.noise_sigma``)."""
    S = np.asarray(noisy, dtype=np.float64).reshape(a.shape[0], -1)
    # samples are not stabilised: a given sigma is the Gaussian model's only
    given = params.noise_sigma if params.noise_model == "gaussian" else None
    flat = bool(S.min() == S.max())  # one value: nothing to remove
    sigma = 0.0 if flat else given if given is not None else estimate_sigma_pca(S)
    res.noise_sigma = float(sigma)
    return PreparedItem("patchset", S, res, source=a, flat=flat)


def _measure_image(params: DenoiseParams, res: ImageResult) -> PreparedItem:
    """An image's noise level (``res.noise_sigma``; 1 after the stabiliser of the
    Poisson-Gaussian model, whose gain and sigma go to ``res.stats``)."""
    x = res.noisy  # pixels stay in the input's dtype: tiles are converted one at a time
    vst = None
    flat = _flat(x)
    if flat:
        sigma = 0.0  # one value per channel: nothing to stabilise or remove
    elif params.noise_model == "gaussian":
        sigma = (params.noise_sigma if params.noise_sigma is not None
                 else estimate_sigma_image(luminance(x), bounds=luminance_bounds(x)))
    else:
        vst = _stabiliser(x, params)
        _check_counts(x, vst)
        _check_given_noise(x, vst, params)
        sigma = 1.0  # after the variance-stabilising transform
        res.stats["noise_model"] = dict(model=params.noise_model, gain=np.ravel(vst.gain).tolist(),
                                        sigma=np.ravel(vst.sigma).tolist())
    res.noise_sigma = float(sigma)
    return PreparedItem("image", x, res, channels=channels(x), vst=vst, flat=flat)


def _with_noise(params: DenoiseParams, a: np.ndarray, item: PreparedItem) -> PreparedItem | None:
    """The item if it has noise to remove; else None, its input kept as every output."""
    res, sigma = item.result, item.result.noise_sigma
    lo, hi = _sigma_range(a)
    if item.vst is not None:
        # the test below is where the denoiser works: in the stabilised domain,
        # whose noise std is 1 and whose span is the transformed value range
        lo = _stabilised_span(a, item.vst) * NO_NOISE_FRACTION
    # a given sigma is the noise's own only under the Gaussian model (the
    # stabilised path checks its gain and sigma when it is built)
    given = params.noise_model == "gaussian" and params.noise_sigma is not None
    if given and not item.flat and not (lo <= sigma <= hi):
        raise ValueError(
            f"noise sigma {sigma:g} is outside the accepted range {lo:.3g} .. {hi:.3g} "
            f"for this {a.dtype} image; give the noise std in the image's own units "
            "(e.g. 25 for 8-bit data, 0.1 for 0..1 floats), or omit it to estimate")
    if sigma > 0 and sigma >= lo:
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


# -- 2. global kernel PCA ---------------------------------------------------------------


def _global_groups(params: DenoiseParams, items: list[PreparedItem]) -> list[GlobalGroup]:
    """The items a global kernel PCA serves, by the dimension of their samples, the
    largest group first."""
    members: dict = {}
    for item in items:
        if item.is_patchset:
            members.setdefault(("patchset", item.data.shape[1]), []).append(item)
        elif params.method == "global":
            members.setdefault(("image", item.channels), []).append(item)
    p = params.patch_size or GLOBAL_PATCH_SIZE
    stride = params.stride or max(1, p // 2)
    groups = []
    for key in sorted(members, key=lambda k: -len(members[k])):
        # patch sets: None = the rank from the noise level, chosen after the fit
        auto = members[key][0].is_patchset and None in params.ranks
        ranks = (tuple(sorted({int(r) for r in params.ranks if r is not None})) if auto
                 else _global_ranks(params))
        groups.append(GlobalGroup(key, members[key], p, stride, ranks, auto))
    return groups


def _run_global(run: _Run, group: GlobalGroup, *, prior: KernelPCA | None = None,
                given: KernelPCA | None = None, fit_only: bool = False) -> KernelPCA:
    """Fit the group's kernel PCA (reusing ``prior`` when it can, or taking ``given``,
    fitted on the whole set) and, unless ``fit_only``, denoise its items with it."""
    if given is not None:
        fit = GlobalFit(given.set_params(progress=run.clock, cancel=run.cancel))
    else:
        fit = _fit_global(run, group, prior)
    auto_rank = None
    if group.auto:
        # the automatic result is keyed None ("auto"), as the grouped method's is
        auto_rank = fit.auto_rank()
        if given is None:
            run.resolved["models"][-1]["auto_rank"] = auto_rank
    if given is None and "gamma" not in run.resolved:
        run.resolved.update(run.resolved["models"][-1])
    if not fit_only:
        _denoise_group(run, group, fit.model, auto_rank)
    return fit.model


def _fit_global(run: _Run, group: GlobalGroup, prior: KernelPCA | None) -> GlobalFit:
    """The kernel PCA of a group's training patches, sampled from every item in
    proportion to the samples it offers; described in ``run.resolved['models']``."""
    params = run.params
    rng = np.random.default_rng(params.seed)
    counts = [group.candidates(item) for item in group.items]
    total = sum(counts)
    n_train = min(params.n_train, total)
    take = [max(1, round(n_train * n / total)) for n in counts]
    # only the sampled patches are built (bounded memory whatever the image size)
    train = np.concatenate([
        item.data[idx] if item.is_patchset
        else training_patches(item.data, group.patch_size, group.step, idx, item.vst)
        for item, n, t in zip(group.items, counts, take)
        for idx in (rng.choice(n, min(t, n), replace=False),)])
    ranks = group.ranks
    if ranks and max(ranks) > train.shape[0]:
        raise ValueError(
            f"rank {max(ranks)} is more than the {train.shape[0]} training samples; "
            "ask for smaller ranks or more training patches"
        )
    # the automatic rank is chosen among at most half the training samples
    fit_k = max(ranks + ((max(1, train.shape[0] // 2),) if group.auto else ()))
    n_landmarks = params.n_landmarks
    if n_landmarks is not None:
        # a set smaller than asked for: every training patch is a landmark (exact)
        n_landmarks = min(n_landmarks, train.shape[0])
        if n_landmarks < max(ranks, default=1):
            raise ValueError(
                f"n_landmarks={params.n_landmarks} is fewer than rank {max(ranks)}; ask for "
                f"at least {max(ranks)} landmarks or smaller ranks")
        fit_k = min(fit_k, n_landmarks)
    sigma = float(np.median([item.result.noise_sigma for item in group.items]))
    if params.gamma is not None:
        _check_gamma(params.gamma, train)
    reuse = (prior is not None and getattr(prior, "alphas_", None) is not None
             and prior.alphas_.shape[1] >= fit_k and prior.X_fit_.shape == train.shape
             and prior.kernel == params.kernel
             and getattr(prior, "n_landmarks_", None) == n_landmarks)
    if reuse:
        # one eigendecomposition serves every smaller rank: no refit
        model = prior.set_params(progress=run.clock, cancel=run.cancel)
        report(run.clock, "eigensolver", 1, 1, eigenvalues=model.eigenvalues_,
               message="reused the fitted model")
    else:
        model = KernelPCA(
            n_components=fit_k, kernel=params.kernel,
            gamma="noise" if params.gamma is None and params.kernel == "rbf" else params.gamma,
            noise_sigma=sigma, tol=1e-4, gram_dtype="float32",
            width_scale=WIDTH_SCALE_SAMPLES if group.is_patchset else WIDTH_SCALE_IMAGE_PATCHES,
            eigen_solver=params.eigen_solver, preimage_tol=params.preimage_tol,
            preimage_max_iter=params.preimage_iterations or GLOBAL_PREIMAGE_ITERATIONS,
            random_state=params.seed,
            progress=run.clock, cancel=run.cancel, n_landmarks=n_landmarks,
        )
        model.fit(train)
    run.resolved.setdefault("models", []).append(dict(
        items=[item.result.name for item in group.items],
        gamma=getattr(model, "gamma_", None), patch_size=group.patch_size, stride=group.stride,
        n_train=int(train.shape[0]), n_landmarks=n_landmarks,
        solver="reused" if reuse else model.solver_,
        noise_sigma=sigma, eigensolver_iterations=0 if reuse else model.n_iter_,
    ))
    return GlobalFit(model, sigma, fit_k)


def _check_gamma(gamma: float, X: np.ndarray) -> None:
    """Refuse a kernel width that makes the Gram matrix degenerate, before the fit."""
    rng = np.random.default_rng(0)
    idx = rng.integers(0, X.shape[0], size=(min(2000, 4 * X.shape[0]), 2))
    d2 = np.sum((X[idx[:, 0]] - X[idx[:, 1]]) ** 2, axis=1)
    d2 = d2[d2 > 0]
    med = float(np.median(d2)) if d2.size else 0.0
    if med == 0.0:
        return
    g = gamma * med
    if g > 50:
        raise ValueError(
            f"gamma={gamma:g} makes the kernel matrix the identity (gamma x median squared patch "
            f"distance = {g:.3g}, every patch unlike every other); use gamma about "
            f"{1 / med:.3g} or omit it for the automatic width")
    if g < 1e-9:
        raise ValueError(
            f"gamma={gamma:g} makes the kernel matrix constant (gamma x median squared patch "
            f"distance = {g:.3g}, every patch alike); use gamma about {1 / med:.3g} or omit it "
            "for the automatic width")


def _denoise_group(run: _Run, group: GlobalGroup, model: KernelPCA,
                   auto_rank: int | None = None) -> None:
    """Outputs per rank for every item of the group; the ``auto_rank`` result is stored
    under ``None``."""
    ranks = group.ranks
    keys = {r: [r] for r in ranks}
    if auto_rank is not None:
        keys.setdefault(auto_rank, []).append(None)
        ranks = tuple(sorted(keys))
    for k, item in enumerate(group.items):
        check_cancel(run.cancel)
        res = item.result
        t = time.perf_counter()
        if item.is_patchset:
            outs, stats = denoise_with_model(model, item.data, ranks, run.cancel)
            outs = {r: _cast_like(O.reshape(item.source.shape), item.source)
                    for r, O in outs.items()}
        else:
            outs, stats = denoise_tiled(item.data, res.noise_sigma, run.params, model=model,
                                        ranks=ranks, vst=item.vst, progress=run.clock,
                                        cancel=run.cancel, tile_map=run.tile_map)
            report(run.clock, "reassembly", 1, 1)
        for r, O in outs.items():
            for j, key in enumerate(keys[r]):
                res.outputs[key] = O if j == 0 else O.copy()
        res.stats["preimage"] = {key: v for r, v in stats.items() for key in keys[r]}
        res.seconds = time.perf_counter() - t
        report(run.clock, "image", k + 1, len(group.items))


# -- 3. the grouped method --------------------------------------------------------------


def _run_grouped(run: _Run, items: list[PreparedItem]) -> np.ndarray:
    """Denoise every image with the grouped method; returns the mean spectrum of its
    groups (a failed image gets its error, and the others go on)."""
    spectra = []
    todo = [item for item in items if not item.is_patchset]
    for k, item in enumerate(todo):
        res = item.result
        t = time.perf_counter()
        try:
            outs, stats_all = denoise_tiled(item.data, res.noise_sigma, run.params,
                                            vst=item.vst, progress=run.clock, cancel=run.cancel,
                                            tile_map=run.tile_map)
            spectra.extend(np.asarray(st["spectrum"]) for st in stats_all if "spectrum" in st)
            report(run.clock, "reassembly", 1, 1)
            res.outputs.update(outs)
            res.stats["grouped"] = stats_all
            run.resolved.setdefault("grouped", {k2: v for k2, v in stats_all[0].items()
                                                if k2 not in ("seconds", "spectrum", "tiles")})
        except Cancelled:
            raise
        except ValueError as exc:
            res.error = f"{res.name}: {exc}"
        res.seconds = time.perf_counter() - t
        # the image is through either way; a failed one says so (its error is reported
        # with the results)
        report(run.clock, "image", k + 1, len(todo), message="failed" if res.error else "")
    if not spectra:
        return np.zeros(0)
    L = min(s.size for s in spectra)
    return np.mean([s[:L] for s in spectra], axis=0)


def denoise_image(
    image: np.ndarray,
    *,
    noise_sigma: float | None = None,
    method: str = "grouped",
    patch_size: int | None = None,
    stride: int | None = None,
    n_components: int | None = None,
    gamma: float | None = None,
    n_train: int = 2000,
    n_landmarks: int | None = None,
    kernel: str = "rbf",
    preimage_iterations: int | None = None,
    random_state: int = 0,
    noise_model: str = "gaussian",
    poisson_gain: float | None = None,
    progress: ProgressCallback | None = None,
    cancel: Any = None,
) -> np.ndarray:
    """Denoise one image; returns an array of the same shape and dtype.

    Parameters
    ----------
    image : (H, W) or (H, W, 3|4) uint8, uint16 or float.
    noise_sigma : noise std in the units of the pixel values (25 means 25
        grey levels of a uint8 image); ``None`` estimates it.
    method : 'grouped' (default: non-local kernel PCA with shrinkage, two
        stages) or 'global' (one kernel PCA on patches of the image, Mika et al.).
    patch_size, stride : patch geometry; ``None`` lets the method choose.
    n_components : rank; ``None`` means the method's default (16 for
        'global'; shrinkage only, no cap, for 'grouped').
    gamma : RBF kernel parameter; ``None`` chooses it from the data and noise.
    n_train : training patches for 'global'.
    n_landmarks : ``None`` (exact) or the number of Nyström landmarks for
        'global', so that ``n_train`` can be far larger.
    kernel : 'rbf' or 'linear' (ablation).
    noise_model, poisson_gain : 'gaussian' (default) or 'poisson-gaussian' for
        signal-dependent (camera, microscope) noise of variance ``poisson_gain * signal
        + noise_sigma^2``; ``None`` estimates the gain (see :class:`DenoiseParams`).

    Raises
    ------
    ValueError naming the problem, e.g. an image smaller than a patch.

    Examples
    --------
    >>> import numpy as np
    >>> from kpca_denoise import denoise_image
    >>> rng = np.random.default_rng(0)
    >>> clean = np.tile(np.linspace(0, 255, 64), (64, 1)).astype(np.uint8)
    >>> noisy = np.clip(clean + rng.normal(0, 20, clean.shape), 0, 255).astype(np.uint8)
    >>> denoise_image(noisy, noise_sigma=20, method="global", n_components=8).shape
    (64, 64)
    """
    params = DenoiseParams(
        method=method, ranks=(n_components,) if (n_components is not None or method == "grouped")
        else (GLOBAL_DEFAULT_RANK,), patch_size=patch_size, stride=stride, n_train=n_train,
        n_landmarks=n_landmarks, gamma=gamma,
        noise_sigma=noise_sigma, kernel=kernel, preimage_iterations=preimage_iterations,
        seed=random_state, noise_model=noise_model, poisson_gain=poisson_gain,
    )
    res = denoise_set([image], params, progress=progress, cancel=cancel)
    item = res.images[0]
    if item.error:
        raise ValueError(item.error)
    return item.outputs[res.ranks[-1] if len(res.ranks) else None]
