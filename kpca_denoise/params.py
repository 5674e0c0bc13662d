"""The parameter object every front end passes to the pipeline.

One frozen dataclass; ``validate()`` names the bad parameter and the fix;
``to_dict``/``from_dict`` give the JSON sidecar that the GUI writes and the
command line reads back (``kpca-denoise denoise --params sidecar.json``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

__all__ = ["DenoiseParams", "METHODS"]

#: 'grouped': non-local kernel PCA on groups of similar patches, two stages (default).
#: 'global': one kernel PCA on patches sampled from the whole set, as in Mika et al. (1998).
METHODS = ("grouped", "global")


@dataclass(frozen=True)
class DenoiseParams:
    """Everything that decides a denoising result.

    method : 'grouped' (default) or 'global' (plain kernel PCA, Mika et al. 1998).
    ranks : kernel principal components kept; several ranks are compared from
        one eigendecomposition.  For 'grouped' a rank caps the components per
        group on top of the shrinkage; ``None`` in the tuple means no cap.  For
        patch sets ``None`` means the rank from the noise level
        (:meth:`~kpca_denoise.core.kpca.KernelPCA.noise_rank`).
    patch_size : patch side in pixels; ``None`` lets the method choose
        (8 for 'global'; from the noise level for 'grouped').
    stride : step between patches for 'global' (default ``patch_size // 2``).
    n_train : training patches sampled from the set ('global').
    n_landmarks : ``None`` (exact kernel PCA) or m, the Nyström landmarks among the
        training patches ('global'): time O(n_train m^2) and memory O(m^2) instead
        of O(n_train^2), so n_train can be far larger.  Measured quality and error
        are in ``benchmarks/results_nystrom.txt``.
    gamma : RBF kernel parameter; ``None`` chooses it from the data and noise level.
    noise_sigma : noise standard deviation in the units of the pixel values
        (e.g. 25 for uint8 images); ``None`` estimates it per image.
    preimage_iterations, preimage_tol : fixed-point stopping rule.
    kernel : 'rbf' (default) or 'linear' (ablation: plain PCA in the same pipeline).
    seed : random seed for training-patch sampling, the eigensolver and added noise.
    add_noise : if set, Gaussian noise of this std (pixel units) is added to each
        input before denoising (to try the method on clean images).
    tile_size : core side in pixels of the overlapping tiles an image is denoised
        in (memory is bounded by the tile); ``None`` = the method's default
        (``kpca_denoise.tiling.DEFAULT_TILE``).  The result does not depend on it.
    """

    method: str = "grouped"
    ranks: tuple = (None,)
    patch_size: int | None = None
    stride: int | None = None
    n_train: int = 2000
    n_landmarks: int | None = None
    gamma: float | None = None
    noise_sigma: float | None = None
    preimage_iterations: int = 100
    preimage_tol: float = 1e-4
    kernel: str = "rbf"
    eigen_solver: str = "auto"
    seed: int = 0
    add_noise: float | None = None
    tile_size: int | None = None
    extra: dict = field(default_factory=dict)

    def validate(self) -> "DenoiseParams":
        """Return self, or raise ValueError naming the parameter and the fix."""
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        if self.kernel not in ("rbf", "linear"):
            raise ValueError(
                f"kernel must be 'rbf' or 'linear' for denoising (the pre-image needs them), got {self.kernel!r}"
            )
        if not isinstance(self.ranks, tuple) or not self.ranks:
            raise ValueError("ranks must be a non-empty tuple such as (4, 8, 16)")
        for r in self.ranks:
            if r is None:
                if self.method == "global":
                    raise ValueError("method='global' needs explicit ranks such as (4, 8, 16)")
                continue
            if isinstance(r, bool) or not isinstance(r, int) or r < 1:
                raise ValueError(f"every rank (n_components) must be an integer >= 1, got {r!r}")
        if self.patch_size is not None and (not isinstance(self.patch_size, int) or self.patch_size < 1):
            raise ValueError(f"patch size must be a positive integer, got {self.patch_size!r}")
        if self.patch_size is not None and self.patch_size < 2:
            raise ValueError(f"patch size must be at least 2 pixels, got {self.patch_size}")
        if self.stride is not None and (not isinstance(self.stride, int) or self.stride < 1):
            raise ValueError(f"stride must be a positive integer, got {self.stride!r}")
        if not isinstance(self.n_train, int) or self.n_train < 2:
            raise ValueError(f"n_train (training patches) must be an integer >= 2, got {self.n_train!r}")
        if self.n_landmarks is not None and (
                isinstance(self.n_landmarks, bool) or not isinstance(self.n_landmarks, int)
                or self.n_landmarks < 1):
            raise ValueError(
                f"n_landmarks must be an integer >= 1 (or omitted for exact kernel PCA), "
                f"got {self.n_landmarks!r}")
        if self.n_landmarks is not None and self.method != "global":
            raise ValueError("n_landmarks applies to method='global' only; omit it for 'grouped'")
        for name in ("gamma", "noise_sigma", "add_noise"):
            v = getattr(self, name)
            if v is None:
                continue
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
                raise ValueError(f"{name} must be a finite number, got {v!r}")
            if name == "gamma" and v <= 0:
                raise ValueError(f"gamma must be > 0 (or omitted for automatic), got {v!r}")
            if name != "gamma" and v < 0:
                raise ValueError(f"{name} must be >= 0, got {v!r}")
        if not isinstance(self.preimage_iterations, int) or self.preimage_iterations < 1:
            raise ValueError(
                f"preimage iterations must be an integer >= 1, got {self.preimage_iterations!r}"
            )
        if self.tile_size is not None and (isinstance(self.tile_size, bool) or not isinstance(
                self.tile_size, int) or self.tile_size < 64):
            raise ValueError(f"tile size must be an integer >= 64 pixels (or omitted for the "
                             f"default), got {self.tile_size!r}")
        if not (self.preimage_tol > 0):
            raise ValueError(f"preimage_tol must be > 0, got {self.preimage_tol!r}")
        return self

    def replace(self, **changes: Any) -> "DenoiseParams":
        data = asdict(self)
        data.update(changes)
        if "ranks" in changes:
            data["ranks"] = tuple(changes["ranks"])
        return DenoiseParams(**data)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ranks"] = list(self.ranks)
        return d

    @classmethod
    def from_dict(cls, data: dict) -> "DenoiseParams":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown parameter(s) {unknown}; known are {sorted(known)}")
        data = dict(data)
        if "ranks" in data:
            data["ranks"] = tuple(data["ranks"])
        return cls(**data).validate()
