"""Several ranks cost about what one costs in memory: the explicit ranks of the grouped
method share the groups and eigendecompositions of ``auto``, and only the per-rank
estimates of the tiles in flight are extra (issue 62; docs/large-images.md)."""

import tracemalloc

import numpy as np
import pytest

from kpca_denoise import DenoiseParams, denoise_set
from kpca_denoise.tiling import plan, rank_bytes

RANKS = (1, 2, 4, 8, None)


def _peak(image: np.ndarray, params: DenoiseParams) -> int:
    """Bytes of the traced peak (numpy's arrays included) of one run."""
    tracemalloc.start()
    try:
        res = denoise_set([image], params)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert res.images[0].ok, res.images[0].error
    return peak


@pytest.mark.parametrize("colour", [False, True])
def test_peak_grows_with_ranks_by_their_outputs_only(astronaut, colour):
    """The traced peak of five ranks exceeds that of ``auto`` alone by at most the
    extra ranks' outputs (:func:`~kpca_denoise.tiling.rank_bytes`, what the memory
    guard counts): per rank and working channel, the float64 weighted sums, weights
    and result of the tiles in flight, and the output in the image's dtype.  Per-group
    state held per rank (a part's estimates, tens of kB a group, once kept for a whole
    tile: 23.5 GB on a 3 Mpx photo) would exceed it many times over."""
    img = astronaut[96:288, 128:352]  # 192 x 224, cut into 6 tiles
    if not colour:
        img = img[..., 1]
    base = DenoiseParams(noise_sigma=20.0, tile_size=80, ranks=(None,))
    many = base.replace(ranks=RANKS)
    assert len(plan(img.shape, many)) > 2
    allowed = rank_bytes(img.shape, img.dtype, many) - rank_bytes(img.shape, img.dtype, base)
    one, five = _peak(img, base), _peak(img, many)
    assert five - one <= allowed, (one, five, allowed)


def test_ranks_that_cannot_fit_are_refused_before_compute(astronaut, monkeypatch):
    """Where the ranks' memory exceeds what the process can allocate, the image fails
    in one line naming the fix, before any tile is computed."""
    import kpca_denoise.io.lazy_tiff as lazy_tiff
    import kpca_denoise.tiling as tiling

    img = astronaut[:200, :240]
    params = DenoiseParams(noise_sigma=20.0, ranks=RANKS)
    need = rank_bytes(img.shape, img.dtype, params) + tiling.ENGINE_BYTES
    monkeypatch.setattr(lazy_tiff, "memory_budget", lambda: need - 1)
    monkeypatch.setattr(tiling, "denoise_tile", lambda *a, **k: pytest.fail("computed"))
    item = denoise_set([img], params).images[0]
    assert not item.ok
    assert "fewer ranks" in item.error and "--tile-size" in item.error
    assert "\n" not in item.error
    monkeypatch.setattr(lazy_tiff, "memory_budget", lambda: need)
    tiling.check_rank_memory(img.shape, img.dtype, params)  # fits: no error
