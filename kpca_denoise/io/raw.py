"""Camera RAW files: the sensor's mosaic read through LibRaw (``rawpy``), a DNG written back.

A RAW file (DNG, CR2, CR3, NEF, ARW, RAF, ORF, RW2, ...: what LibRaw reads) is read as
its visible mosaic, (H, W) uint16, with ``meta["raw"]`` holding what denoising and
writing need: the 2x2 colour-filter pattern, the black level of each of the four CFA
positions, the white level, the as-shot white balance, the orientation, make, model and
ISO, and the colour matrix.  ``rawpy`` is an extra (``pip install 'kpca-denoise[raw]'``).

The denoised mosaic is written (:func:`kpca_denoise.io.writing.write_dng`) as a DNG
with tifffile (its CFA and DNG tags; LibRaw reads it back with the input's pattern,
levels, white balance, colour and orientation, ``docs/raw.md``), or developed here by
LibRaw (camera white balance, sRGB) into a 16-bit TIFF or an 8-bit PNG / JPEG.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .errors import InputError

__all__ = ["RAW_SUFFIXES", "MISSING_RAWPY", "read_raw", "develop", "DEVELOP_OPTIONS"]

#: the camera RAW suffixes read through LibRaw, and the format name each is shown with
RAW_SUFFIXES = {".dng": "DNG", ".cr2": "CR2", ".cr3": "CR3", ".crw": "CRW", ".nef": "NEF",
                ".nrw": "NRW", ".arw": "ARW", ".srf": "SRF", ".sr2": "SR2", ".raf": "RAF",
                ".orf": "ORF", ".rw2": "RW2", ".pef": "PEF", ".srw": "SRW", ".erf": "ERF",
                ".kdc": "KDC", ".dcr": "DCR", ".mrw": "MRW", ".3fr": "3FR", ".iiq": "IIQ",
                ".rwl": "RWL", ".x3f": "X3F"}

#: the one line a RAW file gets when rawpy is not installed
MISSING_RAWPY = "RAW files need rawpy: pip install 'kpca-denoise[raw]'"

#: LibRaw's EXIF flip codes -> EXIF orientation, and back
_FLIP_TO_EXIF = {0: 1, 3: 3, 5: 8, 6: 6}
_EXIF_TO_FLIP = {v: k for k, v in _FLIP_TO_EXIF.items()}

#: sRGB (D65) -> XYZ, LibRaw's ``xyz_rgb``
_XYZ_RGB = np.array([[0.412453, 0.357580, 0.180423],
                     [0.212671, 0.715160, 0.072169],
                     [0.019334, 0.119193, 0.950227]])


def _rawpy():
    try:
        import rawpy
    except ImportError:
        return None
    return rawpy


def _tiff_ifd0(path: Path) -> dict:
    """Make, model and ISO from a TIFF-based RAW's first IFD and EXIF block (CR2, NEF,
    ARW, DNG, ...); empty for the others (CR3, RAF)."""
    try:
        import tifffile

        with tifffile.TiffFile(path) as tf:
            tags = tf.pages[0].tags
            out = {k: str(tags[t].value).strip("\x00 ") for k, t in (("make", 271), ("model", 272))
                   if t in tags}
            iso = tags[34855].value if 34855 in tags else None
            exif = tags[34665].value if 34665 in tags else None
            if iso is None and isinstance(exif, dict):
                iso = exif.get("ISOSpeedRatings")
            if isinstance(iso, (tuple, list)):
                iso = iso[0] if iso else None
            if iso:
                out["iso"] = int(iso)
            return out
    except Exception:  # not TIFF-based, or a tag tifffile cannot decode: not needed
        return {}


def read_raw(path, max_pixels: int) -> tuple[np.ndarray, dict]:
    """``(mosaic, meta)`` of a camera RAW file: the visible mosaic (H, W) uint16 and
    ``meta["raw"]``: ``pattern`` (2x2 colour indices, 0 R, 1 G, 2 B, 3 the second G),
    ``colors`` (LibRaw's colour letters), ``cfa`` (e.g. ``"RGGB"``), ``black`` (4 values, per
    CFA position), ``white``, ``wb`` (the as-shot multipliers R, G, B, G2),
    ``color_matrix`` (XYZ -> camera, D65, 3x3), ``rgb_cam`` (LibRaw's camera -> sRGB),
    ``make``, ``model``, ``iso``; ``meta["orientation"]`` the EXIF orientation.

    Raises InputError in one line: rawpy missing, a file LibRaw cannot read, a sensor
    that is not a 2x2 Bayer mosaic, a mosaic over ``max_pixels``."""
    path = Path(path)
    rawpy = _rawpy()
    if rawpy is None:
        raise InputError(f"{path}: {MISSING_RAWPY}")
    try:
        raw = rawpy.RawPy()
        raw.open_file(str(path))
    except Exception as exc:  # LibRawFileUnsupportedError, LibRawIOError, ...
        raise InputError(f"{path}: not a readable camera RAW file (LibRaw: "
                         f"{type(exc).__name__}: {exc}); it may be corrupt or truncated") from None
    try:
        s = raw.sizes
        if s.width * s.height > max_pixels:
            raise InputError(
                f"{path}: the file says it holds {s.width}x{s.height} pixels, more than the "
                f"limit of {max_pixels / 1e6:.0f} megapixels; raise it (--max-pixels "
                f"{s.width * s.height})")
        try:
            raw.unpack()
            pattern = raw.raw_pattern
            mosaic = np.array(raw.raw_image_visible, dtype=np.uint16)
        except InputError:
            raise
        except Exception as exc:
            raise InputError(f"{path}: cannot decode the RAW data (LibRaw: {type(exc).__name__}: "
                             f"{exc}); the file may be corrupt or truncated") from None
        if pattern is None or raw.raw_type != rawpy.RawType.Flat or pattern.shape != (2, 2) \
                or raw.num_colors != 3:
            what = ("a demosaiced (linear) image" if pattern is None
                    or raw.raw_type != rawpy.RawType.Flat else
                    f"a {pattern.shape[0]}x{pattern.shape[1]} colour filter (X-Trans or other)")
            raise InputError(f"{path}: the sensor data is {what}, not a 2x2 Bayer mosaic; "
                             "only Bayer RAW files are supported")
        if mosaic.shape[0] < 4 or mosaic.shape[1] < 4:
            raise InputError(f"{path}: the mosaic {mosaic.shape[1]}x{mosaic.shape[0]} is too "
                             "small; a RAW file needs at least 4x4 photosites")
        colors = raw.color_desc.decode("ascii", "replace")
        pattern = np.asarray(pattern, dtype=np.int64)
        black_c = np.asarray(raw.black_level_per_channel, dtype=np.float64)
        rgb_cam = np.asarray(raw.color_matrix, dtype=np.float64)[:, :3]
        cam_xyz = np.asarray(raw.rgb_xyz_matrix, dtype=np.float64)[:3]
        if not np.any(cam_xyz):  # a DNG's matrices stay inside LibRaw: from its camera->sRGB
            cam_xyz = np.linalg.inv(rgb_cam) @ np.linalg.inv(_XYZ_RGB) if np.any(rgb_cam) \
                else np.eye(3)
        cam_xyz = cam_xyz / np.maximum(cam_xyz.sum(axis=1, keepdims=True), 1e-12)
        info = dict(pattern=pattern.tolist(), colors=colors,
                    cfa="".join(colors[i] for i in pattern.ravel()),
                    black=black_c[pattern].ravel().tolist(), white=int(raw.white_level),
                    wb=[float(v) for v in raw.camera_whitebalance],
                    daylight_wb=[float(v) for v in raw.daylight_whitebalance],
                    color_matrix=cam_xyz.tolist(), rgb_cam=rgb_cam.tolist(),
                    make=None, model=None, iso=None)
        other = getattr(raw, "other", None)
        if other is not None and getattr(other, "iso_speed", 0):
            info["iso"] = int(other.iso_speed)
        info.update({k: v for k, v in _tiff_ifd0(path).items() if v})
        meta = {"raw": info, "output_suffix": ".dng",
                "orientation": _FLIP_TO_EXIF.get(int(s.flip), 1)}
        return mosaic, meta
    finally:
        raw.close()


# -- developing ------------------------------------------------------------------------


#: how every RAW is developed (the ``--format tiff|png|jpeg`` outputs, the window, the
#: benchmark): LibRaw's AHD demosaicking, the camera's white balance, sRGB primaries and
#: curve, no automatic brightening, and the file's own white level as the scale
#: (``adjust_maximum_thr=0``: LibRaw's default replaces it by the data's maximum when that
#: is above 75 % of it, so a denoised mosaic, whose brightest photosite is lower than the
#: noisy one's, came out brighter than its input: before and after are developed alike)
DEVELOP_OPTIONS = dict(use_camera_wb=True, no_auto_bright=True, gamma=(2.4, 12.92),
                       user_flip=None, adjust_maximum_thr=0.0)


def develop(path, mosaic: np.ndarray | None = None, *, bits: int = 16) -> np.ndarray:
    """The RAW file ``path`` developed by LibRaw (:data:`DEVELOP_OPTIONS`, oriented),
    with its mosaic replaced by ``mosaic`` (the visible area, (H, W)) if given: an
    (H', W', 3) uint8 or uint16 sRGB image."""
    rawpy = _rawpy()
    if rawpy is None:
        raise InputError(f"{path}: {MISSING_RAWPY}")
    opts = {k: v for k, v in DEVELOP_OPTIONS.items() if v is not None}
    with rawpy.imread(str(path)) as raw:
        if mosaic is not None:
            vis = raw.raw_image_visible
            if vis.shape != np.shape(mosaic):
                raise InputError(f"{path}: the mosaic {np.shape(mosaic)} is not the file's "
                                 f"{vis.shape}")
            vis[...] = np.asarray(mosaic, dtype=np.uint16)
        return raw.postprocess(output_bps=bits, output_color=rawpy.ColorSpace.sRGB, **opts)
