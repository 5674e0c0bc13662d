"""The library's front door for a camera's sensor mosaic (``docs/raw.md``).

:func:`denoise_mosaic` takes a Bayer mosaic with its pattern and levels and calls the
one pipeline (:func:`kpca_denoise.pipeline.denoise_set`) on a
:class:`~kpca_denoise.core.cfa.Mosaic`: its four CFA planes stabilised with their own
Poisson-Gaussian parameters and denoised jointly.  :func:`mosaic_of` makes that
:class:`Mosaic` of a RAW file as read (:func:`kpca_denoise.io.read_item`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .core.cfa import Mosaic
from .core.progress import ProgressCallback
from .params import DenoiseParams, call_params
from .pipeline import denoise_set

__all__ = ["denoise_mosaic", "mosaic_of", "Mosaic"]


def mosaic_of(item, pixels: np.ndarray | None = None) -> Mosaic:
    """The :class:`Mosaic` of a RAW file read by :func:`kpca_denoise.io.read_item`
    (``item.meta["raw"]``), of its pixels or ``pixels``."""
    raw = item.meta["raw"]
    return Mosaic(item.reread() if pixels is None else pixels, cfa=raw["cfa"],
                  black=tuple(raw["black"]), white=raw["white"])


def denoise_mosaic(mosaic: np.ndarray, params: DenoiseParams | dict | None = None, *,
                   pattern: str = "RGGB", black: Any = 0.0, white: float | None = None,
                   progress: ProgressCallback | None = None, cancel: Any = None,
                   return_stats: bool = False, **fields: Any):
    """Denoise a camera's colour-filter-array (Bayer) mosaic.

    The four CFA planes are stabilised each with its own Poisson-Gaussian gain and
    Gaussian sigma (fitted on the plane less its black level, clipped and hot photosites
    left out; the generalised Anscombe transform with its exact unbiased inverse) and
    denoised jointly by the grouped method, with one matching for all four planes.

    Parameters
    ----------
    mosaic : ndarray, shape (H, W)
        The sensor's values (uint16 as a RAW file holds them, or float), H and W >= 4.
    params : DenoiseParams or dict, optional
        As for :func:`~kpca_denoise.api.denoise_image`; ``poisson_gain`` and
        ``noise_sigma`` (the Gaussian part, in the mosaic's units) fix the noise model's
        parts instead of fitting them.
    pattern : str
        The 2x2 pattern's colours row by row: ``"RGGB"``, ``"BGGR"``, ``"GRBG"``,
        ``"GBRG"``.
    black : float or sequence of 4 floats
        The black level, one for all or one per CFA position (row by row).
    white : float, optional
        The white (saturation) level; default the dtype's largest value (floats: the
        largest value held).
    progress, cancel
        As for :func:`~kpca_denoise.api.denoise_image`.
    return_stats : bool
        Also return the result's stats (``noise_model``: the gain and sigma per plane).
    **fields
        :class:`DenoiseParams` fields replacing those of ``params``.

    Returns
    -------
    ndarray, shape (H, W)
        The denoised mosaic in the input's dtype (and the stats with ``return_stats``).

    Examples
    --------
    >>> import numpy as np
    >>> from kpca_denoise import denoise_mosaic
    >>> rng = np.random.default_rng(0)
    >>> clean = np.tile(np.linspace(600, 3000, 64), (64, 1))
    >>> noisy = (512 + rng.poisson(clean / 2) * 2 + rng.normal(0, 4, clean.shape))
    >>> out = denoise_mosaic(noisy.astype(np.uint16), black=512, white=4095)
    >>> out.shape, out.dtype
    ((64, 64), dtype('uint16'))
    """
    a = np.asarray(mosaic)
    if white is None:
        white = (np.iinfo(a.dtype).max if np.issubdtype(a.dtype, np.integer)
                 else float(np.max(a)) if a.size else 1.0)
    m = Mosaic(a, cfa=pattern, black=black, white=white)
    p = call_params(params, fields, caller="denoise_mosaic")
    res = denoise_set([m], p, progress=progress, cancel=cancel)
    item = res.images[0]
    if item.error:
        raise ValueError(item.error)
    out = item.outputs[res.ranks[-1] if len(res.ranks) else None]
    return (out, item.stats) if return_stats else out
