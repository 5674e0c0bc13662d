"""Landmark (Nyström) kernel PCA against exact kernel PCA (a script, not a test).

    python -m benchmarks.nystrom            # writes benchmarks/results/nystrom.txt (~5-10 min)
    python -m benchmarks.nystrom --quick    # smaller sizes, prints only

Everything runs in one process, single-threaded (OpenBLAS and numba set to 1
thread before numpy is imported), and times are CPU seconds of this process
(``time.process_time``): the machine is shared, wall-clock times varied 3x
between identical runs, and with 2 BLAS threads next to another busy process
LAPACK's ``eigh`` ran 10x slower.  Fit times are the best of 2 runs.

The pre-image of landmark mode is an expansion over the m landmarks only.

1. Accuracy at a fixed N.  8x8 patches (stride 2) of skimage's 512x512
   ``camera`` with Gaussian noise sigma 25 (0..255, not clipped), 16
   components, width rule of the global method (noise_sigma=25, width scale
   8); N training patches and 2000 held-out patches drawn from all patches.
   For each N and m: ``eig``: max relative error of the top-16 eigenvalues
   against the exact fit; ``ang8`` / ``ang16``: largest principal angle
   (degrees) between the exact and landmark top-8 / top-16 subspaces, both
   seen through ``transform`` of the held-out patches; ``PSNR``: the whole
   image denoised (stride-4 patches, pre-image started at the noisy patch,
   overlap averaging); ``fit x``: fit time landmark / exact; ``total x``:
   fit + transform + pre-image time, landmark / exact.
   Noisy digits (scikit-learn's 1797 8x8 digits on [0, 1] + noise sigma 0.25,
   128 components, 497 held-out test digits): same columns with MSE.  Digits
   has only 1797 samples, so N stops at 1300.
2. Fixed budget: exact KPCA on the N it affords against landmark KPCA on
   many more patches (N up to all 62009 stride-2 patches not held out), same
   image; exact on N = 500 / 1000 is the control with as many pre-image
   expansion points as landmark mode with m = 500 / 1000.
3. Landmark choice: uniform sampling (the implementation) against kernel
   k-means++ (D^2 sampling in feature space) at one size.
Both modes use ``tol=1e-6`` for the randomized eigensolver (the default 1e-4
leaves the near-degenerate 16th eigenvector of the exact fit itself off by
up to ~15 degrees, which would swamp the approximation error measured here).
"""

from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import kpca_denoise.core.kpca as kpca_mod  # noqa: E402
from benchmarks.common import RESULTS, psnr, results_header, shuffled_digits  # noqa: E402
from kpca_denoise import KernelPCA  # noqa: E402
from kpca_denoise.core.kernels import rbf_cross  # noqa: E402
from kpca_denoise.core.kpca import WIDTH_SCALE_IMAGE_PATCHES  # noqa: E402
from kpca_denoise.core.patches import extract_patches, reassemble  # noqa: E402

TOL = 1e-6


def out(line=""):
    print(line, flush=True)
    out.lines.append(line)


out.lines = []


def max_angle(A, B):
    """Largest principal angle (degrees) between the column spans of A and B."""
    qa, _ = np.linalg.qr(A)
    qb, _ = np.linalg.qr(B)
    s = np.linalg.svd(qa.T @ qb, compute_uv=False)
    return float(np.degrees(np.arccos(np.clip(s.min(), -1.0, 1.0))))


def timed_fit(make, X, repeats=2):
    best, model = np.inf, None
    for _ in range(repeats):
        model = make()
        t = time.process_time()
        model.fit(X)
        best = min(best, time.process_time() - t)
    return model, best


class Camera:
    def __init__(self, sigma=25.0, seed=0):
        import skimage.data

        self.clean = skimage.data.camera().astype(np.float64)
        rng = np.random.default_rng(seed)
        self.noisy = self.clean + rng.normal(0, sigma, self.clean.shape)  # rng goes on below
        self.sigma = sigma
        pool, _ = extract_patches(self.noisy, 8, 2)
        pool = pool[rng.permutation(len(pool))]
        self.held, self.pool = pool[:2000], pool[2000:]
        self.P, self.pos = extract_patches(self.noisy, 8, 4)

    def make(self, k, m=None):
        return lambda: KernelPCA.for_denoising(k, noise_sigma=self.sigma, width_scale=WIDTH_SCALE_IMAGE_PATCHES,
                                 tol=TOL, n_landmarks=m)

    def denoise(self, model, k):
        t = time.process_time()
        R = model.fixed_point_inverse_transform(model.transform(self.P, n_components=k),
                                              init=self.P)
        img = reassemble(R, self.pos, self.noisy.shape, 8)
        return psnr(self.clean, img, 255.0), time.process_time() - t


