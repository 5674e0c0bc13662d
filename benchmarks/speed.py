"""Speed benchmark (a script, not a test): prints ratios measured in one process.

    python -m benchmarks.speed                  # everything (several minutes)
    python -m benchmarks.speed --only bar n10k  # some sections
    python -m benchmarks.speed --only ab --base /tmp/base  # a base commit's grouped core

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
  ab       the grouped core's per-group steps (matching, group kernel PCA,
           pre-image) of a base checkout (--base: the repository at an earlier
           commit, e.g. from git worktree add) against this one, swapped into the
           same driver in one process and alternated: CPU seconds per run, the
           stage times of the fastest and the largest pixel difference
           (camera and astronaut at 512x512, sigma 25; not in the default run).
  abstack  the same for the stack path: a base checkout's
           sequence.denoise_grouped_stack (and everything it calls in that module)
           against this one's, on a 16-page 512x512 stack (pages panning over the
           upscaled camera, sigma 25), alternated (--repeats): CPU and wall seconds,
           PSNR, the largest pixel difference; not in the default run.
  abchunk  the same for a chunk of groups: a base checkout's driver._chunk (and
           the _part it calls) against this one's, on camera upscaled to 1024x1024
           and astronaut resized to 600x900 (sigma 25), alternated (--repeats):
           median CPU and wall seconds, PSNR, the same pixels; not in the default run.
  abdist   the same for the matching distances: a base checkout's
           matching._distances against this one's on the arguments of real calls
           (the first and last stage-1 chunk of the camera at 512x512, sigma 25, and
           the first final-pass call of a 5-page stack), alternated (--repeats):
           median thread CPU ms per call (on one thread: NUMBA_NUM_THREADS=1), the
           same distances; not in the default run.
  predict  stage 2's predicted search (driver.PREDICT) against the full search
           (None), alternated in one process: median CPU and wall seconds, PSNR
           (camera and astronaut at 512x512, sigma 25; not in the default run).
  parts    a chunk's per-group steps on parts of driver.PART_GROUPS groups against
           the whole chunk at once (10^9), alternated in one process: median CPU and
           wall seconds, PSNR, the same pixels (camera 512x512 and upscaled to
           1024x1024, astronaut 600x900, sigma 25), then a 16-page 512x512 stack
           through the stack path (best of two); not in the default run.
  tiles    an image's tiles at once, one per thread (the default), against one
           after the other on all the threads (a tile map), alternated (--repeats):
           astronaut resized to 3000x1000 (3 tiles: the last alone), 2048x1536 (4)
           and 4000x3000 (12), white noise of sigma 15, given (--sizes: others):
           median CPU and wall seconds, the same pixels; not in the default run.
  ranks    what comparing ranks costs: the auto rank alone against ranks 1, 2, 4, 8
           and auto (the window's default), alternated (--repeats) on astronaut
           resized to 600x900 (sigma 25, given): median CPU and wall seconds, the
           stage times; then one run on one thread with the CPU spent in the explicit
           ranks' own kernel PCA (steps.own_components); not in the default run.
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


#: the grouped core's modules the ab section swaps: (file under kpca_denoise/, the
#: driver's names taken from it)
AB_MODULES = (("core/grouped/group_pca.py", ("fit_groups",)),
              ("core/preimage.py", ("preimage_groups",)),
              ("core/grouped/matching.py", ("match",)))


def _base_module(base: str, rel: str):
    """``kpca_denoise/<rel>`` of the checkout ``base`` as a module of its own (its
    relative imports made absolute, so they resolve to this checkout's package)."""
    import importlib.util
    import pathlib
    import re
    import sys
    import tempfile

    src = (pathlib.Path(base) / "kpca_denoise" / rel).read_text()
    pkg = "kpca_denoise." + rel.rsplit("/", 1)[0].replace("/", ".")
    src = re.sub(r"^(\s*)from \.(\w)", lambda m: f"{m.group(1)}from {pkg}.{m.group(2)}", src,
                 flags=re.M)
    src = re.sub(r"^(\s*)from \. import", lambda m: f"{m.group(1)}from {pkg} import", src,
                 flags=re.M)
    name = "base_" + rel.replace("/", "_")[:-3]
    path = pathlib.Path(tempfile.mkdtemp(prefix="kpca-ab-")) / f"{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def bench_ab(base: str | None, repeats: int = 4):
    import resource

    import kpca_denoise.core.grouped.driver as drv
    import kpca_denoise.core.grouped.steps as steps
    from kpca_denoise import DenoiseParams, denoise_set

    if base is None:
        raise SystemExit("the ab section needs --base DIR, a checkout of the base commit")
    # each step swapped in the module that calls it
    caller = {"fit_groups": steps, "preimage_groups": steps, "match": drv}
    this = {name: getattr(caller[name], name) for _, names in AB_MODULES for name in names}
    other = {}
    for rel, names in AB_MODULES:
        mod = _base_module(base, rel)
        other.update({name: getattr(mod, name) for name in names})
    params = DenoiseParams(noise_sigma=25.0)

    def use(funcs):
        for k, v in funcs.items():
            setattr(caller[k], k, v)

    warm = np.random.default_rng(1).normal(128, 25, (64, 64))
    for funcs in (other, this):
        use(funcs)
        denoise_set([warm], params)
        denoise_set([np.dstack([warm] * 3)], params)
    images = {"camera": sample_image("camera.png").astype(np.float64),
              "astronaut": sample_image("astronaut.png")[..., :3].astype(np.float64)}
    print(f"ab: base {base} against this checkout, CPU s per run ({repeats} alternations)")
    for name, img in images.items():
        noisy = img + np.random.default_rng(0).normal(0.0, 25.0, img.shape)
        cpu = {"base": [], "this": []}
        best, outs = {}, {}
        for _ in range(repeats):
            for label, funcs in (("base", other), ("this", this)):
                use(funcs)
                r0 = resource.getrusage(resource.RUSAGE_SELF)
                res = denoise_set([noisy], params).images[0]
                r1 = resource.getrusage(resource.RUSAGE_SELF)
                c = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
                cpu[label].append(c)
                if c <= min(cpu[label]):
                    st = res.stats["grouped"]
                    best[label] = {k: sum(s["seconds"][k] for s in st) for k in st[0]["seconds"]}
                outs[label] = res.outputs[None]
        print(f"{name}: base {' '.join(f'{c:.2f}' for c in cpu['base'])}, this "
              f"{' '.join(f'{c:.2f}' for c in cpu['this'])}: best {min(cpu['base']) / min(cpu['this']):.2f}x, "
              f"median {np.median(cpu['base']) / np.median(cpu['this']):.2f}x; PSNR "
              f"{psnr(img, outs['base'], 255):.3f} / {psnr(img, outs['this'], 255):.3f} dB, "
              f"max |difference| {np.abs(outs['base'] - outs['this']).max():.1e}", flush=True)
        for label in ("base", "this"):
            print(f"  {label} stages (s, fastest run): " + ", ".join(
                f"{k} {v:.2f}" for k, v in best[label].items() if k != "total"), flush=True)
    use(this)


def _driver_variants(attr: str, variants: dict, images: dict, repeats: int) -> None:
    """Each of ``variants`` (label -> value of the grouped driver's ``attr``) on each
    image, alternated ``repeats`` times in one process: median CPU and wall seconds
    against the first, PSNR and whether the pixels are the first's."""
    import kpca_denoise.core.grouped.driver as drv
    from kpca_denoise import DenoiseParams, denoise_set

    params = DenoiseParams(noise_sigma=25.0)
    keep = getattr(drv, attr)
    warm = np.random.default_rng(1).normal(128, 25, (64, 64))
    for v in variants.values():
        setattr(drv, attr, v)
        denoise_set([warm], params)
        denoise_set([np.dstack([warm] * 3)], params)
    first = next(iter(variants))
    print(f"{attr}: " + " against ".join(f"{k} ({v})" for k, v in variants.items())
          + f", median of {repeats} alternations")
    try:
        for name, img in images.items():
            noisy = img + np.random.default_rng(0).normal(0.0, 25.0, img.shape)
            runs = {k: [] for k in variants}
            outs = {}
            for _ in range(repeats):
                for k, v in variants.items():
                    setattr(drv, attr, v)
                    t, c = time.perf_counter(), time.process_time()
                    outs[k] = denoise_set([noisy], params).images[0].outputs[None]
                    runs[k].append((time.process_time() - c, time.perf_counter() - t,
                                    psnr(img, outs[k], 255)))
            m = {k: np.median(np.array(r), axis=0) for k, r in runs.items()}
            for k in list(variants)[1:]:
                print(f"{name}: CPU {m[first][0]:.2f} -> {m[k][0]:.2f} s "
                      f"({m[first][0] / m[k][0]:.2f}x), wall {m[first][1]:.2f} -> "
                      f"{m[k][1]:.2f} s ({m[first][1] / m[k][1]:.2f}x), PSNR "
                      f"{m[first][2]:.3f} -> {m[k][2]:.3f} dB, same pixels "
                      f"{np.array_equal(outs[first], outs[k])}", flush=True)
    finally:
        setattr(drv, attr, keep)


def bench_predict(repeats: int = 5):
    import kpca_denoise.core.grouped.driver as drv

    images = {"camera": sample_image("camera.png").astype(np.float64),
              "astronaut": sample_image("astronaut.png")[..., :3].astype(np.float64)}
    _driver_variants("PREDICT", {"full": None, "predicted": drv.PREDICT}, images, repeats)


def _pan_stack():
    """(clean, noisy): 16 pages of 512x512 panning 1 px a page over the camera
    upscaled to 1024x1024, sigma 25 (``benchmarks.stacks``' noise), the stack path warmed."""
    from benchmarks.photo_speed import photos
    from benchmarks.stacks import add_stack_noise, ours

    big = photos([1024])["camera 1024x1024"]
    clean = np.stack([big[100:612, 50 + k:562 + k] for k in range(16)])
    noisy = add_stack_noise(clean, "25")
    ours(noisy[:3, :64, :64], "25", "auto")
    return clean, noisy


def bench_abstack(base: str | None, repeats: int = 3):
    import kpca_denoise.core.grouped.sequence as seq
    from benchmarks.stacks import ours

    if base is None:
        raise SystemExit("the abstack section needs --base DIR, a checkout of the base commit")
    this = seq.denoise_grouped_stack
    other = _base_module(base, "core/grouped/sequence.py").denoise_grouped_stack
    seq.denoise_grouped_stack = other
    clean, noisy = _pan_stack()
    seq.denoise_grouped_stack = this
    ours(noisy[:3, :64, :64], "25", "auto")
    runs: dict = {"base": [], "this": []}
    outs = {}
    try:
        for _ in range(repeats):
            for label, fn in (("base", other), ("this", this)):
                seq.denoise_grouped_stack = fn
                t, c = time.perf_counter(), time.process_time()
                outs[label] = ours(noisy, "25", "auto")[0]
                runs[label].append((time.process_time() - c, time.perf_counter() - t))
    finally:
        seq.denoise_grouped_stack = this
    (cb, wb), (ct, wt) = (np.median(np.array(runs[k]), axis=0) for k in ("base", "this"))
    print(f"abstack: base {base} against this checkout, stack 16x512x512, median of "
          f"{repeats} alternations: CPU {cb:.1f} -> {ct:.1f} s ({cb / ct:.2f}x), wall "
          f"{wb:.1f} -> {wt:.1f} s ({wb / wt:.2f}x), PSNR {psnr(clean, outs['base'], 255):.3f} "
          f"-> {psnr(clean, outs['this'], 255):.3f} dB, max |difference| "
          f"{np.abs(outs['base'] - outs['this']).max():.1e}", flush=True)


def bench_abchunk(base: str | None, repeats: int = 3):
    import kpca_denoise.core.grouped.driver as drv
    from benchmarks.photo_speed import photos
    from kpca_denoise import DenoiseParams, denoise_set

    if base is None:
        raise SystemExit("the abchunk section needs --base DIR, a checkout of the base commit")
    this = drv._chunk
    other = _base_module(base, "core/grouped/driver.py")._chunk
    params = DenoiseParams(noise_sigma=25.0)
    ims = photos([512, 1024])
    images = {"camera 1024x1024": ims["camera 1024x1024"],
              "astronaut 600x900": ims["astronaut 600x900"]}
    warm = np.random.default_rng(1).normal(128, 25, (64, 64))
    try:
        for fn in (other, this):
            drv._chunk = fn
            denoise_set([warm], params)
            denoise_set([np.dstack([warm] * 3)], params)
        print(f"abchunk: base {base} against this checkout, median of {repeats} alternations")
        for name, img in images.items():
            noisy = img + np.random.default_rng(0).normal(0.0, 25.0, img.shape)
            runs: dict = {"base": [], "this": []}
            outs = {}
            for _ in range(repeats):
                for label, fn in (("base", other), ("this", this)):
                    drv._chunk = fn
                    t, c = time.perf_counter(), time.process_time()
                    outs[label] = denoise_set([noisy], params).images[0].outputs[None]
                    runs[label].append((time.process_time() - c, time.perf_counter() - t))
            (cb, wb), (ct, wt) = (np.median(np.array(runs[k]), axis=0) for k in ("base", "this"))
            print(f"{name}: CPU {cb:.2f} -> {ct:.2f} s ({cb / ct:.2f}x), wall {wb:.2f} -> "
                  f"{wt:.2f} s ({wb / wt:.2f}x), PSNR {psnr(img, outs['base'], 255):.3f} -> "
                  f"{psnr(img, outs['this'], 255):.3f} dB, same pixels "
                  f"{np.array_equal(outs['base'], outs['this'])}", flush=True)
    finally:
        drv._chunk = this


def bench_abdist(base: str | None, repeats: int = 41):
    import kpca_denoise.core.grouped.matching as mt
    import kpca_denoise.core.grouped.sequence as sq
    from kpca_denoise.core.grouped import denoise_grouped
    from kpca_denoise.core.grouped.sequence import denoise_grouped_stack
    from kpca_denoise.core.parallel import run_parts

    if base is None:
        raise SystemExit("the abdist section needs --base DIR, a checkout of the base commit")
    other = _base_module(base, "core/grouped/matching.py")._distances
    cam = sample_image("camera.png").astype(np.float64)
    noisy = cam + np.random.default_rng(0).normal(0.0, 25.0, cam.shape)
    calls, real, match = [], mt.run_parts, sq.match

    def spy(kernel, n, *args, **kw):  # the driver's matching: its first and last call
        if kernel is mt._distances:
            calls.append(tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args))
        return real(kernel, n, *args, **kw)

    def spy_stack(g, ry, rx, p, m, R, *a, **k):  # the stack's final pass: its first call
        if m > 7 and len(calls) == 2:
            g = np.ascontiguousarray(g, dtype=np.float64)
            mask = mt.search_mask(R)
            calls.append((g, ry.copy(), rx.copy(), mt._row_runs(ry, rx, 4 * m), p, m, R,
                          mt._offsets(mask, R)[2], True, np.empty((int(mask.sum()), len(ry)))))
        return match(g, ry, rx, p, m, R, *a, **k)

    mt.run_parts = spy
    try:
        denoise_grouped(noisy, 25.0)
    finally:
        mt.run_parts = real
    del calls[1:-1]
    sq.match = spy_stack
    try:
        denoise_grouped_stack(np.stack([noisy[100 + 2 * k:300 + 2 * k, 100:300]
                                        for k in range(5)])[..., None], 25.0)
    finally:
        sq.match = match
    print(f"abdist: base {base}'s matching._distances against this checkout's, thread CPU "
          f"ms per call, median of {repeats} alternations (camera 512x512 stage-1 chunks, "
          "a 5-page 200x200 stack's final pass)")
    for args in calls:
        R, out = args[6], {}
        ts: dict = {"base": [], "this": []}
        for _ in range(repeats + 1):
            for label, fn in (("base", other), ("this", mt._distances)):
                t = time.thread_time()
                run_parts(fn, 2 * R + 1, *args)
                ts[label].append(time.thread_time() - t)
                out[label] = args[-1].copy()
        b, t = (1e3 * np.median(ts[k][1:]) for k in ("base", "this"))  # the first compiles
        print(f"m {args[5]}, R {R}, {len(args[1])} references, {args[0].shape[0]} channels: "
              f"{b:.1f} -> {t:.1f} ms ({b / t:.3f}x), same distances "
              f"{np.array_equal(out['base'], out['this'])}", flush=True)


