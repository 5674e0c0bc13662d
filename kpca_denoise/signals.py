"""SIGTERM, SIGHUP and the other signals whose default is to end the process stop a
command-line run as Ctrl-C does: the handlers that turn them into :class:`Terminated`,
the block that holds them while an input's files are written and recorded, and the exit
code of an interrupted run."""

from __future__ import annotations

import contextlib
import signal

__all__ = ["Terminated", "STOP_SIGNALS", "stop_signals_interrupt", "signals_held",
           "interrupted_code"]


class Terminated(KeyboardInterrupt):
    """A stop signal other than Ctrl-C, raised so the run stops as on Ctrl-C.

    SIGTERM, SIGHUP (the terminal closed, the session ended) or another of
    :data:`STOP_SIGNALS`: the run stops as on Ctrl-C (the cluster closed, what was
    written listed in the sidecar), with exit code 128 + the signal's number (143, 129)."""

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        super().__init__(signum)
        self.signum = int(signum)


#: the signals that stop a run as Ctrl-C does: those whose default action ends the
#: process (Ctrl-\, a CPU-time limit, a timer, a user signal), where the platform has
#: them (Windows has only SIGTERM)
STOP_SIGNALS = tuple(getattr(signal, name) for name in (
    "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGVTALRM", "SIGPROF",
    "SIGXCPU") if hasattr(signal, name))


@contextlib.contextmanager
def _handlers(handler, *signums):
    """``handler`` for these signals while the block runs, the previous ones after (in
    the main thread only: elsewhere signals are not ours to handle).  A signal the
    process was started with ignored stays ignored, as Python keeps SIGINT: ``nohup``
    (SIGHUP) and a background job of a shell script (SIGINT) ask for that."""
    try:
        previous = {s: signal.signal(s, handler) for s in signums
                    if signal.getsignal(s) is not signal.SIG_IGN}
    except ValueError:
        yield
        return
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, signal.SIG_DFL if old is None else old)


def stop_signals_interrupt():
    """Turn stop signals into :class:`Terminated` while the command runs.

    Turn :data:`STOP_SIGNALS` into :class:`Terminated` while the command runs: their
    default action ends the process with no cleanup (a cluster's workers left running,
    no sidecar for the files written).  An ignored one (``nohup``) stays ignored."""
    def stop(signum, frame):
        raise Terminated(signum)

    return _handlers(stop, *STOP_SIGNALS)


@contextlib.contextmanager
def signals_held():
    """Hold Ctrl-C and stop signals while an input's files are written.

    Hold Ctrl-C and :data:`STOP_SIGNALS` while an input's files are written and recorded,
    and deliver them after: an interrupted run's sidecar lists every file it wrote."""
    held: list = []
    try:
        with _handlers(lambda signum, frame: held.append(signum), signal.SIGINT,
                       *STOP_SIGNALS):
            yield
    finally:
        for s in dict.fromkeys(held):
            signal.raise_signal(s)


def interrupted_code(exc: KeyboardInterrupt) -> int:
    """Return the exit code of an interrupted run.

    128 + the signal's number, as a shell reports a process the signal ended (130 for
    Ctrl-C)."""
    return 128 + exc.signum if isinstance(exc, Terminated) else 130
