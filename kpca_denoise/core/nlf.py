"""The noise that camera images carry: its level against brightness and its spatial correlation.

Demosaicing, JPEG and any filtering in a camera spread each sensor pixel's noise over its
neighbours: the noise is no longer white, and the finest-scale estimators
(:func:`~kpca_denoise.core.noise.estimate_sigma_image`, the smallest eigenvalues of the
covariance of small patches) see only its high frequencies (a third of it on the camera
pipeline of ``benchmarks/camera_noise.py``).  Here the whole noise covariance of weakly
textured patches is fitted instead:

* the patches (7 x 7) are those the white-noise estimator keeps (weakly textured, their
  own gradient energy what white noise of its estimate gives), then re-chosen twice: a
  patch is kept when its own gradient energy is what noise of the fitted covariance
  would give with probability ``confidence`` (a gamma quantile of its mean and variance
  under that covariance), away from the clipping bounds;
* their covariance, with the quadratic surfaces projected out (the signal of a weakly
  textured patch), is fitted by least squares with a stationary noise autocovariance
  ``R(dy, dx)`` of lags up to 3 px (the projection applied to the model as to the data),
  so that ``R(0, 0)`` is the whole per-pixel variance and the other lags say how
  correlated the noise is;
* refitted at a stricter confidence: when that reads markedly less, the excess is
  texture the usual test let in, and the fit is scaled down (:func:`channel_covariance`).

The noise-level function (the std against brightness, :class:`NoiseModel`) is read per
brightness level by the finest-scale estimator and scaled to the whole level when the
noise is correlated.  ``docs/noise.md`` has the measurements.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import partial

import numpy as np
from scipy.stats import chi2
from scipy.stats import gamma as gamma_dist

from .color import rgb_to_opponent
from .noise import (PatchStats, estimate_sigma_image, level_variances, refine_sigma,
                    sample_blocks)
from .parallel import run_in_order

__all__ = ["NoiseModel", "estimate_noise_model", "coarse_sigma", "chroma_sigma", "Box2",
           "COARSE_FACTOR", "NOISE_KINDS"]

#: what ``estimate_noise_model(kind=...)`` takes: decide (auto), or take the noise as
#: white or as correlated
NOISE_KINDS = ("auto", "white", "correlated")


def autocovariance_lags(L: int) -> list[tuple[int, int]]:
    """List the lags of a symmetric autocovariance up to ``L`` px.

    (0, 0), then one of each pair (dy, dx) / (-dy, -dx)."""
    out = [(0, 0)]
    for dy in range(0, L + 1):
        for dx in range(-L, L + 1):
            if (dy, dx) > (0, 0):
                out.append((dy, dx))
    return out


class _Design:
    """For ``p`` x ``p`` patches: the projection off the polynomial surfaces of degree up
    to ``degree`` (``P``), the projected basis matrix of each lag (``X``, the design of the
    least-squares fit), and the quadratic form of a patch's own gradient energy (``A``)."""

    def __init__(self, p: int, L: int, degree: int = 2):
        self.p, self.lags = p, autocovariance_lags(L)
        d = p * p
        yy, xx = np.divmod(np.arange(d), p)
        yc, xc = (yy - yy.mean()) / p, (xx - xx.mean()) / p
        ramps = np.stack([yc ** i * xc ** j for i in range(degree + 1)
                          for j in range(degree + 1 - i)], axis=1)
        q = np.linalg.qr(ramps)[0]
        self.P = np.eye(d) - q @ q.T
        dyy = yy[:, None] - yy[None, :]
        dxx = xx[:, None] - xx[None, :]
        self.E = []
        for dy, dx in self.lags:
            E = ((dyy == dy) & (dxx == dx)).astype(np.float64)
            if (dy, dx) != (0, 0):
                E = E + E.T
            self.E.append(E)
        self.X = np.stack([(self.P @ E @ self.P).ravel() for E in self.E], axis=1)
        self.X_pinv = np.linalg.pinv(self.X)  # the least-squares fit, once per design
        # own gradient energy x^T A x: squared horizontal and vertical differences
        Dx = np.zeros((p * (p - 1), d))
        Dy = np.zeros((p * (p - 1), d))
        k = 0
        for i in range(p):
            for j in range(p - 1):
                Dx[k, i * p + j], Dx[k, i * p + j + 1] = -1.0, 1.0
                Dy[k, j * p + i], Dy[k, (j + 1) * p + i] = -1.0, 1.0
                k += 1
        self.A = Dx.T @ Dx + Dy.T @ Dy

    def fit(self, rows: np.ndarray) -> np.ndarray:
        """The autocovariance at :attr:`lags` of the noise of ``rows`` (N, p*p)."""
        Xc = rows - rows.mean(axis=0)
        C = Xc.T @ Xc / max(rows.shape[0] - 1, 1)
        return self.X_pinv @ (self.P @ C @ self.P).ravel()

    def cov(self, R: np.ndarray) -> np.ndarray:
        return sum(r * E for r, E in zip(R, self.E))

    def own_threshold(self, R: np.ndarray, confidence: float) -> float:
        """The ``confidence`` quantile of a noise-only patch's own gradient energy under
        the autocovariance ``R`` (a gamma law of its mean and variance)."""
        AS = self.A @ self.cov(R)
        mean = float(np.trace(AS))
        var = 2.0 * float(np.sum(AS * AS.T))
        if not (mean > 0 and var > 0):
            return 0.0
        k, theta = mean * mean / var, var / mean
        return float(gamma_dist.ppf(confidence, k, scale=theta))


