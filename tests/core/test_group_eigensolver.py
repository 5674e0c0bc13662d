"""The grouped core's per-group solvers.  The eigensolver for the pairs above a
floor: an exact count (the inertia of ``Kc - floor I``), then Lanczos for that many
pairs; it must give what a full LAPACK decomposition gives, also where Lanczos is hard
(a repeated eigenvalue, a rank-deficient matrix, an eigenvalue just above the floor).
The Gram's vectorised exp."""

import numpy as np
import pytest

from kpca_denoise.core.grouped.group_pca import LANCZOS_TOL, count_above, lanczos_top


def _psd(rng, n, spectrum):
    Q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    return (Q * np.asarray(spectrum)) @ Q.T


@pytest.mark.parametrize("floor", [0.05, 0.5, 2.0, 50.0])
def test_the_count_is_the_number_of_eigenvalues_above_the_floor(floor):
    rng = np.random.default_rng(0)
    for _ in range(50):
        A = _psd(rng, 40, rng.exponential(1.0, 40) ** 3)
        want = int((np.linalg.eigvalsh(A) > floor).sum())
        assert count_above(A, floor, np.empty((40, 40))) == want


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 31, 32, 33])
def test_the_count_takes_its_pivots_four_at_a_time_at_any_size(n):
    # the pivots go in blocks of four: sizes that leave 0 to 3 rows in the last block,
    # and a floor at one of the eigenvalues (a zero pivot counts as not above it)
    rng = np.random.default_rng(n)
    for trial in range(40):
        w = rng.exponential(1.0, n) ** 2
        A = _psd(rng, n, w)
        A = (A + A.T) / 2
        ev = np.linalg.eigvalsh(A)
        floor = float(rng.choice([0.3, 1.0, 3.0]))
        if np.abs(ev - floor).min() < 1e-8 * max(ev.max(), 1.0):
            continue
        assert count_above(A, floor, np.empty((n, n))) == int((ev > floor).sum())
    A = np.diag(np.arange(1.0, n + 1))  # an eigenvalue at the floor: a zero pivot
    assert count_above(A, float(n), np.empty((n, n))) == 0
    assert count_above(A, 1.0, np.empty((n, n))) == n - 1


@pytest.mark.parametrize("spectrum", [
    "decaying", "repeated", "rank 3", "just above the floor"])
def test_lanczos_gives_the_leading_pairs(spectrum):
    rng = np.random.default_rng(1)
    n, floor = 32, 0.1
    s = {"decaying": 10.0 * 0.6 ** np.arange(n),
         "repeated": np.r_[5.0, 5.0, 5.0, 1.0, 1.0, 0.05 * rng.random(n - 5)],
         "rank 3": np.r_[3.0, 2.0, 1.0, np.zeros(n - 3)],
         "just above the floor": np.r_[4.0, 1.0, floor * (1 + 1e-4), 0.09 * rng.random(n - 3)],
         }[spectrum]
    A = _psd(rng, n, s)
    A = (A + A.T) / 2
    k = count_above(A, floor, np.empty((n, n)))
    assert k == int((np.sort(s) > floor).sum())
    lam, V = np.empty(n), np.empty((n, n))
    assert lanczos_top(A, k, floor, LANCZOS_TOL, lam, V) > 0
    w, U = np.linalg.eigh(A)
    w, U = w[::-1], U[:, ::-1]
    np.testing.assert_allclose(lam[:k], w[:k], rtol=0, atol=1e-6 * w[0])
    assert (lam[k:] == 0).all() and (V[:, k:] == 0).all()
    # orthonormal eigenvectors spanning the same subspace (a repeated eigenvalue has
    # no unique basis): A V = V diag(lam), and the projectors agree
    Vk = V[:, :k]
    np.testing.assert_allclose(Vk.T @ Vk, np.eye(k), atol=1e-8)
    np.testing.assert_allclose(A @ Vk, Vk * lam[:k], atol=1e-5 * w[0])
    np.testing.assert_allclose(Vk @ Vk.T, U[:, :k] @ U[:, :k].T, atol=1e-4)


def test_an_exactly_repeated_eigenvalue_gets_all_its_pairs():
    # a Krylov space holds one vector per distinct eigenvalue in exact arithmetic: with
    # the block matrix diag(B, B) every eigenvalue is double; the pairs must all come
    # back (rounding lets Lanczos find the second copies; if it met an invariant
    # subspace instead, the full solver would take over)
    from kpca_denoise.core.grouped.group_pca import fit_groups

    rng = np.random.default_rng(2)
    B = _psd(rng, 16, np.r_[4.0, 2.0, 1.0, 0.01 * rng.random(13)])
    A = np.kron(np.eye(2), B)
    assert count_above(A, 0.5, np.empty((32, 32))) == 6
    # a linear kernel whose centred Gram is A (A has the constant vector in its null
    # space after centring: centre it first)
    C = np.eye(32) - 1.0 / 32
    A = C @ A @ C
    w, U = np.linalg.eigh(A)
    P = (U * np.sqrt(np.clip(w, 0, None)))[None]
    lam, V, _ = fit_groups(P, False, 1.0, 0.5)
    want = np.sort(w)[::-1][:6]
    np.testing.assert_allclose(lam[0, :6], want, atol=1e-6 * want[0])
    assert (lam[0, 6:] == 0).all()
    np.testing.assert_allclose(A @ V[0, :, :6], V[0, :, :6] * lam[0, :6], atol=1e-5)
    np.testing.assert_allclose(V[0, :, :6].T @ V[0, :, :6], np.eye(6), atol=1e-6)


@pytest.mark.parametrize("floor", [0.0, 1e-3])
def test_every_eigenvector_has_its_largest_entry_positive_whatever_the_solver(floor):
    """The signs are fixed (house rule): LAPACK's full decomposition (floor 0) and the
    counted Lanczos pairs (floor > 0) both turn each vector to a positive largest entry,
    and the two agree on the pairs above the floor."""
    from kpca_denoise.core.grouped.group_pca import fit_groups

    rng = np.random.default_rng(3)
    P = rng.normal(size=(40, 16, 25)) * 0.2
    lam, V, _ = fit_groups(P, True, 0.5, floor)
    full_lam, full_V, _ = fit_groups(P, True, 0.5, 0.0)
    for r in range(P.shape[0]):
        for k in range(P.shape[1]):
            v = V[r, :, k]
            if np.abs(v).max() > 0:
                assert v[np.argmax(np.abs(v))] > 0
                if lam[r, k] > 1e-2 * lam[r, 0]:  # a well separated pair: the same vector
                    np.testing.assert_allclose(v, full_V[r, :, k], atol=2e-3)


def test_the_vectorised_exp_is_within_two_units_in_the_last_place():
    """The Gram's exp (:func:`kernels.exp_nonpositive`) against numpy's, over the
    exponents a kernel meets (down to where exp leaves the normal range, -708)."""
    from numba import njit

    from kpca_denoise.core.kernels import exp_nonpositive

    @njit
    def run(x):
        exp_nonpositive(x, np.empty(len(x)), np.empty(len(x), np.int64))

    rng = np.random.default_rng(4)
    x = -np.concatenate([rng.exponential(2.0, 20000), np.linspace(0.0, 708.0, 7081), [0.0]])
    got = x.copy()
    run(got)
    want = np.exp(x)
    assert np.all(np.abs(got - want) <= 2 * np.spacing(want))
    below = np.array([-709.0, -1e4, -np.inf])
    run(below)
    np.testing.assert_allclose(below, np.exp(-708.0), rtol=1e-15)

