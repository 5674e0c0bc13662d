"""The compute process's vocabulary, with no Qt: what the window sends (:class:`Job`,
:class:`JobItem`), what comes back (:class:`ItemOutcome`, :class:`PreviewOutcome`), how
results are keyed and labelled, their metrics, and the caches the compute process keeps
between jobs (fitted models, a preview's decisions).  The bottom of the computing side:
:mod:`.stack_preview`, :mod:`.image_preview` and :mod:`.compute` build on it, and the
window's Qt modules read its types.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np

from ..params import DenoiseParams
from ..pipeline import evaluate, remaining_noise

__all__ = [
    "JobItem",
    "Job",
    "ItemOutcome",
    "PreviewOutcome",
    "Emit",
    "FIT_ERRORS",
    "compute_metrics",
    "params_key",
    "rank_sort_key",
    "rank_label",
    "unique_names",
    "cached_model",
    "keep_model",
    "keep",
    "MODELS",
]

#: a message from the compute process: ``emit(kind, payload)``
Emit = Callable[[str, Any], None]

def params_key(params: DenoiseParams, fit_set: tuple = ()) -> str:
    """Everything that decides a result except the ranks, as a stable string.

    ``fit_set``: the keys of the images whose patches trained one shared model
    (a set fit, see :class:`Job`), in the order they were given; empty for an
    image fitted alone.  A set fit depends on every member, so it is part of
    the key.
    """
    d = params.to_dict()
    d.pop("ranks", None)
    if len(fit_set) > 1:
        d["fit_set"] = list(fit_set)
    return json.dumps(d, sort_keys=True, default=str)


def rank_sort_key(rank: int | None) -> float:
    """Order ranks with ``None`` (no cap) last: it keeps the most components."""
    return float("inf") if rank is None else float(rank)


def rank_label(rank: int | None) -> str:
    """A rank as the window writes it: ``None`` is 'auto'."""
    return "auto" if rank is None else str(rank)


def compute_metrics(estimate: np.ndarray, clean: np.ndarray | None, dtype: np.dtype,
                    is_patchset: bool) -> dict:
    """PSNR/SSIM against ``clean`` when there is one, else the remaining noise.

    Returns ``{'psnr', 'ssim'}``, ``{'remaining_noise'}``, ``{}`` (a patch set
    without a reference: a noise estimate of a mosaic means nothing), or
    ``{'error': text}`` when the reference does not match.
    """
    if clean is not None:
        if np.shape(clean) != np.shape(estimate):
            return {"error": f"reference shape {np.shape(clean)} ≠ image shape {np.shape(estimate)}"}
        return evaluate(clean, estimate, dtype, patchset=is_patchset)
    if is_patchset:
        return {}
    return {"remaining_noise": remaining_noise(estimate)}


@dataclass
class JobItem:
    """One image of a job and the ranks still missing for it (``array`` None: not sent,
    :meth:`Job.without_pages`)."""

    key: str
    name: str
    array: np.ndarray | None
    is_patchset: bool
    ranks: tuple
    reference: np.ndarray | None = None


@dataclass
class Job:
    items: list
    params: DenoiseParams
    purpose: str = "run"  # 'run', 'export' (what the window does when it finishes), 'preview'
    #: or 'prepare' (a preview's whole-image decisions, in the background)
    box: tuple = ()  # a preview's region (y0, y1, x0, x1) of its one item
    job_id: int = 0
    #: tuples of indices into ``items`` denoised together by one ``denoise_set``
    #: call, i.e. one global kernel PCA for the group (one per kind of image),
    #: as the command line fits them for a folder; every other item is fitted alone.
    #: A preview's (or its decisions') sequence: its one set, the pages of the
    #: ``focus`` item's sequence (the region of ``items[focus]`` is previewed)
    sets: list = field(default_factory=list)
    focus: int = 0

    def without_pages(self) -> "Job":
        """The job as first sent to the compute process: a preview of a sequence's page
        carries that page's arrays only, as the process keeps the pages with the
        sequence's decisions (:func:`.stack_preview.decisions_kept`); where it does not,
        it answers ``status`` 'pages' and gets the whole job (:mod:`.worker`)."""
        if self.purpose != "preview" or not self.sets:
            return self
        return replace(self, items=[it if i == self.focus else replace(it, array=None,
                                                                       reference=None)
                                    for i, it in enumerate(self.items)])


@dataclass
class PreviewOutcome:
    """A region of one image denoised at every rank (sent to the GUI): ``box`` (y0, y1,
    x0, x1) is the core computed, exactly the full run's pixels there."""

    key: str
    params_key: str
    params: DenoiseParams
    box: tuple = ()
    outputs: dict = field(default_factory=dict)  # rank -> the box's pixels
    metrics: dict = field(default_factory=dict)  # rank -> metrics in the box
    noisy_metrics: dict = field(default_factory=dict)
    noisy: np.ndarray | None = None  # the whole noisy image when noise was added
    noise_sigma: float = float("nan")
    noise_estimated: bool = False
    noise_model: dict | None = None
    noise: dict | None = None  # the measured noise (white or correlated; stats['noise'])
    spectrum: np.ndarray | None = None  # the global model's eigenvalues
    group_spectra: list = field(default_factory=list)  # grouped: stats per channel
    seconds: float = 0.0
    error: str | None = None
    note: str | None = None
    decided_before: bool = False  # the whole image's decisions were made before (kept)
    #: a page of a sequence: the run's decision for it (``stats['sequence']`` of the
    #: pipeline: decision, choice, reason, page, pages) and, denoised with its neighbours,
    #: the pages the preview read (``first``, ``last``: indices in the sequence, as
    #: ``page``) and the share of its groups' members from each (``neighbours_used``)
    sequence: dict | None = None


