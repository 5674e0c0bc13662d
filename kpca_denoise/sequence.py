"""Sets denoised as one: the pages of a stack, a time-lapse or a burst, whose groups
also take patches from the neighbouring pages (:mod:`.core.grouped.sequence`).

:func:`decide` says whether neighbouring pages show one scene (``sequence='auto'``)
from the pages themselves; :func:`run_sequences` is the pipeline's step that runs
the images of a set that form a sequence through the stack path (one noise
estimate for all of them) and leaves the others to run alone (the
library's entry for a ``(P, H, W[, C])`` array is :func:`kpca_denoise.api.denoise_stack`).
Measurements and the rule's thresholds: ``docs/stacks.md``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .core.grouped.calibrate import central_crop
from .core.grouped.motion import link_scores, page_shifts, steady_shifts
from .core.progress import Cancelled, report
from .params import DenoiseParams
from .prepare import SIGNAL_DEPENDENT_HINT, PreparedItem, stabiliser_for
from .results import RunContext
from .working import colour_part, luminance, to_working
from .stack_tiling import denoise_stack_tiled

__all__ = ["decide", "decide_stack", "shared_noise", "stabiliser_stats",
           "run_sequences", "SequenceDecision", "LINK_THRESHOLD", "CUT_THRESHOLD",
           "decision_stabilisers", "same_sensor", "decide_run", "link_run", "runs_of_one_size"]

#: 'auto' takes a set for a sequence when the median of its neighbouring pairs'
#: :func:`link_scores` is above this (the scores measured on each kind of set:
#: docs/stacks.md) ...
LINK_THRESHOLD = 0.55
#: ... and then links every pair but those scoring below this (a cut between scenes)
CUT_THRESHOLD = 0.45


@dataclass
class SequenceDecision:
    """What 'auto' (or the user) decided for a run of images of one size."""

    decision: str  # "sequence" (neighbours used) or "pages" (each image alone)
    choice: str  # the parameter: auto, yes, no
    linked: list = field(default_factory=list)  # per neighbouring pair
    scores: list = field(default_factory=list)  # link_scores (auto only)
    shifts: list = field(default_factory=list)  # global shift per pair
    reason: str = ""
    #: the sequence's one noise level and stabiliser (:func:`shared_noise`) when the
    #: decision measured it (:func:`decision_stabilisers`): the run then reuses it
    noise: tuple | None = field(default=None, repr=False, compare=False)

    def as_dict(self) -> dict:
        """Return the decision as a plain dict for a page's stats (no noise)."""
        return dict(decision=self.decision, choice=self.choice, linked=list(self.linked),
                    scores=[round(float(s), 4) for s in self.scores],
                    shifts=[list(map(int, s)) for s in self.shifts], reason=self.reason)


def decide(pages: list, sigma: float, choice: str = "auto") -> SequenceDecision:
    """Decide whether luminance pages are a sequence and which neighbours to link.

    Whether the (H, W) luminance ``pages`` (noise std ``sigma``) are a sequence:
    'yes' links every pair, 'no' none; 'auto' calls the set a sequence when the
    median of the pairs' :func:`~kpca_denoise.core.grouped.motion.link_scores` is
    above :data:`LINK_THRESHOLD`, and then links the pairs scoring at least
    :data:`CUT_THRESHOLD`."""
    n = len(pages)
    shifts = page_shifts(pages) if n > 1 and choice != "no" else np.zeros((max(n - 1, 0), 2))
    if choice == "no" or n < 2:
        return SequenceDecision("pages", choice, [False] * max(n - 1, 0), [],
                                shifts.tolist(), "asked" if choice == "no" else "one image")
    if choice == "yes":
        return SequenceDecision("sequence", choice, [True] * (n - 1), [],
                                steady_shifts(shifts).tolist(), "asked")
    scores, shifts = link_scores(pages, sigma, shifts)
    related = float(np.median(scores)) > LINK_THRESHOLD
    linked = [bool(related and s >= CUT_THRESHOLD) for s in scores]
    shifts = steady_shifts(shifts, linked)
    k = sum(linked)
    return SequenceDecision("sequence" if k else "pages", choice, linked, scores.tolist(),
                            shifts.tolist(), f"{k} of {n - 1} neighbouring pairs alike")


