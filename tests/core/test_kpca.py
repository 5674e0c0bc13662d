import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from helpers import KPCA as KernelPCA
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.decomposition import KernelPCA as SkKernelPCA
from sklearn.exceptions import ConvergenceWarning

import kpca_denoise
from kpca_denoise import Cancelled, CancelToken, NotFittedError
from kpca_denoise.core import eigen
from kpca_denoise.core.eigen import AUTO_DENSE_MAX_N, choose_solver, lobpcg_budget
from kpca_denoise.core.kernels import kernel_matrix

Plain = kpca_denoise.KernelPCA  # scikit-learn's defaults


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
    ours = Plain(6, kernel=kernel, **kw).fit(Xtr)
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
    m = KernelPCA(5, gamma=0.05, gram_dtype="float64").fit(Xtr)
    np.testing.assert_allclose(m.transform(Xtr), m.fit_transform(Xtr), atol=1e-10)


def test_centring_identities(data):
    """Centred Gram rows/columns sum to zero, so training projections have
    zero mean; axes have unit length (lambda ||alpha||^2 = 1); eigenpairs
    satisfy K~ v = lambda v (Schölkopf et al. 1998)."""
    Xtr, _ = data
    m = KernelPCA(8, gamma=0.05, gram_dtype="float64").fit(Xtr)
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
    b = KernelPCA(4, gamma=0.05, eigen_solver="randomized", tol=1e-6).fit(Xtr).eigenvectors_
    idx = np.argmax(np.abs(a), axis=0)
    assert np.all(a[idx, range(4)] > 0)
    np.testing.assert_allclose(a, b, atol=1e-5)


def test_randomized_solver_reports_live_eigenvalues_and_matches_dense(rng):
    X = rng.normal(size=(600, 10))
    events = []
    r = KernelPCA(10, gamma=0.02, eigen_solver="randomized", tol=1e-9, gram_dtype="float64",
                  progress=events.append).fit(X)
    d = KernelPCA(10, gamma=0.02, eigen_solver="dense", gram_dtype="float64").fit(X)
    np.testing.assert_allclose(r.eigenvalues_, d.eigenvalues_, rtol=1e-7)
    live = [e.eigenvalues for e in events if e.stage == "eigensolver" and e.eigenvalues is not None]
    assert len(live) >= 2 and all(v.shape == (10,) for v in live)
    assert r.solver_ == "randomized" and r.n_iter_ == len(live) - 1 or r.n_iter_ >= 1


def test_zero_eigenvalues_give_zero_axes_not_inf(rng):
    X = np.repeat(rng.normal(size=(3, 4)), 5, axis=0)  # 3 distinct points: rank 2 centred
    m = KernelPCA(6, gamma=0.5, gram_dtype="float64").fit(X)
    assert np.all(np.isfinite(m.alphas_))
    assert np.all(m.eigenvalues_[2:] < 1e-10 * m.eigenvalues_[0])
    assert np.all(m.alphas_[:, 2:] == 0)
    assert np.all(np.isfinite(m.transform(X)))


def test_cancel_stops_fit(rng):
    tok = CancelToken()
    tok.cancel()
    with pytest.raises(Cancelled):
        KernelPCA(2, gamma=1.0, cancel=tok).fit(rng.normal(size=(50, 3)))


def test_an_estimator_with_a_cancel_token_clones_and_pickles(rng):
    # GridSearchCV, cross_val_score and pickle failed: "cannot pickle '_thread.lock'"
    import copy
    import pickle

    from sklearn.base import clone
    from sklearn.model_selection import GridSearchCV

    tok = CancelToken()
    m = KernelPCA(2, kernel="rbf", cancel=tok)
    assert clone(m).cancel is tok and copy.deepcopy(m).cancel is tok  # one flag for all
    X = rng.normal(size=(40, 3))
    back = pickle.loads(pickle.dumps(m.fit(X)))
    assert not back.cancel.is_set()
    np.testing.assert_allclose(back.transform(X), m.transform(X), rtol=1e-12, atol=1e-12)
    tok.cancel()
    assert pickle.loads(pickle.dumps(tok)).is_set()  # its state goes with it
    search = GridSearchCV(KernelPCA(2, kernel="rbf", cancel=CancelToken(),
                                    fit_inverse_transform=True),
                          {"gamma": [0.1, 1.0]}, cv=3,
                          scoring=lambda est, X, y=None: -np.mean(
                              (est.inverse_transform(est.transform(X)) - X) ** 2))
    assert search.fit(X).best_params_["gamma"] in (0.1, 1.0)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(8, 60), d=st.integers(1, 6), seed=st.integers(0, 10_000),
       log_gamma=st.floats(-3, 1))
