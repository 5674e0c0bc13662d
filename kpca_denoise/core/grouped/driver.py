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

import math
import time
from dataclasses import asdict, dataclass, replace
from typing import Any, Mapping, Sequence

import numpy as np

from kpca_denoise.core.checks import is_number
from kpca_denoise.core.patches import accumulate_groups, patch_positions
from kpca_denoise.core.preimage import preimage_groups
from kpca_denoise.core.progress import ProgressCallback, check_cancel, report

from .calibrate import Calibration, calibrate, noise_fraction
from .geometry import Geometry, resolve_geometry
from .group_pca import NoiseFloors, fit_groups, noise_floors
from .matching import (exact_sums, gather, interleave_guide, match, match_from_groups,
                       pad_for_matching, quantise_guide, search_mask)
from .options import GroupedOptions
from .shrinkage import STAGE2_CUT, correct_means, eigen_floor, shrink_own, shrink_pilot
from .stats import SPECTRUM_EVERY, ChannelStats, run_chunk_parts, spectrum_every

__all__ = ["denoise_grouped", "denoise_grouped_channels", "resolve_options", "trial_denoiser",
           "region_plan", "RegionPlan", "PassRegion"]

#: patches per group in stage 1 when ``GroupedOptions.group_size1`` is None (stage 2:
#: ``GroupedOptions.group_size``)
GROUP_SIZE1 = 40
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
#: the pilot's holes (:func:`_fill_holes`) take their members from a kept neighbour's
#: candidates as stage 2 does (False: a full search;
#: docs/speed.md#the-pilots-holes-30-nov-night)
HOLES_PREDICTED = True

Options = "GroupedOptions | str | Mapping[str, Any] | None"


def resolve_options(options: Options = None, **overrides: Any) -> GroupedOptions:
    """One :class:`GroupedOptions` from an object, a preset name or a mapping, with
    ``overrides`` (knob names) applied; an unknown name is refused."""
    opts = GroupedOptions.coerce(options)
    if overrides:
        opts = GroupedOptions.from_dict({**opts.changed(), **overrides})
    return opts