@dataclass
class ItemOutcome:
    """What was computed for one image (sent to the GUI)."""

    key: str
    name: str
    params_key: str
    params: DenoiseParams
    outputs: dict = field(default_factory=dict)  # rank -> array, the input's shape and dtype
    metrics: dict = field(default_factory=dict)  # rank -> dict
    residual_std: dict = field(default_factory=dict)  # rank -> float
    noisy: np.ndarray | None = None
    noisy_metrics: dict = field(default_factory=dict)
    noise_sigma: float = float("nan")
    noise_estimated: bool = False
    eigenvalues: np.ndarray | None = None
    total_variance: float | None = None
    resolved: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    seconds: float = 0.0
    error: str | None = None
    fit_set: tuple = ()  # keys of the images the model was fitted on together; () = this one alone
    partial: bool = False  # more ranks of this image follow in later outcomes
    note: str | None = None  # the pipeline's word on this image (e.g. no noise: unchanged)
    #: rank -> the ranks a command-line run needs to give exactly this output (the global
    #: kernel PCA is fitted for the largest rank of a run: a smaller rank depends on it)
    fit_ranks: dict = field(default_factory=dict)


def unique_names(names: list[str]) -> list[str]:
    """``names`` made unique with " (2)", " (3)", ...: ``denoise_set`` reports which items
    each model covers by name."""
    seen: dict[str, int] = {}
    out = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n} ({seen[n]})")
    return out



#: fitted global models of this (worker) process, by (image key, parameters
#: without ranks): a new rank up to a model's size reuses its eigendecomposition
MODELS: dict = {}
#: how many fitted models the compute process keeps
MODELS_KEPT = 16


#: what a failed fit raises (anything else is a bug, reported as a failed run)
FIT_ERRORS = (ValueError, MemoryError, FloatingPointError, np.linalg.LinAlgError)


def cached_model(model_key):
    """The fitted global model kept under ``model_key``, or None."""
    return MODELS.get(model_key)


def keep_model(model_key, model) -> None:
    """Keep ``model`` (a fitted global model) under ``model_key``, the latest last; the
    oldest go beyond :data:`MODELS_KEPT`."""
    if model is not None:
        keep(MODELS, model_key, model, MODELS_KEPT)


def keep(cache: dict, key, value, kept: int) -> None:
    """Put ``value`` under ``key`` in ``cache`` as its latest entry; the oldest go beyond
    ``kept`` (each entry of the compute process's caches holds an image or more)."""
    cache.pop(key, None)
    cache[key] = value
    while len(cache) > kept:
        cache.pop(next(iter(cache)))
