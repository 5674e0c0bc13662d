"""Results do not depend on the number of numba threads beyond floating-point noise.

The suite itself runs with whatever ``NUMBA_NUM_THREADS`` the machine gives; these tests
run the thread-sensitive parts again in fresh processes with 1 and 4 threads.
"""

import os
import pathlib
import subprocess
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]

_DENOISE = """
import sys, numpy as np
from kpca_denoise.core.grouped import denoise_grouped
rng = np.random.default_rng(3)
y, x = np.mgrid[0:72, 0:72]
clean = 128 + 60 * np.sin(x / 5.0) * np.cos(y / 7.0)
noisy = clean + rng.normal(0, 25, clean.shape)
outs, _ = denoise_grouped(noisy, 25.0, ranks=(None, 2, 8))
fast, _ = denoise_grouped(noisy, 25.0, options="fast")
np.save(sys.argv[1], np.stack([outs[None], outs[2], outs[8], fast[None]]))
# a stack: its parts run at once on the threads, their sums and counts added in order
from kpca_denoise.core.grouped.sequence import denoise_grouped_stack
pages = np.stack([clean[k:k + 56, 2 * k:2 * k + 56] for k in range(5)])[..., None]
out, st = denoise_grouped_stack(pages + rng.normal(0, 25, pages.shape), 25.0, ranks=(None, 3))
np.save(sys.argv[1] + ".stack.npy", np.stack([out[None], out[3]]))
np.save(sys.argv[1] + ".spectrum.npy", np.asarray(st[0]["spectrum"]))
"""


def _run(env_threads, args, cwd=ROOT):
    env = dict(os.environ, NUMBA_NUM_THREADS=str(env_threads), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def test_grouped_output_is_the_same_with_1_and_4_threads(tmp_path):
    outs = {}
    for n in (1, 4):
        f = tmp_path / f"t{n}.npy"
        r = _run(n, ["-c", _DENOISE, str(f)])
        assert r.returncode == 0, r.stderr[-2000:]
        outs[n] = np.load(f)
    # pixel values 0..255: differences are summation-order noise only
    np.testing.assert_allclose(outs[4], outs[1], rtol=0, atol=1e-8)
    for kind in ("stack", "spectrum"):
        a, b = (np.load(tmp_path / f"t{n}.npy.{kind}.npy") for n in (1, 4))
        assert a.shape == b.shape and a.size > 0
        np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-8)


def test_the_thread_sensitive_quality_tests_pass_with_4_threads():
    r = _run(4, ["-m", "pytest", "-q", "-p", "no:cacheprovider",
                 "tests/pipeline/test_quality.py::test_grouped_explicit_ranks_keep_components_whole"])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "1 passed" in r.stdout
