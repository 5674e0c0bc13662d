"""Large TIFFs through the command line (issue 36): read lazily (tifffile's Zarr view, or
bands of rows of an uncompressed file), every rank from one lazy pass, written back tile
by tile, the noise level reported, Ctrl-C leaving only complete outputs."""

import json
import pickle

import numpy as np
import pytest

pytest.importorskip("zarr")
pytest.importorskip("dask")
tifffile = pytest.importorskip("tifffile")

import kpca_denoise.cli as cli  # noqa: E402
from kpca_denoise import DenoiseParams, denoise_set  # noqa: E402
from kpca_denoise.io import read_item  # noqa: E402
from kpca_denoise.io.lazy_tiff import memory_budget  # noqa: E402
from helpers import assert_same_result, fake_tiles  # noqa: E402

#: small tiles, so that every test image is cut into several
TILE = 64


@pytest.fixture
def lazily(monkeypatch):
    """Every TIFF counts as too large to hold: the command line reads it lazily."""
    monkeypatch.setattr(cli, "lazy_bytes", lambda: 1000)


def _noisy(shape, sigma=2000.0, seed=0, dtype=np.uint16):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:shape[0], 0:shape[1]]
    clean = 20000 + 15000 * np.sin(x / (6.0 + seed)) * np.cos(y / 11.0)
    if len(shape) == 3:
        clean = np.stack([clean, clean[::-1], 40000 - clean][:shape[2]], axis=-1)
    scale = 1.0 if dtype == np.uint16 else 255 / 65535
    return np.clip((clean + rng.normal(0, sigma, clean.shape)) * scale, 0,
                   np.iinfo(dtype).max).astype(dtype)


def _sidecar(folder):
    (side,) = sorted(folder.glob("kpca-denoise-*.json"))
    return json.loads(side.read_text())


def test_ranks_come_from_one_lazy_pass_with_the_whole_image_pixels(tmp_path, lazily, capsys,
                                                                  monkeypatch):
    import kpca_denoise.tiling as tiling

    img = _noisy((150, 170))
    src = tmp_path / "scan.tif"
    tifffile.imwrite(src, img, compression="zlib", resolution=(4.0, 4.0), resolutionunit=3)
    params = DenoiseParams(ranks=(4, 8), tile_size=TILE)
    ref = denoise_set([img], params).images[0]
    calls = []
    real = tiling.denoise_tile
    monkeypatch.setattr(tiling, "denoise_tile", lambda *a, **k: calls.append(1) or real(*a, **k))
    out = tmp_path / "o"
    assert cli.main(["denoise", str(src), "-o", str(out), "--ranks", "4,8",
                     "--tile-size", str(TILE)]) == 0
    captured = capsys.readouterr()
    tiles = len(tiling.plan(img.shape, params))
    assert len(calls) == tiles > 1  # each tile once, for both ranks
    assert "read lazily" in captured.err and f"tiles {tiles}/{tiles}" in captured.err
    for rank in (4, 8):
        with tifffile.TiffFile(out / f"scan_kpca_r{rank}.tif") as tf:
            page = tf.pages[0]
            assert page.is_tiled and page.compression == 8  # zlib, tile by tile
            assert page.tags["XResolution"].value == (4, 1) and page.tags["ResolutionUnit"].value == 3
            assert_same_result(page.asarray(), ref.outputs[rank])
    side = _sidecar(out)
    (item,) = side["items"]
    assert item["read_lazily"] and item["noise_sigma"] == pytest.approx(ref.noise_sigma, rel=1e-9)
    assert sorted(side["files"]) == ["scan_kpca_r4.tif", "scan_kpca_r8.tif"]
    row = next(ln for ln in captured.out.splitlines() if ln.startswith("scan.tif"))
    sigma = ref.noise_sigma  # the table's sigma column: 3 digits, whole from 1000 up
    assert (f"{sigma:.3g}" if sigma < 1000 else f"{sigma:.0f}") in row.split()


