"""The command's entry point: :mod:`kpca_denoise.cli` loaded behind a Ctrl-C guard, so
that an interrupt while its libraries load (about a second) ends the command in one
line, as one during a run does, not with a traceback."""

from __future__ import annotations

import os
import sys

#: what an interrupt before the command started says (nothing was read or written)
INTERRUPTED_EARLY = "error: interrupted before any input was read; nothing was written"


def numba_threads_problem(environ=os.environ) -> str | None:
    """What is wrong with ``NUMBA_NUM_THREADS``, in a line, or None: numba refuses a count
    below 1 with a traceback as it loads (and ignores text with a warning)."""
    value = environ.get("NUMBA_NUM_THREADS")
    if value is None or value.strip() == "":
        return None
    try:
        ok = int(value) >= 1
    except ValueError:
        ok = False
    if ok:
        return None
    cpus = os.cpu_count() or 1
    return (f"NUMBA_NUM_THREADS={value}: the number of threads must be a whole number of at "
            f"least 1; unset it, or set it from 1 to {cpus} (this machine's CPUs)")


def main(argv=None) -> int:
    """``kpca-denoise``: :func:`kpca_denoise.cli.main` once it is loaded (``--version``
    answered without loading it: it loads numpy and numba, seconds on a cold start)."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args == ["--version"]:
        from . import __version__

        print(f"kpca-denoise {__version__}")
        return 0
    problem = numba_threads_problem()
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        from .cli import main as run
    except KeyboardInterrupt:
        print(f"\n{INTERRUPTED_EARLY}", file=sys.stderr)
        return 130
    return run(argv)
