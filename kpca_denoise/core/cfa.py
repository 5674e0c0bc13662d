"""A camera's colour-filter-array (Bayer) mosaic as the pipeline denoises it.

The mosaic is split into its four CFA planes (one per position of the 2x2 pattern,
(H/2, W/2, 4)): on the sensor each photosite's noise is white and Poisson-Gaussian, with
the parameters of its colour, so each plane gets its own stabiliser and the four are
denoised jointly, with one matching for all four (``docs/raw.md``).  A plane pixel is a
2x2 cell of the mosaic, so tiles of the planes are aligned to the pattern.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .vst import GeneralizedAnscombe

__all__ = ["Mosaic", "PlaneStabiliser", "POSITIONS"]

#: the four CFA positions, (row, column) in the 2x2 pattern, in the planes' order
POSITIONS = ((0, 0), (0, 1), (1, 0), (1, 1))


@dataclass(frozen=True, eq=False)
class Mosaic:
    """A sensor mosaic with its levels: an array-like of the mosaic itself.

    Parameters
    ----------
    data : ndarray, shape (H, W)
        The photosites' values (uint16, or float), H and W at least 4.
    cfa : str
        The colours of the 2x2 pattern row by row, e.g. ``"RGGB"``.
    black : sequence of 4 floats
        The black level of each CFA position (:data:`POSITIONS` order).
    white : float
        The white level: values at or above it are clipped (saturated).

    ``np.asarray(mosaic)`` is ``data``, so code that knows nothing of mosaics sees a
    grey image."""

    data: np.ndarray
    cfa: str = "RGGB"
    black: tuple = (0.0, 0.0, 0.0, 0.0)
    white: float = 65535.0

    def __post_init__(self) -> None:
        a = np.asarray(self.data)
        if a.ndim != 2 or min(a.shape) < 4:
            raise ValueError(f"a mosaic must be a 2-D (H, W) array of at least 4x4 photosites, "
                             f"got shape {a.shape}")
        black = np.broadcast_to(np.asarray(self.black, dtype=np.float64).ravel(), (4,))
        if len(self.cfa) != 4 or set(self.cfa) - set("RGB"):
            raise ValueError(f"the CFA pattern must be four letters of R, G, B (e.g. 'RGGB'), "
                             f"got {self.cfa!r}")
        if not (np.all(np.isfinite(black)) and np.isfinite(self.white)
                and np.all(black < self.white)):
            raise ValueError(f"black levels {black.tolist()} must be below the white level "
                             f"{self.white:g}")
        object.__setattr__(self, "data", a)
        object.__setattr__(self, "black", tuple(float(b) for b in black))
        object.__setattr__(self, "white", float(self.white))

    # the array-like face: the mosaic itself
    @property
    def shape(self) -> tuple:
        return self.data.shape

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def ndim(self) -> int:
        return 2

    @property
    def size(self) -> int:
        return self.data.size

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        return self.data if dtype is None else self.data.astype(dtype)

    def planes(self, data: np.ndarray | None = None) -> np.ndarray:
        """The four CFA planes of ``data`` (default the mosaic), (H // 2, W // 2, 4) in
        its dtype; an odd last row or column is left out (:meth:`merge` keeps it)."""
        a = self.data if data is None else np.asarray(data)
        h, w = a.shape[0] // 2 * 2, a.shape[1] // 2 * 2
        return np.stack([a[y:h:2, x:w:2] for y, x in POSITIONS], axis=-1)

    def merge(self, planes: np.ndarray, like: np.ndarray | None = None) -> np.ndarray:
        """The mosaic of ``planes`` (H // 2, W // 2, 4): ``like`` (default the mosaic)
        with its 2x2 cells replaced, in ``like``'s dtype."""
        out = np.array(self.data if like is None else like, copy=True)
        p = np.asarray(planes)
        h, w = 2 * p.shape[0], 2 * p.shape[1]
        for k, (y, x) in enumerate(POSITIONS):
            out[y:h:2, x:w:2] = p[..., k]
        return out

    def clipped(self, planes: np.ndarray) -> np.ndarray:
        """Where the planes' values are at the white level (saturated photosites)."""
        return np.asarray(planes) >= self.white


@dataclass(frozen=True)
class PlaneStabiliser(GeneralizedAnscombe):
    """The generalised Anscombe transform of a mosaic's four CFA planes: one gain, sigma
    and black level (``offset``) per plane.  An image stabilised by it is four planes
    denoised jointly as they are: no opponent colour, no alpha channel
    (:func:`kpca_denoise.working.to_working`)."""