def bench_parts(repeats: int = 5):
    import kpca_denoise.core.grouped.driver as drv
    from benchmarks.photo_speed import photos

    images = {k: v for k, v in photos([512, 1024]).items()
              if k in ("camera 512x512", "camera 1024x1024", "astronaut 600x900")}
    parts = drv.PART_GROUPS
    _driver_variants("PART_GROUPS", {"chunk whole": 10 ** 9, "parts": parts}, images,
                     repeats)
    # a stack: 16 pages of 512x512 panning over the upscaled camera, the stack path
    from benchmarks.stacks import ours

    clean, noisy = _pan_stack()
    runs: dict = {}
    try:
        for _ in range(2):
            for label, v in (("chunk whole", 10 ** 9), ("parts", parts)):
                drv.PART_GROUPS = v
                t, c = time.perf_counter(), time.process_time()
                out = ours(noisy, "25", "auto")[0]
                runs.setdefault(label, []).append((time.process_time() - c,
                                                   time.perf_counter() - t, out))
    finally:
        drv.PART_GROUPS = parts
    (cw, ww, ow), (cp, wp, op) = (min(runs[k], key=lambda r: r[1])
                                  for k in ("chunk whole", "parts"))
    print(f"stack 16x512x512 (best of 2): CPU {cw:.1f} -> {cp:.1f} s ({cw / cp:.2f}x), "
          f"wall {ww:.1f} -> {wp:.1f} s ({ww / wp:.2f}x), PSNR {psnr(clean, ow, 255):.3f} "
          f"-> {psnr(clean, op, 255):.3f} dB, same pixels {np.array_equal(ow, op)}", flush=True)


