"""OME-Zarr through the command line (issue 36): read lazily, denoised by denoise_dask,
written back chunk by chunk with its axes, scale and OME metadata."""

import json

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")
pytest.importorskip("dask")

from kpca_denoise import denoise_image  # noqa: E402
from kpca_denoise.cli import main  # noqa: E402


def sidecar_of(folder):
    (side,) = sorted(folder.glob("kpca-denoise-*.json"))
    return side


def write_ome(path, data, axes, scale, *, chunks=None, zarr_format=2, levels=2, attrs=None):
    """A small OME-NGFF image (0.4 for Zarr v2, 0.5 for v3) with ``levels`` levels."""
    root = zarr.open_group(str(path), mode="w", zarr_format=zarr_format)
    kw = ({"chunk_key_encoding": {"name": "v2", "separator": "/"}} if zarr_format == 2
          else {"dimension_names": list(axes)})
    datasets = []
    for k in range(levels):
        step = tuple(1 if a not in "yx" else 2 ** k for a in axes)
        level = data[tuple(slice(None, None, s) for s in step)]
        arr = root.create_array(str(k), shape=level.shape, dtype=level.dtype,
                                chunks=chunks or level.shape, **kw)
        arr[...] = level
        datasets.append({"path": str(k), "coordinateTransformations": [
            {"type": "scale", "scale": [s * t for s, t in zip(scale, step)]}]})
    types = {"t": "time", "c": "channel", "z": "space", "y": "space", "x": "space"}
    ms = {"axes": [{"name": a, "type": types[a], **({"unit": "micrometer"} if a in "zyx" else {})}
                   for a in axes], "datasets": datasets, "name": "test"}
    ome = {"multiscales": [{"version": "0.4", **ms}], **(attrs or {})}
    if zarr_format == 3:
        ome = {"ome": {"version": "0.5", "multiscales": [ms], **(attrs or {})}}
    root.attrs.update(ome)
    return path


def noisy(rng, shape, dtype=np.uint8):
    clean = np.tile(np.linspace(40, 200, shape[-1]), shape[:-1] + (1,))
    return np.clip(clean + rng.normal(0, 20, shape), 0, 255).astype(dtype)


def multiscales(path):
    attrs = dict(zarr.open_group(str(path), mode="r").attrs)
    return (attrs.get("ome") or attrs)["multiscales"][0]


def test_a_grey_ome_zarr_round_trip_keeps_axes_scale_dtype_and_pixels(tmp_path, rng):
    img = noisy(rng, (48, 40))
    src = write_ome(tmp_path / "img.zarr", img, "yx", [0.5, 0.25], chunks=(16, 16),
                    attrs={"omero": {"channels": [{"label": "grey"}]}})
    out = tmp_path / "o"
    assert main(["denoise", str(src), "-o", str(out), "-q"]) == 0
    res = out / "img_kpca.zarr"
    m_in, m_out = multiscales(src), multiscales(res)
    assert m_out["axes"] == m_in["axes"]
    assert m_out["datasets"] == [m_in["datasets"][0]]  # the full resolution, its scale
    assert dict(zarr.open_group(str(res), mode="r").attrs)["omero"] == {"channels": [{"label": "grey"}]}
    arr = zarr.open_group(str(res), mode="r")["0"]
    assert arr.dtype == img.dtype and arr.chunks == (16, 16)
    np.testing.assert_array_equal(arr[...], denoise_image(img))
    side = json.loads(sidecar_of(out).read_text())
    assert side["files"] == ["img_kpca.zarr"]
    assert side["items"][0]["files"] == ["img_kpca.zarr"]
    assert not [p for p in out.iterdir() if p.name.endswith(".part")]


def test_a_z_stack_is_pages_each_its_own_denoise_image(tmp_path, rng):
    stack = noisy(rng, (3, 32, 36), np.uint16) * 100
    src = write_ome(tmp_path / "st.zarr", stack, "zyx", [2.0, 0.5, 0.5], chunks=(1, 16, 16))
    out = tmp_path / "o"
    assert main(["denoise", str(src), "-o", str(out), "-q"]) == 0
    res = out / "st_kpca.zarr"
    assert multiscales(res)["axes"] == multiscales(src)["axes"]
    got = zarr.open_group(str(res), mode="r")["0"][...]
    assert got.dtype == np.uint16
    for k in range(3):
        np.testing.assert_array_equal(got[k], denoise_image(stack[k]))


