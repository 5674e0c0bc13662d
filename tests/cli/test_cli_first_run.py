"""A first run compiles the numba kernels before any progress: the command line says so in
one line, and only when numba's cache does not hold them (kpca_denoise/numba_cache.py)."""

import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from PIL import Image

from kpca_denoise import cli, numba_cache
from kpca_denoise.cli_progress import ProgressBar
from kpca_denoise.core.progress import ProgressEvent
from kpca_denoise.cli import main
from kpca_denoise.numba_cache import COMPILE_SECONDS

ROOT = Path(__file__).resolve().parents[2]


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


def _fresh_kernel():
    """A kernel of the package's that numba has not compiled in this process."""
    import numba

    def probe(x):
        return x + 1

    probe.__module__ = "kpca_denoise.core.probe"
    return numba.njit(probe)


def test_the_command_line_says_a_first_compile_in_one_line_as_it_starts(tmp_path, capsys,
                                                                        monkeypatch):
    # numba's own compile event, from a kernel compiled during the run (what an empty
    # cache does to every kernel); the expected seconds as numba's cache index gives them
    asked = []

    def seconds(methods):
        asked.append(set(methods))
        return 26.0 if cold else 0.0

    def denoise_set(*a, **kw):
        _fresh_kernel()(1)
        return real(*a, **kw)

    real = cli.denoise_set
    monkeypatch.setattr(numba_cache, "compile_seconds", seconds)
    monkeypatch.setattr(cli, "denoise_set", denoise_set)
    img = (np.random.default_rng(0).random((20, 20)) * 255).astype(np.uint8)
    Image.fromarray(img).save(tmp_path / "a.png")
    Image.fromarray(img).save(tmp_path / "b.png")
    args = ["denoise", str(tmp_path / "a.png"), str(tmp_path / "b.png"), "-o",
            str(tmp_path / "o"), "--noise-sigma", "20", "--overwrite"]
    cold = True
    assert main(args) == 0
    err = capsys.readouterr().err.splitlines()
    note = "note: compiling the numba kernels once (about 26 s; cached for later runs)"
    assert err.count(note) == 1  # once, though each image compiled a kernel
    assert err.index(note) < err.index("grouping ...")  # as the compile starts
    cold = False
    assert main([*args, "--method", "global"]) == 0
    assert "compiling" not in capsys.readouterr().err
    # cached kernels: the run compiles nothing, and says nothing
    cold = True
    monkeypatch.setattr(cli, "denoise_set", real)
    assert main(args) == 0
    assert "compiling" not in capsys.readouterr().err
    assert asked == [{"grouped"}, {"global"}, {"grouped"}]


def test_the_note_ends_a_terminal_s_bar_line_first():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    buf = Tty()
    bar = ProgressBar(stream=buf)
    bar(ProgressEvent("noise", 0, 2))
    bar.note("note: compiling")
    assert buf.getvalue().endswith(" \nnote: compiling\n")
    assert buf.getvalue().count("\n") == 2
