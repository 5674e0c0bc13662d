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
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .core.color import OPPONENT, opponent_to_rgb, rgb_to_opponent
from .core.parallel import num_threads
from .core.patches import extract_patches, patch_positions, reassemble
from .core.progress import check_cancel, report
from .core.tiles import Tile, tile_grid
from .params import DenoiseParams
from .tile_threads import MAX_AT_ONCE, tiles_at_once

__all__ = ["DEFAULT_TILE", "GLOBAL_PATCH_SIZE", "plan", "denoise_tile", "denoise_tiled",
           "luminance", "LazyLuminance", "channels", "colour_part", "training_patches",
           "merge_grouped_stats", "plan_stack", "denoise_stack_tile", "denoise_stack_tiled",
           "resolve_stack", "settle_stack_range", "stack_plan", "nominal_range",
           "STACK_TILE_BYTES", "denoise_with_model"]

GLOBAL_PATCH_SIZE = 8
#: core side of a tile per method when ``DenoiseParams.tile_size`` is None
DEFAULT_TILE = {"grouped": 1024, "global": 256}
#: the pages' working set of one tile of the stack path when ``DenoiseParams.tile_size``
#: is None (bytes, :func:`~.core.grouped.sequence.stack_bytes`): a tile of the pages
#: carries them all, streamed.  A stack held in memory: a 1024x1024 grey stack is one
#: tile (its halo of about 166 px made 16 tiles of 256 px cores recompute much of the
#: page); a lazy one (read tile by tile, each task holding its region of every page):
#: ``LAZY_STACK_TILE_BYTES`` (``docs/stacks.md#memory``)
STACK_TILE_BYTES = 1280 << 20
LAZY_STACK_TILE_BYTES = 400 << 20
#: rows converted to float64 at a time when a whole image is read (luminance)
_ROWS = 256


# -- the working space ----------------------------------------------------------------


def _to_working(image: np.ndarray, vst=None) -> tuple[np.ndarray, np.ndarray | None, bool]:
    """(H, W[, C]) any dtype -> (H, W, c) float64 channels to denoise, alpha, is_colour.

    Colour goes to the orthonormal opponent space; alpha is kept aside untouched.
    A variance-stabilising transform ``vst`` applies to each colour channel first.
    """
    a = np.asarray(image)
    if a.ndim == 2:
        a = a[..., None]
    if a.ndim == 3 and a.shape[2] in (1, 2, 3, 4):
        colour = colour_part(a)
        alpha = a[..., -1].copy() if colour is not a else None
        a = colour
        if vst is not None:
            a = vst.forward(a)
        if a.shape[2] == 1:
            return a.astype(np.float64), alpha, False
        return rgb_to_opponent(a), alpha, True
    raise ValueError(
        f"expected a grayscale (H, W) or colour (H, W, 3|4) image, got shape {a.shape}"
    )


def _from_working(work: np.ndarray, alpha, colour: bool, like: np.ndarray, vst=None) -> np.ndarray:
    out = opponent_to_rgb(work) if colour else work
    if vst is not None:
        out = vst.inverse(out)  # the exact unbiased inverse, per colour channel
    if like.ndim == 2:
        out = out[..., 0]
    if alpha is not None:
        out = np.concatenate([out, alpha[..., None].astype(np.float64)], axis=-1)
    return _cast_like(out, like)


def _cast_like(values: np.ndarray, like: np.ndarray) -> np.ndarray:
    """Values in ``like``'s dtype: rounded and clipped to the range of integer types.

    Values already of that dtype are returned as they are, not copied: rounding
    and clipping a whole 81 Mpx image took 4 bytes per pixel of temporaries.
    """
    dt = like.dtype
    if np.asarray(values).dtype == dt:
        return np.asarray(values)
    if np.issubdtype(dt, np.integer):
        info = np.iinfo(dt)
        return np.clip(np.rint(values), info.min, info.max).astype(dt)
    return np.asarray(values).astype(dt)


def colour_part(image: np.ndarray) -> np.ndarray:
    """An (H, W, 2|4) image without its alpha channel (a view); any other image itself."""
    a = np.asarray(image)
    return a[..., :-1] if a.ndim == 3 and a.shape[2] in (2, 4) else a


