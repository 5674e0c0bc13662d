"""Progress reporting and cancellation shared by every long step.

Long work reports :class:`ProgressEvent` objects through a plain callable and
checks a cancel token between chunks.  A cancel token is anything with an
``is_set()`` method (:class:`CancelToken`, :class:`threading.Event`) or a
zero-argument callable returning ``True`` when the work should stop.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

__all__ = [
    "Cancelled",
    "CancelToken",
    "ProgressEvent",
    "ProgressCallback",
    "report",
    "check_cancel",
    "cancel_requested",
]


class Cancelled(RuntimeError):
    """Raised between chunks when the cancel token is set."""


class CancelToken:
    """A thread-safe flag that asks a running computation to stop.

    ``cancel()`` from any thread, ``is_set()`` from the worker."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        """Ask the computation to stop (from any thread)."""
        self._event.set()

    def is_set(self) -> bool:
        """Whether a stop was asked."""
        return self._event.is_set()

    def __deepcopy__(self, memo) -> "CancelToken":
        return self  # a copy of an estimator holding it (sklearn's clone) shares the flag

    def __reduce__(self):
        return (_cancel_token, (self.is_set(),))  # pickled: a flag of its own, as it stood


def _cancel_token(is_set: bool) -> CancelToken:
    """A :class:`CancelToken` set or not (its lock cannot be pickled, its state can)."""
    token = CancelToken()
    if is_set:
        token.cancel()
    return token


@dataclass(frozen=True)
class ProgressEvent:
    """One progress report.

    stage : one of ``"gram"``, ``"eigensolver"``, ``"projection"``, ``"preimage"``,
        ``"reassembly"``, ``"grouping"``, ``"noise"`` (and ``"image"`` for set-level
        progress).
    done, total : units of work finished and expected in this stage.
    eigenvalues : the current estimate of the leading eigenvalues (descending),
        sent by the eigensolver while it iterates so a plot can update live.
    message : optional human-readable detail.
    seconds : the time the stage took, when the core measured it itself (its work ran
        on several threads at once, the event sent once it was done); a stage clock
        takes it rather than the time since the previous event.
    """

    stage: str
    done: int
    total: int
    eigenvalues: np.ndarray | None = None
    message: str = ""
    seconds: float | None = None


ProgressCallback = Callable[[ProgressEvent], Any]


def report(
    progress: ProgressCallback | None,
    stage: str,
    done: int,
    total: int,
    *,
    eigenvalues: np.ndarray | None = None,
    message: str = "",
    seconds: float | None = None,
) -> None:
    """Send one event if a callback was given."""
    if progress is not None:
        progress(ProgressEvent(stage, int(done), int(total), eigenvalues, message, seconds))


def cancel_requested(cancel: Any) -> bool:
    """Whether the token says stop.

    Whether the token (a :class:`CancelToken`, an object with ``is_set`` or a
    function returning True to stop) says stop; ``None`` never does."""
    if cancel is None:
        return False
    return bool(cancel.is_set() if hasattr(cancel, "is_set") else cancel())


def check_cancel(cancel: Any) -> None:
    """Raise :class:`Cancelled` if the token says so; ``None`` never cancels."""
    if cancel_requested(cancel):
        raise Cancelled("cancelled by the user")
