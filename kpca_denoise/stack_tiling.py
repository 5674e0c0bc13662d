"""Bounded-memory denoising of a stack: tiles that carry every page.

The stack path (:mod:`kpca_denoise.sequence`) denoises the pages of a sequence in
spatial tiles (:func:`plan_stack`), each carrying its region of every page, so that a
page's groups take patches from its neighbours (:mod:`kpca_denoise.core.grouped.sequence`).
As for one image (:mod:`kpca_denoise.tiling`), the halo is what a core pixel depends
on (here also the pages' shifts), so tiled output equals the whole stack's.
"""


from __future__ import annotations

import math

import numpy as np

from .core.color import OPPONENT
from .core.progress import check_cancel, report
from .core.tiles import Tile, tile_grid
from .params import DenoiseParams
from .tiling import merge_grouped_stats
from .working import (channels, from_working,
                      guide_range, nominal_range, to_working,
                      working_range)

__all__ = ["STACK_TILE_BYTES", "LAZY_STACK_TILE_BYTES", "stack_geometry", "plan_stack",
           "denoise_stack_tile", "denoise_stack_tiled", "resolve_stack", "settle_stack_range",
           "stack_plan", "merge_stack_stats"]

#: the pages' working set of one tile of the stack path when ``DenoiseParams.tile_size``
#: is None (bytes, :func:`~.core.grouped.sequence.stack_bytes`): a tile of the pages
#: carries them all, streamed.  A stack held in memory: a 1024x1024 grey stack is one
#: tile (its halo of about 166 px made 16 tiles of 256 px cores recompute much of the
#: page); a lazy one (read tile by tile, each task holding its region of every page):
#: ``LAZY_STACK_TILE_BYTES`` (``docs/stacks.md#memory``)
STACK_TILE_BYTES = 1280 << 20
LAZY_STACK_TILE_BYTES = 400 << 20


def stack_geometry(params: DenoiseParams, shifts: np.ndarray, reach=None) -> tuple[int, int]:
    """(halo, align) of the stack path (:mod:`.core.grouped.sequence`) with these
    parameters on pages moving by ``shifts`` (P - 1, 2): per stage the single image's
    halo with the search radius widened to how far a reference's members on the
    neighbouring pages (and their slices) may lie, :func:`spatial_reach` (``reach``: a
    :class:`~.core.grouped.sequence.StackReach`, default the stack path's)."""
    from .core.grouped import resolve_geometry
    from .core.grouped.sequence import STAGE2_GRID, StackReach, spatial_reach

    kw = (reach or StackReach()).keywords()

    opts = params.grouped_options()
    g = resolve_geometry(opts, noise_fraction=1.0, periodic=bool(opts.periodic))
    p = g.patch_size
    halo = 2 * (spatial_reach(shifts, search=g.search_radius1, **kw) + p) + (g.match_size1 - p)
    if opts.two_stage:
        halo += 2 * (spatial_reach(shifts, search=g.search_radius, **kw) + p) + (g.match_size - p)
    # twice each stage's stride: each page's references are a checkerboard of its
    # grid (slices.page_references)
    stride2 = g.stride if opts.two_stage and STAGE2_GRID else g.stride1
    return halo, math.lcm(2 * g.stride1, 2 * stride2)



