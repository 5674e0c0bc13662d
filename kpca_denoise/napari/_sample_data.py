"""Sample data: the shipped sample images with Gaussian noise of std 25 added.

The same images and noise as the desktop application's ``--demo`` (``sample_images/``,
``noisy_like``: rounded and clipped to 8 bits, seed 0), as napari layer data tuples.
"""

from __future__ import annotations

from ..evaluation import noisy_like
from ..io.reading import read_item
from ..samples import sample_images_dir

__all__ = ["SAMPLE_SIGMA", "camera", "astronaut"]

#: the std (grey levels) of the Gaussian noise added to the samples
SAMPLE_SIGMA = 25.0


def _noisy(file: str, name: str) -> list:
    clean = read_item(sample_images_dir() / file).array
    noisy = noisy_like(clean, SAMPLE_SIGMA, seed=0)
    return [(noisy, {"name": f"{name} (noise σ={SAMPLE_SIGMA:g})",
                     "contrast_limits": (0, 255)}, "image")]


def camera() -> list:
    """The 512x512 grey "cameraman" with noise."""
    return _noisy("camera.png", "camera")


def astronaut() -> list:
    """The 512x512 RGB astronaut with noise."""
    return _noisy("astronaut.png", "astronaut")
