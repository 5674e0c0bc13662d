"""Work-arounds for bugs in the Qt bindings, each detected at run time.

PySide6 6.12.0 on CPython < 3.12 returns the singletons without taking a
reference: ``SignalInstance.emit()`` returns ``True`` and every void method
(``setVisible``, ``processEvents``, ...) returns ``None`` that way, as if
they were immortal, which they are only from Python 3.12 on.  Every such
call from Python (ours, pyqtgraph's, pytest-qt's) lowers the reference count
of ``True`` or ``None`` by one; after a few thousand calls, i.e. seconds of
interaction, CPython aborts with "Fatal Python error: bool_dealloc
(none_dealloc): deallocating True (None)".  Measured here with 6.12.0 and
CPython 3.11.7: ``sys.getrefcount(True)`` drops by 1 per ``emit()`` and
``sys.getrefcount(None)`` by 1 per ``QWidget.setVisible(False)``.

The guard measures the leak once and, only if it is there, gives ``True``,
``False`` and ``None`` a very large reference count so they can never reach
zero, which is what 3.12 does for every singleton.  The real fix is a PySide6 release without the bug.
"""

from __future__ import annotations

import ctypes
import sys

__all__ = ["guard_emit_refcount_bug", "EMIT_LEAKS_TRUE"]

#: set by :func:`guard_emit_refcount_bug`: whether this PySide6 has the bug
EMIT_LEAKS_TRUE: bool | None = None
_RESERVE = 1 << 40  # ~10^12 emits before True could reach zero again


def _singleton_leak() -> int:
    """References to True and None lost by 10 emits and 10 void calls."""
    from PySide6.QtCore import QObject, Signal

    class _Probe(QObject):
        ping = Signal()

    probe = _Probe()
    t0, n0 = sys.getrefcount(True), sys.getrefcount(None)
    for _ in range(10):
        probe.ping.emit()  # returns bool
        probe.setObjectName("probe")  # returns None (void)
    return (t0 - sys.getrefcount(True)) + (n0 - sys.getrefcount(None))


def guard_emit_refcount_bug() -> bool:
    """Apply the guard if ``emit()`` leaks; returns True when it was applied."""
    global EMIT_LEAKS_TRUE
    if EMIT_LEAKS_TRUE is not None:
        return EMIT_LEAKS_TRUE
    if sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        EMIT_LEAKS_TRUE = False
        return False
    leak = _singleton_leak()
    EMIT_LEAKS_TRUE = leak > 0
    if EMIT_LEAKS_TRUE:
        for obj in (True, False, None):
            # ob_refcnt is the first field of every object in a release build of CPython
            refcnt = ctypes.c_ssize_t.from_address(id(obj))
            refcnt.value += _RESERVE
    return EMIT_LEAKS_TRUE
