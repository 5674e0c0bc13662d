"""Where numba caches the engine's compiled functions, decided before numba is imported
(the package's ``__init__`` calls it, so the library, the command line and the window
all get it), and whether a run will compile them first (:func:`compile_seconds`,
:func:`announce_compile`: the command line's note; only they import numba)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

__all__ = ["use_writable_numba_cache", "compile_seconds", "announce_compile", "COMPILE_SECONDS"]

#: each method's kernels, by module (every kernel of these modules is compiled on the
#: method's first run and loaded from numba's cache after)
KERNEL_MODULES = {"grouped": ("core.grouped.matching", "core.grouped.group_pca",
                              "core.grouped.shrinkage"),
                  "global": ("core.kernels",)}

#: seconds of one core the first compile of each method's kernels takes: a 128x128
#: image's run with an empty cache less the same run with it (docs/speed.md#the-first-run)
COMPILE_SECONDS = {"grouped": 20, "global": 4}


def use_writable_numba_cache() -> None:
    """Give numba a cache folder it can write before it is imported.

    The engine's compiled functions are cached (``cache=True``) next to their source
    or in the user's cache folder; a non-root user of a root-owned install with no
    writable home has neither, and numba then refused every command, ``--version``
    included, with a traceback (``cannot cache function ...: no locator available``).
    Then the cache goes to a folder of this user's in the temporary folder, or, if that
    cannot be trusted, to a new one for this run (said in one line)."""
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


def compile_seconds(methods) -> float:
    """Estimate the seconds numba will spend compiling these methods' kernels.

    Seconds of compiling the kernels of these methods (``'grouped'``, ``'global'``)
    before a run's first result: each method's :data:`COMPILE_SECONDS` in the share of
    its kernel modules with nothing in numba's cache (a module changed since it was
    cached counts as empty, as numba then compiles it again); 0 when all are cached or
    numba's cache cannot be read."""
    import importlib

    try:
        from numba.core.registry import CPUDispatcher
    except ImportError:
        return 0.0
    total = 0.0
    for method in dict.fromkeys(methods):
        modules = KERNEL_MODULES.get(method, ())
        cold = 0
        for name in modules:
            mod = importlib.import_module(f"{__package__}.{name}")
            kernels = [f for f in vars(mod).values() if isinstance(f, CPUDispatcher)
                       and f.py_func.__module__ == mod.__name__
                       and f.targetoptions.get("inline", "never") == "never"]
            try:
                cold += bool(kernels) and not any(f._cache._cache_file._load_index()
                                                  for f in kernels)
            except (AttributeError, OSError, ValueError, EOFError):
                pass  # no cache, or numba's internals changed: no claim
        total += COMPILE_SECONDS[method] * cold / len(modules) if modules else 0.0
    return total


def announce_compile(methods, say, at_least: float = 10.0):
    """Announce a long compile through ``say`` as numba starts compiling.

    Call ``say(seconds)`` once, when numba starts compiling one of the engine's kernels
    (not when it loads them from its cache), if the compile expected for these methods
    (:func:`compile_seconds`) is at least ``at_least`` seconds.  Returns the function that
    stops listening."""
    seconds = compile_seconds(methods)
    if seconds < at_least:
        return lambda: None
    from numba.core import event

    said: list = []

    class _FirstCompile(event.Listener):
        def on_start(self, ev) -> None:
            func = getattr(ev.data.get("dispatcher"), "py_func", None)
            if not said and getattr(func, "__module__", "").startswith(__package__ + "."):
                said.append(True)
                say(seconds)

        def on_end(self, ev) -> None:
            pass

    listener = _FirstCompile()
    event.register("numba:compile", listener)
    return lambda: event.unregister("numba:compile", listener)
