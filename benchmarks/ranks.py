"""Are the GUI's default rank sets worth comparing?  PSNR per default rank, per method.

A script, not a test.  For each method ('grouped', 'global') and each sample input
(crops of ``camera.png`` and ``astronaut.png``, the first 500 samples of ``digits.npz``),
Gaussian noise of σ 25 is added (seed 0, as ``--add-noise 25``) and the input is
denoised at the ranks the desktop app proposes by default
(:func:`kpca_denoise.gui.model.default_ranks`; for patch sets the automatic rank
and then :func:`~kpca_denoise.gui.model.auto_neighbours` around it).  It prints
the PSNR of every rank, the difference to the neighbouring rank, and whether the
two *converge* (|Δ| < 0.3 dB, which the app then says under the view); for the
grouped method also the effective rank (mean kept components per group) when
the method reports it (``stats["effective_rank"]``).

Crops keep the grouped method to minutes on a shared 2-core machine; the full
images behave the same way (README figures come from this script's output,
``benchmarks/results/ranks.txt``).

Usage::

    python -m benchmarks.ranks [--crop 128]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from benchmarks.common import results_header, sample_digits, sample_image
from kpca_denoise.gui.model import auto_neighbours, default_ranks
from kpca_denoise.gui.jobs import compute_metrics
from kpca_denoise.params import DenoiseParams
from kpca_denoise.pipeline import denoise_set, result_keys

CONVERGED_DB = 0.3


def label(r) -> str:
    return "auto" if r is None else str(r)


def inputs(crop: int) -> list[tuple[str, np.ndarray, bool]]:
    cam = sample_image("camera.png")
    ast = sample_image("astronaut.png")
    c0 = (cam.shape[0] - crop) // 2
    dig = sample_digits()[:500]
    return [(f"camera {crop}² crop", cam[c0:c0 + crop, c0:c0 + crop], False),
            (f"astronaut {crop}² crop (face)", ast[30:30 + crop, 170:170 + crop], False),
            ("digits, 500 samples", dig, True)]


def _auto_key(params: DenoiseParams):
    return result_keys(params.replace(ranks=(None,)), False)[0]


def run(name: str, arr: np.ndarray, is_patchset: bool, method: str) -> None:
    ranks = default_ranks(method, is_patchset)
    params = DenoiseParams(method=method, ranks=ranks, add_noise=25.0, seed=0)
    t = time.perf_counter()
    res = denoise_set([arr], params, patch_sets=[is_patchset])
    img = res.images[0]
    auto = res.resolved.get("auto_rank")
    if is_patchset and auto:
        # the app adds the automatic rank's neighbours once the fit has chosen it
        ranks = auto_neighbours(int(auto), arr.shape[0])
        res = denoise_set([arr], params.replace(ranks=ranks), patch_sets=[is_patchset], model=res.model)
        img = res.images[0]
    secs = time.perf_counter() - t
    noisy = compute_metrics(img.noisy, arr, arr.dtype, is_patchset)["psnr"]
    eff = {}
    for st in (img.stats.get("grouped") or []):
        for r, v in (st.get("effective_rank") or {}).items():
            eff.setdefault(r, []).append(v)
    print(f"{name}, method {method}: noisy {noisy:.2f} dB ({secs:.0f} s)"
          + (f", auto = {auto}" if auto else ""))
    prev = None
    # in order of the components kept ('auto' where its rank falls)
    aval = auto or (_auto_key(params) if method == "global" else float("inf"))  # grouped: no cap
    ranks = sorted(ranks, key=lambda r: (aval if r is None else r, r is None))
    for r in ranks:
        # 'global' keys an image's 'auto' by the rank it stands for
        out = img.outputs[r] if r in img.outputs else img.outputs[_auto_key(params)]
        p = compute_metrics(out, arr, arr.dtype, is_patchset)["psnr"]
        d = "" if prev is None else f"  Δ {p - prev:+.2f} dB" + (" converges" if abs(p - prev) < CONVERGED_DB
                                                                else "")
        e = f"  effective rank {np.mean(eff[r]):.2f}" if r in eff else ""
        print(f"  rank {label(r):>5}: {p:6.2f} dB{d}{e}")
        prev = p
    sys.stdout.flush()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--crop", type=int, default=128, help="side of the image crops (default 128)")
    ns = ap.parse_args()
    print(results_header(), flush=True)
    print(f"PSNR per default rank, σ 25 added (seed 0); neighbours within {CONVERGED_DB} dB 'converge'")
    for name, arr, is_patchset in inputs(ns.crop):
        for method in ("grouped", "global"):
            run(name, arr, is_patchset, method)


if __name__ == "__main__":
    main()