_DESIGNS: dict = {}


def _design(p: int, L: int, degree: int = 2) -> _Design:
    if (p, L, degree) not in _DESIGNS:
        _DESIGNS[(p, L, degree)] = _Design(p, L, degree)
    return _DESIGNS[(p, L, degree)]



#: the noise is taken as spatially correlated when the per-pixel std the whole-covariance
#: fit reads is at least this many times the finest-scale (white-noise) estimate ...
CORRELATED_RATIO = 1.5
#: ... and its correlation is short-range: the neighbours' correlation less twice that at
#: 3 px is at least this.  Texture left in the weakly textured patches of a white-noise
#: image raises the first ratio too (grass and gravel at sigma 2 / 5: 2.1 to 2.4) but
#: decays slowly (0.36 to 0.38 here); demosaiced camera noise, with or without JPEG,
#: read 0.48 to 0.54 (``python -m benchmarks.camera_noise --estimate``, docs/noise.md)
CORRELATED_SHORT = 0.44
#: the noise level is taken as growing with the signal when the variance of the
#: brightest level is at least this many times that of the darkest
SIGNAL_DEPENDENT_RATIO = 3.0


@dataclass(frozen=True)
class NoiseModel:
    """The noise an image was measured to carry.

    ``ImageResult.stats['noise']`` holds :meth:`to_dict`; ``docs/noise.md``.

    kind : 'white' (the finest-scale estimate is the whole noise) or 'correlated'
        (demosaiced, filtered or compressed noise: more than the finest scale shows).
    sigma : the per-pixel noise std the denoiser is told (before ``strength``).
    white_sigma : the finest-scale (white-noise) estimate, what 'white' uses.
    correlation : the whole per-pixel std over the finest-scale one (1 for white noise).
    neighbour : the correlation of neighbouring pixels' noise (0 for white noise).
    levels, level_sigmas : the noise-level function, for plotting: the mean brightness of
        each level (pixel units; for colour, the mean of the channels) and the noise std
        there (the finest-scale reading per level of the luminance; when correlated,
        scaled so that its root mean square over the levels is ``sigma``).
    signal_dependent : the variance grows with the brightness (by
        :data:`SIGNAL_DEPENDENT_RATIO` from the darkest level to the brightest, leaving
        out the levels within two noise stds of the clipping bounds).
    effective : the level the denoiser is told (:attr:`level`): for correlated noise
        the larger of :data:`COARSE_FACTOR` times ``coarse_sigma`` and ``sigma`` times
        :func:`effective_factor` of the fitted autocovariance (the noise of a patch as
        white noise of the same covariance size sees it); 0 for white noise (``sigma``
        itself), and in models saved before it existed.
    coarse_sigma : the noise std read at the 2 x 2 scale (:func:`coarse_sigma`) where the
        noise is correlated (or was tested for it); 0 otherwise.
    chroma_sigma : the finest-scale noise std of the opponent chroma of a colour image
        (:func:`chroma_sigma`) where it was read; 0 otherwise.
    """

    kind: str
    sigma: float
    white_sigma: float
    correlation: float = 1.0
    neighbour: float = 0.0
    levels: tuple = ()
    level_sigmas: tuple = ()
    signal_dependent: bool = False
    effective: float = 0.0
    coarse_sigma: float = 0.0
    chroma_sigma: float = 0.0

    @property
    def correlated(self) -> bool:
        """Whether the noise is correlated (else white)."""
        return self.kind == "correlated"

    @property
    def level(self) -> float:
        """The noise level the denoiser is told (before ``strength``)."""
        return self.effective if self.effective > 0 else self.sigma

    def to_dict(self) -> dict:
        """A JSON-ready dict (what ``ImageResult.stats['noise']`` holds)."""
        d = asdict(self)
        d["levels"], d["level_sigmas"] = list(self.levels), list(self.level_sigmas)
        return d

    @classmethod
    def from_dict(cls, data: dict) -> "NoiseModel":
        """The model back from :meth:`to_dict` (a sidecar's ``stats.noise``)."""
        d = dict(data)
        d["levels"], d["level_sigmas"] = tuple(d["levels"]), tuple(d["level_sigmas"])
        return cls(**d)

    def describe(self, *, ascii: bool = False) -> str:
        """Describe the model in one line for a log or a label.

        For example 'correlated noise, sigma 10.5 (3.3 x the finest scale's 3.21)'."""
        s = "sigma" if ascii else "σ"

        def num(v: float) -> str:  # 3 digits, and whole numbers for 16-bit levels
            return f"{v:.0f}" if abs(v) >= 1000 else f"{v:.3g}"

        text = (f"correlated noise, {s} {num(self.sigma)} ({self.correlation:.2g} x the finest "
                f"scale's {num(self.white_sigma)}), removed at {num(self.level)}"
                if self.correlated else f"white noise, {s} {num(self.sigma)}")
        return text + (", growing with the signal" if self.signal_dependent else "")


