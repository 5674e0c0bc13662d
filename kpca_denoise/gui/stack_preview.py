"""The window's preview of a page that the run denoises with its neighbouring pages (a
stack's page, or an image of a sequence 'yes'): the sequence's decisions made as the full
run makes them (each page's noise, the link decision and shifts, the shared noise, the
stack path's calibration), kept per sequence and parameters, and the region denoised
through the stack path on the pages within its reach, so that the preview is the full
run's pixels there.  No Qt: it runs in the compute process
(:func:`kpca_denoise.gui.image_preview.run_preview` calls it).
``docs/gui.md#preview-before-the-long-run``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..core.progress import check_cancel, report
from ..params import DenoiseParams
from ..pipeline import denoise_set
from ..core.grouped.sequence import StackReach, page_reach
from ..prepare import PreparedItem
from ..sequence import decide_run, link_run, neighbours_used, runs_of_one_size
from ..stack_tiling import denoise_stack_tile, stack_geometry, stack_plan
from ..tiling import merge_grouped_stats
from ..working import channels
from .jobs import JobItem, PreviewOutcome, keep, params_key, unique_names
from .preview_parts import (box_tile, finish_preview, measurement_params, outcome_noise,
                            stabiliser_of, with_strength)

__all__ = ["StackRun", "SequenceDecisions", "sequence_decisions", "decisions_kept",
           "stack_page_reach", "pages_read", "preview_stack_page"]

#: the decisions of a sequence's previews (a stack's pages, or separate images under
#: sequence 'yes') by (its images' keys, parameters without ranks): each page's noise, the
#: link decision, the shifts, the shared noise and the stack path's calibration, made as
#: the full run makes them (:func:`kpca_denoise.sequence.run_sequences`); moving the
#: region, or previewing another page, re-uses them
_SEQUENCES: dict = {}
#: the pages' noise measurement at strength 1, by (their keys, what it depends on)
_SEQUENCE_MEASURED: dict = {}
_SEQUENCES_KEPT = 2  # each holds a sequence's pages


@dataclass
class StackRun:
    """A run of pages of one size of a sequence (``sequence.runs_of_one_size``: a page
    that failed or has no noise to remove cuts it) as the full run denoises it:
    ``members`` their indices in the sequence.  Linked (the decision 'sequence', in the
    pages' stats): the pages after the shared noise (``items``, ``sigma``, ``vst``),
    ``params`` with the stack path's decisions (:func:`kpca_denoise.tiling.stack_plan`),
    the pairs' links and shifts; else no ``items``."""

    members: tuple
    items: list = field(default_factory=list)
    sigma: float = float("nan")
    vst: Any = None
    params: DenoiseParams | None = None
    linked: np.ndarray | None = None
    shifts: np.ndarray | None = None


@dataclass
class SequenceDecisions:
    """A sequence's previews' decisions: each page's ``ImageResult`` of the preparation
    (noise added and measured; errors and notes) and its runs of two pages or more."""

    results: list
    runs: list

    def run_of(self, k: int) -> tuple:
        """``(run, index of page k in it)``, or ``(None, -1)`` for a page the run
        denoises alone (no neighbouring page of its size, or it failed)."""
        return next(((r, r.members.index(k)) for r in self.runs if k in r.members), (None, -1))


def _sequence_key(members, params: DenoiseParams) -> tuple:
    return tuple(m.key for m in members), params_key(params)


def decisions_kept(members, params: DenoiseParams) -> bool:
    """Whether this process keeps the decisions of the sequence of ``members`` (JobItems)
    with ``params``, and with them its pages: a preview of one of its pages then reads no
    other page's array."""
    return _sequence_key(members, params) in _SEQUENCES


def sequence_decisions(members: list, params: DenoiseParams, progress, cancel) -> SequenceDecisions:
    """The decisions of the sequence of ``members`` (JobItems in load order) as the full
    run's :func:`~kpca_denoise.pipeline.denoise_set` makes them: every page measured
    (``fit_only``, a page at a time, a cancel checked between them; kept without the
    strength), then per run of one size the link decision and, linked, the shared noise
    and the stack path's calibration (:func:`kpca_denoise.sequence.run_sequences` up to
    the stack path)."""
    key = _sequence_key(members, params)
    found = _SEQUENCES.get(key)
    if found is not None:
        return found
    mp = measurement_params(params)
    mkey = (key[0], params_key(mp))
    measured = _SEQUENCE_MEASURED.get(mkey)
    if measured is None:
        measured = {}  # page -> its ImageResult, kept as they come (a cancel keeps them)
        keep(_SEQUENCE_MEASURED, mkey, measured, _SEQUENCES_KEPT)
    names = unique_names([m.name for m in members])
    for i, m in enumerate(members):
        if i not in measured:  # page i of the set: its added noise is the set's (first_index)
            check_cancel(cancel)
            measured[i] = denoise_set([m.array], mp, names=[names[i]], first_index=i,
                                      fit_only=True).images[0]
        report(progress, "noise", i + 1, len(members))
    results = [with_strength(measured[i], params) for i in range(len(members))]
    items = [PreparedItem("image", r.noisy, r, channels=channels(r.noisy), vst=stabiliser_of(r))
             for r in results if not r.error and not r.outputs]
    runs = []
    for seq in runs_of_one_size(items):
        if len(seq) > 1:
            check_cancel(cancel)
            runs.append(_stack_run(seq, params))
    found = SequenceDecisions(results, runs)
    keep(_SEQUENCES, key, found, _SEQUENCES_KEPT)
    return found


def _stack_run(seq: list, params: DenoiseParams) -> StackRun:
    """One run's link decision from its pages' central crops and, linked, its one noise
    model and level (:func:`kpca_denoise.sequence.run_sequences`'s steps) and the stack
    path's decisions on its middle page (:func:`kpca_denoise.tiling.stack_plan`: the range
    of a float stack, the calibration every tile gets)."""
    dec = decide_run(params, seq)
    run = StackRun(tuple(it.result.index for it in seq))
    if dec.decision != "sequence":
        return run
    sigma = link_run(params, seq, dec)
    vst, middle = seq[0].vst, seq[len(seq) // 2].data
    shifts = np.asarray(dec.shifts, dtype=np.int64).reshape(-1, 2)
    # calibrated however many tiles the full run makes: when the pages make one, it
    # calibrates inside the stack path, on the middle page's central crop, as here
    calibrated, _ = stack_plan(middle, sigma, params, (len(seq),) + middle.shape, shifts,
                               vst=vst, calibrate=True)
    return replace(run, items=list(seq), sigma=sigma, vst=vst, params=calibrated,
                   linked=np.asarray(dec.linked, dtype=bool), shifts=shifts)


def stack_page_reach(params: DenoiseParams) -> int:
    """Pages either side of a page whose pixels its result in the stack path depends on:
    a group reads and writes :func:`~kpca_denoise.core.grouped.sequence.page_reach` pages
    either side of its reference page, so a page's result depends on the references
    within that reach and their reads (twice it), and with two stages on the pilot of
    those pages, itself so made (four times it; measured: with fewer pages around it
    the page's result differs)."""
    r = StackReach()  # the full run's (kpca_denoise.sequence._run_stack)
    return (4 if params.grouped_options().two_stage else 2) * page_reach(r.window, r.depth)


def pages_read(run: StackRun, k: int) -> tuple[int, int]:
    """``(lo, hi)``: the pages of ``run`` (indices in it) a preview of page ``k`` reads,
    those within :func:`stack_page_reach` of it, its scene only: a group never crosses an
    unlinked pair, and the page beyond one is read so that its neighbour takes its own
    slices there, as in the full stack (not the mirrored ones of the stack's end)."""
    far = stack_page_reach(run.params)
    lo, hi = max(0, k - far), min(len(run.items) - 1, k + far)
    lo = max([j for j in range(lo, k) if not run.linked[j]], default=lo)
    hi = min([j + 1 for j in range(k, hi) if not run.linked[j]], default=hi)
    return lo, hi


def preview_stack_page(item: JobItem, run: StackRun, k: int, params: DenoiseParams,
                        box: tuple, progress, cancel, out: PreviewOutcome,
                        t: float) -> PreviewOutcome:
    """The region ``box`` of page ``k`` of a linked ``run`` through the stack path, as
    the full run denoises it (:func:`kpca_denoise.sequence.run_sequences`): the run's
    link decision, shifts, shared noise and calibration, the pages within reach of the
    page (:func:`pages_read`), each cropped to the region and the halo the stack path
    needs (:func:`kpca_denoise.tiling.stack_geometry`): its core is the full run's
    pixels of the page there."""
    page = run.items[k]
    outcome_noise(out, page.result, params, page.data)
    lo, hi = pages_read(run, k)
    linked, shifts = run.linked[lo:hi], run.shifts[lo:hi]
    calibrated = run.params.replace(ranks=tuple(params.ranks))
    try:
        tile = box_tile(page.data.shape, box, *stack_geometry(calibrated, shifts))
    except ValueError as exc:
        out.error = str(exc)
        return out
    kept: dict = {}

    def sink(q: int, done: dict) -> None:  # only the previewed page's core is kept
        if q == k - lo:
            kept.update(done)

    _, stats = denoise_stack_tile([it.data[tile.region] for it in run.items[lo:hi + 1]], tile,
                                  run.sigma, calibrated, linked=linked, shifts=shifts,
                                  vst=run.vst, progress=progress, cancel=cancel, sink=sink,
                                  first_page=lo)
    info = stats[0]["sequence"]
    # the pages read beyond a cut (see pages_read) give it nothing: not among those used
    first = lo + 1 if lo < k and not run.linked[lo] else lo
    last = hi - 1 if hi > k and not run.linked[hi - 1] else hi
    out.sequence.update(first=first, last=last,
                        neighbours_used=neighbours_used(info["counts"][k - lo], info["window"]))
    out.group_spectra = merge_grouped_stats([stats])
    return finish_preview(out, item, page.data, tile, {r: kept[r] for r in params.ranks}, t)
