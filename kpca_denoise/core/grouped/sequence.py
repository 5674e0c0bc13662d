"""The grouped method on a sequence of pages (a stack, a time-lapse, a burst): the
groups of page ``k`` take their members from page ``k`` and from its neighbours
``k - w .. k + w``.

Everything but the grouping is the single-image method's (:mod:`.driver`): the same
two passes, the same kernel PCA per group, shrinkage and fixed-point pre-image.  A
reference patch's own-page members come from :func:`.matching.match`; on each
neighbour page the search follows the motion (:mod:`.cross_pages`): around where the
best match of the page before went, moved by the two pages' global shift (phase
correlation, :func:`.motion.page_shifts`), ``radius`` pixels either way (VBM3D's
predictive search).  The
``n`` closest of the own-page members and of every neighbour candidate make the
group, and every member's estimate is averaged into its own page, so that a page
also gets the estimates of its neighbours' groups.  Members are 3-D patches (their
slices on the pages either side, along the global motion), and so are the matching
windows: a page's guide holds its neighbours' slices as channels.  ``docs/stacks.md``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np
from numba import njit

from kpca_denoise.core.parallel import run_parts
from kpca_denoise.core.patches import accumulate_groups, patch_positions
from kpca_denoise.core.progress import ProgressCallback, check_cancel, report

from . import driver
from .calibrate import calibrate
from .cross_pages import CrossSearch, PageStack, candidate_offsets, cross_match
from .driver import CHUNK_GROUPS, resolve_options, trial_denoiser
from .geometry import HIGH_NOISE
from .group_pca import noise_floors
from .matching import exact_sums, match, pad_for_matching, quantise_guide, search_mask
from .motion import page_shifts, steady_shifts
from .options import GroupedOptions
from .run import GROUP_SIZE1, check_inputs, plan_pass, resolve_run, run_params
from .slices import THIN, THIN_STAGES, depth_pages, motion_track, page_references
from .stats import ChannelStats, run_chunk_parts
from .steps import estimate_groups, part_bounds

__all__ = ["denoise_grouped_stack", "calibrate_stack",
           "stack_bytes", "StackReach", "page_reach", "spatial_reach", "WINDOW", "RADIUS",
           "DEPTH"]

#: neighbour pages on each side a page's groups reach by default
WINDOW = 8
#: pixels searched either way around where a patch is predicted on a neighbour page
RADIUS = 2
#: pages each patch spans: a member is the ``p x p`` patch on its page and on the
#: pages either side (where the global motion carries it), one ``DEPTH p^2`` vector
DEPTH = 3
#: stage-1 patches per group above :data:`~.geometry.HIGH_NOISE` of the data range
#: (the single image's 40 below it, or ``group_size1`` when set); the search along the
#: pages still stops where no candidate would join the closest 40 (``docs/stacks.md``)
HIGH_NOISE_GROUP1 = 64
#: there too, the stage-1 matching window is the patch + 6 (the single image's + 8:
#: a stack's windows span :data:`DEPTH` pages) and the own-page search reaches 16
#: pixels (the neighbour pages offer the rest), unless set (``docs/stacks.md``)
HIGH_NOISE_MATCH_EXTRA1 = 6
HIGH_NOISE_RADIUS1 = 16
#: the final pass's search on a page's own patches reaches this many pixels (a single
#: image's 32), unless ``search_radius`` is set: its neighbour pages offer the rest
#: of a group (``docs/stacks.md``)
RADIUS2 = 16
#: the final pass starts from its own grid (the single image's stage-2 stride, 5 px
#: with 5x5 patches), not the pilot's (4 px); each page's references are a
#: checkerboard of either (docs/stacks.md)
STAGE2_GRID = True
#: a page's chunk holds this many times the groups whose 3-D patches fill a single
#: image's chunk (:data:`.driver.CHUNK_GROUPS`): each chunk's steps end waiting for
#: the slower thread, so fewer, larger chunks keep both busy; the pilot's matching
#: distances then take about 60 MB (docs/speed.md#larger-chunks-for-stacks)
STACK_CHUNKS = 4


# -- reach: what a page's result depends on ---------------------------------------------


@dataclass(frozen=True)
class StackReach:
    """How far the stack path's groups reach: pages, pixels, and pages per patch.

    How far the stack path's groups reach: ``window`` pages either way, ``radius``
    pixels around where the motion predicts a patch, ``depth`` pages per patch (the
    keywords of :func:`denoise_grouped_stack`)."""

    window: int = WINDOW
    radius: int = RADIUS
    depth: int = DEPTH

    def keywords(self) -> dict:
        """Return the reach as :func:`denoise_grouped_stack`'s keywords."""
        return dict(window=self.window, radius=self.radius, depth=self.depth)


