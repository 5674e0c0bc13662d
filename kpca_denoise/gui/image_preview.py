"""The window's preview of a region of one image, in the compute process, with no Qt:
the image's decisions (noise measured, texture and detail calibrated, the global model
fitted) made once and kept, then one tile of the tiled engine whose core is the region,
so that the preview is the full run's pixels there (:func:`run_preview`).  A page the
run denoises with its neighbours goes through :mod:`.stack_preview`.  ``docs/gui.md``.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from ..core.progress import check_cancel
from ..params import DenoiseParams
from ..pipeline import denoise_set, result_keys
from .compute import (_FIT_ERRORS, _MODELS, JobItem, PreviewOutcome, _keep_model,
                      compute_metrics, params_key, rank_sort_key)

__all__ = ["run_preview", "preview_tile", "prepare_preview"]


#: whole-image decisions of previews in this (worker) process, by (image key, parameters
#: without ranks): moving the region re-uses them, only the region is denoised again
_DECISIONS: dict = {}
#: the grouped method's noise measurement (``denoise_set(fit_only=True)``: the noise level,
#: the stabiliser, the added noise) by (image key, what it depends on): a new strength or
#: grouped knob only calibrates again
_MEASURED: dict = {}
_KEPT = 4  # each holds an image


def _keep(cache: dict, key, value, kept: int = _KEPT) -> None:
    cache.pop(key, None)
    cache[key] = value
    while len(cache) > kept:
        cache.pop(next(iter(cache)))


def _measurement_params(params: DenoiseParams) -> DenoiseParams:
    """The parameters the grouped method's measurement of an image depends on (the
    preparation's: noise model and level, added noise and its seed), at strength 1."""
    return DenoiseParams(method=params.method, patch_size=params.patch_size,
                         noise_model=params.noise_model, noise_sigma=params.noise_sigma,
                         poisson_gain=params.poisson_gain, add_noise=params.add_noise,
                         seed=params.seed)


def _with_strength(img, params: DenoiseParams):
    """A copy of an ``ImageResult`` measured at strength 1 with ``params``' strength
    applied as the preparation applies it, when it has noise to remove (its stats a copy:
    a sequence's decisions write into them)."""
    if not img.error and not img.outputs:
        return replace(img, noise_sigma=img.noise_sigma * params.strength, stats=dict(img.stats))
    return replace(img, stats=dict(img.stats))


def _stabiliser_of(img):
    """The Poisson-Gaussian stabiliser an ``ImageResult``'s stats describe, or None."""
    from ..core.vst import GeneralizedAnscombe

    nm = img.stats.get("noise_model")
    return GeneralizedAnscombe(np.asarray(nm["gain"]), np.asarray(nm["sigma"])) if nm else None


def _measure(item: JobItem, params: DenoiseParams, progress, cancel):
    """The whole image's ``ImageResult`` after the preparation (``denoise_set`` up to the
    fit); for the grouped method cached without the strength and the grouped knobs, the
    strength applied here as the preparation applies it."""
    if params.method != "grouped":
        model_key = (item.key, params_key(params))
        res = denoise_set([item.array], params, names=[item.name], progress=progress,
                          cancel=cancel, model=_MODELS.get(model_key), fit_only=True)
        _keep_model(model_key, res.model)
        return res.images[0], res.model
    mp = _measurement_params(params)
    mkey = (item.key, params_key(mp))
    img = _MEASURED.get(mkey)
    if img is None:
        img = denoise_set([item.array], mp, names=[item.name], progress=progress, cancel=cancel,
                          fit_only=True).images[0]
        _keep(_MEASURED, mkey, img)
    return _with_strength(img, params), None


def _decisions_key(item: JobItem, params: DenoiseParams, sequence=()) -> tuple:
    """The key of an image's decisions in :data:`_DECISIONS`; a page the run denoises
    alone within its ``sequence`` (its JobItems) has its own: its added noise is the
    sequence's (seeded by its place in it)."""
    key = (item.key, params_key(params))
    return key + (tuple(m.key for m in sequence),) if len(sequence) > 1 else key


