"""``denoise_layer``: the pipeline as a napari function ``ImageData -> ImageData``.

For scripts and napari-workflows (the manifest's command ``kpca-denoise.denoise_layer``).
It blocks until done: the dock widget is the interactive way, on a worker thread.
"""

from __future__ import annotations

import numpy as np

from ..params import DenoiseParams
from ._layers import denoise_pages, rank_outputs, split_pages

try:  # napari's annotation, so that napari and magicgui know the argument is a layer's data
    from napari.types import ImageData
except ImportError:  # used without napari: plain arrays
    ImageData = np.ndarray

__all__ = ["denoise_layer"]


def denoise_layer(image: ImageData, noise_sigma: float = 0.0, method: str = "grouped",
                  rank: int = 0, noise_model: str = "auto") -> ImageData:
    """Denoise an image layer's data with kernel PCA; same shape and dtype.

    Parameters
    ----------
    image : (H, W), colour (H, W, 3|4), or a stack along the first axis (P, H, W[, 3|4]):
        a last axis of 3 or 4 is taken for colour, as in :func:`kpca_denoise.denoise_image`.
    noise_sigma : noise std in pixel units; 0 (or None) estimates it per image (page).
    method : 'grouped' (default) or 'global' (see :class:`kpca_denoise.DenoiseParams`).
    rank : kernel principal components kept; 0 is the method's default.
    noise_model : 'gaussian' or 'poisson-gaussian'.

    Returns
    -------
    The denoised array: what :func:`kpca_denoise.denoise_image` returns for one image.
    """
    a = np.asarray(image)
    rgb = a.ndim >= 3 and a.shape[-1] in (3, 4)
    params = DenoiseParams(method=method, ranks=(rank or None,),
                           noise_sigma=None if noise_sigma in (None, 0) else noise_sigma,
                           noise_model=noise_model)
    pages = split_pages(a, rgb)
    (out,) = rank_outputs(pages, denoise_pages(pages, params)).values()
    return out
