"""The parameters' history (undo and redo) and named presets, without Qt.

:class:`ParamsHistory` keeps every valid set of parameters the panel has shown, the
changes of one field made in quick succession (a spin box's arrow held, a number typed
digit by digit) as one step.  Presets are parameter sets by name: the bundled
``default`` and ``fast`` (the grouped method's profiles) and the user's own, kept as
JSON with the trial settings left out, as a sidecar read with ``--params`` leaves them.
"""

from __future__ import annotations

import time

from ..params import DenoiseParams

__all__ = ["ParamsHistory", "BUNDLED_PRESETS", "preset_params", "COALESCE_SECONDS"]

#: changes closer together than this (seconds) to the same fields are one step of the history
COALESCE_SECONDS = 0.8

#: the presets every window has: the defaults, and the grouped method's fast profile
BUNDLED_PRESETS = {
    "default": DenoiseParams(),
    "fast": DenoiseParams(profile="fast"),
}


def preset_params(params: DenoiseParams) -> DenoiseParams:
    """What a preset keeps of ``params``: all but the trial settings (added noise)."""
    return params.replace(add_noise=None)


def _changed_fields(a: DenoiseParams, b: DenoiseParams) -> frozenset:
    da, db = a.to_dict(), b.to_dict()
    return frozenset(k for k in set(da) | set(db) if da.get(k) != db.get(k))


class ParamsHistory:
    """Undo and redo over the parameter sets shown, most recent last.

    ``clock``: the time source in seconds (a test's fake clock)."""

    def __init__(self, limit: int = 200, clock=None) -> None:
        self.states: list[DenoiseParams] = []
        self.index = -1  # the state shown
        self.limit = limit
        self._clock = clock or time.monotonic
        self._last: tuple[float, frozenset] | None = None  # (time, fields) of the last step

    def record(self, params: DenoiseParams) -> bool:
        """``params`` are shown now; True when that is a new step (redo is then gone)."""
        if self.index >= 0 and params == self.states[self.index]:
            return False
        now = self._clock()
        fields = _changed_fields(self.states[self.index], params) if self.index >= 0 else frozenset()
        del self.states[self.index + 1:]
        same = (self._last is not None and now - self._last[0] < COALESCE_SECONDS
                and fields == self._last[1] and self.index > 0)
        if same:  # the same fields again at once: one step
            self.states[self.index] = params
        else:
            self.states.append(params)
            if len(self.states) > self.limit:
                del self.states[0]
            self.index = len(self.states) - 1
        self._last = (now, fields)
        return not same

    def can_undo(self) -> bool:
        return self.index > 0

    def can_redo(self) -> bool:
        return 0 <= self.index < len(self.states) - 1

    def undo(self) -> DenoiseParams | None:
        """The parameters before the last step (None: nothing to undo)."""
        if not self.can_undo():
            return None
        self.index -= 1
        self._last = None
        return self.states[self.index]

    def redo(self) -> DenoiseParams | None:
        """The parameters of the step undone last (None: nothing to redo)."""
        if not self.can_redo():
            return None
        self.index += 1
        self._last = None
        return self.states[self.index]
