"""A camera's colour-filter-array (Bayer) mosaic as the pipeline denoises it.

The mosaic is split into its four CFA planes (one per position of the 2x2 pattern,
(H/2, W/2, 4)): on the sensor each photosite's noise is white and Poisson-Gaussian, with
the parameters of its colour, so each plane gets its own stabiliser
(:class:`PlaneStabiliser`, its level read on the four planes together by
:func:`joint_noise_std`) and the four, decorrelated (:func:`decorrelation`), are denoised
jointly, with one matching for all four (``docs/raw.md``).  A plane pixel is a 2x2 cell
of the mosaic, so tiles of the planes are aligned to the pattern.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .noise import estimate_sigma_pca
from .vst import GeneralizedAnscombe

__all__ = ["Mosaic", "PlaneStabiliser", "POSITIONS", "decorrelation", "joint_noise_std"]

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


def decorrelation(cfa: str) -> np.ndarray:
    """The orthonormal 4x4 transform of a Bayer pattern's planes (:data:`POSITIONS`
    order) into a luminance-like sum and three differences, as RGB goes to opponent
    colour: ``(R + G1 + G2 + B) / 2``, ``(R - B) / sqrt 2``, ``(G1 + G2 - R - B) / 2``,
    ``(G1 - G2) / sqrt 2``; the identity for a pattern without one R, one B and two G.

    Examples
    --------
    >>> M = decorrelation("GRBG")
    >>> bool(np.allclose(M @ M.T, np.eye(4)))
    True
    """
    if sorted(cfa) != ["B", "G", "G", "R"]:
        return np.eye(4)
    r, b = cfa.index("R"), cfa.index("B")
    g1, g2 = (i for i, c in enumerate(cfa) if c == "G")
    h = 1.0 / math.sqrt(2.0)
    M = np.zeros((4, 4))
    M[0] = 0.5
    M[1, r], M[1, b] = h, -h
    M[2, [g1, g2]], M[2, [r, b]] = 0.5, -0.5
    M[3, g1], M[3, g2] = h, -h
    return M


@dataclass(frozen=True)
class PlaneStabiliser(GeneralizedAnscombe):
    """The generalised Anscombe transform of a mosaic's four CFA planes: one gain, sigma
    and black level (``offset``) per plane, and the pattern (``cfa``).

    An image stabilised by it is four planes of noise std 1, denoised jointly after the
    orthonormal :func:`decorrelation` of its pattern (no alpha channel;
    :func:`kpca_denoise.working.to_working`): the grouped method's first channel, the
    guide with its own thresholds, is then the planes' sum, the others their
    differences, as for colour."""

    cfa: str = "RGGB"

    def decorrelate(self, planes: np.ndarray) -> np.ndarray:
        """Stabilised planes (..., 4) -> their :func:`decorrelation`."""
        return np.asarray(planes, dtype=np.float64) @ decorrelation(self.cfa).T

    def correlate(self, work: np.ndarray) -> np.ndarray:
        """The inverse of :meth:`decorrelate` (the transpose: orthonormal)."""
        return np.asarray(work, dtype=np.float64) @ decorrelation(self.cfa)

    @property
    def guide_gain(self) -> float:
        """The span of the first decorrelated channel over that of one plane."""
        return float(decorrelation(self.cfa)[0].sum())


#: :func:`joint_noise_std`'s patch side, the share of the least textured patches it
#: reads, and how many patches it draws at most
JOINT_PATCH, JOINT_WEAK, JOINT_PATCHES = 5, 0.3, 60000


def joint_noise_std(planes: np.ndarray, exclude: np.ndarray | None = None, *,
                    patch: int = JOINT_PATCH, weak: float = JOINT_WEAK,
                    max_patches: int = JOINT_PATCHES, seed: int = 0,
                    transform=None, calibrated: bool = True) -> float:
    """Read the noise std of stabilised CFA planes from their joint patches.

    The four planes of a mosaic see one scene, so its texture is much alike in all four
    while their noise is independent: in the ``patch`` x ``patch`` x 4 patches of all
    four planes together the texture takes a few principal directions and the noise all
    of them.  The ``weak`` share of patches with the least gradient energy (drawn at
    random, at most ``max_patches``, fixed ``seed``; none touching an ``exclude``
    pixel) give the std by the PCA tail
    (:func:`~kpca_denoise.core.noise.estimate_sigma_pca`), divided by what the same
    reads of white noise of unit std (``calibrated``): choosing the least energetic
    patches also chooses those whose noise happens to be low.  On the variance-stabilised
    planes of a photograph's mosaic it reads 0.9 to 1.4 times the noise, where a fit on
    each plane alone reads 1.1 to 2.5 times it (``docs/raw.md``).

    Parameters
    ----------
    planes : ndarray, shape (H, W, C)
        The stabilised planes (noise std alike in all of them), or the planes that
        ``transform`` stabilises; H and W at least ``patch``.
    exclude : ndarray of bool, shape (H, W), optional
        Pixels whose patches are left out (clipped or hot in some plane).
    patch, weak, max_patches, seed
        As above.
    transform : callable, optional
        Applied to the drawn patches, (n, patch, patch, C), first (a
        :class:`PlaneStabiliser`'s ``forward``: no stabilised copy of large planes).
    calibrated : bool
        Divide by the reading of white noise (False: the raw reading).

    Returns
    -------
    float
        The noise std in the planes' units.
    """
    w = np.asarray(planes)
    if w.ndim != 3 or min(w.shape[:2]) < patch:
        raise ValueError(f"planes of at least {patch}x{patch} pixels (H, W, C) are needed, "
                         f"got shape {w.shape}")
    H, W = w.shape[0] - patch + 1, w.shape[1] - patch + 1
    rng = np.random.default_rng(seed)
    n = min(max_patches, H * W)
    pos = rng.choice(H * W, size=n, replace=False) if n < H * W else np.arange(H * W)
    ys, xs = pos // W, pos % W
    dy, dx = np.mgrid[0:patch, 0:patch]
    if exclude is not None and np.any(exclude):
        ex = np.asarray(exclude, dtype=bool)
        ok = ~np.any(ex[ys[:, None, None] + dy, xs[:, None, None] + dx], axis=(1, 2))
        if ok.sum() >= 200:
            ys, xs = ys[ok], xs[ok]
    P = w[ys[:, None, None] + dy, xs[:, None, None] + dx].astype(np.float64)  # (n, p, p, C)
    if transform is not None:
        P = np.asarray(transform(P), dtype=np.float64)
    energy = (np.sum(np.diff(P, axis=1) ** 2, axis=(1, 2, 3))
              + np.sum(np.diff(P, axis=2) ** 2, axis=(1, 2, 3)))
    keep = np.argsort(energy, kind="stable")[:max(int(weak * len(energy)), 200)]
    s = estimate_sigma_pca(P[keep].reshape(len(keep), -1))
    if calibrated:
        s /= _joint_of_noise(patch, w.shape[2], float(weak), int(max_patches))
    return s


@lru_cache(maxsize=8)
def _joint_of_noise(patch: int, channels: int, weak: float, max_patches: int) -> float:
    """What :func:`joint_noise_std` reads, uncalibrated, of white noise of unit std
    (256x256 planes, fixed seed): the least energetic patches of pure noise are those
    whose noise happens to be low (and the PCA tail leans low), about 8 % in all."""
    z = np.random.default_rng(12345).standard_normal((256, 256, channels))
    return joint_noise_std(z, patch=patch, weak=weak, max_patches=max_patches,
                           calibrated=False)
