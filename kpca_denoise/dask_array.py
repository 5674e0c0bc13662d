"""Lazy denoising of Dask arrays: :func:`denoise_dask` and :func:`required_halo`.

An image (or a stack of pages) held as a Dask array, of any chunking, is denoised
into a lazy Dask array of the same shape, dtype and chunks whose pixels are
:func:`kpca_denoise.denoise_image`'s on the whole image (for a stack,
:func:`kpca_denoise.denoise_stack`'s: its pages with their neighbours when they are one
scene, one task per spatial tile carrying every page; ``docs/stacks.md``).

How the result stays exact:

1. Whole-image decisions first, once, as the pipeline makes them for that image
   (:mod:`kpca_denoise.prepare`): the pixel checks, the noise level, the
   Poisson-Gaussian stabiliser, the global method's kernel PCA, and then the grouped
   method's calibration on the central crop (:func:`kpca_denoise.tiling.resolve_periodic`).
   These read the data now, when :func:`denoise_dask` is called.
2. The output is built from the tiled engine's own plan (:func:`kpca_denoise.tiling.plan`):
   one task per tile that runs :func:`kpca_denoise.tiling.denoise_tile` on the tile's
   region (core plus halo, read from the input's chunks) and returns its core.  The
   cores are aligned with the method's reference strides, which is what makes a
   tiled result equal the whole-image result, so the tiles follow the plan, not the
   input's chunks; the assembled cores are then rechunked to the input's chunks.

Memory while deciding (step 1), for the default method (grouped, Gaussian noise):
bounded whatever the image size: one pass over the data computes each channel's
minimum and maximum (the flat-image and NaN checks, the value range) and a strided
sample of at most about two million values (the robust span of the values), the
noise estimator reads about a million pixels in 256 x 256 blocks
(:func:`kpca_denoise.core.noise.estimate_sigma_image`), and the calibration the
central 256 x 256 crop.  The Poisson-Gaussian noise model (given, or chosen because the
measured noise is white and grows with the signal) and the global method
read each image (page) whole into memory, in its own dtype, for that step only:
the stabiliser's estimator and the training-patch sampler need the whole image.
"""

from __future__ import annotations

import copy
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import stack_tiling, tiling, working
from .core.grouped.calibrate import central_crop
from .core.progress import CancelToken, check_cancel, report
from .global_method import global_groups, run_global
from .params import DenoiseParams, as_params, call_params
from .prepare import (NO_NOISE_FRACTION, check_image, check_item_shape, is_flat, held_span,
                      prepare_item, stabilised_span, value_range, measure_noise,
                      noise_to_remove)
from .results import ImageResult, RunContext, StageClock, result_keys

__all__ = ["denoise_dask", "required_halo", "lazy_denoise", "LazyRun"]

#: elements per chunk of the row bands the strided value sample is read through
_SAMPLE_CHUNK = 1 << 21


@dataclass
class _Decision:
    """What one image's tiles share: decided once, before the tiles are made."""

    sigma: float
    params: DenoiseParams  # with the grouped method's calibration
    tiles: list
    keys: tuple  # the result keys (ranks) every tile computes
    vst: Any = None
    model: Any = None  # the global method's kernel PCA (progress and cancel removed)
    ranks: tuple = ()
    stats: dict = field(default_factory=dict)  # the noise stats the pipeline reports


