"""The working space of the denoiser and the value ranges it reads.

An image is denoised as float64 in its working form (:func:`to_working`): colour in
the opponent space, alpha set aside, a stabiliser applied where the noise model asks;
:func:`from_working` brings a result back to the input's shape and dtype.  The ranges
(:func:`working_range`, :func:`nominal_range`, :func:`guide_range`) are what the
grouped method's guide and thresholds measure values against.
"""


from __future__ import annotations


import numpy as np

from .core.cfa import PlaneStabiliser
from .core.color import OPPONENT, opponent_to_rgb, rgb_to_opponent

__all__ = ["to_working", "from_working", "cast_like", "colour_part", "channels", "luminance",
           "luminance_bounds", "LazyLuminance", "working_range", "NOMINAL_RANGES", "nominal_range",
           "guide_range"]

#: rows converted to float64 at a time when a whole image is read (luminance)
_ROWS = 256


# -- the working space ----------------------------------------------------------------


def to_working(image: np.ndarray, vst=None) -> tuple[np.ndarray, np.ndarray | None, bool]:
    """Convert an image to the float64 channels the denoiser works on.

    (H, W[, C]) any dtype -> (H, W, c) float64 channels to denoise, alpha, is_colour.

    Colour goes to the orthonormal opponent space; alpha is kept aside untouched.
    A variance-stabilising transform ``vst`` applies to each colour channel first; a
    camera mosaic's planes (:class:`~kpca_denoise.core.cfa.PlaneStabiliser`) are all
    stabilised and decorrelated (its pattern's sum and differences; no alpha).
    """
    a = np.asarray(image)
    if isinstance(vst, PlaneStabiliser):
        return vst.decorrelate(vst.forward(a)), None, False
    if a.ndim == 2:
        a = a[..., None]
    if a.ndim == 3 and a.shape[2] in (1, 2, 3, 4):
        colour = colour_part(a)
        alpha = a[..., -1].copy() if colour is not a else None
        a = colour
        if vst is not None:
            a = vst.forward(a)
        if a.shape[2] == 1:
            return a.astype(np.float64), alpha, False
        return rgb_to_opponent(a), alpha, True
    raise ValueError(
        f"expected a grayscale (H, W) or colour (H, W, 3|4) image, got shape {a.shape}"
    )


def from_working(work: np.ndarray, alpha, colour: bool, like: np.ndarray, vst=None) -> np.ndarray:
    """Bring working channels back to the shape and dtype of the input ``like``."""
    out = opponent_to_rgb(work) if colour else work
    if isinstance(vst, PlaneStabiliser):
        out = vst.correlate(out)
    if vst is not None:
        out = vst.inverse(out)  # the exact unbiased inverse, per colour channel
    if like.ndim == 2:
        out = out[..., 0]
    if alpha is not None:
        out = np.concatenate([out, alpha[..., None].astype(np.float64)], axis=-1)
    return cast_like(out, like)


def cast_like(values: np.ndarray, like: np.ndarray) -> np.ndarray:
    """Values in ``like``'s dtype: rounded and clipped to the range of integer types.

    Values already of that dtype are returned as they are, not copied: rounding
    and clipping a whole 81 Mpx image took 4 bytes per pixel of temporaries.
    """
    dt = like.dtype
    if np.asarray(values).dtype == dt:
        return np.asarray(values)
    if np.issubdtype(dt, np.integer):
        info = np.iinfo(dt)
        return np.clip(np.rint(values), info.min, info.max).astype(dt)
    return np.asarray(values).astype(dt)


def colour_part(image: np.ndarray) -> np.ndarray:
    """Return an image without its alpha channel.

    An (H, W, 2|4) image without its alpha channel (a view); any other image itself."""
    a = np.asarray(image)
    return a[..., :-1] if a.ndim == 3 and a.shape[2] in (2, 4) else a


def channels(image: np.ndarray) -> int:
    """Channels the methods denoise: 3 for colour (with or without alpha), else 1."""
    a = np.asarray(image)
    if a.ndim == 2 or (a.ndim == 3 and a.shape[2] in (1, 2)):
        return 1
    if a.ndim == 3 and a.shape[2] in (3, 4):
        return 3
    to_working(a[:1, :1])  # raises the message for a bad shape
    return 1