@pytest.mark.parametrize("case", ["stack, uncompressed", "colour, tiled"])
def test_stacks_and_colour_keep_their_pages_and_pixels(tmp_path, lazily, case):
    if case.startswith("stack"):
        img = np.stack([_noisy((70, 90), sigma=s, seed=k, dtype=np.uint8)
                        for k, s in enumerate((800, 1500, 2500))])
        # one contiguous piece: read by bands of rows
        tifffile.imwrite(tmp_path / "in.tif", img, photometric="minisblack")
        pages = list(img)
    else:
        img = _noisy((96, 80, 3), dtype=np.uint8)
        tifffile.imwrite(tmp_path / "in.tif", img, photometric="rgb", tile=(32, 32),
                         compression="zlib")
        pages = [img]
    out = tmp_path / "o"
    assert cli.main(["denoise", str(tmp_path / "in.tif"), "-o", str(out), "-q",
                     "--tile-size", str(TILE)]) == 0
    res = denoise_set(pages, DenoiseParams(tile_size=TILE, sequence="no"))  # page by page
    got = tifffile.imread(out / "in_kpca.tif")
    assert got.shape == img.shape and got.dtype == img.dtype
    for k, r in enumerate(res.images):
        assert_same_result(got[k] if len(pages) > 1 else got, r.outputs[None])
    item = _sidecar(out)["items"][0]
    if len(pages) > 1:
        assert [p["noise_sigma"] for p in item["stats"]["pages"]] == pytest.approx(
            [r.noise_sigma for r in res.images], rel=1e-9)


def test_a_large_tiff_is_read_lazily_without_decoding(tmp_path):
    img = _noisy((300, 200))
    tifffile.imwrite(tmp_path / "a.tif", img, compression="zlib", tile=(32, 32))
    whole = read_item(tmp_path / "a.tif", lazy_bytes=img.nbytes)
    assert not whole.is_lazy and whole.array is not None
    lazy = read_item(tmp_path / "a.tif", lazy_bytes=img.nbytes - 1)
    assert lazy.is_lazy and lazy.array is None and lazy.shape == img.shape
    a = lazy.open_lazy()
    assert a.chunksize == (32, 32)
    np.testing.assert_array_equal(a[40:90, 7:150].compute(), img[40:90, 7:150])
    # what a Dask worker process gets: the file's name, opened again there
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(a))[40:90, 7:150].compute(),
                                  img[40:90, 7:150])


