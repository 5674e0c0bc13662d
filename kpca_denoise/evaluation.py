"""Evaluation and preview helpers: noise added to a clean image, PSNR and SSIM against
it, a patch set's samples side by side, the noise left in a result, and the text of a
Poisson-Gaussian noise model.
"""

from __future__ import annotations

import numpy as np

from .core.metrics import data_range_for, psnr, ssim
from .core.noise import estimate_sigma_image
from .working import cast_like, luminance


def add_noise(image: np.ndarray, sigma: float, seed: int = 0) -> np.ndarray:
    """Return the image plus white Gaussian noise of std ``sigma``.

    The image plus white Gaussian noise of std ``sigma`` (pixel units), float64, unclipped."""
    rng = np.random.default_rng(seed)
    a = np.asarray(image, dtype=np.float64)
    return a + rng.normal(0.0, sigma, a.shape)


#: elements per band when noise is added to a big image (a few MB of float64)
_NOISE_BAND = 1 << 20


def noisy_like(image: np.ndarray, sigma: float, seed: int = 0) -> np.ndarray:
    """Return the image plus Gaussian noise, in the image's own dtype.

    ``add_noise`` in the image's own dtype (rounded and clipped for integers), built a
    band of rows at a time: the same values, without float64 copies of the whole image
    (the generator's stream does not depend on how the draws are split)."""
    a = np.asarray(image)
    if a.ndim == 0 or a.size == 0:
        return cast_like(add_noise(a, sigma, seed), a)
    rng = np.random.default_rng(seed)
    out = np.empty(a.shape, a.dtype)
    rows = max(1, _NOISE_BAND // max(1, a[0].size))
    for y0 in range(0, a.shape[0], rows):
        band = a[y0:y0 + rows]
        out[y0:y0 + rows] = cast_like(band.astype(np.float64) + rng.normal(0.0, sigma, band.shape), a)
    return out


def evaluate(reference: np.ndarray, estimate: np.ndarray, dtype=None,
             patchset: bool = False) -> dict:
    """Measure PSNR (dB) and SSIM of ``estimate`` against a clean ``reference``.

    PSNR (dB) and SSIM of ``estimate`` against a clean ``reference``; a patch set's
    (N, h, w) SSIM is that of its samples side by side (:func:`sample_mosaic`), as the
    window shows them (it read (N, h, w) as an image of N rows and w channels).  Both
    must be real, finite and of one shape (NaN gave NaN, complex lost its imaginary
    part, an empty image divided by zero)."""
    for what, a in (("reference", reference), ("estimate", estimate)):
        a = np.asarray(a)
        if a.dtype.kind not in "uif" or a.size == 0:
            raise ValueError(f"the {what} must be a non-empty array of real numbers, got "
                             f"{a.dtype} of shape {a.shape}")
        if a.dtype.kind == "f" and not np.isfinite(a).all():
            raise ValueError(f"the {what} contains NaN or Inf; metrics need finite pixels")
    if np.shape(reference) != np.shape(estimate):
        raise ValueError(f"the reference is {np.shape(reference)} and the estimate "
                         f"{np.shape(estimate)}; metrics compare arrays of one shape")
    if patchset and np.ndim(reference) != 3:
        raise ValueError(f"a patch set is (N, h, w), got shape {np.shape(reference)}")
    dtype = np.asarray(reference).dtype if dtype is None else dtype
    rng = data_range_for(dtype, reference)
    s = ssim(sample_mosaic(reference), sample_mosaic(estimate), rng) if patchset else \
        ssim(reference, estimate, rng)
    return {"psnr": psnr(reference, estimate, rng), "ssim": s}


def sample_mosaic(a: np.ndarray, gap: int = 0, fill: float = 0.0,
                  max_samples: int | None = None) -> np.ndarray:
    """Lay the samples of a patch set (N, h, w) side by side on one canvas.

    The samples of a patch set (N, h, w) (the first ``max_samples``) side by side in
    rows of ``ceil(sqrt(N))``, ``gap`` pixels of ``fill`` between them and after the
    last: the canvas its metrics are measured on (gap-free) and the window draws."""
    a = np.asarray(a)
    n = a.shape[0] if max_samples is None else min(a.shape[0], max_samples)
    h, w = a.shape[1:3]
    cols = int(np.ceil(np.sqrt(n)))
    rows = int(np.ceil(n / cols))
    out = np.full((rows * (h + gap) - gap, cols * (w + gap) - gap), fill, dtype=np.float64)
    for i in range(n):
        r, c = divmod(i, cols)
        out[r * (h + gap):r * (h + gap) + h, c * (w + gap):c * (w + gap) + w] = a[i]
    return out


def noise_model_text(model: dict, *, ascii: bool = False) -> str:
    """Format a Poisson-Gaussian noise model as text, such as 'gain 64.2 · σ 331'.

    'gain 64.2 · σ 331' (``ascii``: 'gain 64.2, sigma 331', for a console of any
    encoding) for the ``noise_model`` an image's stats report under the
    Poisson-Gaussian model (per colour channel, separated by '/')."""
    def join(vals) -> str:
        return " / ".join(f"{float(v):.3g}" for v in vals)
    sep, sigma = (", ", "sigma") if ascii else (" · ", "σ")
    return f"gain {join(model['gain'])}{sep}{sigma} {join(model['sigma'])}"


def noise_notes(name: str, stats: list) -> list[str]:
    """Return the command line's notes on an input's noise.

    The command line's notes on an input's noise from its pages' stats (``{}`` where a
    page has none): correlated noise and the level removed, a hint on the noise model,
    and under the Poisson-Gaussian model its gain and sigma (the table's sigma is then
    the stabilised domain's 1)."""
    from .core.nlf import NoiseModel

    notes = []
    measured = next((s["noise"] for s in stats if s.get("noise", {}).get("kind") == "correlated"),
                    None)
    if measured is not None:  # more than the finest scale shows: say what was removed
        notes.append(f"{name}: {NoiseModel.from_dict(measured).describe(ascii=True)}")
    hint = next((s["hint"] for s in stats if s.get("hint")), None)
    if hint is not None:
        notes.append(f"{name}: {hint}")
    found = [(k, s["noise_model"]) for k, s in enumerate(stats) if s.get("noise_model")]
    if found:
        k, model = found[0]
        where = (f" (page {k + 1} of {len(stats)}; every page's in the JSON report)"
                 if len(stats) > 1 else "")
        notes.append(f"{name}: Poisson-Gaussian noise, {noise_model_text(model, ascii=True)}"
                     f"{where}; denoised at sigma 1 after the variance-stabilising transform")
    return notes


def rank_notes(name: str, stats: list) -> list[str]:
    """Return the command line's note on explicit ranks no group can hold.

    The command line's note on explicit ranks that no group can hold (the grouped
    method: a group of ``n`` patches has at most ``n - 1`` components), from the first
    page's stats: such a rank keeps every component, and the noise with them."""
    grouped = (stats[0].get("grouped") or [{}])[0] if stats else {}
    n = grouped.get("params", {}).get("group_size")
    over = sorted(r for r in grouped.get("effective_rank", {}) if r is not None and n
                  and r > n - 1)
    if not over:
        return []
    which = ", ".join(str(r) for r in over)
    return [f"{name}: rank{'s' if len(over) > 1 else ''} {which} above what a group of {n} "
            f"patches holds ({n - 1} components): every component is kept, the noise too; "
            f"use ranks up to {n - 1}"]


def remaining_noise(image: np.ndarray) -> float:
    """Estimated noise std left in an image (luminance for colour), pixel units.

    Bounded memory: the estimator reads a bounded sample of the image."""
    return estimate_sigma_image(luminance(image))