def effective_factor(R: np.ndarray, lag: int, patch: int = 5) -> float:
    """Return the factor above the per-pixel std a white-noise denoiser is told.

    How much above the per-pixel std ``sqrt(R[0])`` the level a white-noise denoiser
    is told should be for noise of autocovariance ``R`` (:func:`autocovariance_lags`
    up to ``lag`` px): with ``C`` the noise covariance of a ``patch`` x ``patch``
    patch, the white noise whose covariance has the same Frobenius norm, i.e. the root
    mean square of ``C``'s eigenvalues (the noise power spectrum sampled by the
    patch), has variance ``||C||_F / patch``; the factor is its std over ``sqrt(R[0])``.
    White noise gives 1; the more the noise power sits in few (smooth) directions, the
    more those, where a patch's signal also lies, hold above the mean (demosaiced
    camera noise: 1.2 to 1.45, docs/noise.md).  At least 1."""
    if not R[0] > 0:
        return 1.0
    C = _design(patch, lag).cov(R)
    rms = float(np.linalg.norm(C)) / patch
    return max(float(np.sqrt(rms / R[0])), 1.0)


def channel_covariance(img: np.ndarray, white: float, bounds, p: int, lag: int,
                       max_patches: int, max_pixels: int, block_size: int, seed: int
                       ) -> np.ndarray | None:
    """Fit the noise autocovariance of one channel, texture shed.

    The autocovariance at :func:`autocovariance_lags` (:func:`channel_fits`), or None if
    too few patches: the fit at the usual confidence, scaled down to
    :data:`TEXTURE_DRIFT` below the strict fit's variance when it reads more than that
    above it (texture it let in)."""
    fits = channel_fits(img, white, bounds, p, lag, max_patches, max_pixels, block_size, seed)
    if fits is None:
        return None
    R, strict = fits
    cap = strict[0] / TEXTURE_DRIFT ** 2
    return R * (cap / R[0]) if 0 < cap < R[0] else R


