"""The steps both previews share (:mod:`.image_preview` of an image's region,
:mod:`.stack_preview` of a stack page's), with no Qt: the parameters the noise
measurement depends on, the strength applied to a kept measurement, the stabiliser a
measurement describes, the tile whose core is the region, and the outcome's noise,
pixels and metrics.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from ..core.tiles import Tile
from ..core.vst import GeneralizedAnscombe
from ..params import DenoiseParams
from .jobs import JobItem, PreviewOutcome, compute_metrics

__all__ = ["measurement_params", "with_strength", "stabiliser_of", "box_tile", "outcome_noise",
           "finish_preview"]


def measurement_params(params: DenoiseParams) -> DenoiseParams:
    """The parameters the grouped method's measurement of an image depends on (the
    preparation's: noise model and level, added noise and its seed), at strength 1."""
    return DenoiseParams(method=params.method, patch_size=params.patch_size,
                         noise_model=params.noise_model, noise_sigma=params.noise_sigma,
                         poisson_gain=params.poisson_gain, add_noise=params.add_noise,
                         seed=params.seed)


def with_strength(img, params: DenoiseParams):
    """A copy of an ``ImageResult`` measured at strength 1 with ``params``' strength
    applied as the preparation applies it, when it has noise to remove (its stats a copy:
    a sequence's decisions write into them)."""
    if not img.error and not img.outputs:
        return replace(img, noise_sigma=img.noise_sigma * params.strength, stats=dict(img.stats))
    return replace(img, stats=dict(img.stats))


def stabiliser_of(img):
    """The Poisson-Gaussian stabiliser an ``ImageResult``'s stats describe, or None."""
    nm = img.stats.get("noise_model")
    return GeneralizedAnscombe(np.asarray(nm["gain"]), np.asarray(nm["sigma"])) if nm else None


def box_tile(shape: tuple, box: tuple, halo: int, align: int):
    """The tile whose core covers ``box`` (y0, y1, x0, x1) of an image of ``shape``,
    grown to the ``align`` grid, with ``halo`` (rounded up to it) around it."""
    halo = -(-halo // align) * align
    h, w = shape[:2]
    y0, y1, x0, x1 = (int(v) for v in box)
    y0, x0 = max(0, y0 // align * align), max(0, x0 // align * align)
    y1, x1 = min(h, -(-y1 // align) * align), min(w, -(-x1 // align) * align)
    if y1 <= y0 or x1 <= x0:
        raise ValueError("the preview region lies outside the image; move it onto the image")
    return Tile(y0, y1, x0, x1, max(0, y0 - halo), min(h, y1 + halo), max(0, x0 - halo),
                min(w, x1 + halo))


def outcome_noise(out: PreviewOutcome, img, params: DenoiseParams, noisy: np.ndarray) -> None:
    """The noise of the previewed image (an ``ImageResult`` of its preparation) in ``out``."""
    out.noise_sigma, out.noise_estimated = img.noise_sigma, img.noise_estimated
    out.noise_model = img.stats.get("noise_model")
    out.noise = img.stats.get("noise")
    out.note = img.stats.get("note")
    if params.add_noise:
        out.noisy = noisy


def finish_preview(out: PreviewOutcome, item: JobItem, noisy: np.ndarray, tile, outs: dict,
                    t: float) -> PreviewOutcome:
    """The core's pixels per rank and their metrics (against the reference, or the input
    when noise was added) into ``out``."""
    out.box = (tile.y0, tile.y1, tile.x0, tile.x1)
    clean = item.reference if item.reference is not None else (
        item.array if out.params.add_noise else None)
    crop = clean[tile.core] if clean is not None and np.shape(clean) == noisy.shape else None
    out.noisy_metrics = compute_metrics(noisy[tile.core], crop, noisy.dtype, False) if crop is not None \
        else {"noise_sigma": out.noise_sigma}
    for r, arr in outs.items():
        out.outputs[r] = arr
        out.metrics[r] = compute_metrics(arr, crop, noisy.dtype, False)
    out.seconds = time.perf_counter() - t
    return out
