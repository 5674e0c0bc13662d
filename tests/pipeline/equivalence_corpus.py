"""A fixed corpus of denoising runs whose pixels must not change when the code is
restructured (``tests/pipeline/test_equivalence.py``).

Each case is a call of the public pipeline (:func:`kpca_denoise.denoise_set`) on
the shipped sample images or on a synthetic image built here, covering every path
a user reaches: grey and colour, sigma 15 / 25 / 50, the noise estimate, a stack,
a patch set, the global method, the Poisson-Gaussian path, a tiled image, a
regular texture, explicit ranks and the linear kernel.  Record the outputs, from
the repository's root (so that this checkout's package is the one imported), with

    python tests/pipeline/equivalence_corpus.py

which rewrites ``tests/pipeline/data/equivalence.npz``; do so only when a change of the
pixels is intended, and say why in the commit.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from kpca_denoise import DenoiseParams, denoise_set

HERE = Path(__file__).resolve().parent
SAMPLES = HERE.parents[1] / "sample_images"
RECORD = HERE / "data" / "equivalence.npz"


def _png(name: str) -> np.ndarray:
    from PIL import Image

    with Image.open(SAMPLES / name) as im:
        return np.asarray(im)


def _noisy(clean: np.ndarray, sigma: float, seed: int, dtype=np.float32) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (clean.astype(np.float64) + rng.normal(0.0, sigma, clean.shape)).astype(dtype)


def _bricks(h: int = 128, w: int = 128) -> np.ndarray:
    """A regular texture: 28x12 px bricks with 2 px mortar, every other row shifted."""
    y, x = np.mgrid[0:h, 0:w]
    row = y // 12
    xs = (x + 14 * (row % 2)) % 28
    mortar = (y % 12 < 2) | (xs < 2)
    return np.where(mortar, 200.0, 90.0 + 10.0 * np.sin(x / 5.0))


def cases() -> dict[str, tuple[list[np.ndarray], DenoiseParams, dict]]:
    """name -> (images, params, keywords of denoise_set)."""
    camera = _png("camera.png")
    astro = _png("astronaut.png")
    grey = camera[160:288, 192:320]
    colour = astro[40:136, 180:276]
    out: dict[str, tuple] = {}
    # the quick start: the shipped images, noise added by the pipeline
    out["sample_camera_25"] = ([camera], DenoiseParams(add_noise=25, noise_sigma=25), {})
    out["sample_astronaut_25"] = ([astro[128:384, 128:384]],
                                  DenoiseParams(add_noise=25, noise_sigma=25), {})
    for s in (15, 25, 50):
        out[f"grey_{s}"] = ([_noisy(grey, s, s)], DenoiseParams(noise_sigma=s), {})
        out[f"colour_{s}"] = ([_noisy(colour, s, 100 + s)], DenoiseParams(noise_sigma=s), {})
    # uint8 input: the noise level is placed against the 0..255 range (high-noise window)
    out["grey_uint8_50"] = ([np.clip(_noisy(grey, 50, 7, np.float64), 0, 255).astype(np.uint8)],
                            DenoiseParams(noise_sigma=50), {})
    out["grey_blind"] = ([np.clip(_noisy(grey, 20, 3, np.float64), 0, 255).astype(np.uint8)],
                         DenoiseParams(), {})
    out["grey_ranks"] = ([_noisy(grey, 25, 11)], DenoiseParams(noise_sigma=25,
                                                               ranks=(1, 2, 4, None)), {})
    out["grey_linear"] = ([_noisy(grey, 25, 12)], DenoiseParams(noise_sigma=25, kernel="linear"),
                          {})
    stack = [_noisy(camera[100 + 8 * k:164 + 8 * k, 200:264], 20, 30 + k) for k in range(3)]
    # page by page, as recorded (the sequence path has its own tests: test_sequence.py)
    out["stack"] = (stack, DenoiseParams(noise_sigma=20, sequence="no"), {})
    digits = np.load(SAMPLES / "digits.npz")["images"][:120]
    out["patch_set"] = ([_noisy(digits, 40, 5)], DenoiseParams(noise_sigma=40, ranks=(4, None)),
                        {"patch_sets": [True]})
    out["global"] = ([_noisy(grey, 25, 13)], DenoiseParams(method="global", noise_sigma=25,
                                                           ranks=(4, 16), n_train=500), {})
    counts = np.random.default_rng(21).poisson(grey.astype(np.float64) / 4.0) * 4.0 + 100.0
    out["poisson_gaussian"] = ([(counts + np.random.default_rng(22).normal(0, 3, grey.shape))
                                .clip(0, 65535).astype(np.uint16)],
                               DenoiseParams(noise_model="poisson-gaussian"), {})
    out["tiled"] = ([_noisy(camera[100:260, 150:310], 25, 14)],
                    DenoiseParams(noise_sigma=25, tile_size=64), {})
    out["texture"] = ([_noisy(_bricks(), 25, 15)], DenoiseParams(noise_sigma=25), {})
    return out


def run(name: str, case: tuple) -> dict[str, np.ndarray]:
    """The outputs of one case: ``{"<item>/<rank>": array}``."""
    images, params, kw = case
    res = denoise_set(images, params, **kw)
    arrays = {}
    for i, item in enumerate(res.images):
        if item.error:
            raise RuntimeError(f"{name}: item {i}: {item.error}")
        for rank, out in item.outputs.items():
            arrays[f"{i}/{'auto' if rank is None else rank}"] = np.asarray(out)
    return arrays


def main() -> int:
    record = {}
    for name, case in cases().items():
        for key, arr in run(name, case).items():
            record[f"{name}/{key}"] = arr
        print(name, flush=True)
    RECORD.parent.mkdir(exist_ok=True)
    np.savez_compressed(RECORD, **record)
    print(f"wrote {len(record)} arrays to {RECORD}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
