"""Shared test helpers."""

from kpca_denoise import KernelPCA


def KPCA(n_components=None, **kw):
    """KernelPCA with the denoiser's choices (what the pipeline passes
    explicitly): RBF with the noise-aware width, float32 Gram, seed 0,
    tol 1e-4; any of them can be overridden by keyword."""
    kw.setdefault("kernel", "rbf")
    if kw["kernel"] == "rbf":
        kw.setdefault("gamma", "noise")
    for key, value in (("gram_dtype", "float32"), ("random_state", 0), ("tol", 1e-4)):
        kw.setdefault(key, value)
    return KernelPCA(n_components, **kw)