#: the noise fits run at most this many at once: each holds about 60 MB of its bounded
#: sample's statistics (the whole-image work beside the tiles stays bounded)
FITS_AT_ONCE = 2

#: the stricter confidence of the own-energy test the noise covariance is refitted at
#: (it cuts under 1 % of pure noise's variance) ...
STRICT_CONFIDENCE = 0.99
#: ... and how far below the usual fit's per-pixel std the strict fit's may read before
#: the excess is taken as texture: pure noise reads within a few per cent either way;
#: the demosaicing false colour of a photograph (Dune's grass on the camera pipeline)
#: dropped 22 % (docs/noise.md)
TEXTURE_DRIFT = 0.9


def channel_fits(img: np.ndarray, white: float, bounds, p: int, lag: int, max_patches: int,
                 max_pixels: int, block_size: int, seed: int, frac: float = 0.3,
                 confidence: float = 0.999, iterations: int = 5
                 ) -> tuple[np.ndarray, np.ndarray] | None:
    """Fit the noise autocovariance of one channel twice, at the usual and a strict test.

    ``(usual, strict)``, or None if too few patches. The usual one: the weakly textured
    patches the white-noise estimator keeps (away from the clipping ``bounds``), then
    re-chosen twice by the own-energy test at ``confidence`` under the fitted covariance
    (correlated noise has a heavier own-energy tail than white noise of its finest-scale
    std, which the white test cut). The strict one: from there, re-chosen three times at
    :data:`STRICT_CONFIDENCE`. Texture the usual test let in raises the fit, which
    loosens the test; the strict one sheds it, pure noise reads the same."""
    st = PatchStats(sample_blocks(img, max_pixels, max(block_size, 8 * p), seed), p,
                     with_mean=bounds is not None)
    ok = np.ones(st.t.size, bool) if bounds is None else (
        (st.mu >= bounds[0] + 2.0 * white) & (st.mu <= bounds[1] - 2.0 * white))
    min_keep = 50 * p * p
    if ok.sum() * frac < min_keep:
        return None
    rng = np.random.default_rng(seed)
    pca_of = st.pca(max_patches, rng)
    t = st.t
    start = np.flatnonzero(ok & (t <= np.quantile(t[ok], frac)))
    sigma, kept = refine_sigma(pca_of(start), pca_of, st.own, lambda _s: ok,
                          float(chi2.ppf(confidence, 2 * p * (p - 1))), iterations, min_keep)
    kept = start if kept is None else kept
    d = _design(p, lag)

    def fit(sel: np.ndarray) -> np.ndarray:
        if sel.size > max_patches:
            sel = sel[rng.choice(sel.size, max_patches, replace=False)]
        return d.fit(st.rows(sel))

    def refit(R: np.ndarray, conf: float, iterations: int) -> np.ndarray:
        ok_ = ok
        for _ in range(iterations):
            if not R[0] > 0:
                break
            if bounds is not None:  # 2 whole stds from the bounds: the noise is not clipped there
                s = float(np.sqrt(R[0]))
                ok_ = (st.mu >= bounds[0] + 2.0 * s) & (st.mu <= bounds[1] - 2.0 * s)
            sel = np.flatnonzero(ok_ & (st.own <= d.own_threshold(R, conf)))
            if sel.size < min_keep:
                break
            R = fit(sel)
        return R

    R = refit(fit(kept), confidence, 2)
    return R, (refit(R, STRICT_CONFIDENCE, 3) if R[0] > 0 else R)


