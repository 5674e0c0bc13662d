"""The denoising recipe: the only orchestrator every front end calls.

``denoise_set`` takes a set of images (or patch sets), fits what the method
needs, denoises every item at every requested rank, and returns a
:class:`SetResult` with the outputs, the eigen-spectrum, the resolved
parameters and per-stage timings.  The one-image and one-stack front doors
(:func:`~kpca_denoise.api.denoise_image`, :func:`~kpca_denoise.api.denoise_stack`) call it.  Its stages are in :mod:`.prepare` and :mod:`.global_method`
(the grouped method's loop is here); the evaluation helpers (:mod:`.evaluation`)
and the result types (:mod:`.results`) are importable from here too.  Nothing here
reads or writes files (see ``io``) or knows about Qt.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any, Sequence

import numpy as np

from .core.progress import Cancelled, ProgressCallback, check_cancel, report
from .estimator import KernelPCA
from .global_method import global_groups, run_global
from .params import DenoiseParams, as_params
from .prepare import PreparedItem, prepare_items
from .sequence import run_sequences
from .results import ImageResult, SetResult, RunContext, StageClock, result_keys
from .tiling import denoise_tiled, GLOBAL_PATCH_SIZE

# re-exported: names this module has always offered, now defined by the stages' modules
from .evaluation import (add_noise, evaluate, noise_model_text, noisy_like,  # noqa: F401
                         remaining_noise, sample_mosaic)
from .global_method import GLOBAL_PREIMAGE_ITERATIONS, GlobalFit, GlobalGroup  # noqa: F401
from .prepare import NEGATIVE_SHARE, NEGATIVE_SIGMAS, NO_NOISE_FRACTION  # noqa: F401

__all__ = [
    "DenoiseParams",
    "ImageResult",
    "SetResult",
    "denoise_set",
    "add_noise",
    "evaluate",
    "GLOBAL_PATCH_SIZE",
    "result_keys",
    "PATCH_SET_DEFAULT_RANK",
]

#: a fixed rank for patch sets (digits): noisy digits, sigma 0.25: MSE 0.0213 /
#: 0.0198 / 0.0188 at 32 / 64 / 128 components (benchmarks/gamma_rule.py).
#: When the ranks say ``None`` the rank comes from the noise level instead
#: (:meth:`KernelPCA.noise_rank`), out of at most half the training samples.
PATCH_SET_DEFAULT_RANK = 128


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
        ``patch_sets[i]`` is true, (N, h, w) patch sets whose items are samples, or
        camera mosaics (:class:`~kpca_denoise.core.cfa.Mosaic`, ``docs/raw.md``).
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
    SetResult
        ``images[i].outputs[rank]`` per item and rank, the eigen-spectrum, the
        resolved parameters and the timings.  An item that cannot be processed (too
        small, bad values) gets ``error`` set and the others are still denoised.

    Examples
    --------
    >>> import numpy as np
    >>> from kpca_denoise import DenoiseParams, denoise_set
    >>> rng = np.random.default_rng(0)
    >>> imgs = [np.clip(128 + rng.normal(0, 20, (48, 48)), 0, 255).astype(np.uint8)
    ...         for _ in range(2)]
    >>> res = denoise_set(imgs, DenoiseParams(profile="fast", ranks=(2, None), noise_sigma=20))
    >>> res.ranks, res.images[1].outputs[2].shape
    ((2, None), (48, 48))
    """
    params = as_params(params)
    images, names, patch_sets = _checked_items(images, names, patch_sets, first_index)
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be a function taking a ProgressEvent, or None; "
                        f"got {progress!r}")
    if cancel is not None and not (callable(cancel) or hasattr(cancel, "is_set")):
        raise TypeError(f"cancel must be a CancelToken, a function returning True to stop, "
                        f"or None; got {cancel!r}")
    if params.method == "grouped" and params.gamma is not None and not all(patch_sets):
        raise ValueError(
            f"gamma={params.gamma:g} applies to method 'global' and to patch sets; the grouped "
            "method sets its kernel width per group from the noise level (drop gamma, or use "
            "method 'global')")
    run = RunContext(params, StageClock(progress), cancel, tile_map, {"method": params.method})
    t0 = time.perf_counter()
    results = [ImageResult(index=first_index + i, name=name) for i, name in enumerate(names)]

    # 1. every item in working form, its noise added and measured
    items = prepare_items(run, images, results, patch_sets, first_index)
    check_cancel(cancel)
    # 2. global kernel PCA (method 'global', and patch sets under any method):
    #    one model per group of items whose samples have the same dimension
    groups = global_groups(params, items)
    models = {g.key: run_global(run, g, prior=model if len(groups) == 1 else None,
                                 given=(fitted_models or {}).get(g.key), fit_only=fit_only)
              for g in groups}
    model = models[groups[0].key] if groups else None
    eig = model.eigenvalues_.copy() if model is not None else np.zeros(0)
    ranks = groups[0].keys if groups else None
    # 3. the grouped method, image by image
    if params.method == "grouped" and not fit_only:
        # images of one size that form a sequence go through the stack path
        # (params.sequence, docs/stacks.md); the others run alone
        items, seq_spectra = run_sequences(run, items)
        eig_grouped = _run_grouped(run, items, seq_spectra)
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



def _checked_items(images, names, patch_sets, first_index: int) -> tuple[Sequence, list, list]:
    """The images, their names and their patch-set flags, one of each per item."""
    if isinstance(images, np.ndarray) and images.ndim in (2, 3) and patch_sets is None:
        raise ValueError(f"images must be a list of arrays, got one array of shape {images.shape}; "
                         "pass [image] (or use denoise_image)")
    if (isinstance(images, (str, bytes, os.PathLike, Mapping))
            or not hasattr(images, "__iter__") and not hasattr(images, "__len__")):
        raise TypeError(f"images must be a list of arrays, got {type(images).__name__}; "
                        "read files first (kpca_denoise.io.read_item)")
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


def _run_grouped(run: RunContext, items: list[PreparedItem], spectra: list | None = None) -> np.ndarray:
    """Denoise every image with the grouped method; returns the mean spectrum of its
    groups and of ``spectra`` (a failed image gets its error, and the others go on)."""
    spectra = list(spectra or [])
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
            if item.mosaic is not None:  # the four CFA planes back into the mosaic
                outs = {k2: item.mosaic.merge(o, like=res.noisy) for k2, o in outs.items()}
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
