"""Bounded-memory denoising of one image: overlapping tiles.

The pipeline (:mod:`kpca_denoise.pipeline`, the only orchestrator) cuts every
image into tiles (:func:`plan`), denoises each tile's region with
:func:`denoise_tile` and writes the tile's core into the output.  Memory is
bounded by the tile, not by the image: the input and the outputs stay in the
image's own dtype, only a tile's region is ever converted to float64.

The halo is what a core pixel depends on, so tiled output equals whole-image
output (up to floating-point summation order):

* ``global``: the kernel PCA model is fitted once per set; every patch is then
  denoised on its own, so a core pixel needs the patches that cover it: a
  halo of one patch side, rounded up to the stride, the patch grid aligned to
  the image origin.
* ``grouped``: a pixel gets estimates from every group that has a member
  covering it (references up to ``R + p`` away), and a group depends on the
  pixels of its search window (another ``R + p``) and on the matching windows
  of its candidates, which reach up to ``m - p`` beyond a candidate patch
  (``m`` the stage's matching window, ``match_size1`` / ``match_size``):
  ``2 (R + p) + (m - p)`` per stage (``R`` the stage's search radius,
  ``search_radius1`` / ``search_radius``), and stage 2 matches on the stage-1 pilot,
  so the two stages add up.  Reference grids stay aligned
  with the image origin (cores and halos are multiples of twice the pilot's
  reference stride, whose references on flat areas are every other grid row and
  column, and of stage 2's).  The halo is read, not all computed: the driver
  computes only the groups the core depends on (its ``core``;
  ``docs/large-images.md``).

The tile size needs no tuning: the defaults (:data:`DEFAULT_TILE`) keep a
tile's working set to some tens of MB and the recomputed halo to about 35 % (a
2048x2048 image) to 52 % (4000x3000; the 65x65 search window makes the grouped
halo 162 px, read as 200) / 13 % (global) of the pixels.  ``DenoiseParams.tile_size`` sets it.
The working space is in :mod:`kpca_denoise.working`, a stack's tiles in
:mod:`kpca_denoise.stack_tiling`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .core.parallel import num_threads
from .core.patches import extract_patches, patch_positions, reassemble
from .core.progress import check_cancel, report
from .core.tiles import Tile, tile_grid
from .params import DenoiseParams
from .tile_threads import MAX_AT_ONCE, tiles_at_once
from .working import (channels, from_working,
                      guide_range, to_working)

__all__ = ["DEFAULT_TILE", "GLOBAL_PATCH_SIZE", "plan", "denoise_tile", "denoise_tiled",
           "grouped_geometry", "grouped_halo", "global_geometry", "training_patches",
           "merge_grouped_stats", "resolve_periodic", "denoise_with_model", "rank_bytes",
           "check_rank_memory", "RANK_PIXEL_BYTES", "RANK_PART_BYTES"]

GLOBAL_PATCH_SIZE = 8
#: core side of a tile per method when ``DenoiseParams.tile_size`` is None
DEFAULT_TILE = {"grouped": 1024, "global": 256}


# -- geometry -------------------------------------------------------------------------


def grouped_geometry(params: DenoiseParams, noise: tuple | None = None) -> tuple[int, int]:
    """(halo, align) of the grouped method with these parameters.  ``noise``: ``(sigma,
    guide data range, channels)`` of an image whose options are calibrated
    (:func:`resolve_periodic`), for the windows the core resolves at that noise level;
    None for the widest any noise level gets (the tiles are planned before it is known)."""
    from .core.grouped import resolve_geometry
    from .core.grouped.calibrate import noise_fraction

    opts = params.grouped_options(None if noise is None else noise[1])
    periodic = bool(opts.periodic)  # a regular texture searches further
    nf, detail = 1.0, None
    if noise is not None and opts.periodic is not None:
        sigma, _, c = noise  # the core's rule; a texture of unknown contrast: the widest
        nf = 1.0 if periodic and opts.contrast is None else noise_fraction(opts, sigma, c)
        detail = 0.0 if opts.detail is None else opts.detail  # unknown: the widest window
    g = resolve_geometry(opts, noise_fraction=nf, periodic=periodic, detail=detail)
    p = g.patch_size
    halo = 2 * (g.search_radius1 + p) + (g.match_size1 - p)  # stage 1
    if opts.two_stage:
        halo += 2 * (g.search_radius + p) + (g.match_size - p)  # stage 2, on the pilot
    # twice the pilot's stride (its sparser references in flat areas, driver.coarse_flat,
    # are every other grid row and column of the image) and stage 2's stride
    return halo, math.lcm(2 * g.stride1, g.stride)


def grouped_halo(image: np.ndarray, sigma: float, params: DenoiseParams, vst=None) -> tuple[int, int]:
    """(halo, align) of the grouped method for ``image`` at noise ``sigma`` (``vst``: its
    stabiliser), ``params`` calibrated by :func:`resolve_periodic`: what a core pixel
    depends on at this noise level (a preview's tile)."""
    c = channels(image)
    return grouped_geometry(params, (sigma, guide_range(np.asarray(image).dtype, vst, c == 3), c))



def global_geometry(params: DenoiseParams) -> tuple[int, int, int, int]:
    """(halo, align, patch size, stride) of the global method."""
    p = params.patch_size or GLOBAL_PATCH_SIZE
    stride = params.stride or max(1, p // 2)
    return p, stride, p, stride


def plan(shape: tuple[int, ...], params: DenoiseParams) -> list[Tile]:
    """The tiles of an image of ``shape`` (H, W[, C]) for ``params.method``."""
    if params.method == "grouped":
        halo, align = grouped_geometry(params)
    else:
        halo, align, _, _ = global_geometry(params)
    side = params.tile_size or DEFAULT_TILE[params.method]
    return tile_grid(shape[:2], max(side, align), halo, align)



# -- memory of the ranks ---------------------------------------------------------------

#: bytes per rank, working channel and pixel of a grouped tile's region in flight: its
#: weighted sums, weights and result in float64 (the ranks share everything else)
RANK_PIXEL_BYTES = 3 * 8
#: bytes per rank and thread of the parts of a chunk in flight (a part's estimates,
#: expansion weights and their copy in the ranks' order, two parts a thread; 256
#: groups of 32 patches of 8x8: ``core.grouped.driver.PART_GROUPS``)
RANK_PART_BYTES = 2 * 256 * 32 * (2 * 64 + 32) * 8
#: the engine's own memory beside the ranks' (the interpreter, its libraries and a
#: tile's rank-independent working set; docs/large-images.md)
ENGINE_BYTES = 450 << 20


def rank_bytes(shape: tuple, dtype, params: DenoiseParams, tiles: list[Tile] | None = None) -> int:
    """Bytes the ranks of ``params`` take in a grouped run on an image of ``shape``
    (H, W[, C]) and ``dtype``: per rank, the tiles in flight's float64 estimates
    (:data:`RANK_PIXEL_BYTES` a pixel and working channel), the parts in flight
    (:data:`RANK_PART_BYTES` a thread) and the output in the image's dtype.  0 for
    another method."""
    if params.method != "grouped":
        return 0
    tiles = plan(shape, params) if tiles is None else tiles
    at_once = min(len(tiles), num_threads()) if 1 < num_threads() <= MAX_AT_ONCE else 1
    regions = sorted((t.ry1 - t.ry0) * (t.rx1 - t.rx0) for t in tiles)[-at_once:]
    c = channels(np.empty((1, 1) + tuple(shape[2:]), np.uint8))
    nr = len(params.ranks)
    return nr * (RANK_PIXEL_BYTES * c * sum(regions) + RANK_PART_BYTES * max(1, num_threads())
                 + int(np.prod(shape)) * np.dtype(dtype).itemsize)


def check_rank_memory(shape: tuple, dtype, params: DenoiseParams,
                      tiles: list[Tile] | None = None) -> None:
    """Refuse, before any compute, a grouped run whose ranks would not fit in the memory
    this process can still allocate (:func:`.io.lazy_tiff.memory_budget`), in one line
    naming the fix: fewer ranks or smaller tiles.  Nothing is refused where the memory
    available is not known."""
    from .io.lazy_tiff import memory_budget

    need = rank_bytes(shape, dtype, params, tiles)
    avail = memory_budget()
    if not need or avail is None or need + ENGINE_BYTES <= avail:
        return
    H, W = shape[:2]
    raise ValueError(
        f"{len(params.ranks)} ranks of a {W}x{H} image need about "
        f"{(need + ENGINE_BYTES) / 2**30:.1f} GB of memory, {avail / 2**30:.1f} GB is available; "
        "ask for fewer ranks, or smaller tiles (--tile-size, DenoiseParams.tile_size)")


# -- one tile -------------------------------------------------------------------------


def training_patches(image: np.ndarray, p: int, step: int, idx: np.ndarray, vst=None) -> np.ndarray:
    """Rows (len(idx), c p p) of the working-space patches at flat indices ``idx``
    of the ``step`` grid (the rows of ``extract_patches`` of every channel, side
    by side), gathered without building the other patches."""
    a = np.asarray(image)
    ys = patch_positions(a.shape[0], p, step)
    xs = patch_positions(a.shape[1], p, step)
    iy, ix = ys[idx // len(xs)], xs[idx % len(xs)]
    win = sliding_window_view(a, (p, p), axis=(0, 1))[iy, ix]  # (k[, C], p, p)
    k = len(idx)
    stack = win.reshape(k, p * p) if a.ndim == 2 else np.moveaxis(win, 1, -1).reshape(k, p * p, -1)
    work, _, _ = to_working(stack, vst)  # a (k, p*p, c) "image" of patches
    return np.ascontiguousarray(np.moveaxis(work, 2, 1).reshape(k, -1))


def _denoise_region_global(work, model, ranks, p, stride, cancel):
    """{rank: (h, w, c) float64} for one region of working channels."""
    chans = [extract_patches(work[..., c], p, stride) for c in range(work.shape[2])]
    P = np.concatenate([c[0] for c in chans], axis=1)
    pos = chans[0][1]
    outs, stats = denoise_with_model(model, P, ranks, cancel)
    d = p * p
    return {r: np.stack([reassemble(O[:, j * d:(j + 1) * d], pos, work.shape[:2], p)
                         for j in range(work.shape[2])], axis=-1)
            for r, O in outs.items()}, stats


def denoise_with_model(model, P: np.ndarray, ranks, cancel=None):
    """Rows P projected once at the largest rank; pre-image per rank (ranks are
    prefixes).  Returns ``({rank: rows}, {rank: pre-image counters})``."""
    Z = model.transform(P, n_components=max(ranks))
    out, stats = {}, {}
    for r in ranks:
        check_cancel(cancel)
        out[r] = model.fixed_point_inverse_transform(Z[:, :r], init=P)
        s = model.preimage_stats_
        stats[r] = {"fallbacks": s.fallbacks, "restarts": s.restarts, "iterations": s.iterations}
    return out, stats



def _denoise_region_grouped(work, sigma, params, progress, cancel, data_range=None, core=None):
    """{rank: (h, w, c) float64} and per-channel stats for one region of working
    channels.  Colour shares one set of groups across the opponent channels, matched
    on all three (the RGB distance; ``docs/method.md``).  ``core`` (y0, y1, x0, x1 in
    the region): only what its pixels depend on is computed (the driver's ``core``)."""
    from .core.grouped import denoise_grouped_channels

    return denoise_grouped_channels(work, sigma, ranks=tuple(params.ranks),
                                    options=params.grouped_options(data_range),
                                    progress=progress, cancel=cancel, core=core)


def denoise_tile(region: np.ndarray, tile: Tile, sigma: float, params: DenoiseParams, *,
                 model: Any = None, ranks: tuple = (), vst=None, progress=None, cancel=None):
    """Denoise one tile's ``region`` (the image's pixels ``image[tile.region]``).

    Returns ``({rank: core pixels in the region's dtype}, stats)``; stats are
    per channel (grouped) or per rank (global).  ``model`` and ``ranks``
    (integers) are the global method's fitted kernel PCA and ranks; ``vst`` the
    image's variance-stabilising transform (pointwise, so it applies per tile).
    """
    work, alpha, colour = to_working(region, vst)
    core = tile.core_in_region
    if params.method == "grouped":  # the halo's own pixels are never written: not computed
        outs, stats = _denoise_region_grouped(
            work, sigma, params, progress, cancel, guide_range(region.dtype, vst, colour),
            core=(core[0].start, core[0].stop, core[1].start, core[1].stop))
    else:
        _, _, p, stride = global_geometry(params)
        outs, stats = _denoise_region_global(work, model, ranks, p, stride, cancel)
    a = alpha[core] if alpha is not None else None
    like = region[:1, :1]
    return {r: from_working(o[core], a, colour, like, vst) for r, o in outs.items()}, stats


def merge_grouped_stats(per_tile: list[list[dict]]) -> list[dict]:
    """Per channel: counters and seconds summed over tiles, the spectra (the final
    groups', the noisy groups' own) averaged with the tiles' group counts as weights,
    their spread over the groups (the quantiles) from every tile's sampled spectra
    pooled (one tile: its own, from all its samples), resolved parameters of the first
    tile."""
    from .core.grouped.stats import pooled_quantiles

    merged = []
    for chans in zip(*per_tile):
        first = chans[0]
        m = {k: v for k, v in first.items() if not k.endswith("_pool")}
        for kind in ("spectrum", "rank_spectrum"):
            pools = [s[f"{kind}_pool"] for s in chans if f"{kind}_pool" in s]
            if len(chans) > 1 and len(pools) == len(chans):
                m[f"{kind}_quantiles"] = pooled_quantiles(pools)
        for key in ("preimage_fallbacks", "preimage_iterations", "groups"):
            m[key] = int(sum(s[key] for s in chans))
        m["seconds"] = {k: float(sum(s["seconds"].get(k, 0.0) for s in chans))
                        for k in first["seconds"]}
        for kind in ("spectrum", "rank_spectrum"):
            spectra = [(np.asarray(s[kind]), s["groups"]) for s in chans
                       if np.size(s.get(kind, ()))]
            if spectra:
                L = min(sp.size for sp, _ in spectra)
                w = np.asarray([g for _, g in spectra], dtype=np.float64)
                m[kind] = np.average([sp[:L] for sp, _ in spectra], axis=0, weights=w)
        m["tiles"] = len(chans)
        merged.append(m)
    return merged


def _merge_global_stats(per_tile: list[dict]) -> dict:
    return {r: {k: int(sum(t[r][k] for t in per_tile)) for k in per_tile[0][r]}
            for r in per_tile[0]}


def resolve_periodic(image: np.ndarray, sigma: float, params: DenoiseParams,
                     vst=None, cancel=None) -> DenoiseParams:
    """``params`` with the grouped method's image-dependent options (a regular
    texture, its periods and contrast, the coarse detail) decided once for the whole
    image by ``core.grouped.calibrate`` on the working channels' central crop, as the
    core decides them for one piece, so that every tile gets the same settings and
    the tiles are planned with a texture's wider search.  Unchanged when the method
    is not grouped.  ``cancel``: a token checked before the calibration and between
    the chunks of its trial denoising."""
    from .core.grouped import calibrate
    from .core.grouped.calibrate import central_crop
    from .core.grouped.driver import trial_denoiser

    if params.method != "grouped":
        return params
    region = central_crop(np.asarray(image))
    work, _, colour = to_working(region, vst)
    chans = [np.ascontiguousarray(work[..., c]) for c in range(work.shape[2])]
    opts = params.grouped_options(guide_range(region.dtype, vst, colour))
    check_cancel(cancel)
    cal = calibrate(chans, sigma, opts, trial_denoiser(cancel))
    decided = {k: getattr(cal.options, k) for k in ("periodic", "lags", "contrast", "detail")
               if getattr(params.grouped, k) is None and getattr(cal.options, k) is not None}
    if not cal.options.periodic:
        decided.pop("lags", None)  # none to tell: a tile finds none either
    return params.replace(grouped=params.grouped.replace(**decided)) if decided else params


def denoise_tiled(image: np.ndarray, sigma: float, params: DenoiseParams, *, model: Any = None,
                  ranks: tuple = (), vst=None, progress=None, cancel=None, tile_map=None):
    """Denoise a whole image tile by tile: ``({rank: array like image}, stats)``.

    Stats: per channel (grouped, see :func:`merge_grouped_stats`) or per rank
    (global: pre-image counters summed over tiles).

    ``tile_map``: where the tiles run.  None runs them here, one after the
    other.  Otherwise a callable ``tile_map(jobs, **kw)`` that takes an iterable
    of ``(k, region, tile)`` and the keywords of :func:`denoise_tile` (``sigma``,
    ``params``, ``model``, ``ranks``, ``vst``) and yields ``(k, (outs, stats))``
    as tiles complete, in any order (:mod:`kpca_denoise.executor` runs them as
    Dask tasks).  Each core is written into the output as it arrives.
    """
    a = np.asarray(image)
    tiles = plan(a.shape, params)
    if tile_map is None:  # the tiles run here (a tile map's run where it sends them)
        check_rank_memory(a.shape, a.dtype, params, tiles)
    if len(tiles) > 1:  # one tile decides on its own, on the same centre crop
        params = resolve_periodic(a, sigma, params, vst, cancel)
        tiles = plan(a.shape, params)
    outputs: dict = {}
    per_tile: list = [None] * len(tiles)

    def take(n_done: int, k: int, outs: dict, stats) -> None:  # a tile's core written
        check_cancel(cancel)
        for r, o in outs.items():
            if r not in outputs:
                outputs[r] = np.empty_like(a)
            outputs[r][tiles[k].core] = o
        per_tile[k] = stats
        if len(tiles) > 1:
            report(progress, "tiles", n_done, len(tiles))

    kw = dict(sigma=sigma, params=params, model=model, ranks=ranks, vst=vst)
    if (tile_map is None and len(tiles) > 1 and params.method == "grouped"
            and 1 < num_threads() <= MAX_AT_ONCE):
        tiles_at_once(a, tiles, denoise_tile, kw, progress, cancel, take)
    else:
        jobs = ((k, a[tile.region], tile) for k, tile in enumerate(tiles))
        if tile_map is None:
            done = ((k, denoise_tile(region, tile, progress=progress, cancel=cancel, **kw))
                    for k, region, tile in jobs)
        else:
            done = tile_map(jobs, **kw)
        try:
            for n_done, (k, (outs, stats)) in enumerate(done, 1):
                take(n_done, k, outs, stats)
        finally:
            done.close()  # stopped early (cancel, an error): a tile map drops what is left
    if params.method == "grouped":
        return outputs, merge_grouped_stats(per_tile)
    return outputs, _merge_global_stats(per_tile)

