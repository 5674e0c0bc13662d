"""What one :func:`~kpca_denoise.pipeline.denoise_set` call produces and shares: the
results per item and for the set, the keys an item's outputs get, and the context
(parameters, stage clock, cancel token, resolved values) its stages share.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .core.progress import ProgressCallback, ProgressEvent
from .estimator import KernelPCA
from .params import DenoiseParams


#: the global method's rank for images when the ranks say None
GLOBAL_DEFAULT_RANK = 16


@dataclass
class ImageResult:
    """One item of the set: its outputs per rank, or the error that stopped it."""

    index: int
    name: str
    outputs: dict = field(default_factory=dict)  # rank -> array, input's shape and dtype
    noisy: np.ndarray | None = None  # the input actually denoised (noise added if asked)
    noise_sigma: float = float("nan")  # pixel units
    noise_estimated: bool = False
    seconds: float = 0.0
    stats: dict = field(default_factory=dict)
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the item was denoised (no error stopped it)."""
        return self.error is None


@dataclass
class SetResult:
    """What one :func:`denoise_set` call returns: each item's result and the set's."""

    params: DenoiseParams
    ranks: tuple
    images: list
    eigenvalues: np.ndarray
    resolved: dict
    timings: dict
    model: KernelPCA | None = None
    #: every fitted global model, by the key of its group of items (what
    #: ``denoise_set(..., fitted_models=...)`` takes back)
    models: dict = field(default_factory=dict)


class StageClock:
    """Wraps a progress callback and attributes wall time to stages.

    An event with ``done > 0`` reports work finished in its stage, so the time since
    the previous event is charged to that stage; an event with ``done == 0`` marks a
    stage's start (and ``close`` the end), so that time goes to the stage before it.
    An event that carries its stage's ``seconds`` (measured by the core, whose steps
    ran on several threads at once) is charged those instead.  ``clock`` is the time
    source (seconds)."""

    def __init__(self, inner: ProgressCallback | None, clock=time.perf_counter):
        self.inner = inner
        self.seconds: dict[str, float] = {}
        self._clock = clock
        self._last = clock()
        self._stage: str | None = None

    def __call__(self, ev: ProgressEvent) -> None:
        now = self._clock()
        if ev.seconds is not None:  # the core measured the stage itself
            stage, spent = ev.stage, ev.seconds
        else:
            stage = ev.stage if ev.done > 0 or self._stage is None else self._stage
            spent = now - self._last
        self.seconds[stage] = self.seconds.get(stage, 0.0) + spent
        self._last = now
        self._stage = ev.stage
        if self.inner is not None:
            self.inner(ev)

    def close(self) -> None:
        """End the last stage: its time is charged and a "done" event passed on."""
        self(ProgressEvent("done", 0, 0))


@dataclass
class RunContext:
    """What the stages of one :func:`denoise_set` call share."""

    params: DenoiseParams
    clock: StageClock
    cancel: Any = None
    tile_map: Any = None
    resolved: dict = field(default_factory=dict)


def result_keys(params: DenoiseParams, is_patchset: bool) -> tuple:
    """Return the result keys an item's outputs get.

    A key is a rank, or None for the method's automatic choice."""
    if is_patchset:
        return tuple(sorted({r for r in params.ranks if r is not None})) + (
            (None,) if None in params.ranks else ())
    if params.method == "global":
        return global_ranks(params)
    return tuple(params.ranks)


def global_ranks(params: DenoiseParams) -> tuple[int, ...]:
    """Return the global method's ranks for images, ascending.

    A rank of None is :data:`GLOBAL_DEFAULT_RANK`."""
    return tuple(sorted({GLOBAL_DEFAULT_RANK if r is None else int(r) for r in params.ranks}))