def plan_stack(shape: tuple[int, ...], params: DenoiseParams, shifts: np.ndarray,
               reach=None, lazy: bool = False) -> list[Tile]:
    """The spatial tiles of a stack of pages of ``shape`` (P, H, W[, C]) for the stack
    path: every tile carries all the pages (they are streamed, :mod:`.core.grouped.sequence`)
    and the halo :func:`stack_geometry`.  The core side is ``params.tile_size``, or
    what keeps a tile's working set (:func:`~.core.grouped.sequence.stack_bytes` per
    pixel) within :data:`STACK_TILE_BYTES` (less where memory is short, :func:`_stack_budget`),
    or :data:`LAZY_STACK_TILE_BYTES` for a ``lazy`` stack (its tasks also hold their
    region's input and outputs on every page)."""
    from .core.grouped.sequence import StackReach, stack_bytes

    reach = reach or StackReach()
    halo, align = stack_geometry(params, shifts, reach)
    side = params.tile_size
    if side is None:
        c = channels(np.empty((1, 1) + tuple(shape[3:]), np.uint8))
        per_pixel = c * stack_bytes(len(params.ranks), reach.window, reach.depth,
                                    params.grouped_options().two_stage)
        budget = _stack_budget(lazy)
        region = int((budget / per_pixel) ** 0.5)
        # a core at least the halo: a colour stack's budget alone would leave cores of
        # tens of pixels, each recomputing a ring many times its size (the working set
        # then exceeds the budget rather than the work growing without bound)
        side = max(region - 2 * halo, halo, 4 * align)
        if shape[1] * shape[2] * per_pixel <= budget:
            # the whole pages fit: one tile (cut into tiles whose halos cover the page,
            # a 256x256 colour stack computed most of its groups four times)
            side = max(shape[1], shape[2])
    return tile_grid(shape[1:3], max(side, align), halo, align)


