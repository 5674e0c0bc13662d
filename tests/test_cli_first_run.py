"""A first run compiles the numba kernels before any progress: the command line says so in
one line, and only when numba's cache does not hold them (kpca_denoise/numba_cache.py)."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from PIL import Image

from kpca_denoise import cli
from kpca_denoise.cli import main
from kpca_denoise.numba_cache import COMPILE_SECONDS

ROOT = Path(__file__).resolve().parents[1]


def test_an_empty_cache_is_told_from_one_that_holds_the_kernels(tmp_path):
    # an empty cache folder: every kernel is compiled first; the global method's kernels
    # compiled (a few seconds), the grouped method's are still to be
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    code = ("import numpy as np\n"
            "from kpca_denoise import DenoiseParams, denoise_set\n"
            "from kpca_denoise.numba_cache import compile_seconds as c\n"
            "print(c(['grouped']), c(['global']))\n"
            "img = (np.random.default_rng(0).random((24, 24)) * 255).astype(np.uint8)\n"
            "denoise_set([img], DenoiseParams(method='global', ranks=(2,), n_train=60,\n"
            "                                 preimage_iterations=3))\n"
            "print(c(['grouped']), c(['global']), c(['grouped', 'global']))\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-800:]
    before, after = (list(map(float, ln.split())) for ln in r.stdout.splitlines())
    g, gl = COMPILE_SECONDS["grouped"], COMPILE_SECONDS["global"]
    assert before == [g, gl]
    assert after == [g, 0.0, g]


def test_the_command_line_says_a_first_compile_in_one_line_before_it(tmp_path, capsys,
                                                                        monkeypatch):
    asked = []

    def seconds(methods):
        asked.append(set(methods))
        return 26.0 if cold else 0.0

    monkeypatch.setattr(cli, "compile_seconds", seconds)
    img = (np.random.default_rng(0).random((20, 20)) * 255).astype(np.uint8)
    Image.fromarray(img).save(tmp_path / "a.png")
    args = ["denoise", str(tmp_path / "a.png"), "-o", str(tmp_path / "o"), "--noise-sigma", "20",
            "--overwrite"]
    cold = True
    assert main(args) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "note: compiling the numba kernels once (about 26 s; cached for later runs)"
    assert not any("compiling" in ln for ln in err[1:])
    cold = False
    assert main([*args, "--method", "global"]) == 0
    assert "compiling" not in capsys.readouterr().err
    assert asked == [{"grouped"}, {"global"}]