def test_projection_properties_hold_for_random_data(n, d, seed, log_gamma):
    X = np.random.default_rng(seed).normal(size=(n, d))
    k = min(3, n - 1)
    m = KernelPCA(k, gamma=10.0**log_gamma, gram_dtype="float64")
    try:
        m.fit(X)
    except ValueError as exc:  # every pair far apart for this width: the clear error
        assert "RBF kernel matrix is the identity" in str(exc)
        assume(False)
    Z = m.transform(X)
    assert np.all(np.isfinite(Z))
    assert np.all(np.diff(m.eigenvalues_) <= 1e-12 * max(1.0, m.eigenvalues_[0]))
    np.testing.assert_allclose(Z.mean(axis=0), 0.0, atol=1e-8)


def test_defaults_equal_sklearn():
    ours, theirs = Plain().get_params(), SkKernelPCA().get_params()
    assert {k: ours[k] for k in theirs} == theirs
    assert clone(Plain(3, kernel="rbf", gamma="noise")).get_params()["gamma"] == "noise"


def test_auto_solver_rule():
    assert choose_solver(AUTO_DENSE_MAX_N, 8) == "dense"
    assert choose_solver(6000, 32) == "lobpcg"
    assert choose_solver(6000, 2000) == "dense"
    assert lobpcg_budget(6000, 32) >= 10


def test_auto_falls_back_to_dense_when_lobpcg_exceeds_its_budget(rng, monkeypatch):
    """A flat spectrum (tiny gap at k) exhausts the budget: 'auto' then
    solves densely and the answer is still exact."""
    monkeypatch.setattr(eigen, "AUTO_DENSE_MAX_N", 200)  # a small matrix, the same rule
    n, k = 300, 10
    assert choose_solver(n, k) == "lobpcg"
    lam = np.linspace(1.0, 0.999, n)
    perm = rng.permutation(n)
    A = np.diag(lam[perm])  # LOBPCG sees a diagonal matrix as any other
    w, V, info = eigen.eigh_top(A, k, solver="auto", tol=1e-8)
    assert info["solver"] == "lobpcg+dense" and info["iterations"] == lobpcg_budget(n, k)
    np.testing.assert_allclose(w, lam[:k], rtol=1e-12)
    np.testing.assert_allclose(np.abs(V[np.argsort(perm)[:k], range(k)]), 1.0, rtol=1e-10)


def test_lobpcg_asked_beyond_float32_accuracy_returns_its_best_not_garbage(rng):
    """A tolerance below what a float32 Gram matrix supports: LOBPCG used to
    iterate on past its floor and diverge (Ritz values off by 1e15 after 60
    iterations).  It now stops at the floor with its best iterate, flagged."""
    from kpca_denoise.core.kernels import centre_gram, rbf_gram

    X = rng.normal(size=(900, 16)).astype(np.float32)
    K = rbf_gram(X, 1 / 32)
    centre_gram(K, symmetric=True)
    wd, _, _ = eigen.eigh_top(K, 16, solver="dense")
    w, V, info = eigen.eigh_top(K, 16, solver="lobpcg", tol=1e-12, max_iter=80)
    assert info["converged"] is False and info["stalled"] is True
    assert info["iterations"] < 80
    # float64 products with the float32 matrix: the returned pairs are at the float32 floor
    R = K.astype(np.float64) @ V - V * w
    assert np.linalg.norm(R, axis=0).max() / wd[0] < 1e-4
    np.testing.assert_allclose(w, wd, rtol=1e-6)
    np.testing.assert_allclose(V.T @ V, np.eye(16), atol=1e-10)
    with pytest.warns(ConvergenceWarning, match="stopped improving after .* gram_dtype='float64'"):
        Plain(16, kernel="rbf", gamma=1 / 32, eigen_solver="lobpcg", tol=1e-12,
              gram_dtype="float32").fit(X)


@pytest.mark.parametrize("solver,tol,atol", [("lobpcg", 1e-8, 1e-6), ("arpack", 1e-8, 1e-6),
                                              ("randomized", 1e-6, 1e-4)])
