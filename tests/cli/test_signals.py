"""Signals and killed processes (issue 35): what ``kill``, a closed terminal or an
ended session leave behind.  Every test here runs the program in a subprocess and
waits for conditions with a deadline, never for a time."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
INTERRUPTED = "error: interrupted; files already written are complete, nothing partial was left"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="signals and /proc as Linux has them")


def _env(tmp_path, **extra):
    env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_CONFIG_HOME=str(tmp_path / "config"))
    env.update(extra)
    return env


def _wait_for(condition, deadline_s, what, proc=None):
    """Poll ``condition`` until it is true; fail after ``deadline_s`` seconds (or when
    ``proc`` ended first)."""
    end = time.monotonic() + deadline_s
    while not condition():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process ended (exit {proc.returncode}) before {what}")
        if time.monotonic() > end:
            raise AssertionError(f"no {what} within {deadline_s} s")
        if proc is not None:
            try:
                proc.wait(timeout=0.05)
            except subprocess.TimeoutExpired:
                pass
        else:
            time.sleep(0.05)  # a poll interval, not a timing assumption


def _as_a_terminal_starts_it() -> None:
    """SIGHUP, SIGINT and SIGQUIT at their defaults in the child: a test run under
    ``nohup``, or launched in the background by a shell script, has them ignored, and
    the command keeps an inherited ignored signal ignored."""
    for signum in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT):
        signal.signal(signum, signal.SIG_DFL)


def _end(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


# -- 1. the command line: SIGTERM, SIGHUP and the others as Ctrl-C ---------------------


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT,
                                    signal.SIGUSR1],
                         ids=["SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1"])
def test_sigterm_and_sighup_stop_a_run_as_ctrl_c(tmp_path, signum):
    """``kill``, a closed terminal, Ctrl-\\ or a user signal mid-run: complete files
    only, the run's sidecar lists them and says the run was interrupted, exit code 128 +
    the signal."""
    from PIL import Image

    src = tmp_path / "in"
    src.mkdir()
    rng = np.random.default_rng(0)
    n = 12
    for k in range(n):
        Image.fromarray((rng.random((160, 160)) * 255).astype(np.uint8)).save(src / f"im{k:02d}.png")
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "kpca_denoise", "denoise", str(src), "-o",
                             str(out), "--noise-sigma", "20", "-q"], cwd=ROOT, env=_env(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_as_a_terminal_starts_it)
    try:
        _wait_for(lambda: out.exists() and any(out.glob("*_kpca.png")), 600,
                  "first result on disk", proc)
        os.kill(proc.pid, signum)
        _, err = proc.communicate(timeout=120)
    finally:
        _end(proc)
    sidecars = sorted(out.glob("kpca-denoise-*.json"))
    written = sorted(p.name for p in out.iterdir() if p not in sidecars)
    assert proc.returncode == 128 + signum, err[-800:]
    assert err.strip().splitlines()[-1] == INTERRUPTED
    assert all(name.endswith("_kpca.png") for name in written), written  # no .part
    assert 1 <= len(written) < n
    assert len(sidecars) == 1
    side = json.loads(sidecars[0].read_text())
    assert side["interrupted"] is True and sorted(side["files"]) == written
    for name in written:  # complete files
        assert Image.open(out / name).size == (160, 160)


def _ignore_sighup_and_sigint() -> None:
    for signum in (signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, signal.SIG_IGN)


def test_a_signal_the_command_was_started_with_ignored_stays_ignored(tmp_path):
    """``nohup`` (SIGHUP ignored) and a background job of a shell script (SIGINT
    ignored): the command's handlers leave those two ignored, so the run goes on;
    SIGTERM still stops it."""
    code = ("import os, signal\n"
            "from kpca_denoise.signals import interrupted_code, signals_held, "
            "stop_signals_interrupt\n"
            "try:\n"
            "    with stop_signals_interrupt():\n"
            "        os.kill(os.getpid(), signal.SIGHUP)\n"
            "        with signals_held():\n"
            "            os.kill(os.getpid(), signal.SIGINT)\n"
            "        print('went on', flush=True)\n"
            "        os.kill(os.getpid(), signal.SIGTERM)\n"
            "        print('not stopped')\n"
            "except KeyboardInterrupt as exc:\n"
            "    print(interrupted_code(exc))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(tmp_path),
                          capture_output=True, text=True, timeout=120,
                          preexec_fn=_ignore_sighup_and_sigint)
    assert (done.stdout, done.stderr) == ("went on\n143\n", "")


# -- 2. the window's compute process ends with the window ------------------------------


def _children(pid: int) -> dict:
    """The descendants of ``pid`` still running: {pid: command line}."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] != "Z":  # a zombie has ended; only its exit status is left
            parents[int(entry.name)] = int(fields[1])
    found, todo = {}, [pid]
    while todo:
        p = todo.pop()
        for child, parent in parents.items():
            if parent == p and child not in found:
                try:
                    found[child] = (Path("/proc") / str(child) / "cmdline").read_bytes() \
                        .replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    continue
                todo.append(child)
    return found


def _running(pids) -> list:
    alive = []
    for p in pids:
        try:
            state = (Path("/proc") / str(p) / "stat").read_text()
        except OSError:
            continue
        if state[state.rindex(")") + 2:].split()[0] != "Z":
            alive.append(p)
    return alive


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGUSR1, signal.SIGKILL],
                         ids=["SIGTERM", "SIGUSR1", "SIGKILL"])
