"""Kernel PCA numerics: exact feature-space centring, eigensolvers, a fixed-point pre-image.

:class:`KernelPCACore` holds the numerics; the public scikit-learn compatible
estimator :class:`kpca_denoise.estimator.KernelPCA` (outside core, because it
inherits scikit-learn's ``BaseEstimator``) adds the estimator protocol on top.
Beyond scikit-learn the numerics report progress, can be cancelled, resolve
the RBF width from the data and the noise level (``gamma='noise'``), use
landmarks (Nyström) and invert the projection with the pre-image of Mika et
al. (1998).

References
----------
Schölkopf, Smola, Müller (1998), "Nonlinear component analysis as a kernel
eigenvalue problem", Neural Computation 10(5).
Mika et al. (1998), "Kernel PCA and de-noising in feature spaces", NIPS 11.
"""

from __future__ import annotations

import warnings

import numpy as np

from . import eigen
from .checks import is_number
from .kernels import KERNELS, centre_gram, kernel_matrix, rbf_gram
from .noise import estimate_sigma_pca
from .nystrom import LANDMARK_RTOL, fit_landmark_pca, landmark_weights, select_landmarks
from .preimage import PreimageStats, expansion_weights, preimage_fixed_point
from .progress import check_cancel, report

__all__ = ["KernelPCACore", "check_psd_eigenvalues", "rbf_width", "noise_eigenvalue", "WIDTH_SCALE_SAMPLES",
           "WIDTH_SCALE_IMAGE_PATCHES", "NOISE_RANK_KAPPA"]


#: Width scale c of :func:`rbf_width` for independent samples (digits-like
#: patch sets).  Measured on noisy digits (sigma 0.25 on [0, 1], 1000 noisy
#: training digits, 797 test digits; ``python -m benchmarks.gamma_rule``):
#: test MSE with 64 / 128 components 0.0266 / 0.0252 at c = 0.25,
#: 0.0198 / 0.0188 at c = 0.5, 0.0205 / 0.0197 at 0.75, 0.0221 / 0.0214 at 1,
#: 0.0359 / 0.0361 at 4 (scikit-learn's learned pre-image, best of 80: 0.0213).
WIDTH_SCALE_SAMPLES = 0.5
#: Width scale for overlapping patches of natural images, where wider kernels
#: win at low noise (256x256 camera crop, global method, rank 16, same script):
#: PSNR at c = 1 / 2 / 4 / 8 / 16: sigma 15: 25.49 / 26.38 / 27.11 / 27.74 / 28.07;
#: sigma 25: 25.01 / 25.68 / 26.03 / 26.14 / 25.97; sigma 50: 23.15 / 23.20 /
#: 22.60 / 22.30 / 22.06.  c = 8 is best on average over the three levels.
WIDTH_SCALE_IMAGE_PATCHES = 8.0


#: Multiple of the noise eigenvalue that a kernel principal component must
#: exceed to be kept by :meth:`KernelPCA.noise_rank`.  Measured on noisy digits
#: (``python -m benchmarks.noise_rank``): test MSE at noise 0.1 / 0.25 / 0.4 on
#: [0, 1] with kappa 1 / 1.5 / 2 / 3: 0.0069 / 0.0070 / 0.0072 / 0.0078,
#: 0.0190 / 0.0190 / 0.0198 / 0.0223, 0.0427 / 0.0413 / 0.0421 / 0.0400, against
#: 0.0088 / 0.0190 / 0.0414 for a fixed 128 components.
NOISE_RANK_KAPPA = 1.5


def noise_eigenvalue(kernel: str, gamma: float, sigma: float, d: int, n: int) -> float:
    """Eigenvalue that white noise of std ``sigma`` alone gives a centred Gram matrix.

    RBF: the diagonal of the Gram matrix stays 1 while noise shrinks every
    off-diagonal entry by ``E exp(-gamma |e_i - e_j|^2) = (1 + 4 gamma sigma^2)^(-d/2)``,
    so noise adds ``1 - (1 + 4 gamma sigma^2)^(-d/2)`` to every eigenvalue.
    Linear: the noise energy ``(n - 1) d sigma^2`` of n centred samples of dimension
    d spread over the ``min(d, n - 1)`` directions they span (``(n - 1) sigma^2`` when
    ``d < n``).  Other kernels: not defined (returns NaN).
    """
    if kernel == "rbf":
        return float(-np.expm1(-0.5 * d * np.log1p(4.0 * gamma * sigma * sigma)))
    if kernel == "linear":
        return float((n - 1) * d * sigma * sigma / max(min(d, n - 1), 1))
    return float("nan")


