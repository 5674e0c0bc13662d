"""A Dask stack denoised as one: its tiles carry every page, so the result equals the
in-memory stack's (docs/stacks.md#memory, docs/dask.md)."""

import numpy as np
import pytest

from kpca_denoise import DenoiseParams, denoise_dask, denoise_stack

da = pytest.importorskip("dask.array")


def _pan(pages, size, seed=0):
    from scipy import ndimage as ndi

    rng = np.random.default_rng(seed)
    a = ndi.gaussian_filter(rng.normal(size=(size + 40, size + 40)), 2.0)
    a = 30 + 190 * (a - a.min()) / np.ptp(a)
    clean = np.stack([a[10:10 + size, 5 + k:5 + k + size] for k in range(pages)])
    noisy = clean + np.random.default_rng(seed + 1).normal(0, 20, clean.shape)
    return np.clip(noisy, 0, 255).astype(np.uint8)


def test_a_dask_stack_in_tiles_equals_the_in_memory_stack():
    noisy = _pan(2, 96)
    lazy = da.from_array(noisy, chunks=(1, 48, 48))
    params = DenoiseParams(tile_size=64)  # the noise estimated: one level for the stack
    out = denoise_dask(lazy, params=params)
    assert out.shape == noisy.shape and out.dtype == np.uint8 and out.chunks == lazy.chunks
    np.testing.assert_array_equal(out.compute(), denoise_stack(noisy))


def test_lazy_denoise_reports_the_decision_and_one_noise_level():
    from kpca_denoise.dask_array import lazy_denoise

    noisy = _pan(3, 64)
    run = lazy_denoise(da.from_array(noisy), DenoiseParams(noise_sigma=20.0))
    try:
        assert run.sequence["decision"] == "sequence" and run.sequence["linked"] == [True] * 2
        assert run.noise_sigma == [20.0] * 3 and run.tiles == 1
        assert [st["sequence"]["page"] for st in run.stats] == [0, 1, 2]
    finally:
        run.close()


def test_lazy_denoise_reports_the_neighbours_each_page_used_over_its_tiles():
    from kpca_denoise.dask_array import lazy_denoise

    from kpca_denoise.core.grouped import GroupedOptions

    noisy = _pan(3, 128)
    # a small search: tiles whose regions are not the whole pages
    params = DenoiseParams(noise_sigma=20.0, tile_size=64, grouped=GroupedOptions(
        search_radius=3, search_radius1=3, match_size1=5, match_size=5))
    run = lazy_denoise(da.from_array(noisy), params)
    try:
        assert run.tiles == 4
        assert "neighbours_used" not in run.stats[1]["sequence"]  # known once the tiles ran
        run.outputs[run.keys[-1]].compute()
        _, here = denoise_stack(noisy, params=params, return_stats=True)
        for k in range(3):
            used = run.stats[k]["sequence"]["neighbours_used"]
            assert used == here["pages"][k]["sequence"]["neighbours_used"]
            assert abs(sum(used.values()) - 1) < 1e-3 and used["0"] < 1
        assert set(run.stats[1]["sequence"]["neighbours_used"]) == {"-1", "0", "1"}
    finally:
        run.close()


def test_a_stack_under_the_executor_runs_its_tiles_on_the_cluster():
    distributed = pytest.importorskip("distributed")
    from distributed import get_task_stream

    from kpca_denoise import denoise_set
    from kpca_denoise.executor import Executor

    pages = list(_pan(2, 64))
    params = DenoiseParams(noise_sigma=20.0, sequence="yes")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster:
        with Executor(scheduler=cluster.scheduler_address) as ex, \
                get_task_stream(ex.client) as ts:
            got = list(ex.run(pages, params, sequences=[(0, 2)]))
    keys = [str(t["key"]) for t in ts.data]
    assert sum("-tile-" in k for k in keys) == 1  # the stack's one tile, every page
    here = denoise_set(pages, params)
    assert [r.stats["sequence"]["decision"] for r in got] == ["sequence"] * 2
    for a, b in zip(got, here.images):
        np.testing.assert_array_equal(a.outputs[None], b.outputs[None])


def test_a_poisson_gaussian_dask_stack_has_the_in_memory_stabiliser():
    rng = np.random.default_rng(4)
    clean = _pan(3, 64).astype(np.float64)
    noisy = np.clip(2.0 * rng.poisson(clean / 2.0) + rng.normal(0, 3, clean.shape), 0,
                    255).astype(np.uint8)
    params = DenoiseParams(noise_model="poisson-gaussian", sequence="yes")
    out = denoise_dask(da.from_array(noisy, chunks=(1, 64, 64)), params=params).compute()
    np.testing.assert_array_equal(out, denoise_stack(noisy, params=params))
