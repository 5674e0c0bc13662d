"""kpca-denoise: kernel-PCA image denoising.

>>> from kpca_denoise import KernelPCA, denoise_image
"""

from .numba_cache import use_writable_numba_cache

# before anything imports numba: a library import on a read-only install with no
# writable home otherwise ended in numba's "cannot cache function ... no locator available"
use_writable_numba_cache()

from .core.progress import Cancelled, CancelToken, ProgressEvent  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "KernelPCA",
    "NotFittedError",
    "Cancelled",
    "CancelToken",
    "ProgressEvent",
    "denoise_image",
    "denoise_set",
    "denoise_stack",
    "denoise_mosaic",
    "denoise_dask",
    "required_halo",
    "DenoiseParams",
    "GroupedOptions",
    "__version__",
]


def __getattr__(name):  # lazy: importing the package pulls in neither scikit-learn nor the pipeline
    if name in ("KernelPCA", "NotFittedError"):
        from . import estimator

        return getattr(estimator, name)
    if name == "GroupedOptions":
        from .core.grouped.options import GroupedOptions

        return GroupedOptions
    if name in ("denoise_image", "denoise_stack"):
        from . import api

        return getattr(api, name)
    if name == "denoise_mosaic":
        from . import mosaic

        return mosaic.denoise_mosaic
    if name in ("denoise_set", "DenoiseParams"):
        from . import pipeline

        return getattr(pipeline, name)
    if name in ("denoise_dask", "required_halo"):  # needs Dask only when called
        from . import dask_array

        return getattr(dask_array, name)
    raise AttributeError(name)