def luminance(image: np.ndarray):
    """Return the first working channel of an image, for the noise estimator.

    The first working channel (H, W), for the noise estimator: a grey image's
    own pixels (a view, in its dtype: the estimator converts only the blocks it
    samples), or for colour a :class:`LazyLuminance` that computes the opponent
    luminance of only the slices asked for (no float64 plane of the image)."""
    a = np.asarray(image)
    if channels(a) == 1:
        return a if a.ndim == 2 else a[..., 0]
    return LazyLuminance(a)


def luminance_bounds(image: np.ndarray) -> tuple[float, float] | None:
    """Return the luminance at an integer image's clipping limits, low and high.

    The values :func:`luminance` takes where every channel is clipped to its
    integer type's limits (0 and 255 for 8 bits), for the noise estimator; None for
    a float image (no known clipping)."""
    a = np.asarray(image)
    if not np.issubdtype(a.dtype, np.integer):
        return None
    info = np.iinfo(a.dtype)
    scale = 1.0 if channels(a) == 1 else float(OPPONENT[0].sum())
    return float(info.min) * scale, float(info.max) * scale


class LazyLuminance:
    """The opponent luminance of a colour image, computed a block at a time.

    The opponent luminance of a colour image (H, W, 3|4) as a read-only 2-D
    array-like: ``lum[ys, xs]`` converts that block to float64 only, and
    ``np.asarray(lum)`` the whole plane, a band of rows at a time."""

    ndim = 2
    dtype = np.dtype(np.float64)

    def __init__(self, image: np.ndarray):
        self._a = image
        self.shape = image.shape[:2]

    def __getitem__(self, key) -> np.ndarray:
        if not (isinstance(key, tuple) and len(key) == 2
                and all(isinstance(k, slice) for k in key)):
            raise TypeError("LazyLuminance takes two slices, lum[y0:y1, x0:x1]")
        return np.asarray(self._a[key][..., :3], dtype=np.float64) @ OPPONENT[0]

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        out = np.empty(self.shape)
        for s in range(0, self.shape[0], _ROWS):
            out[s:s + _ROWS] = self[s:s + _ROWS, :]
        return out if dtype is None else out.astype(dtype, copy=False)



def working_range(dtype, vst=None) -> float | None:
    """Return the span of the working values of an image of ``dtype``.

    The span of the working values of an image of ``dtype``: its integer type's
    range (through the variance-stabilising transform ``vst``, the smallest over the
    colour channels); None for floats, whose range the type does not say."""
    dtype = np.dtype(dtype)
    if not np.issubdtype(dtype, np.integer):
        return None
    info = np.iinfo(dtype)
    lo, hi = float(info.min), float(info.max)
    if vst is None:
        return hi - lo
    ends = vst.forward(np.array([[[lo], [hi]]]))  # (1, 2, C) after broadcasting
    return float(np.min(ends[0, 1] - ends[0, 0]))


#: the ranges a float image conventionally holds: [0, 1], and 8, 12 and 16 bits as floats
NOMINAL_RANGES = (1.0, 255.0, 4095.0, 65535.0)


def nominal_range(values: np.ndarray, sigma: float) -> float | None:
    """Return the conventional range ``[0, R]`` a float image holds, if any.

    The conventional range ``[0, R]`` (:data:`NOMINAL_RANGES`, the smallest) a float
    image holds, noise aside: its 0.1 and 99.9 percentiles within 4 ``sigma`` of it, and
    ``sigma`` at most half of it (a range the noise would swamp is not the image's);
    None when none holds them (values far below zero, physical units)."""
    lo, hi = np.percentile(np.asarray(values, dtype=np.float64), [0.1, 99.9])
    margin = 4.0 * float(sigma)
    return next((r for r in NOMINAL_RANGES
                 if sigma <= r / 2 and lo >= -margin and hi <= r + margin), None)



def guide_range(dtype, vst, colour: bool) -> float | None:
    """Return the grouped method's ``data_range`` of a region.

    The grouped method's ``data_range`` of a region: the working range, for colour
    the span of the luminance (the guide channel)."""
    rng = working_range(dtype, vst)
    if rng is not None and colour:
        rng *= float(OPPONENT[0].sum())
    elif rng is not None and isinstance(vst, PlaneStabiliser):  # the planes' sum
        rng *= vst.guide_gain
    return rng


