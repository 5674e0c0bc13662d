"""The grouped method's driver: options resolved once, then two passes over the
image (stage 1 on the noisy image, stage 2 guided by the stage-1 pilot), each pass a
loop over chunks of reference rows: matching, group kernel PCA, shrinkage,
pre-image, overlap averaging.

A *core* (a region of interest, :func:`region_plan`) limits the work to what the
core's pixels depend on: a tile or a preview writes only its core.

Progress is reported and cancellation checked between chunks.  Results are
deterministic: parallel loops write only their own slots and the overlap averaging
is serial.  The method and its equations: ``docs/method.md``; the knobs:
``docs/options.md``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import numpy as np

from kpca_denoise.core.patches import accumulate_groups, patch_positions
from kpca_denoise.core.progress import ProgressCallback, check_cancel, report

from .calibrate import calibrate
from .matching import (exact_sums, gather, interleave_guide, match, match_from_groups,
                       pad_for_matching, quantise_guide, search_mask)
from .options import GroupedOptions
from .run import PassSettings, Run, check_inputs, plan_pass, resolve_run, run_params
from .stats import ChannelStats, run_chunk_parts, spectrum_every
from .steps import estimate_groups, part_bounds

__all__ = ["denoise_grouped", "denoise_grouped_channels", "resolve_options", "trial_denoiser",
           "region_plan", "RegionPlan", "PassRegion"]

#: groups per chunk: a few tens of MB of buffers, and progress between chunks
CHUNK_GROUPS = 2048
#: groups of a chunk taken through every step together (gather to overlap average): a
#: part's arrays (about 60 kB a group) stay in the caches from one step to the next,
#: which a whole chunk's (over 100 MB) do not; a multiple of every spectrum step
#: (docs/speed.md#a-chunks-steps-on-parts-of-it)
PART_GROUPS = 256
#: a pilot pass takes the references whose matching window is flat, its variance on the
#: noisy image (mean over the channels) below ``(1 + FLAT_PILOT) sigma^2``, only on every
#: other row and column of the reference grid (None: every reference)
FLAT_PILOT: float | None = 0.0
#: stage 2's candidates, ``(core, reach)`` of :func:`.matching.match_predicted`: those
#: within ``core`` px of the reference and within ``reach`` of each member of its pilot
#: group (None: the whole search window; docs/speed.md#stage-2s-predicted-search)
PREDICT: tuple | None = (3, 1)
#: the pilot's holes (:func:`fill_holes`) take their members from a kept neighbour's
#: candidates as stage 2 does (False: a full search;
#: docs/speed.md#the-pilots-holes-30-nov-night)
HOLES_PREDICTED = True

Options = "GroupedOptions | str | Mapping[str, Any] | None"


def resolve_options(options: Options = None, **overrides: Any) -> GroupedOptions:
    """Resolve one :class:`GroupedOptions` from an object, a preset name or a mapping.

    One :class:`GroupedOptions` from an object, a preset name or a mapping, with
    ``overrides`` (knob names) applied; an unknown name is refused."""
    opts = GroupedOptions.coerce(options)
    if overrides:
        opts = GroupedOptions.from_dict({**opts.changed(), **overrides})
    return opts



def denoise_grouped(image: np.ndarray, sigma: float, *, ranks: Sequence[int | None] = (None,),
                    options: Options = None, progress: ProgressCallback | None = None,
                    cancel: Any = None, core: Sequence[int] | None = None,
                    **overrides: Any) -> tuple[dict, dict]:
    """Denoise a single-channel image with two-stage grouped (non-local) kernel PCA.

    Parameters
    ----------
    image : ndarray, shape (H, W)
        Noisy image, float (any value range; ``sigma`` in the same units).
    sigma : float
        Standard deviation of the additive white Gaussian noise, > 0.
    ranks : sequence of int or None
        Caps on the kernel components kept per group of the final stage, on top of
        the shrinkage (None: no cap); all come from one eigendecomposition per group.
    options : GroupedOptions, preset name or mapping, optional
        The method's knobs (``docs/options.md``); ``overrides`` (knob names as
        keywords, such as ``kappa1=4.0``) are applied on top.
    progress, cancel
        Progress callback (stages :data:`.stats.STAGES`) and cancel token, between chunks.
    core : (y0, y1, x0, x1), optional
        The region of interest: only the groups its pixels depend on are computed
        (:func:`region_plan`); its pixels are those of the whole call, the others the
        input's.  None: the whole image.

    Returns
    -------
    ``({rank: (H, W) float64}, stats)``: the stats hold the pre-image counters, the
    time per stage, the final stage's mean spectrum, the mean kept components per
    rank (``effective_rank``) and the resolved parameters (``params``).
    """
    img = np.asarray(image)
    if img.ndim != 2:
        raise ValueError(f"image must be 2-D (H, W), got shape {img.shape}")
    results, stats = _denoise_channels([img], sigma, ranks, resolve_options(options, **overrides),
                                       progress, cancel, core)
    return results[0], stats[0]


def denoise_grouped_channels(image: np.ndarray, sigma: float, *,
                             ranks: Sequence[int | None] = (None,), options: Options = None,
                             progress: ProgressCallback | None = None, cancel: Any = None,
                             core: Sequence[int] | None = None,
                             **overrides: Any) -> tuple[dict, list]:
    """Denoise an (H, W, C) image whose channels share one set of groups.

    Denoise an (H, W, C) image whose channels share one set of groups, matched on
    all channels (the summed SSD; for orthonormal opponent colour channels, the SSD
    in RGB).  Parameters (``core`` too) as :func:`denoise_grouped`;
    ``options.data_range`` is that of channel 0.  Returns ``{rank: (H, W, C) float64}``
    and one stats dict per channel (the shared matching time split evenly between them)."""
    img = np.asarray(image)
    if img.ndim != 3 or img.shape[2] < 1:
        raise ValueError(f"image must be 3-D (H, W, C), got shape {img.shape}")
    results, stats = _denoise_channels([img[..., c] for c in range(img.shape[2])], sigma, ranks,
                                       resolve_options(options, **overrides), progress, cancel,
                                       core)
    return _interleave(results), stats


def _interleave(results: list) -> dict:
    """``{rank: (H, W, C)}`` from per channel ``{rank: (H, W)}``, ``results`` emptied
    as it goes: each channel's estimates (all its ranks in one array) are freed once
    copied, and each rank interleaved alone, so that the ranks' estimates are never
    held twice."""
    ranks = list(results[0])
    planes = {rk: np.empty((len(results),) + results[0][rk].shape) for rk in ranks}
    for c in range(len(results)):
        chan, results[c] = results[c], None
        for rk in ranks:
            planes[rk][c] = chan[rk]
        del chan
    for rk in ranks:
        planes[rk] = np.ascontiguousarray(np.moveaxis(planes[rk], 0, -1))
    return planes


def trial_denoiser(cancel: Any = None):
    """Return the denoiser the calibration's trial runs.

    The denoiser :func:`.calibrate.calibrate` runs its trial with: channels, sigma
    and options in, the no-cap estimates out."""
    def denoise(chans: list, sigma: float, options: GroupedOptions) -> list:
        return [r[None] for r in _denoise_channels(chans, sigma, (None,), options, None,
                                                   cancel)[0]]
    return denoise


# -- a region of interest -------------------------------------------------------------


def _check_core(core: Any, shape: tuple) -> tuple | None:
    """``core`` as four ints ``(y0, y1, x0, x1)`` inside an image of ``shape``, None for
    the whole image (None or all of it), or a ValueError naming what is wrong."""
    if core is None:
        return None
    H, W = shape
    try:
        y0, y1, x0, x1 = (int(v) for v in core)
    except (TypeError, ValueError):
        raise ValueError(f"core must be (y0, y1, x0, x1) in pixels, got {core!r}") from None
    if not (0 <= y0 < y1 <= H and 0 <= x0 < x1 <= W):
        raise ValueError(f"core {(y0, y1, x0, x1)} is not a non-empty rectangle inside the "
                         f"image {H}x{W}")
    return None if (y0, y1, x0, x1) == (0, H, 0, W) else (y0, y1, x0, x1)


@dataclass(frozen=True)
class PassRegion:
    """What one pass computes for a core: its references and the pixels it gets right.

    What one pass computes for a core: the bounds ``(y_lo, y_hi, x_lo, x_hi)``
    (inclusive) of its reference positions, those whose groups can write into
    ``exact``, the pixels ``(y0, y1, x0, x1)`` whose estimates it gets right (the
    others are the input's)."""

    refs: tuple
    exact: tuple


@dataclass(frozen=True)
class RegionPlan:
    """A core's passes (:func:`region_plan`); ``stage2`` None for a single stage."""

    stage1: PassRegion
    stage2: PassRegion | None


def region_plan(run: Run, shape: tuple, core: tuple | None) -> RegionPlan | None:
    """Plan what a core of an image depends on, pass by pass.

    What a ``core`` (y0, y1, x0, x1) of an image of ``shape`` depends on, per pass
    (None: the whole image).  A group writes within ``R + p`` of its reference (its
    members lie up to the search radius ``R`` away), so the final pass computes the
    references within ``R + p`` of the core; stage 2 reads the pilot at its groups'
    members and, when it matches again (``regroup``), in the matching windows of its
    candidates (``(m - p) / 2`` beyond a patch); stage 1 computes the references whose
    groups write there.  Without ``regroup``, stage 2's groups are stage 1's (searched
    within ``search_radius1``, matched on the noisy image).
    ``docs/large-images.md#what-a-tile-computes``."""
    if core is None:
        return None
    H, W = shape
    g = run.geometry
    p = g.patch_size

    def refs_for(box: tuple, R: int) -> tuple:
        y0, y1, x0, x1 = box
        return (y0 - (p - 1) - R, y1 - 1 + R, x0 - (p - 1) - R, x1 - 1 + R)

    def reads(refs: tuple, R: int, m: int) -> tuple:
        lo = (m - p) // 2
        hi = m - p - lo
        y_lo, y_hi, x_lo, x_hi = refs
        return (max(0, y_lo - R - lo), min(H, y_hi + R + p + hi),
                max(0, x_lo - R - lo), min(W, x_hi + R + p + hi))

    if not run.options.two_stage:
        return RegionPlan(PassRegion(refs_for(core, g.search_radius1), core), None)
    if run.options.regroup:
        refs2 = refs_for(core, g.search_radius)
        pilot = reads(refs2, g.search_radius, g.match_size)
    else:
        refs2 = refs_for(core, g.search_radius1)
        pilot = reads(refs2, g.search_radius1, p)
    return RegionPlan(PassRegion(refs_for(pilot, g.search_radius1), pilot),
                      PassRegion(refs2, core))


# -- the passes -----------------------------------------------------------------------


def _denoise_channels(chans: list, sigma: Any, ranks: Any, options: GroupedOptions,
                      progress: ProgressCallback | None, cancel: Any,
                      core: Sequence[int] | None = None) -> tuple[list, list]:
    """The driver for one or more channels of one size (one grouping for all): per
    channel ``{rank: (H, W)}`` and stats; ``core`` as :func:`denoise_grouped`'s."""
    t_all = time.perf_counter()
    imgs, sigma, rank_list = check_inputs(chans, sigma, ranks)
    core = _check_core(core, imgs[0].shape)
    ranks_arr = np.asarray([-1 if rk is None else int(rk) for rk in rank_list], dtype=np.int64)

    cal = calibrate(imgs, sigma, options, trial_denoiser(cancel))
    run = resolve_run(imgs, sigma, cal)
    plan = region_plan(run, imgs[0].shape, core)
    stats = [ChannelStats() for _ in imgs]
    floors: dict = {}
    if run.options.two_stage:
        # without regroup, stage 1 keeps its groups (all references) for stage 2
        groups: dict | None = None if run.options.regroup else {}
        # with regroup, the pilot's groups predict stage 2's candidates; a regular
        # texture keeps its full search (its lattice's repeats, docs/speed.md)
        predict = ({} if PREDICT is not None and run.options.regroup
                   and not run.options.periodic else None)
        pilot = [o[0] for o in _run_pass(imgs, imgs, 1, np.asarray([-1], np.int64), run,
                                         stats, floors, False, progress, cancel, groups,
                                         plan and plan.stage1, predict)]
        check_cancel(cancel)
        outs = _run_pass(imgs, pilot, 2, ranks_arr, run, stats, floors, True, progress, cancel,
                         groups, plan and plan.stage2, predict)
    else:
        outs = _run_pass(imgs, imgs, 1, ranks_arr, run, stats, floors, True, progress, cancel,
                         None, plan and plan.stage1)
    params = run_params(run, cal, floors)
    total = time.perf_counter() - t_all
    results = [{rk: np.ascontiguousarray(out[i]) for i, rk in enumerate(rank_list)}
               for out in outs]
    return results, [st.report(total / len(imgs), params, rank_list) for st in stats]


def _pass_grid(run: Run, stage: int, final: bool, floors_report: dict, nr: int, stats: list,
               H: int, W: int, C: int, pages: int = 1, refs: tuple | None = None) -> tuple:
    """A pass's settings and reference grid on pages of ``H x W`` (``pages`` of them one
    above the other), within the bounds ``refs`` (:class:`PassRegion`; None: all):
    ``(ps, ys, xs, rows_per_chunk, nchunks, nums, dens)``, the accumulators zeroed for
    ``C`` channels and ``nr`` ranks; the groups are counted in ``stats``."""
    p = run.geometry.patch_size
    ps = plan_pass(run, stage, final, floors_report)
    ys = patch_positions(H, p, ps.stride)
    xs = patch_positions(W, p, ps.stride)
    if refs is not None:
        ys = ys[(ys >= refs[0]) & (ys <= refs[1])]
        xs = xs[(xs >= refs[2]) & (xs <= refs[3])]
    for st in stats:
        st.groups += pages * len(ys) * len(xs)
    rows_per_chunk = max(1, CHUNK_GROUPS // (len(xs) * nr))
    nchunks = (len(ys) + rows_per_chunk - 1) // rows_per_chunk
    nums = [np.zeros((nr, pages * H, W)) for _ in range(C)]
    dens = [np.zeros((nr, pages * H, W)) for _ in range(C)]
    return ps, ys, xs, rows_per_chunk, nchunks, nums, dens


def _run_pass(imgs: list, guides: list, stage: int, ranks: np.ndarray, run: Run,
              stats: list, floors_report: dict, final: bool,
              progress: ProgressCallback | None, cancel: Any, groups: dict | None = None,
              region: PassRegion | None = None, predict: dict | None = None) -> list:
    """One pass over the reference patches (all, or ``region``'s): ``(nr, H, W)``
    estimates per channel (outside ``region.exact``, the channel's pixels).

    ``guides`` are the pilots (stage 2; in stage 1 the channels themselves).  The
    groups are found once, on all the guides, and shared by every channel; each
    channel has its own kernel PCA per group.  ``stats`` (one per channel) collect
    times, counters, the final pass's spectrum and kept ranks.  ``groups``, unless
    None, receives every reference's members (``"gy"``, ``"gx"``, on the grid ``"ys"``
    x ``"xs"``) when empty and provides them, instead of a new matching, when not.
    ``predict``, unless None, receives the matched references' members in the same way
    (``"has"`` marking them) when empty, and when not, predicts the candidates of a new
    matching (:data:`PREDICT`).
    """
    H, W = imgs[0].shape
    C = len(imgs)
    g = run.geometry
    p = g.patch_size
    ps, ys, xs, rows_per_chunk, nchunks, nums, dens = _pass_grid(
        run, stage, final, floors_report, len(ranks), stats, H, W, C,
        refs=None if region is None else region.refs)
    ps = replace(ps, spectrum_every=spectrum_every(len(ys) * len(xs), len(xs)))
    t0 = time.perf_counter()
    reuse = groups is not None and "gy" in groups
    if groups is not None and not reuse:
        groups["gy"] = np.empty((len(ys) * len(xs), ps.n), np.int64)
        groups["gx"] = np.empty((len(ys) * len(xs), ps.n), np.int64)
        groups["ys"], groups["xs"] = ys, xs
    if not reuse:
        # the matching distance: the SSD summed over every channel, in integer units of
        # the noise / 1024 (the original sigma, the same in every pass and tile), so that
        # the matching keeps exact running sums
        guide_m = quantise_guide(np.stack([pad_for_matching(gd, p, ps.match_size)
                                           for gd in guides]), run.sigma)
        running = exact_sums(guide_m, ps.match_size)
        lags = run.options.lags
        # the chunks' matching distances, one scratch array for all (tens of MB)
        work = np.empty((int(search_mask(ps.search_radius, g.dense_radius, lags).sum()),
                         min(rows_per_chunk, len(ys)) * len(xs)))
    for st in stats:
        st.seconds["grouping"] += (time.perf_counter() - t0) / C
    keep = None
    if (not reuse and groups is None and stage == 1 and not final and FLAT_PILOT is not None
            and running):  # a guide quantised to the noise's units
        keep = coarse_flat(guide_m, ys, xs, ps.match_size, ps.stride, FLAT_PILOT)
        for st in stats:
            st.groups -= int((~keep).sum())
    predicted = predict is not None and "gy" in predict and not reuse
    inter = interleave_guide(guide_m) if predicted else None  # once for the pass
    if predict is not None and not predicted:
        predict["gy"] = np.zeros((len(ys) * len(xs), ps.n), np.int32)
        predict["gx"] = np.zeros((len(ys) * len(xs), ps.n), np.int32)
        predict["has"] = np.zeros(len(ys) * len(xs), bool)
        predict["ys"], predict["xs"] = ys, xs
    dropped = []
    for ci in range(nchunks):
        check_cancel(cancel)
        yy = ys[ci * rows_per_chunk:(ci + 1) * rows_per_chunk]
        first = ci * rows_per_chunk * len(xs)
        refs = slice(first, first + len(yy) * len(xs))
        t0 = time.perf_counter()
        if reuse:  # this grid's references in the grid that kept them (a sub-grid)
            rows = np.searchsorted(groups["ys"], yy)
            cols = np.searchsorted(groups["xs"], xs)
            idx = (rows[:, None] * len(groups["xs"]) + cols[None, :]).ravel()
            gy, gx = groups["gy"][idx], groups["gx"][idx]
        else:
            ry = np.ascontiguousarray(np.repeat(yy, len(xs)))
            rx = np.ascontiguousarray(np.tile(xs, len(yy)))
            if keep is not None:
                kk = keep[ci * rows_per_chunk:ci * rows_per_chunk + len(yy)].ravel()
                dropped.append((ry[~kk], rx[~kk]))
                ry, rx = np.ascontiguousarray(ry[kk]), np.ascontiguousarray(rx[kk])
                if not len(ry):
                    continue
            if predicted:
                gy, gx = _match_grouped(predict, guide_m, inter, ry, rx, run, ps, lags,
                                        running, work)
            else:
                gy, gx = match(guide_m, ry, rx, p, ps.match_size, ps.search_radius, ps.n,
                               g.dense_radius, lags, running, work)
            if groups is not None:
                groups["gy"][refs], groups["gx"][refs] = gy, gx
            if predict is not None and not predicted:
                at = first + (np.arange(len(ry)) if keep is None else np.flatnonzero(kk))
                predict["gy"][at], predict["gx"][at] = gy, gx
                predict["has"][at] = True
        tm = (time.perf_counter() - t0) / C  # the shared matching, split between channels
        for ch in range(C):
            _chunk(imgs[ch], guides[ch], ch, gy, gx, tm, (ci + 1, nchunks), ranks, run, ps,
                   stats[ch], nums[ch], dens[ch], progress)
    if keep is not None:
        fill_holes(imgs, guides, guide_m, dropped, ranks, run, ps, stats, nums, dens, lags,
                    running, work, progress, None if region is None else region.exact,
                    (nchunks, nchunks), predict)
    # every pixel is covered by a reference patch (stride <= p, last row/col kept) or,
    # where the pilot dropped references, filled by fill_holes
    # the estimates divided in place: no second (nr, H, W) array per channel
    if region is None:
        for num, den in zip(nums, dens):
            np.divide(num, den, out=num)
        return nums
    y0, y1, x0, x1 = region.exact  # covered by the region's references
    for img, num, den in zip(imgs, nums, dens):
        inner = num[:, y0:y1, x0:x1]
        np.divide(inner, den[:, y0:y1, x0:x1], out=inner)
        num[:, :y0], num[:, y1:] = img[:y0], img[y1:]
        num[:, y0:y1, :x0], num[:, y0:y1, x1:] = img[y0:y1, :x0], img[y0:y1, x1:]
    return nums


def _match_grouped(groups: dict, guide_m: np.ndarray, inter: tuple, ry: np.ndarray,
                   rx: np.ndarray, run: Run, ps: PassSettings, lags: Sequence, running: bool,
                   work: np.ndarray) -> tuple:
    """:func:`.matching.match_from_groups` with this pass's search (:data:`PREDICT`)."""
    return match_from_groups(groups, guide_m, inter, ry, rx, run.geometry.patch_size,
                             ps.match_size, ps.search_radius, ps.n, run.geometry.dense_radius,
                             lags, running, work, *PREDICT)


def _chunk(img: np.ndarray, guide: np.ndarray, ch: int, gy: np.ndarray, gx: np.ndarray,
           t_match: float, step: tuple, ranks: np.ndarray, run: Run, ps: PassSettings,
           st: ChannelStats, num: np.ndarray, den: np.ndarray,
           progress: ProgressCallback | None, own: tuple | None = None) -> None:
    """One chunk of groups of one channel: gather, kernel PCA, shrinkage, pre-image,
    accumulation into ``num`` / ``den``, on parts of about :data:`PART_GROUPS` groups (a
    multiple of the spectrum's step, so that any size samples the same groups), several
    at once, one per thread (:func:`~kpca_denoise.core.parallel.run_in_order`); each
    part's estimates and counts are added on this thread in the parts' order (the same
    sums as the whole chunk at once).  The chunk's wall time (and ``t_match``, its
    share of the matching) is shared out between the steps as the threads spent it,
    and reported per step (``ProgressEvent.seconds``).  ``own``: only each reference's
    own patch is accumulated (``(ry, rx)`` of the references)."""
    size = max(1, PART_GROUPS // ps.spectrum_every) * ps.spectrum_every
    bounds = part_bounds(len(gy), size)

    def compute(j: int, mine: ChannelStats) -> tuple:
        a, b = bounds[j]
        return _part(img, guide, ch, gy[a:b], gx[a:b], ranks, run, ps, mine,
                     None if own is None else (own[0][a:b], own[1][a:b]))

    def add(j: int, est: tuple) -> None:
        a, b = bounds[j]
        accumulate_groups(*est, gy[a:b], gx[a:b], run.geometry.patch_size, num, den,
                          run.window)

    shares = run_chunk_parts(st, len(bounds), compute, add)
    shares["grouping"] += t_match
    msg = f"stage {ps.stage}"
    for k in ("grouping", "eigensolver", "projection", "preimage", "reassembly"):
        st.seconds[k] += shares[k]
        # the mean spectrum, sent as it grows so a plot can follow the run
        eig = (st.spectrum / st.spectrum_groups if k == "eigensolver" and ps.final
               and st.spectrum_groups else None)
        report(progress, k, *step, message=msg, eigenvalues=eig, seconds=shares[k])


def _part(img: np.ndarray, guide: np.ndarray, ch: int, gy: np.ndarray, gx: np.ndarray,
          ranks: np.ndarray, run: Run, ps: PassSettings, st: ChannelStats,
          own: tuple | None) -> tuple:
    """The steps of :func:`_chunk` up to the pre-image for a part of its groups, on one
    thread: the members gathered, then :func:`.steps.estimate_groups`; returns
    ``(estimates, aggregation weights)``, its times and counts in ``st`` (the part's
    own)."""
    p = run.geometry.patch_size
    t0 = time.perf_counter()
    X = gather(img, gy, gx, p)
    G = gather(guide, gy, gx, p) if ps.stage == 2 else X
    st.seconds["grouping"] += time.perf_counter() - t0
    Est, aggw = estimate_groups(X, G, ch, ranks, run, ps, st)
    if own is not None:  # only each reference's own patch
        aggw = aggw * ((gy == own[0][:, None]) & (gx == own[1][:, None]))[:, None, :]
    return Est, aggw


def coarse_flat(guide_m: np.ndarray, ys: np.ndarray, xs: np.ndarray, m: int, stride: int,
                excess: float) -> np.ndarray:
    """Tell which references of a grid the pilot keeps (flat areas: every other one).

    (len(ys), len(xs)) bool: the references of the grid ``ys`` x ``xs`` kept.  One
    whose ``m x m`` matching window on ``guide_m`` (padded, in
    :func:`.matching.quantise_guide`'s units of sigma / 1024, so the sums are exact) has
    a variance, summed over the C channels, below ``C (1 + excess) sigma^2`` is kept
    only where ``y // stride`` and ``x // stride`` are even: image coordinates, so that
    a tile aligned to twice the stride decides as the whole image."""
    C = guide_m.shape[0]
    keep = np.ones((len(ys), len(xs)), bool)
    even_x = (xs // stride) % 2 == 0
    lim = C * (1.0 + excess) * 1024.0 ** 2 * (m * m - 1)
    for i, y in enumerate(ys):
        rows = np.lib.stride_tricks.sliding_window_view(guide_m[:, y:y + m], (m, m),
                                                        axis=(1, 2))[:, 0]
        w = rows[:, xs].reshape(C, len(xs), m * m)
        s1 = w.sum(axis=2)
        s2 = (w * w).sum(axis=2)
        flat = (s2 - s1 * s1 / (m * m)).sum(axis=0) < lim
        keep[i] = ~flat | (((y // stride) % 2 == 0) & even_x)
    return keep


def fill_holes(imgs: list, guides: list, guide_m: np.ndarray, dropped: list, ranks: np.ndarray,
               run: Run, ps: PassSettings, stats: list, nums: list, dens: list, lags: Sequence,
               running: bool, work: np.ndarray, progress: ProgressCallback | None,
               exact: tuple | None, last: tuple, predict: dict | None = None) -> None:
    """Fill the pilot's holes from the dropped references' own patches.

    The pixels no kept group wrote (``dens`` 0; within ``exact``, the pixels a
    region gets right, unless None): the estimates of the dropped
    references (``dropped``: (ry, rx) per chunk) whose patch holds one, each group's
    reference patch only, so that a hole's value depends on the references covering it
    alone (as in a tile).  With ``predict`` (the pass's matched groups), a dropped
    reference's members are searched among its kept neighbour's (:data:`HOLES_PREDICTED`);
    without, in the whole window.  Progress says ``last``, the pass's last chunk (a count
    that went back would read as a new pass: a tiled photo's estimate counted each tile
    twice)."""
    p = run.geometry.patch_size
    holes = dens[0][0] == 0
    if exact is not None:
        y0, y1, x0, x1 = exact
        inside = np.zeros_like(holes)
        inside[y0:y1, x0:x1] = True
        holes &= inside
    if not holes.any() or not dropped:
        return
    ry = np.concatenate([d[0] for d in dropped])
    rx = np.concatenate([d[1] for d in dropped])
    hs = np.zeros((holes.shape[0] + 1, holes.shape[1] + 1))
    hs[1:, 1:] = holes.cumsum(0).cumsum(1)
    cnt = hs[ry + p, rx + p] - hs[ry, rx + p] - hs[ry + p, rx] + hs[ry, rx]
    sel = cnt > 0
    ry, rx = ry[sel], rx[sel]
    if not len(ry):
        return
    for st in stats:
        st.groups += len(ry)
    C = len(imgs)
    nn = [np.zeros_like(n) for n in nums]
    dd = [np.zeros_like(d) for d in dens]
    inter = None
    for a in range(0, len(ry), CHUNK_GROUPS):
        cy = np.ascontiguousarray(ry[a:a + CHUNK_GROUPS])
        cx = np.ascontiguousarray(rx[a:a + CHUNK_GROUPS])
        if HOLES_PREDICTED and predict is not None:  # a neighbour's group predicts it
            inter = interleave_guide(guide_m) if inter is None else inter
            gy, gx = _match_grouped(predict, guide_m, inter, cy, cx, run, ps, lags, running,
                                    work)
        else:
            gy, gx = match(guide_m, cy, cx, p, ps.match_size, ps.search_radius, ps.n,
                           run.geometry.dense_radius, lags, running, work)
        for ch in range(C):
            _chunk(imgs[ch], guides[ch], ch, gy, gx, 0.0, last, ranks, run, ps, stats[ch],
                   nn[ch], dd[ch], progress, own=(cy, cx))
    for n, d, n2, d2 in zip(nums, dens, nn, dd):
        n[:, holes] = n2[:, holes]
        d[:, holes] = d2[:, holes]
