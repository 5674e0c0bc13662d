"""A napari image layer's pixels as the pipeline's images, and the results back as layers.

No napari and no Qt here: the widget and the function call these, and so can tests
without napari.  A layer is one grey image (H, W), one colour image (H, W, 3|4) when
napari shows it as RGB(A), or a stack along the first axis ((P, H, W) or (P, H, W, 3|4)):
every page of a stack is one image of a :func:`~kpca_denoise.pipeline.denoise_set` call.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from ..core.progress import CancelToken, ProgressEvent
from ..evaluation import noise_model_text
from ..io.writing import rank_tag
from ..params import DenoiseParams
from ..pipeline import denoise_set
from ..results import SetResult

__all__ = ["Pages", "split_pages", "denoise_pages", "denoise_steps", "rank_outputs",
           "result_name", "noise_text"]

#: the fewest seconds between two progress reports sent to the GUI thread
REPORT_INTERVAL_S = 0.05


@dataclass(frozen=True)
class Pages:
    """The images of one layer: ``images`` are (H, W[, C]) arrays (views, not copies);
    ``stack`` says whether the layer was a stack of them along its first axis."""

    images: list
    stack: bool


def split_pages(data: Any, rgb: bool) -> Pages:
    """A layer's data (any array-like; a dask array is read whole) as pipeline images.

    ``rgb`` is napari's ``layer.rgb``: the last axis is colour.  Raises ValueError naming
    the shape for anything but one image or a stack of images along the first axis."""
    a = np.asarray(data)
    image_ndim = 3 if rgb else 2
    if a.ndim == image_ndim:
        return Pages([a], False)
    if a.ndim == image_ndim + 1:
        return Pages([a[k] for k in range(a.shape[0])], True)
    kind = "colour (H, W, C)" if rgb else "grey (H, W)"
    raise ValueError(f"the layer has shape {a.shape}: expected one {kind} image or a stack "
                     "of them along the first axis")


def rank_outputs(pages: Pages, res: SetResult) -> dict:
    """rank -> the denoised layer data (the input's shape and dtype).  Raises ValueError
    with the first page's error when a page could not be denoised."""
    bad = next((r for r in res.images if r.error), None)
    if bad is not None:
        raise ValueError(bad.error)
    out = {}
    for rank in res.ranks:
        arrays = [r.outputs[rank] for r in res.images]
        out[rank] = np.stack(arrays) if pages.stack else arrays[0]
    return out


def denoise_pages(pages: Pages, params: DenoiseParams, *, progress=None,
                  cancel=None) -> SetResult:
    """The pipeline on a layer's pages (named ``page 0``, ... in its messages)."""
    names = [f"page {k}" for k in range(len(pages.images))] if pages.stack else ["image"]
    return denoise_set(pages.images, params, names=names, progress=progress, cancel=cancel)


_DONE = object()


def denoise_steps(pages: Pages, params: DenoiseParams,
                  cancel: CancelToken) -> Iterator[ProgressEvent]:
    """:func:`denoise_pages` as a generator for a thread worker: yields the latest
    :class:`~kpca_denoise.core.progress.ProgressEvent` at most every
    :data:`REPORT_INTERVAL_S` and returns the :class:`SetResult` (``StopIteration.value``,
    which napari's worker emits as ``returned``).

    The pipeline runs in a helper thread because it reports through a callback, which
    cannot yield; this generator's thread only waits for its reports.  Closing the
    generator early (the worker's ``quit()``) sets ``cancel``; the pipeline stops at its
    next check and the helper thread is joined, so no thread outlives the worker.
    Raises what the pipeline raised (:class:`~kpca_denoise.core.progress.Cancelled` when
    cancelled)."""
    events: queue.SimpleQueue = queue.SimpleQueue()
    box: dict = {}

    def run() -> None:
        try:
            box["result"] = denoise_pages(pages, params, progress=events.put, cancel=cancel)
        except BaseException as exc:  # handed to the generator, which raises it
            box["error"] = exc
        finally:
            events.put(_DONE)

    helper = threading.Thread(target=run, name="kpca-denoise napari", daemon=True)
    helper.start()
    last = 0.0
    try:
        while (event := events.get()) is not _DONE:
            now = time.monotonic()
            if now - last >= REPORT_INTERVAL_S:
                last = now
                yield event
    finally:
        if helper.is_alive():  # closed early
            cancel.cancel()
        helper.join()
    if "error" in box:
        raise box["error"]
    return box["result"]


def result_name(name: str, rank) -> str:
    """The result layer's name: ``cells [kpca]`` (no rank cap), ``cells [kpca_r8]``
    (rank 8): the tags of the output files the command line writes."""
    return f"{name} [{rank_tag(rank)}]"


def noise_text(res: SetResult) -> str:
    """The noise level the pipeline used, e.g. ``noise σ = 24.9 (estimated)``; a stack's
    range over its pages."""
    models = [r.stats["noise_model"] for r in res.images if r.ok and r.stats.get("noise_model")]
    if models:  # the stabilised sigma is 1: the gain and the Gaussian part describe it
        where = f" (page 1 of {len(models)})" if len(models) > 1 else ""
        return f"Poisson-Gaussian noise: {noise_model_text(models[0])}{where}"
    sig = np.array([r.noise_sigma for r in res.images if r.ok], dtype=float)
    sig = sig[np.isfinite(sig)]
    if sig.size == 0:
        return "noise σ: not measured"
    how = "estimated" if any(r.noise_estimated for r in res.images if r.ok) else "given"
    if res.params.noise_model == "poisson-gaussian":
        how += ", Gaussian part"
    lo, hi = float(sig.min()), float(sig.max())
    value = f"{lo:.3g}" if np.isclose(lo, hi, rtol=1e-3) else \
        f"{lo:.3g} to {hi:.3g} over {sig.size} pages"
    return f"noise σ = {value} ({how})"
