"""Landmark (Nyström) mode of KernelPCA: agreement with the exact mode at
m = N, error decreasing with m, denoising close to exact, guards and errors.

Measured on this file's data (noisy digits, sigma 0.25 on [0, 1], 1000
training / 797 test digits, 128 components): exact MSE 0.0188, landmark
m = 500: 0.0208, m = 750: 0.0194 (``python -m benchmarks.nystrom`` for more).
"""

import numpy as np
import pytest

from kpca_denoise import Cancelled, CancelToken
from kpca_denoise.core.kpca import WIDTH_SCALE_IMAGE_PATCHES
from kpca_denoise.core.nystrom import landmark_weights
from kpca_denoise.core.patches import extract_patches
from kpca_denoise.core.preimage import preimage_fixed_point
from helpers import KPCA as KernelPCA


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    # The test machine is shared: OpenBLAS's 2 threads next to another busy
    # process made LAPACK's eigh ~10x slower (this file: 73 s against 6 s).
    # Every assertion has a tolerance far above BLAS's thread-count round-off.
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, user_api="blas"):
        yield


def max_angle(A, B):
    """Largest principal angle (degrees) between the column spans of A and B."""
    qa, _ = np.linalg.qr(A)
    qb, _ = np.linalg.qr(B)
    s = np.linalg.svd(qa.T @ qb, compute_uv=False)
    return float(np.degrees(np.arccos(np.clip(s.min(), -1.0, 1.0))))