def test_iterative_solvers_match_dense(rng, solver, tol, atol):
    X = rng.normal(size=(400, 10))
    d = Plain(12, kernel="rbf", gamma=0.01, eigen_solver="dense").fit(X)
    m = Plain(12, kernel="rbf", gamma=0.01, eigen_solver=solver, tol=tol,
              random_state=0).fit(X)
    np.testing.assert_allclose(m.eigenvalues_, d.eigenvalues_, rtol=1e-7)
    np.testing.assert_allclose(np.abs(m.transform(X[:50])), np.abs(d.transform(X[:50])),
                               atol=atol)


def test_sigmoid_significant_negative_eigenvalues_raise_as_sklearn(rng):
    X = rng.normal(size=(60, 3)) * 3
    kw = dict(kernel="sigmoid", gamma=1.0, coef0=-2.0)
    with pytest.raises(ValueError, match="There are significant negative eigenvalues"):
        SkKernelPCA(59, **kw).fit(X)
    with pytest.raises(ValueError, match="There are significant negative eigenvalues"):
        Plain(59, **kw).fit(X)


def test_gamma_resolution(rng):
    X = rng.normal(size=(200, 16))
    m = KernelPCA(4).fit(X)
    assert m.gamma == "noise" and m.gamma_ > 0
    again = m.gamma_
    m.transform(X[:5])
    assert m.gamma_ == again
    # deterministic without a seed (the width rule's pairs are drawn with seed 0)
    a = Plain(4, kernel="rbf", gamma="noise").fit(X).gamma_
    assert a == Plain(4, kernel="rbf", gamma="noise").fit(X).gamma_
    assert Plain(4, kernel="rbf").fit(X).gamma_ == 1 / 16  # scikit-learn's None
    with pytest.raises(ValueError, match="gamma='noise' is the RBF width rule"):
        Plain(4, kernel="poly", gamma="noise").fit(X)


def test_the_learned_pre_image_checks_its_input_and_keeps_its_precision():
    # NaN came back as NaN, a wrong width failed inside a matrix product, and float32
    # came back float64 (scikit-learn's keeps float32)
    from sklearn.decomposition import KernelPCA as Sk

    X = np.random.default_rng(0).normal(size=(30, 6))
    m = Plain(3, kernel="rbf", fit_inverse_transform=True).fit(X)
    with pytest.raises(ValueError, match="Input contains NaN"):
        m.inverse_transform(np.full((4, 3), np.nan))
    with pytest.raises(ValueError, match="X has 5 columns, but this KernelPCA projects on 3 "
                                         "components: give the output of its transform"):
        m.inverse_transform(np.zeros((4, 5)))
    with pytest.raises(ValueError, match="Expected 2D array"):
        m.inverse_transform(np.zeros(3))
    X32 = X.astype(np.float32)
    ours = Plain(3, kernel="rbf", fit_inverse_transform=True).fit(X32)
    theirs = Sk(3, kernel="rbf", fit_inverse_transform=True).fit(X32)
    Z = ours.transform(X32)
    assert Z.dtype == np.float32 and ours.fit_transform(X32).dtype == np.float32
    back = ours.inverse_transform(Z)
    assert back.dtype == theirs.inverse_transform(theirs.transform(X32)).dtype == np.float32
    np.testing.assert_allclose(back, theirs.inverse_transform(theirs.transform(X32)),
                               rtol=0, atol=1e-4)  # float32 round-off, signs cancel


def test_not_fitted():
    with pytest.raises(NotFittedError, match="not fitted yet"):
        Plain(2).transform(np.ones((2, 2)))
    with pytest.raises(NotFittedError, match="fit_inverse_transform parameter was not set"):
        Plain(2).fit(np.eye(3)).inverse_transform(np.ones((2, 2)))


@pytest.mark.parametrize("gamma", [-0.1, float("nan"), float("inf"), "auto"])
def test_bad_gamma(gamma):
    # scikit-learn's own words for its own parameters (and for "noise", ours)
    with pytest.raises(ValueError, match=r"The 'gamma' parameter of KernelPCA must be a float in "
                                         r"the range \[0.0, inf\), a str among \{'noise'\} or None"):
        Plain(2, kernel="rbf", gamma=gamma).fit(np.random.default_rng(0).normal(size=(10, 4)))


