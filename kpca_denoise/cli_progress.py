"""The command line's progress on stderr: a one-line bar on a terminal, plain lines in a
log, and one estimate of the time left for the whole run (all images, tiles, pages and
ranks) from the share of its work done so far (``docs/speed.md#progress``)."""

from __future__ import annotations

import re
import sys
import time

import numpy as np

from .core.progress import ProgressEvent

__all__ = ["ProgressBar", "RunEstimate", "work_weight", "duration"]

#: the share of a chunk of groups finished when each step of the grouped method reports
#: it (cumulative shares of the time in the grouped core's statistics, 1 Mpx grey: docs/speed.md)
STEP_SHARE = {"grouping": 0.39, "eigensolver": 0.74, "projection": 0.80, "preimage": 0.98,
              "reassembly": 1.0}

#: a log line at least this often (seconds) while a run goes on, with the time left
HEARTBEAT = 30.0

_STAGE = re.compile(r"stage (\d+)")


def _now() -> float:
    """The time source of the estimates and lines, in seconds (a test's fake clock)."""
    return time.monotonic()


def work_weight(shape, patch_set: bool = False, stack: bool = False) -> float:
    """The work an item takes, in grey pixels: its pixels (every page's), a colour pixel
    counting as two (the matching is shared, each channel has its own groups' PCA);
    a patch set's values."""
    shape = tuple(int(s) for s in shape)
    if patch_set or len(shape) < 2:
        return float(max(np.prod(shape), 1))
    pages, dims = (shape[0], shape[1:]) if stack else (1, shape)
    channels = min(dims[2], 3) if len(dims) > 2 else 1
    return float(pages * dims[0] * dims[1] * (1 + 0.5 * (channels - 1)))