@dataclass(frozen=True)
class _Run:
    """Everything a pass needs, resolved once per call."""

    options: GroupedOptions  # calibrated: periodic, lags, contrast, detail decided
    geometry: Geometry
    sigma: float
    n1: int  # patches per group, stage 1 / stage 2
    n2: int
    kappa1: float
    kappa2: float
    kappa2_chroma: float
    window: np.ndarray  # (p, p) weights of the overlap average

    @property
    def rbf(self) -> bool:
        return self.options.kernel == "rbf"


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
    """Denoise an (H, W, C) image whose channels share one set of groups, matched on
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
    return {rk: np.stack([r[rk] for r in results], axis=-1) for rk in results[0]}, stats


# -- checks and resolution ------------------------------------------------------------


def _check_inputs(chans: list, sigma: Any, ranks: Any) -> tuple[list, float, list]:
    """The channels as contiguous float64, sigma as a float and the ranks as a list,
    or a ValueError naming what is wrong."""
    imgs = []
    for im in chans:
        im = np.ascontiguousarray(im, dtype=np.float64)
        if not np.all(np.isfinite(im)):
            raise ValueError("image contains NaN or Inf")
        imgs.append(im)
    if any(im.shape != imgs[0].shape or im.ndim != 2 for im in imgs):
        raise ValueError("channels must be 2-D and of the same size")
    if not (is_number(sigma) and math.isfinite(sigma) and sigma > 0.0):
        raise ValueError(f"sigma must be a positive finite number, got {sigma!r}")
    sigma = float(sigma)
    if not (sigma * sigma > 0.0 and math.isfinite(1.0 / (sigma * sigma))):
        raise ValueError(f"sigma {sigma} is too small: its square underflows float64 "
                         "(give sigma in the image's units, at least 1e-150)")
    if not math.isfinite(sigma * sigma):
        raise ValueError(f"sigma {sigma} is too large: its square overflows float64 "
                         "(give sigma in the image's units, at most 1e150)")
    if isinstance(ranks, (str, bytes)) or not hasattr(ranks, "__iter__"):
        raise ValueError(f"ranks must be a list such as [4, 8] or [None], got {ranks!r}")
    rank_list = list(ranks)
    if not rank_list:
        raise ValueError("ranks must contain at least one entry (None = no cap)")
    for rk in rank_list:
        if rk is not None and (int(rk) != rk or int(rk) < 1):
            raise ValueError(f"ranks must be None or integers >= 1, got {rk!r}")
    return imgs, sigma, rank_list


def _resolve(imgs: list, sigma: float, cal: Calibration) -> _Run:
    """The :class:`_Run` of calibrated options on channels ``imgs``."""
    o = cal.options
    H, W = imgs[0].shape
    g = resolve_geometry(o, noise_fraction(o, sigma, len(imgs)), o.periodic, o.detail)
    p = g.patch_size
    if H < p or W < p:
        raise ValueError(f"image {H}x{W} is smaller than patch_size {p}")

    def fewest(r: int) -> int:  # candidates of a corner reference (clipped window)
        return min(r + 1, H - p + 1) * min(r + 1, W - p + 1)

    if min(fewest(g.search_radius), fewest(g.search_radius1)) < 2:
        raise ValueError(
            f"image {H}x{W} is too small for patch_size {p}: fewer than 2 patches to group")
    rbf = o.kernel == "rbf"
    k2 = float(o.kappa2) if o.kappa2 is not None else (1.0 if o.periodic else 0.7)
    beta = o.window_beta
    win = np.outer(np.kaiser(p, beta), np.kaiser(p, beta)) if beta > 0 else np.ones((p, p))
    n1 = max(2, min(GROUP_SIZE1 if o.group_size1 is None else int(o.group_size1),
                    fewest(g.search_radius1)))
    return _Run(
        options=o, geometry=g, sigma=sigma, n1=n1,
        n2=max(2, min(int(o.group_size), fewest(g.search_radius))) if o.regroup else n1,
        kappa1=float(o.kappa1) if o.kappa1 is not None else (4.5 if rbf else 3.0),
        kappa2=k2,
        kappa2_chroma=float(o.kappa2_chroma) if o.kappa2_chroma is not None else 1.5 * k2,
        window=np.ascontiguousarray(win, dtype=np.float64))


def _report(run: _Run, cal: Calibration, floors: dict) -> dict:
    """The resolved parameters of a run, as its stats report them."""
    o, g = run.options, run.geometry
    d = {k: v for k, v in asdict(o).items()
         if k not in ("lags", "periodic", "detail", "contrast", "data_range")}
    d.update(asdict(g))
    d.update(group_size=run.n2, group_size1=run.n1, kappa1=run.kappa1, kappa2=run.kappa2,
             kappa2_chroma=run.kappa2_chroma, stage2_cut=STAGE2_CUT,
             data_range=None if o.data_range is None else float(o.data_range),
             gamma_scale=float(o.gamma_scale), gamma_scale2=float(o.gamma_scale2),
             tol=float(o.tol), window_beta=float(o.window_beta),
             mean_kappa1=None if o.mean_kappa1 is None else float(o.mean_kappa1),
             periodic=o.periodic, periodicity=cal.score, lags=[list(v) for v in o.lags],
             periodic_trial=cal.trial, detail=o.detail, contrast=o.contrast,
             sigma=run.sigma, **floors)
    return d


def trial_denoiser(cancel: Any = None):
    """The denoiser :func:`.calibrate.calibrate` runs its trial with: channels, sigma
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
    """What one pass computes for a core: the bounds ``(y_lo, y_hi, x_lo, x_hi)``
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


def region_plan(run: _Run, shape: tuple, core: tuple | None) -> RegionPlan | None:
    """What a ``core`` (y0, y1, x0, x1) of an image of ``shape`` depends on, per pass
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
    imgs, sigma, rank_list = _check_inputs(chans, sigma, ranks)
    core = _check_core(core, imgs[0].shape)
    ranks_arr = np.asarray([-1 if rk is None else int(rk) for rk in rank_list], dtype=np.int64)

    cal = calibrate(imgs, sigma, options, trial_denoiser(cancel))
    run = _resolve(imgs, sigma, cal)
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
    params = _report(run, cal, floors)
    total = time.perf_counter() - t_all
    results = [{rk: np.ascontiguousarray(out[i]) for i, rk in enumerate(rank_list)}
               for out in outs]
    return results, [st.report(total / len(imgs), params, rank_list) for st in stats]


