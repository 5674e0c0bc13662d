"""Overlapping tiles of an image: the geometry only (numpy, no denoising).

A tile has a *core*, the pixels it writes, and a *region*, the core grown by
a halo on every side (clipped to the image), which is what gets computed.
Cores partition the image.  Core edges and halos are multiples of ``align``,
so a patch grid that starts at the image origin with a step dividing
``align`` starts at every region's origin too: inside a core, a tile sees
the same patches as the whole image does, as long as the halo covers
everything a core pixel depends on (the method's search window and patch
support; see :mod:`kpca_denoise.tiling`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Tile", "tile_grid", "split_points"]


@dataclass(frozen=True)
class Tile:
    """Core ``[y0:y1, x0:x1]`` and computed region ``[ry0:ry1, rx0:rx1]``."""

    y0: int
    y1: int
    x0: int
    x1: int
    ry0: int
    ry1: int
    rx0: int
    rx1: int

    @property
    def core(self) -> tuple[slice, slice]:
        """The core in image coordinates."""
        return slice(self.y0, self.y1), slice(self.x0, self.x1)

    @property
    def region(self) -> tuple[slice, slice]:
        """The computed region in image coordinates."""
        return slice(self.ry0, self.ry1), slice(self.rx0, self.rx1)

    @property
    def core_in_region(self) -> tuple[slice, slice]:
        """The core in the coordinates of the region."""
        return (slice(self.y0 - self.ry0, self.y1 - self.ry0),
                slice(self.x0 - self.rx0, self.x1 - self.rx0))


def split_points(length: int, tile: int, align: int) -> np.ndarray:
    """Return the tile cores' boundaries along one axis.

    Core boundaries along one axis: 0, ..., ``length``; inner ones are
    multiples of ``align``, and the cores are about ``tile`` long and balanced."""
    if length < 1 or tile < 1 or align < 1:
        raise ValueError(f"length, tile and align must be >= 1, got {length}, {tile}, {align}")
    n = max(1, int(round(length / tile)))
    inner = sorted({int(round(i * length / n / align)) * align for i in range(1, n)})
    inner = [b for b in inner if 0 < b < length]
    return np.asarray([0, *inner, length], dtype=np.int64)


def tile_grid(shape: tuple[int, int], tile: int, halo: int, align: int = 1) -> list[Tile]:
    """Tiles covering an image of ``shape`` (H, W), row-major.

    ``tile`` is the target core side, ``halo`` the margin computed around a
    core (rounded up to a multiple of ``align``).  An image not larger than
    about one tile gives a single tile whose region is the whole image.
    """
    H, W = int(shape[0]), int(shape[1])
    halo = -(-int(halo) // align) * align
    ys = split_points(H, tile, align)
    xs = split_points(W, tile, align)
    out = []
    for y0, y1 in zip(ys[:-1], ys[1:]):
        for x0, x1 in zip(xs[:-1], xs[1:]):
            out.append(Tile(int(y0), int(y1), int(x0), int(x1),
                            max(0, int(y0) - halo), min(H, int(y1) + halo),
                            max(0, int(x0) - halo), min(W, int(x1) + halo)))
    return out
