import numpy as np
import pytest
from sklearn.metrics.pairwise import polynomial_kernel, rbf_kernel, sigmoid_kernel

from kpca_denoise.core.kernels import kernel_matrix, rbf_cross, rbf_gram
from kpca_denoise.core.progress import CancelToken, Cancelled


@pytest.mark.parametrize("n", [1, 7, 64, 300, 531])
def test_rbf_gram_float64_matches_sklearn(rng, n):
    X = rng.normal(size=(n, 13))
    K = rbf_gram(X, 0.05, block=64)
    assert K.dtype == np.float64
    np.testing.assert_allclose(K, rbf_kernel(X, gamma=0.05), rtol=1e-12, atol=1e-14)


def test_rbf_gram_float32_is_float32_symmetric_and_accurate(rng):
    X = rng.normal(size=(700, 64)).astype(np.float32)
    K = rbf_gram(X, 1 / 64.0, block=128)
    assert K.dtype == np.float32
    assert np.array_equal(K, K.T)
    np.testing.assert_array_equal(np.diag(K), 1.0)
    ref = rbf_kernel(X.astype(np.float64), gamma=1 / 64.0)
    # the inlined float32 exp is within a few ulps; distances lose ~1e-6 relative
    np.testing.assert_allclose(K, ref, rtol=2e-5, atol=1e-6)


def test_rbf_gram_far_points_underflow_to_tiny_not_nan(rng):
    X = np.vstack([np.zeros((3, 4)), np.full((3, 4), 1e3)]).astype(np.float32)
    K = rbf_gram(X, 1.0)
    assert np.all(np.isfinite(K))
    assert K[0, 5] < 1e-30


def test_rbf_gram_reports_progress_and_cancels(rng):
    X = rng.normal(size=(1000, 8))
    events = []
    rbf_gram(X, 0.1, block=100, progress=events.append)
    assert [e.done for e in events] == list(range(11))
    assert all(e.stage == "gram" and e.total == 10 for e in events)
    tok = CancelToken()
    tok.cancel()
    with pytest.raises(Cancelled):
        rbf_gram(X, 0.1, cancel=tok)


@pytest.mark.parametrize("gamma", [0.0, -1.0, np.nan, np.inf])
def test_rbf_gram_rejects_bad_gamma(gamma):
    with pytest.raises(ValueError, match="gamma must be a positive finite number"):
        rbf_gram(np.ones((3, 2)), gamma)


def test_cross_kernels_match_sklearn(rng):
    X = rng.normal(size=(40, 6))
    Y = rng.normal(size=(9, 6))
    np.testing.assert_allclose(rbf_cross(Y, X, 0.3), rbf_kernel(Y, X, gamma=0.3), rtol=1e-12)
    np.testing.assert_allclose(
        kernel_matrix(Y, X, "poly", gamma=0.2, degree=3, coef0=1.5),
        polynomial_kernel(Y, X, degree=3, gamma=0.2, coef0=1.5), rtol=1e-12)
    np.testing.assert_allclose(
        kernel_matrix(Y, X, "sigmoid", gamma=0.1, coef0=0.3),
        sigmoid_kernel(Y, X, gamma=0.1, coef0=0.3), rtol=1e-12)
    with pytest.raises(ValueError, match="unknown kernel 'cosine'"):
        kernel_matrix(Y, X, "cosine", gamma=1.0)