def bench_tiles(repeats: int = 2, sizes=("3000x1000", "2048x1536", "4000x3000")):
    from benchmarks.photo_speed import photos
    from kpca_denoise import DenoiseParams, denoise_set
    import kpca_denoise.tiling as tiling

    def one_at_a_time(jobs, **kw):
        return ((k, tiling.denoise_tile(r, t, **kw)) for k, r, t in jobs)

    params = DenoiseParams(noise_sigma=15.0)
    denoise_set([np.random.default_rng(1).normal(128, 15, (64, 64, 3))], params)
    print(f"tiles: at once against one at a time, median of {repeats} alternations")
    for name, img in photos(sizes).items():
        noisy = np.clip(img + np.random.default_rng(0).normal(0.0, 15.0, img.shape), 0, 255)
        noisy = noisy.round().astype(np.uint8)
        runs: dict = {"one at a time": [], "at once": []}
        outs = {}
        for _ in range(repeats):
            for label, tm in (("one at a time", one_at_a_time), ("at once", None)):
                t, c = time.perf_counter(), time.process_time()
                res = denoise_set([noisy], params, tile_map=tm).images[0]
                runs[label].append((time.process_time() - c, time.perf_counter() - t))
                outs[label] = res.outputs[None]
        (c1, w1), (c2, w2) = (np.median(np.array(runs[k]), axis=0)
                              for k in ("one at a time", "at once"))
        print(f"{name} ({res.stats['grouped'][0]['tiles']} tiles): CPU {c1:.1f} -> {c2:.1f} s "
              f"({c1 / c2:.2f}x), wall {w1:.1f} -> {w2:.1f} s ({w1 / w2:.2f}x), PSNR "
              f"{psnr(img, outs['at once'], 255):.3f} dB, same pixels "
              f"{np.array_equal(outs['one at a time'], outs['at once'])}", flush=True)


