"""The sampled group spectra a run keeps for its quantiles stay bounded however many
groups a long stack has, and stay evenly spread over them (stats.ChannelStats)."""

import numpy as np

from kpca_denoise.core.grouped import stats


def _offer(st, chunks):
    for rows in chunks:
        st.add_samples("spectrum", rows)


def test_samples_stay_bounded_and_evenly_spread(monkeypatch):
    monkeypatch.setattr(stats, "SAMPLE_ROWS", 1000)
    rng = np.random.default_rng(3)
    # 300 chunks of 256 sampled groups, each row tagged with its global index
    chunks = [np.column_stack([np.arange(k * 256, (k + 1) * 256), rng.random((256, 4))])
              for k in range(300)]
    st = stats.ChannelStats()
    _offer(st, chunks)
    held = np.concatenate(st.samples["spectrum"])
    assert len(held) <= 1000
    assert st.seen["spectrum"] == 300 * 256
    # exactly every step-th row of all offered, in order: spread over every chunk
    step = st.step["spectrum"]
    assert step > 1
    np.testing.assert_array_equal(held[:, 0], np.arange(0, 300 * 256, step))
    rows, weight = stats.pool(st.samples["spectrum"], st.seen["spectrum"])
    assert len(rows) == stats.POOL_ROWS
    assert weight == 300 * 256 / stats.POOL_ROWS


def test_quantiles_of_the_bounded_sample_follow_the_whole(monkeypatch):
    monkeypatch.setattr(stats, "SAMPLE_ROWS", 2000)
    rng = np.random.default_rng(4)
    chunks = [np.sort(rng.gamma(2.0 + k / 50, 1.0, (256, 6)), axis=1)[:, ::-1]
              for k in range(200)]
    st = stats.ChannelStats()
    _offer(st, chunks)
    whole = np.quantile(np.concatenate(chunks), stats.QUANTILES, axis=0)
    bounded = stats.quantiles(st.samples["spectrum"])
    # 2000 evenly spread rows of 51,200: the quantiles within a few hundredths
    np.testing.assert_allclose(bounded, whole, rtol=0.05)


def test_a_small_run_keeps_every_sample():
    st = stats.ChannelStats()
    rows = np.arange(40.0).reshape(10, 4)
    st.add_samples("spectrum", rows)
    np.testing.assert_array_equal(np.concatenate(st.samples["spectrum"]), rows)
    assert stats.pool(st.samples["spectrum"], st.seen["spectrum"])[1] == 1.0


def test_the_sampled_groups_fall_on_every_column_of_the_grid():
    """The groups sampled for the spectrum are every ``every``-th of the pass's, in rows of
    the reference grid: a step that divides into a row's length would sample the same
    columns row after row (a 96 px image at stride 5 has rows of 20 references: every
    8th would be columns 0, 4, 8, 12, 16 only, and the quantiles missed the textured
    columns)."""
    for row in (20, 24, 40, 64, 101, 256):
        for groups in (400, 10_000, 1_000_000):
            every = stats.spectrum_every(groups, row)
            assert stats.SPECTRUM_EVERY <= every <= stats.SPECTRUM_EVERY_MAX + 8
            cols = {i % row for i in range(0, row * every, every)}
            assert cols == set(range(row)), (row, groups, every)
    assert stats.spectrum_every(400) == stats.SPECTRUM_EVERY  # no row given: as before
    assert stats.spectrum_every(1_000_000) == stats.SPECTRUM_EVERY_MAX