def channels(image: np.ndarray) -> int:
    """Channels the methods denoise: 3 for colour (with or without alpha), else 1."""
    a = np.asarray(image)
    if a.ndim == 2 or (a.ndim == 3 and a.shape[2] in (1, 2)):
        return 1
    if a.ndim == 3 and a.shape[2] in (3, 4):
        return 3
    _to_working(a[:1, :1])  # raises the message for a bad shape
    return 1


def luminance(image: np.ndarray):
    """The first working channel (H, W), for the noise estimator: a grey image's
    own pixels (a view, in its dtype: the estimator converts only the blocks it
    samples), or for colour a :class:`LazyLuminance` that computes the opponent
    luminance of only the slices asked for (no float64 plane of the image)."""
    a = np.asarray(image)
    if channels(a) == 1:
        return a if a.ndim == 2 else a[..., 0]
    return LazyLuminance(a)


def luminance_bounds(image: np.ndarray) -> tuple[float, float] | None:
    """The values :func:`luminance` takes where every channel is clipped to its
    integer type's limits (0 and 255 for 8 bits), for the noise estimator; None for
    a float image (no known clipping)."""
    a = np.asarray(image)
    if not np.issubdtype(a.dtype, np.integer):
        return None
    info = np.iinfo(a.dtype)
    scale = 1.0 if channels(a) == 1 else float(OPPONENT[0].sum())
    return float(info.min) * scale, float(info.max) * scale


class LazyLuminance:
    """The opponent luminance of a colour image (H, W, 3|4) as a read-only 2-D
    array-like: ``lum[ys, xs]`` converts that block to float64 only, and
    ``np.asarray(lum)`` the whole plane, a band of rows at a time."""

    ndim = 2
    dtype = np.dtype(np.float64)

    def __init__(self, image: np.ndarray):
        self._a = image
        self.shape = image.shape[:2]

    def __getitem__(self, key) -> np.ndarray:
        if not (isinstance(key, tuple) and len(key) == 2
                and all(isinstance(k, slice) for k in key)):
            raise TypeError("LazyLuminance takes two slices, lum[y0:y1, x0:x1]")
        return np.asarray(self._a[key][..., :3], dtype=np.float64) @ OPPONENT[0]

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        out = np.empty(self.shape)
        for s in range(0, self.shape[0], _ROWS):
            out[s:s + _ROWS] = self[s:s + _ROWS, :]
        return out if dtype is None else out.astype(dtype, copy=False)


# -- geometry -------------------------------------------------------------------------


def _grouped_geometry(params: DenoiseParams, noise: tuple | None = None) -> tuple[int, int]:
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
    return _grouped_geometry(params, (sigma, _guide_range(np.asarray(image).dtype, vst, c == 3), c))


def _stack_geometry(params: DenoiseParams, shifts: np.ndarray, reach=None) -> tuple[int, int]:
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


