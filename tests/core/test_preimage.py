import numpy as np
import pytest

from kpca_denoise.core.preimage import expansion_weights, preimage_fixed_point
from helpers import KPCA as KernelPCA


def test_full_rank_preimage_of_training_point_is_the_point(rng):
    """With every component kept P Phi(x_j) = Phi(x_j), so the weights are the
    unit vector e_j and one fixed-point step returns x_j exactly."""
    X = rng.normal(size=(30, 5))
    m = KernelPCA(29, gamma=0.5, gram_dtype="float64").fit(X)
    Z = m.transform(X)
    W = expansion_weights(Z, m.alphas_)
    np.testing.assert_allclose(W, np.eye(30), atol=1e-8)
    R = m.fixed_point_inverse_transform(Z, init=X + rng.normal(scale=0.3, size=X.shape))
    np.testing.assert_allclose(R, X, atol=1e-8)
    assert m.preimage_stats_.fallbacks == 0


def test_expansion_weights_sum_to_one(rng):
    X = rng.normal(size=(50, 4))
    m = KernelPCA(7, gamma=0.3).fit(X)
    W = expansion_weights(m.transform(rng.normal(size=(9, 4))), m.alphas_)
    np.testing.assert_allclose(W.sum(axis=1), 1.0, atol=1e-12)


def test_starts_far_from_all_training_points_stay_finite(rng):
    X = rng.normal(size=(40, 6))
    m = KernelPCA(5, gamma=1.0, gram_dtype="float64").fit(X)
    far = X[:10] + 1e4  # every kernel value underflows without the shift
    R = m.fixed_point_inverse_transform(m.transform(far), init=far)
    assert np.all(np.isfinite(R))
    # the result lies in the data's region, not out at the start
    assert np.abs(R).max() < np.abs(X).max() + 1


def test_sign_changing_denominator_falls_back_and_is_counted(rng):
    X = np.array([[0.0], [1.0], [2.0]])
    # weights summing to 1 whose kernel-weighted sum is negative near x=0
    W = np.array([[-3.0, 0.0, 4.0]])
    Z, stats = preimage_fixed_point(W, X, gamma=5.0, init=np.array([[0.0]]), max_iter=20)
    assert np.all(np.isfinite(Z))
    assert stats.restarts + stats.fallbacks >= 1


def test_linear_kernel_preimage_is_exact_projection(rng):
    X = rng.normal(size=(80, 6))
    m = KernelPCA(6, kernel="linear", gram_dtype="float64").fit(X)
    Y = rng.normal(size=(5, 6))
    np.testing.assert_allclose(m.fixed_point_inverse_transform(m.transform(Y)), Y, atol=1e-9)


@pytest.mark.parametrize("kernel", ["poly", "sigmoid"])
def test_other_kernels_say_what_to_use(rng, kernel):
    m = KernelPCA(2, kernel=kernel, gamma=0.1).fit(rng.normal(size=(20, 3)))
    with pytest.raises(ValueError, match="kernel='rbf'"):
        m.fixed_point_inverse_transform(np.zeros((1, 2)))


def test_denoising_moves_points_towards_the_clean_manifold(rng):
    """Mika et al.'s toy: noisy points near a circle are pulled onto it."""
    t = rng.uniform(0, 2 * np.pi, 400)
    clean = np.c_[np.cos(t), np.sin(t)]
    noisy = clean + rng.normal(scale=0.15, size=clean.shape)
    m = KernelPCA(8, gamma=2.0, gram_dtype="float64").fit(noisy)
    den = m.fixed_point_inverse_transform(m.transform(noisy), init=noisy)
    err_noisy = np.abs(np.linalg.norm(noisy, axis=1) - 1).mean()
    err_den = np.abs(np.linalg.norm(den, axis=1) - 1).mean()
    assert err_den < 0.6 * err_noisy