def bench_ranks(repeats: int = 4):
    import numba

    import kpca_denoise.core.grouped.steps as steps
    from benchmarks.photo_speed import photos
    from kpca_denoise import DenoiseParams, denoise_set

    own = steps.own_components
    spent = {"own": 0.0}

    def timed(*args, **kw):
        t = time.process_time()
        try:
            return own(*args, **kw)
        finally:
            spent["own"] += time.process_time() - t

    img = photos([512])["astronaut 600x900"]
    noisy = img + np.random.default_rng(0).normal(0.0, 25.0, img.shape)
    variants = {"auto": (None,), "1 2 4 8 auto": (1, 2, 4, 8, None)}
    for ranks in variants.values():
        denoise_set([noisy[:64, :64]], DenoiseParams(noise_sigma=25.0, ranks=ranks))
    runs: dict = {k: [] for k in variants}
    for _ in range(repeats):
        for label, ranks in variants.items():
            t, c = time.perf_counter(), time.process_time()
            res = denoise_set([noisy], DenoiseParams(noise_sigma=25.0, ranks=ranks))
            runs[label].append((time.process_time() - c, time.perf_counter() - t, res.timings))
    print(f"ranks: astronaut 600x900, sigma 25, median of {repeats} alternations")
    base = np.median([r[0] for r in runs["auto"]])
    for label, rs in runs.items():
        cpu, wall = (float(np.median([r[i] for r in rs])) for i in range(2))
        st = min(rs, key=lambda r: r[1])[2]
        print(f"{label}: CPU {cpu:.1f} s ({cpu / base:.2f}x the auto rank's), wall {wall:.1f} s; "
              "stages (fastest run): "
              + ", ".join(f"{k} {v:.1f}" for k, v in st.items() if k not in ("total", "image")),
              flush=True)
    # the explicit ranks' share, on one thread (where a timer around them is the truth)
    keep = numba.get_num_threads()
    numba.set_num_threads(1)
    steps.own_components = timed
    try:
        c = time.process_time()
        denoise_set([noisy], DenoiseParams(noise_sigma=25.0, ranks=variants["1 2 4 8 auto"]))
        c = time.process_time() - c
    finally:
        steps.own_components = own
        numba.set_num_threads(keep)
    print(f"1 2 4 8 auto on one thread: CPU {c:.1f} s, of which the explicit ranks' own kernel "
          f"PCA (steps.own_components) {spent['own']:.1f} s ({spent['own'] / c:.0%})",
          flush=True)


