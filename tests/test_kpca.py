import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.decomposition import KernelPCA as SkKernelPCA

from kpca_denoise import Cancelled, CancelToken, KernelPCA, NotFittedError
from kpca_denoise.core.eigen import AUTO_DENSE_MAX_N, choose_solver
from kpca_denoise.core.kernels import kernel_matrix


@pytest.fixture
def data(rng):
    return rng.normal(size=(250, 12)), rng.normal(size=(40, 12))


@pytest.mark.parametrize("kernel,kw", [
    ("rbf", {"gamma": 0.04}),
    ("poly", {"gamma": 0.1, "degree": 3, "coef0": 1.0}),
    ("sigmoid", {"gamma": 0.01, "coef0": 0.5}),
])
def test_transform_equals_sklearn(data, kernel, kw):
    Xtr, Xte = data
    ours = KernelPCA(6, kernel=kernel, dtype="float64", **kw).fit(Xtr)
    ref = SkKernelPCA(6, kernel=kernel, **kw).fit(Xtr)
    a, b = ours.transform(Xte), ref.transform(Xte)
    # same up to each component's sign (we also fix signs the same way)
    signs = np.sign(np.sum(a * b, axis=0))
    np.testing.assert_allclose(a, b * signs, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(ours.eigenvalues_, ref.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(ours.fit_transform(Xtr), ref.fit_transform(Xtr) * signs,
                               rtol=1e-8, atol=1e-10)


def test_training_projection_via_transform_equals_fit_transform(data):
    Xtr, _ = data
    m = KernelPCA(5, gamma=0.05, dtype="float64").fit(Xtr)
    np.testing.assert_allclose(m.transform(Xtr), m.fit_transform(Xtr), atol=1e-10)


def test_centring_identities(data):
    """Centred Gram rows/columns sum to zero, so training projections have
    zero mean; axes have unit length (lambda ||alpha||^2 = 1); eigenpairs
    satisfy K~ v = lambda v (Schölkopf et al. 1998)."""
    Xtr, _ = data
    m = KernelPCA(8, gamma=0.05, dtype="float64").fit(Xtr)
    Z = m.transform(Xtr)
    np.testing.assert_allclose(Z.mean(axis=0), 0.0, atol=1e-10)
    np.testing.assert_allclose(m.eigenvalues_ * np.sum(m.alphas_**2, axis=0), 1.0, rtol=1e-10)
    n = Xtr.shape[0]
    K = kernel_matrix(Xtr, Xtr, "rbf", gamma=0.05)
    L = np.eye(n) - np.ones((n, n)) / n
    Kc = L @ K @ L
    np.testing.assert_allclose(Kc @ m.eigenvectors_, m.eigenvectors_ * m.eigenvalues_, atol=1e-9)
    # variance of each training projection is lambda / n
    np.testing.assert_allclose(Z.var(axis=0), m.eigenvalues_ / n, rtol=1e-8)


def test_signs_are_deterministic(data):
    Xtr, _ = data
    a = KernelPCA(4, gamma=0.05, eigen_solver="dense").fit(Xtr).eigenvectors_
    b = KernelPCA(4, gamma=0.05, eigen_solver="randomized", tol=1e-10).fit(Xtr).eigenvectors_
    idx = np.argmax(np.abs(a), axis=0)
    assert np.all(a[idx, range(4)] > 0)
    np.testing.assert_allclose(a, b, atol=1e-5)


def test_randomized_solver_reports_live_eigenvalues_and_matches_dense(rng):
    X = rng.normal(size=(600, 10))
    events = []
    r = KernelPCA(10, gamma=0.02, eigen_solver="randomized", tol=1e-9, dtype="float64",
                  progress=events.append).fit(X)
    d = KernelPCA(10, gamma=0.02, eigen_solver="dense", dtype="float64").fit(X)
    np.testing.assert_allclose(r.eigenvalues_, d.eigenvalues_, rtol=1e-7)
    live = [e.eigenvalues for e in events if e.stage == "eigensolver" and e.eigenvalues is not None]
    assert len(live) >= 2 and all(v.shape == (10,) for v in live)
    assert r.solver_ == "randomized" and r.n_iter_ == len(live) - 1 or r.n_iter_ >= 1


def test_auto_solver_rule():
    assert choose_solver(AUTO_DENSE_MAX_N, 8) == "dense"
    assert choose_solver(6000, 32) == "randomized"
    assert choose_solver(6000, 2000) == "dense"


def test_zero_eigenvalues_give_zero_axes_not_inf(rng):
    X = np.repeat(rng.normal(size=(3, 4)), 5, axis=0)  # 3 distinct points: rank 2 centred
    m = KernelPCA(6, gamma=0.5, dtype="float64").fit(X)
    assert np.all(np.isfinite(m.alphas_))
    assert np.all(m.eigenvalues_[2:] < 1e-10 * m.eigenvalues_[0])
    assert np.all(m.alphas_[:, 2:] == 0)
    assert np.all(np.isfinite(m.transform(X)))


def test_sigmoid_negative_eigenvalues_are_clipped(rng):
    X = rng.normal(size=(60, 3)) * 3
    m = KernelPCA(59, kernel="sigmoid", gamma=1.0, coef0=-2.0, dtype="float64").fit(X)
    assert m.n_negative_eigenvalues_ > 0
    assert np.all(m.eigenvalues_ >= 0) and np.all(np.isfinite(m.transform(X)))


def test_gamma_none_is_resolved_once_and_stored(rng):
    X = rng.normal(size=(200, 16))
    m = KernelPCA(4).fit(X)
    assert m.gamma is None and m.gamma_ > 0
    again = m.gamma_
    m.transform(X[:5])
    assert m.gamma_ == again
    assert KernelPCA(4, kernel="poly").fit(X).gamma_ == 1 / 16


def test_params_protocol():
    m = KernelPCA(3, gamma=0.5)
    p = m.get_params()
    assert p["n_components"] == 3 and p["gamma"] == 0.5 and "random_state" in p
    assert m.set_params(n_components=5) is m and m.n_components == 5
    with pytest.raises(ValueError, match="invalid parameter 'n_comp'"):
        m.set_params(n_comp=2)


def test_not_fitted():
    with pytest.raises(NotFittedError, match="call 'fit'"):
        KernelPCA(2).transform(np.ones((2, 2)))


@pytest.mark.parametrize("k,msg", [
    (0, "n_components must be an integer >= 1"),
    (2.5, "n_components must be an integer >= 1"),
    (11, "more than the 10 training samples"),
])
def test_bad_n_components(k, msg):
    with pytest.raises(ValueError, match=msg):
        KernelPCA(k).fit(np.random.default_rng(0).normal(size=(10, 4)))


@pytest.mark.parametrize("gamma", [0, -0.1, float("nan"), float("inf")])
def test_bad_gamma(gamma):
    with pytest.raises(ValueError, match="gamma must be a positive finite number"):
        KernelPCA(2, gamma=gamma).fit(np.random.default_rng(0).normal(size=(10, 4)))


def test_nan_input_rejected():
    X = np.ones((10, 3))
    X[2, 1] = np.nan
    with pytest.raises(ValueError, match="NaN or Inf"):
        KernelPCA(2, gamma=1.0).fit(X)


def test_feature_mismatch(rng):
    m = KernelPCA(2, gamma=1.0).fit(rng.normal(size=(10, 3)))
    with pytest.raises(ValueError, match="X has 4 features but the model was fitted with 3"):
        m.transform(rng.normal(size=(2, 4)))


def test_cancel_stops_fit(rng):
    tok = CancelToken()
    tok.cancel()
    with pytest.raises(Cancelled):
        KernelPCA(2, gamma=1.0, cancel=tok).fit(rng.normal(size=(50, 3)))


@settings(max_examples=25, deadline=None)
@given(n=st.integers(8, 60), d=st.integers(1, 6), seed=st.integers(0, 10_000),
       log_gamma=st.floats(-3, 1))
def test_projection_properties_hold_for_random_data(n, d, seed, log_gamma):
    X = np.random.default_rng(seed).normal(size=(n, d))
    k = min(3, n - 1)
    m = KernelPCA(k, gamma=10.0**log_gamma, dtype="float64").fit(X)
    Z = m.transform(X)
    assert np.all(np.isfinite(Z))
    assert np.all(np.diff(m.eigenvalues_) <= 1e-12 * max(1.0, m.eigenvalues_[0]))
    np.testing.assert_allclose(Z.mean(axis=0), 0.0, atol=1e-8)
