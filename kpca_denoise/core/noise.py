"""Noise-level estimation: additive white Gaussian noise, and Poisson-Gaussian noise.

``estimate_sigma_pca`` follows Chen, Zhu & Heng (2015), "An efficient
statistical method for image noise level estimation" (ICCV): the eigenvalues
of the covariance of many patches split into signal directions (large) and
noise-only directions whose eigenvalues are all about sigma^2.  Starting from
all eigenvalues and dropping the largest one at a time, the first tail whose
mean is not above its median is taken as the noise-only set.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from scipy.ndimage import correlate, gaussian_filter, maximum_filter, uniform_filter
from scipy.stats import chi2

__all__ = ["estimate_sigma_pca", "estimate_sigma_image", "estimate_poisson_gaussian"]


def estimate_sigma_pca(samples: np.ndarray) -> float:
    """Noise standard deviation from samples as rows, shape (N, d), d >= 4.

    Works for image patches and for patch sets (digits) alike; returns 0.0
    for noise-free data with exactly flat directions.
    """
    X = np.asarray(samples, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] < 2 or X.shape[1] < 4:
        raise ValueError(
            f"noise estimation needs at least 2 samples of dimension >= 4, got shape {X.shape}"
        )
    Xc = X - X.mean(axis=0)
    C = Xc.T @ Xc / max(X.shape[0] - 1, 1)
    lam = np.sort(np.clip(np.linalg.eigvalsh(C), 0.0, None))[::-1]
    d = lam.size
    for i in range(d):
        tail = lam[i:]
        if tail.mean() <= np.median(tail):
            return float(np.sqrt(tail.mean()))
    return float(np.sqrt(lam[-1]))


def estimate_sigma_image(image: np.ndarray, *, patch_size: int = 7, max_patches: int = 50000,
                         weak_texture_fraction: float = 0.3, iterations: int = 5,
                         confidence: float = 0.999, random_state: int = 0,
                         max_pixels: int = 1 << 20, block_size: int = 256,
                         bounds: tuple[float, float] | None = None) -> float:
    """Noise standard deviation of a single-channel image (H, W), in its units.

    Texture leaks into the smallest eigenvalues of the patch covariance and
    biases the PCA estimate upwards, so only weakly textured patches enter it,
    chosen in two steps:

    1. start: the ``weak_texture_fraction`` of patches with the least gradient
       energy of the image smoothed with a Gaussian of std 2 px (where the noise
       is mostly averaged away);
    2. iterate (Liu, Tanaka & Okutomi 2013, "Single-image noise level estimation
       for blind denoising", IEEE TIP): keep the patches whose own gradient
       energy (sum of squared horizontal and vertical pixel differences) is
       what pure noise of the current estimate would give with probability
       ``confidence`` (each difference has variance 2 sigma^2; the chi-square
       quantile ignores the correlation between neighbouring differences, and
       the high ``confidence`` compensates the slight downward bias that the cut
       of the upper noise tail causes), re-estimate, repeat ``iterations`` times
       or until the estimate moves by less than 0.1 %.

    ``bounds=(lo, hi)``: the values the pixels were clipped to (0 and 255 for an
    8-bit file).  Near a bound the noise is clipped, which lowers its variance:
    patches whose mean is within ``2 sigma`` of a bound are left out.  Measured
    with noise of std 5 / 15 / 25 / 50 added and clipped to 8 bits: camera reads
    5.0 / 14.6 / 23.4 / 42.7 without the bounds, 5.1 / 15.4 / 25.4 / 49.4 with
    them; astronaut's luminance 3.2 / 12.8 / 21.0 / 40.3 without, 5.6 / 14.9 /
    23.9 / 45.1 with (a channel clipped alone, as in saturated colours, is not
    seen in the luminance).

    Memory is bounded whatever the image size: the selection works on
    per-position statistics (box sums), only the at most ``max_patches``
    patches that enter a covariance are built, and an image of more than
    ``max_pixels`` pixels is read through a random sample of
    ``block_size`` x ``block_size`` blocks holding about ``max_pixels``
    pixels (a fixed seed: the same image gives the same estimate).

    Measured (``python -m benchmarks.noise_estimate``) on camera, coins, moon,
    grass, gravel and astronaut (grey) at sigma 5/15/25/50: mean relative error
    1.9 % (step 1 alone: 10.2 %; all patches: more); the worst case, grass at
    sigma 5, reads 6.1 (step 1 alone: 11.8); grass at sigma 15 reads 15.3
    (step 1 alone: 18.3).
    """
    # a 2-D array-like that slices lazily (a colour image's luminance) stays one:
    # only the sampled blocks are ever converted
    img = image if getattr(image, "ndim", None) == 2 and hasattr(image, "__getitem__") \
        else np.asarray(image)
    if img.ndim != 2:
        raise ValueError(f"expected a single-channel (H, W) image, got shape {tuple(img.shape)}")
    H, W = img.shape
    p = min(patch_size, H, W)
    # the covariance needs many more patches than dimensions: at N/d = 24
    # (40x40 pure noise, 7x7) the spread of the sample eigenvalues biased the
    # estimate 9 % low; N/d >= 40 keeps it within a few per cent
    while p > 2 and (H - p + 1) * (W - p + 1) < 40 * p * p:
        p -= 1
    if p < 2:
        raise ValueError(f"image of shape {img.shape} is too small to estimate noise")
    blocks = sample_blocks(img, max_pixels, max(block_size, 8 * p), random_state)
    st = PatchStats(blocks, p, with_mean=bounds is not None)
    t, own, mu = st.t, st.own, st.mu
    n_all = t.size

    def unclipped(sigma: float) -> np.ndarray | bool:
        """Patches whose mean is at least 2 sigma inside the clipping bounds."""
        if mu is None:
            return True
        return (mu >= bounds[0] + 2.0 * sigma) & (mu <= bounds[1] - 2.0 * sigma)

    # with fewer selected samples per dimension the spread of the sample
    # eigenvalues (Marchenko-Pastur) biases the estimate low: select only when
    # plenty remain
    min_keep = 50 * p * p
    pca_of = st.pca(max_patches, np.random.default_rng(random_state))
    if not (0 < weak_texture_fraction < 1 and n_all * weak_texture_fraction >= min_keep):
        return pca_of(np.arange(n_all))
    sigma = pca_of(np.flatnonzero(t <= np.quantile(t, weak_texture_fraction)))
    if mu is not None:
        # the first estimate is low where the noise is clipped: leave out the
        # patches near a bound by it, then let the iterations refine
        ok = unclipped(sigma)
        if ok.sum() * weak_texture_fraction >= min_keep:
            sigma = pca_of(np.flatnonzero(ok & (t <= np.quantile(t[ok], weak_texture_fraction))))
    return refine_sigma(sigma, pca_of, own, unclipped, float(chi2.ppf(confidence, 2 * p * (p - 1))),
                   iterations, min_keep)[0]


class PatchStats:
    """Box-sum statistics of every patch position of sampled blocks, patches built on demand.

    Per patch position of the sampled ``blocks`` (p x p patches, flat positions
    numbered block after block, row-major within a block): ``t``, the gradient
    energy of the block smoothed with a Gaussian of std 2 px, summed over the
    patch; ``own``, the patch's own gradient energy (sum of squared horizontal and
    vertical pixel differences); ``mu``, the patch mean (if ``with_mean``).  All
    are box sums: no patch is built until :meth:`rows` asks for it."""

    def __init__(self, blocks: list[np.ndarray], p: int, *, with_mean: bool) -> None:
        self.blocks, self.p = blocks, p
        c = p // 2  # the filter is centred: the patch at (y, x) has its centre at y + c
        t_parts, own_parts, mu_parts, offsets = [], [], [], [0]
        for b in blocks:
            h, w = b.shape[0] - p + 1, b.shape[1] - p + 1
            gy, gx = np.gradient(gaussian_filter(b, 2.0))
            t_parts.append(uniform_filter(gx * gx + gy * gy, p)[c:c + h, c:c + w].ravel())
            dx2 = np.square(np.diff(b, axis=1))
            dy2 = np.square(np.diff(b, axis=0))
            own_parts.append((sliding_window_view(dx2, (p, p - 1)).sum(axis=(2, 3))
                              + sliding_window_view(dy2, (p - 1, p)).sum(axis=(2, 3))).ravel())
            if with_mean:
                mu_parts.append(uniform_filter(b, p)[c:c + h, c:c + w].ravel())
            offsets.append(offsets[-1] + h * w)
        self.t = np.concatenate(t_parts)
        self.own = np.concatenate(own_parts)
        self.mu = np.concatenate(mu_parts) if with_mean else None
        self.offsets = offsets

    def rows(self, idx: np.ndarray) -> np.ndarray:
        """The patches at flat positions ``idx`` (in that order), shape (len(idx), p*p)."""
        p = self.p
        out = np.empty((idx.size, p * p))
        which = np.searchsorted(self.offsets, idx, side="right") - 1
        for k, b in enumerate(self.blocks):
            m = which == k
            if m.any():
                local = idx[m] - self.offsets[k]
                wk = b.shape[1] - p + 1
                out[m] = sliding_window_view(b, (p, p))[local // wk, local % wk].reshape(-1, p * p)
        return out

    def pca(self, max_patches: int, rng: np.random.Generator, *, without_mean: bool = False):
        """Return ``pca_of(idx)``, the noise estimate of the patches at ``idx``.

        :func:`estimate_sigma_pca` of the patches at ``idx`` (a random ``max_patches``
        of them if more).  ``without_mean``: of their
        components orthogonal to the constant patch, for patches chosen by their mean,
        whose spread along the constant direction the choice has narrowed."""
        d = self.p * self.p
        # an orthonormal basis of the patches orthogonal to the constant one
        basis = np.linalg.qr(np.eye(d) - 1.0 / d)[0][:, :d - 1] if without_mean else None

        def pca_of(idx: np.ndarray) -> float:
            if idx.size > max_patches:
                idx = idx[rng.choice(idx.size, max_patches, replace=False)]
            x = self.rows(idx)
            return estimate_sigma_pca(x if basis is None else x @ basis)
        return pca_of


def refine_sigma(sigma: float, pca_of, own: np.ndarray, allowed, quantile: float,
                 iterations: int, min_keep: int) -> tuple[float, np.ndarray | None]:
    """Refine a noise estimate on the patches pure noise of it would give.

    Liu, Tanaka & Okutomi's iteration: keep the positions whose own gradient energy
    ``own`` pure noise of the current ``sigma`` would give (``<= 2 sigma^2 quantile``)
    and that ``allowed(sigma)`` lets in, re-estimate, repeat until the estimate moves
    by less than 0.1 % (or fewer than ``min_keep`` would be kept).  Returns the estimate
    and the positions behind it (None if the first selection was already too small)."""
    kept = None
    for _ in range(iterations):
        sel = (own <= 2.0 * sigma * sigma * quantile) & allowed(sigma)
        if sel.sum() < min_keep:
            break
        kept = np.flatnonzero(sel)
        new = pca_of(kept)
        converged = abs(new - sigma) <= 1e-3 * sigma
        sigma = new
        if converged:
            break
    return sigma, kept


def sample_blocks(img: np.ndarray, max_pixels: int, side: int, seed: int) -> list[np.ndarray]:
    """Sample an image as float64 blocks: whole if small, else random blocks.

    The whole image if it has at most ``max_pixels`` pixels, else about ``max_pixels /
    side^2`` random ``side`` x ``side`` blocks of it."""
    H, W = img.shape
    ny, nx = H // side, W // side
    if H * W <= max_pixels or ny * nx < 2:
        return [np.asarray(img, dtype=np.float64)]
    k = min(ny * nx, max(2, max_pixels // (side * side)))
    # a generator of its own: small images keep the sequence of the patch subsampling
    pick = np.sort(np.random.default_rng([seed, 1]).choice(ny * nx, k, replace=False))
    return [np.asarray(img[(j // nx) * side:(j // nx + 1) * side,
                           (j % nx) * side:(j % nx + 1) * side], dtype=np.float64) for j in pick]


# -- Poisson-Gaussian noise ---------------------------------------------------------

# second-difference high-pass with unit energy: it cancels constants and linear ramps,
# so on smooth signal its output has the local noise variance
_HIGH_PASS = np.array([[1.0, -2.0, 1.0], [-2.0, 4.0, -2.0], [1.0, -2.0, 1.0]]) / 6.0


def _fit_line(m: np.ndarray, v: np.ndarray, w: np.ndarray, gain: float | None,
              sigma: float | None) -> tuple[float, float]:
    """Weighted least squares ``v = a m + b`` with ``a`` and/or ``b`` held if given."""
    if gain is not None and sigma is not None:
        return gain, sigma * sigma
    if gain is not None:
        return gain, float(np.sum(w * (v - gain * m)) / np.sum(w))
    if sigma is not None:
        b = sigma * sigma
        return float(np.sum(w * m * (v - b)) / max(np.sum(w * m * m), 1e-300)), b
    A = np.stack([m, np.ones_like(m)], axis=1) * np.sqrt(w)[:, None]
    a, b = np.linalg.lstsq(A, v * np.sqrt(w), rcond=None)[0]
    return float(a), float(b)


def block_stats(img: np.ndarray, block: int, band: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """Measure each block's mean and high-pass mean square.

    Per ``block`` x ``block`` block of the image without its 1-px border: the mean and
    the mean square of the high-pass, in row-major block order.  Computed a band of
    ``band`` rows at a time (each band read with the row above and below it, which the
    3x3 filter needs), so that no float64 copy of the whole image is made; the result
    is the whole-image computation's."""
    H = ((img.shape[0] - 2) // block) * block
    W = ((img.shape[1] - 2) // block) * block
    band = max(block, band // block * block)
    ms, vs = [], []
    for s in range(0, H, band):
        e = min(s + band, H)
        sl = np.asarray(img[s:e + 2], dtype=np.float64)  # z rows s..e are img rows s+1..e+1
        r = correlate(sl, _HIGH_PASS, mode="nearest")[1:-1, 1:-1]
        z = sl[1:-1, 1:-1]
        h = e - s
        ms.append(z[:h, :W].reshape(h // block, block, W // block, block).mean(axis=(1, 3)).ravel())
        vs.append((r[:h, :W] ** 2).reshape(h // block, block, W // block, block)
                  .mean(axis=(1, 3)).ravel())
    return np.concatenate(ms), np.concatenate(vs)


def estimate_poisson_gaussian(image: np.ndarray, *, gain: float | None = None,
                              sigma: float | None = None, patch_size: int = 5, levels: int = 8,
                              weak_texture_fraction: float = 0.3, iterations: int = 10,
                              confidence: float = 0.9999, max_patches: int = 20000,
                              max_pixels: int = 1 << 20, block_size: int = 256,
                              random_state: int = 0, block: int = 8,
                              exclude: np.ndarray | None = None) -> tuple[float, float]:
    """Poisson gain ``alpha`` and Gaussian std ``sigma`` of a single-channel image (H, W).

    The model is ``z = alpha * Poisson(y / alpha) + N(0, sigma^2)``: the noise variance
    at signal ``y`` is ``alpha * y + sigma^2`` (Foi, Trimeche, Katkovnik & Egiazarian
    2008, "Practical Poissonian-Gaussian noise modeling and fitting for single-image
    raw-data", IEEE TIP).  Two fits of the line are made:

    * coarse: per ``block`` x ``block`` block, the mean and the mean square of a
      unit-energy second-difference high-pass (the noise variance on smooth signal,
      more on texture), a line through per-level medians, refined by dropping the
      blocks that pure noise of the current line would not give (:func:`block_fit`);
      nearly unbiased on smooth images, but texture everywhere (grass) reads as noise;
    * level-wise (:func:`level_fit`): the ``patch_size`` x ``patch_size`` patches
      split by their mean into ``levels`` equal-count levels, each level's noise std
      read as :func:`estimate_sigma_image` reads a whole image (the PCA tail of the
      ``weak_texture_fraction`` least textured patches, refined by a noise-only test
      at ``confidence``), then weighted least squares through the levels.  Texture
      takes a few principal directions and leaves the tail alone, but the selection
      leans low by about 1 % of the std.

    Texture can only raise the high-pass energy, so the coarse line is returned
    unless it predicts a noise std more than 3 % above the level-wise line's, on
    average over the levels (texture), or more than 10 % below it (flat blocks, of
    clipped or empty areas, pulled it down; the level-wise fit leaves levels that read
    no noise out); then the level-wise line is.  An image too
    small for three levels of ``40 patch_size^2`` weakly textured patches (under
    about 104 x 104 px) gets the coarse line.

    Memory is bounded as in :func:`estimate_sigma_image`: an image of more than
    ``max_pixels`` pixels is read through random ``block_size`` blocks (fixed seed),
    and the coarse statistics a band of rows at a time.

    ``exclude``: a boolean (H, W) mask of pixels to leave out of both fits (clipped
    highlights, hot pixels of a camera mosaic): the blocks and patches that touch one
    (the blocks with the high-pass's 1-px reach) are not used.

    ``gain`` or ``sigma`` given: only the other one is fitted.  Returns ``(alpha,
    sigma)`` in the image's units; ``alpha`` is at least ``1e-4`` of the mean level
    (so that the transform stays defined), ``sigma`` >= 0.  Accuracy:
    ``python -m benchmarks.poisson --estimate``.
    """
    img = np.asarray(image)  # in its own dtype: converted a block / band at a time
    if img.ndim != 2:
        raise ValueError(f"Poisson-Gaussian estimation needs a 2-D image, got shape {img.shape}")
    if gain is not None and sigma is not None:
        return float(gain), float(sigma)  # nothing to estimate: any size will do
    if min(img.shape) < block + 2:
        raise ValueError(
            f"image {img.shape[1]}x{img.shape[0]} is too small to estimate its Poisson gain and "
            f"Gaussian sigma (at least {block + 2} px a side); give both")
    coarse = block_fit(img, block, gain, sigma, iterations, 0.999, exclude)
    fine = level_fit(img, gain, sigma, patch_size, levels, weak_texture_fraction, iterations,
                      confidence, max_patches, max_pixels, block_size, random_state, exclude)
    if fine is not None:
        (a, s), m = fine
        fv = a * m + s * s
        ratio = float(np.mean(np.sqrt(np.maximum(coarse[0] * m + coarse[1] ** 2, 0.0)
                                      / np.maximum(fv, 1e-12 * float(np.max(fv))))))
        if not COARSE_LOW <= ratio <= TEXTURE_MARGIN:
            return a, s
    return coarse


#: the coarse Poisson-Gaussian line gives way to the level-wise one when it predicts a
#: noise std this much higher on average (texture read as noise).  Of 1.03 and 1.06,
#: 1.03 read the development images better (mean error of the predicted std 5.4 against
#: 6.2 % on 256 crops) and the fourteen outside photographs of the README as well.
TEXTURE_MARGIN = 1.03
#: ... or this much lower: flat blocks (clipped, an empty background) pulled it down,
#: which the level-wise fit, leaving flat levels out, does not suffer.  The lowest
#: ratio over the development and outside images at gains 1 / 4 / 16 is 0.92 (hubble's
#: sky at gain 1), so none of them changes side.
COARSE_LOW = 0.9


def level_fit(img: np.ndarray, gain: float | None, sigma: float | None, p: int, levels: int,
              frac: float, iterations: int, confidence: float, max_patches: int,
              max_pixels: int, block_size: int, seed: int, exclude: np.ndarray | None = None
              ) -> tuple[tuple[float, float], np.ndarray] | None:
    """Fit the Poisson-Gaussian noise line level by level of patch mean.

    The level-wise fit of :func:`estimate_poisson_gaussian`: ``((alpha, sigma),
    level means)``, or None for an image too small for three levels.  ``exclude``: the
    pixels whose patches are left out."""
    min_keep = 40 * p * p
    H, W = img.shape
    if min(H, W) < 2 * p or min(H * W, max_pixels) * frac < 3 * min_keep:
        return None
    side = max(block_size, 8 * p)
    st = PatchStats(sample_blocks(img, max_pixels, side, seed), p, with_mean=True)
    ok = None
    if exclude is not None:  # the same blocks of the mask: a patch touching it is left out
        ok = PatchStats(sample_blocks(np.asarray(exclude, dtype=np.float64), max_pixels, side,
                                      seed), p, with_mean=True).mu < 1e-9
    nlev = min(levels, int((st.t.size if ok is None else int(ok.sum())) * frac) // min_keep)
    if nlev < 3:
        return None
    m, v, n = level_variances(st, nlev, frac, confidence, iterations, min_keep, max_patches,
                               seed, ok)
    # a level that reads no noise at all is flat (clipped black or white, an empty
    # background): it says nothing about the line
    flat = v <= 1e-9 * float(np.max(v))
    if np.count_nonzero(~flat) < 3:
        return None
    m, v, n = m[~flat], v[~flat], n[~flat]
    floor = 1e-4 * max(float(np.mean(np.abs(st.mu))), 1.0)
    # a level's variance estimate has variance ~ 2 v^2 / patches (weights in units of
    # the median variance, so that no scale of pixel values under- or overflows them);
    # a level that reads much less noise than the others must not take all the weight
    scale = float(np.median(v))
    w = n.copy()
    for _ in range(5):
        a, b = _fit_bounded(m, v, w, gain, sigma, floor)
        w = n / np.maximum((a * m + b) / scale, 1e-2) ** 2
    return ((float(gain) if gain is not None else max(a, floor)), float(np.sqrt(max(b, 0.0)))), m


def level_variances(st: "PatchStats", nlev: int, frac: float, confidence: float,
                    iterations: int, min_keep: int, max_patches: int, seed: int,
                    ok: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Estimate the noise variance per level of patch mean.

    Per level of patch mean (``nlev`` equal-count levels): the mean of the patches
    the noise estimate used, the noise variance, and how many patches it used.  ``ok``:
    the patch positions that may be used (None: all)."""
    p = st.p
    quantile = float(chi2.ppf(confidence, 2 * p * (p - 1)))
    order = np.argsort(st.mu, kind="stable")  # equal counts even where levels tie
    if ok is not None:
        order = order[ok[order]]
    cuts = np.linspace(0, order.size, nlev + 1).astype(np.int64)
    pca_of = st.pca(max_patches, np.random.default_rng(seed), without_mean=True)
    m, v, n = [], [], []
    for k in range(nlev):
        ids = order[cuts[k]:cuts[k + 1]]
        tk = st.t[ids]
        used = ids[tk <= np.quantile(tk, frac)]
        s, kept = refine_sigma(pca_of(used), lambda i, ids=ids: pca_of(ids[i]), st.own[ids],
                          lambda _s: True, quantile, iterations, min_keep)
        if kept is not None:
            used = ids[kept]
        m.append(float(st.mu[used].mean()))
        v.append(s * s)
        n.append(used.size)
    return np.array(m), np.array(v), np.array(n, dtype=np.float64)


def _fit_bounded(m: np.ndarray, v: np.ndarray, w: np.ndarray, gain: float | None,
                 sigma: float | None, floor: float) -> tuple[float, float]:
    """:func:`_fit_line` with ``b = sigma^2 >= 0`` and ``a >= floor``: a fitted value
    past its bound is held there and the other refitted."""
    a, b = _fit_line(m, v, w, gain, sigma)
    if sigma is None and b < 0:
        a, b = _fit_line(m, v, w, gain, 0.0)
    if gain is None and a < floor:
        a, b = _fit_line(m, v, w, floor, sigma)
        b = max(b, 0.0)
    return a, b


def block_fit(img: np.ndarray, block: int, gain: float | None, sigma: float | None,
              iterations: int, confidence: float,
              exclude: np.ndarray | None = None) -> tuple[float, float]:
    """Fit the Poisson-Gaussian noise line on blocks' high-pass variances.

    The coarse fit of :func:`estimate_poisson_gaussian`: per ``block`` x ``block``
    block, the mean and the mean square of a unit-energy second-difference high-pass
    (the noise variance on smooth signal, more on texture); a line through per-level
    medians, then blocks whose variance is more than pure noise of the current line
    would give with probability ``confidence`` are dropped and the line is refitted
    (weights ``1 / variance^2``), until it stops moving.  ``exclude``: pixels whose
    blocks (with the high-pass's 1-px reach) are left out."""
    m, v = block_stats(img, block)
    if exclude is not None:
        near = maximum_filter(np.asarray(exclude, dtype=np.float64), size=3, mode="nearest")
        keep = block_stats(near, block)[0] <= 0
        if keep.sum() >= 10:
            m, v = m[keep], v[keep]
    # effective degrees of freedom of a block's mean square: the high-pass outputs of
    # neighbouring pixels are correlated (sum of squared autocorrelations)
    rho = correlate(np.pad(_HIGH_PASS, 2), _HIGH_PASS, mode="constant")
    dof = block * block / float(np.sum(rho * rho))
    q = float(chi2.ppf(confidence, dof) / dof)
    # start: per intensity level (equal-count bins), the median block variance
    nb = int(np.clip(m.size // 30, 2, 16))
    edges = np.quantile(m, np.linspace(0.0, 1.0, nb + 1))
    idx = np.clip(np.searchsorted(edges, m, side="right") - 1, 0, nb - 1)
    lv = np.array([(np.median(m[idx == i]), np.median(v[idx == i])) for i in range(nb)
                   if np.any(idx == i)])
    a, b = _fit_line(lv[:, 0], lv[:, 1], np.ones(len(lv)), gain, sigma)
    floor = 1e-4 * max(float(np.mean(np.abs(m))), 1.0)
    for _ in range(iterations):
        pred = np.maximum(a * m + b, 1e-12)
        sel = v <= q * pred
        if sel.sum() < 10:
            break
        a_new, b_new = _fit_line(m[sel], v[sel], 1.0 / pred[sel] ** 2, gain, sigma)
        moved = abs(a_new - a) + abs(b_new - b) / max(float(np.mean(pred)), 1e-12)
        a, b = a_new, b_new
        if moved <= 1e-4 * max(abs(a), floor):
            break
    return (float(gain) if gain is not None else max(float(a), floor)), float(np.sqrt(max(b, 0.0)))