def _decisions(item: JobItem, params: DenoiseParams, progress, cancel, measured=None,
               sequence=()):
    """``(noisy, sigma, vst, calibrated params, model, result)`` of the whole image, made
    as the full run makes them (``denoise_set`` up to the fit, then the grouped method's
    calibration on the whole image, :func:`kpca_denoise.tiling.resolve_periodic`).
    ``measured``: the image's ``ImageResult`` from the preparation of its ``sequence``
    (a page the run denoises alone in its sequence's run)."""
    from ..tiling import resolve_periodic

    pkey = params_key(params)
    model_key = (item.key, pkey)
    key = _decisions_key(item, params, sequence)
    found = _DECISIONS.get(key)
    model = _MODELS.get(model_key)
    top = max(result_keys(params, False), key=rank_sort_key)
    if found is not None and (params.method != "global" or (
            model is not None and model.eigenvalues_.size >= top)):
        return found[:4] + (model,) + found[5:]
    img, model = (measured, None) if measured is not None else _measure(item, params, progress,
                                                                       cancel)
    check_cancel(cancel)  # a run asked for during the measurement (one step) stops here
    vst = _stabiliser_of(img)
    calibrated = params
    if not img.error and not img.outputs and params.method == "grouped":
        calibrated = resolve_periodic(img.noisy, img.noise_sigma, params, vst, cancel)
    found = (img.noisy, img.noise_sigma, vst, calibrated, model, img)
    _keep(_DECISIONS, key, found)
    return found


def prepare_preview(item: JobItem, params: DenoiseParams, cancel=None, sequence=()) -> bool:
    """Make the whole-image decisions of a preview of ``item`` ahead of it (the window
    asks when an image is selected); True when they were made now, False when kept.
    ``sequence``: the JobItems of ``item``'s sequence (its pages, ``item`` among them):
    the sequence's decisions, and the page's own where the run denoises it alone."""
    from .stack_preview import _sequence_decisions, decisions_kept

    measured, made = None, False
    if len(sequence) > 1:
        made = not decisions_kept(sequence, params)
        found = _sequence_decisions(list(sequence), params, None, cancel)
        k = [m.key for m in sequence].index(item.key)
        run = found.run_of(k)[0]
        if run is not None and run.items:  # the page goes through the stack path
            return made
        measured = found.results[k]
    if _decisions_key(item, params, sequence) in _DECISIONS:
        return made
    _decisions(item, params, None, cancel, measured, sequence)
    return True


