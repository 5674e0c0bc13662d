"""The public ``KernelPCA``: a drop-in for ``sklearn.decomposition.KernelPCA``.

It inherits scikit-learn's ``BaseEstimator``, ``TransformerMixin`` and
``ClassNamePrefixFeaturesOutMixin`` (parameters, cloning, ``set_output``,
feature names, tags) and takes its numerics from
:class:`kpca_denoise.core.kpca.KernelPCACore`.  It lives outside
``kpca_denoise/core`` because core imports only numpy, scipy and numba (the
layer rule that tests/test_layers.py checks); scikit-learn is therefore a
runtime dependency of the package.

Swapping ``from sklearn.decomposition import KernelPCA`` for
``from kpca_denoise import KernelPCA`` changes nothing but speed: the
defaults and the meaning of every scikit-learn parameter are the same, and
scikit-learn's own ``test_kernel_pca.py`` passes on it
(``tests/core/test_sklearn_suite.py``).
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.decomposition import KernelPCA as _SkKernelPCA
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_array, check_is_fitted, validate_data
from threadpoolctl import ThreadpoolController  # a dependency of scikit-learn

from .core.kernels import kernel_matrix
from .core.kpca import WIDTH_SCALE_SAMPLES, KernelPCACore

__all__ = ["KernelPCA", "NotFittedError"]

_THREADPOOLS: list = []


def _single_blas_thread():
    """BLAS limited to one thread (LOBPCG's small dense operations: 3x faster
    on a loaded 2-core machine, ``kpca_denoise.core.eigen.eigh_top``)."""
    if not _THREADPOOLS:
        _THREADPOOLS.append(ThreadpoolController())
    return _THREADPOOLS[0].limit(limits=1, user_api="blas")


class KernelPCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator, KernelPCACore):
    """Kernel principal component analysis, scikit-learn compatible and fast.

    A drop-in for ``sklearn.decomposition.KernelPCA`` (the same parameters, defaults
    and meaning for those it shares), with native RBF and linear kernels, iterative
    eigensolvers, a noise-aware kernel width and the fixed-point pre-image of Mika et al.
    (1998), :meth:`fixed_point_inverse_transform`.

    Parameters
    ----------
    n_components : int or None
        Components kept; None keeps all with a non-zero eigenvalue.
    kernel : {'linear', 'poly', 'rbf', 'sigmoid', 'cosine', 'precomputed'} or callable
        rbf, linear, poly and sigmoid run on the fast native kernels;
        the others go through ``sklearn.metrics.pairwise.pairwise_kernels``.
    gamma : float, None or 'noise'
        Kernel coefficient; None is ``1 / n_features`` (scikit-learn).
        ``'noise'`` (rbf only, our addition): the noise-aware width of
        :func:`kpca_denoise.core.kpca.rbf_width` from the data and
        ``noise_sigma``, deterministic for a given integer ``random_state``
        (0 otherwise).  The value used is ``gamma_``.
    degree, coef0, kernel_params, alpha, fit_inverse_transform, remove_zero_eig,
    random_state, copy_X, n_jobs : as scikit-learn.
        ``fit_inverse_transform=True`` learns scikit-learn's pre-image: kernel
        ridge regression (ridge ``alpha``) from the projections back to the
        samples, used by :meth:`inverse_transform`.
    eigen_solver : {'auto', 'dense', 'arpack', 'randomized', 'lobpcg'}
        'auto' chooses by cost (:func:`kpca_denoise.core.eigen.choose_solver`):
        dense LAPACK for n <= 1200 or large k, otherwise block LOBPCG with an
        iteration budget worth half a dense solve, then dense if the spectrum
        is too flat.  'randomized' is block subspace iteration that keeps the
        k largest eigenvalues in magnitude, like scikit-learn's.
    tol : float
        Iterative solvers stop when every Ritz residual is below
        ``tol * lambda_1``; 0 (default) means 1e-4 for 'randomized' and
        'lobpcg' (eigenvalues to about 1e-5 of lambda_1) and machine
        precision for 'arpack'.
    max_iter : int or None
        Iteration cap of the iterative solvers; reaching it without meeting
        ``tol`` warns (``ConvergenceWarning``).
    iterated_power : accepted for compatibility; the iterative solvers stop by ``tol``.

    Our additions (all optional):

    noise_sigma : float or None
        Noise std of the samples for ``gamma='noise'`` and :meth:`noise_rank`;
        None estimates it (``noise_sigma_``).
    width_scale : float
        Scale c of the 'noise' width rule: 0.5 for independent samples,
        8 for overlapping image patches.
    gram_dtype : {'auto', 'float32', 'float64'}
        Precision of the Gram matrix.  Data are centred before the Gram
        matrix is formed for rbf and linear (exact, as both are translation
        invariant after kernel centring), so an offset such as X + 10000
        costs no accuracy.  'auto': float32 for rbf with n >= 2000 samples
        when ``gamma * mean squared distance >= 1e-2``, float64 otherwise.
        Measured bound of float32 after centring (1500 normal samples,
        d = 16 and 64, with and without an offset of 1e4, against float64):
        for ``gamma * mean squared distance`` in [1e-2, 10] the top 16
        eigenvalues agree to 3e-7 of lambda_1 and the projections to 3e-5 of
        their largest magnitude; at 1e-3 to 2e-6 / 2e-4 and at 1e-4 to
        1e-4 / 3e-3, hence the switch to float64 below 1e-2.  Output has the input's float dtype.
    preimage_tol, preimage_max_iter : stopping rule of
        :meth:`fixed_point_inverse_transform`, per point.
    n_landmarks : int or None
        None: exact kernel PCA.  m: Nyström approximation on m landmarks
        (:mod:`kpca_denoise.core.nystrom`), O(N m^2) time, O(m^2) memory.
    progress : callable or None
        Receives :class:`~kpca_denoise.core.progress.ProgressEvent`.
    cancel : token or None
        Checked between chunks; raises ``Cancelled``.

    Attributes
    ----------
    eigenvalues_, eigenvectors_, X_fit_, gamma_, n_features_in_,
    feature_names_in_, dual_coef_ and X_transformed_fit_ (with
    ``fit_inverse_transform``): as scikit-learn.  Also ``alphas_``
    (eigenvectors / sqrt(eigenvalues), zero for zero eigenvalues),
    ``K_fit_rows_``, ``K_fit_all_``, ``solver_``, ``n_iter_``,
    ``gram_dtype_``, ``noise_sigma_``, ``n_landmarks_``, landmark attributes
    in landmark mode, ``preimage_stats_`` after a fixed-point pre-image.

    Examples
    --------
    >>> import numpy as np
    >>> from kpca_denoise import KernelPCA
    >>> X = np.random.default_rng(0).normal(size=(200, 16))
    >>> kp = KernelPCA(n_components=8, kernel="rbf", gamma=0.05).fit(X)
    >>> kp.transform(X).shape
    (200, 8)
    >>> kp.fixed_point_inverse_transform(kp.transform(X[:5])).shape
    (5, 16)
    """

    _convergence_warning = ConvergenceWarning

    #: scikit-learn's constraints (the same messages for the same bad values: alpha
    #: -1 was a LinAlgError, tol -1 was taken, kernel 'RBF' spoke of a 'metric'), with
    #: gamma='noise', the solvers and the parameters this class adds
    _parameter_constraints: dict = {
        **_SkKernelPCA._parameter_constraints,
        "gamma": [Interval(Real, 0, None, closed="left"), StrOptions({"noise"}), None],
        "eigen_solver": [StrOptions({"auto", "dense", "arpack", "randomized", "lobpcg"})],
        "noise_sigma": [Interval(Real, 0, None, closed="left"), None],
        "width_scale": [Interval(Real, 0, None, closed="neither")],
        "gram_dtype": [StrOptions({"auto", "float32", "float64"})],
        "preimage_tol": [Interval(Real, 0, None, closed="neither")],
        "preimage_max_iter": [Interval(Integral, 1, None, closed="left")],
        "n_landmarks": [Interval(Integral, 1, None, closed="left"), None],
        "progress": [callable, None],
        "cancel": "no_validation",
    }

    def __init__(
        self,
        n_components=None,
        *,
        kernel="linear",
        gamma=None,
        degree=3,
        coef0=1,
        kernel_params=None,
        alpha=1.0,
        fit_inverse_transform=False,
        eigen_solver="auto",
        tol=0,
        max_iter=None,
        iterated_power="auto",
        remove_zero_eig=False,
        random_state=None,
        copy_X=True,
        n_jobs=None,
        noise_sigma=None,
        width_scale=WIDTH_SCALE_SAMPLES,
        gram_dtype="auto",
        preimage_tol=1e-5,
        preimage_max_iter=100,
        n_landmarks=None,
        progress=None,
        cancel=None,
    ):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.alpha = alpha
        self.fit_inverse_transform = fit_inverse_transform
        self.eigen_solver = eigen_solver
        self.tol = tol
        self.max_iter = max_iter
        self.iterated_power = iterated_power
        self.remove_zero_eig = remove_zero_eig
        self.random_state = random_state
        self.copy_X = copy_X
        self.n_jobs = n_jobs
        self.noise_sigma = noise_sigma
        self.width_scale = width_scale
        self.gram_dtype = gram_dtype
        self.preimage_tol = preimage_tol
        self.preimage_max_iter = preimage_max_iter
        self.n_landmarks = n_landmarks
        self.progress = progress
        self.cancel = cancel

    @classmethod
    def for_denoising(cls, n_components=None, **params):
        """Make a KernelPCA with the denoiser's choices of kernel and width.

        The denoiser's choices in one call: ``kernel='rbf'``, ``gamma='noise'``,
        ``gram_dtype='float32'``, ``random_state=0``, ``tol=1e-4`` (each can be
        overridden by keyword; a non-RBF kernel keeps ``gamma=None``)."""
        params.setdefault("kernel", "rbf")
        if params["kernel"] == "rbf":
            params.setdefault("gamma", "noise")
        for key, value in (("gram_dtype", "float32"), ("random_state", 0), ("tol", 1e-4)):
            params.setdefault(key, value)
        return cls(n_components, **params)

    # -- kernels the core does not have -------------------------------------
    def _pairwise(self, X, Y=None):
        if callable(self.kernel):
            params = self.kernel_params or {}
        else:
            params = {"gamma": self.gamma_, "degree": self.degree, "coef0": self.coef0}
        return pairwise_kernels(X, Y, metric=self.kernel, filter_params=True,
                                n_jobs=self.n_jobs, **params)

    def _foreign_gram(self, X):
        return X if self.kernel == "precomputed" else self._pairwise(X)

    def _foreign_cross(self, Y):
        return Y if self.kernel == "precomputed" else self._pairwise(Y, self.X_fit_)

    def _small_ops(self):
        return _single_blas_thread()

    def _check_fitted(self):
        check_is_fitted(self, "alphas_")

    # -- estimator protocol ---------------------------------------------------
    def fit(self, X, y=None):
        """Fit the model from data X (n_samples, n_features); returns self."""
        self._validate_params()
        if self.fit_inverse_transform and self.kernel == "precomputed":
            raise ValueError("Cannot fit_inverse_transform with a precomputed kernel.")
        if not (isinstance(self.kernel, str) or callable(self.kernel)):
            raise ValueError(f"kernel must be a string or a callable, got {self.kernel!r}")
        X = validate_data(self, X, accept_sparse="csr", dtype=[np.float64, np.float32],
                          copy=self.copy_X)
        self._fit_dtype = X.dtype
        if sp.issparse(X):
            if self.fit_inverse_transform:
                raise NotImplementedError("Inverse transform not implemented for sparse matrices!")
            X = X.toarray()  # a kernel PCA's Gram matrix is dense anyway
        self._fit_core(X)
        for name in ("dual_coef_", "X_transformed_fit_"):
            self.__dict__.pop(name, None)
        if self.fit_inverse_transform:
            self._fit_ridge_preimage(self.eigenvectors_ * np.sqrt(self.eigenvalues_), X)
        return self

    def fit_transform(self, X, y=None, **params):
        """Fit and return the training projections (n_samples, n_components)."""
        self.fit(X, **params)
        # the centred kernel rows of the training points are the centred Gram
        # matrix, so the projections are eigenvectors * sqrt(eigenvalues); in the
        # precision of the data as fitted (a float32 DataFrame came back float64)
        return (self.eigenvectors_ * np.sqrt(self.eigenvalues_)).astype(self._fit_dtype,
                                                                          copy=False)

    def transform(self, X, *, n_components=None):
        """Projections of X onto the leading components.

        ``n_components`` (our addition): only the first r components (a prefix).
        """
        check_is_fitted(self, "alphas_")
        X = validate_data(self, X, accept_sparse="csr", dtype=[np.float64, np.float32],
                          reset=False)
        dtype = X.dtype
        if sp.issparse(X):
            X = X.toarray()
        return self._transform_core(X, n_components).astype(dtype, copy=False)

    def inverse_transform(self, X):
        """Map projections back to samples by scikit-learn's learned pre-image.

        scikit-learn's learned pre-image (kernel ridge regression from the
        projections to the samples, Bakır et al. 2004); needs
        ``fit_inverse_transform=True``.  For the denoising pre-image of Mika
        et al. use :meth:`fixed_point_inverse_transform` (it can start from
        this map's output: ``init=inverse_transform(Z)``).
        """
        if not self.fit_inverse_transform:
            raise NotFittedError(
                "The fit_inverse_transform parameter was not set to True when instantiating "
                "and hence the inverse transform is not available."
            )
        check_is_fitted(self, "dual_coef_")
        # checked as transform checks its input (NaN came back as NaN; a wrong width
        # failed inside a matrix product), and returned in its precision
        X = check_array(X, dtype=[np.float64, np.float32])
        k = self.X_transformed_fit_.shape[1]
        if X.shape[1] != k:
            raise ValueError(f"X has {X.shape[1]} columns, but this KernelPCA projects on {k} "
                             "components: give the output of its transform")
        K = self._ridge_kernel(np.asarray(X, dtype=np.float64), self.X_transformed_fit_)
        return (K @ self.dual_coef_).astype(X.dtype, copy=False)

    def _ridge_kernel(self, A, B):
        if self._native():
            return kernel_matrix(A, B, self.kernel, gamma=self.gamma_, degree=self.degree,
                                 coef0=self.coef0).astype(np.float64, copy=False)
        return self._pairwise(A, B)

    def _fit_ridge_preimage(self, Z, X):
        # kernel ridge regression (seed 003): dual coefficients of
        # X ~ K(Z, Z_fit) A, A = (K(Z_fit, Z_fit) + alpha I)^-1 X
        K = np.array(self._ridge_kernel(Z, Z), dtype=np.float64)
        K.flat[:: K.shape[0] + 1] += self.alpha
        self.dual_coef_ = scipy.linalg.solve(K, np.asarray(X, dtype=np.float64),
                                             assume_a="pos", overwrite_a=True)
        self.X_transformed_fit_ = Z

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        tags.input_tags.pairwise = self.kernel == "precomputed"
        return tags

    @property
    def _n_features_out(self):
        """Number of transformed output features."""
        return self.eigenvalues_.shape[0]