def decide_stack(crops: list, vsts: list, sigmas: list,
                 params: DenoiseParams) -> SequenceDecision:
    """Decide whether a stack's pages are a sequence, as the pipeline's step does.

    :func:`decide` for a stack's pages as the pipeline's step decides it, from each
    page's central crop (:func:`~.core.grouped.calibrate.central_crop`: all the decision
    reads), its stabiliser (None under Gaussian noise) and its noise level (times the
    strength)."""
    pages = [np.asarray(luminance(c), dtype=np.float64) if v is None
             else to_working(c, v)[0][..., 0] for c, v in zip(crops, vsts)]
    return decide(pages, float(np.median(sigmas)) / params.strength, params.sequence)


#: pages whose own noise model and the sequence's one give noise stds within this factor
#: of each other at the page's (central crop's) median signal are read through the sequence's one for
#: the link decision: a sparse z-stack's own estimates moved by 0.97-1.01 there (their
#: gains by 2x), two sensors of gain 16 and 64 by 0.76 and 1.5 (``docs/stacks.md``)
SHARED_SENSOR_TOLERANCE = 1.15


def decision_stabilisers(params: DenoiseParams, pages: list, vsts: list, sigmas: list,
                         crops: list | None = None) -> tuple[list, tuple | None]:
    """Choose the stabilisers the link decision reads the pages through.

    The stabilisers the link decision reads ``pages`` through, and the sequence's
    :func:`shared_noise` when it was measured (None otherwise: a page without a
    stabiliser, or pages that fit no one model together).  The shared one where every
    page has a stabiliser and each page's own gives the same noise where the page's
    pixels are (:func:`same_sensor`, on the pages' central ``crops`` when given: what the
    decision reads), since each page's own estimate moves with its content (a sparse
    z-stack's gain by a factor of two between neighbouring slices, which then scored as
    unrelated, ``docs/stacks.md``); else the pages' own (``vsts``)."""
    if not vsts or any(v is None for v in vsts):
        return list(vsts), None
    try:
        shared = shared_noise(params, pages, sigmas, vsts[0])
    except ValueError:  # pages that fit no one model together: each its own
        return list(vsts), None
    looked_at = pages if crops is None else crops
    if not all(same_sensor(p, own, shared[1]) for p, own in zip(looked_at, vsts)):
        return list(vsts), shared
    return [shared[1]] * len(vsts), shared


