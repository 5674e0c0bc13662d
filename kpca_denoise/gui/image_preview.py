"""The window's preview of a region of one image, in the compute process, with no Qt:
the image's decisions (noise measured, texture and detail calibrated, the global model
fitted) made once and kept, then one tile of the tiled engine whose core is the region,
so that the preview is the full run's pixels there (:func:`run_preview`).  A page the
run denoises with its neighbours goes through :mod:`.stack_preview`.  ``docs/gui.md``.
"""

from __future__ import annotations

import time

import numpy as np

from ..core.progress import check_cancel
from ..params import DenoiseParams
from ..pipeline import denoise_set, result_keys
from ..tiling import (denoise_tile, global_geometry, grouped_halo, merge_grouped_stats,
                      resolve_periodic)
from .jobs import (FIT_ERRORS, JobItem, PreviewOutcome, cached_model, keep, keep_model, params_key,
                   rank_sort_key)
from .preview_parts import (box_tile, finish_preview, measurement_params, outcome_noise,
                            stabiliser_of, with_strength)
from .stack_preview import decisions_kept, preview_stack_page, sequence_decisions

__all__ = ["run_preview", "preview_tile", "prepare_preview", "image_decisions", "DECISIONS", "MEASURED"]


#: whole-image decisions of previews in this (worker) process, by (image key, parameters
#: without ranks): moving the region re-uses them, only the region is denoised again
DECISIONS: dict = {}
#: the grouped method's noise measurement (``denoise_set(fit_only=True)``: the noise level,
#: the stabiliser, the added noise) by (image key, what it depends on): a new strength or
#: grouped knob only calibrates again
MEASURED: dict = {}
_KEPT = 4  # each holds an image


def _measure(item: JobItem, params: DenoiseParams, progress, cancel):
    """The whole image's ``ImageResult`` after the preparation (``denoise_set`` up to the
    fit); for the grouped method cached without the strength and the grouped knobs, the
    strength applied here as the preparation applies it."""
    if params.method != "grouped":
        model_key = (item.key, params_key(params))
        res = denoise_set([item.array], params, names=[item.name], progress=progress,
                          cancel=cancel, model=cached_model(model_key), fit_only=True)
        keep_model(model_key, res.model)
        return res.images[0], res.model
    mp = measurement_params(params)
    mkey = (item.key, params_key(mp))
    img = MEASURED.get(mkey)
    if img is None:
        img = denoise_set([item.array], mp, names=[item.name], progress=progress, cancel=cancel,
                          fit_only=True).images[0]
        keep(MEASURED, mkey, img, _KEPT)
    return with_strength(img, params), None


def _decisions_key(item: JobItem, params: DenoiseParams, sequence=()) -> tuple:
    """The key of an image's decisions in :data:`DECISIONS`; a page the run denoises
    alone within its ``sequence`` (its JobItems) has its own: its added noise is the
    sequence's (seeded by its place in it)."""
    key = (item.key, params_key(params))
    return key + (tuple(m.key for m in sequence),) if len(sequence) > 1 else key


def image_decisions(item: JobItem, params: DenoiseParams, progress, cancel, measured=None,
               sequence=()):
    """``(noisy, sigma, vst, calibrated params, model, result)`` of the whole image, made
    as the full run makes them (``denoise_set`` up to the fit, then the grouped method's
    calibration on the whole image, :func:`kpca_denoise.tiling.resolve_periodic`).
    ``measured``: the image's ``ImageResult`` from the preparation of its ``sequence``
    (a page the run denoises alone in its sequence's run)."""
    pkey = params_key(params)
    model_key = (item.key, pkey)
    key = _decisions_key(item, params, sequence)
    found = DECISIONS.get(key)
    model = cached_model(model_key)
    top = max(result_keys(params, False), key=rank_sort_key)
    if found is not None and (params.method != "global" or (
            model is not None and model.eigenvalues_.size >= top)):
        return found[:4] + (model,) + found[5:]
    img, model = (measured, None) if measured is not None else _measure(item, params, progress,
                                                                       cancel)
    check_cancel(cancel)  # a run asked for during the measurement (one step) stops here
    vst = stabiliser_of(img)
    calibrated = params
    if not img.error and not img.outputs and params.method == "grouped":
        calibrated = resolve_periodic(img.noisy, img.noise_sigma, params, vst, cancel)
    found = (img.noisy, img.noise_sigma, vst, calibrated, model, img)
    keep(DECISIONS, key, found, _KEPT)
    return found


def prepare_preview(item: JobItem, params: DenoiseParams, cancel=None, sequence=()) -> bool:
    """Make the whole-image decisions of a preview of ``item`` ahead of it (the window
    asks when an image is selected); True when they were made now, False when kept.
    ``sequence``: the JobItems of ``item``'s sequence (its pages, ``item`` among them):
    the sequence's decisions, and the page's own where the run denoises it alone."""
    measured, made = None, False
    if len(sequence) > 1:
        made = not decisions_kept(sequence, params)
        found = sequence_decisions(list(sequence), params, None, cancel)
        k = [m.key for m in sequence].index(item.key)
        run = found.run_of(k)[0]
        if run is not None and run.items:  # the page goes through the stack path
            return made
        measured = found.results[k]
    if _decisions_key(item, params, sequence) in DECISIONS:
        return made
    image_decisions(item, params, None, cancel, measured, sequence)
    return True


def preview_tile(image: np.ndarray, params: DenoiseParams, box: tuple, sigma: float,
                 vst=None):
    """The tile whose core covers ``box`` (y0, y1, x0, x1) of ``image``, grown to the
    method's reference grid, with the halo a core pixel depends on (the grouped method's
    at this noise level ``sigma``, ``params`` calibrated), so its core is the whole
    image's result there."""
    halo, align = (grouped_halo(image, sigma, params, vst) if params.method == "grouped"
                   else global_geometry(params)[:2])
    return box_tile(image.shape, box, halo, align)


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
    t = time.perf_counter()
    pkey = params_key(params)
    out = PreviewOutcome(key=item.key, params_key=pkey, params=params)
    measured, before = None, True
    try:
        if len(sequence) > 1:
            before = decisions_kept(sequence, params)
            found = sequence_decisions(list(sequence), params, progress, cancel)
            k = [m.key for m in sequence].index(item.key)
            run, j = found.run_of(k)
            measured = found.results[k]
            if run is not None and run.items:
                out.decided_before, out.sequence = before, dict(measured.stats["sequence"])
                return preview_stack_page(item, run, j, params, box, progress, cancel, out, t)
            if not (measured.error or measured.outputs):  # denoised alone, and why
                out.sequence = dict(measured.stats.get("sequence") or dict(
                    decision="pages", choice=params.sequence, page=k, pages=len(sequence),
                    reason="no neighbouring page of its size to denoise it with"))
        out.decided_before = before and _decisions_key(item, params, sequence) in DECISIONS
        noisy, sigma, vst, calibrated, model, img = image_decisions(item, params, progress, cancel,
                                                               measured, sequence)
    except FIT_ERRORS as exc:
        out.error = f"{item.name}: {exc}"
        return out
    if img.error:
        out.error = img.error
        return out
    outcome_noise(out, img, params, noisy)
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
    return finish_preview(out, item, noisy, tile, outs, t)
