"""Luminance/chrominance transform for colour images.

An orthonormal opponent transform (the one CBM3D uses, rows normalised):
white Gaussian noise of std sigma in R, G, B stays white with the same sigma
in each output channel, so one noise level serves all three, while the
signal concentrates in the luminance channel and the chrominance channels
become smooth (and denoise much better than R, G, B separately).
"""

from __future__ import annotations

import numpy as np

__all__ = ["rgb_to_opponent", "opponent_to_rgb", "OPPONENT"]

OPPONENT = np.array(
    [
        [1 / np.sqrt(3), 1 / np.sqrt(3), 1 / np.sqrt(3)],
        [1 / np.sqrt(2), 0.0, -1 / np.sqrt(2)],
        [1 / np.sqrt(6), -2 / np.sqrt(6), 1 / np.sqrt(6)],
    ]
)


def rgb_to_opponent(rgb: np.ndarray) -> np.ndarray:
    """Convert RGB to the orthonormal opponent colour space.

    (H, W, 3) RGB -> (H, W, 3) luminance, two chrominances (float64)."""
    return np.asarray(rgb, dtype=np.float64) @ OPPONENT.T


def opponent_to_rgb(opp: np.ndarray) -> np.ndarray:
    """Inverse of :func:`rgb_to_opponent` (the matrix is orthonormal)."""
    return np.asarray(opp, dtype=np.float64) @ OPPONENT