def denoise_dask(array, params: DenoiseParams | dict | None = None, *, progress=None,
                 cancel: Any = None, **fields: Any):
    """Denoise a Dask array lazily; the computed result equals :func:`denoise_image`'s.

    Parameters
    ----------
    array : dask.array.Array, shape (M, N[, C]) or (P, M, N[, C])
        Any chunking: one image with C in 1..4 channels (grey, grey + alpha, RGB,
        RGBA, as :func:`~kpca_denoise.api.denoise_image` takes), or a stack of pages,
        denoised as :func:`~kpca_denoise.api.denoise_stack` would (``sequence``;
        'no': each page on its own).  A 3-D array whose last axis has at most 4
        entries is one image with channels.  Any other array (numpy, zarr, h5py) is
        wrapped with ``dask.array.asarray`` (dask's automatic chunks).
    params : DenoiseParams or dict, optional
        The parameters (default ``DenoiseParams()``).
    progress : callable, optional
        Receives a ``"tiles"`` event as each tile that runs in this process ends.
    cancel : CancelToken or callable, optional
        Checked before and after the whole-image decisions; the tiles run later, when
        the result is computed (use :func:`lazy_denoise` and
        :meth:`LazyRun.cancel` to stop them).
    **fields
        :class:`~kpca_denoise.params.DenoiseParams` fields replacing those of
        ``params`` (``noise_sigma``, ``profile``, ``strength``, ``method``, ``ranks``,
        ``tile_size``: the core side of the tiles, the tasks, which never changes the
        pixels).  The old names ``n_components`` and ``random_state`` still work,
        with a ``DeprecationWarning``.  With several ranks the last is returned.

    Returns
    -------
    dask.array.Array
        Lazy, of the input's shape, dtype and chunks.  The whole-image decisions
        (noise level, calibration, the global method's fit) are made now, reading the
        data (bounded memory, see ``docs/dask.md``); the tiles run when the result is
        computed, on whatever scheduler is in use.

    Raises
    ------
    ValueError
        Naming the problem and the fix (a bad shape, NaN pixels, an image smaller
        than a patch).
    """
    p = call_params(params, fields, caller="denoise_dask")
    a = _as_dask(array)
    check_cancel(cancel)
    run = lazy_denoise(a, p, progress=progress)
    check_cancel(cancel)
    if progress is None:
        run.close()  # no progress to report: the tiles run as plain tasks
    out = run.outputs[run.keys[-1]]
    return out if out is a else out.rechunk(a.chunks)


@dataclass
class LazyRun:
    """One lazy pass of :func:`lazy_denoise`: a lazy output per rank.

    One lazy pass of :func:`lazy_denoise`: a lazy output per result key (rank), all
    from the same tile tasks, and what was decided for them."""

    outputs: dict  # key -> lazy array of the input's shape and dtype, chunked by tile cores
    keys: tuple  # the result keys, in denoise_set's order
    noise_sigma: list  # per page (one for an image): the noise level; None when unchanged
    #: per page: the noise stats ImageResult.stats reports ('noise', 'hint', ...); a stack
    #: denoised as one: 'sequence', with 'neighbours_used' once every tile has run
    stats: list
    tiles: int  # tile tasks that compute them
    run_id: str = ""
    #: a stack's sequence decision (``docs/stacks.md``), None for an image
    sequence: dict | None = None
    _token: CancelToken = field(default_factory=CancelToken, repr=False)
    _client: Any = field(default=None, repr=False)  # the distributed client reporting tiles

    def cancel(self) -> None:
        """Stop the tiles of this pass that run in this process.

        Stop the tiles of this pass that run in this process (threads, sync): each
        raises :class:`~kpca_denoise.core.progress.Cancelled` at its next check."""
        self._token.cancel()

    def close(self) -> None:
        """Forget this pass's progress callback and cancel token."""
        _RUNS.pop(self.run_id, None)
        if self._client is not None:
            self._client.unsubscribe_topic(_topic(self.run_id))
            self._client = None


#: run id -> [progress callback, cancel token, tiles done, tiles(, a stack's
#: _NeighboursUsed)] of the lazy passes; the tile tasks that run in this process look
#: their run up here
_RUNS: dict = {}
_RUNS_LOCK = threading.Lock()


def lazy_denoise(array, params: DenoiseParams | dict, *, progress=None) -> LazyRun:
    """Denoise every rank of ``params`` lazily, each tile computed once.

    Every rank of ``params`` from one lazy pass: :func:`denoise_dask`'s work (the
    decisions now, one task per tile later) with each tile computing all the ranks at
    once (the grouped method's ranks share its groups and eigendecompositions, the
    global method's one projection), and one lazy output per rank taken from the same
    tasks, so computing them together runs each tile once.  ``progress`` receives a
    ``"tiles"`` event as each tile that runs in this process ends; :meth:`LazyRun.cancel`
    stops them.  The outputs are chunked by the tiles' cores (``docs/dask.md``)."""
    import dask.array as da

    params = as_params(params)
    if params.add_noise:
        raise ValueError("add_noise is not available for Dask arrays; add the noise to the "
                         "array first (kpca_denoise.pipeline.add_noise on each block)")
    a = _as_dask(array)
    stack = _is_stack(a.shape)
    pages = [a[i] for i in range(a.shape[0])] if stack else [a]
    names = [f"page {i}" for i in range(len(pages))] if stack else ["image"]
    decisions = decide_images(pages, names, params)
    keys = result_keys(params, False)
    run = LazyRun({}, keys, [None if d is None else d.sigma for d in decisions],
                  [{} if d is None else d.stats for d in decisions],
                  sum(len(d.tiles) for d in decisions if d is not None), uuid.uuid4().hex)
    _RUNS[run.run_id] = [progress, run._token, 0, run.tiles]
    # tiles on other processes report through the scheduler (a stack's also the
    # neighbours its pages used)
    client = _distributed_client() if progress is not None or stack else None
    if client is not None:
        client.subscribe_topic(_topic(run.run_id),
                               lambda event: _tile_event(run.run_id, event[1]))
        run._client = client
    whole = _stack_decision(a, pages, decisions, params, run) if stack else None
    if whole is not None:  # the pages denoised as one, tiles carrying every page
        run.tiles = len(whole.tiles)
        _RUNS[run.run_id][3] = run.tiles
        _RUNS[run.run_id].append(_NeighboursUsed(run.stats, run.tiles))
        run.outputs.update(_assemble_stack(a, whole, run))
        return run
    built = [None if d is None else _assemble(page, d, run) for page, d in zip(pages, decisions)]
    for key in keys:
        outs = [page if b is None else b[key] for page, b in zip(pages, built)]
        run.outputs[key] = da.stack(outs) if stack else outs[0]
    return run


