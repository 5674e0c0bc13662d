"""The shipped sample images (the desktop application's ``--demo``, the napari plugin's
sample data), found with no Qt and no napari."""

from __future__ import annotations

from pathlib import Path

__all__ = ["sample_images_dir"]


def sample_images_dir() -> Path:
    """The folder of the shipped sample images.

    Returns
    -------
    Path
        ``kpca_denoise/sample_images`` inside an installed wheel, else the source
        checkout's ``sample_images/`` next to the package.
    """
    pkg = Path(__file__).resolve().parent
    packaged = pkg / "sample_images"
    return packaged if packaged.is_dir() else pkg.parent / "sample_images"