#: the patches one level of the level function reads its noise std from at most (a
#: random choice): a quarter of the whole-image fit's, the level function then costs
#: about what the covariance fit of one channel does (docs/noise.md)
#: correlated noise is removed at this many times its 2 x 2-scale std (:func:`coarse_sigma`):
#: camera noise is low-frequency, and the grouped method's thresholds, set for white
#: noise, see a fraction of it.  On PolyU's real photographs (develop cameras, 12 crops)
#: 2.5 / 3 / 3.5 gave +3.09 / +3.10 / +3.09 dB over the noisy input; the check cameras
#: +1.30 / +1.36 at 2.5 / 3 (``benchmarks/real_noise.py``, docs/noise.md)
COARSE_FACTOR = 3.0
#: a colour image whose chroma carries less than this fraction of the luminance's
#: finest-scale noise went through a camera's chroma noise reduction (white noise added
#: in RGB has the same std in every opponent channel; texture left in the estimate of a
#: white-noise image's luminance brought grass at sigma 2 to 0.22, PolyU's photographs read
#: 0 to 0.03 where the covariance fit missed their noise) ...
CHROMA_FRACTION = 0.1
#: ... and its noise is taken as correlated when the 2 x 2 scale reads at least this many
#: times the finest (white noise reads 1)
COARSE_RATIO = 2.0
#: the chroma is read on a central crop of at most this side
CHROMA_CROP = 1024