@dataclass(frozen=True)
class _Pass:
    """One pass's settings: stage, group size, geometry and noise floors."""

    stage: int
    n: int
    stride: int
    match_size: int
    search_radius: int
    floors: NoiseFloors  # channel 0's
    floors_rest: NoiseFloors  # the channels after the first (the chrominances of colour)
    tol2: float
    final: bool
    #: stage 2's kernel width for the noisy groups' own kernel PCA, which explicit
    #: ranks keep whole (the stage-1 width)
    own_gamma: float = 0.0
    #: the final pass decomposes every this many-th group fully (the spectrum)
    spectrum_every: int = SPECTRUM_EVERY


def _plan_pass(run: _Run, stage: int, final: bool, floors_report: dict) -> _Pass:
    """The settings of pass ``stage``; its kernel width and noise floor go into
    ``floors_report``."""
    o, g = run.options, run.geometry
    p = g.patch_size
    n = run.n1 if stage == 1 else run.n2
    c = float(o.gamma_scale if stage == 1 else o.gamma_scale2)
    fl = noise_floors(run.sigma, p * p, n, c, run.rbf, run.kappa1, run.kappa2)
    floors_report[f"stage{stage}_gamma"] = fl.gamma
    floors_report[f"stage{stage}_noise_floor"] = fl.tau1 if stage == 1 else fl.tau2
    return _Pass(stage=stage, n=n, stride=g.stride1 if stage == 1 else g.stride, final=final,
                 match_size=g.match_size1 if stage == 1 else g.match_size,
                 search_radius=g.search_radius1 if stage == 1 else g.search_radius,
                 floors=fl, floors_rest=fl.with_tau2(run.kappa2_chroma / run.kappa2),
                 tol2=p * p * (float(o.tol) * run.sigma) ** 2,
                 own_gamma=noise_floors(run.sigma, p * p, n, float(o.gamma_scale), run.rbf,
                                        run.kappa1, run.kappa2).gamma)


def _pass_grid(run: _Run, stage: int, final: bool, floors_report: dict, nr: int, stats: list,
               H: int, W: int, C: int, pages: int = 1, refs: tuple | None = None) -> tuple:
    """A pass's settings and reference grid on pages of ``H x W`` (``pages`` of them one
    above the other), within the bounds ``refs`` (:class:`PassRegion`; None: all):
    ``(ps, ys, xs, rows_per_chunk, nchunks, nums, dens)``, the accumulators zeroed for
    ``C`` channels and ``nr`` ranks; the groups are counted in ``stats``."""
    p = run.geometry.patch_size
    ps = _plan_pass(run, stage, final, floors_report)
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