@pytest.mark.parametrize("kernel,kw", [
    ("rbf", {}),
    ("poly", {"gamma": 0.02, "degree": 3, "coef0": 1.0}),
    ("linear", {}),
])
def test_all_landmarks_reproduce_exact_mode(digits, kernel, kw):
    """m = N: K_Nm K_mm^+ K_mN = K, so eigenvalues, eigenvectors (same sign
    rule, no flipping allowed), projections and pre-images are the exact mode's."""
    Ntr, _, Nte = digits
    X, Y = Ntr[:200], Nte[:50]
    common = dict(kernel=kernel, gram_dtype="float64", eigen_solver="dense", **kw)
    ex = KernelPCA(8, **common).fit(X)
    lm = KernelPCA(8, n_landmarks=200, **common).fit(X)
    assert lm.n_landmarks_ == 200 and lm.landmarks_.shape == (200, 64)
    np.testing.assert_allclose(lm.eigenvalues_, ex.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(lm.eigenvectors_, ex.eigenvectors_, atol=1e-9)
    Ze, Zl = ex.transform(Y), lm.transform(Y)
    np.testing.assert_allclose(Zl, Ze, atol=1e-10 * np.abs(Ze).max())
    np.testing.assert_allclose(lm.fit_transform(X), ex.fit_transform(X), atol=1e-10)
    np.testing.assert_allclose(lm.K_fit_rows_, ex.K_fit_rows_, atol=1e-10)
    assert lm.K_fit_all_ == pytest.approx(ex.K_fit_all_, abs=1e-10)
    if kernel == "poly":
        with pytest.raises(ValueError, match="no fixed-point pre-image for kernel='poly'"):
            lm.fixed_point_inverse_transform(Zl)
        return
    Re, Rl = ex.fixed_point_inverse_transform(Ze, init=Y), lm.fixed_point_inverse_transform(Zl, init=Y)
    np.testing.assert_allclose(Rl, Re, atol=1e-8)
    if kernel == "rbf":
        # K_mm invertible: the expansion is unique, so it is the exact mode's
        # centring-corrected one, and its weights sum to 1 without normalising
        W = landmark_weights(Zl, lm.alphas_, lm.landmark_mean_weights_, normalise=False)
        np.testing.assert_allclose(W.sum(axis=1), 1.0, atol=1e-8)


def test_all_landmarks_float32_default_close_to_exact(digits):
    """Default float32 kernels: m = N agrees with the float64 exact mode to
    float32 accuracy (K_mm and the covariance are float64)."""
    Ntr, _, Nte = digits
    X, Y = Ntr[:300], Nte[:100]
    ex = KernelPCA(16, gram_dtype="float64").fit(X)
    lm = KernelPCA(16, n_landmarks=300).fit(X)
    np.testing.assert_allclose(lm.eigenvalues_, ex.eigenvalues_, rtol=1e-5)
    Ze = ex.transform(Y)
    np.testing.assert_allclose(lm.transform(Y), Ze, atol=1e-4 * np.abs(Ze).max())


def _mean_sin2(A, B):
    """Mean squared sine of the principal angles between the column spans of A and B."""
    qa, _ = np.linalg.qr(A)
    qb, _ = np.linalg.qr(B)
    s = np.clip(np.linalg.svd(qa.T @ qb, compute_uv=False), 0.0, 1.0)
    return float(np.mean(1.0 - s**2))


def _landmark_series(X, Y, ms, **kw):
    ex = KernelPCA(16, gram_dtype="float64", **kw).fit(X)
    fits = [KernelPCA(16, n_landmarks=m, gram_dtype="float64", **kw).fit(X) for m in ms]
    return ex, ex.transform(Y), fits, [f.transform(Y) for f in fits]


def test_error_decreases_with_landmarks_camera_patches(camera):
    """8x8 patches of the noisy camera image (sigma 25), 16 components, the
    global method's width rule.  Landmark sets are nested (one permutation),
    so every approximate eigenvalue rises monotonically to the exact one;
    held-out projections onto the top 4 converge too (measured angle
    11.3 / 4.7 / 1.0 / 0.2 / 0 degrees)."""
    noisy = camera.astype(np.float64) + np.random.default_rng(0).normal(0, 25, camera.shape)
    P, _ = extract_patches(noisy, 8, 4)
    P = P[np.random.default_rng(1).permutation(len(P))]
    ms = (50, 100, 200, 400, 600)
    ex, Ze, fits, Zs = _landmark_series(P[:600], P[-300:], ms, noise_sigma=25.0,
                                        width_scale=WIDTH_SCALE_IMAGE_PATCHES)
    lam = np.array([f.eigenvalues_ for f in fits])
    assert np.all(np.diff(lam, axis=0) >= -1e-10 * ex.eigenvalues_[0])
    assert np.all(lam <= ex.eigenvalues_ * (1 + 1e-10))
    eig_err = np.max(np.abs(lam - ex.eigenvalues_) / ex.eigenvalues_, axis=1)
    angle = [max_angle(Ze[:, :4], Z[:, :4]) for Z in Zs]
    proj_err = [np.linalg.norm(Z[:, :4] - Ze[:, :4]) / np.linalg.norm(Ze[:, :4]) for Z in Zs]
    assert np.all(np.diff(eig_err) < 0), eig_err
    assert np.all(np.diff(angle) < 0), angle
    assert np.all(np.diff(proj_err) < 0), proj_err
    assert angle[0] > 5 and angle[3] < 1, angle
    assert eig_err[-1] < 1e-10 and angle[-1] < 1e-5 and proj_err[-1] < 1e-10


def test_error_decreases_with_landmarks_digits(digits):
    """Noisy digits: a flat spectrum (lambda_1 / lambda_2 = 1.04) and a
    narrow kernel, so single components rotate; the top-8 subspace error
    (mean sin^2 of the principal angles, measured 0.15 / 0.10 / 0.03 / 0)
    and every eigenvalue still converge monotonically."""
    Ntr, _, Nte = digits
    ms = (50, 100, 200, 400)
    ex, Ze, fits, Zs = _landmark_series(Ntr[:400], Nte[:300], ms)
    lam = np.array([f.eigenvalues_ for f in fits])
    assert np.all(np.diff(lam, axis=0) >= -1e-10 * ex.eigenvalues_[0])
    eig_err = np.max(np.abs(lam - ex.eigenvalues_) / ex.eigenvalues_, axis=1)
    sub = [_mean_sin2(Ze[:, :8], Z[:, :8]) for Z in Zs]
    assert np.all(np.diff(eig_err) < 0) and np.all(np.diff(sub) < 0), (eig_err, sub)
    assert eig_err[0] > 0.3 and eig_err[2] < 0.2 and sub[-1] < 1e-12, (eig_err, sub)


def test_landmark_denoising_within_margin_of_exact(digits):
    Ntr, Xte, Nte = digits

    def mse(model):
        R = model.fixed_point_inverse_transform(model.transform(Nte), init=Nte)
        assert model.preimage_stats_.fallbacks == 0
        return float(np.mean((R - Xte) ** 2))

    exact = mse(KernelPCA(128).fit(Ntr))
    half = mse(KernelPCA(128, n_landmarks=500).fit(Ntr))
    most = mse(KernelPCA(128, n_landmarks=750).fit(Ntr))
    noisy = float(np.mean((Nte - Xte) ** 2))
    # measured: 0.0188 / 0.0208 / 0.0194, noisy 0.0627
    assert exact < most < half, (exact, most, half)
    assert half < 1.15 * exact and most < 1.06 * exact, (exact, half, most)
    assert half < 0.35 * noisy


def test_preimage_is_invariant_to_weight_normalisation(digits):
    """m < N: the weights' sums are not 1 (measured 0.7..1.1); the RBF fixed
    point is scale invariant, so normalising them only fixes the restart point."""
    Ntr, _, Nte = digits
    lm = KernelPCA(16, n_landmarks=200).fit(Ntr[:600])
    Z = lm.transform(Nte[:100])
    raw = landmark_weights(Z, lm.alphas_, lm.landmark_mean_weights_, normalise=False)
    norm = landmark_weights(Z, lm.alphas_, lm.landmark_mean_weights_)
    assert np.ptp(raw.sum(axis=1)) > 0.05
    np.testing.assert_allclose(norm.sum(axis=1), 1.0, atol=1e-12)
    a, _ = preimage_fixed_point(raw, lm.landmarks_, lm.gamma_, init=Nte[:100], tol=1e-10)
    b, _ = preimage_fixed_point(norm, lm.landmarks_, lm.gamma_, init=Nte[:100], tol=1e-10)
    np.testing.assert_allclose(a, b, atol=1e-8)
    np.testing.assert_allclose(lm.fixed_point_inverse_transform(Z, init=Nte[:100]), b, atol=1e-4)


def test_training_projections_have_the_centring_identities(digits):
    """In the approximate model too: transform of the training set equals
    fit_transform, has zero mean, and variance lambda / N."""
    Ntr, _, _ = digits
    X = Ntr[:400]
    m = KernelPCA(8, n_landmarks=100, gram_dtype="float64").fit(X)
    Z = m.transform(X)
    np.testing.assert_allclose(Z, m.fit_transform(X), atol=1e-10)
    np.testing.assert_allclose(Z.mean(axis=0), 0.0, atol=1e-10)
    np.testing.assert_allclose(Z.var(axis=0), m.eigenvalues_ / 400, rtol=1e-8)


@pytest.mark.parametrize("m,k,msg", [
    (2.5, 2, r"The 'n_landmarks' parameter of KernelPCA must be an int in the range \[1, inf\) "
             r"or None. Got 2.5 instead"),
    (True, 2, "n_landmarks must be None .* or an integer, got True"),
    ("10", 2, "The 'n_landmarks' parameter of KernelPCA must be .* Got '10' instead"),
    (0, 2, "The 'n_landmarks' parameter of KernelPCA must be .* Got 0 instead"),
    (3, 4, r"n_landmarks=3 is fewer than n_components=4; use n_landmarks >= 4 \(or n_landmarks=None"),
    (11, 2, r"n_landmarks=11 is more than the 10 training samples; use at most 10"),
])
def test_bad_n_landmarks(m, k, msg):
    X = np.random.default_rng(0).normal(size=(10, 4))
    with pytest.raises(ValueError, match=msg):
        KernelPCA(k, n_landmarks=m).fit(X)


def test_signs_and_landmarks_are_deterministic(digits):
    Ntr, _, Nte = digits
    X = Ntr[:500]
    a = KernelPCA(8, n_landmarks=100, random_state=3).fit(X)
    b = KernelPCA(8, n_landmarks=100, random_state=3).fit(X)
    np.testing.assert_array_equal(a.landmark_indices_, b.landmark_indices_)
    np.testing.assert_array_equal(a.eigenvectors_, b.eigenvectors_)
    np.testing.assert_array_equal(a.transform(Nte[:20]), b.transform(Nte[:20]))
    # the exact mode's rule: largest-magnitude entry of each eigenvector positive
    V = a.eigenvectors_
    assert np.all(V[np.argmax(np.abs(V), axis=0), np.arange(8)] > 0)
    idx = a.landmark_indices_
    assert idx.shape == (100,) and np.all(np.diff(idx) > 0) and 0 <= idx[0] and idx[-1] < 500
    np.testing.assert_array_equal(a.landmarks_, X[idx])
    c = KernelPCA(8, n_landmarks=100, random_state=4).fit(X)
    assert not np.array_equal(c.landmark_indices_, idx)


def test_rank_deficient_landmarks_are_guarded(rng):
    """Duplicated samples make K_mm singular: small eigenvalues are dropped,
    components beyond its rank are zero axes, nothing is Inf or NaN."""
    base = rng.normal(size=(3, 5))
    X = np.repeat(base, 10, axis=0)
    m = KernelPCA(5, gamma=0.1, n_landmarks=30, gram_dtype="float64").fit(X)
    assert m.landmark_rank_ == 3
    # 3 distinct points span 2 centred directions; the rest is round-off or padding
    assert np.all(m.eigenvalues_[2:] < 1e-12 * m.eigenvalues_[0]) and np.all(m.alphas_[:, 2:] == 0)
    Z = m.transform(rng.normal(size=(6, 5)))
    R = m.fixed_point_inverse_transform(Z, init=X[:6])
    assert np.all(np.isfinite(Z)) and np.all(np.isfinite(R)) and np.all(Z[:, 2:] == 0)


def test_params_repr_and_switching_modes(digits):
    Ntr, _, Nte = digits
    X = Ntr[:300]
    m = KernelPCA(4, n_landmarks=50)
    assert m.get_params()["n_landmarks"] == 50
    assert "n_landmarks=50" in repr(m) and "n_landmarks" not in repr(KernelPCA(4))
    assert KernelPCA(**m.get_params()).n_landmarks == 50
    m.fit(X)
    # back to exact mode on the same object: the landmark state is gone
    m.set_params(n_landmarks=None).fit(X)
    assert m.n_landmarks_ is None and not hasattr(m, "landmarks_")
    np.testing.assert_array_equal(m.transform(Nte[:10]), KernelPCA(4).fit(X).transform(Nte[:10]))


def test_progress_and_cancel(digits):
    Ntr, _, _ = digits
    events = []
    KernelPCA(8, n_landmarks=100, progress=events.append).fit(Ntr[:500])
    stages = [e.stage for e in events]
    assert {"gram", "eigensolver", "projection"} <= set(stages)
    gram = [e for e in events if e.stage == "gram"]
    assert gram[-1].done == gram[-1].total and all(e.done <= e.total for e in gram)

    tok = CancelToken()

    def cancel_after_basis(ev):
        if ev.stage == "gram" and ev.done >= 1:
            tok.cancel()

    with pytest.raises(Cancelled):
        KernelPCA(8, n_landmarks=100, progress=cancel_after_basis, cancel=tok).fit(Ntr[:500])