def test_the_compute_process_ends_with_the_window(tmp_path, signum):
    """SIGTERM closes the window as Quit does (exit 143) and stops its compute process;
    after a SIGKILL of the window, which no handler sees, the compute process notices its
    parent is gone and ends.  Multiprocessing's resource tracker ends with them."""
    env = _env(tmp_path, QT_QPA_PLATFORM="offscreen")
    log = tmp_path / "gui.log"  # a file, not a pipe: the children hold it open too
    with open(log, "w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "kpca_denoise", "gui"], cwd=ROOT,
                                env=env, stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)
    found: dict = {}
    try:

        def started() -> bool:
            found.update(_children(proc.pid))
            cmds = " | ".join(found.values())
            return "spawn_main" in cmds and "resource_tracker" in cmds

        _wait_for(started, 300, "compute process", proc)
        os.kill(proc.pid, signum)
        proc.wait(timeout=120)
        assert proc.returncode == (-signal.SIGKILL if signum == signal.SIGKILL
                                   else 128 + signum), \
            log.read_text()[-800:]
        _wait_for(lambda: not _running(found), 60, "end of the window's children")
    finally:
        _end(proc)
        for p in _running(found):
            os.kill(p, signal.SIGKILL)


# -- 3. a writer killed mid-write ------------------------------------------------------

_WRITER = """
import sys
from kpca_denoise.io import atomic_write

def write(tmp):
    tmp.write_bytes(b"half a file")
    print(tmp, flush=True)
    sys.stdin.read()  # held here until killed

atomic_write(sys.argv[1], write)
"""


def _writer(target: Path):
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(target)], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    part = Path(proc.stdout.readline().strip())  # the writer is inside its write
    assert part.is_file() and part.parent == target.parent, part
    return proc, part


def test_a_part_file_of_a_killed_writer_is_removed_by_the_next_run(tmp_path, monkeypatch,
                                                                   capsys):
    """SIGKILL during a write left a hidden ``.part`` file that no run removed.  The next
    run into the folder removes it; the one of a writer still writing stays."""
    from PIL import Image

    from helpers import fake_tiles
    from kpca_denoise.cli import main

    out = tmp_path / "out"
    out.mkdir()
    killed, stale = _writer(out / "a_kpca.png")
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait()
    assert stale.is_file()  # what SIGKILL leaves: no handler runs
    live, running = _writer(out / "b_kpca.png")
    try:
        other = out / ".c_kpca.kpca-0badc0de-1-abcdefgh.png.part"  # another machine's writer
        other.write_bytes(b"")
        mine = out / ".d_kpca.abcdefgh.png.part"  # not a name of ours: never removed
        mine.write_bytes(b"")
        Image.fromarray(np.zeros((24, 24), np.uint8)).save(tmp_path / "x.png")
        fake_tiles(monkeypatch)
        assert main(["denoise", str(tmp_path / "x.png"), "-o", str(out), "--noise-sigma", "10",
                     "-q"]) == 0
        err = capsys.readouterr().err
        assert not stale.exists()
        assert running.is_file() and other.is_file() and mine.is_file()
        assert f"note: removed 1 temporary file(s) an interrupted run left in {out}" in err
    finally:
        live.kill()
        live.wait()


def test_ctrl_c_while_the_command_loads_is_one_line(monkeypatch, capsys):
    """An interrupt while the command's libraries load (its first second) printed
    Python's 40-line traceback; now one line and 130, as during a run."""
    from kpca_denoise import entry

    class Loading:
        def __getattr__(self, name):
            raise KeyboardInterrupt

    monkeypatch.setitem(sys.modules, "kpca_denoise.cli", Loading())
    assert entry.main(["denoise", "x.png", "-o", "o"]) == 130
    assert capsys.readouterr().err.strip() == entry.INTERRUPTED_EARLY


def test_a_signal_while_the_run_closes_still_leaves_its_sidecar(tmp_path):
    """A signal that arrives as the run ends (a second Ctrl-C, or ``timeout`` signalling
    the workers too) was raised out of the executor's close: the files written stood
    without their sidecar.  Now it waits until the sidecar is written."""
    from PIL import Image

    src = tmp_path / "in"
    src.mkdir()
    for k in range(2):
        Image.fromarray((np.random.default_rng(k).random((48, 48)) * 255).astype(np.uint8)) \
            .save(src / f"im{k}.png")
    out = tmp_path / "out"
    child = (
        "import os, signal, sys\n"
        "from kpca_denoise.executor import Executor\n"
        "close = Executor.close\n"
        "def closing(self):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    close(self)\n"
        "Executor.close = closing\n"
        "from kpca_denoise.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n")
    run = subprocess.run([sys.executable, "-c", child, "denoise", str(src), "-o", str(out),
                          "--noise-sigma", "20", "-q"], cwd=ROOT, env=_env(tmp_path),
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 128 + signal.SIGTERM, run.stderr[-800:]
    assert "Traceback" not in run.stderr and run.stderr.strip().splitlines()[-1] == INTERRUPTED
    sidecars = sorted(out.glob("kpca-denoise-*.json"))
    assert len(sidecars) == 1, sorted(p.name for p in out.iterdir())
    side = json.loads(sidecars[0].read_text())
    assert sorted(side["files"]) == ["im0_kpca.png", "im1_kpca.png"]