def _stack_budget(lazy: bool) -> int:
    """A stack tile's working-set bound: :data:`LAZY_STACK_TILE_BYTES` for a lazy stack;
    for one held in memory :data:`STACK_TILE_BYTES`, less where the process cannot
    allocate three times that (:func:`.io.lazy_tiff.memory_budget`), not below the lazy
    bound.  The tiles give the whole stack's pixels whatever their size."""
    if lazy:
        return LAZY_STACK_TILE_BYTES
    from .io.lazy_tiff import memory_budget

    free = memory_budget()
    if free is None:
        return STACK_TILE_BYTES
    return int(min(STACK_TILE_BYTES, max(LAZY_STACK_TILE_BYTES, free // 3)))


class _WorkingPages:
    """The pages of a block ``(P, h, w[, C])`` as the stack path reads them: ``[k]`` is
    page ``k``'s working channels ``(h, w, c)`` float64, converted when asked for."""

    def __init__(self, block, vst=None):
        self.block, self.vst = block, vst
        c = channels(np.asarray(block[0][:1, :1]))
        self.shape = (len(block),) + tuple(block[0].shape[:2]) + (c,)

    def __getitem__(self, k: int) -> np.ndarray:
        return to_working(np.asarray(self.block[k]), self.vst)[0]


def denoise_stack_tile(block, tile: Tile | None, sigma: float, params: DenoiseParams, *,
                       linked: np.ndarray, shifts: np.ndarray, vst=None, reach=None,
                       progress=None, cancel=None, sink=None, first_page: int = 0):
    """Denoise one tile's ``block`` of a stack: the pages' region, ``block[k]`` page
    ``k``'s pixels ``page[tile.region]`` (``tile`` None: the whole pages), through the
    stack path with the stack's ``linked`` pairs and global ``shifts`` and
    ``params``' grouped options (their image-dependent decisions made once for the
    stack, :func:`resolve_stack`).

    Returns ``({rank: (P, core...) in the block's dtype}, stats)``; with ``sink``,
    ``sink(k, {rank: page k's core})`` gets each page as it is done and the dict is
    empty.  ``vst``: the stack's variance-stabilising transform; ``reach``: a
    :class:`~.core.grouped.sequence.StackReach` (default the stack path's); ``first_page``:
    the index of ``block[0]`` in the whole stack (a preview's pages)."""
    from .core.grouped.sequence import StackReach, denoise_grouped_stack

    pages = _WorkingPages(block, vst)
    first = np.asarray(block[0])
    like = first[:1, :1]
    colour = channels(first) == 3
    core = tile.core_in_region if tile is not None else (slice(None), slice(None))
    outs: dict = {}

    def put(k: int, est: dict) -> None:
        alpha = None
        if first.ndim == 3 and first.shape[2] in (2, 4):
            alpha = np.asarray(block[k])[core][..., -1]
        done = {rk: from_working(o[core], alpha, colour, like, vst) for rk, o in est.items()}
        if sink is not None:
            sink(k, done)
            return
        for rk, o in done.items():
            if rk not in outs:
                outs[rk] = np.empty((pages.shape[0],) + o.shape, o.dtype)
            outs[rk][k] = o

    _, stats = denoise_grouped_stack(
        pages, sigma, ranks=tuple(params.ranks),
        options=params.grouped_options(guide_range(first.dtype, vst, colour)),
        linked=linked, shifts=shifts, progress=progress, cancel=cancel, sink=put,
        core=(None if tile is None else
              (core[0].start, core[0].stop, core[1].start, core[1].stop)),
        first_page=first_page, **(reach or StackReach()).keywords())
    return outs, stats


def resolve_stack(middle: np.ndarray, sigma: float, params: DenoiseParams,
                  vst=None) -> DenoiseParams:
    """``params`` with the stack path's image-dependent decisions made once, on the
    central crop of the ``middle`` page, as the stack path makes them on the whole
    stack (:func:`~.core.grouped.sequence.calibrate_stack`), so that every tile of the
    stack gets them."""
    from .core.grouped.calibrate import central_crop
    from .core.grouped.sequence import calibrate_stack

    region = central_crop(np.asarray(middle))
    work, _, colour = to_working(region, vst)
    opts = calibrate_stack([work[..., c] for c in range(work.shape[2])], sigma,
                           params.grouped_options(guide_range(region.dtype, vst, colour)))
    decided = {k: getattr(opts, k) for k in ("periodic", "lags", "contrast", "detail")
               if getattr(params.grouped, k) is None and getattr(opts, k) is not None}
    if not opts.periodic:
        decided.pop("lags", None)
    return params.replace(grouped=params.grouped.replace(**decided)) if decided else params


def stack_plan(middle: np.ndarray, sigma: float, params: DenoiseParams,
               shape: tuple[int, ...], shifts: np.ndarray, *, vst=None, reach=None,
               calibrate: bool = False, lazy: bool = False) -> tuple[DenoiseParams, list[Tile]]:
    """``(params, tiles)`` of a stack of ``shape`` (P, H, W[, C]) through the stack path,
    decided on its ``middle`` page: the range of a float stack settled
    (:func:`settle_stack_range`), the tiles planned (:func:`plan_stack`) and, when there
    is more than one, the stack's calibration made once (:func:`resolve_stack`) so that
    every tile gets it, and the tiles planned again.  One tile calibrates inside the
    stack path, on the same crop of the same page; ``calibrate``: made here all the
    same (a region of the pages, a preview's, would calibrate on the region).  ``lazy``:
    as :func:`plan_stack`'s."""
    params = settle_stack_range(middle, sigma, params, vst)
    tiles = plan_stack(shape, params, shifts, reach, lazy)
    if len(tiles) > 1 or calibrate:
        params = resolve_stack(middle, sigma, params, vst)
        tiles = plan_stack(shape, params, shifts, reach, lazy)
    return params, tiles


def denoise_stack_tiled(pages, sigma: float, params: DenoiseParams, *, linked: np.ndarray,
                        shifts: np.ndarray, vst=None, reach=None, progress=None,
                        cancel=None, sink=None, tile_map=None):
    """Denoise a stack through the stack path tile by tile: ``pages`` is a sequence of
    ``(H, W[, C])`` arrays (read a tile's region at a time); each tile carries every
    page and the halo the stack path needs (:func:`plan_stack`), so the result equals
    the untiled stack path's.  ``sink(k, tile, {rank: core})`` receives the cores
    (default: assembled into arrays like the pages, returned as ``{rank: [page
    arrays]}``).  ``tile_map``: as for :func:`denoise_tiled`, with
    :func:`denoise_stack_tile`'s keywords.  Returns ``(outputs, stats)``, the stats
    merged over the tiles."""
    P = len(pages)
    first = np.asarray(pages[0])
    params, tiles = stack_plan(pages[P // 2], sigma, params, (P,) + first.shape, shifts,
                               vst=vst, reach=reach)
    outputs: dict = {}
    if sink is None:
        def sink(k, tile, done):
            for rk, o in done.items():
                if rk not in outputs:
                    outputs[rk] = [np.empty_like(first, dtype=o.dtype) for _ in range(P)]
                outputs[rk][k][tile.core] = o

    per_tile: list = [None] * len(tiles)
    kw = dict(linked=linked, shifts=shifts, vst=vst, reach=reach)
    jobs = ((i, _PageRegions(pages, t.region), t) for i, t in enumerate(tiles))
    if tile_map is None:
        for i, block, t in jobs:
            _, per_tile[i] = denoise_stack_tile(
                block, t, sigma, params, progress=progress, cancel=cancel,
                sink=lambda k, done, t=t: sink(k, t, done), **kw)
            if len(tiles) > 1:
                report(progress, "tiles", i + 1, len(tiles))
    else:
        done = tile_map(jobs, sigma=sigma, params=params, **kw)
        try:
            for n_done, (i, (outs, stats)) in enumerate(done, 1):
                check_cancel(cancel)
                for k in range(P):
                    sink(k, tiles[i], {rk: o[k] for rk, o in outs.items()})
                per_tile[i] = stats
                report(progress, "tiles", n_done, len(tiles))
        finally:
            done.close()
    return outputs, merge_stack_stats(per_tile)


class _PageRegions:
    """``pages``' region ``region`` (two slices), page by page, read when asked for."""

    def __init__(self, pages, region):
        self.pages, self.region = pages, region

    def __len__(self) -> int:
        return len(self.pages)

    def __getitem__(self, k: int) -> np.ndarray:
        return np.asarray(self.pages[k][self.region])


def merge_stack_stats(per_tile: list[list[dict]]) -> list[dict]:
    """:func:`merge_grouped_stats` of the stack path's tiles, with the share of each
    page's members taken from each neighbour over all the tiles."""
    merged = merge_grouped_stats(per_tile)
    if len(per_tile) > 1:
        counts = np.sum([np.asarray(t[0]["sequence"]["counts"]) for t in per_tile], axis=0)
        share = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1.0)
        for m in merged:
            m["sequence"] = dict(m["sequence"], counts=counts.tolist(),
                                 neighbours_used=share.tolist())
    return merged



def settle_stack_range(middle: np.ndarray, sigma: float, params: DenoiseParams,
                       vst=None) -> DenoiseParams:
    """``params`` with the grouped method's ``data_range`` of a float stack decided once,
    on the central crop of its ``middle`` page (:func:`nominal_range`), so that a float
    stack gets the decisions its 8- or 16-bit version gets from its type (the stack
    path's high-noise pilot, ``docs/stacks.md``) and every tile gets the same.
    Unchanged for integer pages, a stabilised stack (other units) or a range given."""
    from .core.grouped.calibrate import central_crop

    dtype = getattr(middle, "dtype", None)
    if (params.grouped.data_range is not None or vst is not None
            or working_range(dtype if dtype is not None else np.asarray(middle).dtype)
            is not None):
        return params
    crop = np.asarray(central_crop(np.asarray(middle)))
    colour = channels(crop) == 3
    if crop.ndim == 3:  # the colour or grey channels, not an alpha
        crop = crop[..., :3] if colour else crop[..., :1]
    r = nominal_range(crop, sigma)
    if r is None:
        return params
    if colour:  # the luminance guide's span, as guide_range gives an integer stack's
        r *= float(OPPONENT[0].sum())
    return params.replace(grouped=params.grouped.replace(data_range=r))


