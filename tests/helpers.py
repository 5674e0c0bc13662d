"""Shared test helpers."""

from kpca_denoise import KernelPCA

#: KernelPCA with the denoiser's choices (rbf, gamma='noise', float32 Gram,
#: seed 0, tol 1e-4), each overridable by keyword.
KPCA = KernelPCA.for_denoising


def assert_same_result(actual, desired):
    """Two runs of the same denoising in different processes (a GUI worker, a Dask
    worker, another BLAS/numba thread count): equal up to floating-point noise.  For
    integer images that noise can flip a value lying within ~1e-12 of a rounding
    boundary, so at most 1 in 1000 pixels may differ, by one grey level; float
    outputs agree to 1e-8 relative."""
    import numpy as np

    a, d = np.asarray(actual), np.asarray(desired)
    assert a.shape == d.shape and a.dtype == d.dtype
    if np.issubdtype(a.dtype, np.integer):
        diff = np.abs(a.astype(np.int64) - d.astype(np.int64))
        assert diff.max(initial=0) <= 1, f"max difference {diff.max()}"
        assert np.count_nonzero(diff) <= max(1, a.size // 1000), f"{np.count_nonzero(diff)} differ"
    else:
        np.testing.assert_allclose(a, d, rtol=1e-8, atol=1e-8 * float(np.abs(d).max(initial=1)))
