"""How the automatic RBF width was chosen (a script, not a test).

    python -m benchmarks.gamma_rule            # digits + image patches (~5 min)
    python -m benchmarks.gamma_rule --digits   # digits only

The rule (kpca_denoise.core.kpca.rbf_width): s2 = max(median d^2 - 2 d sigma^2,
2 d sigma^2) removes the noise inflation of squared distances; gamma = 1/(c s2).
This script prints the denoising error for several c on the two kinds of data:

* digits (scikit-learn's load_digits / 16, noise std 0.25, 1000 noisy training
  digits, the other 797 for testing): test MSE per c and rank, with
  scikit-learn's KernelPCA(fit_inverse_transform=True) over a grid and linear
  PCA at its best rank beside it;
* natural-image patches (8x8, stride 4, 2000 training patches, global method)
  on a 256x256 crop of the camera image at sigma 15, 25 and 50: PSNR per c.
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks.common import noisy_digits, results_header, sample_image


def digits():
    from sklearn.decomposition import PCA
    from sklearn.decomposition import KernelPCA as SkKernelPCA

    from kpca_denoise import KernelPCA

    Ntr, Xte, Nte = noisy_digits()

    def mse(a):
        return float(np.mean((a - Xte) ** 2))

    print(f"digits: noisy MSE {mse(Nte):.4f}")
    pca = min((mse(PCA(k).fit(Ntr).inverse_transform(PCA(k).fit(Ntr).transform(Nte))), k)
              for k in (4, 8, 12, 16, 24, 32))
    print(f"linear PCA best: MSE {pca[0]:.4f} at rank {pca[1]}")
    grid = []
    for g in (0.02, 0.04, 0.08, 0.16, 0.32):
        for k in (32, 64, 128, 256):
            for a in (0.1, 0.3, 1.0, 3.0):
                m = SkKernelPCA(k, kernel="rbf", gamma=g, fit_inverse_transform=True, alpha=a).fit(Ntr)
                grid.append((mse(m.inverse_transform(m.transform(Nte))), g, k, a))
    best = min(grid)
    print(f"scikit-learn learned pre-image best of {len(grid)}: MSE {best[0]:.4f} "
          f"(gamma {best[1]}, {best[2]} components, alpha {best[3]})")
    print("ours (automatic gamma, fixed-point pre-image): MSE by width scale c and rank")
    ranks = (16, 32, 64, 128)
    print("  c     " + " ".join(f"{k:>7}" for k in ranks) + "   gamma")
    for c in (0.25, 0.5, 0.75, 1.0, 2.0, 4.0):
        row = []
        for k in ranks:
            m = KernelPCA.for_denoising(k, width_scale=c).fit(Ntr)
            row.append(mse(m.fixed_point_inverse_transform(m.transform(Nte), init=Nte)))
        print(f"  {c:<5} " + " ".join(f"{v:7.4f}" for v in row) + f"   {m.gamma_:.4f}")


def image_patches():
    from kpca_denoise.core import kpca
    from kpca_denoise.pipeline import DenoiseParams, denoise_set, evaluate

    img = sample_image("camera.png")[128:384, 128:384]
    print("image patches (camera 256x256 crop, global method, rank 16): PSNR dB by width scale c")
    scales = (1.0, 2.0, 4.0, 8.0, 16.0)
    print("  sigma " + " ".join(f"{c:>7}" for c in scales))
    saved = kpca.WIDTH_SCALE_IMAGE_PATCHES
    import kpca_denoise.global_method as pl  # the module whose fit reads the width scale

    for sigma in (15.0, 25.0, 50.0):
        row = []
        for c in scales:
            pl.WIDTH_SCALE_IMAGE_PATCHES = c
            r = denoise_set([img], DenoiseParams(method="global", ranks=(16,), noise_sigma=sigma,
                                                 add_noise=sigma))
            row.append(evaluate(img, r.images[0].outputs[16])["psnr"])
        print(f"  {sigma:<5} " + " ".join(f"{v:7.2f}" for v in row))
    pl.WIDTH_SCALE_IMAGE_PATCHES = saved


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--digits", action="store_true", help="digits only")
    args = ap.parse_args()
    print(results_header(), flush=True)
    digits()
    if not args.digits:
        image_patches()


if __name__ == "__main__":
    main()