class Box2:
    """A 2-D array-like (sliced lazily) as the means of its 2 x 2 blocks.

    ``Box2(a)[ys, xs]`` reads only rows ``2 ys`` and columns ``2 xs`` of ``a`` (a
    ndarray, a Dask array or a lazy luminance), so the white-noise estimator, which
    samples blocks, reads a large image only where it samples."""

    def __init__(self, a):
        self.a = a
        self.shape = (a.shape[0] // 2, a.shape[1] // 2)
        self.ndim = 2
        self.dtype = np.dtype(np.float64)
        self.size = self.shape[0] * self.shape[1]

    def __getitem__(self, key):
        ys, xs = key
        y0, y1, _ = ys.indices(self.shape[0])
        x0, x1, _ = xs.indices(self.shape[1])
        block = np.asarray(self.a[2 * y0:2 * y1, 2 * x0:2 * x1], dtype=np.float64)
        h, w = block.shape[0] // 2, block.shape[1] // 2
        return block[:2 * h, :2 * w].reshape(h, 2, w, 2).mean(axis=(1, 3))

    def __array__(self, dtype=None, copy=None):
        out = self[0:self.shape[0], 0:self.shape[1]]
        return out if dtype is None else out.astype(dtype)


def coarse_sigma(luminance, bounds: tuple[float, float] | None = None) -> float:
    """Read the noise std at the 2 x 2 scale: twice the finest-scale std of block means.

    White noise reads its own std (the mean of 4 pixels has half of it); noise
    correlated over a few pixels (demosaicing, a camera's processing, JPEG) reads more,
    its low frequencies included.  ``luminance``: a 2-D array-like, sampled lazily."""
    return 2.0 * estimate_sigma_image(Box2(luminance), bounds=bounds)


def chroma_sigma(image) -> float:
    """Read the finest-scale noise std of a colour image's opponent chroma (the larger of two).

    On a central crop of at most :data:`CHROMA_CROP` pixels a side of the colour channels
    (H, W, 3); NaN for a grey image stored as colour (no chroma at all)."""
    H, W = image.shape[:2]
    h, w = min(H, CHROMA_CROP), min(W, CHROMA_CROP)
    y, x = (H - h) // 2, (W - w) // 2
    z = rgb_to_opponent(np.asarray(image[y:y + h, x:x + w, :3], dtype=np.float64))
    if not np.any(np.abs(z[..., 1:]) > 1e-9 * max(float(np.abs(z[..., 0]).max()), 1.0)):
        return float("nan")
    return max(estimate_sigma_image(z[..., 1]), estimate_sigma_image(z[..., 2]))


LEVEL_PATCHES = 5000


def _level_function(img: np.ndarray, p: int, max_patches: int, max_pixels: int,
                    block_size: int, seed: int, nlev: int = 6, frac: float = 0.3
                    ) -> tuple[np.ndarray, np.ndarray]:
    """The finest-scale noise std per brightness level of a 2-D image (``nlev``
    equal-count levels of the patch means; :func:`~kpca_denoise.core.noise.level_variances`,
    each from at most :data:`LEVEL_PATCHES` patches): ``(level means, stds)``, empty for
    an image too small."""
    st = PatchStats(sample_blocks(img, max_pixels, max(block_size, 8 * p), seed), p,
                     with_mean=True)
    min_keep = 40 * p * p
    nlev = min(nlev, int(st.t.size * frac) // min_keep)
    if nlev < 2:
        return np.zeros(0), np.zeros(0)
    m, v, _ = level_variances(st, nlev, frac, 0.9999, 10, min_keep,
                               min(max_patches, LEVEL_PATCHES), seed)
    return m, np.sqrt(np.maximum(v, 0.0))


def estimate_noise_model(image: np.ndarray, white_sigma: float, *, luminance=None,
                         bounds: tuple[float, float] | None = None, patch_size: int = 7,
                         lag: int = 3, max_patches: int = 20000, max_pixels: int = 1 << 20,
                         block_size: int = 256, random_state: int = 0,
                         kind: str = "auto",
                         luminance_bounds: tuple[float, float] | None = None) -> NoiseModel:
    """Measure the :class:`NoiseModel` of an image: white or correlated, and its level.

    The model of an image (H, W) or (H, W, C) (colour channels only: no alpha), given
    ``white_sigma``, the finest-scale estimate
    (:func:`~kpca_denoise.core.noise.estimate_sigma_image`, of the luminance for colour).

    Per channel the whole noise autocovariance is fitted (module docstring); pooled over
    the channels, the per-pixel variance and the neighbour correlation decide between
    'white' (``sigma = white_sigma``: white noise gets today's estimate exactly) and
    'correlated' (``sigma`` the pooled per-pixel std).  ``bounds``: the values each
    channel was clipped to (patches near them are left out).  ``luminance``: a 2-D
    array-like (sliced lazily) the level function is read from, for colour (default:
    the first channel).

    A camera's JPEG (its chroma noise reduction leaves the opponent chroma under
    :data:`CHROMA_FRACTION` of the luminance's finest-scale noise) carries mostly
    low-frequency noise that the fit can miss: such an image whose 2 x 2 scale reads
    :data:`COARSE_RATIO` times the finest is taken as correlated too, and its correlated
    noise is removed at :data:`COARSE_FACTOR` times its 2 x 2-scale std
    (:func:`coarse_sigma`) where that is above the level of its fitted autocovariance.
    Other correlated noise (grey images, chroma as noisy as the luminance) is removed at
    the fitted level.
    ``kind``: 'auto' decides; 'white' or 'correlated' takes the noise as that.
    ``luminance_bounds``: the values ``luminance`` takes where the channels are clipped."""
    if kind not in NOISE_KINDS:
        raise ValueError(f"kind must be one of {', '.join(NOISE_KINDS)}, got {kind!r}")
    # an array-like with slicing (a Dask array) is read only where sampled
    x = image if hasattr(image, "ndim") and hasattr(image, "__getitem__") else np.asarray(image)
    if min(x.shape[:2]) < 2 * patch_size or kind == "white":  # as measured
        return NoiseModel(kind="white", sigma=float(white_sigma), white_sigma=float(white_sigma))
    chans = [x] if x.ndim == 2 else [x[..., c] for c in range(x.shape[2])]
    kw = dict(max_patches=max_patches, max_pixels=max_pixels, block_size=block_size,
              seed=random_state)
    white = float(white_sigma)
    # the level function (of the luminance: one pass whatever the channels) and each
    # channel's covariance, on the threads (each its own: the same numbers), at most
    # FITS_AT_ONCE at a time
    tasks = [partial(_level_function, chans[0] if luminance is None else luminance,
                     patch_size, **kw)]
    tasks += [partial(channel_covariance, c, white, bounds, patch_size, lag, **kw)
              for c in chans]
    out: list = [None] * len(tasks)
    run_in_order(len(tasks), lambda i: tasks[i](), out.__setitem__, most=FITS_AT_ONCE)
    (levels, stds), R = out[0], [r for r in out[1:] if r is not None]
    R = [r for r in R if np.all(np.isfinite(r))]  # a fit with nothing to fit reads NaN
    r0 = float(np.mean([r[0] for r in R])) if R else 0.0
    stds = np.nan_to_num(np.asarray(stds, dtype=np.float64))
    d = _design(patch_size, lag)

    def corr(lags) -> float:
        k = [d.lags.index(lg) for lg in lags]
        return float(np.mean([r[k].mean() for r in R])) / r0 if r0 > 0 else 0.0

    neighbour, far = corr(((0, 1), (1, 0))), corr(((0, 3), (3, 0)))
    ratio = float(np.sqrt(r0)) / white if white > 0 and r0 > 0 else 1.0
    correlated = ratio >= CORRELATED_RATIO and neighbour - 2.0 * far >= CORRELATED_SHORT
    lum, lum_bounds = (chans[0], bounds) if luminance is None else (luminance, luminance_bounds)
    coarse = 0.0
    # a camera's chroma noise reduction leaves the chroma almost without noise: its noise
    # is the low-frequency luminance noise of a processed JPEG, which the fit can miss
    chroma = chroma_sigma(x) if len(chans) == 3 and white > 0 else float("nan")
    processed = bool(chroma < CHROMA_FRACTION * white)  # False for NaN
    if not correlated and processed and kind == "auto":
        coarse = coarse_sigma(lum, lum_bounds)
        correlated = coarse >= COARSE_RATIO * white
    correlated = correlated or kind == "correlated"
    sigma = max(float(np.sqrt(max(r0, 0.0))), white) if correlated else white
    effective = 0.0
    if correlated:
        effective = sigma * effective_factor(np.mean(R, axis=0), lag) if R else sigma
        if processed or kind == "correlated":
            coarse = coarse or coarse_sigma(lum, lum_bounds)
            effective = max(COARSE_FACTOR * coarse, effective)
    chroma = 0.0 if np.isnan(chroma) else chroma
    if luminance is not None and len(chans) > 1:
        levels = levels / np.sqrt(len(chans))  # the channels' mean
    rms = float(np.sqrt(np.mean(stds ** 2))) if stds.size else 0.0
    if correlated and rms > 0:
        stds = stds * (sigma / rms)  # the shape per level, the whole level overall
    # clipped noise is lower near the bounds: those levels say nothing of the growth
    free = np.ones(stds.size, bool) if bounds is None else (
        (levels >= bounds[0] + 2.0 * stds) & (levels <= bounds[1] - 2.0 * stds))
    st = stds[free]
    dependent = bool(st.size >= 2 and st[0] > 0 and st[-1] ** 2 >= SIGNAL_DEPENDENT_RATIO
                     * st[0] ** 2 and np.all(np.diff(st) > -0.1 * st[-1]))
    return NoiseModel(kind="correlated" if correlated else "white", sigma=sigma,
                      white_sigma=white, correlation=ratio if correlated else 1.0,
                      neighbour=neighbour, levels=tuple(float(v) for v in levels),
                      level_sigmas=tuple(float(v) for v in stds), signal_dependent=dependent,
                      effective=effective, coarse_sigma=coarse, chroma_sigma=chroma)
