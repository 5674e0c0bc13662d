"""Speed benchmark (a script, not a test): prints ratios measured in one process.

    python benchmarks/speed.py            # everything (several minutes: sklearn's dense eigh at n=8000)
    python benchmarks/speed.py --quick    # n = 2000 and 4000 only

1. KernelPCA.fit against scikit-learn's KernelPCA(eigen_solver='auto') on
   8x8 patches of the sample images (d=64, k=32), n = 2000/4000/6000/8000.
2. rbf_gram against X @ X.T on the same float32 array (n=8000, d=64).
3. denoise_image with the defaults on the 512x512 camera image at sigma 25,
   next to scikit-image's denoise_nl_means on the same image.
Timings take the best of a few repeats, interleaved, because the machine is shared.
"""

from __future__ import annotations

import argparse
import pathlib
import time

import numpy as np
from PIL import Image

ROOT = pathlib.Path(__file__).resolve().parent.parent


def best_of(fn, repeats=3):
    best = np.inf
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def patches(n, seed=0):
    from kpca_denoise.core.patches import extract_patches

    img = np.asarray(Image.open(ROOT / "sample_images" / "camera.png"), dtype=np.float64)
    noisy = img + np.random.default_rng(seed).normal(0, 25, img.shape)
    P, _ = extract_patches(noisy, 8, 2)
    return P[np.random.default_rng(seed).choice(len(P), n, replace=False)]


def bench_fit(sizes):
    from sklearn.decomposition import KernelPCA as SkKernelPCA

    from kpca_denoise import KernelPCA
    from kpca_denoise.core.kpca import WIDTH_SCALE_IMAGE_PATCHES, rbf_width

    print("fit: ours KernelPCA(n_components=32) vs sklearn KernelPCA(32, eigen_solver='auto'), d=64")
    print(f"{'n':>6} {'ours s':>8} {'sklearn s':>10} {'speed-up':>9} {'solver':>11} {'max |dlambda|/lambda1':>22}")
    for n in sizes:
        X = patches(n)
        gamma = rbf_width(X, 25.0, scale=WIDTH_SCALE_IMAGE_PATCHES)
        ours = KernelPCA(32, gamma=gamma).fit(X[:500])  # compile/warm
        t_ours = best_of(lambda: ours.set_params().fit(X), 3 if n <= 4000 else 2)
        ref = SkKernelPCA(32, kernel="rbf", gamma=gamma, eigen_solver="auto")
        t_ref = best_of(lambda: ref.fit(X), 1)
        err = np.max(np.abs(ours.eigenvalues_ - ref.eigenvalues_)) / ref.eigenvalues_[0]
        print(f"{n:>6} {t_ours:>8.2f} {t_ref:>10.2f} {t_ref / t_ours:>8.1f}x {ours.solver_:>11} {err:>22.1e}")


def bench_gram():
    from kpca_denoise.core.kernels import rbf_gram

    X = np.random.default_rng(0).normal(size=(8000, 64)).astype(np.float32)
    rbf_gram(X[:300], 0.01)  # compile
    ratios = []
    for _ in range(5):
        t_g = best_of(lambda: rbf_gram(X, 0.01), 1)
        t_m = best_of(lambda: X @ X.T, 1)
        ratios.append(t_g / t_m)
    print(f"rbf_gram vs X @ X.T (n=8000, d=64, float32): ratio {min(ratios):.2f} "
          f"(best of 5 interleaved pairs; median {np.median(ratios):.2f})")


def bench_end_to_end():
    from skimage.restoration import denoise_nl_means

    from kpca_denoise import denoise_image
    from kpca_denoise.core.metrics import psnr

    img = np.asarray(Image.open(ROOT / "sample_images" / "camera.png"), dtype=np.float64)
    noisy = img + np.random.default_rng(1).normal(0, 25, img.shape)
    denoise_image(noisy[:64, :64], noise_sigma=25)  # compile
    for method in ("grouped", "global"):
        t = time.perf_counter()
        out = denoise_image(noisy, noise_sigma=25, method=method)
        dt = time.perf_counter() - t
        n_patches = (512 - 8) // 4 + 1
        extra = f", {n_patches**2 / dt:,.0f} patches/s" if method == "global" else ""
        print(f"denoise_image(method={method!r}) 512x512 sigma 25: {dt:.2f} s{extra}, "
              f"PSNR {psnr(img, out, 255):.2f} dB")
    t = time.perf_counter()
    nlm = denoise_nl_means(noisy, h=0.8 * 25, sigma=25, fast_mode=True, patch_size=7, patch_distance=11)
    dt = time.perf_counter() - t
    print(f"skimage denoise_nl_means 512x512 sigma 25: {dt:.2f} s, PSNR {psnr(img, nlm, 255):.2f} dB")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    bench_fit([2000, 4000] if args.quick else [2000, 4000, 6000, 8000])
    bench_gram()
    bench_end_to_end()


if __name__ == "__main__":
    main()