@pytest.mark.parametrize("params,words", [
    ({"alpha": -1.0, "fit_inverse_transform": True}, "'alpha' parameter of KernelPCA must be a float in the range [0.0, inf)"),
    ({"tol": -1.0}, "'tol' parameter of KernelPCA must be a float in the range [0.0, inf)"),
    ({"kernel": "RBF"}, "'kernel' parameter of KernelPCA must be a str among"),
    ({"width_scale": 0.0}, "'width_scale' parameter of KernelPCA must be a float in the range (0.0, inf)"),
    ({"progress": 5}, "'progress' parameter of KernelPCA must be a callable or None"),
])
def test_bad_parameters_are_named_as_scikit_learn_names_them(params, words):
    # alpha -1 was a LinAlgError, tol -1 was taken, kernel 'RBF' spoke of a 'metric',
    # width_scale 0 divided by zero, progress 5 was "'int' object is not callable"
    from sklearn.decomposition import KernelPCA as Sk

    X = np.random.default_rng(0).normal(size=(10, 4))
    with pytest.raises(ValueError) as exc:
        Plain(2, **params).fit(X)
    assert words in str(exc.value)
    if "width_scale" not in params and "progress" not in params:  # theirs too
        with pytest.raises(ValueError, match="parameter of KernelPCA must be"):
            Sk(2, **params).fit(X)


def test_nan_and_feature_mismatch_rejected(rng):
    X = np.ones((10, 3))
    X[2, 1] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        Plain(2).fit(X)
    m = Plain(2).fit(rng.normal(size=(10, 3)))
    with pytest.raises(ValueError, match="X has 4 features, but KernelPCA is expecting 3"):
        m.transform(rng.normal(size=(2, 4)))


# -- the bugs of issue 11, each with the check that failed before ------------------

def test_fit_copies_X(rng):
    X = rng.normal(size=(80, 6))
    m = KernelPCA(4).fit(X)
    Xc = X.copy()
    Z = m.transform(Xc)
    R = m.fixed_point_inverse_transform(Z, init=Xc)
    X += 1.0  # the caller's array changes after fitting
    np.testing.assert_array_equal(m.transform(Xc), Z)
    np.testing.assert_array_equal(m.fixed_point_inverse_transform(Z, init=Xc), R)


@pytest.mark.parametrize("kernel,offset", [("rbf", 1e3), ("rbf", 1e4), ("linear", 1e3)])
def test_float32_gram_is_accurate_far_from_the_origin(rng, kernel, offset):
    """The data are centred before the Gram matrix: float32 keeps its accuracy
    at X + 1e4 (it was 0.11 / 2.1 / 0.05 relative error before)."""
    X = rng.normal(size=(400, 8)) + offset
    kw = dict(kernel=kernel, gamma=0.05 if kernel == "rbf" else None, eigen_solver="dense")
    ref = SkKernelPCA(6, **kw).fit(X)
    m = KernelPCA(6, gram_dtype="float32", **kw).fit(X)
    assert m.gram_dtype_ == "float32"
    np.testing.assert_allclose(m.eigenvalues_, ref.eigenvalues_, rtol=1e-5)
    Z, Zr = m.transform(X[:50]), ref.transform(X[:50])
    assert np.abs(np.abs(Z) - np.abs(Zr)).max() < 1e-4 * np.abs(Zr).max()


def test_wide_kernel_switches_to_float64_or_warns(rng):
    X = rng.normal(size=(2500, 8))
    d2 = 2 * 8  # mean squared distance of standard normal samples
    g = 1e-7 / d2
    m = Plain(4, kernel="rbf", gamma=g).fit(X)  # gram_dtype='auto'
    assert m.gram_dtype_ == "float64"
    assert Plain(4, kernel="rbf", gamma=1.0 / d2).fit(X).gram_dtype_ == "float32"
    with pytest.warns(RuntimeWarning, match="gram_dtype='float32' is inaccurate"):
        Plain(4, kernel="rbf", gamma=g, gram_dtype="float32").fit(X[:300])


def test_degenerate_spectrum_is_a_clear_error(rng):
    X = rng.normal(size=(50, 5))
    with pytest.raises(ValueError, match="RBF kernel matrix is the identity"):
        KernelPCA(8, gamma=1e6).fit(X)
    # no positive eigenvalue (identical samples): the Mika pre-image says so
    m = Plain(2, kernel="rbf", gamma=1.0).fit(np.ones((6, 3)))
    assert np.all(m.eigenvalues_ == 0)
    with pytest.raises(ValueError, match="no component with a positive eigenvalue"):
        m.fixed_point_inverse_transform(np.zeros((1, 1)))