class Digits:
    def __init__(self, seed=0):
        rng = np.random.default_rng(seed)
        X = shuffled_digits(rng)
        self.pool_clean, self.test = X[:1300], X[1300:]
        self.pool = self.pool_clean + rng.normal(0, 0.25, self.pool_clean.shape)
        self.noisy_test = self.test + rng.normal(0, 0.25, self.test.shape)
        self.held = self.noisy_test

    def make(self, k, m=None):
        return lambda: KernelPCA.for_denoising(k, tol=TOL, n_landmarks=m)

    def denoise(self, model, k):
        t = time.process_time()
        R = model.fixed_point_inverse_transform(model.transform(self.noisy_test, n_components=k),
                                                init=self.noisy_test)
        return float(np.mean((R - self.test) ** 2)), time.process_time() - t


def accuracy_table(data, Ns, ms, k, quality):
    out(f"{'N':>6} {'m':>6} {'eig':>9} {'ang8':>7} {'ang16':>7} {quality:>9} "
        f"{'fit s':>7} {'fit x':>6} {'total x':>7}")
    for N in Ns:
        X = data.pool[:N]
        ex, tfe = timed_fit(data.make(k), X)
        Ze = ex.transform(data.held)
        qe, tde = data.denoise(ex, k)
        out(f"{N:>6} {'exact':>6} {'':>9} {'':>7} {'':>7} {qe:>9.5g} {tfe:>7.2f} {'':>6} {'':>7}")
        for m in ms:
            if m > N:
                continue
            lm, tfl = timed_fit(data.make(k, m), X)
            Zl = lm.transform(data.held)
            ql, tdl = data.denoise(lm, k)
            eig = float(np.max(np.abs(lm.eigenvalues_ - ex.eigenvalues_) / ex.eigenvalues_))
            out(f"{N:>6} {m:>6} {eig:>9.2e} {max_angle(Ze[:, :8], Zl[:, :8]):>7.3f} "
                f"{max_angle(Ze[:, :16], Zl[:, :16]):>7.3f} {ql:>9.5g} {tfl:>7.2f} "
                f"{tfl / tfe:>6.2f} {(tfl + tdl) / (tfe + tde):>7.2f}")