def _box_tile(shape: tuple, box: tuple, halo: int, align: int):
    """The tile whose core covers ``box`` (y0, y1, x0, x1) of an image of ``shape``,
    grown to the ``align`` grid, with ``halo`` (rounded up to it) around it."""
    from ..core.tiles import Tile

    halo = -(-halo // align) * align
    h, w = shape[:2]
    y0, y1, x0, x1 = (int(v) for v in box)
    y0, x0 = max(0, y0 // align * align), max(0, x0 // align * align)
    y1, x1 = min(h, -(-y1 // align) * align), min(w, -(-x1 // align) * align)
    if y1 <= y0 or x1 <= x0:
        raise ValueError("the preview region lies outside the image; move it onto the image")
    return Tile(y0, y1, x0, x1, max(0, y0 - halo), min(h, y1 + halo), max(0, x0 - halo),
                min(w, x1 + halo))


def preview_tile(image: np.ndarray, params: DenoiseParams, box: tuple, sigma: float,
                 vst=None):
    """The tile whose core covers ``box`` (y0, y1, x0, x1) of ``image``, grown to the
    method's reference grid, with the halo a core pixel depends on (the grouped method's
    at this noise level ``sigma``, ``params`` calibrated), so its core is the whole
    image's result there."""
    from ..tiling import _global_geometry, grouped_halo

    halo, align = (grouped_halo(image, sigma, params, vst) if params.method == "grouped"
                   else _global_geometry(params)[:2])
    return _box_tile(image.shape, box, halo, align)


def run_preview(item: JobItem, params: DenoiseParams, box: tuple, progress, cancel,
                sequence=()) -> PreviewOutcome:
    """Denoise the region ``box`` of one image at every rank of ``params``: the whole
    image's decisions (noise level, stabiliser, the global fit, the grouped calibration)
    once, then one tile of the tiled engine (:func:`kpca_denoise.tiling.denoise_tile`)
    whose core is the region: the full run's pixels there, in a fraction of its time.

    ``sequence``: the JobItems of the sequence the run denoises ``item`` in (a stack's
    pages, ``item`` among them).  Where the run links ``item`` to its neighbours, the
    region goes through the stack path (:mod:`.stack_preview`); elsewhere it is
    denoised alone, as the run denoises it."""
    from .stack_preview import _preview_stack_page, _sequence_decisions, decisions_kept

    t = time.perf_counter()
    pkey = params_key(params)
    out = PreviewOutcome(key=item.key, params_key=pkey, params=params)
    measured, before = None, True
    try:
        if len(sequence) > 1:
            before = decisions_kept(sequence, params)
            found = _sequence_decisions(list(sequence), params, progress, cancel)
            k = [m.key for m in sequence].index(item.key)
            run, j = found.run_of(k)
            measured = found.results[k]
            if run is not None and run.items:
                out.decided_before, out.sequence = before, dict(measured.stats["sequence"])
                return _preview_stack_page(item, run, j, params, box, progress, cancel, out, t)
            if not (measured.error or measured.outputs):  # denoised alone, and why
                out.sequence = dict(measured.stats.get("sequence") or dict(
                    decision="pages", choice=params.sequence, page=k, pages=len(sequence),
                    reason="no neighbouring page of its size to denoise it with"))
        out.decided_before = before and _decisions_key(item, params, sequence) in _DECISIONS
        noisy, sigma, vst, calibrated, model, img = _decisions(item, params, progress, cancel,
                                                               measured, sequence)
    except _FIT_ERRORS as exc:
        out.error = f"{item.name}: {exc}"
        return out
    if img.error:
        out.error = img.error
        return out
    _outcome_noise(out, img, params, noisy)
    calibrated = calibrated.replace(ranks=tuple(params.ranks))  # kept with a former job's
    try:
        tile = preview_tile(noisy, calibrated, box, sigma, vst)
    except ValueError as exc:
        out.error = str(exc)
        return out
    keys = result_keys(params, False)
    if img.outputs:  # no noise to remove: every rank is the input
        outs = {r: noisy[tile.core] for r in keys}
    else:
        from ..tiling import denoise_tile, merge_grouped_stats

        outs, stats = denoise_tile(noisy[tile.region], tile, sigma, calibrated, model=model,
                                   ranks=keys if params.method == "global" else (), vst=vst,
                                   progress=progress, cancel=cancel)
        if params.method == "grouped":
            out.group_spectra = merge_grouped_stats([stats])  # as a run's, without the pools
    if params.method == "global" and model is not None:
        out.spectrum = np.asarray(model.eigenvalues_, dtype=np.float64)
        if None in params.ranks:  # shown as 'auto', as the full run shows it
            outs[None] = outs[result_keys(params.replace(ranks=(None,)), False)[0]]
        outs = {r: outs[r] for r in params.ranks}
    return _finish_preview(out, item, noisy, tile, outs, t)


def _outcome_noise(out: PreviewOutcome, img, params: DenoiseParams, noisy: np.ndarray) -> None:
    """The noise of the previewed image (an ``ImageResult`` of its preparation) in ``out``."""
    out.noise_sigma, out.noise_estimated = img.noise_sigma, img.noise_estimated
    out.noise_model = img.stats.get("noise_model")
    out.noise = img.stats.get("noise")
    out.note = img.stats.get("note")
    if params.add_noise:
        out.noisy = noisy


def _finish_preview(out: PreviewOutcome, item: JobItem, noisy: np.ndarray, tile, outs: dict,
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
