"""The grouped method's knobs: one frozen, typed options object with named presets.

Every knob is one line of :class:`GroupedOptions` with the values it takes next to
it; ``None`` means "decided from the image" (the geometry by :mod:`.geometry`, the
texture and detail measures by :mod:`.calibrate`).  A misspelt knob is refused.
What each knob does and the measurements behind its default: ``docs/options.md``.

>>> GroupedOptions(kappa1=4.0).kappa1
4.0
>>> GroupedOptions.preset("single-stage").two_stage
False
>>> GroupedOptions.from_dict({"kapa1": 4})
Traceback (most recent call last):
...
ValueError: unknown grouped option 'kapa1'; known are: contrast, data_range, detail, gamma_scale, gamma_scale2, group_size, group_size1, kappa1, kappa2, kappa2_chroma, kernel, lags, match_size, match_size1, max_iter, mean_kappa1, patch_size, periodic, regroup, search_radius, search_radius1, stride, stride1, tol, two_stage, window_beta
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Mapping

import numpy as np

from kpca_denoise.core.checks import is_finite

__all__ = ["GroupedOptions", "PRESETS", "check_value"]


def _knob(default: Any, *rule: Any) -> Any:
    """A dataclass field whose ``metadata["rule"]`` says what values it takes:
    ``("int", optional, lo, hi)``, ``("num", optional, op, lo[, hi])``, ``("bool",
    optional)``, ``("choice", optional, values)`` or ``("lags", optional)``."""
    return field(default=default, metadata={"rule": rule})


# The upper bounds, far above any use, keep memory, time and arithmetic bounded
# (a search radius of 1e9 ran out of memory, a Kaiser window of beta 1000 overflowed,
# kappa1 1e300 reached LAPACK as an illegal bound).
@dataclass(frozen=True)
class GroupedOptions:
    """The knobs of the grouped method, each with its range (``docs/options.md``).

    Parameters
    ----------
    kernel, patch_size, group_size, ..., data_range
        The fields below, each documented where it is declared; ``None`` means the
        method decides (from the noise level, the image's detail or a regular texture).
        A bad value raises ``ValueError`` naming the knob and its range.

    See Also
    --------
    PRESETS : the named presets ('default', 'fast', 'single-stage', ...), also through
        :meth:`preset` and ``DenoiseParams(profile=...)``.

    Examples
    --------
    >>> from kpca_denoise import GroupedOptions
    >>> g = GroupedOptions(kappa2=0.8)
    >>> g.changed()
    {'kappa2': 0.8}
    >>> GroupedOptions.from_dict({"search_radius": 16}).search_radius
    16
    """

    #: "rbf" or "linear" (plain group PCA in the same pipeline, an ablation)
    kernel: str = _knob("rbf", "choice", False, ("rbf", "linear"))
    #: patch side; None -> 5
    patch_size: int | None = _knob(None, "int", True, 1, 64)
    #: patches per group in stage 2 (stage 1 takes 40); fewer when the window has fewer
    group_size: int = _knob(32, "int", False, 2, 512)
    #: patches per group in stage 1; None -> 40
    group_size1: int | None = _knob(None, "int", True, 2, 512)
    #: search radius; None -> 32 (a 65x65 window), 40 for a regular texture
    search_radius: int | None = _knob(None, "int", True, 1, 256)
    #: stage-1 search radius; None -> ``search_radius``
    search_radius1: int | None = _knob(None, "int", True, 1, 256)
    #: side of the window compared in stage-1 matching; None -> from noise and detail
    match_size1: int | None = _knob(None, "int", True, 1, 99)
    #: side of the window compared in stage-2 matching; None -> patch + 6 (+ 2 texture)
    match_size: int | None = _knob(None, "int", True, 1, 99)
    #: step between stage 2's reference patches, at most the patch side; None -> the
    #: patch side (``stride1`` without ``regroup`` and for a regular texture)
    stride: int | None = _knob(None, "int", True, 1, 32)
    #: step between stage 1's (the pilot's) reference patches; None -> ``stride`` when
    #: given, else patch - 1
    stride1: int | None = _knob(None, "int", True, 1, 32)
    #: ``c`` of the stage-1 kernel width ``gamma = 1 / (c 2 d sigma^2)``
    gamma_scale: float = _knob(16.0, "num", False, ">", 0.001, 1e6)
    #: ``c`` of the stage-2 kernel width
    gamma_scale2: float = _knob(32.0, "num", False, ">", 0.001, 1e6)
    #: stage-1 threshold in noise eigenvalues; None -> 4.5 (rbf), 3.0 (linear)
    kappa1: float | None = _knob(None, "num", True, ">", 0, 1000)
    #: stage-2 coefficient-noise multiplier; None -> 0.7, 1.0 for a regular texture
    kappa2: float | None = _knob(None, "num", True, ">", 0, 1000)
    #: ``kappa2`` of the channels after the first (chrominances); None -> 1.5 kappa2
    kappa2_chroma: float | None = _knob(None, "num", True, ">", 0, 1000)
    #: pre-image fixed-point iterations per member
    max_iter: int = _knob(1, "int", False, 1, 10000)
    #: pre-image tolerance: RMS change per pixel, in units of sigma
    tol: float = _knob(1e-2, "num", False, ">", 0, 1)
    #: Kaiser window on the overlap-averaging weights (0: flat)
    window_beta: float = _knob(2.0, "num", False, ">=", 0, 50)
    #: stage-1 Wiener step on the patch means; None turns it off
    mean_kappa1: float | None = _knob(0.7, "num", True, ">=", 0, 1000)
    #: False returns the stage-1 estimate
    two_stage: bool = _knob(True, "bool", False)
    #: stage 2 matches again on the pilot; False reuses stage 1's groups (and its size)
    regroup: bool = _knob(True, "bool", False)
    #: a regular texture (its search and windows); None -> measured
    periodic: bool | None = _knob(None, "bool", True)
    #: coarse detail against the noise (widens stage-1 windows); None -> measured
    detail: float | None = _knob(None, "num", True, ">=", 0, math.inf)
    #: a regular texture's contrast (its stage-1 window); None -> measured
    contrast: float | None = _knob(None, "num", True, ">=", 0, math.inf)
    #: a regular texture's two periods ((dy, dx), (dy, dx)), () none; None -> measured
    lags: tuple | None = _knob(None, "lags", True)
    #: span of the clean values (255 for 8 bits) to place sigma; None -> unknown
    data_range: float | None = _knob(None, "num", True, ">", 0, math.inf)

    def __post_init__(self) -> None:
        # numpy scalars and JSON lists are what callers pass around
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, np.generic):
                object.__setattr__(self, f.name, v.item())
        for f in fields(self):
            check_value(f.name, getattr(self, f.name))
        if self.lags is not None:  # hashable and comparable: tuples of int pairs
            object.__setattr__(self, "lags", tuple(tuple(int(c) for c in u) for u in self.lags))

    @classmethod
    def preset(cls, name: str) -> "GroupedOptions":
        """The named preset (:data:`PRESETS`)."""
        if name not in PRESETS:
            raise ValueError(f"unknown grouped preset {name!r}; known are: "
                             + ", ".join(sorted(PRESETS)))
        return PRESETS[name]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "GroupedOptions":
        """Build options from a mapping of knob names; an unknown name is refused.

        Options from a mapping of knob names (a params file's ``"grouped"``); an
        unknown name is refused, naming the known ones."""
        if not isinstance(data, Mapping):
            raise ValueError("grouped options must be a mapping such as {\"kappa1\": 4.0}, "
                             f"got {data!r}")
        known = {f.name for f in fields(cls)}
        for k in data:
            if k not in known:
                raise ValueError(f"unknown grouped option {k!r}; known are: "
                                 + ", ".join(sorted(known)))
        return cls(**dict(data))

    @classmethod
    def coerce(cls, options: "GroupedOptions | str | Mapping | None") -> "GroupedOptions":
        """An options object from an object, a preset name, a mapping or None (default)."""
        if options is None:
            return cls()
        if isinstance(options, cls):
            return options
        if isinstance(options, str):
            return cls.preset(options)
        return cls.from_dict(options)

    def replace(self, **changes: Any) -> "GroupedOptions":
        """A copy with ``changes`` (checked like the constructor's arguments)."""
        return replace(self, **changes)

    def changed(self) -> dict:
        """The knobs that differ from the defaults, JSON-ready (a sidecar's ``grouped``)."""
        d = asdict(self)
        out = {}
        for f in fields(self):
            if d[f.name] != f.default:
                v = d[f.name]
                out[f.name] = [list(u) for u in v] if f.name == "lags" else v
        return out


def check_value(name: str, v: Any) -> None:
    """Raise a ValueError naming knob ``name``, what it takes and what it got.

    Raise ``ValueError`` naming knob ``name``, what it takes and what it got
    (``"window_beta must be a finite number >= 0 and <= 50, got 1000"``)."""
    rule = {f.name: f.metadata["rule"] for f in fields(GroupedOptions)}[name]
    kind, optional, *arg = rule
    if v is None and optional:
        return
    number = is_finite(v)
    if kind == "int":
        ok = number and float(v).is_integer() and arg[0] <= v <= arg[1]
        want = f"an integer from {arg[0]} to {arg[1]}"
    elif kind == "num":
        op, lo, hi = arg[0], arg[1], arg[2] if len(arg) > 2 else math.inf
        ok = number and (v > lo if op == ">" else v >= lo) and v <= hi
        want = f"a finite number {op} {lo:g}" + (f" and <= {hi:g}" if hi < math.inf else "")
    elif kind == "lags":
        ok = isinstance(v, (list, tuple)) and len(v) in (0, 2) and all(
            isinstance(u, (list, tuple)) and len(u) == 2 and all(
                is_finite(c) and float(c).is_integer()
                and abs(c) <= 256 for c in u) for u in v)
        want = "two (dy, dx) pairs of whole numbers, such as [[0, 30], [14, 15]], or []"
    elif kind == "bool":
        ok = isinstance(v, (bool, np.bool_))
        want = "True, False" if optional else "True or False"
    else:
        ok = isinstance(v, str) and v in arg[0]
        want = "one of " + ", ".join(repr(a) for a in arg[0])
    if not ok:
        raise ValueError(f"{name} must be {want}{' or None' if optional else ''}, got {v!r}")


#: named presets: "default"; "fast" (previews and large batches: a 17x17 search, groups
#: of 16 found once for both stages, a reference every 5 px; ``docs/speed.md``); and
#: "single-stage" (the stage-1 estimate alone, without the pilot-guided second pass:
#: less time, lower quality; ``docs/options.md``)
PRESETS: dict[str, GroupedOptions] = {
    "default": GroupedOptions(),
    "fast": GroupedOptions(search_radius=8, group_size1=16, stride=5, regroup=False),
    "single-stage": GroupedOptions(two_stage=False),
}