SECTIONS = {"bar": bench_bar, "n10k": bench_n10k, "gram": bench_gram, "solvers": bench_solvers,
            "digits": bench_digits, "e2e": bench_end_to_end, "ab": bench_ab,
            "abstack": bench_abstack, "abchunk": bench_abchunk, "abdist": bench_abdist,
            "predict": bench_predict, "parts": bench_parts, "tiles": bench_tiles,
            "ranks": bench_ranks}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="+", choices=sorted(SECTIONS),
                    default=[s for s in SECTIONS
                             if s not in ("ab", "abstack", "abchunk", "abdist", "predict", "parts",
                                          "tiles", "ranks")],
                    help="the sections to run (default: all but ab, abstack, abchunk, "
                         "abdist, predict, parts, tiles and ranks)")
    ap.add_argument("--base", help="ab, abstack: a checkout of the base commit")
    ap.add_argument("--repeats", type=int, default=4,
                    help="ab, abstack, abchunk, tiles, ranks: alternations per image")
    ap.add_argument("--sizes", nargs="+", help="tiles: the photographs' sizes, WxH")
    args = ap.parse_args()
    print(results_header(), flush=True)
    warnings.simplefilter("ignore", UserWarning)
    for name in args.only:
        if name in ("ab", "abstack", "abchunk", "abdist"):
            SECTIONS[name](args.base, args.repeats)
        elif name == "ranks":
            SECTIONS[name](args.repeats)
        elif name == "tiles":
            SECTIONS[name](args.repeats, *([args.sizes] if args.sizes else []))
        else:
            SECTIONS[name]()


if __name__ == "__main__":
    main()