def _run_pass(imgs: list, guides: list, stage: int, ranks: np.ndarray, run: _Run,
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
        _fill_holes(imgs, guides, guide_m, dropped, ranks, run, ps, stats, nums, dens, lags,
                    running, work, progress, None if region is None else region.exact,
                    (nchunks, nchunks), predict)
    # every pixel is covered by a reference patch (stride <= p, last row/col kept) or,
    # where the pilot dropped references, filled by _fill_holes
    if region is None:
        return [num / den for num, den in zip(nums, dens)]
    y0, y1, x0, x1 = region.exact  # covered by the region's references
    outs = []
    for img, num, den in zip(imgs, nums, dens):
        out = np.repeat(img[None], len(ranks), axis=0)
        out[:, y0:y1, x0:x1] = num[:, y0:y1, x0:x1] / den[:, y0:y1, x0:x1]
        outs.append(out)
    return outs


def _match_grouped(groups: dict, guide_m: np.ndarray, inter: tuple, ry: np.ndarray,
                   rx: np.ndarray, run: _Run, ps: _Pass, lags: Sequence, running: bool,
                   work: np.ndarray) -> tuple:
    """:func:`.matching.match_from_groups` with this pass's search (:data:`PREDICT`)."""
    return match_from_groups(groups, guide_m, inter, ry, rx, run.geometry.patch_size,
                             ps.match_size, ps.search_radius, ps.n, run.geometry.dense_radius,
                             lags, running, work, *PREDICT)


def _chunk(img: np.ndarray, guide: np.ndarray, ch: int, gy: np.ndarray, gx: np.ndarray,
           t_match: float, step: tuple, ranks: np.ndarray, run: _Run, ps: _Pass,
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
    bounds = [(a, min(len(gy), a + size)) for a in range(0, len(gy), size)]

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
          ranks: np.ndarray, run: _Run, ps: _Pass, st: ChannelStats,
          own: tuple | None) -> tuple:
    """The steps of :func:`_chunk` up to the pre-image for a part of its groups, on one
    thread: ``(estimates, aggregation weights)``; its times and counts go into ``st``
    (the part's own)."""
    p = run.geometry.patch_size
    rbf = run.rbf
    fl = ps.floors
    sec = st.seconds
    t0 = time.perf_counter()
    X = gather(img, gy, gx, p)
    P = gather(guide, gy, gx, p) if ps.stage == 2 else X
    t1 = time.perf_counter()
    sec["grouping"] += t1 - t0
    # only the components the shrinkage keeps: above the stage-1 threshold, or above
    # the stage-2 cut (and every SPECTRUM_EVERY-th group whole, for the final spectrum);
    # an explicit rank in stage 1 may keep components below the threshold: all
    fl_ch = fl if ch == 0 else ps.floors_rest
    floor = eigen_floor(ps.stage, ranks, fl_ch, ps.n)
    every = ps.spectrum_every
    fit = fit_groups(P, rbf, fl.gamma, floor, gram=rbf, every=every if ps.final else 0)
    lam, V, rowmean = fit[:3]
    K = fit[3] if rbf else None  # the RBF Gram saves the pre-image's first distances
    t2 = time.perf_counter()
    sec["eigensolver"] += t2 - t1
    if ps.final:  # the spectrum's sampled groups
        sampled = lam[::every]
        st.spectrum = sampled.sum(axis=0)
        st.spectrum_groups += len(sampled)
        st.add_samples("spectrum", sampled)
        st.final_groups += len(gy)
    auto, parts = shrink_by_rank(ps, lam, V, rowmean, P, X, K, fl_ch, ranks, rbf, st)
    t3 = time.perf_counter()
    sec["projection"] += t3 - t2
    Est, aggw, fb, its = preimage_by_rank(auto, parts, rbf, int(run.options.max_iter), ps.tol2)
    # the mean step on channel 0 only (the luminance of colour): the chrominances lose
    # with it (docs/options.md); its time counts as the pre-image's
    mk = run.options.mean_kappa1
    if ps.stage == 1 and ch == 0 and mk is not None:
        correct_means(Est, X, float(mk) * run.sigma * run.sigma / (p * p))
    st.fallbacks += int(fb)
    st.iterations += int(its)
    sec["preimage"] += time.perf_counter() - t3
    if own is not None:  # only each reference's own patch
        aggw = aggw * ((gy == own[0][:, None]) & (gx == own[1][:, None]))[:, None, :]
    return Est, aggw


def coarse_flat(guide_m: np.ndarray, ys: np.ndarray, xs: np.ndarray, m: int, stride: int,
                excess: float) -> np.ndarray:
    """(len(ys), len(xs)) bool: the references of the grid ``ys`` x ``xs`` kept.  One
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


def _fill_holes(imgs: list, guides: list, guide_m: np.ndarray, dropped: list, ranks: np.ndarray,
                run: _Run, ps: _Pass, stats: list, nums: list, dens: list, lags: Sequence,
                running: bool, work: np.ndarray, progress: ProgressCallback | None,
                exact: tuple | None, last: tuple, predict: dict | None = None) -> None:
    """The pixels no kept group wrote (``dens`` 0; within ``exact``, the pixels a
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


def shrink_by_rank(ps: _Pass, lam, V, rowmean, P, X, K, fl_ch: NoiseFloors, ranks: np.ndarray,
                   rbf: bool, st: ChannelStats) -> tuple[np.ndarray, list]:
    """The shrinkage of one chunk's groups for every rank: ``(auto, parts)``, ``auto``
    marking the ranks of the first part.  Each part is (expansion weights, aggregation
    weights, kept, members, kernel width, Gram): in stage 2 the auto rank is the pilot's
    shrinkage, and explicit ranks keep that many of the noisy group's own components
    whole (docs/method.md#ranks).  The kept counts go into ``st`` on the final pass."""
    auto = ranks < 0 if ps.stage == 2 else np.ones(len(ranks), bool)
    parts = []
    if ps.stage == 1:
        parts.append((*shrink_own(lam, V, ps.floors.tau1, ranks), P, ps.floors.gamma, K))
    elif auto.any():
        parts.append((*shrink_pilot(lam, V, rowmean, P, X, fl_ch, rbf, ranks[auto]), P,
                      ps.floors.gamma, K))
    if not auto.all():
        parts.append(_own_components(X, ranks[~auto], rbf, ps.own_gamma, st,
                                     ps.spectrum_every))
    if ps.final:
        st.kept = _by_rank(auto, [pt[2] for pt in parts]).sum(axis=0) + st.kept
    return auto, parts


def preimage_by_rank(auto: np.ndarray, parts: list, rbf: bool, max_iter: int,
                     tol2: float) -> tuple:
    """The pre-images of :func:`shrink_by_rank`'s parts, back in the order of the ranks:
    ``(Est (m, nr, n, d), aggregation weights (m, nr, n), fallbacks, iterations)``."""
    ests, fb, its = [], 0, 0
    for Gam, _, _, members, gamma, gram in parts:
        e, f, i = preimage_groups(Gam, members, rbf, gamma, max_iter, tol2, gram)
        ests.append(e)
        fb, its = fb + int(f.sum()), its + int(i.sum())
    return _by_rank(auto, ests), _by_rank(auto, [pt[1] for pt in parts]), fb, its


def _own_components(X: np.ndarray, ranks: np.ndarray, rbf: bool, gamma: float,
                    st: ChannelStats, every: int = SPECTRUM_EVERY) -> tuple:
    """Stage 2's explicit ranks: each noisy group's own kernel PCA with its ``ranks``
    leading components kept whole.  Returns what :func:`_chunk` needs for the
    pre-image (as its other rank kind does); the groups' summed spectrum (what the
    ranks cut) is added to ``st.rank_spectrum``."""
    fit = fit_groups(X, rbf, gamma, 0.0, gram=rbf)
    lam, V = fit[0], fit[1]
    st.rank_spectrum = lam.sum(axis=0) + (st.rank_spectrum if st.rank_spectrum is not None
                                          else 0.0)
    st.add_samples("rank_spectrum", lam[::every])
    Gam, aggw, kept = shrink_own(lam, V, math.inf, ranks)
    return Gam, aggw, kept, X, gamma, (fit[3] if rbf else None)


def _by_rank(auto: np.ndarray, parts: list) -> np.ndarray:
    """The arrays of the auto ranks and of the explicit ranks (in that order in
    ``parts``, each with its ranks on axis 1) put back in the order of ``auto``."""
    if len(parts) == 1:
        return parts[0]
    shape = list(parts[0].shape)
    shape[1] = len(auto)
    out = np.empty(shape, dtype=np.result_type(*parts))
    out[:, np.flatnonzero(auto)] = parts[0]
    out[:, np.flatnonzero(~auto)] = parts[1]
    return out