def page_reach(window: int = WINDOW, depth: int = DEPTH) -> int:
    """Return how many pages either side of a reference page its groups read and write.

    Pages either side of a reference page that its groups read and write to: the
    ``window`` of the cross-page search plus the slices of a ``depth``-page patch."""
    return max(0, int(window)) + (max(1, int(depth)) | 1) // 2


def motion_reach(shifts: np.ndarray, pages: int) -> int:
    """Return the farthest the global shifts carry content over a few pages.

    The farthest (pixels, either axis) the global ``shifts`` (P - 1, 2) carry content
    over at most ``pages`` consecutive pages."""
    s = np.asarray(shifts, dtype=np.int64).reshape(-1, 2)
    S = np.concatenate([np.zeros((1, 2), np.int64), np.cumsum(s, axis=0)])
    far = 0
    for j in range(1, min(int(pages), len(S) - 1) + 1):
        far = max(far, int(np.abs(S[j:] - S[:-j]).max()))
    return far


def spatial_reach(shifts: np.ndarray, window: int = WINDOW, radius: int = RADIUS,
                  depth: int = DEPTH, search: int = 0) -> int:
    """Return the farthest a reference's members and their slices lie from it.

    The farthest (pixels, either axis) a reference's members and their slices lie
    from it: ``search`` on its own page, on the neighbours the global motion over up
    to ``window`` pages and ``radius`` more on each page the search follows, plus the
    motion over the patch's depth."""
    w, R = max(0, int(window)), max(0, int(radius))
    follow = max([motion_reach(shifts, j) + j * R for j in range(1, w + 1)], default=0)
    return max(int(search), follow) + motion_reach(shifts, (max(1, int(depth)) | 1) // 2)


def stack_bytes(n_ranks: int = 1, window: int = WINDOW, depth: int = DEPTH,
                two_stage: bool = True, match_depth: int | None = None) -> int:
    """Return the bytes per page pixel and channel the stack path holds at once.

    Bytes per page pixel and channel the stack path holds at once, whatever the
    number of pages (:func:`denoise_grouped_stack` streams them): as float32, ``4 e + 1``
    noisy pages, ``2 e + 1`` of the pilot and each stage's guides of ``2 window + 1``
    pages (``match_depth`` slices each; stage 2 puts ``(depth - match_depth) / 2`` more
    ahead); as float64, each stage's sums and weights per rank, ``2 e + 1`` pages (``e``
    = :func:`page_reach`).  One stage: ``2 e + 1`` noisy pages, guides, sums and weights.
    ``docs/stacks.md#memory``."""
    e, nr = page_reach(window, depth), max(1, int(n_ranks))
    d = max(1, int(depth)) | 1
    md = d if match_depth is None else min(max(1, int(match_depth)) | 1, d)
    g = 2 * max(0, int(window)) + 1
    if two_stage:
        f32 = (4 * e + 1) + (2 * e + 1) + md * g + md * (g + (d - md) // 2)
        return 4 * f32 + 8 * (2 * e + 1) * (2 + 2 * nr)
    return 4 * ((2 * e + 1) + md * g) + 8 * (2 * e + 1) * 2 * nr


# -- the driver ----------------------------------------------------------------------


def calibrate_stack(page: list, sigma: float, options: Any = None,
                    cancel: Any = None) -> GroupedOptions:
    """Decide the stack path's image-dependent options on one page.

    The stack path's options with the image-dependent decisions made on ``page`` (the
    middle page's channels, or their central crop: the same decisions), as
    :func:`denoise_grouped_stack` makes them; every tile of a stack gets these."""
    chans = [np.ascontiguousarray(c, dtype=np.float64) for c in page]
    return calibrate(chans, float(sigma), resolve_options(options), trial_denoiser(cancel)).options


def _high_noise_groups(o: GroupedOptions, run, sigma: float, shape: tuple) -> bool:
    """Whether the pilot's groups take :data:`HIGH_NOISE_GROUP1` patches: sigma above
    :data:`~.geometry.HIGH_NOISE` of a known data range (a regular texture's own noise
    measure aside), ``group_size1`` not set, and a corner reference's own page offering
    that many candidates (a tiny page keeps its clipped size)."""
    if o.group_size1 is not None or o.data_range is None or run.n1 != GROUP_SIZE1:
        return False
    g = run.geometry
    return (sigma / float(o.data_range) > HIGH_NOISE
            and _corner_candidates(shape, g.search_radius1, g.patch_size) >= HIGH_NOISE_GROUP1)


def _corner_candidates(shape: tuple, radius: int, p: int) -> int:
    """The positions a corner reference's search of ``radius`` finds on a page of
    ``shape`` (the fewest any reference has)."""
    fewest = 1
    for side in shape:
        fewest *= min(radius + 1, side - p + 1)
    return fewest


def _own_page_run(run, shape: tuple):
    """``run`` with the final pass's own-page search of :data:`RADIUS2` where the
    options leave it to the stack path (never larger; a regular texture keeps its
    wider search, which reaches its repeats) and a corner reference's own page still
    offers the final groups' size."""
    o, g = run.options, run.geometry
    r2 = min(g.search_radius, RADIUS2)
    if (o.periodic or o.search_radius is not None
            or _corner_candidates(shape, r2, g.patch_size) < run.n2):
        return run
    return replace(run, geometry=replace(g, search_radius=r2))


def _high_noise_run(run):
    """``run`` with the stack path's high-noise pilot: groups of
    :data:`HIGH_NOISE_GROUP1`, a stage-1 window of the patch +
    :data:`HIGH_NOISE_MATCH_EXTRA1` and an own-page search of
    :data:`HIGH_NOISE_RADIUS1` where the options leave them to it (never larger)."""
    o, g = run.options, run.geometry
    m1 = g.match_size1 if o.match_size1 is not None else min(
        g.match_size1, g.patch_size + HIGH_NOISE_MATCH_EXTRA1)
    r1 = g.search_radius1 if o.search_radius1 is not None or o.search_radius is not None \
        else min(g.search_radius1, HIGH_NOISE_RADIUS1)
    return replace(run, n1=HIGH_NOISE_GROUP1,
                   geometry=replace(g, match_size1=m1, search_radius1=r1))


def denoise_grouped_stack(stack: Any, sigma: float, *, ranks: Sequence = (None,),
                          options: Any = None, window: int = WINDOW, radius: int = RADIUS,
                          linked: np.ndarray | None = None, shifts: np.ndarray | None = None,
                          depth: int = DEPTH, match_depth: int | None = None,
                          progress: ProgressCallback | None = None,
                          cancel: Any = None, sink: Any = None,
                          core: Sequence[int] | None = None, thin: bool = THIN,
                          first_page: int = 0, **overrides: Any) -> tuple[dict, list]:
    """Denoise a stack of pages whose groups reach the neighbouring pages.

    Denoise a stack ``(P, H, W, C)`` of float pages whose channels share one set of
    groups (as :func:`.driver.denoise_grouped_channels`), with groups reaching
    ``window`` pages either way.

    ``stack`` is any array-like whose ``stack[k]`` gives page ``k``; the pages are read
    in order and at most :func:`stack_bytes` per page pixel are held at once, so
    the memory does not grow with the number of pages.  ``sink(k, {rank: (H, W, C)})``,
    when given, receives each page's result as soon as it is final (nothing is kept
    and the returned dict is empty).  ``core`` (y0, y1, x0, x1): only the groups these
    pixels of the pages depend on are computed (a tile's core; the other pixels are
    not the whole stack's).

    ``linked`` (P - 1 bools, default all) says which neighbouring pages are of one
    scene: a group never crosses an unlinked pair.  ``depth`` (odd) pages make a
    patch: its slices on the pages either side follow the global motion (1: plain
    2-D patches); ``match_depth`` (odd, at most and by default ``depth``) pages make a
    matching window.  ``thin``: each page's groups start from half its reference
    grid (:func:`.slices.page_references`); ``first_page``, the index of ``stack[0]``
    in the whole sequence (a preview's pages), keeps that half the whole sequence's.
    ``shifts`` (P - 1, 2) are the global shifts from page to page
    (default :func:`page_shifts` on channel 0).  The image-dependent decisions are made
    on the middle page (:func:`calibrate_stack`; given options keep theirs).
    Progress: ``"page"`` per reference page done, the two passes' (interleaved) counted
    as the first pass's ``P`` pages and then the second's.

    Returns ``({rank: (P, H, W, C) float64}, stats)``: per channel, as the driver's,
    plus ``sequence``: the window, radius, shifts, links and, per page, the share of
    its groups' members that came from each relative page ``-window .. window``.
    """
    t_all = time.perf_counter()
    shape = tuple(getattr(stack, "shape", ()))
    if len(shape) != 4 or shape[0] < 1 or shape[3] < 1:
        raise ValueError(f"stack must be 4-D (P, H, W, C), got shape {shape}")
    P, H, W, C = shape

    def read(k: int) -> list:
        page = np.asarray(stack[k])
        return check_inputs([page[..., c] for c in range(C)], sigma, ranks)[0]

    _, sigma, rank_list = check_inputs([np.zeros((1, 1))], sigma, ranks)
    ranks_arr = np.asarray([-1 if rk is None else int(rk) for rk in rank_list], dtype=np.int64)
    w = max(0, int(window))
    linked = (np.ones(max(P - 1, 0), np.bool_) if linked is None
              else np.ascontiguousarray(linked, dtype=np.bool_))
    if linked.shape != (max(P - 1, 0),):
        raise ValueError(f"linked must hold {max(P - 1, 0)} values, got {linked.shape}")
    if shifts is None:  # one page at a time
        shifts = steady_shifts(page_shifts(read(k)[0] for k in range(P)), linked)
    shifts = np.ascontiguousarray(shifts, dtype=np.int64).reshape(max(P - 1, 0), 2)
    middle = read(P // 2)
    cal = calibrate(middle, sigma, resolve_options(options, **overrides), trial_denoiser(cancel))
    run = resolve_run(middle, sigma, cal)
    if _high_noise_groups(cal.options, run, sigma, middle[0].shape):
        run = _high_noise_run(run)
    run = _own_page_run(run, middle[0].shape)
    del middle
    stats = [ChannelStats() for _ in range(C)]
    floors: dict = {}
    used = np.zeros((P, 2 * w + 1))
    seq = dict(P=P, w=w, R=max(0, int(radius)), shifts=shifts, linked=linked, used=used,
               depth=max(1, int(depth)) | 1, motion=motion_track(shifts, linked),
               thin=bool(thin), first_page=int(first_page), kept={},
               core=None if core is None else tuple(int(v) for v in core))
    seq["offsets"] = candidate_offsets(seq["R"])
    seq["mdepth"] = (seq["depth"] if match_depth is None
                     else min(max(1, int(match_depth)) | 1, seq["depth"]))
    results: dict = {}
    if sink is None:
        results = {rk: np.empty((P, H, W, C)) for rk in rank_list}

        def sink(k: int, outs: dict) -> None:
            for rk, o in outs.items():
                results[rk][k] = o
    _sweep(read, (P, H, W, C), rank_list, ranks_arr, run, stats, floors, seq,
           sink, progress, cancel)
    params = run_params(run, cal, floors)
    total = time.perf_counter() - t_all
    share = used / np.maximum(used.sum(axis=1, keepdims=True), 1.0)
    info = dict(window=w, radius=seq["R"], shifts=shifts.tolist(), linked=linked.tolist(),
                neighbours_used=share.tolist(), counts=used.tolist())
    all_stats = [dict(st.report(total / C, params, rank_list), sequence=info) for st in stats]
    return results, all_stats


class _Ring:
    """Pages ``k`` of a stream at slot ``k % Q`` of one tall ``(lead..., Q H, W)`` array
    per channel (the pages one above the other, as the gather reads them); ``dtype``
    float32 for pages only read (:func:`stack_bytes`), float64 for running sums."""

    def __init__(self, Q: int, H: int, W: int, C: int, lead: tuple = (),
                 dtype: Any = np.float64):
        self.Q, self.H = Q, H
        self.arrays = [np.zeros(lead + (Q * H, W), dtype) for _ in range(C)]

    def rows(self, k: int) -> slice:
        s = (k % self.Q) * self.H
        return slice(s, s + self.H)

    def put(self, k: int, chans: list) -> None:
        for a, c in zip(self.arrays, chans):
            a[..., self.rows(k), :] = c

    def get(self, k: int) -> list:
        return [a[..., self.rows(k), :] for a in self.arrays]

    def clear(self, k: int) -> None:
        for a in self.arrays:
            a[..., self.rows(k), :] = 0.0


class _Guides:
    """The quantised, padded matching guides of a stream's pages (``(Q, C, Hg, Wg)``
    float32, page ``k`` at slot ``k % Q``) and whether each keeps exact running sums.
    The quantised values are integers, exact in float32 up to 2^24 (a guide 16384
    noise stds from zero; beyond, the nearest float32, still integers)."""

    def __init__(self, Q: int, run, m: int):
        self.Q, self.run, self.m = Q, run, m
        self.g = None
        self.exact = {}

    def put(self, k: int, chans: list) -> None:
        p = self.run.geometry.patch_size
        q = quantise_guide(np.stack([pad_for_matching(c, p, self.m) for c in chans]),
                           self.run.sigma)
        if self.g is None:
            self.g = np.zeros((self.Q,) + q.shape, np.float32)
        self.g[k % self.Q] = q
        self.exact[k] = exact_sums(self.g[k % self.Q], self.m)
        self.exact.pop(k - self.Q, None)


class SweepPass:
    """One pass of the stack's sweep: its settings, reference grid, guides and sums.

    Made by :func:`denoise_grouped_stack` for each stage."""

    def __init__(self, stage: int, final: bool, ranks: np.ndarray, run, floors: dict,
                 stats: list, shape: tuple, seq: dict, imgs: _Ring, guides: _Ring,
                 ahead: int = 0, refs: tuple | None = None):
        P, H, W, C = shape
        e = page_reach(seq["w"], seq["depth"])
        g = run.geometry
        self.stage, self.ranks, self.imgs, self.guide_pages = stage, ranks, imgs, guides
        # the pilot's grid, or stage 2's own (a single image's, sparser: STAGE2_GRID)
        self.ps = plan_pass(run, stage, final, floors)
        if not STAGE2_GRID:
            self.ps = replace(self.ps, stride=g.stride1)
        self.ps3 = _depth_pass(run, self.ps, stage, seq["depth"])
        p = g.patch_size
        # the whole grid (slices.page_references decides on it, as the untiled pages
        # would) and the part of it a core depends on (_core_refs): rows iy, columns ix
        self.grid = tuple(patch_positions(n, p, self.ps.stride) for n in (H, W))
        self.iy, self.ix = (np.arange(len(a)) for a in self.grid)
        if refs is not None:
            self.iy = self.iy[(self.grid[0] >= refs[0]) & (self.grid[0] <= refs[1])]
            self.ix = self.ix[(self.grid[1] >= refs[2]) & (self.grid[1] <= refs[3])]
        self.ys, self.xs = self.grid[0][self.iy], self.grid[1][self.ix]
        for st in stats:
            st.groups += P * len(self.ys) * len(self.xs)
        # a 3-D patch is ``depth`` times a 2-D one: as many times fewer groups per chunk
        # (:data:`STACK_CHUNKS` times more); a thinned page has half of them
        groups = (max(1, CHUNK_GROUPS * STACK_CHUNKS // seq["depth"])
                  * (2 if _thinned(seq, stage) else 1))
        self.rows_per_chunk = max(1, groups // (len(self.xs) * len(ranks)))
        self.nchunks = (len(self.ys) + self.rows_per_chunk - 1) // self.rows_per_chunk
        # the guides of the pages the search reads (``w`` either way), and those put
        # ahead of them (``ahead``)
        self.match = _Guides(2 * seq["w"] + 1 + ahead, run, self.ps.match_size)
        self.sums = _Ring(2 * e + 1, H, W, C, (len(ranks),))
        self.dens = _Ring(2 * e + 1, H, W, C, (len(ranks),))
        self.work = np.empty((int(search_mask(self.ps.search_radius, g.dense_radius,
                                              run.options.lags).sum()),
                              min(self.rows_per_chunk, len(self.ys)) * len(self.xs)))
        self.done = 0

    def result(self, k: int) -> list:
        """Return page ``k``'s estimates ``(nr, H, W)`` per channel (its sums final).

        The noisy page where no group wrote (outside what a core depends on)."""
        return [np.divide(n, d, out=np.broadcast_to(x, n.shape).astype(np.float64),
                          where=d > 0)
                for n, d, x in zip(self.sums.get(k), self.dens.get(k), self.imgs.get(k))]


def _core_refs(run, shape: tuple, core: tuple | None, seq: dict) -> tuple:
    """The reference bounds ``(y_lo, y_hi, x_lo, x_hi)`` (inclusive) of stage 1 and of
    stage 2 (None: every reference) that the pixels ``core`` (y0, y1, x0, x1) of the
    pages depend on, as :func:`.driver.region_plan` for one image with each stage's
    search radius widened to :func:`spatial_reach` (the halo of
    ``tiling.plan_stack``): the final pass's references whose members or their slices
    reach the core, and the pilot's whose groups write where those read."""
    if core is None:
        return None, None
    H, W = shape
    g = run.geometry
    p = g.patch_size
    reach = [spatial_reach(seq["shifts"], seq["w"], seq["R"], seq["depth"], search=r)
             for r in (g.search_radius1, g.search_radius)]

    def refs_for(box: tuple, R: int) -> tuple:
        y0, y1, x0, x1 = box
        return (y0 - (p - 1) - R, y1 - 1 + R, x0 - (p - 1) - R, x1 - 1 + R)

    if not run.options.two_stage:
        return refs_for(core, reach[0]), None
    refs2 = refs_for(core, reach[1])
    lo = (g.match_size - p) // 2
    hi = g.match_size - p - lo
    y_lo, y_hi, x_lo, x_hi = refs2
    pilot = (max(0, y_lo - reach[1] - lo), min(H, y_hi + reach[1] + p + hi),
             max(0, x_lo - reach[1] - lo), min(W, x_hi + reach[1] + p + hi))
    return refs_for(pilot, reach[0]), refs2


def _sweep(read, shape: tuple, rank_list: list, ranks: np.ndarray, run, stats: list,
           floors: dict, seq: dict, sink, progress, cancel) -> None:
    """Both passes in one sweep over the pages: stage 1 on reference page ``t`` while
    stage 2 runs ``2 e`` pages behind (``e`` = :func:`page_reach`), once the pilot of
    every page its groups read is final; each page's result goes to ``sink`` as soon as
    no later group reaches it.  Holds :func:`stack_bytes` per pixel, whatever ``P``."""
    P, H, W, C = shape
    e, w = page_reach(seq["w"], seq["depth"]), seq["w"]
    two = run.options.two_stage
    noisy = _Ring(4 * e + 1 if two else 2 * e + 1, H, W, C, dtype=np.float32)
    refs1, refs2 = _core_refs(run, (H, W), seq.get("core"), seq)
    if two:
        pilot = _Ring(2 * e + 1, H, W, C, dtype=np.float32)
        s1 = SweepPass(1, False, np.asarray([-1], np.int64), run, floors, stats, shape, seq,
                    noisy, noisy, refs=refs1)
        # stage 2's guides are put up to (depth - mdepth) // 2 pages ahead of its search
        s2 = SweepPass(2, True, ranks, run, floors, stats, shape, seq, noisy, pilot,
                    ahead=(seq["depth"] - seq["mdepth"]) // 2, refs=refs2)
        lag = 2 * e
    else:
        s1 = SweepPass(1, True, ranks, run, floors, stats, shape, seq, noisy, noisy, refs=refs1)
        s2, lag = None, 0
    last = s2 or s1
    loaded = 0
    for t in range(P + lag + e):
        check_cancel(cancel)
        while loaded < min(P, t + e + 1):  # the noisy pages stage 1's reference t reads
            noisy.put(loaded, read(loaded))
            loaded += 1
        if t < P:
            for k in range(0 if t == 0 else t + w, min(P, t + w + 1)):
                s1.match.put(k, _slab(noisy, k, seq, H, W))
            if t + e < P:
                s1.sums.clear(t + e)
                s1.dens.clear(t + e)
            _reference_page(s1, t, run, seq, stats, shape, progress, cancel)
        f = t - e  # no later stage-1 group reaches page f
        if s2 is not None and 0 <= f < P:
            pilot.put(f, [r[0] for r in s1.result(f)])
        h = seq["mdepth"] // 2  # a guide reads the pilot pages up to h after its own
        if s2 is not None and 0 <= f - h < P:
            s2.match.put(f - h, _slab(pilot, f - h, seq, H, W))
        b = t - lag
        if s2 is not None and 0 <= b < P:
            if b + e < P:
                s2.sums.clear(b + e)
                s2.dens.clear(b + e)
            _reference_page(s2, b, run, seq, stats, shape, progress, cancel)
        o = t - lag - e
        if 0 <= o < P:
            est = last.result(o)
            sink(o, {rk: np.stack([c[i] for c in est], axis=-1)
                     for i, rk in enumerate(rank_list)})


def _thinned(seq: dict, stage: int) -> bool:
    """Whether the pages' reference grids are thinned in ``stage``
    (:func:`.slices.page_references`)."""
    return seq["thin"] and seq["depth"] > 1 and stage in THIN_STAGES


def _page_keep(s: SweepPass, k: int, seq: dict, p: int, shape: tuple) -> np.ndarray:
    """The references of stage ``s``'s grid on page ``k`` (the part a core depends on)
    its groups start from: :func:`.slices.page_references` where the stage's pages are
    thinned, made once per page and grid (both stages share the pilot's unless
    :data:`STAGE2_GRID`) and kept while stage 2, two page reaches behind, may still
    ask."""
    if not _thinned(seq, s.stage):
        return np.ones((len(s.iy), len(s.ix)), bool)
    made = seq["kept"]
    key = (s.ps.stride, k)
    if key not in made:
        made[key] = page_references(k, s.grid, p, s.ps.stride, shape, seq["motion"],
                                    seq["depth"], seq["first_page"])
        lag = 2 * page_reach(seq["w"], seq["depth"])
        for j in [j for j in made if j[1] < k - lag]:
            del made[j]
    return made[key][np.ix_(s.iy, s.ix)]


def _reference_page(s: SweepPass, k: int, run, seq: dict, stats: list, shape: tuple,
                    progress, cancel) -> None:
    """Stage ``s``'s groups of the references on page ``k``: matched on page ``k`` and
    followed onto its neighbours, each member's estimate added to its own page's sums."""
    P, H, W, C = shape
    w = seq["w"]
    g = run.geometry
    p, ps = g.patch_size, s.ps
    m = ps.match_size
    used = seq["used"]
    guide = s.match.g[k % s.match.Q].astype(np.float64)  # the matching's own type
    keep = _page_keep(s, k, seq, p, (H, W))
    for st in stats:
        st.groups -= int(keep.size - np.count_nonzero(keep))
    for ci in range(s.nchunks):
        check_cancel(cancel)
        rows = slice(ci * s.rows_per_chunk, (ci + 1) * s.rows_per_chunk)
        yy = s.ys[rows]
        kk = keep[rows].ravel()
        ry = np.ascontiguousarray(np.repeat(yy, len(s.xs))[kk])
        rx = np.ascontiguousarray(np.tile(s.xs, len(yy))[kk])
        if not len(ry):
            continue
        t0 = time.perf_counter()
        # the own members' distances are the matching's when its sums are exact (the
        # same integers cross_match would add up), otherwise computed there
        exact = bool(s.match.exact[k])
        oy, ox, od = match(guide, ry, rx, p, m, ps.search_radius, ps.n, g.dense_radius,
                           run.options.lags, exact, s.work, distances=True)
        if not exact:
            od[:] = np.nan
        gp, gy, gx = np.empty_like(oy), np.empty_like(oy), np.empty_like(ox)
        pages = PageStack(s.match.g, P, seq["shifts"], seq["linked"], w)
        search = CrossSearch(*seq["offsets"], ps.n, min(ps.n, GROUP_SIZE1), p, m, True)
        run_parts(cross_match, len(ry), pages, k, ry, rx, oy, ox, od, search, gp, gy, gx,
                  slp=True)
        rel = np.clip(gp - k + w, 0, 2 * w)
        if ps.final:
            used[k] += np.bincount(rel.ravel(), minlength=2 * w + 1)[:2 * w + 1]
        for st in stats:
            st.seconds["grouping"] += (time.perf_counter() - t0) / C
        for ch in range(C):
            _chunk_depth(s, ch, gp, gy, gx, H, P, seq, run, stats[ch])
    # the sweep's share done: the reference pages of both passes (which run
    # interleaved), told as the first pass's pages and then the second's
    seq["refs"] = n = seq.get("refs", 0) + 1
    stage = min((n - 1) // P + 1, 2 if run.options.two_stage else 1)
    report(progress, "page", n - (stage - 1) * P, P, message=f"stage {stage}")


# -- 3-D patches -------------------------------------------------------------------------


def _slab(ring: _Ring, k: int, seq: dict, H: int, W: int) -> list:
    """Page ``k``'s matching guide: per channel, its ``mdepth`` slices (the pages of
    :func:`.slices.depth_pages`) moved onto page ``k`` by the global motion (edges
    repeated), so that a window's SSD is that of the 3-D patches."""
    S, scene = seq["motion"]
    out = []
    for q in depth_pages(np.asarray(k), seq["mdepth"], seq["P"], scene):
        q = int(q)
        dy, dx = (int(v) for v in S[q] - S[k])
        yy = np.clip(np.arange(H) + dy, 0, H - 1)
        xx = np.clip(np.arange(W) + dx, 0, W - 1)
        out += [c[np.ix_(yy, xx)] if (dy or dx) else c for c in ring.get(q)]
    return out


def _depth_pass(run, ps, stage: int, depth: int):
    """The pass's settings for patches ``depth`` pages deep: the floors and tolerance of
    ``depth p^2``-dimensional patches."""
    o = run.options
    d = depth * run.geometry.patch_size ** 2
    c = float(o.gamma_scale if stage == 1 else o.gamma_scale2)
    fl = noise_floors(run.sigma, d, ps.n, c, run.rbf, run.kappa1, run.kappa2)
    own = noise_floors(run.sigma, d, ps.n, float(o.gamma_scale), run.rbf, run.kappa1, run.kappa2)
    return replace(ps, floors=fl, floors_rest=fl.with_tau2(run.kappa2_chroma / run.kappa2),
                   tol2=ps.tol2 * depth, own_gamma=own.gamma)


@njit(cache=True, nogil=True)
def _gather_slices(img, rows, cols, p, out, r0, r1):
    """Each member's slices side by side: ``out[r, k]`` is the ``p x p`` patches of
    ``img`` at ``(rows[d, r, k], cols[d, r, k])`` for ``d = 0, 1, ...``, one after the
    other (each row-major, as :func:`.matching.gather` lays one out), for the groups
    ``r0 .. r1 - 1``."""
    D, nref, n = rows.shape
    for r in range(r0, r1):
        for k in range(n):
            for d in range(D):
                y = rows[d, r, k]
                x = cols[d, r, k]
                base = d * p * p
                for a in range(p):
                    for b in range(p):
                        out[r, k, base + a * p + b] = img[y + a, x + b]


def _chunk_depth(s: SweepPass, ch: int, gp, gy, gx, H: int, P: int, seq: dict, run,
                 st: ChannelStats) -> None:
    """As the driver's chunk, with each member (page ``gp``, at ``gy, gx``) the ``depth``
    pages around it (mirrored at the stack's ends) where the global motion carries it
    (its own page across a cut): one kernel PCA of the 3-D patches, each slice's
    estimate added to its page's sums.  The steps up to the pre-image run on parts of
    :data:`.driver.PART_GROUPS` / ``depth`` groups (a 3-D member is ``depth`` times a 2-D
    one; rounded up to a multiple of the spectrum step), whose arrays stay in the
    caches, several parts at once, one per thread (:func:`.parallel.run_in_order`); each
    part's estimates and counts are added in the parts' order on this thread, slice by
    slice (a pixel's sum in another order than whole chunks': the same to about
    1e-12)."""
    if not len(gy):
        return
    depth = seq["depth"]
    p = run.geometry.patch_size
    W = s.imgs.arrays[ch].shape[1]
    S, scene = seq["motion"]
    slices = [(q, np.clip(gy + S[q, 0] - S[gp, 0], 0, H - p),
               np.ascontiguousarray(np.clip(gx + S[q, 1] - S[gp, 1], 0, W - p)))
              for q in depth_pages(gp, depth, P, scene)]

    cols = np.stack([x for _, _, x in slices])
    every = s.ps3.spectrum_every
    part = -(-driver.PART_GROUPS // depth)
    part = -(-part // every) * every
    d = p * p
    num, den = s.sums.arrays[ch], s.dens.arrays[ch]
    bounds = part_bounds(len(gy), part)

    def compute(j: int, mine: ChannelStats) -> tuple:
        a, b = bounds[j]
        return _depth_part(s, ch, [(q[a:b], y[a:b]) for q, y, _ in slices],
                           np.ascontiguousarray(cols[:, a:b]), H, run, mine)

    def add(j: int, est: tuple) -> None:
        a, b = bounds[j]
        Est, aggw = est
        for i, (q, y, x) in enumerate(slices):
            accumulate_groups(Est[..., i * d:(i + 1) * d], aggw,
                              _ring_rows(s.sums, q[a:b], y[a:b], H), x[a:b], p, num, den,
                              run.window)

    # the parts at once on the threads, each part's sums added in order (the same sums)
    for k, v in run_chunk_parts(st, len(bounds), compute, add).items():
        st.seconds[k] += v


def _ring_rows(ring: _Ring, q, y, H: int) -> np.ndarray:
    """The rows of ``ring``'s arrays where pages ``q`` have their rows ``y`` (pages ``H``
    rows high, page ``q`` at slot ``q % ring.Q``)."""
    return np.ascontiguousarray((q % ring.Q) * H + y)


def _depth_part(s: SweepPass, ch: int, slices: list, cols: np.ndarray, H: int, run,
                st: ChannelStats) -> tuple:
    """The steps of :func:`_chunk_depth` up to the pre-image for a part of its groups
    (``slices``: each slice's pages and rows, ``cols`` its columns): the 3-D members
    gathered, then :func:`.steps.estimate_groups`; returns ``(Est, aggw)``."""
    p = run.geometry.patch_size

    def members(ring: _Ring) -> np.ndarray:
        out = np.empty(cols.shape[1:] + (len(slices) * p * p,))
        run_parts(_gather_slices, cols.shape[1], ring.arrays[ch],
                  np.stack([_ring_rows(ring, q, y, H) for q, y in slices]),
                  cols, p, out)
        return out

    t0 = time.perf_counter()
    X = members(s.imgs)
    G = members(s.guide_pages) if s.ps3.stage == 2 else X
    st.seconds["grouping"] += time.perf_counter() - t0
    return estimate_groups(X, G, ch, s.ranks, run, s.ps3, st)
