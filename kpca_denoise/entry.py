"""The command's entry point: :mod:`kpca_denoise.cli` loaded behind a Ctrl-C guard, so
that an interrupt while its libraries load (about a second) ends the command in one
line, as one during a run does, not with a traceback."""

from __future__ import annotations

import sys

#: what an interrupt before the command started says (nothing was read or written)
INTERRUPTED_EARLY = "error: interrupted before any input was read; nothing was written"


def main(argv=None) -> int:
    """``kpca-denoise``: :func:`kpca_denoise.cli.main` once it is loaded."""
    try:
        from .cli import main as run
    except KeyboardInterrupt:
        print(f"\n{INTERRUPTED_EARLY}", file=sys.stderr)
        return 130
    return run(argv)
