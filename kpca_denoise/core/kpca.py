"""Kernel PCA with exact feature-space centring and a fixed-point pre-image.

The estimator follows scikit-learn's contract (``sklearn.decomposition.KernelPCA``):
``__init__`` only stores parameters, ``fit`` validates and returns ``self``,
learned attributes end in ``_``.  Unlike scikit-learn it reports progress,
can be cancelled, resolves the RBF width from the data and the noise level,
and inverts the projection with the pre-image of Mika et al. (1998).

References
----------
Schölkopf, Smola, Müller (1998), "Nonlinear component analysis as a kernel
eigenvalue problem", Neural Computation 10(5).
Mika et al. (1998), "Kernel PCA and de-noising in feature spaces", NIPS 11.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from . import eigen
from .kernels import KERNELS, kernel_matrix, rbf_gram
from .noise import estimate_sigma_pca
from .nystrom import LANDMARK_RTOL, fit_landmark_pca, landmark_weights, select_landmarks
from .preimage import PreimageStats, expansion_weights, preimage_fixed_point
from .progress import ProgressCallback, check_cancel, report

__all__ = ["KernelPCA", "NotFittedError", "rbf_width", "noise_eigenvalue", "WIDTH_SCALE_SAMPLES",
           "WIDTH_SCALE_IMAGE_PATCHES", "NOISE_RANK_KAPPA"]


class NotFittedError(ValueError, AttributeError):
    """The estimator was used before ``fit``."""


#: Width scale c of :func:`rbf_width` for independent samples (digits-like
#: patch sets).  Measured on noisy digits (sigma 0.25 on [0, 1], 1000 noisy
#: training digits, 797 test digits; ``python benchmarks/gamma_rule.py``):
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
#: (``python benchmarks/noise_rank.py``): test MSE at noise 0.1 / 0.25 / 0.4 on
#: [0, 1] with kappa 1 / 1.5 / 2 / 3: 0.0069 / 0.0070 / 0.0072 / 0.0078,
#: 0.0190 / 0.0190 / 0.0198 / 0.0223, 0.0427 / 0.0413 / 0.0421 / 0.0400, against
#: 0.0088 / 0.0190 / 0.0414 for a fixed 128 components.
NOISE_RANK_KAPPA = 1.5


def noise_eigenvalue(kernel: str, gamma: float, sigma: float, d: int, n: int) -> float:
    """Eigenvalue that white noise of std ``sigma`` alone gives a centred Gram matrix.

    RBF: the diagonal of the Gram matrix stays 1 while noise shrinks every
    off-diagonal entry by ``E exp(-gamma |e_i - e_j|^2) = (1 + 4 gamma sigma^2)^(-d/2)``,
    so noise adds ``1 - (1 + 4 gamma sigma^2)^(-d/2)`` to every eigenvalue.
    Linear: ``(n - 1) sigma^2`` per direction (n samples of dimension d).
    Other kernels: not defined (returns NaN).
    """
    if kernel == "rbf":
        return float(-np.expm1(-0.5 * d * np.log1p(4.0 * gamma * sigma * sigma)))
    if kernel == "linear":
        return float((n - 1) * sigma * sigma)
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


class KernelPCA:
    """Kernel principal component analysis (low-rank) with a pre-image.

    Parameters
    ----------
    n_components : int
        Number of components kept (the largest rank any caller will use;
        smaller ranks are prefixes).
    kernel : {'rbf', 'poly', 'sigmoid', 'linear'}
    gamma : float or None
        Kernel parameter.  ``None``: for 'rbf' chosen by :func:`rbf_width`
        from the data and ``noise_sigma``; for 'poly'/'sigmoid' ``1/n_features``
        as in scikit-learn.  The value used is stored in ``gamma_``.
    degree, coef0 : polynomial / sigmoid parameters (scikit-learn's meaning).
    noise_sigma : float or None
        Noise standard deviation of the samples, used by the width rule;
        ``None`` estimates it (``noise_sigma_``).
    width_scale : float
        The scale c of the automatic width rule (:func:`rbf_width`): 0.5 for
        independent samples (default), 8 for overlapping image patches.
    eigen_solver : {'auto', 'dense', 'arpack', 'randomized'}
        'auto' is dense LAPACK for ``n <= 1500`` or ``n_components > n/4``
        and randomized subspace iteration otherwise
        (:func:`kpca_denoise.core.eigen.choose_solver`).
    tol : float
        Iterative eigensolvers stop when every Ritz residual ``||K u - theta u||``
        is below ``tol * lambda_1``.  The default 1e-4 gives eigenvalues to
        about 1e-5 of lambda_1 (measured on 8x8 image patches, n = 2000-6000)
        in about 10 iterations; 1e-6 takes 3x as many.
    max_iter : int or None
        Iteration cap of the iterative eigensolvers.
    preimage_tol, preimage_max_iter : pre-image stopping rule (per point).
    dtype : 'float32' or 'float64'
        Precision of the Gram matrix.  float32 halves memory and time and is
        accurate to ~1e-6 relative; the eigensolver's small Rayleigh-Ritz
        problem, projections and pre-image are float64.  In landmark mode it
        is the precision of the N x m kernel blocks and of their product with
        the landmark basis (the O(N m^2) part); K_mm, its eigendecomposition,
        the covariance accumulation, projections and pre-image are float64.
    n_landmarks : int or None
        ``None`` (default): exact kernel PCA, O(N^2) memory.  An integer m
        (``n_components <= m <= n_samples``): Nyström approximation with m
        landmarks drawn uniformly from the training samples (``random_state``),
        O(N m^2 + m^3) time and O(m^2) memory, so N can be much larger; see
        :mod:`kpca_denoise.core.nystrom`.  ``m = n_samples`` reproduces the
        exact mode.  Transform and pre-image then cost O(m) per point, not O(N).
    random_state : int or None
    progress : callable or None
        Receives :class:`~kpca_denoise.core.progress.ProgressEvent`.
    cancel : token or None
        Checked between chunks; raises ``Cancelled``.

    Attributes
    ----------
    eigenvalues_ : (k,) eigenvalues of the centred Gram matrix, descending,
        negative values clipped to 0.
    eigenvectors_ : (n, k) unit-norm eigenvectors, sign fixed so that the
        largest-magnitude entry of each is positive.
    alphas_ : (n, k) expansion coefficients of the feature-space axes,
        ``eigenvectors_ / sqrt(eigenvalues_)`` so that ``lambda ||alpha||^2 = 1``
        (zero for zero eigenvalues).
    X_fit_, gamma_, noise_sigma_, K_fit_rows_, K_fit_all_, solver_,
    n_iter_, preimage_stats_ (after ``inverse_transform``).
    n_landmarks_ : None (exact mode) or the number of landmarks m.

    In landmark mode ``eigenvalues_`` and ``eigenvectors_`` are those of the
    centred approximate Gram matrix ``L K_Nm K_mm^+ K_mN L`` (same scale as
    the exact mode, same sign rule), ``K_fit_rows_`` / ``K_fit_all_`` are its
    row means / mean, and additionally:
    landmarks_ : (m, d) float64 landmark samples, the pre-image's expansion points.
    landmark_indices_ : (m,) their rows in ``X_fit_``.
    alphas_ : (m, k) expansion coefficients of the axes over ``landmarks_``.
    landmark_mean_weights_ : (m,) expansion of the (projected) training mean.
    landmark_rank_ : number r of K_mm eigenvalues kept (> ``LANDMARK_RTOL`` x largest).
    landmark_eigenvalues_ : (r,) those eigenvalues, descending.
    """

    def __init__(
        self,
        n_components: int = 8,
        *,
        kernel: str = "rbf",
        gamma: float | None = None,
        degree: float = 3,
        coef0: float = 1.0,
        noise_sigma: float | None = None,
        width_scale: float = WIDTH_SCALE_SAMPLES,
        eigen_solver: str = "auto",
        tol: float = 1e-4,
        max_iter: int | None = None,
        preimage_tol: float = 1e-5,
        preimage_max_iter: int = 100,
        dtype: str = "float32",
        random_state: int | None = 0,
        progress: ProgressCallback | None = None,
        cancel: Any = None,
        n_landmarks: int | None = None,
    ) -> None:
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.noise_sigma = noise_sigma
        self.width_scale = width_scale
        self.eigen_solver = eigen_solver
        self.tol = tol
        self.max_iter = max_iter
        self.preimage_tol = preimage_tol
        self.preimage_max_iter = preimage_max_iter
        self.dtype = dtype
        self.random_state = random_state
        self.progress = progress
        self.cancel = cancel
        self.n_landmarks = n_landmarks

    # -- scikit-learn parameter protocol ---------------------------------
    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p for p in sig.parameters if p != "self"]

    def get_params(self, deep: bool = True) -> dict:
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params) -> "KernelPCA":
        valid = set(self._param_names())
        for key, value in params.items():
            if key not in valid:
                raise ValueError(
                    f"invalid parameter {key!r} for KernelPCA; valid are {sorted(valid)}"
                )
            setattr(self, key, value)
        return self

    def __repr__(self) -> str:
        extra = "" if self.n_landmarks is None else f", n_landmarks={self.n_landmarks!r}"
        return (f"KernelPCA(n_components={self.n_components}, kernel={self.kernel!r}, "
                f"gamma={self.gamma!r}{extra})")

    # -- validation -------------------------------------------------------
    def _check_params(self, n_samples: int) -> None:
        if self.kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {KERNELS}, got {self.kernel!r}")
        k = self.n_components
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"n_components must be an integer >= 1, got {k!r}")
        if k > n_samples:
            raise ValueError(
                f"n_components={k} is more than the {n_samples} training samples; "
                f"use at most {n_samples} components or more training samples"
            )
        if self.gamma is not None:
            g = self.gamma
            if not isinstance(g, (int, float, np.floating, np.integer)) or not np.isfinite(g) or g <= 0:
                raise ValueError(
                    f"gamma must be a positive finite number or None (automatic), got {g!r}"
                )
        if self.noise_sigma is not None and not (np.isfinite(self.noise_sigma) and self.noise_sigma >= 0):
            raise ValueError(f"noise_sigma must be >= 0 or None, got {self.noise_sigma!r}")
        if self.dtype not in ("float32", "float64"):
            raise ValueError(f"dtype must be 'float32' or 'float64', got {self.dtype!r}")
        m = self.n_landmarks
        if m is not None:
            if isinstance(m, bool) or not isinstance(m, (int, np.integer)):
                raise ValueError(
                    f"n_landmarks must be None (exact kernel PCA) or an integer, got {m!r}"
                )
            if m < k:
                raise ValueError(
                    f"n_landmarks={m} is fewer than n_components={k}; use n_landmarks >= {k} "
                    "(or n_landmarks=None for exact kernel PCA)"
                )
            if m > n_samples:
                raise ValueError(
                    f"n_landmarks={m} is more than the {n_samples} training samples; use at "
                    f"most {n_samples} (n_landmarks={n_samples} equals exact kernel PCA) or "
                    "n_landmarks=None"
                )

    @staticmethod
    def _check_X(X, what: str = "X") -> np.ndarray:
        X = np.asarray(X)
        if X.ndim != 2:
            raise ValueError(f"{what} must be 2-D (n_samples, n_features), got shape {X.shape}")
        if X.shape[0] == 0 or X.shape[1] == 0:
            raise ValueError(f"{what} is empty (shape {X.shape})")
        if not np.issubdtype(X.dtype, np.number):
            raise ValueError(f"{what} must be numeric, got dtype {X.dtype}")
        if not np.all(np.isfinite(X)):
            raise ValueError(f"{what} contains NaN or Inf values; remove or replace them first")
        return X

    def _check_fitted(self) -> None:
        if not hasattr(self, "alphas_"):
            raise NotFittedError(
                "This KernelPCA instance is not fitted yet; call 'fit' with training data first"
            )

    # -- fitting ----------------------------------------------------------
    def fit(self, X, y=None) -> "KernelPCA":
        X = self._check_X(X)
        n, d = X.shape
        if n < 2:
            raise ValueError("kernel PCA needs at least 2 training samples")
        self._check_params(n)
        dt = np.dtype(self.dtype)
        self.X_fit_ = np.ascontiguousarray(X, dtype=np.float64)
        self._X_kernel = None
        if self.noise_sigma is None and self.kernel == "rbf" and self.gamma is None:
            self.noise_sigma_ = estimate_sigma_pca(self.X_fit_) if d >= 4 else 0.0
        else:
            self.noise_sigma_ = None if self.noise_sigma is None else float(self.noise_sigma)
        if self.gamma is not None:
            self.gamma_ = float(self.gamma)
        elif self.kernel == "rbf":
            self.gamma_ = rbf_width(self.X_fit_, self.noise_sigma_, scale=self.width_scale,
                                    random_state=self.random_state)
        else:
            self.gamma_ = 1.0 / d
        for name in ("landmarks_", "landmark_indices_", "landmark_mean_weights_",
                     "landmark_rank_", "landmark_eigenvalues_", "_landmark_offset"):
            self.__dict__.pop(name, None)
        self.n_landmarks_ = None
        if self.n_landmarks is not None:
            return self._fit_landmarks()
        if self.kernel == "rbf":
            K = rbf_gram(self.X_fit_.astype(dt), self.gamma_, progress=self.progress,
                         cancel=self.cancel)
        else:
            report(self.progress, "gram", 0, 1)
            K = kernel_matrix(self.X_fit_, self.X_fit_, self.kernel, gamma=self.gamma_,
                              degree=self.degree, coef0=self.coef0).astype(dt)
            report(self.progress, "gram", 1, 1)
        check_cancel(self.cancel)
        # exact feature-space centring: K~ = L K L with L = I - 11^T/n
        self.K_fit_rows_ = K.mean(axis=0, dtype=np.float64)
        self.K_fit_all_ = float(self.K_fit_rows_.mean())
        K -= self.K_fit_rows_.astype(dt)[None, :]
        K -= self.K_fit_rows_.astype(dt)[:, None]
        K += dt.type(self.K_fit_all_)
        w, V, info = eigen.eigh_top(
            K, int(self.n_components), solver=self.eigen_solver, tol=self.tol,
            max_iter=self.max_iter, random_state=self.random_state,
            progress=self.progress, cancel=self.cancel,
        )
        del K
        self.solver_ = info["solver"]
        self.n_iter_ = info["iterations"]
        # centred Gram matrices are PSD for PSD kernels: tiny negatives are
        # round-off; sigmoid can give real negatives, which carry no variance
        self.n_negative_eigenvalues_ = int((w < 0).sum())
        w = np.where(w > 0, w, 0.0)
        # deterministic signs: the largest-magnitude entry of each vector positive
        idx = np.argmax(np.abs(V), axis=0)
        signs = np.sign(V[idx, np.arange(V.shape[1])])
        signs[signs == 0] = 1.0
        V = V * signs
        self.eigenvalues_ = w
        self.eigenvectors_ = V
        # guard the division: a zero eigenvalue gives a zero axis, not Inf
        nz = w > max(w.max(initial=0.0), 0.0) * 1e-12
        alphas = np.zeros_like(V)
        alphas[:, nz] = V[:, nz] / np.sqrt(w[nz])
        self.alphas_ = alphas
        return self

    def _fit_landmarks(self) -> "KernelPCA":
        dt = np.dtype(self.dtype)
        X = self.X_fit_
        m = int(self.n_landmarks)
        idx = select_landmarks(X.shape[0], m, self.random_state)
        L = X[idx]
        # non-RBF kernels in float64, as _centred_kernel does in the exact mode
        kdt = dt if self.kernel == "rbf" else np.dtype(np.float64)

        def kern(Y, Lk):
            return kernel_matrix(Y, Lk, self.kernel, gamma=self.gamma_, degree=self.degree,
                                 coef0=self.coef0)

        def gram(Lk):  # symmetric RBF Gram with an exact unit diagonal, as the exact mode
            return rbf_gram(Lk, self.gamma_) if self.kernel == "rbf" else kern(Lk, Lk)

        fit = fit_landmark_pca(
            X, L, kern, int(self.n_components), gram=gram, dtype=kdt,
            rtol=LANDMARK_RTOL[self.dtype], eigen_solver=self.eigen_solver, tol=self.tol,
            max_iter=self.max_iter, random_state=self.random_state, progress=self.progress,
            cancel=self.cancel,
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
        self.eigenvalues_ = w
        self.eigenvectors_ = V * signs
        self.alphas_ = alphas
        self._landmark_offset = np.where(nz, fit["offset"] * signs, 0.0)
        self.landmark_mean_weights_ = fit["mean_weights"]
        self.landmarks_ = L
        self.landmark_indices_ = idx
        self.landmark_rank_ = fit["rank"]
        self.landmark_eigenvalues_ = fit["landmark_eigenvalues"]
        self.K_fit_rows_ = fit["row_means"]
        self.K_fit_all_ = fit["mean_all"]
        self.solver_ = fit["solver"]
        self.n_iter_ = fit["iterations"]
        self.n_negative_eigenvalues_ = fit["n_negative"]
        self.n_landmarks_ = m
        self._X_kernel = None
        return self

    def noise_rank(self, sigma: float | None = None, kappa: float = NOISE_RANK_KAPPA) -> int:
        """Number of fitted components whose eigenvalue exceeds ``kappa`` times the
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
        n = self.X_fit_.shape[0]
        tau = noise_eigenvalue(self.kernel, getattr(self, "gamma_", 0.0) or 0.0, s,
                               self.X_fit_.shape[1], n)
        return max(1, int(np.count_nonzero(self.eigenvalues_ > kappa * tau)))

    # -- projection -------------------------------------------------------
    def _centred_kernel(self, Y: np.ndarray) -> np.ndarray:
        # the RBF test kernel is computed in the Gram matrix's precision
        dt = np.dtype(self.dtype) if self.kernel == "rbf" else np.dtype(np.float64)
        if getattr(self, "_X_kernel", None) is None or self._X_kernel.dtype != dt:
            self._X_kernel = self.X_fit_.astype(dt)
        Kt = kernel_matrix(np.asarray(Y, dtype=dt), self._X_kernel, self.kernel, gamma=self.gamma_,
                           degree=self.degree, coef0=self.coef0)
        # centre with the training means: k~(y, x_j) = k(y, x_j) - mean_i k(x_i, x_j)
        #   - mean_i k(y, x_i) + mean_ij k(x_i, x_j)
        row_means = Kt.mean(axis=1, keepdims=True)
        Kt -= self.K_fit_rows_.astype(dt)[None, :]
        Kt -= row_means
        Kt += dt.type(self.K_fit_all_)
        return Kt

    def transform(self, X, *, n_components: int | None = None, block: int = 4096) -> np.ndarray:
        """Projections onto the leading components, shape (m, n_components)."""
        self._check_fitted()
        X = self._check_X(X)
        if X.shape[1] != self.X_fit_.shape[1]:
            raise ValueError(
                f"X has {X.shape[1]} features but the model was fitted with {self.X_fit_.shape[1]}"
            )
        k = self.alphas_.shape[1] if n_components is None else int(n_components)
        if not 1 <= k <= self.alphas_.shape[1]:
            raise ValueError(f"n_components must be in [1, {self.alphas_.shape[1]}], got {k}")
        m = X.shape[0]
        Z = np.empty((m, k))
        landmark = getattr(self, "n_landmarks_", None) is not None
        report(self.progress, "projection", 0, m)
        for s in range(0, m, block):
            check_cancel(self.cancel)
            e = min(s + block, m)
            if landmark:
                # z = (phi~(x) - mu) . E = k_m(x) alphas - mu . E; the product
                # in float64: alphas carries S^{-1/2}, so float32 would cancel
                Kt = self._landmark_kernel(X[s:e])
                Z[s:e] = Kt.astype(np.float64) @ self.alphas_[:, :k] - self._landmark_offset[:k]
            else:
                Kt = self._centred_kernel(X[s:e])
                Z[s:e] = Kt @ self.alphas_[:, :k].astype(Kt.dtype)
            report(self.progress, "projection", e, m)
        return Z

    def _landmark_kernel(self, Y: np.ndarray) -> np.ndarray:
        dt = np.dtype(self.dtype) if self.kernel == "rbf" else np.dtype(np.float64)
        if getattr(self, "_X_kernel", None) is None or self._X_kernel.dtype != dt:
            self._X_kernel = self.landmarks_.astype(dt)
        return kernel_matrix(np.asarray(Y, dtype=dt), self._X_kernel, self.kernel,
                             gamma=self.gamma_, degree=self.degree, coef0=self.coef0)

    def fit_transform(self, X, y=None) -> np.ndarray:
        self.fit(X)
        # for training points the centred kernel rows are the centred Gram,
        # so the projection is eigenvectors * sqrt(eigenvalues)
        return self.eigenvectors_ * np.sqrt(self.eigenvalues_)

    # -- pre-image ----------------------------------------------------------
    def inverse_transform(self, Z, init=None) -> np.ndarray:
        """Pre-images of projections Z (m, r) with r <= n_components.

        RBF: the fixed-point iteration of Mika et al. (1998), started from
        ``init`` (the noisy inputs) when given; see
        :mod:`kpca_denoise.core.preimage`.  ``linear``: exact
        (``mean + Z @ axes``).  'poly' and 'sigmoid' have no fixed-point
        pre-image here: a ValueError says to use ``kernel='rbf'`` (or
        scikit-learn's learned ``fit_inverse_transform``).
        """
        self._check_fitted()
        Z = np.asarray(Z, dtype=np.float64)
        if Z.ndim != 2 or not 1 <= Z.shape[1] <= self.alphas_.shape[1]:
            raise ValueError(
                f"Z must have shape (m, r) with 1 <= r <= {self.alphas_.shape[1]}, got {Z.shape}"
            )
        if not np.all(np.isfinite(Z)):
            raise ValueError("Z contains NaN or Inf values")
        r = Z.shape[1]
        if getattr(self, "n_landmarks_", None) is not None:
            # the projection is an expansion over the landmarks (core/nystrom.py)
            W = landmark_weights(Z, self.alphas_[:, :r], self.landmark_mean_weights_,
                                 normalise=self.kernel != "linear")
            points = self.landmarks_
        else:
            W = expansion_weights(Z, self.alphas_[:, :r])
            points = self.X_fit_
        if self.kernel == "linear":
            # Phi is the identity: the expansion is already the pre-image
            self.preimage_stats_ = PreimageStats(n_points=Z.shape[0])
            return W @ points
        if self.kernel != "rbf":
            raise ValueError(
                f"no pre-image for kernel={self.kernel!r}: the fixed-point iteration needs "
                "kernel='rbf' (or 'linear'); for other kernels use scikit-learn's "
                "KernelPCA(fit_inverse_transform=True)"
            )
        if init is not None:
            init = self._check_X(init, "init")
        out, stats = preimage_fixed_point(
            W, points, self.gamma_, init=init, tol=self.preimage_tol,
            max_iter=self.preimage_max_iter, progress=self.progress, cancel=self.cancel,
        )
        self.preimage_stats_ = stats
        return out
