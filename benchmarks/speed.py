"""Speed benchmark (a script, not a test): prints ratios measured in one process.

    python -m benchmarks.speed                  # everything (several minutes)
    python -m benchmarks.speed --only bar n10k  # some sections

Sections:
  bar      KernelPCA.fit on issue 11's bar problem (n=6000, d=64, k=32, i.i.d.
           normal data, gamma=1/(2d), a flat spectrum) against scikit-learn's
           KernelPCA(eigen_solver='auto'), same parameters.
  n10k     the same problem at n=10000 against scikit-learn's 'randomized';
           accuracy is the largest relative residual ||K v - lambda v|| / lambda_1
           of the returned eigenpairs, in float64 on the exact centred Gram matrix.
  gram     rbf_gram against X @ X.T on the same float32 array (n=8000, d=64).
  solvers  the numbers behind eigen_solver='auto': dense LAPACK against LOBPCG
           (time, iterations) on a flat spectrum (the bar's data) and a decaying
           one (noisy digits), several n.
  digits   eigensolver iterations on the noisy-digits spectrum (1000 digits,
           sigma 0.25, gamma='noise'): LOBPCG against subspace iteration.
  e2e      denoise_image on the 512x512 camera image at sigma 25, next to
           scikit-image's denoise_nl_means.
Timings take the best of a few repeats, interleaved, because the machine is shared.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from benchmarks.common import add_noise, nlm_denoise, psnr, results_header, sample_image, shuffled_digits


def best_of(fn, repeats=3):
    best, out = np.inf, None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def bar_data(n, d=64, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d)), 1.0 / (2 * d)


def max_residual(X, gamma, w, V):
    """max_j ||K~ v_j - w_j v_j|| / w_1 on the float64 centred Gram matrix."""
    from sklearn.metrics.pairwise import rbf_kernel

    K = rbf_kernel(X, gamma=gamma)
    r = K.mean(axis=0)
    K -= r[None, :]
    K -= r[:, None]
    K += r.mean()
    R = K @ V - V * w
    return float(np.max(np.linalg.norm(R, axis=0)) / w[0])


def bench_bar():
    from sklearn.decomposition import KernelPCA as SkKernelPCA

    from kpca_denoise import KernelPCA

    X, g = bar_data(6000)
    KernelPCA(32, kernel="rbf", gamma=g).fit(X[:2500])  # compile / warm
    t_ours, ours = best_of(lambda: KernelPCA(32, kernel="rbf", gamma=g).fit(X), 2)
    t_ref, ref = best_of(lambda: SkKernelPCA(32, kernel="rbf", gamma=g, eigen_solver="auto").fit(X), 1)
    err = np.max(np.abs(ours.eigenvalues_ - ref.eigenvalues_)) / ref.eigenvalues_[0]
    print(f"bar fit n=6000 d=64 k=32 gamma=1/128: ours {t_ours:.2f} s ({ours.solver_}, "
          f"{ours.n_iter_} it, gram {ours.gram_dtype_}), sklearn auto {t_ref:.2f} s: "
          f"speed-up {t_ref / t_ours:.1f}x, max |dlambda|/lambda1 {err:.1e}", flush=True)


def bench_n10k():
    from sklearn.decomposition import KernelPCA as SkKernelPCA

    from kpca_denoise import KernelPCA

    X, g = bar_data(10000)
    KernelPCA(32, kernel="rbf", gamma=g).fit(X[:2500])  # compile / warm
    t_ours, ours = best_of(lambda: KernelPCA(32, kernel="rbf", gamma=g).fit(X), 1)
    t_ref, ref = best_of(lambda: SkKernelPCA(32, kernel="rbf", gamma=g, eigen_solver="randomized",
                                             random_state=0).fit(X), 1)
    res_ours = max_residual(X, g, ours.eigenvalues_, ours.eigenvectors_)
    res_ref = max_residual(X, g, ref.eigenvalues_, ref.eigenvectors_)
    print(f"n=10000 d=64 k=32: ours {t_ours:.2f} s ({ours.solver_}, {ours.n_iter_} it), "
          f"sklearn randomized {t_ref:.2f} s: speed-up {t_ref / t_ours:.1f}x; max residual / "
          f"lambda1 ours {res_ours:.1e}, sklearn {res_ref:.1e}; sum of eigenvalues ours "
          f"{ours.eigenvalues_.sum():.4f}, sklearn {ref.eigenvalues_.sum():.4f}", flush=True)


def bench_gram():
    from kpca_denoise.core.kernels import rbf_gram

    X = np.random.default_rng(0).normal(size=(8000, 64)).astype(np.float32)
    rbf_gram(X[:300], 0.01)  # compile
    ratios = []
    for _ in range(5):
        t_g, _ = best_of(lambda: rbf_gram(X, 0.01), 1)
        t_m, _ = best_of(lambda: X @ X.T, 1)
        ratios.append(t_g / t_m)
    print(f"rbf_gram vs X @ X.T (n=8000, d=64, float32): ratio {min(ratios):.2f} "
          f"(best of 5 interleaved pairs; median {np.median(ratios):.2f})", flush=True)


def digits_data(n=1000, sigma=0.25, seed=0):
    rng = np.random.default_rng(seed)
    X = shuffled_digits(rng)[:n]
    return X + rng.normal(0, sigma, X.shape)


def _centred_gram(X, gamma):
    from kpca_denoise.core.kernels import centre_gram, rbf_gram

    K = rbf_gram(np.ascontiguousarray(X, dtype=np.float32), gamma)
    centre_gram(K, symmetric=True)
    return K


def bench_solvers():
    from kpca_denoise.core import eigen
    from kpca_denoise.core.kpca import rbf_width

    print("solvers (the 'auto' rule): time of dense LAPACK vs LOBPCG (tol 1e-4) on the "
          "centred float32 Gram matrix, k=32")
    print(f"{'spectrum':>9} {'n':>6} {'dense s':>8} {'lobpcg s':>9} {'it':>4} {'ratio':>6} "
          f"{'n/b':>6} {'auto picks':>11}")
    Xd = digits_data(1797)
    for name in ("flat", "digits"):
        for n in (600, 1000, 1500, 1797) if name == "digits" else (600, 1000, 1500, 2000, 3000, 4000):
            if name == "flat":
                X, g = bar_data(n)
            else:
                X = Xd[:n]
                g = rbf_width(X, 0.25)
            K = _centred_gram(X, g)
            t_d, _ = best_of(lambda: eigen.eigh_top(K, 32, solver="dense"), 1)
            t_l, (_, _, info) = best_of(lambda: eigen.eigh_top(K, 32, solver="lobpcg", tol=1e-4), 2)
            b = 32 + 8
            print(f"{name:>9} {n:>6} {t_d:>8.2f} {t_l:>9.2f} {info['iterations']:>4} "
                  f"{t_d / t_l:>6.1f} {n / b:>6.1f} {eigen.choose_solver(n, 32):>11}", flush=True)


def bench_digits():
    from kpca_denoise.core import eigen
    from kpca_denoise.core.kpca import rbf_width
    from kpca_denoise.estimator import _single_blas_thread  # as KernelPCA.fit runs them

    X = digits_data(1000)
    K = _centred_gram(X, rbf_width(X, 0.25))
    for k in (32, 128):
        row = []
        for solver in ("randomized", "lobpcg"):
            t, (_, _, info) = best_of(lambda: eigen.eigh_top(K, k, solver=solver, tol=1e-4,
                                                             small_ops=_single_blas_thread), 2)
            row.append(f"{solver} {info['iterations']} it {t:.2f} s")
        print(f"digits spectrum (n=1000, k={k}, tol 1e-4): " + ", ".join(row), flush=True)


def bench_end_to_end():
    from kpca_denoise import denoise_image

    img = sample_image("camera.png").astype(np.float64)
    noisy = add_noise(img, 25, 1)
    denoise_image(noisy[:64, :64], noise_sigma=25)  # compile
    for method in ("grouped", "global"):
        t = time.perf_counter()
        out = denoise_image(noisy, noise_sigma=25, method=method)
        dt = time.perf_counter() - t
        n_patches = (512 - 8) // 4 + 1
        extra = f", {n_patches**2 / dt:,.0f} patches/s" if method == "global" else ""
        print(f"denoise_image(method={method!r}) 512x512 sigma 25: {dt:.2f} s{extra}, "
              f"PSNR {psnr(img, out, 255):.2f} dB", flush=True)
    t = time.perf_counter()
    nlm = nlm_denoise(noisy, 25)
    dt = time.perf_counter() - t
    print(f"skimage denoise_nl_means 512x512 sigma 25: {dt:.2f} s, PSNR {psnr(img, nlm, 255):.2f} dB")


SECTIONS = {"bar": bench_bar, "n10k": bench_n10k, "gram": bench_gram, "solvers": bench_solvers,
            "digits": bench_digits, "e2e": bench_end_to_end}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="+", choices=sorted(SECTIONS), default=list(SECTIONS),
                    help="the sections to run (default: all)")
    args = ap.parse_args()
    print(results_header(), flush=True)
    warnings.simplefilter("ignore", UserWarning)
    for name in args.only:
        SECTIONS[name]()


if __name__ == "__main__":
    main()