def test_ome_ngff_05_colour_channels_are_one_colour_image(tmp_path, rng):
    rgb = noisy(rng, (3, 32, 32))  # c, y, x
    src = write_ome(tmp_path / "rgb.zarr", rgb, "cyx", [1.0, 1.0, 1.0], zarr_format=3,
                    levels=1)
    out = tmp_path / "o"
    assert main(["denoise", str(src), "-o", str(out), "-q"]) == 0
    res = out / "rgb_kpca.zarr"
    got = zarr.open_group(str(res), mode="r")["0"][...]
    np.testing.assert_array_equal(got, np.moveaxis(denoise_image(np.moveaxis(rgb, 0, -1)), -1, 0))
    assert multiscales(res)["axes"] == multiscales(src)["axes"]
    assert zarr.open_group(str(res), mode="r").metadata.zarr_format == 3  # OME-NGFF 0.5 stays


def test_an_existing_output_is_kept_without_overwrite(tmp_path, rng, capsys):
    src = write_ome(tmp_path / "img.zarr", noisy(rng, (32, 32)), "yx", [1.0, 1.0])
    out = tmp_path / "o"
    assert main(["denoise", str(src), "-o", str(out), "-q"]) == 0
    marker = out / "img_kpca.zarr" / "marker"
    marker.write_text("old")
    capsys.readouterr()
    assert main(["denoise", str(src), "-o", str(out), "-q"]) == 0  # done: skipped
    assert "1 of 1 inputs already done" in capsys.readouterr().err and marker.exists()
    assert main(["denoise", str(src), "-o", str(out), "-q", "--strength", "0.9"]) == 2
    err = capsys.readouterr().err
    assert "already exists" in err and "--overwrite" in err and len(err.strip().splitlines()) == 1
    assert marker.exists()
    assert main(["denoise", str(src), "-o", str(out), "-q", "--overwrite"]) == 0
    assert not marker.exists() and (out / "img_kpca.zarr" / "0").is_dir()
    assert not [p for p in out.iterdir() if p.name.endswith(".part")]