def kernel_kmeanspp(X, m, gamma, seed=0):
    """Kernel k-means++ seeding: D^2 sampling with d^2(x, L) = 2 - 2 max_j k(x, l_j)."""
    rng = np.random.default_rng(seed)
    n = X.shape[0]
    idx = [int(rng.integers(n))]
    kmax = rbf_cross(X, X[idx], gamma)[:, 0]
    for _ in range(1, m):
        d2 = np.maximum(2.0 - 2.0 * kmax, 0.0)
        d2[idx] = 0.0
        j = int(rng.choice(n, p=d2 / d2.sum())) if d2.sum() > 0 else int(rng.integers(n))
        idx.append(j)
        kmax = np.maximum(kmax, rbf_cross(X, X[j:j + 1], gamma)[:, 0])
    return np.sort(np.array(idx))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    quick = args.quick
    t0 = time.process_time()
    wall0 = time.perf_counter()
    out(results_header())
    out("(single-threaded BLAS and numba, times in CPU seconds; float32 kernels (the default "
        "dtype); eigensolver tol=1e-6; random_state=0)")
    cam = Camera()
    dig = Digits()
    K_COMP = 16

    # warm numba
    KernelPCA.for_denoising(4, gamma=1e-5).fit(cam.pool[:300]).transform(cam.pool[:10])

    out()
    out("== 1a. camera 512x512, sigma 25, 8x8 patches, k=16: landmark vs exact at the same N ==")
    out("   eig = max_i<=16 |dlambda_i|/lambda_i; ang = largest principal angle (deg) between "
        "top-8/16 subspaces (held-out patches); PSNR in dB (noisy: "
        f"{psnr(cam.clean, cam.noisy, 255.0):.2f})")
    accuracy_table(cam, (2000, 4000) if quick else (2000, 4000, 8000),
                   (250, 500, 1000) if quick else (250, 500, 1000, 2000), K_COMP, "PSNR")

    out()
    out("== 1b. noisy digits, sigma 0.25, k=128 (the patch-set default): landmark vs exact ==")
    out(f"   MSE on 497 held-out test digits (noisy: {np.mean((dig.noisy_test - dig.test) ** 2):.5f})")
    accuracy_table(dig, (500, 1300) if quick else (500, 1000, 1300), (250, 500, 1000), 128, "MSE")

    out()
    out("== 1c. digits: exact KPCA on the m landmark digits alone vs landmark KPCA on all 1300 ==")
    out(f"{'m':>6} {'exact(N=m) MSE':>15} {'landmark(N=1300) MSE':>21}")
    from kpca_denoise.core.nystrom import select_landmarks

    for m in (250, 500, 1000):
        idx = select_landmarks(1300, m, 0)
        ex = dig.make(128)().fit(dig.pool[idx])
        lm = dig.make(128, m)().fit(dig.pool)
        out(f"{m:>6} {dig.denoise(ex, 128)[0]:>15.5f} {dig.denoise(lm, 128)[0]:>21.5f}")

    out()
    out("== 2. fixed budget, camera: exact on the N it affords vs landmarks on many more patches ==")
    out(f"{'mode':>9} {'N':>6} {'m':>6} {'PSNR':>7} {'fit s':>7} {'denoise s':>10} {'total s':>8}")
    # exact on N = 500 / 1000 is the control: the same number of expansion
    # points for the pre-image as landmark mode with m = 500 / 1000
    rows = [(500, None), (1000, None), (2000, None), (4000, None), (8000, None)]
    bigN = (20000,) if quick else (20000, 50000, len(cam.pool))
    for N in bigN:
        for m in ((500, 1000) if quick else (500, 1000, 2000)):
            rows.append((N, m))
    for N, m in rows:
        model, tf = timed_fit(cam.make(K_COMP, m), cam.pool[:N], repeats=1)
        q, td = cam.denoise(model, K_COMP)
        mode = "exact" if m is None else "landmark"
        out(f"{mode:>9} {N:>6} {'-' if m is None else m:>6} {q:>7.2f} {tf:>7.2f} {td:>10.2f} "
            f"{tf + td:>8.2f}")

    out()
    out("== 3. landmark choice, camera, N=8000, k=16: uniform vs kernel k-means++ ==")
    out(f"{'m':>6} {'choice':>10} {'eig':>9} {'ang8':>7} {'ang16':>7} {'PSNR':>7} {'choice s':>9}")
    N = 4000 if quick else 8000
    X = cam.pool[:N]
    ex = cam.make(K_COMP)().fit(X)
    Ze = ex.transform(cam.held)
    original = kpca_mod.select_landmarks
    for m in (250, 1000):
        for choice in ("uniform", "kmeans++"):
            tc = 0.0
            if choice == "kmeans++":
                t = time.process_time()
                chosen = kernel_kmeanspp(X, m, ex.gamma_)
                tc = time.process_time() - t
                kpca_mod.select_landmarks = lambda n, mm, rs, c=chosen: c
            try:
                lm = cam.make(K_COMP, m)().fit(X)
            finally:
                kpca_mod.select_landmarks = original
            Zl = lm.transform(cam.held)
            eig = float(np.max(np.abs(lm.eigenvalues_ - ex.eigenvalues_) / ex.eigenvalues_))
            out(f"{m:>6} {choice:>10} {eig:>9.2e} {max_angle(Ze[:, :8], Zl[:, :8]):>7.3f} "
                f"{max_angle(Ze[:, :16], Zl[:, :16]):>7.3f} {cam.denoise(lm, K_COMP)[0]:>7.2f} "
                f"{tc:>9.2f}")
    out()
    out(f"total benchmark time {time.perf_counter() - wall0:.0f} s wall, "
        f"{time.process_time() - t0:.0f} s CPU")
    if not quick:
        (RESULTS / "nystrom.txt").write_text("\n".join(out.lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
