"""The grouped method's patch geometry: patch side, strides, search radii and
matching windows, resolved once from the options and what calibration measured.

The tiled engine takes its halo from the same values.  The measurements behind each
rule: ``docs/options.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .options import GroupedOptions

__all__ = ["Geometry", "resolve_geometry", "texture_match_extra", "PATCH_SIZE", "SEARCH_RADIUS",
           "DENSE_RADIUS", "TEXTURE_DENSE_RADIUS", "TEXTURE_RADIUS", "HIGH_NOISE",
           "TEXTURE_NOISE0", "TEXTURE_NOISE1", "SMOOTH"]

#: patch side when ``patch_size`` is None
PATCH_SIZE = 5
#: search radius of both stages (a 65x65 window)
SEARCH_RADIUS = 32
#: offsets searched densely in a photograph (a 17x17 window); beyond, only even row and
#: column offsets
DENSE_RADIUS = 8
#: offsets searched densely in a regular texture (BM3D's 39x39 window)
TEXTURE_DENSE_RADIUS = 19
#: search radius of a regular texture (81x81): its repeats two periods away are in reach
TEXTURE_RADIUS = 40
#: noise (fraction of the data range) above which the stage-1 window is patch + 8
HIGH_NOISE = 45.0 / 255.0
#: noise fractions between which a regular texture's stage-1 window grows from 7x7 to 35x35
TEXTURE_NOISE0 = 15.0 / 255.0
TEXTURE_NOISE1 = 50.0 / 255.0
#: coarse detail (:func:`.calibrate.coarse_detail`) under which a photograph's stage-1
#: window is patch + 4 / patch + 6 instead of patch + 2
SMOOTH = (0.6, 0.3)


@dataclass(frozen=True)
class Geometry:
    """Resolved geometry of one run (every value decided)."""

    patch_size: int
    stride: int
    stride1: int
    search_radius: int
    search_radius1: int
    match_size1: int
    match_size: int
    dense_radius: int = DENSE_RADIUS


def texture_match_extra(noise_fraction: float | None) -> int:
    """Return how much wider than the patch a regular texture's matching window is.

    How much wider than the patch a regular texture's stage-1 matching window is:
    ``2 + 2 round(14 t^2)``, ``t`` the noise fraction placed between
    :data:`TEXTURE_NOISE0` and :data:`TEXTURE_NOISE1` (clipped to 0..1; None: 2).
    With 5x5 patches: 7x7 up to sigma 15 on 0..255, 9x9 at 25, 17x17 at 35, 35x35 from 50."""
    if noise_fraction is None:
        return 2
    t = min(max((float(noise_fraction) - TEXTURE_NOISE0) / (TEXTURE_NOISE1 - TEXTURE_NOISE0),
                0.0), 1.0)
    return 2 + 2 * int(round(14.0 * t * t))


def resolve_geometry(options: GroupedOptions, noise_fraction: float | None = None,
                     periodic: bool = False, detail: float | None = None) -> Geometry:
    """The :class:`Geometry` of ``options`` (given values win).

    ``noise_fraction``: sigma against the data range (None: unknown); ``periodic``: a
    regular texture; ``detail``: :func:`.calibrate.coarse_detail` (None: unknown).
    Defaults: patch 5, stage-1 stride patch - 1 and stage-2 stride the patch (stage 1's
    without ``regroup`` and for a texture), radius 32 (40 for a texture), stage-1 window
    patch + 2, + 8 above :data:`HIGH_NOISE`, + 4 / + 6 under :data:`SMOOTH`, a
    texture's from :func:`texture_match_extra`; stage-2 window patch + 6 (+ 2 texture).
    """
    o = options
    p = PATCH_SIZE if o.patch_size is None else int(o.patch_size)
    R = (TEXTURE_RADIUS if periodic else SEARCH_RADIUS) if o.search_radius is None \
        else int(o.search_radius)
    R1 = R if o.search_radius1 is None else int(o.search_radius1)
    stride1 = int(o.stride1 if o.stride1 is not None else
                  (o.stride if o.stride is not None else max(1, p - 1)))
    # stage 2 on stage 1's groups (no regroup) is on stage 1's grid; so is a regular
    # texture's, whose margin is in its repeats (docs/options.md#stride)
    stride = int(o.stride if o.stride is not None and o.regroup else
                 (p if o.regroup and not periodic else stride1))
    for name, s in (("stride1", stride1), ("stride", stride)):
        if not 1 <= s <= p:
            raise ValueError(f"{name} must be in 1..patch_size={p} (to cover every pixel), "
                             f"got {s}")
    if periodic:
        extra1 = texture_match_extra(noise_fraction)
    else:
        high = noise_fraction is not None and noise_fraction > HIGH_NOISE
        smooth = 2 if detail is None or detail >= SMOOTH[0] else (4 if detail >= SMOOTH[1] else 6)
        extra1 = max(8 if high else 2, smooth)
    m1 = p + extra1 if o.match_size1 is None else int(o.match_size1)
    m2 = p + (2 if periodic else 6) if o.match_size is None else int(o.match_size)
    # a window smaller than the patch means the patch
    return Geometry(patch_size=p, stride=stride, stride1=stride1, search_radius=R,
                    search_radius1=R1, match_size1=max(m1, p), match_size=max(m2, p),
                    dense_radius=TEXTURE_DENSE_RADIUS if periodic else DENSE_RADIUS)
