"""Does the learned ridge pre-image help as the Mika fixed point's initialiser?
(a script, not a test; issue 11)

    python -m benchmarks.preimage_init

Noisy digits as tests/core/test_digits.py: 1000 training digits and 797 test
digits on [0, 1], noise std 0.25, KernelPCA.for_denoising(n_components)
(rbf, gamma='noise') with fit_inverse_transform=True.  For each rank and
ridge alpha: test MSE against the clean digits and the fixed point's
iterations / time for three starts: the noisy input (what the pipeline
uses), the ridge map's output, and the default (the input-space expansion).
The ridge map alone is listed too.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from benchmarks.common import exit_on_help, noisy_digits, results_header
from kpca_denoise import KernelPCA


def main():
    exit_on_help(sys.argv[1:], __doc__)
    print(results_header(), flush=True)
    Ntr, Xte, Nte = noisy_digits()

    def mse(a):
        return float(np.mean((a - Xte) ** 2))

    print(f"noisy {mse(Nte):.4f}")
    for k in (32, 128):
        for alpha in (0.1, 1.0):
            m = KernelPCA.for_denoising(k, fit_inverse_transform=True, alpha=alpha).fit(Ntr)
            Z = m.transform(Nte)
            ridge = m.inverse_transform(Z)
            row = [f"k={k:<3} alpha={alpha:<4} gamma={m.gamma_:.4f}  ridge alone {mse(ridge):.4f}"]
            for name, init in (("noisy input", Nte), ("ridge", ridge), ("expansion", None)):
                t = time.perf_counter()
                R = m.fixed_point_inverse_transform(Z, init=init)
                dt = time.perf_counter() - t
                s = m.preimage_stats_
                row.append(f"{name}: {mse(R):.4f} ({s.iterations} it max, {dt:.2f} s)")
            print(" | ".join(row), flush=True)


if __name__ == "__main__":
    main()