def same_sensor(page: np.ndarray, own, shared, tol: float = SHARED_SENSOR_TOLERANCE) -> bool:
    """Tell whether two stabilisers give a page the same noise std.

    Whether stabilisers ``own`` and ``shared`` give ``page`` the same noise std within
    a factor ``tol`` at its median signal in each colour channel (where an estimate is
    best determined; a sparse page's gain and read noise trade against each other)."""
    x = colour_part(np.asarray(page))
    x = x.reshape(-1, 1) if x.ndim == 2 else x.reshape(-1, x.shape[-1])
    x = x[:: max(1, x.shape[0] // 65536)]
    var = []
    for v in (own, shared):
        m = np.maximum(np.median(x, axis=0) - v.offset, 0.0)
        var.append(np.asarray(v.gain) * m + np.asarray(v.sigma) ** 2)
    ratio = var[0] / np.maximum(var[1], np.finfo(float).tiny)
    return bool(np.all((ratio >= tol ** -2) & (ratio <= tol ** 2)))


def shared_noise(params: DenoiseParams, pages: list, sigmas: list, vst) -> tuple[float, Any]:
    """Measure one noise level and stabiliser for the pages of a sequence.

    One noise level for the pages of a sequence (they share a sensor): ``(sigma,
    stabiliser)``, the median of the pages' ``sigmas`` (times the strength already),
    or, when the pages have a stabiliser ``vst``, one measured on up to 8 of ``pages``
    side by side (then sigma is the strength)."""
    if vst is None:
        return float(np.median(sigmas)), None
    pick = list(pages[:: max(1, len(pages) // 8)][:8])
    return params.strength, stabiliser_for(np.concatenate([np.asarray(p) for p in pick]), params)


# -- the pipeline's step ------------------------------------------------------------------


def runs_of_one_size(items: list[PreparedItem]) -> list[list[PreparedItem]]:
    """Cut the prepared images into runs of one size, dtype and colour.

    The images in order, cut where the size, dtype or colour changes and where an
    image of the set is missing (it failed, or had no noise to remove): its
    neighbours are not neighbouring pages.  Pages whose noise model the run chose
    differently stay together (:func:`one_noise_model`)."""
    runs: list = []
    for it in items:
        if it.is_patchset:
            continue
        key = (it.data.shape, it.data.dtype)
        if runs and runs[-1][0] == key and it.result.index == runs[-1][1][-1].result.index + 1:
            runs[-1][1].append(it)
        else:
            runs.append((key, [it]))
    return [r for _, r in runs]


def _gaussian_level(it: PreparedItem, params: DenoiseParams) -> float:
    """A page's Gaussian noise level (times the strength), also when the run chose the
    Poisson-Gaussian model for it (its measured level is in its stats)."""
    if it.vst is None:
        return it.result.noise_sigma
    return float(it.result.stats.get("noise", {}).get("level", 1.0)) * params.strength


def _mixed(seq: list[PreparedItem]) -> bool:
    """Whether the run chose the Poisson-Gaussian model for some pages and not others
    (the Gaussian model with the level estimated chooses it per page)."""
    return len({it.vst is None for it in seq}) > 1


def one_noise_model(params: DenoiseParams, seq: list[PreparedItem]) -> None:
    """Give every page of a sequence the noise model most of its pages were given.

    The noise model most pages of a sequence were given, given to all (they share
    a sensor; a tie keeps the Gaussian model): a page switched to the Poisson-Gaussian
    model gets the stack's stabiliser from :func:`give_shared_noise`, one switched back
    its measured Gaussian level."""
    chosen = [it for it in seq if it.vst is not None]
    if not _mixed(seq):
        return
    if 2 * len(chosen) > len(seq):
        model = dict(chosen[0].result.stats["noise_model"])
        for it in seq:
            if it.vst is None:
                it.vst = chosen[0].vst  # replaced by the stack's own in give_shared_noise
                it.result.stats["noise_model"] = dict(model)
                it.result.stats["hint"] = chosen[0].result.stats.get("hint")
                it.result.noise_sigma = params.strength
        return
    for it in chosen:
        it.result.noise_sigma = _gaussian_level(it, params)
        it.vst = None
        it.result.stats.pop("noise_model", None)
        it.result.stats["hint"] = SIGNAL_DEPENDENT_HINT


def run_sequences(run: RunContext, items: list[PreparedItem]) -> tuple[list, list]:
    """Denoise the images of the set that form sequences.

    Denoise the images of the set that form sequences (``params.sequence``); returns
    the items left to denoise alone and the spectra of the sequences' groups."""
    params = run.params
    if params.method != "grouped" or params.sequence == "no":
        return items, []
    # camera mosaics are denoised one by one (their planes are no colour image)
    images = [it for it in items if not it.is_patchset and it.mosaic is None]
    runs = runs_of_one_size(images)
    odd = next((r for r in runs[1:] if (r[0].data.shape, r[0].data.dtype)
                != (runs[0][0].data.shape, runs[0][0].data.dtype)), None)
    if params.sequence == "yes" and odd is not None:
        a, b = runs[0][0].data, odd[0].data
        raise ValueError(
            f"sequence 'yes' needs images of one size and type: {odd[0].result.name} is "
            f"{b.shape} {b.dtype}, {runs[0][0].result.name} {a.shape} {a.dtype}; use "
            "sequence 'auto' or 'no'")
    alone, spectra = [it for it in items if it.is_patchset or it.mosaic is not None], []
    for seq in runs:
        if len(seq) < 2:
            alone += seq
            continue
        dec = decide_run(params, seq)
        run.resolved.setdefault("sequence", []).append(
            dict(dec.as_dict(), images=[it.result.name for it in seq]))
        if dec.decision != "sequence":
            alone += seq
            continue
        spectra += _run_stack(run, seq, link_run(params, seq, dec), dec)
    order = {id(it): k for k, it in enumerate(items)}
    return sorted(alone, key=lambda it: order[id(it)]), spectra


def decide_run(params: DenoiseParams, seq: list[PreparedItem]) -> SequenceDecision:
    """Decide whether a run of prepared images of one size is a sequence.

    Whether a run of images of one size ``seq`` (prepared: noise measured) is a
    sequence, decided on each page's own noise measure (stabilised: std 1) or one
    stabiliser where the pages share a sensor (:func:`decision_stabilisers`); the
    decision goes into each page's ``stats["sequence"]``."""
    crops, vsts = _decision_pages(seq)
    if _mixed(seq):  # decided on the pixels and Gaussian levels, as one model
        dec = decide_stack(crops, [None] * len(seq),
                           [_gaussian_level(it, params) for it in seq], params)
    else:
        sigmas = [it.result.noise_sigma for it in seq]
        stabilisers, shared = decision_stabilisers(params, [it.data for it in seq], vsts,
                                                   sigmas, crops)
        dec = decide_stack(crops, stabilisers, sigmas, params)
        dec.noise = shared
    for k, it in enumerate(seq):
        it.result.stats["sequence"] = dict(decision=dec.decision, choice=dec.choice,
                                           reason=dec.reason, page=k, pages=len(seq))
    return dec


def link_run(params: DenoiseParams, seq: list[PreparedItem], dec: SequenceDecision) -> float:
    """Give a run decided a sequence one noise model and one noise estimate.

    The pages of a run :func:`decide_run` called a sequence (``dec``) given one noise
    model and one noise estimate (:func:`shared_noise`, the decision's when it measured
    it); returns the level."""
    one_noise_model(params, seq)  # a no-op unless the pages were mixed (then no dec.noise)
    return give_shared_noise(params, seq, dec.noise)


def _decision_pages(seq: list[PreparedItem]) -> list:
    """The pages' central crops (all the decision reads) with their stabilisers."""
    return [central_crop(np.asarray(it.data)) for it in seq], [it.vst for it in seq]


def stabiliser_stats(page: dict, vst) -> dict:
    """Return a page's noise-model stats with the stack's shared stabiliser.

    A page's ``stats["noise_model"]`` with the stack's shared stabiliser ``vst``: its
    gain and sigma (the model, and what chose it, kept)."""
    return dict(page, gain=np.ravel(vst.gain).tolist(), sigma=np.ravel(vst.sigma).tolist())


def give_shared_noise(params: DenoiseParams, seq: list[PreparedItem], noise=None) -> float:
    """Give every page of a sequence one shared noise level and stabiliser.

    :func:`shared_noise` (or ``noise``, measured before) given to every page of
    ``seq``; returns the level."""
    sigma, vst = noise or shared_noise(params, [it.data for it in seq],
                                       [it.result.noise_sigma for it in seq], seq[0].vst)
    for it in seq:
        if vst is not None:
            it.vst = vst
            it.result.stats["noise_model"] = stabiliser_stats(it.result.stats["noise_model"],
                                                              vst)
        it.result.noise_sigma = sigma
    return sigma


def _run_stack(run: RunContext, seq: list[PreparedItem], sigma: float,
               dec: SequenceDecision) -> list:
    """The sequence's pages through the stack path, in tiles of bounded memory that
    carry every page (:func:`~kpca_denoise.tiling.denoise_stack_tiled`; on the
    executor's cluster, the run's ``tile_map.stacks``, each tile a task); each page's
    outputs and stats go to its result.  Returns the spectra."""
    params = run.params
    t0 = time.perf_counter()

    def put(k: int, tile, done: dict) -> None:
        res = seq[k].result
        for rk, o in done.items():
            if rk not in res.outputs:
                res.outputs[rk] = np.empty_like(seq[k].data)
            res.outputs[rk][tile.core] = o

    try:
        _, stats = denoise_stack_tiled(
            [it.data for it in seq], sigma, params, linked=np.asarray(dec.linked, dtype=bool),
            shifts=np.asarray(dec.shifts, dtype=np.int64).reshape(-1, 2), vst=seq[0].vst,
            progress=run.clock, cancel=run.cancel, sink=put,
            tile_map=getattr(run.tile_map, "stacks", None))  # the executor's cluster
    except Cancelled:
        raise
    except ValueError as exc:
        for it in seq:
            it.result.error = f"{it.result.name}: {exc}"
            it.result.outputs = {}
        return []
    seconds = (time.perf_counter() - t0) / len(seq)
    info = stats[0]["sequence"]
    run.resolved.setdefault("grouped", {k: v for k, v in stats[0].items()
                                        if k not in ("seconds", "spectrum", "sequence", "tiles")})
    for k, it in enumerate(seq):
        res = it.result
        res.stats["grouped"] = [{kk: v for kk, v in st.items() if kk != "sequence"}
                                for st in stats]
        w = info["window"]
        res.stats["sequence"].update(window=w,
                                     neighbours_used=neighbours_used(info["counts"][k], w))
        res.seconds = seconds
        report(run.clock, "image", k + 1, len(seq))
    return [np.asarray(st["spectrum"]) for st in stats]


def neighbours_used(counts, window: int) -> dict:
    """Return a page's share of group members taken from each relative page.

    A page's share of its groups' members taken from each relative page, ``{"-1":
    0.13, "0": 0.59, ...}`` (the pages used), from its member ``counts`` for the relative
    pages ``-window .. window`` (summed over tiles; ``docs/stacks.md``)."""
    c = np.asarray(counts, dtype=np.float64)
    share = c / max(float(c.sum()), 1.0)
    return {str(d): round(float(s), 4) for d, s in zip(range(-window, window + 1), share)
            if s > 0}