def duration(seconds: float) -> str:
    """``42 s``, ``7 min``, ``1.5 h``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class RunEstimate:
    """The share of a run's work done and the time left at its rate so far.

    Each item (an image, a page, a file read lazily) weighs :func:`work_weight`; an item
    counts from :meth:`begin` (its pixels read for denoising) to :meth:`finish` (or the
    executor's ``image`` event, which finishes the oldest begun).  The items under way
    (one image, or a stack's pages denoised in one call) are done in pieces: tiles, and
    a stack's pages one by one unless it is denoised as one; a piece's share done comes
    from the grouped method's chunks of groups in each stage (and a stack's pages).  A
    piece ends at a ``tiles`` event or when the stages start again.  The rate is measured
    from the first work done inside an item (or, when none is reported, from the first
    item's end), so the kernels' first compile is not taken for the pace of the run.

    Without weights, each image of the executor's count weighs one.  ``tiles``: the tiles
    each item is planned in; ``stack_tiles``: those of the stack a page belongs to when
    it is denoised as one (the sequence path, told by its ``page`` events); ``stages``:
    the passes over each piece; ``clock``: the time source (seconds)."""

    def __init__(self, weights: dict | None = None, stages: int = 2, clock=None,
                 tiles: dict | None = None, stack_tiles: dict | None = None):
        self.weights = dict(weights or {})
        self.tiles = dict(tiles or {})
        self.stack_tiles = dict(stack_tiles or {})
        self.total = float(sum(self.weights.values()))
        self.stages = max(int(stages), 1)
        self._clock = clock or _now
        self._open: list = []  # items begun and not finished, oldest first
        self._finished: set = set()
        self._done = 0.0  # weight of the finished items
        self._images = 0  # the executor's count of finished images
        self._anchor: tuple | None = None  # (time, share done) the rate is measured from
        self._coarse = True  # the anchor is an item's start (no work measured inside one)
        self._reset_item()

    def _reset_item(self) -> None:
        self._pieces = 0  # pieces of the items under way finished
        self._piece = 0.0  # share of the current piece done
        self._per_unit = None  # tiles per image (or per stack as one), from the tiles events
        self._as_one = False  # a stack denoised as one ('page' events)
        self._last = None  # (stage, done) of the last chunk reported

    def _n_pieces(self) -> int:
        first = self._open[0] if self._open else None
        if self._as_one:
            return self._per_unit or self.stack_tiles.get(first, 1)
        return max(len(self._open), 1) * (self._per_unit or self.tiles.get(first, 1))

    def begin(self, key) -> None:
        """Item ``key`` starts (again: nothing)."""
        if key in self._open or key in self._finished:
            return
        if not self._open:
            self._reset_item()
        self._open.append(key)
        if self._anchor is None:
            self._anchor = (self._clock(), self.fraction() or 0.0)

    def finish(self, key=None) -> None:
        """Item ``key`` (None: the oldest begun) is through, denoised or failed."""
        if key is None:
            key = self._open[0] if self._open else ("image", len(self._finished))
        if key in self._finished:
            return
        if key in self._open:
            self._open.remove(key)
        self._finished.add(key)
        mean = self.total / len(self.weights) if self.weights else 1.0
        self._done += self.weights.get(key, mean)
        if not self._open:
            self._reset_item()
        if self._coarse:  # no work measured inside an item (the global method's set-wide
            # fit, images on a cluster's workers): the rate from the first image's end
            self._anchor, self._coarse = (self._clock(), self.fraction() or 0.0), False

    def __call__(self, ev: ProgressEvent) -> None:
        if self._anchor is None and ev.stage != "done":
            self._anchor = (self._clock(), 0.0)  # no item begun: the first event starts
        if ev.stage == "image":
            if not self.weights and ev.total:
                self.total = float(ev.total)
            for _ in range(self._images, ev.done):
                self.finish()
            self._images = ev.done
            return
        if ev.stage == "tiles" and ev.total:
            self._per_unit = ev.total
            # a tile ends: tiles of one image may finish between two events
            self._pieces, self._piece, self._last = max(self._pieces + 1, ev.done), 0.0, None
        else:
            m = _STAGE.fullmatch(ev.message or "")
            if m is None or not ev.total or (ev.stage not in STEP_SHARE and ev.stage != "page"):
                return
            stage = min(int(m.group(1)), self.stages)
            if ev.stage == "page":
                self._as_one = True
                step = 1.0
            else:
                step = STEP_SHARE[ev.stage]
                if (not self._as_one and self._last is not None
                        and (stage, ev.done) < self._last):  # the stages start again
                    self._pieces, self._piece = self._pieces + 1, 0.0
                self._last = (stage, ev.done)
            within = (max(ev.done - 1, 0) + step) / ev.total if ev.done else 0.0
            share = (stage - 1 + min(within, 1.0)) / self.stages
            self._piece = max(self._piece, min(share, 1.0))
        if self._coarse:
            f = self.fraction()
            if f is not None and f > 0:  # the first work measured inside an item
                self._anchor, self._coarse = (self._clock(), f), False

    def _current(self) -> float:
        """Weight of the items under way."""
        if not self.weights:
            return 1.0
        return sum(self.weights.get(k, 0.0) for k in self._open)

    def fraction(self) -> float | None:
        """Share of the run's work done, 0..1 (without weights or an image count: one
        image's)."""
        if self.total <= 0 and self.weights:
            return None
        item = min((self._pieces + self._piece) / self._n_pieces(), 1.0)
        return min((self._done + item * self._current()) / (self.total or 1.0), 1.0)

    def left(self) -> float | None:
        """Seconds left for the whole run at the rate so far (None until measured)."""
        f = self.fraction()
        if f is None or self._anchor is None:
            return None
        t0, f0 = self._anchor
        spent = self._clock() - t0
        if f <= f0 or spent < 2.0:
            return None
        return spent / (f - f0) * (1.0 - f)

    def text(self) -> str:
        """``about 4 min left (run 23 %)``, ``run 23 %`` before the rate is known, blank
        before anything is done."""
        f = self.fraction()
        if f is None or (f <= 0 and not self._finished):
            return ""
        left = self.left()
        pct = f"run {100 * f:.0f} %"
        return pct if left is None or left < 0.5 else f"about {duration(left)} left ({pct})"


class ProgressBar:
    """A one-line progress bar on stderr; when stderr is not a terminal (a log file,
    a pipe), one line per stage the first time it starts, one per finished image, one
    per finished tile of a large image (when 5 s or a tenth of its tiles have passed
    since the last) and one at least every
    :data:`HEARTBEAT` seconds, each with the whole run's time left (:class:`RunEstimate`)."""

    def __init__(self, stream=None, enabled=True, names=None, estimate: RunEstimate | None = None,
                 clock=None):
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.names = list(names or [])
        self._clock = clock or _now
        self.estimate = estimate if estimate is not None else RunEstimate(clock=self._clock)
        self._last_stage = None
        self._seen: set = set()
        self._last_draw = 0.0
        self._t0 = self._clock()
        self._last_tiles = -float("inf")
        self._tiles_shown = 0  # the tiles done at the last tiles line
        self._last_line = self._t0
        self._partial = False  # a terminal's bar drawn and not ended

    def begin(self, key) -> None:
        """Item ``key`` starts (see :class:`RunEstimate`)."""
        self.estimate.begin(key)

    def finish(self, key=None) -> None:
        self.estimate.finish(key)

    def _run(self, sep: str) -> str:
        text = self.estimate.text()
        return f"{sep}{text}" if text else ""

    def __call__(self, ev: ProgressEvent) -> None:
        self.estimate(ev)
        if not self.enabled or ev.stage == "done":
            return
        if not self.tty:
            self._plain(ev)
            return
        now = self._clock()
        new_stage = ev.stage != self._last_stage
        finished = ev.total and ev.done >= ev.total
        if not (new_stage or finished or now - self._last_draw > 0.2):
            return
        self._last_draw = now
        frac = ev.done / ev.total if ev.total else 0.0
        width = 24
        bar = "#" * int(width * frac) + "-" * (width - int(width * frac))
        text = f"{ev.stage:<12} [{bar}] {ev.done}/{ev.total}{self._run(', ')}"
        self.stream.write("\r" + text.ljust(78))
        if finished:
            self.stream.write("\n")
        self._partial = not finished
        self.stream.flush()
        self._last_stage = ev.stage

    def note(self, text: str) -> None:
        """A line of its own (on a terminal, below the bar), even when the bar is off."""
        if self._partial:
            self.stream.write("\n")
            self._partial = False
        self._line(text)

    def _plain(self, ev: ProgressEvent) -> None:
        now = self._clock()
        if ev.stage == "image":
            self._tiles_shown = 0  # (an image that failed between its tiles too)
            if not ev.done:
                return
            what = "failed" if ev.message == "failed" else "done"
            left = self.estimate.left() if ev.done < ev.total else None
            more = f", about {duration(left)} left" if left is not None and left >= 0.5 else ""
            self._line(f"image {ev.done}/{ev.total} {what} ({now - self._t0:.1f} s{more})")
        elif ev.stage == "tiles" and ev.total and (
                ev.done >= ev.total or now - self._last_tiles >= 5
                or ev.done - self._tiles_shown >= max(1, ev.total // 10)):
            # a large image's tiles: a line when 5 s or a tenth of them have passed
            # since the last, with the time left (the next image counts from 0)
            self._last_tiles = now
            self._tiles_shown = ev.done if ev.done < ev.total else 0
            self._line(f"tiles {ev.done}/{ev.total} ({now - self._t0:.0f} s){self._run(', ')}")
        elif ev.stage not in self._seen and ev.stage != "tiles":
            self._seen.add(ev.stage)
            self._line(f"{ev.stage} ...")
        elif now - self._last_line >= HEARTBEAT and self.estimate.text():
            # a long image (or a stack denoised as one) between its other lines
            self._line(f"{now - self._t0:.0f} s, {self.estimate.text()}")

    def _line(self, text: str) -> None:
        self._last_line = self._clock()
        self.stream.write(text + "\n")
        self.stream.flush()
