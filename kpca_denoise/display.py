"""Whether the window of ``kpca-denoise gui`` can open, found out before Qt is loaded: Qt
aborts (exit 134, a screenful of its own text) when there is no display or its xcb
platform plugin cannot load its libraries.  Linux only; elsewhere, or with another Qt
platform asked for (``QT_QPA_PLATFORM``, a Wayland session), nothing is checked."""

from __future__ import annotations

import ctypes.util
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

__all__ = ["display_problem", "debian_package"]

#: what Qt's xcb plugin opens at run time (not a link dependency: ldd does not list it)
_LOADED_AT_RUN_TIME = ("xcb-cursor",)


def debian_package(soname: str) -> str:
    """The Debian/Ubuntu package that ships a library, by the distributions' naming rule:
    ``libxcb-icccm.so.4`` -> ``libxcb-icccm4``, ``libxkbcommon-x11.so.0`` ->
    ``libxkbcommon-x11-0`` (a hyphen where the name ends in a digit)."""
    name, _, version = soname.partition(".so")
    version = version.lstrip(".").split(".")[0]
    sep = "-" if name[-1:].isdigit() and version else ""
    return f"{name}{sep}{version}".lower()


def _xcb_plugin() -> Path | None:
    """PySide6's xcb platform plugin, found without importing PySide6."""
    spec = importlib.util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return None
    plugin = (Path(next(iter(spec.submodule_search_locations))) / "Qt" / "plugins"
              / "platforms" / "libqxcb.so")
    return plugin if plugin.is_file() else None


def _missing_libraries(plugin: Path | None) -> list[str]:
    """The libraries the xcb plugin needs that this system lacks (ldd's "not found", and
    the ones Qt opens at run time)."""
    missing = []
    if plugin is not None:
        try:
            out = subprocess.run(["ldd", str(plugin)], capture_output=True, text=True,
                                 timeout=20).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        missing += [m for m in re.findall(r"^\s*(\S+)\s+=>\s+not found", out, re.M)]
    missing += [f"lib{name}.so.0" for name in _LOADED_AT_RUN_TIME
                if ctypes.util.find_library(name) is None]
    return list(dict.fromkeys(missing))


def _x_server_running(display: str) -> bool | None:
    """Whether a local X server listens for ``display`` (":0", "unix:1.0"): its socket
    in /tmp/.X11-unix, or the abstract one Linux servers also open; None: not a local
    display, or not known."""
    m = re.fullmatch(r"(?:unix)?:(\d+)(?:\.\d+)?", display.strip())
    if m is None:
        return None  # a remote display (ssh -X gives localhost:10.0): Qt says
    sock = f"/tmp/.X11-unix/X{m[1]}"
    if os.path.exists(sock):
        return True
    try:
        with open("/proc/net/unix") as f:
            return any(line.rstrip().endswith(("@" + sock, " " + sock)) for line in f)
    except OSError:
        return None


def display_problem(environ=os.environ, platform: str = sys.platform) -> str | None:
    """Why the window cannot open here, in a line naming what is missing and the fix,
    or None when it can (or this cannot be told without Qt)."""
    if not platform.startswith("linux"):
        return None
    qpa = environ.get("QT_QPA_PLATFORM", "")
    if qpa and not qpa.startswith("xcb"):
        return None  # offscreen, wayland, vnc ...: Qt's to judge
    if not qpa and environ.get("WAYLAND_DISPLAY"):
        return None  # a Wayland session: Qt takes its Wayland plugin
    display = environ.get("DISPLAY", "")
    if not display:
        return ("no display for the window: DISPLAY is not set (no desktop session here); "
                "start it from a desktop session or over ssh -X, or use 'kpca-denoise "
                "denoise' on the command line")
    if _x_server_running(display) is False:
        return (f"no display for the window: DISPLAY={display} names no running X server; "
                "start it from the desktop session, or set DISPLAY to that session's")
    missing = _missing_libraries(_xcb_plugin())
    if missing:
        packages = " ".join(dict.fromkeys(debian_package(m) for m in missing))
        return (f"the window cannot open: Qt's xcb platform plugin needs {', '.join(missing)}, "
                f"missing here; install them (Debian/Ubuntu: sudo apt install {packages})")
    return None