def test_complex_input_rejected():
    with pytest.raises(ValueError, match="Complex data not supported"):
        KernelPCA(2).fit(np.ones((5, 3)) + 1j)


def test_n_features_in_and_feature_names(rng):
    m = Plain(3).fit(rng.normal(size=(20, 5)))
    assert m.n_features_in_ == 5
    assert list(m.get_feature_names_out()) == ["kernelpca0", "kernelpca1", "kernelpca2"]


def test_transform_stores_nothing(rng):
    X = rng.normal(size=(40, 4))
    for m in (KernelPCA(3).fit(X), KernelPCA(3, n_landmarks=20).fit(X)):
        before = dict(vars(m))
        m.transform(X[:5])
        assert vars(m).keys() == before.keys()
        assert all(vars(m)[k] is v for k, v in before.items())


def test_sparse_input_equals_dense(rng):
    X = rng.normal(size=(30, 6)) * (rng.random((30, 6)) < 0.4)
    d = Plain(3, kernel="rbf", gamma=0.2).fit(X)
    s = Plain(3, kernel="rbf", gamma=0.2).fit(sp.csr_matrix(X))
    np.testing.assert_allclose(s.transform(sp.csr_matrix(X)), d.transform(X), atol=1e-12)


@pytest.mark.parametrize("kernel", ["rbf", "linear"])
def test_float32_in_float32_out(rng, kernel):
    X = rng.normal(size=(30, 4)).astype(np.float32)
    m = Plain(3, kernel=kernel)
    assert m.fit_transform(X).dtype == np.float32
    assert m.transform(X).dtype == np.float32
    assert m.transform(X.astype(np.float64)).dtype == np.float64


@pytest.mark.parametrize("solver", ["randomized", "lobpcg"])
def test_iterative_solver_warns_at_max_iter(rng, solver):
    X = rng.normal(size=(400, 10))
    with pytest.warns(ConvergenceWarning, match=f"eigen_solver='{solver}' stopped at max_iter=2"):
        Plain(20, kernel="rbf", gamma=0.05, eigen_solver=solver, tol=1e-12, max_iter=2).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Plain(20, kernel="rbf", gamma=0.05, eigen_solver=solver).fit(X)


# -- the two pre-images ----------------------------------------------------------------

def test_ridge_inverse_transform_equals_sklearn(rng):
    X = rng.normal(size=(120, 5))
    kw = dict(kernel="rbf", gamma=0.1, fit_inverse_transform=True, alpha=0.05)
    ours, ref = Plain(8, **kw).fit(X), SkKernelPCA(8, **kw).fit(X)
    Y = rng.normal(size=(10, 5))
    np.testing.assert_allclose(ours.inverse_transform(ours.transform(Y)),
                               ref.inverse_transform(ref.transform(Y)), atol=1e-8)


def test_fixed_point_can_start_from_the_ridge_map(rng):
    X = rng.normal(size=(150, 4))
    m = KernelPCA(6, gamma=0.2, fit_inverse_transform=True, alpha=0.01).fit(X)
    Z = m.transform(X[:20])
    R0 = m.inverse_transform(Z)
    R = m.fixed_point_inverse_transform(Z, init=R0)
    assert R.shape == X[:20].shape and m.preimage_stats_.converged == 20
    # the fixed point is a stationary point of ||Phi(z) - P Phi(x)||^2: one more
    # step from it moves nothing
    np.testing.assert_allclose(m.fixed_point_inverse_transform(Z, init=R), R, atol=1e-4)


def test_a_fractional_rank_and_a_nan_start_are_named(rng):
    # transform(n_components=2.5) used 2 without a word; a NaN init read as a shape error
    X = rng.normal(size=(30, 4))
    m = KernelPCA(4, kernel="rbf", gamma=0.5).fit(X)
    with pytest.raises(ValueError, match=r"n_components must be an integer in \[1, 4\], got 2.5"):
        m.transform(X, n_components=2.5)
    np.testing.assert_array_equal(m.transform(X, n_components=np.int64(2)),
                                  m.transform(X)[:, :2])
    Z = m.transform(X[:7])
    bad = np.zeros((7, 4))
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="init holds NaN or infinite values"):
        m.fixed_point_inverse_transform(Z, init=bad)
    with pytest.raises(ValueError, match=r"init must be an array of shape \(7, 4\), got \(7, 3\)"):
        m.fixed_point_inverse_transform(Z, init=np.zeros((7, 3)))
