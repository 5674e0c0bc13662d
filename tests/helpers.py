"""Shared test helpers."""

import numpy as np

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

    a, d = np.asarray(actual), np.asarray(desired)
    assert a.shape == d.shape and a.dtype == d.dtype
    if np.issubdtype(a.dtype, np.integer):
        diff = np.abs(a.astype(np.int64) - d.astype(np.int64))
        assert diff.max(initial=0) <= 1, f"max difference {diff.max()}"
        assert np.count_nonzero(diff) <= max(1, a.size // 1000), f"{np.count_nonzero(diff)} differ"
    else:
        np.testing.assert_allclose(a, d, rtol=1e-8, atol=1e-8 * float(np.abs(d).max(initial=1)))


def fake_tiles(monkeypatch):
    """Make every tile return its core unchanged, so that a test measures the
    handling around the engine (reading, assembly, writing), not the engine."""
    import kpca_denoise.tiling as tiling
    import kpca_denoise.working as working

    def copy_core(region, tile, sigma, params, **kw):
        stats = {"preimage_fallbacks": 0, "preimage_iterations": 0, "groups": 1, "seconds": {},
                 "spectrum": np.ones(3)}
        return ({r: region[tile.core_in_region].copy() for r in params.ranks},
                [stats] * working.channels(region))

    monkeypatch.setattr(tiling, "denoise_tile", copy_core)


def denoise_grouped_opponent(rgb, sigma, **options):
    """An RGB image (H, W, 3) through the grouped method as the pipeline does it: in
    the orthonormal opponent space (white noise keeps its std), one set of groups for
    the three channels, back to RGB; ``data_range`` (of R, G, B) becomes the
    luminance's.  Returns ``{rank: (H, W, 3)}`` and the per-channel stats."""
    from kpca_denoise.core.color import OPPONENT, opponent_to_rgb, rgb_to_opponent
    from kpca_denoise.core.grouped import denoise_grouped_channels

    rgb = np.asarray(rgb)
    if rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f"image must be RGB (H, W, 3), got shape {rgb.shape}")
    if options.get("data_range") is not None:
        options["data_range"] = float(options["data_range"]) * float(OPPONENT[0].sum())
    out, stats = denoise_grouped_channels(rgb_to_opponent(rgb), sigma, **options)
    return {rk: opponent_to_rgb(o) for rk, o in out.items()}, stats