@pytest.mark.parametrize("case, words", [
    ("plain", "no OME-NGFF 'multiscales'"),
    ("axes", "unsupported axes"),
    ("empty", "not a Zarr group"),
])
def test_a_malformed_zarr_is_one_line_naming_the_problem(tmp_path, rng, capsys, case, words):
    path = tmp_path / "bad.zarr"
    if case == "plain":
        root = zarr.open_group(str(path), mode="w", zarr_format=2)
        root.create_array("0", shape=(8, 8), dtype="u1")
    elif case == "axes":
        write_ome(path, noisy(rng, (16, 16)), "yx", [1.0, 1.0], levels=1)
        root = zarr.open_group(str(path), mode="r+")
        ms = dict(root.attrs)["multiscales"]
        ms[0]["axes"] = [{"name": "x", "type": "space"}, {"name": "y", "type": "space"}]
        root.attrs["multiscales"] = ms
    else:
        path.mkdir()
    assert main(["denoise", str(path), "-o", str(tmp_path / "o"), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and str(path) in err[0] and words in err[0], err  # and "none read"
    assert "none of the inputs could be read" in err[1]


def test_a_folder_holding_a_zarr_and_a_png_writes_both(tmp_path, rng, capsys):
    from PIL import Image

    from kpca_denoise.io import collect_inputs

    img = noisy(rng, (24, 24))
    write_ome(tmp_path / "in" / "sub" / "a.zarr", img, "yx", [1.0, 1.0])
    Image.fromarray(img).save(tmp_path / "in" / "b.png")
    files, errors, skipped = collect_inputs([tmp_path / "in"])
    assert sorted(f.rel.as_posix() for f in files) == ["b.png", "sub/a.zarr"]
    assert not errors and not skipped  # the Zarr folder's own files are not inputs
    out = tmp_path / "o"
    assert main(["denoise", str(tmp_path / "in"), "-o", str(out), "-q"]) == 0
    assert sorted(json.loads(sidecar_of(out).read_text())["files"]) == [
        "b_kpca.png", "sub/a_kpca.zarr"]
    table = capsys.readouterr().out
    assert "a_kpca.zarr" in table and "b_kpca.png" in table
    np.testing.assert_array_equal(zarr.open_group(str(out / "sub" / "a_kpca.zarr"), mode="r")["0"][...],
                                  np.asarray(Image.open(out / "b_kpca.png")))


def test_a_folder_not_a_zarr_is_never_replaced_and_no_part_is_left(tmp_path, rng, capsys):
    src = write_ome(tmp_path / "img.zarr", noisy(rng, (24, 24)), "yx", [1.0, 1.0])
    out = tmp_path / "o"
    (out / "img_kpca.zarr").mkdir(parents=True)
    (out / "img_kpca.zarr" / "notes.txt").write_text("mine")
    assert main(["denoise", str(src), "-o", str(out), "-q", "--overwrite"]) == 1
    assert "not a Zarr image" in capsys.readouterr().err
    assert (out / "img_kpca.zarr" / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in out.iterdir()) == ["img_kpca.zarr"]  # nothing else


def test_a_killed_writers_part_folder_is_removed_by_the_next_run(tmp_path, rng, capsys):
    from kpca_denoise.io.writing import host_tag

    src = write_ome(tmp_path / "img.zarr", noisy(rng, (24, 24)), "yx", [1.0, 1.0])
    out = tmp_path / "o"
    stale = out / f".img_kpca.kpca-{host_tag()}-999999999-abc.zarr.part"
    (stale / "0").mkdir(parents=True)
    assert main(["denoise", str(src), "-o", str(out), "-q"]) == 0
    assert not stale.exists() and "removed 1 temporary" in capsys.readouterr().err


def test_the_window_names_the_command_line_for_an_ome_zarr(qtbot, tmp_path, rng):
    from PySide6.QtCore import QSettings

    from kpca_denoise.gui.main_window import MainWindow

    src = write_ome(tmp_path / "img.zarr", noisy(rng, (24, 24)), "yx", [1.0, 1.0])
    w = MainWindow(settings=QSettings(str(tmp_path / "w.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    try:
        assert w.load_paths([src]) == 0
        assert "command line" in w.statusBar().currentMessage()
    finally:
        w.shutdown()


def test_several_page_axes_are_pages_in_order_and_written_back_in_place(tmp_path, rng):
    data = noisy(rng, (2, 1, 2, 24, 28))  # t, c, z, y, x
    src = write_ome(tmp_path / "tczyx.zarr", data, "tczyx", [1.0, 1.0, 2.0, 0.5, 0.5],
                    chunks=(1, 1, 1, 24, 28), levels=1)
    out = tmp_path / "o"
    assert main(["denoise", str(src), "-o", str(out), "-q"]) == 0
    got = zarr.open_group(str(out / "tczyx_kpca.zarr"), mode="r")["0"][...]
    assert got.shape == data.shape
    for t in range(2):
        for z in range(2):
            np.testing.assert_array_equal(got[t, 0, z], denoise_image(data[t, 0, z]))


def test_several_ranks_come_from_one_pass_with_the_noise_level_reported(tmp_path, rng,
                                                                        monkeypatch, capsys):
    import kpca_denoise.tiling as tiling
    from kpca_denoise import DenoiseParams, denoise_set

    stack = noisy(rng, (2, 110, 100))
    src = write_ome(tmp_path / "st.zarr", stack, "zyx", [2.0, 0.5, 0.5], chunks=(1, 33, 29),
                    levels=1)
    params = DenoiseParams(ranks=(4, 8), tile_size=64)
    ref = denoise_set(list(stack), params.replace(sequence="no"))  # page by page
    calls = []
    real = tiling.denoise_tile
    monkeypatch.setattr(tiling, "denoise_tile", lambda *a, **k: calls.append(1) or real(*a, **k))
    out = tmp_path / "o"
    capsys.readouterr()
    assert main(["denoise", str(src), "-o", str(out), "--ranks", "4,8", "--tile-size", "64"]) == 0
    assert len(calls) == 2 * len(tiling.plan(stack.shape[1:], params))  # per page, not per rank
    for rank in (4, 8):
        got = zarr.open_group(str(out / f"st_kpca_r{rank}.zarr"), mode="r")["0"][...]
        for k in range(2):
            np.testing.assert_array_equal(got[k], ref.images[k].outputs[rank])
    item = json.loads(sidecar_of(out).read_text())["items"][0]
    sigmas = [r.noise_sigma for r in ref.images]
    assert [p["noise_sigma"] for p in item["stats"]["pages"]] == pytest.approx(sigmas, rel=1e-9)
    assert item["noise_sigma"] == pytest.approx(float(np.median(sigmas)), rel=1e-9)
    rows = [ln.split() for ln in capsys.readouterr().out.splitlines() if ln.startswith("st.zarr")]
    assert [r[1] for r in rows] == ["4", "8"] and {r[2] for r in rows} == {
        f"{np.median(sigmas):.3g}"}


def test_ctrl_c_leaves_no_half_folder(tmp_path, rng, monkeypatch, capsys):
    import kpca_denoise.io.writing as writing

    src = write_ome(tmp_path / "img.zarr", noisy(rng, (140, 130)), "yx", [1.0, 1.0],
                    chunks=(32, 32), levels=1)
    monkeypatch.setattr(writing, "BAND_TILES", 1)

    def stop(self, page, y0, band):
        raise KeyboardInterrupt

    monkeypatch.setattr(writing.ZarrSink, "put", stop)
    out = tmp_path / "o"
    assert main(["denoise", str(src), "-o", str(out), "-q", "--tile-size", "64"]) == 130
    assert "interrupted" in capsys.readouterr().err
    assert not out.exists()  # no image folder, no part, no sidecar: nothing written, no -o


def test_a_damaged_chunk_fails_its_input_alone_in_one_line(tmp_path, rng, capsys):
    # a chunk its codec cannot decode ended the whole run with an 80-line traceback
    bad = write_ome(tmp_path / "in" / "bad.zarr", noisy(rng, (64, 64)), "yx", [1.0, 1.0],
                    chunks=(32, 32), levels=1)
    write_ome(tmp_path / "in" / "good.zarr", noisy(rng, (48, 48)), "yx", [1.0, 1.0], levels=1)
    (bad / "0" / "1" / "1").write_bytes(b"garbage!" * 10)
    out = tmp_path / "o"
    assert main(["denoise", str(tmp_path / "in"), "-o", str(out), "-q",
                 "--noise-sigma", "20"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (line,) = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert line.startswith(f"error: {bad}: cannot read or denoise it (") and "damaged" in line
    assert sorted(p.name for p in out.iterdir() if not p.name.endswith(".json")) == [
        "good_kpca.zarr"]
    assert json.loads(sidecar_of(out).read_text())["files"] == ["good_kpca.zarr"]


def test_a_reference_for_a_lone_zarr_is_a_note_not_a_refusal(tmp_path, rng, capsys):
    # "--reference FILE needs exactly one input" for one input: the lazy one was not counted
    from PIL import Image

    img = noisy(rng, (24, 24))
    src = write_ome(tmp_path / "img.zarr", img, "yx", [1.0, 1.0], levels=1)
    Image.fromarray(img).save(tmp_path / "ref.png")
    out = tmp_path / "o"
    assert main(["denoise", str(src), "-o", str(out), "-q", "--noise-sigma", "20",
                 "--reference", str(tmp_path / "ref.png")]) == 0
    err = capsys.readouterr().err
    assert "PSNR and SSIM are not computed for inputs read lazily (img.zarr)" in err
    assert "error" not in err and (out / "img_kpca.zarr").is_dir()


def test_a_level_of_a_zarr_given_alone_says_to_give_the_zarr_folder(tmp_path, rng, capsys):
    # "the folder has no supported files" and a list of chunk files' suffixes
    src = write_ome(tmp_path / "img.zarr", noisy(rng, (24, 24)), "yx", [1.0, 1.0], levels=1)
    for given in (src / "0", src / "0" / "0"):  # the level, a folder of its chunks
        assert main(["denoise", str(given), "-o", str(tmp_path / "o"), "-q"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"error: {given}: a folder inside a Zarr image (a level or its chunks); "
                       "give the .zarr folder that holds it"]