def test_a_tiff_compressed_in_one_huge_piece_is_refused_in_one_line(tmp_path, lazily, capsys):
    src = tmp_path / "one.tif"
    tifffile.imwrite(src, np.zeros((4200, 8000), np.uint16), compression="zlib",
                     rowsperstrip=4200)  # one 67 MB strip: no part can be read alone
    assert cli.main(["denoise", str(src), "-o", str(tmp_path / "o"), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith(f"error: {src}: the image is stored compressed in pieces of 67 MB")
    assert "save it tiled" in err[0]


def test_ctrl_c_leaves_only_complete_outputs_and_an_interrupted_sidecar(tmp_path, lazily,
                                                                      monkeypatch, capsys):
    import kpca_denoise.io.writing as writing

    fake_tiles(monkeypatch)
    for name in ("a", "b"):
        tifffile.imwrite(tmp_path / f"{name}.tif", _noisy((130, 140)), compression="zlib")
    real = writing.TiffSink.put
    bands = []

    def interrupted(self, page, y0, band):
        bands.append(y0)
        if len(bands) == 3:  # within b's bands: after a was written
            raise KeyboardInterrupt
        real(self, page, y0, band)

    monkeypatch.setattr(writing, "BAND_TILES", 1)
    monkeypatch.setattr(writing.TiffSink, "put", interrupted)
    out = tmp_path / "o"
    assert cli.main(["denoise", str(tmp_path / "a.tif"), str(tmp_path / "b.tif"), "-o",
                     str(out), "-q", "--tile-size", str(TILE)]) == 130
    assert "interrupted" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir() if not p.name.endswith(".json")) == ["a_kpca.tif"]
    side = _sidecar(out)
    assert side["interrupted"] is True and side["files"] == ["a_kpca.tif"]
    np.testing.assert_array_equal(tifffile.imread(out / "a_kpca.tif"),
                                  tifffile.imread(tmp_path / "a.tif"))  # fake tiles: a copy


def test_the_memory_budget_obeys_the_address_space_limit(monkeypatch):
    import resource

    limit = 3 << 30
    real = resource.getrlimit
    monkeypatch.setattr(resource, "getrlimit", lambda what: (limit, limit)
                        if what == resource.RLIMIT_AS else real(what))
    budget = memory_budget()
    with open("/proc/self/status") as f:
        vm = next(int(ln.split()[1]) * 1024 for ln in f if ln.startswith("VmSize:"))
    assert 0 <= budget <= max(limit - vm, 0) + (64 << 20)  # VmSize moves a little


def test_to_zarr_writes_an_ome_zarr_with_the_tiffs_pages_and_scale(tmp_path, lazily):
    import zarr

    from kpca_denoise.io.zarr_io import read_layout

    img = np.stack([_noisy((70, 90), seed=k, dtype=np.uint8) for k in range(2)])
    src = tmp_path / "z.tif"
    tifffile.imwrite(src, img, photometric="minisblack", metadata={"axes": "ZYX"},
                     resolution=(2.0, 4.0), resolutionunit=3)  # px per cm
    out = tmp_path / "o"
    assert cli.main(["denoise", str(src), "-o", str(out), "-q", "--to-zarr",
                     "--tile-size", str(TILE)]) == 0
    res = out / "z_kpca.zarr"
    layout = read_layout(res)  # our own reader takes it back
    assert [a["name"] for a in layout.axes] == ["z", "y", "x"] and layout.shape == img.shape
    scale = layout.attrs["multiscales"][0]["datasets"][0]["coordinateTransformations"][0]["scale"]
    assert scale == [1.0, 2500.0, 5000.0]  # micrometres per pixel: 10^4 / (4, 2) px per cm
    got = zarr.open_group(str(res), mode="r")["0"][...]
    ref = denoise_set(list(img), DenoiseParams(tile_size=TILE, sequence="no"))
    for k in range(2):
        assert_same_result(got[k], ref.images[k].outputs[None])
    assert _sidecar(out)["files"] == ["z_kpca.zarr"]


def test_sigint_during_the_tiles_stops_the_run_cleanly(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    root = Path(cli.__file__).resolve().parents[1]
    tifffile.imwrite(tmp_path / "big.tif", _noisy((200, 210)), compression="zlib")
    out = tmp_path / "o"
    code = ("import sys, kpca_denoise.cli as cli; cli.lazy_bytes = lambda: 1000; "
            "sys.exit(cli.main(sys.argv[1:]))")
    # started as a terminal starts it, SIGINT not ignored: pytest launched in the
    # background by a shell script has it ignored, which a child inherits and keeps
    proc = subprocess.Popen([sys.executable, "-c", code, "denoise", str(tmp_path / "big.tif"),
                             "-o", str(out), "--tile-size", str(TILE)], cwd=root,
                            env=dict(os.environ, PYTHONPATH=str(root)), text=True,
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines = []
    for line in proc.stderr:  # the first tile done: the others are running or queued
        lines.append(line)
        if line.startswith("tiles"):
            proc.send_signal(signal.SIGINT)
            break
    rest = proc.stderr.read()
    assert proc.wait(timeout=120) == 130, "".join(lines) + rest
    assert "interrupted" in rest and "Traceback" not in rest
    assert not out.exists()  # no output, no temporary file, nothing to list: no folder


def test_ctrl_c_as_a_tile_ends_stops_the_run_with_nothing_written(tmp_path, lazily, monkeypatch,
                                                                  capsys):
    """SIGINT the moment the first tile ends, sent from that tile's thread while the
    main thread waits for the tiles: the run stops (130, one line), no output."""
    import os
    import signal

    from kpca_denoise.cli_progress import ProgressBar

    tifffile.imwrite(tmp_path / "big.tif", _noisy((200, 210)), compression="zlib")
    out = tmp_path / "o"
    real, ended = ProgressBar.__call__, []

    def progress(bar, ev):  # a tile's end is reported from its own thread
        if ev.stage == "tiles":
            ended.append(ev.done)
            if len(ended) == 1:
                os.kill(os.getpid(), signal.SIGINT)
        real(bar, ev)

    monkeypatch.setattr(ProgressBar, "__call__", progress)
    # Ctrl-C as Python sets it up, whatever this test run was started with
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        code = cli.main(["denoise", str(tmp_path / "big.tif"), "-o", str(out),
                         "--tile-size", str(TILE)])
    finally:
        signal.signal(signal.SIGINT, previous)
    err = capsys.readouterr().err
    assert code == 130, err
    assert err.rstrip().endswith(cli.INTERRUPTED) and "Traceback" not in err
    assert ended and not out.exists()  # no output, no temporary file, no sidecar: no folder


def test_ctrl_c_as_the_outputs_are_renamed_leaves_them_recorded(tmp_path, lazily, monkeypatch,
                                                                capsys):
    """SIGINT after the first of two outputs is renamed into place: both are kept and
    the run's sidecar lists them (signals wait from the last band written until the
    outputs are recorded), exit 130."""
    import os
    import signal

    from kpca_denoise.io import writing

    img = _noisy((150, 170))
    tifffile.imwrite(tmp_path / "scan.tif", img, compression="zlib")
    out = tmp_path / "o"
    real, renamed = writing.atomic_write, []

    def atomic_write(target, write, **kw):
        got = real(target, write, **kw)
        renamed.append(got.name)
        if len(renamed) == 1:
            os.kill(os.getpid(), signal.SIGINT)
        return got

    monkeypatch.setattr(writing, "atomic_write", atomic_write)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        code = cli.main(["denoise", str(tmp_path / "scan.tif"), "-o", str(out), "--ranks", "4,8",
                         "--tile-size", str(TILE)])
    finally:
        signal.signal(signal.SIGINT, previous)
    err = capsys.readouterr().err
    assert code == 130, err
    assert err.rstrip().endswith(cli.INTERRUPTED)
    side = _sidecar(out)
    assert side["interrupted"] is True
    assert sorted(side["files"]) == sorted(renamed[:2]) == ["scan_kpca_r4.tif", "scan_kpca_r8.tif"]
    ref = denoise_set([img], DenoiseParams(ranks=(4, 8), tile_size=TILE)).images[0]
    for rank in (4, 8):  # complete files
        assert_same_result(tifffile.imread(out / f"scan_kpca_r{rank}.tif"), ref.outputs[rank])


def test_the_progress_bar_tells_the_time_left_from_the_tiles_rate(monkeypatch):
    import io

    from kpca_denoise import cli_progress
    from kpca_denoise.core.progress import ProgressEvent

    class Tty(io.StringIO):
        def isatty(self):
            return True

    now = [100.0]
    monkeypatch.setattr(cli_progress, "_now", lambda: now[0])
    buf = Tty()
    bar = cli.ProgressBar(stream=buf)
    for done, t in ((1, 100.0), (2, 110.0), (4, 130.0)):
        now[0] = t
        bar(ProgressEvent("tiles", done, 10))
    last = buf.getvalue().split("\r")[-1]
    assert "4/10, about 60 s left" in last  # 10 s a tile since the first, 6 to go
    now[0] = 200.0
    bar(ProgressEvent("tiles", 10, 10))
    assert "left" not in buf.getvalue().split("\r")[-1]


def test_poisson_gaussian_noise_is_reported_as_for_images_read_whole(tmp_path, lazily, capsys):
    rng = np.random.default_rng(5)
    y, x = np.mgrid[0:120, 0:130]
    photons = 400 + 300 * np.sin(x / 9.0) * np.cos(y / 13.0)
    img = np.clip(2.0 * rng.poisson(photons) + rng.normal(0, 6, photons.shape), 0,
                  65535).astype(np.uint16)
    tifffile.imwrite(tmp_path / "cells.tif", img, compression="zlib")
    params = DenoiseParams(noise_model="poisson-gaussian", tile_size=TILE)
    ref = denoise_set([img], params).images[0]
    out = tmp_path / "o"
    assert cli.main(["denoise", str(tmp_path / "cells.tif"), "-o", str(out), "-q",
                     "--noise-model", "poisson-gaussian", "--tile-size", str(TILE)]) == 0
    captured = capsys.readouterr()
    assert "cells.tif: Poisson-Gaussian noise, gain" in captured.err
    item = _sidecar(out)["items"][0]
    got, want = item["stats"]["noise_model"], ref.stats["noise_model"]
    assert got["model"] == want["model"] == "poisson-gaussian"
    assert got["gain"] == pytest.approx(want["gain"]) and got["sigma"] == pytest.approx(want["sigma"])
    row = next(ln for ln in captured.out.splitlines() if ln.startswith("cells.tif"))
    assert row.split()[2] == "vst"  # the stabilised domain's 1, as for images read whole
    assert_same_result(tifffile.imread(out / "cells_kpca.tif"), ref.outputs[None])
