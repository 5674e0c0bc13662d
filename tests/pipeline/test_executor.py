"""The executor: in-process and on a real dask.distributed cluster on 127.0.0.1
(a scheduler and two worker processes started here)."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kpca_denoise import DenoiseParams, denoise_set
from kpca_denoise.executor import Executor
from kpca_denoise.pipeline import add_noise
from helpers import assert_same_result

distributed = pytest.importorskip("distributed")

ROOT = Path(__file__).resolve().parents[2]


def _images(n, shape=(48, 56)):
    y, x = np.mgrid[0:shape[0], 0:shape[1]]
    return [np.clip(add_noise(120 + 60 * np.sin(x / (5.0 + k)) * np.cos(y / 9.0), 15, seed=k),
                    0, 255).astype(np.uint8) for k in range(n)]


# each image alone, as the executor runs images it is not told are a stack
GROUPED = DenoiseParams(noise_sigma=15.0, sequence="no")
GLOBAL = DenoiseParams(method="global", ranks=(4, 8), n_train=300, add_noise=5.0)


def _assert_same(reference, results):
    assert sorted(r.index for r in results) == list(range(len(reference.images)))
    by_index = {r.index: r for r in results}
    for res in reference.images:
        got = by_index[res.index]
        assert got.name == res.name and got.error is None
        assert set(got.outputs) == set(res.outputs)
        for k, out in res.outputs.items():
            assert_same_result(got.outputs[k], out)


def _start(args, env):
    return subprocess.Popen([sys.executable, "-m", *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory):
    """A scheduler and two single-threaded worker processes on 127.0.0.1."""
    from distributed import Client

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    sfile = tmp_path_factory.mktemp("dask") / "scheduler.json"
    procs = [_start(["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
                     "--dashboard-address", ":0", "--scheduler-file", str(sfile)], env)]
    try:
        with Client(scheduler_file=str(sfile), timeout=60) as client:
            address = client.scheduler.address
            for _ in range(2):
                procs.append(_start(["distributed.cli.dask_worker", address, "--nthreads", "1",
                                     "--no-nanny", "--host", "127.0.0.1",
                                     "--dashboard-address", ":0"], env))
            client.wait_for_workers(2, timeout=60)
        yield address, env
    finally:
        for p in procs[::-1]:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:  # a slow graceful shutdown on a busy machine
                p.kill()
                p.wait()


def test_in_process_gives_the_pixels_of_the_whole_set():
    imgs = _images(3)
    for params in (GROUPED, GLOBAL):
        with Executor() as ex:
            _assert_same(denoise_set(imgs, params), list(ex.run(imgs, params)))
        assert ex.summary.ranks == denoise_set(imgs[:1], params).ranks


def test_scheduler_gives_the_same_pixels_as_in_process(scheduler):
    address, _ = scheduler
    imgs = _images(4)
    for params in (GROUPED, GLOBAL):  # 'global': one model fitted here, scattered once
        with Executor(scheduler=address) as ex:
            results = list(ex.run(imgs, params))
        _assert_same(denoise_set(imgs, params), results)
    assert ex.summary.resolved["gamma"] == denoise_set(imgs, GLOBAL).resolved["gamma"]


def test_tiles_of_a_large_image_are_tasks_of_their_own(scheduler):
    """An image that needs several tiles spreads over the cluster tile by tile
    (the small image beside it stays one task) with the in-process pixels."""
    from distributed import get_task_stream

    from kpca_denoise.tiling import plan

    address, _ = scheduler
    imgs = [_images(1, (130, 140))[0], _images(1)[0]]
    for params in (GROUPED.replace(tile_size=64),
                   GLOBAL.replace(tile_size=64)):  # 'global': the model is scattered once
        n_tiles = len(plan(imgs[0].shape, params))
        assert n_tiles >= 4 and len(plan(imgs[1].shape, params)) == 1
        with Executor(scheduler=address) as ex, get_task_stream(ex.client) as ts:
            results = list(ex.run(imgs, params))
        keys = [str(t["key"]) for t in ts.data]
        assert sum("-tile-" in k for k in keys) == n_tiles
        assert sum("-tile-" not in k and k.startswith("kpca-denoise-") for k in keys) == 1
        _assert_same(denoise_set(imgs, params), results)


def test_killing_a_worker_mid_run_loses_nothing(scheduler):
    address, env = scheduler
    imgs = _images(8, (80, 80))
    # a third worker, the one to kill, so the others stay for the rest of the module
    victim = _start(["distributed.cli.dask_worker", address, "--nthreads", "1", "--no-nanny",
                     "--host", "127.0.0.1", "--dashboard-address", ":0"], env)
    try:
        with Executor(scheduler=address) as ex:
            ex.client.wait_for_workers(3, timeout=60)
            pids = ex.client.run(os.getpid)
            addr = next(a for a, pid in pids.items() if pid == victim.pid)
            results, killed_busy = [], None
            for res in ex.run(imgs, GROUPED):
                if killed_busy is None:
                    killed_busy = len(ex.client.processing()[addr]) > 0
                    os.kill(victim.pid, signal.SIGKILL)
                results.append(res)
        assert killed_busy, "the killed worker had no task running: the test proved nothing"
        assert victim.wait(timeout=30) == -signal.SIGKILL
        _assert_same(denoise_set(imgs, GROUPED), results)  # every image exactly once
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait()


def _cli_set(tmp_path, n=3):
    from PIL import Image

    src = tmp_path / "in"
    src.mkdir()
    for k, img in enumerate(_images(n)):
        Image.fromarray(img).save(src / f"im{k}.png")
    return src


def _pixels(folder):
    from PIL import Image

    return {p.name: np.asarray(Image.open(p)) for p in sorted(folder.glob("*.png"))}


def test_cli_scheduler_and_local_workers_write_the_in_process_pixels(scheduler, tmp_path, capsys):
    from kpca_denoise.cli import main

    address, _ = scheduler
    src = _cli_set(tmp_path)
    common = [str(src), "-q", "--noise-sigma", "15"]
    assert main(["denoise", *common, "-o", str(tmp_path / "here")]) == 0
    assert main(["denoise", *common, "-o", str(tmp_path / "there"), "--scheduler", address]) == 0
    assert main(["denoise", *common, "-o", str(tmp_path / "local"), "--workers", "2"]) == 0
    here = _pixels(tmp_path / "here")
    assert sorted(here) == ["im0_kpca.png", "im1_kpca.png", "im2_kpca.png"]
    for other in ("there", "local"):
        got = _pixels(tmp_path / other)
        assert sorted(got) == sorted(here)
        for name in here:
            assert_same_result(got[name], here[name])
        assert len(list((tmp_path / other).glob("kpca-denoise-*.json"))) == 1


def test_unreachable_scheduler_is_one_line_before_any_compute(tmp_path, capsys, monkeypatch):
    import kpca_denoise.executor as executor
    from kpca_denoise.cli import main

    monkeypatch.setattr(executor, "CONNECT_TIMEOUT", 2)
    src = _cli_set(tmp_path, 1)
    out = tmp_path / "out"
    assert main(["denoise", str(src), "-o", str(out), "--scheduler", "tcp://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert err == ("error: cannot reach the Dask scheduler at tcp://127.0.0.1:9 (OSError); start "
                   "one with 'dask scheduler' and give its tcp://HOST:PORT address\n")
    assert not out.exists() or not any(out.iterdir())  # nothing written, nothing computed


def _sigint_default() -> None:
    """The command as a terminal starts it: a test run launched in the background by a
    non-interactive shell inherits SIGINT ignored, and Python keeps it ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_cancels_the_futures_and_leaves_only_complete_files(tmp_path):
    """Ctrl-C on a terminal (SIGINT to the command's whole process group, its
    local workers included) mid-run: exit 130, one line, every file there is
    complete and has the in-process pixels, no temporary file, nothing after."""
    from PIL import Image

    src = tmp_path / "in"
    src.mkdir()
    # 192x192: the 15 images left after the first file take seconds, so the signal
    # lands mid-run even when this process is starved for a while on a busy machine
    imgs = _images(16, (192, 192))
    for k, img in enumerate(imgs):
        Image.fromarray(img).save(src / f"im{k:02d}.png")
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "kpca_denoise", "denoise", str(src), "-o",
                             str(out), "--noise-sigma", "15", "--workers", "2", "-q"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_sigint_default)
    try:
        # wait for the first result on disk (a condition, not a time)
        while proc.poll() is None and not (out.exists() and any(out.glob("*_kpca.png"))):
            try:
                proc.wait(timeout=0.05)
            except subprocess.TimeoutExpired:
                pass
        assert proc.poll() is None, "the run ended before it could be interrupted"
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    sidecars = sorted(out.glob("kpca-denoise-*.json"))
    written = sorted(p.name for p in out.iterdir() if p not in sidecars)
    assert proc.returncode == 130, (f"exit {proc.returncode} with {len(written)} of {len(imgs)} "
                                    f"files written; stderr: {err[-800:]!r}")
    assert err.strip().splitlines()[-1] == ("error: interrupted; files already written are "
                                            "complete, nothing partial was left")
    assert all(name.endswith("_kpca.png") for name in written), written  # no .part
    # the run's sidecar lists exactly what was written (there was none: results stood
    # with no record of their parameters)
    assert len(sidecars) == 1
    side = json.loads(sidecars[0].read_text())
    assert side["interrupted"] is True and sorted(side["files"]) == written
    assert 1 <= len(written) < len(imgs)
    ks = [int(name[2:4]) for name in written]
    reference = denoise_set([imgs[k] for k in ks], GROUPED)  # per image: the written ones only
    for name, res in zip(written, reference.images):
        assert_same_result(np.asarray(Image.open(out / name)), res.outputs[None])


