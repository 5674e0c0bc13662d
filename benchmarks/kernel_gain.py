"""Where the RBF kernel earns its keep: the default against its linear-kernel ablation.

A script, not a test.  ``kpca_denoise.core.grouped.denoise_grouped`` with the RBF
kernel (the default) and with ``kernel="linear"`` (plain group PCA, same grouping,
shrinkage and aggregation) on scikit-image's non-photographic images, 256x256
centre crops (smaller images whole), grey levels 0..255, white Gaussian noise of
sigma 15 / 25 / 50 (not clipped), mean PSNR over two noise seeds; NLM
(``denoise_nl_means(h=0.8 sigma, sigma=sigma, fast_mode=True, patch_size=7,
patch_distance=11)``) for context.  On the natural photographs of
``benchmarks/quality.py`` the two kernels are within 0.1 dB.

An optional JSON dictionary of keywords applies to both kernels (e.g. the
settings before issue 12, ``'{"match_size1": 5, "match_size": 5,
"kappa2": 1.2, "stride": 5}'``; ``kappa1`` then resolves per kernel).

Usage::

    python -m benchmarks.kernel_gain
    python -m benchmarks.kernel_gain '{"match_size1": 5, "match_size": 5, "kappa2": 1.2, "stride": 5}'
"""

from __future__ import annotations

import json
import sys

import numpy as np
from skimage import data
from skimage.color import rgb2gray

from benchmarks.common import add_noise, centre_crop, exit_on_help, nlm_denoise, psnr, results_header
from kpca_denoise.core.grouped import denoise_grouped

SIGMAS = (15, 25, 50)
SEEDS = (1, 2)


def grey_crop(x) -> np.ndarray:
    """0..255 float64, centre crop of at most 256x256."""
    x = np.asarray(x)
    if x.ndim == 3:
        x = rgb2gray(x[..., :3]) * 255.0
    elif x.dtype == bool or x.max() <= 1.0:
        x = x.astype(np.float64) * 255.0
    return centre_crop(x.astype(np.float64), 256)


def images() -> dict:
    return {
        "horse (silhouette)": data.horse(),
        "binary blobs": data.binary_blobs(256, rng=1),
        "Shepp-Logan phantom": data.shepp_logan_phantom(),
        "checkerboard": data.checkerboard(),
        "text": data.text(),
        "page (scan)": data.page(),
        "logo": data.logo(),
        "clock": data.clock(),
        "cell (microscopy)": data.cell(),
        "microaneurysms": data.microaneurysms(),
    }


def main(argv=()) -> None:
    exit_on_help(argv, __doc__)
    print(results_header(), flush=True)
    kw = json.loads(argv[0]) if argv else {}
    if kw:
        print(f"settings: {json.dumps(kw)}")
    print(f"{'image':22s} {'sigma':>5s} {'rbf':>7s} {'linear':>7s} {'gain':>6s} {'nlm':>7s}")
    gains = {s: [] for s in SIGMAS}
    for name, raw in images().items():
        im = grey_crop(raw)
        for s in SIGMAS:
            vals = {"rbf": [], "linear": [], "nlm": []}
            for seed in SEEDS:
                noisy = add_noise(im, s, seed)
                for k in ("rbf", "linear"):
                    out, _ = denoise_grouped(noisy, s, kernel=k, **dict({"data_range": 255.0}, **kw))
                    vals[k].append(psnr(im, out[None]))
                vals["nlm"].append(psnr(im, nlm_denoise(noisy, s)))
            m = {k: float(np.mean(v)) for k, v in vals.items()}
            gains[s].append(m["rbf"] - m["linear"])
            print(f"{name:22s} {s:5d} {m['rbf']:7.2f} {m['linear']:7.2f} "
                  f"{m['rbf'] - m['linear']:+6.2f} {m['nlm']:7.2f}", flush=True)
    print()
    for s in SIGMAS:
        g = np.asarray(gains[s])
        print(f"sigma {s}: mean gain of the RBF kernel {g.mean():+.3f} dB, "
              f"min {g.min():+.2f}, max {g.max():+.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
