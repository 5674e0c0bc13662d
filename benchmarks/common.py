"""What the benchmark scripts share: test data, noise, PSNR, the baselines and the
header every results file begins with.

The scripts run from the repository root as modules, ``python -m benchmarks.<name>``;
their output goes to ``benchmarks/results/<name>.txt`` (see ``benchmarks/README.md``).
"""

from __future__ import annotations

import datetime
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np

#: the repository root, its sample images and the folder of the results files
ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_images"
RESULTS = Path(__file__).resolve().parent / "results"

#: the development set: the scikit-image photographs the defaults were tuned on
#: (``hubble`` is a grey 256x256 crop of ``hubble_deep_field`` at every size)
DEV = ("coins", "moon", "grass", "gravel", "hubble")
#: scikit-image's ``rgb2gray`` weights
GREY = np.array([0.2125, 0.7154, 0.0721])
#: image files a folder given with ``--dir`` contributes
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".tif", ".tiff")


# ---------------------------------------------------------------- images and noise


def centre_crop(a: np.ndarray, size: int) -> np.ndarray:
    """The central ``size`` x ``size`` of ``a`` (all of a shorter side), contiguous."""
    H, W = a.shape[:2]
    y, x = max(0, (H - size) // 2), max(0, (W - size) // 2)
    return np.ascontiguousarray(a[y:y + size, x:x + size])


def load(name: str, crop: int | None = None) -> np.ndarray:
    """A scikit-image photograph in grey, float64 on 0..255, centre-cropped to ``crop``.

    ``astronaut`` and ``hubble`` (``hubble_deep_field``) are made grey with
    ``rgb2gray``; ``hubble`` is always its central 256x256."""
    from skimage import data

    if name in ("astronaut", "hubble"):
        from skimage.color import rgb2gray

        im = rgb2gray(data.astronaut() if name == "astronaut" else data.hubble_deep_field()) * 255.0
        if name == "hubble":
            crop = 256
    else:
        im = getattr(data, name)().astype(np.float64)
    if crop:
        im = centre_crop(im, crop)
    return np.ascontiguousarray(im, dtype=np.float64)


def add_noise(image: np.ndarray, sigma: float, seed: int) -> np.ndarray:
    """``image`` plus white Gaussian noise of std ``sigma`` drawn from
    ``np.random.default_rng(seed)``, float64, not clipped."""
    image = np.asarray(image, dtype=np.float64)
    return image + np.random.default_rng(seed).normal(0.0, sigma, image.shape)


def image_files(directory: str | Path) -> list[Path]:
    """The PNG / JPEG / TIFF files of ``directory``, in file-name order."""
    return [f for f in sorted(Path(directory).iterdir()) if f.suffix.lower() in IMAGE_SUFFIXES]


def sample_image(name: str) -> np.ndarray:
    """A file of ``sample_images/`` (``camera.png``, ``astronaut.png``) as stored (uint8)."""
    from PIL import Image

    with Image.open(SAMPLES / name) as im:
        return np.asarray(im)


def sample_digits() -> np.ndarray:
    """The shipped patch set ``sample_images/digits.npz``: (1797, 8, 8) uint8, 0..255."""
    with np.load(SAMPLES / "digits.npz") as z:
        return z["images"]


def shuffled_digits(rng: np.random.Generator) -> np.ndarray:
    """scikit-learn's 1797 digits on [0, 1] (64 values each), in the order of
    ``rng.permutation`` (which advances ``rng``)."""
    from sklearn.datasets import load_digits

    X = load_digits().data / 16.0
    return X[rng.permutation(len(X))]


def noisy_digits():
    """The noisy-digits problem of the digits benchmarks (as tests/conftest.py's fixture):
    :func:`shuffled_digits` with seed 0, 1000 training digits and the other 797 for
    testing, noise std 0.25 on both from the same generator.  Returns (noisy training
    digits, clean test digits, noisy test digits)."""
    rng = np.random.default_rng(0)
    X = shuffled_digits(rng)
    Xtr, Xte = X[:1000], X[1000:]
    return Xtr + rng.normal(0, 0.25, Xtr.shape), Xte, Xte + rng.normal(0, 0.25, Xte.shape)


# ---------------------------------------------------------------- measures and baselines


def psnr(reference: np.ndarray, estimate: np.ndarray, data_range: float = 255.0) -> float:
    """PSNR in dB (:func:`kpca_denoise.core.metrics.psnr`), 0..255 images by default."""
    from kpca_denoise.core.metrics import psnr as _psnr

    return float(_psnr(reference, estimate, data_range))


def nlm_denoise(noisy: np.ndarray, sigma: float) -> np.ndarray:
    """The NLM baseline: ``skimage.restoration.denoise_nl_means(h=0.8 sigma, sigma=sigma,
    fast_mode=True, patch_size=7, patch_distance=11)``."""
    from skimage.restoration import denoise_nl_means

    return denoise_nl_means(noisy, h=0.8 * sigma, sigma=sigma, fast_mode=True, patch_size=7,
                            patch_distance=11)


def bm3d_denoise(noisy: np.ndarray, sigma: float) -> np.ndarray:
    """The BM3D baseline, told ``sigma``: ``bm3d.bm3d``, or ``bm3d.bm3d_rgb`` (CBM3D) for
    an (H, W, 3) image."""
    import bm3d as _bm3d

    run = _bm3d.bm3d_rgb if np.ndim(noisy) == 3 else _bm3d.bm3d
    return run(noisy, float(sigma))


# ---------------------------------------------------------------- the results header


def invocation() -> str:
    """The command that started this process, as ``python -m benchmarks.<name> ARGS``."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    prog = f"python -m {spec.name}" if spec is not None and spec.name else f"python {sys.argv[0]}"
    return " ".join([prog] + [shlex.quote(a) for a in sys.argv[1:]])


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=30, check=True).stdout.strip()


def commit() -> str:
    """``git rev-parse --short HEAD``, marked when tracked files have uncommitted changes."""
    try:
        head = _git("rev-parse", "--short", "HEAD")
        dirty = _git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "unknown (no git checkout)"
    return head + (" with uncommitted changes" if dirty else "")


def machine() -> str:
    """``uname`` (system, release, architecture), the CPU model and count, Python and
    numpy versions, and the thread limits set in the environment."""
    u = platform.uname()
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        pass
    threads = [f"{v}={os.environ[v]}" for v in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS",
                                                "OPENBLAS_NUM_THREADS") if v in os.environ]
    return ", ".join([f"{u.system} {u.release} {u.machine}"] + ([cpu] if cpu else [])
                     + [f"{os.cpu_count()} CPUs", f"Python {platform.python_version()}",
                        f"numpy {np.__version__}"] + threads)


def results_header(command: str | None = None) -> str:
    """The four lines a results file (and each run appended to one) begins with: date
    (UTC), machine, commit and the exact command (default: this process's,
    :func:`invocation`)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    return "\n".join([f"# date:    {now:%Y-%m-%d %H:%M} UTC",
                      f"# machine: {machine()}",
                      f"# commit:  {commit()}",
                      f"# command: {command or invocation()}"])


def exit_on_help(argv, doc: str | None) -> None:
    """For the scripts that read their arguments by hand: print ``doc`` (the script's
    docstring) and exit on ``-h`` / ``--help``."""
    if "-h" in argv or "--help" in argv:
        print(doc)
        raise SystemExit(0)


def denoise_grouped_opponent(rgb: np.ndarray, sigma: float, **options):
    """RGB (H, W, 3) through the grouped method as the pipeline runs colour: the
    orthonormal opponent space, one set of groups for the three channels, back to RGB
    (``data_range``, of R, G and B, becomes the luminance's).  ``({rank: rgb}, stats)``."""
    from kpca_denoise.core.color import OPPONENT, opponent_to_rgb, rgb_to_opponent
    from kpca_denoise.core.grouped import denoise_grouped_channels

    if options.get("data_range") is not None:
        options = dict(options, data_range=float(options["data_range"]) * float(OPPONENT[0].sum()))
    out, stats = denoise_grouped_channels(rgb_to_opponent(np.asarray(rgb)), sigma, **options)
    return {rk: opponent_to_rgb(o) for rk, o in out.items()}, stats
