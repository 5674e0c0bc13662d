"""What the command-line tests share: a noisy smooth image, a run of the command that
fails on a traceback, a file's checksum, a folder's sidecars, and a fixture that fails
a test if the pipeline is reached."""

import hashlib

import numpy as np
import pytest

import kpca_denoise.cli as cli
from kpca_denoise.cli import main


def smooth(shape, dtype=np.uint8, seed=0):
    """A smooth image with a little noise (3% of the range), of this shape and type."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:shape[0], 0:shape[1]]
    hi = np.iinfo(dtype).max
    base = 0.5 + 0.3 * np.sin(x / 6 + seed) * np.cos(y / 9)
    if len(shape) == 3:
        base = base[..., None] * np.linspace(0.7, 1.0, shape[2])
    noisy = hi * base + rng.normal(0, 0.03 * hi, base.shape)
    return np.clip(noisy, 0, hi).astype(dtype)


def run_cli(args, capsys):
    """`main(args)`: (exit code, the error and note lines, the captured output)."""
    rc = main(args)
    cap = capsys.readouterr()
    errs = [line for line in cap.err.splitlines() if line.startswith(("error:", "note:"))]
    assert "Traceback" not in cap.err and "Traceback" not in cap.out
    return rc, errs, cap


def md5(p):
    return hashlib.md5(p.read_bytes()).hexdigest()


def sidecars(folder):
    return sorted(folder.glob("kpca-denoise-*.json"))


@pytest.fixture
def no_compute(monkeypatch):
    """Fail the test if the pipeline is reached: the error had to come first."""
    def boom(*a, **k):
        raise AssertionError("denoise_set was called before a foreseeable failure")

    monkeypatch.setattr(cli, "denoise_set", boom)


