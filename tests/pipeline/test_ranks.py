"""What a rank means under the default (grouped) method: an explicit rank keeps that
many of each group's kernel components whole, so low ranks smooth and high ranks keep
noise, while 'auto' is the shrinkage (docs/method.md#ranks)."""

import numpy as np
import pytest

from kpca_denoise import DenoiseParams, denoise_set
from kpca_denoise.core.metrics import psnr


@pytest.fixture(scope="module")
def ranked(camera):
    clean = camera[160:288, 200:328].astype(np.float64)
    noisy = clean + np.random.default_rng(3).normal(0.0, 25.0, clean.shape)
    res = denoise_set([noisy], DenoiseParams(ranks=(1, 2, 4, 8, None), noise_sigma=25.0))
    item = res.images[0]
    assert item.ok, item.error
    return clean, noisy, item


def test_explicit_ranks_keep_that_many_components(ranked):
    _, _, item = ranked
    kept = item.stats["grouped"][0]["effective_rank"]
    for r in (1, 2, 4, 8):
        # every group of a textured crop has at least 8 non-zero components
        assert kept[r] == pytest.approx(r)
    assert 0.0 < kept[None] < 8.0  # the shrinkage keeps few
    spec = item.stats["grouped"][0]["rank_spectrum"]
    assert spec.ndim == 1 and len(spec) > 8 and np.all(np.diff(spec) <= 1e-9 * spec[0])


def test_higher_ranks_keep_more_noise(ranked):
    """The part of the noise a result keeps, <(out - clean) . noise> / |noise|^2, grows
    with the rank: each step keeps visibly more (0.05 of the noise at least)."""
    clean, noisy, item = ranked
    noise = noisy - clean
    kept = [float(np.vdot(item.outputs[r] - clean, noise) / np.vdot(noise, noise))
            for r in (1, 2, 4, 8)]
    assert all(b - a > 0.05 for a, b in zip(kept, kept[1:])), kept
    assert kept[-1] < 1.0


def test_auto_is_at_least_as_good_as_the_best_rank(ranked):
    clean, _, item = ranked
    scores = {r: psnr(clean, item.outputs[r], data_range=255.0) for r in (1, 2, 4, 8, None)}
    assert scores[None] >= max(scores[r] for r in (1, 2, 4, 8)) - 0.1, scores
    # and the ranks differ from each other by more than rounding
    explicit = [scores[r] for r in (1, 2, 4, 8)]
    assert min(abs(a - b) for a, b in zip(explicit, explicit[1:])) > 0.1, scores