def _global_geometry(params: DenoiseParams) -> tuple[int, int, int, int]:
    """(halo, align, patch size, stride) of the global method."""
    p = params.patch_size or GLOBAL_PATCH_SIZE
    stride = params.stride or max(1, p // 2)
    return p, stride, p, stride


def plan(shape: tuple[int, ...], params: DenoiseParams) -> list[Tile]:
    """The tiles of an image of ``shape`` (H, W[, C]) for ``params.method``."""
    if params.method == "grouped":
        halo, align = _grouped_geometry(params)
    else:
        halo, align, _, _ = _global_geometry(params)
    side = params.tile_size or DEFAULT_TILE[params.method]
    return tile_grid(shape[:2], max(side, align), halo, align)


def plan_stack(shape: tuple[int, ...], params: DenoiseParams, shifts: np.ndarray,
               reach=None, lazy: bool = False) -> list[Tile]:
    """The spatial tiles of a stack of pages of ``shape`` (P, H, W[, C]) for the stack
    path: every tile carries all the pages (they are streamed, :mod:`.core.grouped.sequence`)
    and the halo :func:`_stack_geometry`.  The core side is ``params.tile_size``, or
    what keeps a tile's working set (:func:`~.core.grouped.sequence.stack_bytes` per
    pixel) within :data:`STACK_TILE_BYTES` (less where memory is short, :func:`_stack_budget`),
    or :data:`LAZY_STACK_TILE_BYTES` for a ``lazy`` stack (its tasks also hold their
    region's input and outputs on every page)."""
    from .core.grouped.sequence import StackReach, stack_bytes

    reach = reach or StackReach()
    halo, align = _stack_geometry(params, shifts, reach)
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
        return _to_working(np.asarray(self.block[k]), self.vst)[0]


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
        done = {rk: _from_working(o[core], alpha, colour, like, vst) for rk, o in est.items()}
        if sink is not None:
            sink(k, done)
            return
        for rk, o in done.items():
            if rk not in outs:
                outs[rk] = np.empty((pages.shape[0],) + o.shape, o.dtype)
            outs[rk][k] = o

    _, stats = denoise_grouped_stack(
        pages, sigma, ranks=tuple(params.ranks),
        options=params.grouped_options(_guide_range(first.dtype, vst, colour)),
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
    work, _, colour = _to_working(region, vst)
    opts = calibrate_stack([work[..., c] for c in range(work.shape[2])], sigma,
                           params.grouped_options(_guide_range(region.dtype, vst, colour)))
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
    work, _, _ = _to_working(stack, vst)  # a (k, p*p, c) "image" of patches
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


def working_range(dtype, vst=None) -> float | None:
    """The span of the working values of an image of ``dtype``: its integer type's
    range (through the variance-stabilising transform ``vst``, the smallest over the
    colour channels); None for floats, whose range the type does not say."""
    dtype = np.dtype(dtype)
    if not np.issubdtype(dtype, np.integer):
        return None
    info = np.iinfo(dtype)
    lo, hi = float(info.min), float(info.max)
    if vst is None:
        return hi - lo
    ends = vst.forward(np.array([[[lo], [hi]]]))  # (1, 2, C) after broadcasting
    return float(np.min(ends[0, 1] - ends[0, 0]))


#: the ranges a float image conventionally holds: [0, 1], and 8, 12 and 16 bits as floats
NOMINAL_RANGES = (1.0, 255.0, 4095.0, 65535.0)


def nominal_range(values: np.ndarray, sigma: float) -> float | None:
    """The conventional range ``[0, R]`` (:data:`NOMINAL_RANGES`, the smallest) a float
    image holds, noise aside: its 0.1 and 99.9 percentiles within 4 ``sigma`` of it, and
    ``sigma`` at most half of it (a range the noise would swamp is not the image's);
    None when none holds them (values far below zero, physical units)."""
    lo, hi = np.percentile(np.asarray(values, dtype=np.float64), [0.1, 99.9])
    margin = 4.0 * float(sigma)
    return next((r for r in NOMINAL_RANGES
                 if sigma <= r / 2 and lo >= -margin and hi <= r + margin), None)


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
    if colour:  # the luminance guide's span, as _guide_range gives an integer stack's
        r *= float(OPPONENT[0].sum())
    return params.replace(grouped=params.grouped.replace(data_range=r))


def _guide_range(dtype, vst, colour: bool) -> float | None:
    """The grouped method's ``data_range`` of a region: the working range, for colour
    the span of the luminance (the guide channel)."""
    rng = working_range(dtype, vst)
    if rng is not None and colour:
        rng *= float(OPPONENT[0].sum())
    return rng


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
    work, alpha, colour = _to_working(region, vst)
    core = tile.core_in_region
    if params.method == "grouped":  # the halo's own pixels are never written: not computed
        outs, stats = _denoise_region_grouped(
            work, sigma, params, progress, cancel, _guide_range(region.dtype, vst, colour),
            core=(core[0].start, core[0].stop, core[1].start, core[1].stop))
    else:
        _, _, p, stride = _global_geometry(params)
        outs, stats = _denoise_region_global(work, model, ranks, p, stride, cancel)
    a = alpha[core] if alpha is not None else None
    like = region[:1, :1]
    return {r: _from_working(o[core], a, colour, like, vst) for r, o in outs.items()}, stats


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
    work, _, colour = _to_working(region, vst)
    chans = [np.ascontiguousarray(work[..., c]) for c in range(work.shape[2])]
    opts = params.grouped_options(_guide_range(region.dtype, vst, colour))
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
