"""Where numba caches the engine's compiled functions, decided before numba is imported
(the package's ``__init__`` calls it, so the library, the command line and the window
all get it).  Nothing here imports numba."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

__all__ = ["use_writable_numba_cache"]


def use_writable_numba_cache() -> None:
    """Give numba a cache folder it can write before it is imported.  The engine's
    compiled functions are cached (``cache=True``) next to their source or in the
    user's cache folder; a non-root user of a root-owned install with no writable home
    has neither, and numba then refused every command, ``--version`` included, with a
    traceback (``cannot cache function ...: no locator available``).  Then the cache
    goes to a folder of this user's in the temporary folder, or, if that cannot be
    trusted, to a new one for this run (said in one line)."""
    import atexit
    import shutil
    import stat

    if os.environ.get("NUMBA_CACHE_DIR") or "numba" in sys.modules:
        return

    def writable(folder) -> bool:
        try:
            os.makedirs(folder, exist_ok=True)
            tempfile.TemporaryFile(dir=folder).close()
        except OSError:
            return False
        return True

    core = Path(__file__).resolve().parent / "core"
    in_tree = {p.parent / "__pycache__" for p in core.rglob("*.py")}
    if sys.platform == "darwin":
        user_wide = Path("~/Library/Caches").expanduser() / "numba"
    elif os.name == "nt":
        return  # numba's folder under %LOCALAPPDATA%: not the case this is for
    else:
        user_wide = Path(os.environ.get("XDG_CACHE_HOME") or
                         os.path.expanduser("~/.cache")) / "numba"
    if all(writable(d) for d in sorted(in_tree)) or writable(user_wide):
        return
    try:
        # the user's own folder (a pickle cache another user could write is not loaded)
        folder = Path(tempfile.gettempdir()) / f"kpca-denoise-numba-{os.getuid()}"
        os.makedirs(folder, mode=0o700, exist_ok=True)
        st = os.lstat(folder)
        if (stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
                and not st.st_mode & 0o022 and writable(folder)):
            os.environ["NUMBA_CACHE_DIR"] = str(folder)
            return
    except OSError:
        pass
    try:
        folder = Path(tempfile.mkdtemp(prefix="kpca-denoise-numba-"))
    except OSError:
        return  # nowhere to write: numba says why
    os.environ["NUMBA_CACHE_DIR"] = str(folder)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    print(f"note: no writable cache folder for numba's compiled code; using {folder} for "
          "this run (set NUMBA_CACHE_DIR to keep it between runs)", file=sys.stderr)