@pytest.fixture
def clusters(monkeypatch):
    """Every LocalCluster the executor starts (its workers threads of this process:
    cheaper, and counted the same)."""
    import dask.distributed

    started = []

    class Counted(dask.distributed.LocalCluster):
        def __init__(self, *args, **kwargs):
            kwargs.update(processes=False, protocol="tcp://")
            super().__init__(*args, **kwargs)
            started.append(self)

    monkeypatch.setattr(dask.distributed, "LocalCluster", Counted)
    return started


@pytest.mark.parametrize("end,code", [("done", 0), ("sigterm", 143), ("error", 2)])
def test_workers_start_one_cluster_and_always_close_it(tmp_path, capsys, monkeypatch, clusters,
                                                       end, code):
    """The command entered its executor twice: '--workers 2' started a second cluster
    and left the first one running.  One is started, and closed however the run ends
    (SIGTERM stops it as Ctrl-C does, once the input being written is: the files
    written are listed, exit 143)."""
    from distributed.core import Status

    import kpca_denoise.cli as cli

    src = _cli_set(tmp_path)
    out = tmp_path / "out"
    finish = cli.finish_item
    calls = []

    def ended_after_one(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2 and end == "sigterm":
            os.kill(os.getpid(), signal.SIGTERM)
        if len(calls) == 2 and end == "error":
            raise OSError("the disk was unplugged")
        return finish(*args, **kwargs)

    monkeypatch.setattr(cli, "finish_item", ended_after_one)
    handler = signal.getsignal(signal.SIGTERM)
    rc = cli.main(["denoise", str(src), "-o", str(out), "--noise-sigma", "15", "--workers", "2",
                   "-q"])
    err = capsys.readouterr().err
    assert rc == code, err
    assert len(clusters) == 1 and clusters[0].status == Status.closed
    assert signal.getsignal(signal.SIGTERM) == handler  # the command's own handler is gone
    written = sorted(p.name for p in out.glob("*_kpca.png"))
    assert len(written) == {"done": 3, "sigterm": 2, "error": 1}[end]
    if end == "sigterm":
        assert err.strip().splitlines()[-1] == ("error: interrupted; files already written are "
                                                "complete, nothing partial was left")
        side = json.loads(next(out.glob("kpca-denoise-*.json")).read_text())
        assert side["interrupted"] is True and side["files"] == written


class _Vanishing:
    """Images read on demand; item ``gone`` raises as a file deleted meanwhile does."""

    def __init__(self, images, gone):
        self.images, self.gone = images, gone

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        if i == self.gone:
            raise OSError("file vanished")
        return self.images[i]


def test_an_item_that_cannot_be_fetched_fails_alone_on_a_cluster(scheduler):
    # its fetch for the tile plan raised out of run(); in process it was already per item
    address, _ = scheduler
    images = _Vanishing(_images(3), gone=1)
    with Executor(scheduler=address) as ex:
        got = {r.index: r for r in ex.run(images, GROUPED)}
    assert sorted(got) == [0, 1, 2]
    assert got[1].error and "file vanished" in got[1].error and not got[1].outputs
    assert got[0].error is None and got[2].error is None and got[2].outputs


def test_an_executor_used_outside_its_with_block_says_so():
    from kpca_denoise.executor import ExecutorError

    ex = Executor(workers=1)  # never entered: no cluster was started
    with pytest.raises(ExecutorError, match=r"not connected; use it in a with block"):
        list(ex.run(_images(1), GROUPED))


def test_local_workers_that_cannot_start_name_the_main_guard(monkeypatch):
    # a script without the guard: dask's 200-line "Nanny failed to start" traceback
    import dask.distributed

    from kpca_denoise.executor import ExecutorError

    def fails(**kw):
        raise RuntimeError("Nanny failed to start.\nmore lines")

    monkeypatch.setattr(dask.distributed, "LocalCluster", fails)
    with pytest.raises(ExecutorError) as err:
        with Executor(workers=2):
            pass
    assert str(err.value) == ("cannot start 2 local Dask workers (RuntimeError: Nanny failed to "
                              "start.); in a script, create the Executor under "
                              "'if __name__ == \"__main__\":'")