def rbf_width(X: np.ndarray, noise_sigma: float | None, *, scale: float = WIDTH_SCALE_SAMPLES,
              max_pairs: int = 20000, random_state: int | None = 0) -> float:
    """Kernel parameter ``gamma`` for the RBF kernel, from the data and the noise level.

    Noise adds about ``2 d sigma^2`` to every squared distance between two
    samples of dimension d.  The rule removes that inflation from the median
    squared distance before using it as the width:
    ``s2 = max(median ||x_i - x_j||^2 - 2 d sigma^2, 2 d sigma^2)`` and
    ``gamma = 1 / (c * s2)`` with the width scale ``c = scale``.  Plain median
    heuristics (``c = 1`` without the noise correction) gave noisy digits a
    kernel about 4x too wide; natural-image patches prefer wider kernels
    (``WIDTH_SCALE_IMAGE_PATCHES``).
    With ``noise_sigma=None`` sigma is estimated from the samples.
    """
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    rng = np.random.default_rng(random_state)
    m = min(max_pairs, n * (n - 1) // 2)
    i = rng.integers(0, n, m)
    j = rng.integers(0, n, m)
    keep = i != j
    d2 = np.einsum("ij,ij->i", X[i[keep]] - X[j[keep]], X[i[keep]] - X[j[keep]])
    med = float(np.median(d2)) if d2.size else 0.0
    if noise_sigma is None:
        noise_sigma = estimate_sigma_pca(X) if d >= 4 and n >= 2 else 0.0
    inflation = 2.0 * d * float(noise_sigma) ** 2
    s2 = max(med - inflation, inflation)
    if not np.isfinite(s2) or s2 <= 0:
        s2 = med if med > 0 else 1.0  # all samples identical: any width will do
    return 1.0 / (scale * s2)


#: Below this many samples the 'auto' Gram precision is float64: the Gram
#: matrix is cheap, and float64 matches scikit-learn to round-off.
AUTO_FLOAT32_MIN_N = 2000
#: float32 RBF Gram matrices are accurate while ``gamma * s2`` (s2: the mean
#: squared distance between samples, after centring the data) is at least
#: this; wider kernels make K ~ 1 - gamma d^2, whose informative part drowns
#: in float32 rounding of the 1, and 'auto' switches to float64 (an explicit
#: ``gram_dtype='float32'`` warns).  See ``KernelPCA`` for the measured bound.
FLOAT32_MIN_WIDTH_PRODUCT = 1e-2
#: The RBF kernel matrix counts as the identity (degenerate spectrum: every
#: sample orthogonal to every other) when its mean off-diagonal value is below this.
IDENTITY_KERNEL_LEVEL = 1e-10
#: The translation-invariant kernels: the data are centred before their Gram
#: matrix is formed (exact in real arithmetic, and it keeps float32 accurate
#: for data far from the origin).
SHIFT_KERNELS = ("rbf", "linear")

_SIGNIFICANT_NEG = {"float32": (5e-3, 1e-6), "float64": (1e-5, 1e-10)}
_SMALL_POS = {"float32": 2e-7, "float64": 1e-12}


def check_psd_eigenvalues(w: np.ndarray, dtype: str = "float64") -> np.ndarray:
    """Clip round-off in the eigenvalues of a centred Gram matrix, as scikit-learn.

    Same rule and messages as ``sklearn.utils.validation._check_psd_eigenvalues``
    (without its warnings): significant negative eigenvalues (below
    ``-5e-3 / -1e-5`` of the largest, per float32 / float64, and below
    ``-1e-6 / -1e-10``) raise; smaller negative ones and positive ones below
    ``2e-7 / 1e-12`` of the largest become 0.
    """
    w = np.array(w, dtype=np.float64)
    if w.size == 0:
        return w
    max_eig = w.max()
    if max_eig < 0:
        raise ValueError(
            f"All eigenvalues are negative (maximum is {max_eig:g}). Either the matrix is not "
            "PSD, or there was an issue while computing the eigendecomposition of the matrix."
        )
    neg_ratio, neg_value = _SIGNIFICANT_NEG[dtype]
    min_eig = w.min()
    if min_eig < -neg_ratio * max_eig and min_eig < -neg_value:
        raise ValueError(
            f"There are significant negative eigenvalues ({-min_eig / max_eig:g} of the maximum "
            "positive). Either the matrix is not PSD, or there was an issue while computing the "
            "eigendecomposition of the matrix."
        )
    w[w < 0] = 0.0
    w[(w > 0) & (w < _SMALL_POS[dtype] * max_eig)] = 0.0
    return w


def _int_seed(random_state) -> int:
    """An int seed for the width rule: the given int, else 0 (deterministic)."""
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        return int(random_state)
    return 0


class KernelPCACore:
    """The numerics of kernel PCA, without scikit-learn's estimator protocol.

    Not used on its own: the public, scikit-learn compatible
    :class:`kpca_denoise.estimator.KernelPCA` inherits these methods and its
    ``__init__`` sets the parameters read here (``n_components``, ``kernel``,
    ``gamma``, ``degree``, ``coef0``, ``noise_sigma``, ``width_scale``,
    ``eigen_solver``, ``tol``, ``max_iter``, ``remove_zero_eig``,
    ``gram_dtype``, ``random_state``, ``preimage_tol``, ``preimage_max_iter``,
    ``n_landmarks``, ``progress``, ``cancel``; see its docstring).  Inputs
    arrive validated: 2-D, finite, real, and a private copy.  Kernels other
    than the native ones (rbf, linear, poly, sigmoid) are evaluated by the
    hooks ``_foreign_gram`` / ``_foreign_cross`` that the subclass provides.
    """

    #: category of the warning when an iterative eigensolver stops at max_iter
    _convergence_warning: type = RuntimeWarning
    _default_tol = 1e-4

    # -- parameters -------------------------------------------------------
    def _native(self) -> bool:
        return isinstance(self.kernel, str) and self.kernel in KERNELS

    def _resolve_gamma(self, X: np.ndarray) -> float:
        n, d = X.shape
        g = self.gamma
        self.noise_sigma_ = None if self.noise_sigma is None else float(self.noise_sigma)
        if self.noise_sigma_ is not None and not (np.isfinite(self.noise_sigma_)
                                                  and self.noise_sigma_ >= 0):
            raise ValueError(f"noise_sigma must be >= 0 or None, got {self.noise_sigma!r}")
        if isinstance(g, str):
            if g != "noise":
                raise ValueError(
                    f"gamma must be a positive number, None (1/n_features, as scikit-learn) or "
                    f"'noise' (the noise-aware RBF width), got {g!r}")
            if self.kernel != "rbf":
                raise ValueError(f"gamma='noise' is the RBF width rule, but kernel={self.kernel!r}; "
                                 "use kernel='rbf' or give gamma as a number")
            if self.noise_sigma_ is None:
                self.noise_sigma_ = estimate_sigma_pca(X) if d >= 4 and n >= 2 else 0.0
            return rbf_width(X, self.noise_sigma_, scale=self.width_scale,
                             random_state=_int_seed(self.random_state))
        if g is None:
            return 1.0 / d
        if not is_number(g) or not np.isfinite(g) or g < 0 or (g == 0 and self.kernel == "rbf"):
            raise ValueError(f"gamma must be a positive finite number, None (1/n_features) or "
                             f"'noise', got {g!r}")
        return float(g)

    def _resolve_dtype(self, Xk: np.ndarray) -> np.dtype:
        """Gram precision: ``gram_dtype``, or for 'auto' by size and accuracy."""
        want = self.gram_dtype
        if want not in ("auto", "float32", "float64"):
            raise ValueError(f"gram_dtype must be 'auto', 'float32' or 'float64', got {want!r}")
        if want == "float64" or not self._native():
            return np.dtype(np.float64)
        n = Xk.shape[0]
        accurate = True
        if self.kernel == "rbf":
            s2 = 2.0 * float(np.einsum("ij,ij->", Xk, Xk, dtype=np.float64)) / max(n, 1)
            accurate = self.gamma_ * s2 >= FLOAT32_MIN_WIDTH_PRODUCT
        if want == "float32":
            if not accurate:
                warnings.warn(
                    f"gram_dtype='float32' is inaccurate for this wide kernel (gamma * mean "
                    f"squared distance = {self.gamma_ * s2:.2g} < {FLOAT32_MIN_WIDTH_PRODUCT:g}); "
                    "use gram_dtype='float64' or 'auto'", RuntimeWarning, stacklevel=4)
            return np.dtype(np.float32)
        use32 = self.kernel == "rbf" and n >= AUTO_FLOAT32_MIN_N and accurate
        return np.dtype(np.float32 if use32 else np.float64)

    # -- fitting ----------------------------------------------------------
    def _fit_core(self, X: np.ndarray) -> None:
        """Fit on a validated float array X (a private copy; for
        ``kernel='precomputed'`` the n x n kernel matrix)."""
        n = X.shape[0]
        self.X_fit_ = X
        self.gamma_ = self._resolve_gamma(X)
        k = self.n_components
        if k is not None and (not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1):
            raise ValueError(f"n_components must be None or an integer >= 1, got {k!r}")
        k = n if k is None else min(n, int(k))
        if self.eigen_solver not in eigen.SOLVERS:
            raise ValueError(f"eigen_solver must be one of {eigen.SOLVERS}, got {self.eigen_solver!r}")
        shift = self._native() and self.kernel in SHIFT_KERNELS
        Xk = np.asarray(X, dtype=np.float64)
        self._X_shift = Xk.mean(axis=0) if shift else None
        if shift:
            Xk = Xk - self._X_shift
        dt = self._resolve_dtype(Xk) if self._native() else np.dtype(np.float64)
        self.gram_dtype_ = dt.name
        self._X_kernel = np.ascontiguousarray(Xk, dtype=dt) if self._native() else None
        for name in ("landmarks_", "landmark_indices_", "landmark_mean_weights_",
                     "landmark_rank_", "landmark_eigenvalues_", "_landmark_offset", "_L_kernel"):
            self.__dict__.pop(name, None)
        self.n_landmarks_ = None
        if self.n_landmarks is not None:
            self._fit_landmarks(k)
            return
        if not self._native():
            K = np.array(self._foreign_gram(X), dtype=np.float64)
        elif self.kernel == "rbf":
            K = rbf_gram(self._X_kernel, self.gamma_, progress=self.progress, cancel=self.cancel)
        else:
            report(self.progress, "gram", 0, 1)
            K = kernel_matrix(self._X_kernel, self._X_kernel, self.kernel, gamma=self.gamma_,
                              degree=self.degree, coef0=self.coef0).astype(dt, copy=False)
            report(self.progress, "gram", 1, 1)
        check_cancel(self.cancel)
        # exact feature-space centring, in place (a precomputed K need not
        # be symmetric: its column and row means differ)
        self.K_fit_rows_, _, self.K_fit_all_ = centre_gram(K, symmetric=self._native())
        if self.kernel == "rbf" and n > 1 and (n * n * self.K_fit_all_ - n) / (n * (n - 1)) \
                < IDENTITY_KERNEL_LEVEL:
            raise ValueError(
                f"gamma={self.gamma_:g} is so large that the RBF kernel matrix is the identity "
                "(no two samples are similar): the spectrum is degenerate and no component is "
                "meaningful; use a smaller gamma, e.g. gamma=None (1/n_features) or 'noise'")
        w, V, info = eigen.eigh_top(
            K, k, solver=self.eigen_solver, tol=self._tol(), max_iter=self.max_iter,
            random_state=self.random_state, progress=self.progress, cancel=self.cancel,
            small_ops=self._small_ops,
        )
        del K
        self._set_spectrum(w, V, info, dt.name)

    def _small_ops(self):
        """Context for the eigensolver's small dense operations (see
        :func:`kpca_denoise.core.eigen.eigh_top`); the estimator limits BLAS
        threads there."""
        return eigen.nullcontext()

    def _tol(self) -> float:
        return self._default_tol if not self.tol else float(self.tol)

    def _set_spectrum(self, w, V, info, dtype_name) -> None:
        self.solver_ = info["solver"]
        self.n_iter_ = info["iterations"]
        if info.get("converged") is False and info.get("stalled"):
            warnings.warn(
                f"eigen_solver={self.solver_!r} stopped improving after {self.n_iter_} "
                f"iterations before reaching tol={self._tol():g} (the attainable accuracy "
                f"of a {dtype_name} Gram matrix); the eigenpairs are approximate: raise tol, "
                "use gram_dtype='float64' or eigen_solver='dense'",
                self._convergence_warning, stacklevel=4)
        elif info.get("converged") is False:
            warnings.warn(
                f"eigen_solver={self.solver_!r} stopped at max_iter={self.n_iter_} before "
                f"reaching tol={self._tol():g}; the eigenpairs are approximate: raise max_iter "
                "or use eigen_solver='dense'", self._convergence_warning, stacklevel=4)
        self.n_negative_eigenvalues_ = int((w < 0).sum())
        w = check_psd_eigenvalues(w, dtype_name)
        # deterministic signs: the largest-magnitude entry of each vector positive
        idx = np.argmax(np.abs(V), axis=0)
        signs = np.sign(V[idx, np.arange(V.shape[1])])
        signs[signs == 0] = 1.0
        V = V * signs
        order = np.argsort(w, kind="stable")[::-1]
        w, V = w[order], V[:, order]
        if self.remove_zero_eig or self.n_components is None:
            V, w = V[:, w > 0], w[w > 0]
        self.eigenvalues_ = w
        self.eigenvectors_ = V
        alphas = np.zeros_like(V)
        nz = w > 0  # zero eigenvalues give zero axes, not Inf
        alphas[:, nz] = V[:, nz] / np.sqrt(w[nz])
        self.alphas_ = alphas

    def _fit_landmarks(self, k: int) -> None:
        if not self._native():
            raise ValueError(f"n_landmarks needs a built-in kernel (rbf, linear, poly, sigmoid), "
                             f"got kernel={self.kernel!r}; use n_landmarks=None")
        X = self._X_kernel
        n = X.shape[0]
        m = self.n_landmarks
        if isinstance(m, bool) or not isinstance(m, (int, np.integer)):
            raise ValueError(f"n_landmarks must be None (exact kernel PCA) or an integer, got {m!r}")
        if m < k:
            raise ValueError(f"n_landmarks={m} is fewer than n_components={k}; use n_landmarks "
                             f">= {k} (or n_landmarks=None for exact kernel PCA)")
        if m > n:
            raise ValueError(f"n_landmarks={m} is more than the {n} training samples; use at most "
                             f"{n} (n_landmarks={n} equals exact kernel PCA) or n_landmarks=None")
        m = int(m)
        dt = X.dtype
        rs = self.random_state
        if isinstance(rs, np.random.RandomState):
            rs = int(rs.randint(np.iinfo(np.int32).max))
        idx = select_landmarks(n, m, rs)
        self._L_kernel = np.ascontiguousarray(X[idx])

        def kern(Y, Lk):
            return kernel_matrix(Y, Lk, self.kernel, gamma=self.gamma_, degree=self.degree,
                                 coef0=self.coef0)

        def gram(Lk):  # symmetric RBF Gram with an exact unit diagonal, as the exact mode
            return rbf_gram(Lk, self.gamma_) if self.kernel == "rbf" else kern(Lk, Lk)

        fit = fit_landmark_pca(
            X, self._L_kernel, kern, k, gram=gram, dtype=dt, rtol=LANDMARK_RTOL[dt.name],
            eigen_solver=self.eigen_solver, tol=self._tol(), max_iter=self.max_iter,
            random_state=self.random_state, progress=self.progress, cancel=self.cancel,
        )
        w, Z = fit["eigenvalues"], fit["projections"]
        # the exact mode's sign rule on the N-vector eigenvectors Z / sqrt(w):
        # largest-magnitude entry positive (so m = N reproduces its signs)
        idx_max = np.argmax(np.abs(Z), axis=0)
        signs = np.sign(Z[idx_max, np.arange(Z.shape[1])])
        signs[signs == 0] = 1.0
        nz = w > max(w.max(initial=0.0), 0.0) * 1e-12
        V = np.zeros_like(Z)
        V[:, nz] = Z[:, nz] / np.sqrt(w[nz])
        alphas = fit["alphas"] * signs
        alphas[:, ~nz] = 0.0
        self.eigenvalues_ = np.where(nz, w, 0.0)
        self.eigenvectors_ = V * signs
        self.alphas_ = alphas
        self._landmark_offset = np.where(nz, fit["offset"] * signs, 0.0)
        self.landmark_mean_weights_ = fit["mean_weights"]
        self.landmarks_ = np.ascontiguousarray(self.X_fit_[idx], dtype=np.float64)
        self.landmark_indices_ = idx
        self.landmark_rank_ = fit["rank"]
        self.landmark_eigenvalues_ = fit["landmark_eigenvalues"]
        self.K_fit_rows_ = fit["row_means"]
        self.K_fit_all_ = fit["mean_all"]
        self.solver_ = fit["solver"]
        self.n_iter_ = fit["iterations"]
        self.n_negative_eigenvalues_ = fit["n_negative"]
        self.n_landmarks_ = m

    def noise_rank(self, sigma: float | None = None, kappa: float = NOISE_RANK_KAPPA) -> int:
        """Return the number of components that stand above the noise.

        Number of fitted components whose eigenvalue exceeds ``kappa`` times the
        noise eigenvalue (:func:`noise_eigenvalue`) at noise std ``sigma``
        (default: ``noise_sigma_``, given or estimated at fit), at least 1.

        This is the automatic rank for patch sets: it keeps many components
        when the noise is low (where a fixed rank averages detail away) and
        few when it is high.  Raises ValueError for kernels without a noise
        model (poly, sigmoid) or when no noise level is known.
        """
        self._check_fitted()
        s = self.noise_sigma_ if sigma is None else float(sigma)
        if s is None or not np.isfinite(s) or s < 0:
            raise ValueError("noise_rank needs the noise level: pass sigma or fit with noise_sigma")
        if self.kernel not in ("rbf", "linear"):
            raise ValueError(f"noise_rank has no noise model for kernel={self.kernel!r}; "
                             "use kernel='rbf' or 'linear'")
        n, d = self.X_fit_.shape
        tau = noise_eigenvalue(self.kernel, self.gamma_, s, d, n)
        return max(1, int(np.count_nonzero(self.eigenvalues_ > kappa * tau)))

    # -- projection -------------------------------------------------------
    def _kernel_input(self, Y: np.ndarray) -> np.ndarray:
        Y = Y - self._X_shift if self._X_shift is not None else Y
        return np.ascontiguousarray(Y, dtype=self._X_kernel.dtype)

    def _centred_kernel(self, Y: np.ndarray) -> np.ndarray:
        if self._native():
            Kt = kernel_matrix(self._kernel_input(Y), self._X_kernel, self.kernel,
                               gamma=self.gamma_, degree=self.degree, coef0=self.coef0)
        else:
            Kt = np.array(self._foreign_cross(Y), dtype=np.float64)
        # centre with the training means: k~(y, x_j) = k(y, x_j) - mean_i k(x_i, x_j)
        #   - mean_i k(y, x_i) + mean_ij k(x_i, x_j)
        row_means = Kt.mean(axis=1, keepdims=True)
        Kt -= self.K_fit_rows_.astype(Kt.dtype)[None, :]
        Kt -= row_means
        Kt += Kt.dtype.type(self.K_fit_all_)
        return Kt

    def _transform_core(self, X: np.ndarray, n_components: int | None = None,
                        block: int = 4096) -> np.ndarray:
        """Projections (float64) of validated X onto the leading components."""
        kmax = self.alphas_.shape[1]
        if n_components is not None and (isinstance(n_components, bool) or not isinstance(
                n_components, (int, np.integer))):
            raise ValueError(f"n_components must be an integer in [1, {kmax}], got "
                             f"{n_components!r}")
        k = kmax if n_components is None else int(n_components)
        if not 0 <= k <= kmax or (n_components is not None and k < 1):
            raise ValueError(f"n_components must be in [1, {kmax}], got {n_components}")
        m = X.shape[0]
        Z = np.empty((m, k))
        landmark = self.n_landmarks_ is not None
        report(self.progress, "projection", 0, m)
        for s in range(0, m, block):
            check_cancel(self.cancel)
            e = min(s + block, m)
            if landmark:
                # z = (phi~(x) - mu) . E = k_m(x) alphas - mu . E; the product
                # in float64: alphas carries S^{-1/2}, so float32 would cancel
                Kt = kernel_matrix(self._kernel_input(X[s:e]), self._L_kernel, self.kernel,
                                   gamma=self.gamma_, degree=self.degree, coef0=self.coef0)
                Z[s:e] = Kt.astype(np.float64) @ self.alphas_[:, :k] - self._landmark_offset[:k]
            else:
                Kt = self._centred_kernel(X[s:e])
                Z[s:e] = Kt @ self.alphas_[:, :k].astype(Kt.dtype)
            report(self.progress, "projection", e, m)
        return Z

    # -- pre-image ----------------------------------------------------------
    def fixed_point_inverse_transform(self, Z, init=None) -> np.ndarray:
        """Return the denoising pre-images of projections Z by a fixed point.

        Pre-images of projections Z (m, r), r <= n_components, by the fixed
        point of Mika et al. (1998) -- the denoising pre-image.

        Unlike :meth:`inverse_transform` (scikit-learn's learned ridge map,
        needs ``fit_inverse_transform=True``), nothing is learned: each
        pre-image minimises ``||Phi(z) - P Phi(x)||^2`` in feature space.

        RBF: the fixed-point iteration, started from ``init`` (e.g. the noisy
        inputs, or the learned map's output) when given, else from the
        input-space expansion; see :mod:`kpca_denoise.core.preimage`.
        ``linear``: exact (``mean + Z @ axes``).  Other kernels have no
        fixed-point pre-image here (ValueError).  Statistics of the last call
        are in ``preimage_stats_``.
        """
        self._check_fitted()
        Z = np.asarray(Z, dtype=np.float64)
        kmax = self.alphas_.shape[1]
        if kmax == 0 or not np.any(self.eigenvalues_ > 0):
            raise ValueError("the model has no component with a positive eigenvalue (all "
                             "training samples look alike to the kernel), so there is nothing "
                             "to project on; check gamma and the training data")
        if Z.ndim != 2 or not 1 <= Z.shape[1] <= kmax:
            raise ValueError(f"Z must have shape (m, r) with 1 <= r <= {kmax}, got {Z.shape}")
        if not np.all(np.isfinite(Z)):
            raise ValueError("Z contains NaN or Inf values")
        r = Z.shape[1]
        if self.n_landmarks_ is not None:
            # the projection is an expansion over the landmarks (kpca_denoise/core/nystrom.py)
            W = landmark_weights(Z, self.alphas_[:, :r], self.landmark_mean_weights_,
                                 normalise=self.kernel != "linear")
            points = self.landmarks_
        else:
            W = expansion_weights(Z, self.alphas_[:, :r])
            points = np.asarray(self.X_fit_, dtype=np.float64)
        if self.kernel == "linear":
            # Phi is the identity on the centred data: the expansion (over the
            # centred points, whose weights need not sum to 1 with landmarks)
            # plus the shift is the pre-image
            self.preimage_stats_ = PreimageStats(n_points=Z.shape[0])
            return W @ (points - self._X_shift) + self._X_shift
        if self.kernel != "rbf":
            raise ValueError(
                f"no fixed-point pre-image for kernel={self.kernel!r}: it needs kernel='rbf' (or "
                "'linear'); for other kernels use fit_inverse_transform=True and inverse_transform")
        if init is not None:
            init = np.asarray(init, dtype=np.float64)
            if init.shape != (Z.shape[0], points.shape[1]):
                raise ValueError(f"init must be an array of shape "
                                 f"{(Z.shape[0], points.shape[1])}, got {init.shape}")
            if not np.all(np.isfinite(init)):
                raise ValueError("init holds NaN or infinite values; give finite starting points")
        out, stats = preimage_fixed_point(
            W, points, self.gamma_, init=init, tol=self.preimage_tol,
            max_iter=self.preimage_max_iter, progress=self.progress, cancel=self.cancel,
        )
        self.preimage_stats_ = stats
        return out