def required_halo(params: DenoiseParams | dict | None = None, **options) -> int:
    """Return the overlap in pixels each tile reads around its core.

    The overlap in pixels each tile reads around its core for these parameters
    (a :class:`DenoiseParams`, its dict, or :func:`denoise_dask`'s keywords): the
    tiled engine's halo, a multiple of the method's reference stride.  The grouped
    method's search widens when it finds a regular texture in the image (decided
    per image); ``required_halo({'grouped': {'periodic': True}})`` gives that halo."""
    params = call_params(params, options, caller="required_halo")
    if params.method == "grouped":
        halo, align = tiling.grouped_geometry(params)
    else:
        halo, align, _, _ = tiling.global_geometry(params)
    return -(-halo // align) * align  # as core.tiles.tile_grid rounds it


# -- the input ---------------------------------------------------------------------


#: what a missing Dask says (the command line says the same)
DASK_HINT = "Dask arrays need Dask: pip install 'kpca-denoise[distributed]'"


def _as_dask(array):
    try:
        import dask.array as da
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(f"{DASK_HINT} ({exc})") from None

    if isinstance(array, da.Array):
        return array
    if not (hasattr(array, "shape") and hasattr(array, "dtype")):
        raise ValueError(f"expected a Dask array (or a numpy / zarr array), got "
                         f"{type(array).__name__}; wrap the pixels with dask.array.from_array")
    if not np.issubdtype(np.dtype(array.dtype), np.number):  # before dask's own auto chunks
        check_image(np.empty((1, 1), array.dtype), "image")
    return da.asarray(array)


def _is_stack(shape: tuple) -> bool:
    """Whether an array of ``shape`` is a stack of pages (else one image); raises for
    a shape that is neither."""
    if len(shape) == 2 or (len(shape) == 3 and 1 <= shape[2] <= 4):
        return False
    if len(shape) == 3 or (len(shape) == 4 and 1 <= shape[3] <= 4):
        return True
    if len(shape) == 4:
        raise ValueError(f"a 4-D array must be a stack of images (P, H, W, C) with C = 3 or 4 "
                         f"colour channels (or 1, 2), got shape {tuple(shape)}; move the channel "
                         "axis last (dask.array.moveaxis)")
    raise ValueError(f"expected an image (H, W) or (H, W, C), or a stack (P, H, W) or "
                     f"(P, H, W, C), got shape {tuple(shape)}")


# -- the whole-image decisions ------------------------------------------------------


def decide_images(pages: list, names: list, params: DenoiseParams) -> list[_Decision | None]:
    """Per page its decisions, or None when it is returned unchanged (no noise)."""
    import dask

    for page, name in zip(pages, names):  # what the shape and dtype alone tell
        if page.size == 0 or not np.issubdtype(page.dtype, np.number):
            check_image(np.empty(page.shape if page.size == 0 else (1, 1), page.dtype), name)
        check_item_shape(page, name, False, params)
    keys = result_keys(params, False)
    if params.method == "grouped" and params.noise_model != "poisson-gaussian":
        summaries = dask.compute(*[_summary(page) for page in pages])  # one pass over the data
        found = [_measure(page, name, params, *s) for page, name, s in zip(pages, names, summaries)]
    else:
        found = [_measure_in_memory(page, name, params) for page, name in zip(pages, names)]
    return [None if f is None else _calibrated(page, keys, params, *f)
            for page, f in zip(pages, found)]


def _summary(page):
    """Lazy: each channel's minimum and maximum (NaN where a NaN is), and the values
    ``prepare.held_span`` samples (every ``size // 10**6``-th value of the flat array)."""
    x = page if page.ndim == 3 else page[..., None]
    step = max(1, page.size // 1_000_000)
    row = int(np.prod(page.shape[1:]))
    # row bands of whole rows: the flat view needs no chunk larger than a band
    bands = page.rechunk({0: max(1, _SAMPLE_CHUNK // row), **{i: -1 for i in range(1, page.ndim)}})
    return x.min(axis=(0, 1)), x.max(axis=(0, 1)), bands.reshape(-1)[::step]


def _measure(page, name: str, params: DenoiseParams, mins, maxs, sample):
    """``(sigma, vst, model, stats)`` of a page under the Gaussian model (the
    Poisson-Gaussian stabiliser when the pipeline would choose it, no fitted model;
    the noise stats the pipeline reports), or None (unchanged), as
    ``prepare.measure_image`` and ``prepare._with_noise`` decide; from the page's
    per-channel extremes (a (1, 2[, C]) stand-in with the image's minima and maxima,
    which is all the value checks read) and its strided sample."""
    stub = np.stack([np.atleast_1d(mins), np.atleast_1d(maxs)])[None].astype(page.dtype)
    stub = stub[..., 0] if page.ndim == 2 else stub
    check_image(stub, name)  # NaN or Inf pixels
    flat = is_flat(stub)
    # the sample has under two million values, so held_span reads all of it: the
    # whole image's quantiles (prepare._sigma_range)
    span = value_range(stub)
    lo, hi = min(span, held_span(sample)) * NO_NOISE_FRACTION, span
    stats: dict = {}
    # the pipeline's own decision, reading only the blocks sampled
    lum = None
    if params.noise_sigma is None and not flat:
        lum = (page if page.ndim == 2 else page[..., 0]) if working.channels(stub) == 1 \
            else working.LazyLuminance(page)
    try:
        sigma, vst = measure_noise(page, params, stats, flat=flat, lum=lum, stub=stub, lo=lo)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None
    if vst is not None:  # the stabilised domain's no-noise level, as prepare._with_noise
        lo = stabilised_span(stub, vst) * NO_NOISE_FRACTION
    try:
        there = noise_to_remove(sigma, lo, hi, page.dtype,
                                given=params.noise_sigma is not None, flat=flat)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None
    # the level the denoiser is given: the measured (or given) one times the strength
    return (float(sigma) * params.strength, vst, None, stats) if there else None


def _measure_in_memory(page, name: str, params: DenoiseParams):
    """``(sigma, vst, model, stats)`` or None (unchanged) through the pipeline's own
    preparation (and the global method's fit) on the page read whole."""
    x = np.asarray(page)
    res = ImageResult(index=0, name=name)
    item = prepare_item(params, x, res, False, seed=params.seed)
    if res.error:
        raise ValueError(res.error)
    if item is None:
        return None
    model = None
    if params.method == "global":
        run = RunContext(params, StageClock(None), None, None, {"method": params.method})
        fitted = run_global(run, global_groups(params, [item])[0], fit_only=True)
        model = copy.copy(fitted)
        model.set_params(progress=None, cancel=None)  # shipped to the workers bare
    stats = {k: v for k, v in res.stats.items() if k in ("noise", "hint", "noise_model")}
    return res.noise_sigma, item.vst, model, stats


def _calibrated(page, keys, params: DenoiseParams, sigma: float, vst, model,
                stats: dict) -> _Decision:
    """The page's tiles and the grouped calibration, as ``tiling.denoise_tiled`` makes
    them (the calibration on the central crop, read alone)."""
    tiles = tiling.plan(page.shape, params)
    if len(tiles) > 1:
        params = tiling.resolve_periodic(np.asarray(central_crop(page)), sigma, params, vst)
        tiles = tiling.plan(page.shape, params)
    ranks = tuple(keys) if params.method == "global" else ()
    return _Decision(sigma, params, tiles, tuple(keys), vst, model, ranks, stats)


@dataclass
class _StackDecision:
    """What the tiles of a stack denoised as one share: decided once, for all pages."""

    sigma: float
    params: DenoiseParams  # with the stack path's calibration
    tiles: list  # spatial tiles, each carrying every page
    keys: tuple
    linked: np.ndarray
    shifts: np.ndarray
    vst: Any = None


def _stack_decision(a, pages: list, decisions: list, params: DenoiseParams,
                    run: LazyRun) -> _StackDecision | None:
    """Whether a stack's pages are denoised as one (``params.sequence``), decided as the
    pipeline's step decides it (:func:`kpca_denoise.sequence.decide_stack` on the
    pages' central crops, one noise level for the stack); its tiles when they are.
    The decision goes into every page's stats and ``run.sequence``."""
    import dask

    from .sequence import decide_stack, decision_stabilisers, shared_noise, stabiliser_stats

    if (params.method != "grouped" or params.sequence == "no" or len(pages) < 2
            or any(d is None for d in decisions)):
        return None
    crops = [np.asarray(c) for c in dask.compute(*[central_crop(p) for p in pages])]
    sigmas = [d.sigma for d in decisions]
    stabilisers, shared = decision_stabilisers(params, pages, [d.vst for d in decisions],
                                               sigmas, crops)
    dec = decide_stack(crops, stabilisers, sigmas, params)
    run.sequence = dec.as_dict()
    for k, st in enumerate(run.stats):
        st["sequence"] = dict(decision=dec.decision, choice=dec.choice, reason=dec.reason,
                              page=k, pages=len(pages))
    if dec.decision != "sequence":
        return None
    vst0 = decisions[0].vst
    sigma, vst = shared or shared_noise(params, pages, sigmas, vst0)  # measured once
    run.noise_sigma = [sigma] * len(pages)
    if vst is not None:  # as the pipeline's step reports the stack's stabiliser
        for st in run.stats:
            st["noise_model"] = stabiliser_stats(st.get("noise_model", {}), vst)
    shifts = np.asarray(dec.shifts, dtype=np.int64).reshape(-1, 2)
    middle = crops[len(pages) // 2]  # the middle page's central crop, computed above
    params, tiles = stack_tiling.stack_plan(middle, sigma, params, a.shape, shifts, vst=vst,
                                      lazy=True)
    return _StackDecision(sigma, params, tiles, result_keys(params, False),
                          np.asarray(dec.linked, dtype=bool), shifts, vst)


#: one stack tile at a time per process: a tile's working set is the stack path's bound
#: (``stack_tiling.LAZY_STACK_TILE_BYTES``), and its numba kernels use every core already
_STACK_TILE_LOCK = threading.Lock()


def _stack_tile_cores(block, tile, sigma, params, linked, shifts, vst, run_id):
    """The task of a stack's tile: ``{key: (P, core...)}`` for every page (runs on a
    worker, one at a time per process; cancel and progress as :func:`_tile_cores`)."""
    entry = _RUNS.get(run_id)
    cancel = entry[1] if entry else None
    with _STACK_TILE_LOCK:
        check_cancel(cancel)
        outs, stats = stack_tiling.denoise_stack_tile(np.asarray(block), tile, sigma, params,
                                                linked=linked, shifts=shifts, vst=vst,
                                                cancel=cancel)
    seq = stats[0]["sequence"]
    _report_tile(run_id, entry, dict(tile=(tile.y0, tile.x0), window=seq["window"],
                                     counts=seq["counts"]))
    return outs


class _NeighboursUsed:
    """A stack's member counts per page (:mod:`.core.grouped.sequence`) pooled over its
    tiles as they end; once every tile is in, each page's stats get ``window`` and
    ``neighbours_used`` as :func:`kpca_denoise.denoise_stack` reports them."""

    def __init__(self, stats: list, tiles: int):
        self.stats, self.tiles = stats, tiles
        self.counts: dict = {}  # tile -> counts (a tile computed again replaces its own)
        self.lock = threading.Lock()

    def add(self, msg: dict) -> None:
        """Pool one tile's member counts; give the pages their stats at the last."""
        from .sequence import neighbours_used

        with self.lock:
            self.counts[tuple(msg["tile"])] = np.asarray(msg["counts"], dtype=np.float64)
            if len(self.counts) == self.tiles:
                total, w = sum(self.counts.values()), int(msg["window"])
                for k, st in enumerate(self.stats):
                    st["sequence"].update(window=w, neighbours_used=neighbours_used(total[k], w))


def _assemble_stack(a, d: _StackDecision, run: LazyRun) -> dict:
    """The stack's outputs ``{key: lazy (P, H, W[, C])}``: one delayed
    :func:`_stack_tile_cores` per spatial tile, every page's cores put together."""
    import dask

    task = dask.delayed(_stack_tile_cores, nout=None)
    blocks = [task(a[(slice(None),) + t.region], t, d.sigma, d.params, d.linked, d.shifts,
                   d.vst, run.run_id,
                   dask_key_name=f"kpca-denoise-stack-tile-{run.run_id}-{t.y0}-{t.x0}")
              for t in d.tiles]
    return _put_together(d.tiles, blocks, (a.shape[0],), tuple(a.shape[3:]), d.keys, a.dtype)


# -- the tiles ----------------------------------------------------------------------


def _tile_cores(region, tile, sigma, params, model, ranks, vst, run_id):
    """The task: one tile's core for every rank, ``{key: core}`` (runs on a worker).
    In this process it obeys its run's cancel token and reports its end; on a
    dask.distributed worker elsewhere it reports through the scheduler's events."""
    entry = _RUNS.get(run_id)
    cancel = entry[1] if entry else None
    check_cancel(cancel)
    outs, _ = tiling.denoise_tile(np.asarray(region), tile, sigma, params, model=model,
                                  ranks=ranks, vst=vst, cancel=cancel)
    _report_tile(run_id, entry)
    return outs


def _report_tile(run_id: str, entry, used: dict | None = None) -> None:
    """A tile of the run ended (a stack's: with the neighbours its pages used, ``used``):
    counted here, or through the scheduler's events on a dask.distributed worker
    elsewhere."""
    if entry is not None:
        _tile_event(run_id, 1 if used is None else used)
    else:
        try:
            from distributed import get_worker

            get_worker().log_event(_topic(run_id), 1 if used is None else used)
        except (ImportError, ValueError):  # not on a distributed worker
            pass


def _tile_event(run_id: str, msg) -> None:
    """A tile's report (1, or a stack tile's neighbours used) reached this process."""
    entry = _RUNS.get(run_id)
    if isinstance(msg, dict) and entry is not None and len(entry) > 4:
        entry[4].add(msg)
    _tile_done(run_id)


def _topic(run_id: str) -> str:
    return f"kpca-denoise-tiles-{run_id}"


def _tile_done(run_id: str) -> None:
    """Count a finished tile of the run and report it (one report at a time: the
    callback need not be thread-safe)."""
    entry = _RUNS.get(run_id)
    if entry is None or entry[0] is None:
        return
    with _RUNS_LOCK:
        entry[2] += 1
        report(entry[0], "tiles", entry[2], entry[3])


def _distributed_client():
    """The dask.distributed client in use, or None."""
    try:
        from distributed import default_client

        return default_client()
    except (ImportError, ValueError):
        return None


def _assemble(page, d: _Decision, run: LazyRun) -> dict:
    """The page's outputs ``{key: lazy array}``: one delayed :func:`_tile_cores` per tile
    of the plan, each key's cores put together (lazy)."""
    import dask

    rid = run.run_id
    model = None if d.model is None else dask.delayed(d.model, name=f"kpca-denoise-model-{rid}")
    task = dask.delayed(_tile_cores, nout=None)
    blocks = [task(page[t.region], t, d.sigma, d.params, model, d.ranks, d.vst, rid,
                   dask_key_name=f"kpca-denoise-tile-{rid}-{id(d)}-{t.y0}-{t.x0}")
              for t in d.tiles]
    return _put_together(d.tiles, blocks, (), tuple(page.shape[2:]), d.keys, page.dtype)


def _put_together(tiles: list, blocks: list, lead: tuple, tail: tuple, keys: tuple,
                  dtype) -> dict:
    """Each key's lazy array from the tiles' delayed ``{key: core}`` blocks (tiles
    row-major), a core being ``lead + (its rows, its columns) + tail``."""
    import dask.array as da

    rows: dict = {}
    for t, block in zip(tiles, blocks):
        shape = lead + (t.y1 - t.y0, t.x1 - t.x0) + tail
        for key in keys:
            rows.setdefault(key, {}).setdefault(t.y0, []).append(
                da.from_delayed(block[key], shape, dtype=dtype))
    ax = len(lead)
    return {key: da.concatenate([da.concatenate(r, axis=ax + 1) for r in rows[key].values()],
                                axis=ax) for key in keys}
