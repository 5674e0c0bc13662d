"""Top-k symmetric eigensolvers for (centred) Gram matrices.

``eigh_top`` offers a dense LAPACK solve of the top k eigenpairs, ARPACK
(``scipy.sparse.linalg.eigsh``), a block subspace iteration with
Rayleigh-Ritz (``'randomized'``) and a block LOBPCG without preconditioner
(``'lobpcg'``, Knyazev 2001).  The iterative solvers need only matrix
products with K in K's own precision (a float32 K is multiplied in float32),
report their current Ritz values after every iteration (so a plot can show
the spectrum converging) and check a cancel token between iterations.

``'auto'`` chooses by cost (:func:`choose_solver`): dense when the matrix is
small or k is a large fraction of n; otherwise LOBPCG with an iteration
budget worth about one dense solve, falling back to the dense solve when the
spectrum is so flat that LOBPCG has not converged within that budget.
"""

from __future__ import annotations

from typing import Any, Callable, ContextManager

import numpy as np
import scipy.linalg
import scipy.sparse.linalg

from .progress import ProgressCallback, check_cancel, report

class nullcontext:  # noqa: N801 - contextlib's name; core imports only numpy/scipy/numba
    """A context manager that does nothing (the default ``small_ops``)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


__all__ = ["eigh_top", "choose_solver", "lobpcg_budget", "AUTO_DENSE_MAX_N", "SOLVERS"]

SOLVERS = ("auto", "dense", "arpack", "randomized", "lobpcg")

#: 'auto' uses the dense solver up to this many samples.  Measured on a quiet
#: 2-core machine (``python -m benchmarks.speed --only solvers``, k = 32,
#: tol 1e-4, float32 Gram), dense / LOBPCG time: flat spectrum 0.3, 0.8, 1.3,
#: 1.8, 9.5, 10.9 at n = 600, 1000, 1500, 2000, 3000, 4000; noisy digits 0.6,
#: 0.4, 1.0, 1.2 at n = 600, 1000, 1500, 1797.  The break-even is at 1000-1500.
AUTO_DENSE_MAX_N = 1200

#: LOBPCG iterations that cost about as much as one dense top-k solve, per
#: n / b (b the block size): a dense solve is ~ (4/3) n^3 float64 flops, one
#: LOBPCG iteration ~ 2 n^2 b in K's precision plus O(n b^2).  Measured with
#: the same command: one dense solve took the time of 11 LOBPCG iterations at
#: n = 2000 (n / b = 50), 13 at n = 1797 (45), 66 at n = 4000 (100), i.e.
#: 0.2-0.66 n / b.  0.5 n / b leaves room for the 6-11 iterations these
#: spectra need, and only a spectrum too flat for LOBPCG spends it all before
#: the dense solve takes over.
DENSE_COST_IN_ITERATIONS = 0.5


def _block(n: int, k: int) -> int:
    return min(n, k + max(8, k // 4))


def choose_solver(n: int, k: int) -> str:
    """The rule behind ``eigen_solver='auto'``: ``'dense'`` or ``'lobpcg'``.

    Dense LAPACK (``scipy.linalg.eigh`` restricted to the top k) when
    ``n <= AUTO_DENSE_MAX_N`` or the LOBPCG basis (3 blocks of
    ``k + max(8, k // 4)`` columns) would be more than a fifth of n; otherwise
    LOBPCG, capped at :func:`lobpcg_budget` iterations, after which the dense
    solve takes over (``info['solver'] == 'lobpcg+dense'``).
    """
    if n <= AUTO_DENSE_MAX_N or 15 * _block(n, k) > n:
        return "dense"
    return "lobpcg"


def lobpcg_budget(n: int, k: int) -> int:
    """Iteration cap of 'auto' LOBPCG: about the cost of half a dense solve."""
    return max(10, int(DENSE_COST_IN_ITERATIONS * n / _block(n, k)))


def _seed(random_state):
    """numpy Generator from None / int / RandomState / Generator."""
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(np.iinfo(np.int32).max))
    return np.random.default_rng(random_state)


def eigh_top(
    K: np.ndarray,
    k: int,
    *,
    solver: str = "auto",
    tol: float = 1e-6,
    max_iter: int | None = None,
    random_state: Any = 0,
    progress: ProgressCallback | None = None,
    cancel: Any = None,
    small_ops: Callable[[], ContextManager] = nullcontext,
) -> tuple[np.ndarray, np.ndarray, dict]:
    """Leading k eigenpairs of a symmetric matrix.

    Returns ``(eigenvalues (k,), eigenvectors (n, k) orthonormal columns, info)``
    with ``info = {'solver': str, 'iterations': int}`` and, for an iterative
    solver stopped by ``max_iter``, ``info['converged'] = False``.  Values are
    float64, eigenvalues descending.  'dense', 'arpack' and 'lobpcg' return
    the k algebraically largest eigenvalues; 'randomized' (subspace
    iteration) the k largest in magnitude, as scikit-learn's randomized
    solver does, so that an indefinite matrix shows its negative eigenvalues.
    ``tol`` is the iterative solvers' stopping rule: every Ritz residual
    ``||K u - theta u|| <= tol * |lambda_1|`` (ARPACK: its own relative rule,
    0 meaning machine precision).  ``small_ops``: a context manager factory
    entered around the iterative solvers' small dense operations (all but the
    products with K), e.g. one limiting BLAS to one thread: on a loaded
    2-core machine multi-threaded BLAS made them 3x slower.
    """
    n = K.shape[0]
    if not 1 <= k <= n:
        raise ValueError(f"k must be in [1, {n}], got {k}")
    budget_fallback = False
    if solver == "auto":
        solver = choose_solver(n, k)
        if solver == "lobpcg" and max_iter is None:
            max_iter, budget_fallback = lobpcg_budget(n, k), True
    if solver == "lobpcg" and 3 * _block(n, k) > n:
        solver = "dense"  # the block would cover the space: dense is exact and cheaper
    if solver == "dense":
        return _dense(K, k, progress, cancel)
    if solver == "arpack":
        report(progress, "eigensolver", 0, 1)
        check_cancel(cancel)
        v0 = _seed(random_state).uniform(-1, 1, n)
        w, V = scipy.sparse.linalg.eigsh(
            K if K.dtype in (np.float32, np.float64) else np.asarray(K, dtype=np.float64),
            k=k, which="LA", tol=tol, v0=v0.astype(K.dtype, copy=False), maxiter=max_iter,
        )
        order = np.argsort(w)[::-1]
        w, V = w[order].astype(np.float64), V[:, order].astype(np.float64)
        report(progress, "eigensolver", 1, 1, eigenvalues=w)
        return w, V, {"solver": "arpack", "iterations": 1}
    if solver == "randomized":
        return _subspace_iteration(K, k, tol, max_iter, random_state, progress, cancel, small_ops)
    if solver == "lobpcg":
        w, V, info = _lobpcg(K, k, tol, max_iter, random_state, progress, cancel, small_ops)
        if budget_fallback and info.get("converged") is False:
            w, V, dinfo = _dense(K, k, progress, cancel)
            info = {"solver": "lobpcg+dense", "iterations": info["iterations"]}
        return w, V, info
    raise ValueError(
        f"unknown eigen_solver {solver!r}; use one of {', '.join(map(repr, SOLVERS))}"
    )


def _dense(K, k, progress, cancel):
    n = K.shape[0]
    report(progress, "eigensolver", 0, 1)
    check_cancel(cancel)
    w, V = scipy.linalg.eigh(np.asarray(K, dtype=np.float64), subset_by_index=[n - k, n - 1])
    w, V = w[::-1].copy(), V[:, ::-1].copy()
    report(progress, "eigensolver", 1, 1, eigenvalues=w)
    return w, V, {"solver": "dense", "iterations": 1}


def _matmul(K, Q):
    """K @ Q in K's precision, returned in float64."""
    dt = K.dtype if K.dtype in (np.float32, np.float64) else np.dtype(np.float64)
    return np.asarray(K @ Q.astype(dt, copy=False), dtype=np.float64)


def _subspace_iteration(K, k, tol, max_iter, random_state, progress, cancel,
                        small_ops=nullcontext):
    n = K.shape[0]
    p = min(n - k, max(10, k // 2))  # oversampling
    max_iter = 200 if max_iter is None else int(max_iter)
    rng = _seed(random_state)
    Q = _orthonormalize(rng.standard_normal((n, k + p)))
    report(progress, "eigensolver", 0, max_iter)
    it = 0
    for it in range(1, max_iter + 1):
        check_cancel(cancel)
        Y = _matmul(K, Q)
        with small_ops():
            # Rayleigh-Ritz on span(Q): B = Q^T K Q (small, float64)
            B = _tdot(Q, Y)
            B = 0.5 * (B + B.T)
            C = _tdot(Y, Y)
            theta, S = np.linalg.eigh(B)
            # the k largest in magnitude (scikit-learn's selection='module');
            # reversed views have negative strides, which numpy's matmul does not
            # hand to BLAS: keep everything C-contiguous
            order = np.argsort(np.abs(theta), kind="stable")[::-1]
            theta, S = theta[order], np.ascontiguousarray(S[:, order])
            w = theta[:k]
            # residual of Ritz pair (theta, u = Q s) without forming it:
            # ||K u - theta u||^2 = s^T (Y^T Y) s - theta^2   (Q orthonormal, |s| = 1)
            Sk = S[:, :k]
            res2 = np.einsum("ij,ij->j", Sk, C @ Sk) - w**2
            res = np.sqrt(np.maximum(res2, 0.0)) / max(abs(theta[0]), np.finfo(float).tiny)
            report(progress, "eigensolver", it, max_iter, eigenvalues=np.sort(w)[::-1])
            if res.max() <= tol or it == max_iter:
                break
            # next basis: orthonormal span of Y = K Q, reusing Y^T Y for the first
            # Cholesky-QR pass
            Q = _orthonormalize(Y, gram=C)
    info = {"solver": "randomized", "iterations": it}
    if res.max() > tol:
        info["converged"] = False
    order = np.argsort(w, kind="stable")[::-1]
    return w[order].copy(), Q @ Sk[:, order], info


def _lobpcg(K, k, tol, max_iter, random_state, progress, cancel, small_ops=nullcontext):
    """Block LOBPCG (no preconditioner) for the k algebraically largest eigenpairs.

    Rayleigh-Ritz on span[X, R, P] (current Ritz vectors, their residuals,
    the previous update), whitened by the basis Gram matrix
    (:func:`_lobpcg_step`), with soft locking of converged pairs.  Only
    ``K @ R`` touches K: the products with X and P are updated by the same
    small combinations as the blocks themselves.  Converges much faster than
    subspace iteration on flat spectra (the rate depends on the square root
    of the gap ratio), which is where the latter needed 50-90 iterations.

    Those implicit updates limit the attainable residual: measured, it bottoms
    out at 3e-6 to 1.2e-5 of lambda_1 with a float32 K and about 1e-8 with a
    float64 K, and iterating on past that floor diverges.  So the iteration
    keeps the best iterate seen and returns it, flagged unconverged, when the
    residual has not improved for ``_STALL`` iterations or has grown tenfold.
    """
    n = K.shape[0]
    b = _block(n, k)
    max_iter = 200 if max_iter is None else int(max_iter)
    rng = _seed(random_state)
    X = _orthonormalize(rng.standard_normal((n, b)))
    KX = _matmul(K, X)
    theta, S = _ritz(_tdot(X, KX))
    X, KX = X @ S, KX @ S
    P = KP = None
    report(progress, "eigensolver", 0, max_iter)
    it, res = 0, np.full(k, np.inf)
    best = (np.inf, 0, theta[:k].copy(), X[:, :k].copy())
    scale = max(abs(theta[0]), np.finfo(float).tiny)
    for it in range(1, max_iter + 1):
        check_cancel(cancel)
        with small_ops():
            R = KX - X * theta
            res_all = np.sqrt(np.einsum("ij,ij->j", R, R)) / scale
            res = res_all[:k]
            report(progress, "eigensolver", it, max_iter, eigenvalues=theta[:k].copy())
            if res.max() < best[0]:
                best = (res.max(), it, theta[:k].copy(), X[:, :k].copy())
            if res.max() <= tol or it == max_iter:
                break
            if it - best[1] >= _STALL or res.max() > 10 * best[0]:
                break  # at the attainable floor: return the best iterate
            # soft locking: converged pairs keep their place in X but get no
            # search directions; at round-off level those directions are noise
            # and made the iteration diverge if it went on past convergence
            active = np.ones(b, dtype=bool)
            active[:k] = res > tol
            R = R[:, active]
            if P is not None:
                P, KP = P[:, active], KP[:, active]
            # X's own direction removed, then unit columns (no orthonormalisation:
            # the step whitens the whole basis)
            R = _project_out(R, X)
            rn = np.sqrt(np.einsum("ij,ij->j", R, R))
            R = R / np.where(rn > 0, rn, 1.0)
        KR = _matmul(K, R)
        with small_ops():
            X, KX, P, KP, theta = _lobpcg_step(X, KX, R, KR, P, KP, b)
        scale = max(abs(theta[0]), np.finfo(float).tiny)
    info = {"solver": "lobpcg", "iterations": it}
    res_best, _, w, V = best
    if res_best > tol:
        info["converged"] = False
        info["stalled"] = it < max_iter
    return w, np.ascontiguousarray(V), info


#: LOBPCG stops when its residual has not improved for this many iterations.
_STALL = 6


def _lobpcg_step(X, KX, R, KR, P, KP, b):
    """One Rayleigh-Ritz on span[X, R, P]; returns the new X, KX, P, KP, theta.

    The basis is not assumed orthonormal: near convergence R and P are tiny
    and almost inside span(X), and re-orthonormalising them amplified
    round-off until the Ritz values were garbage (an eigenvalue error of 1e8
    after 20 iterations past convergence, measured on noisy digits).  The
    small problem is whitened with the eigen-decomposition of the basis Gram
    matrix instead, dropping directions it cannot resolve.
    """
    blocks, kblocks = [X, R], [KX, KR]
    if P is not None:
        norms = np.sqrt(np.einsum("ij,ij->j", P, P))
        ok = norms > 0
        blocks.append(P[:, ok] / norms[ok])
        kblocks.append(KP[:, ok] / norms[ok])
    B = np.concatenate(blocks, axis=1)
    KB = np.concatenate(kblocks, axis=1)
    M = _tdot(B, B)
    s, U = np.linalg.eigh(0.5 * (M + M.T))
    keep = s > _WHITEN_RCOND * s[-1]
    T = U[:, keep] / np.sqrt(s[keep])
    theta_all, S = _ritz(T.T @ _tdot(B, KB) @ T)
    C = T @ S[:, :b]
    theta = theta_all[:b]
    nx = X.shape[1]
    return B @ C, KB @ C, B[:, nx:] @ C[nx:], KB[:, nx:] @ C[nx:], theta


#: Basis directions whose Gram eigenvalue is below this fraction of the
#: largest are dropped from LOBPCG's Rayleigh-Ritz (the basis has unit
#: columns, so this bounds the whitening's amplification of round-off to 1e5).
_WHITEN_RCOND = 1e-10


def _ritz(G):
    """Eigenpairs of a small symmetric matrix, eigenvalues descending."""
    theta, S = np.linalg.eigh(0.5 * (G + G.T))
    return theta[::-1].copy(), np.ascontiguousarray(S[:, ::-1])


def _project_out(R, X):
    """R minus its component in span(X) (orthonormal X), twice for stability."""
    for _ in range(2):
        R = R - X @ _tdot(X, R)
    return R


def _orthonormalize(Y: np.ndarray, gram: np.ndarray | None = None) -> np.ndarray:
    """Orthonormal basis of the columns of a tall matrix (float64).

    Cholesky-QR applied twice (CholeskyQR2): two GEMMs and a tiny Cholesky.
    Householder QR on a tall-skinny block is a chain of level-2 BLAS calls
    that was 100x slower here on a busy 2-core machine.  Falls back to
    Householder QR when the Gram matrix is not numerically positive definite.
    """
    Q = np.asarray(Y, dtype=np.float64)
    for i in range(2):
        G = gram if (i == 0 and gram is not None) else _tdot(Q, Q)
        try:
            R = np.linalg.cholesky(G).T
        except np.linalg.LinAlgError:
            return np.linalg.qr(Q)[0]
        # Q R = Y  ->  Q = Y R^-1 ; R is small and well conditioned after the check
        Q = Q @ scipy.linalg.solve_triangular(R, np.eye(R.shape[0]))
    return Q


def _tdot(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``A.T @ B`` for tall-skinny A, B, without BLAS: multi-threaded OpenBLAS
    took 50-100x longer than this single-threaded loop on such products on a
    loaded 2-core machine (measured: 100 ms against 2.5 ms for 3000 x 42)."""
    return np.einsum("ki,kj->ij", A, B)
