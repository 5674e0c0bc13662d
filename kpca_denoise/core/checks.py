"""Checks of the numbers a caller passes: what counts as a number and as a finite one."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["is_number", "is_finite"]


def is_number(x) -> bool:
    """Tell whether ``x`` is a real number (Python or NumPy), not a bool."""
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def is_finite(x) -> bool:
    """Tell whether ``x`` is a number finite as a float.

    An int too large for a float is not."""
    try:
        return is_number(x) and math.isfinite(x)
    except OverflowError:
        return False
