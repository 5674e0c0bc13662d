"""scikit-learn's own tests, run against our KernelPCA.

``sklearn/decomposition/tests/test_kernel_pca.py`` is located in the
installed scikit-learn at run time, its import of ``KernelPCA`` rewritten to
ours (nothing else changes), and run with pytest in a subprocess with
scikit-learn's conftest (``global_random_seed``).  Every test must pass as it
does for scikit-learn's own class (38 passed, 1 skipped -- the pandas one --
with scikit-learn 1.9.1).  ``check_estimator`` must pass with no skips
beyond scikit-learn's own for its KernelPCA.
"""

import pathlib
import re
import subprocess
import sys
import warnings

import pytest
import sklearn
from sklearn.decomposition import KernelPCA as SkKernelPCA
from sklearn.utils.estimator_checks import check_estimator

from kpca_denoise import KernelPCA

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _rewritten_suite(tmp_path):
    src = pathlib.Path(sklearn.__file__).parent / "decomposition" / "tests" / "test_kernel_pca.py"
    text = src.read_text()
    old = "from sklearn.decomposition import PCA, KernelPCA\n"
    assert text.count(old) == 1, "scikit-learn's test file changed its import line"
    path = tmp_path / "test_kernel_pca_ours.py"
    path.write_text(text.replace(old, "from sklearn.decomposition import PCA\n"
                                      "from kpca_denoise import KernelPCA\n"))
    return path


def _run(path, *args):
    env_path = str(ROOT)
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "sklearn.conftest", "-p", "no:cacheprovider",
         "--rootdir", str(path.parent), "-o", "addopts=", *args, str(path)],
        capture_output=True, text=True, cwd=path.parent,
        env={**__import__("os").environ, "PYTHONPATH": env_path},
    )
    return out.returncode, out.stdout + out.stderr


def _counts(report):
    tail = report.strip().splitlines()[-1]
    return {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|skipped|error|errors)", tail)}


@pytest.mark.slow
def test_sklearn_kernel_pca_suite_passes_on_ours(tmp_path):
    path = _rewritten_suite(tmp_path)
    code, report = _run(path)
    counts = _counts(report)
    assert code == 0 and counts.get("failed", 0) == 0 and "error" not in counts, report[-3000:]
    # the same number of tests as scikit-learn's own class runs (1 skip: pandas missing)
    assert counts.get("passed", 0) >= 38, report[-3000:]
    assert "from kpca_denoise import KernelPCA" in path.read_text()


def _check_results(est):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return check_estimator(est, on_fail=None)


def test_check_estimator_passes_with_no_extra_skips():
    ours = _check_results(KernelPCA())
    failed = [r for r in ours if r["status"] == "failed"]
    assert not failed, [(r["check_name"], str(r["exception"])[:300]) for r in failed]
    theirs = _check_results(SkKernelPCA())
    skipped = {r["check_name"] for r in ours if r["status"] == "skipped"}
    assert skipped <= {r["check_name"] for r in theirs if r["status"] == "skipped"}
    assert len(ours) == len(theirs)
