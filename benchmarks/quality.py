"""Quality/speed table for the grouped (non-local) kernel-PCA denoiser.

A script, not a test.  It compares, on scikit-image's natural grayscale images
with additive white Gaussian noise (0..255 scale, not clipped):

* ``pca-glob``  - plain global linear PCA on 8x8 patches (stride 4, top-12 components,
  overlap averaging);
* ``kpca-glob`` - plain global kernel PCA (8x8 patches, 2000 training patches, RBF with
  gamma = 1/median squared distance, top-16 components, Mika fixed-point pre-image,
  overlap averaging).  Uses ``kpca_denoise.KernelPCA`` (``fixed_point_inverse_transform``)
  if it is importable, otherwise a small local version;
* ``ours``      - :func:`kpca_denoise.core.grouped.denoise_grouped` (RBF, defaults);
* ``ours-lin``  - the same with ``kernel="linear"`` (ablation);
* ``nlm``       - ``skimage.restoration.denoise_nl_means(h=0.8s, sigma=s, fast_mode=True,
  patch_size=7, patch_distance=11)``;
* ``bm3d``      - ``bm3d.bm3d(noisy, s)``.

Usage::

    python -m benchmarks.quality            # 256x256 crops, sigma 15/25/50
    python -m benchmarks.quality --quick    # 256 crops, sigma 25 only
    python -m benchmarks.quality --full     # 256 crops and full size
    python -m benchmarks.quality --blind    # also ours with the noise level estimated by the product
    python -m benchmarks.quality --no-global  # skip the slow global baselines
    python -m benchmarks.quality --full --timing-only  # only the 512x512 time ratios
    python -m benchmarks.quality --full --timing-only --sigmas 15,50  # ... at other levels
    python -m benchmarks.quality --kw '{"match_size": 5}'  # ours with other settings

At the end it prints the mean time ratios ours/bm3d and ours/nlm on 512x512 images
(camera, and moon/grass/gravel with --full), measured in this process; ours is timed
end to end (``denoise_image`` with the noise level given).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Sequence

import numpy as np

from benchmarks.common import DEV, add_noise, bm3d_denoise, load, nlm_denoise, psnr, results_header
from kpca_denoise.core.grouped import denoise_grouped


# ---------------------------------------------------------------- baselines


def _patches(img: np.ndarray, p: int, stride: int):
    H, W = img.shape
    ys = list(range(0, H - p + 1, stride))
    xs = list(range(0, W - p + 1, stride))
    if ys[-1] != H - p:
        ys.append(H - p)
    if xs[-1] != W - p:
        xs.append(W - p)
    pos = [(y, x) for y in ys for x in xs]
    P = np.stack([img[y:y + p, x:x + p].ravel() for y, x in pos])
    return P, pos


def _reassemble(P: np.ndarray, pos, shape, p: int) -> np.ndarray:
    num = np.zeros(shape)
    den = np.zeros(shape)
    for (y, x), v in zip(pos, P):
        num[y:y + p, x:x + p] += v.reshape(p, p)
        den[y:y + p, x:x + p] += 1.0
    return num / den


def global_pca(noisy: np.ndarray, sigma: float, p: int = 8, stride: int = 4, rank: int = 12):
    P, pos = _patches(noisy, p, stride)
    m = P.mean(0)
    Xc = P - m
    _, _, Vt = np.linalg.svd(Xc, full_matrices=False)
    V = Vt[:rank].T
    return _reassemble(m + (Xc @ V) @ V.T, pos, noisy.shape, p)


class _LocalKPCA:
    """Minimal RBF kernel PCA with the Mika et al. (1998) fixed-point pre-image."""

    def __init__(self, n_components: int, gamma: float):
        self.q = n_components
        self.gamma = gamma

    def _k(self, A, B):
        d2 = (A * A).sum(1)[:, None] + (B * B).sum(1)[None, :] - 2.0 * A @ B.T
        return np.exp(-self.gamma * np.maximum(d2, 0.0))

    def fit(self, X):
        self.X = X
        n = len(X)
        K = self._k(X, X)
        self.rm = K.mean(0)
        self.tm = self.rm.mean()
        Kc = K - self.rm[:, None] - self.rm[None, :] + self.tm
        w, V = np.linalg.eigh(Kc)
        w, V = w[::-1][: self.q], V[:, ::-1][:, : self.q]
        self.alpha = V / np.sqrt(np.maximum(w, 1e-300))  # lambda ||alpha||^2 = 1
        self.n = n
        return self

    def transform(self, Y):
        Ky = self._k(Y, self.X)
        Kyc = Ky - Ky.mean(1, keepdims=True) - self.rm[None, :] + self.tm
        return Kyc @ self.alpha

    def inverse_transform(self, Z, init, n_iter: int = 10):
        # centring-corrected expansion weights w_i = sum_k beta_k alpha_i^k + (1/n)(1 - sum_j ...)
        G = Z @ self.alpha.T
        G += (1.0 - G.sum(1, keepdims=True)) / self.n
        z = init.copy()
        for _ in range(n_iter):
            C = G * self._k(z, self.X)
            den = C.sum(1, keepdims=True)
            ok = np.abs(den[:, 0]) > 1e-12 * np.abs(C).sum(1)
            znew = (C @ self.X) / np.where(ok[:, None], den, 1.0)
            z = np.where(ok[:, None], znew, z)
        return z


def global_kpca(noisy: np.ndarray, sigma: float, p: int = 8, stride: int = 4, n_train: int = 2000,
                q: int = 16):
    P, pos = _patches(noisy, p, stride)
    rng = np.random.default_rng(0)
    T = P[rng.choice(len(P), size=min(n_train, len(P)), replace=False)]
    sub = T[rng.choice(len(T), size=min(500, len(T)), replace=False)]
    d2 = ((sub[:, None, :] - sub[None, :, :]) ** 2).sum(-1)
    gamma = 1.0 / np.median(d2[np.triu_indices(len(sub), 1)])
    model = None
    try:  # the package's own implementation, if it is there with the expected API
        from kpca_denoise import KernelPCA

        model = KernelPCA.for_denoising(n_components=q, gamma=gamma).fit(T)
        Z = model.transform(P)
        R = model.fixed_point_inverse_transform(Z, init=P)  # Mika et al.'s pre-image
        global_kpca.impl = "kpca_denoise.KernelPCA"
    except Exception as exc:  # not there yet / different API: the local version
        global_kpca.impl = f"local _LocalKPCA ({type(exc).__name__})"
        model = _LocalKPCA(q, gamma).fit(T)
        R = np.empty_like(P)
        for s in range(0, len(P), 4096):
            Z = model.transform(P[s:s + 4096])
            R[s:s + 4096] = model.inverse_transform(Z, init=P[s:s + 4096])
    return _reassemble(R, pos, noisy.shape, p)


# --kw: keywords for ours / ours-lin / ours-blind; the images are 0..255, which the
# command line and the GUI tell the core for 8-bit files (the high-noise geometry)
KW: dict = {"data_range": 255.0}


def ours(noisy, sigma):
    out, st = denoise_grouped(noisy, sigma, **KW)
    ours.stats = st
    return out[None]


def ours_lin(noisy, sigma):
    out, st = denoise_grouped(noisy, sigma, **dict(KW, kernel="linear"))
    return out[None]


def ours_blind(noisy, sigma):
    # the product's own blind path: the estimator denoise_image uses when
    # noise_sigma is None (kpca_denoise.core.noise.estimate_sigma_image)
    from kpca_denoise.core.noise import estimate_sigma_image

    s = float(estimate_sigma_image(noisy))
    out, st = denoise_grouped(noisy, s, **KW)
    return out[None]


# ---------------------------------------------------------------- main


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="256 crops, sigma=25 only")
    ap.add_argument("--full", action="store_true", help="256 crops and full size")
    ap.add_argument("--blind", action="store_true", help="add ours with the estimated noise level")
    ap.add_argument("--no-global", action="store_true", help="skip global PCA/KPCA baselines")
    ap.add_argument("--no-bm3d", action="store_true")
    ap.add_argument("--sigmas", default=None, help="comma list, overrides the defaults")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timing-only", action="store_true",
                    help="only the 512x512 time ratios (with --full: four images)")
    ap.add_argument("--kw", default="{}", help="JSON keywords for ours (not the timing)")
    a = ap.parse_args(argv)
    print(results_header(), flush=True)
    KW.update(json.loads(a.kw))
    if json.loads(a.kw):
        print(f"ours with {json.dumps(KW)}")
    if a.timing_only:
        denoise_grouped(np.random.default_rng(1).normal(128, 20, (48, 48)), 20.0)  # compile
        timing(a.full, a.seed, a.no_bm3d,
               sigmas=[float(s) for s in a.sigmas.split(",")] if a.sigmas else (25.0,))
        return

    sigmas = [25.0] if a.quick else [15.0, 25.0, 50.0]
    if a.sigmas:
        sigmas = [float(s) for s in a.sigmas.split(",")]
    sizes = [256, None] if a.full else [256]

    methods = []
    if not a.no_global:
        methods += [("pca-glob", global_pca), ("kpca-glob", global_kpca)]
    methods += [("ours", ours), ("ours-lin", ours_lin)]
    if a.blind:
        methods.append(("ours-blind", ours_blind))
    methods.append(("nlm", nlm_denoise))
    if not a.no_bm3d:
        methods.append(("bm3d", bm3d_denoise))

    # warm-up: numba compilation (cache=True makes later runs cheap) outside the timings
    w = np.random.default_rng(1).normal(128, 20, (48, 48))
    denoise_grouped(w, 20.0)
    denoise_grouped(w, 20.0, kernel="linear")

    names = [m for m, _ in methods]
    hdr = f"{'image':14s} {'sigma':>5s} {'noisy':>6s} " + " ".join(f"{m:>10s}" for m in names)
    print(hdr + "   | seconds: " + " ".join(names))
    rows = []
    fallbacks = 0
    for size in sizes:
        for sigma in sigmas:
            for name in DEV:
                if size is None and name == "hubble":
                    continue  # hubble is always the 256 gray crop
                im = load(name, size)
                noisy = add_noise(im, sigma, a.seed)
                ps, ts = [], []
                for m, f in methods:
                    t0 = time.perf_counter()
                    out = f(noisy, sigma)
                    ts.append(time.perf_counter() - t0)
                    ps.append(psnr(im, out))
                    if m == "ours":
                        fallbacks += ours.stats["preimage_fallbacks"]
                label = f"{name}{'' if size else '-full'}{im.shape[0]}x{im.shape[1]}"
                rows.append((size, sigma, psnr(im, noisy), ps, ts))
                print(f"{label:14s} {sigma:5.0f} {psnr(im, noisy):6.2f} "
                      + " ".join(f"{p:10.2f}" for p in ps) + "   | " + " ".join(f"{t:.2f}" for t in ts),
                      flush=True)
    print()
    print("means per sigma (and crop size)")
    print(hdr)
    for size in sizes:
        for sigma in sigmas:
            sel = [r for r in rows if r[0] == size and r[1] == sigma]
            mp = np.mean([r[3] for r in sel], axis=0)
            mt = np.mean([r[4] for r in sel], axis=0)
            lab = f"MEAN {size or 'full'}"
            print(f"{lab:14s} {sigma:5.0f} {np.mean([r[2] for r in sel]):6.2f} "
                  + " ".join(f"{p:10.2f}" for p in mp) + "   | " + " ".join(f"{t:.2f}" for t in mt))
    if a.blind:
        i, j = names.index("ours"), names.index("ours-blind")
        gaps = [r[3][i] - r[3][j] for r in rows]
        print(f"blind vs informed: mean gap {np.mean(gaps):.3f} dB, max gap {np.max(gaps):.3f} dB")
    print(f"pre-image fallbacks (ours, all runs): {fallbacks}")
    if hasattr(global_kpca, "impl"):
        print(f"kpca-glob implementation: {global_kpca.impl}")

    timing(a.full, a.seed, a.no_bm3d)


def timing(full: bool, seed: int, no_bm3d: bool = False, repeat: int = 3,
           sigmas: Sequence[float] = (25.0,)) -> None:
    """Time ratios on 512x512 grey images at each sigma (25), in this process: ours end to end
    (``denoise_image``, noise level given, float input) against bm3d and NLM.  Each
    method runs ``repeat`` times, interleaved, and its fastest run counts (a shared
    machine's load only ever adds time)."""
    for sigma in sigmas:
        _timing(full, seed, no_bm3d, repeat, float(sigma))


def _timing(full: bool, seed: int, no_bm3d: bool, repeat: int, sigma: float) -> None:
    from kpca_denoise import denoise_image

    rb, rn = [], []
    for name in (["camera", "moon", "grass", "gravel"] if full else ["camera"]):
        im = load(name, 512)
        noisy = add_noise(im, sigma, seed)
        runs = {"ours": lambda x: denoise_image(x, noise_sigma=sigma),
                "nlm": lambda x: nlm_denoise(x, sigma)}
        if not no_bm3d:
            runs["bm3d"] = lambda x: bm3d_denoise(x, sigma)
        t = {k: [] for k in runs}
        for _ in range(repeat):
            for k, f in runs.items():
                t0 = time.perf_counter()
                f(noisy)
                t[k].append(time.perf_counter() - t0)
        t = {k: min(v) for k, v in t.items()}
        rn.append(t["ours"] / t["nlm"])
        line = f"timing 512x512 {name} sigma {sigma:g}: ours {t['ours']:.2f}s nlm {t['nlm']:.2f}s ratio {rn[-1]:.2f}"
        if not no_bm3d:
            rb.append(t["ours"] / t["bm3d"])
            line += f"; bm3d {t['bm3d']:.2f}s ratio {rb[-1]:.3f}"
        print(line, flush=True)
    if rb:
        print(f"mean time ratio ours/bm3d (512x512, sigma {sigma:g}, best of {repeat}): "
              f"{np.mean(rb):.3f}")
    print(f"mean time ratio ours/nlm (512x512, sigma {sigma:g}, best of {repeat}): {np.mean(rn):.2f}")


if __name__ == "__main__":
    main()
