"""The library's front doors for one image and one stack.

Both take ``(array, params=None, *, progress=None, cancel=None, **fields)``, where
``fields`` are :class:`~kpca_denoise.params.DenoiseParams` names (``profile``,
``strength``, ``ranks``, ``noise_sigma``, ``noise_model``, ``sequence``, ...), as
:func:`kpca_denoise.dask_array.denoise_dask` does, and call the one pipeline
(:func:`kpca_denoise.pipeline.denoise_set`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from .core.progress import ProgressCallback
from .io import read_item
from .io.raw import RAW_SUFFIXES
from .mosaic import mosaic_of
from .params import DenoiseParams, call_params
from .pipeline import denoise_set

__all__ = ["denoise_image", "denoise_stack"]


def denoise_image(image: np.ndarray, params: DenoiseParams | dict | None = None, *,
                  progress: ProgressCallback | None = None, cancel: Any = None,
                  **fields: Any) -> np.ndarray:
    """Denoise one image.

    Parameters
    ----------
    image : ndarray, shape (M, N[, C]), or the path of a camera RAW file
        Grey (C absent or 1), grey + alpha (2), RGB (3) or RGBA (4); uint8, uint16 or
        float.  A RAW file (``.dng``, ``.cr2``, ``.nef``, ...; ``rawpy`` needed) is read
        and its mosaic denoised as :func:`~kpca_denoise.mosaic.denoise_mosaic` does.
    params : DenoiseParams or dict, optional
        The parameters (default: ``DenoiseParams()``, the default profile with the
        noise estimated).
    progress : callable, optional
        Receives :class:`~kpca_denoise.core.progress.ProgressEvent` per step.
    cancel : CancelToken or callable, optional
        Stops the run (:class:`~kpca_denoise.core.progress.Cancelled` is raised).
    **fields
        :class:`DenoiseParams` fields replacing those of ``params``:
        ``noise_sigma`` (pixel units; None estimates it), ``profile`` ('default',
        'fast'), ``strength``, ``method`` ('grouped', 'global'), ``ranks``,
        ``noise_model``, ``seed``, ...  The old names ``n_components`` (now
        ``ranks``) and ``random_state`` (now ``seed``) still work, with a
        ``DeprecationWarning``.

    Returns
    -------
    ndarray, shape (M, N[, C])
        The input's shape and dtype (a RAW file: its denoised mosaic, (H, W) uint16).
        With several ranks the last one's result
        (:func:`~kpca_denoise.pipeline.denoise_set` gives every rank).

    Raises
    ------
    ValueError
        Naming the problem, e.g. an image smaller than a patch
        (:class:`~kpca_denoise.params.ParamError` for a bad parameter).

    Examples
    --------
    >>> import numpy as np
    >>> from kpca_denoise import denoise_image
    >>> rng = np.random.default_rng(0)
    >>> clean = np.tile(np.linspace(0, 255, 64), (64, 1)).astype(np.uint8)
    >>> noisy = np.clip(clean + rng.normal(0, 20, clean.shape), 0, 255).astype(np.uint8)
    >>> denoise_image(noisy, noise_sigma=20, profile="fast", strength=0.9).shape
    (64, 64)
    """
    p = call_params(params, fields, caller="denoise_image")
    if isinstance(image, (str, os.PathLike)) and Path(image).suffix.lower() in RAW_SUFFIXES:
        image = mosaic_of(read_item(image))  # a camera RAW file: its mosaic and levels
    res = denoise_set([image], p, progress=progress, cancel=cancel)
    item = res.images[0]
    if item.error:
        raise ValueError(item.error)
    return item.outputs[res.ranks[-1] if len(res.ranks) else None]


def denoise_stack(stack: np.ndarray, params: DenoiseParams | dict | None = None, *,
                  progress: ProgressCallback | None = None, cancel: Any = None,
                  return_stats: bool = False, **fields: Any):
    """Denoise a stack: the pages of a z-stack, a time-lapse or a burst.

    Parameters
    ----------
    stack : ndarray, shape (P, M, N[, C])
        P pages of one size, C in 1..4; uint8, uint16 or float.
    params : DenoiseParams or dict, optional
        The parameters (default ``DenoiseParams()``).
    progress, cancel
        As for :func:`denoise_image`.
    return_stats : bool
        Also return a dict: the sequence decision and, per page, its statistics
        (the share of group members taken from each neighbour, ``docs/stacks.md``).
    **fields
        :class:`DenoiseParams` fields replacing those of ``params``; ``sequence``
        is 'auto' (neighbouring pages used where they show one scene), 'yes' or
        'no'; ``noise_sigma`` None estimates one level for the stack.

    Returns
    -------
    ndarray, shape (P, M, N[, C])
        The input's shape and dtype (and the stats dict with ``return_stats``).

    Raises
    ------
    ValueError
        A stack of another shape, or no pages.

    Examples
    --------
    >>> import numpy as np
    >>> from kpca_denoise import denoise_stack
    >>> rng = np.random.default_rng(0)
    >>> clean = np.tile(np.linspace(0, 255, 48), (3, 48, 1))
    >>> noisy = (clean + rng.normal(0, 20, clean.shape)).clip(0, 255).astype(np.uint8)
    >>> denoise_stack(noisy, noise_sigma=20).shape
    (3, 48, 48)
    """
    a = np.asarray(stack)
    if a.ndim not in (3, 4) or (a.ndim == 4 and a.shape[3] not in (1, 2, 3, 4)):
        raise ValueError(f"stack must be (P, H, W) or (P, H, W, C) with C in 1..4, got shape "
                         f"{a.shape}")
    if a.shape[0] < 1:
        raise ValueError("stack has no pages; give at least one (P >= 1)")
    p = call_params(params, fields, caller="denoise_stack")
    res = denoise_set([a[k] for k in range(a.shape[0])], p, progress=progress, cancel=cancel)
    bad = next((r.error for r in res.images if r.error), None)
    if bad:
        raise ValueError(bad)
    key = res.ranks[-1] if len(res.ranks) else None
    out = np.stack([r.outputs[key] for r in res.images])
    if not return_stats:
        return out
    seq = res.resolved.get("sequence") or [dict(decision="pages", choice=p.sequence,
                                                linked=[False] * (a.shape[0] - 1),
                                                reason="one image" if a.shape[0] < 2 else "")]
    stats = dict(sequence=seq[0], pages=[r.stats for r in res.images],
                 noise_sigma=[r.noise_sigma for r in res.images], timings=res.timings)
    return out, stats
