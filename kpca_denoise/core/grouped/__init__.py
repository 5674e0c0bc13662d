"""The grouped (non-local) kernel-PCA denoiser, one module per step.

For every reference patch the most similar patches form a group
(:mod:`.matching`); each group gets its own kernel PCA (:mod:`.group_pca`), its
coefficients are shrunk (:mod:`.shrinkage`), the Mika fixed-point pre-image
(:func:`kpca_denoise.core.preimage.preimage_groups`) brings every member back and
the estimates are averaged where they overlap
(:func:`kpca_denoise.core.patches.accumulate_groups`).  A second pass repeats this
guided by the first pass's estimate.  :mod:`.calibrate` decides what depends on the
image (a regular texture, its detail), :mod:`.geometry` the patch and search sizes,
:mod:`.options` holds the knobs, :mod:`.run` what a call resolves once,
:mod:`.steps` takes a chunk's groups from their kernel PCA to the pre-image (for the
single image and the stack alike), :mod:`.driver` chains the passes and :mod:`.stats`
holds what they count and report.

The method and its equations: ``docs/method.md``; the knobs: ``docs/options.md``.
"""

from .calibrate import calibrate
from .driver import denoise_grouped, denoise_grouped_channels, resolve_options
from .geometry import resolve_geometry
from .options import PRESETS, GroupedOptions
from .stats import STAGES

__all__ = ["denoise_grouped", "denoise_grouped_channels", "GroupedOptions", "PRESETS",
           "resolve_options", "resolve_geometry", "calibrate", "STAGES"]
