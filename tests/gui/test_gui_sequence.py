"""The desktop window, issue 32: separate images of one size (a burst, a folder of
time-lapse frames) denoised as one sequence under "set as sequence" 'yes', through the
pipeline call the command line makes with ``--sequence yes``.

pytest-qt, offscreen, five 48x48 frames; the fixtures are ``conftest.py``'s.
"""

from __future__ import annotations

import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"  # before anything imports Qt

import json

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("pytestqt")

from kpca_denoise import cli  # noqa: E402
from kpca_denoise.gui import texts  # noqa: E402
from kpca_denoise.gui.jobs import params_key  # noqa: E402
from kpca_denoise.gui.model import ImageEntry, Session, entries_for, group_spectrum  # noqa: E402
from kpca_denoise.io import LoadedItem, read_item  # noqa: E402
from kpca_denoise.params import DenoiseParams  # noqa: E402
from kpca_denoise.pipeline import denoise_set  # noqa: E402
from gui_support import RUN_TIMEOUT_MS, run, settle, trial_args  # noqa: E402

FRAMES = 5


def _burst(tmp_path):
    """A folder of five 48x48 frames of the cameraman, the view moving 1 px a frame."""
    from kpca_denoise.samples import sample_images_dir

    a = np.asarray(Image.open(sample_images_dir() / "camera.png"))[64:64 + 56, 96:96 + 56]
    d = tmp_path / "burst"
    d.mkdir()
    frames = [np.ascontiguousarray(a[k:k + 48, k:k + 48]) for k in range(FRAMES)]
    for k, f in enumerate(frames):
        Image.fromarray(f).save(d / f"frame{k}.png")
    return d, frames


def _item(tmp_path, name, shape, dtype=np.uint8, kind="image"):
    return LoadedItem(path=tmp_path / name, array=np.zeros(shape, dtype), kind=kind,
                      format="TIFF" if kind == "stack" else "PNG")


def test_which_images_form_a_sequence_and_their_results_key(tmp_path):
    """'yes': the separate images of one size, channel count and type, in load order
    (not a stack's pages, patch sets, or another size, channel count or type); 'auto':
    separate images alone (the command line's rule), a stack's pages together; 'no' and
    'global': alone.  The set is part of the result's key: a change computes again."""
    s = Session()
    frames = [ImageEntry(_item(tmp_path, f"f{k}.png", (48, 48))) for k in range(3)]
    others = [ImageEntry(_item(tmp_path, "small.png", (40, 48))),
              ImageEntry(_item(tmp_path, "rgb.png", (48, 48, 3))),
              ImageEntry(_item(tmp_path, "deep.png", (48, 48), np.uint16)),
              ImageEntry(_item(tmp_path, "p.npz", (48, 48, 8), kind="patchset"))]
    stack = entries_for(_item(tmp_path, "s.tif", (2, 48, 48), kind="stack"))
    for e in [frames[0], *others[:2], frames[1], *stack, others[2], frames[2], others[3]]:
        s.add(e)
    yes = DenoiseParams(sequence="yes")
    keys = tuple(e.key for e in frames)
    assert all(s.sequence_group(e, yes) == keys for e in frames)
    assert all(s.sequence_group(e, yes) == () for e in others)
    assert s.sequence_group(stack[1], yes) == tuple(e.key for e in stack)
    auto = DenoiseParams()
    assert s.sequence_group(frames[0], auto) == ()
    assert s.sequence_group(stack[0], auto) == tuple(e.key for e in stack)
    for p in (DenoiseParams(sequence="no"), DenoiseParams(method="global")):
        assert s.sequence_group(frames[0], p) == s.sequence_group(stack[0], p) == ()
    # one job: the three frames together, whichever of them is asked for
    items, sets = s.plan([frames[1]], yes)
    assert [it.key for it in items] == list(keys) and sets == [(0, 1, 2)]
    assert s.result_key(frames[1], yes) == params_key(yes, keys)
    # one more frame of the size, or one less: another set, another key
    before = s.result_key(frames[0], yes)
    extra = ImageEntry(_item(tmp_path, "f3.png", (48, 48)))
    s.add(extra)
    assert s.sequence_group(frames[0], yes) == keys + (extra.key,)
    assert s.result_key(frames[0], yes) != before
    s.remove(len(s.entries) - 1)
    assert s.result_key(frames[0], yes) == before
    s.remove(0)
    assert s.sequence_group(frames[1], yes) == keys[1:]
    s.remove(s.row_of(frames[1].key))
    assert s.sequence_group(frames[2], yes) == ()  # alone: its own result
    assert s.result_key(frames[2], yes) == params_key(yes)


def test_texts_of_a_separate_image_in_a_sequence():
    seq = dict(decision="sequence", choice="yes", page=1, pages=5,
               neighbours_used={"-1": 0.25, "0": 0.5, "1": 0.25})
    assert texts.sequence_text(seq, page=False) == (
        "image 2 of 5 in load order with its neighbours (patches from images -1 25%, "
        "this 50%, +1 25%)")
    assert texts.sequence_text(seq) == (
        "page 2 of 5 with its neighbours (patches from pages -1 25%, this 50%, +1 25%)")
    preview = dict(seq, first=0, last=4)
    assert texts.preview_sequence_text(preview, page=False) == (
        "the preview denoised image 2 of 5 with images 1–5 in load order (the region on each), "
        "as the run does; patches there from images -1 25%, this 50%, +1 25%")
    assert texts.preview_sequence_text(preview).startswith(
        "the preview denoised page 2 of 5 with pages 1–5 (the region on each)")
    alone = dict(decision="pages", choice="auto", page=0, pages=3,
                 reason="0 of 2 neighbouring pairs alike")
    assert texts.preview_sequence_text(alone) == (
        "the preview shows page 1 of 3 alone, as the run denoises it (sequence auto: 0 of 2 "
        "neighbouring pairs alike)")
    assert texts.run_started_text(5, "grouped", {None}, [5]) == (
        "run started: 5 images, method grouped, ranks auto, the set of 5 images denoised as "
        "one sequence")


def test_a_burst_runs_as_one_sequence_with_yes_and_image_by_image_with_no(
        window, tmp_path, qtbot):
    """'yes': a frame's run denoises the five frames together, the pixels of
    denoise_set(frames, sequence='yes'), the command line's call; the line over the
    views and the log say which neighbouring images a frame's groups used, and its
    preview denoises it with them too, saying so.  An image of another size stays out.
    'no' (and
    'auto', as the command line under --sequence auto) denoise the frame alone."""
    folder, frames = _burst(tmp_path)
    window.load_paths([folder])
    odd = tmp_path / "odd.png"
    Image.fromarray(frames[0][:40]).save(odd)
    window.load_paths([odd])
    assert [e.name for e in window.entries] == [f"frame{k}.png" for k in range(FRAMES)] + [
        "odd.png"]
    params = DenoiseParams(ranks=(None,), add_noise=20.0, sequence="yes")
    window.imageset.set_current(2)
    summary = run(qtbot, window, params)
    assert len(summary.job.items) == FRAMES and summary.job.sets == [tuple(range(FRAMES))]
    want = denoise_set(frames, params)
    assert want.resolved["sequence"][0]["decision"] == "sequence"
    for k in range(FRAMES):
        rec = window.session.record(window.entries[k], params)
        assert rec is not None and len(rec.fit_set) == FRAMES
        np.testing.assert_array_equal(rec.ranks[None].output, want.images[k].outputs[None])
        seq = rec.resolved["page_sequence"]
        assert seq == want.images[k].stats["sequence"] and seq["page"] == k
        used = set(seq["neighbours_used"])
        assert "0" in used and used - {"0"}
    assert window.session.record(window.entries[FRAMES], params) is None
    # the sweep's pages in the progress panel, both passes; the sequence's groups' spectrum
    bar = window.progress.rows["page"][1]
    assert window.progress.shown == ["noise", "page", "metrics"]  # what a sequence reports
    assert bar.value() == bar.maximum() == FRAMES and "stage 2" in bar.format()
    # the mean spectrum of the groups, to floating-point noise (summed over threads)
    np.testing.assert_allclose(rec.eigenvalues, want.eigenvalues, rtol=1e-6,
                               atol=1e-9 * want.eigenvalues.max())
    assert group_spectrum(rec)[0] is not None
    window.imageset.set_current(2)
    settle(qtbot, window)
    rec = window.session.record(window.entries[2], params)
    line = texts.sequence_text(rec.resolved["page_sequence"], page=False)
    assert line.startswith("image 3 of 5 in load order with its neighbours (patches from images")
    assert line in window.info.text()
    assert any("image 2 of 5 in load order with its neighbours" in x for x in window.log_view.lines)
    assert any("5 images of one size together as a sequence in load order" in x
               for x in window.log_view.lines)
    # the export's sidecar lists the sequence's files: the command line run on them with it
    # (--sequence yes on separate files) writes these pixels again
    written = window.export_current(tmp_path / "gui")
    side = next(p for p in written if p.suffix == ".json")
    data = json.loads(side.read_text())
    assert data["params"]["sequence"] == "yes" and data["fit_set"] == [
        str(e.path) for e in window.entries[:FRAMES]]
    rc = cli.main(["denoise", *data["fit_set"], "-o", str(tmp_path / "cli"), "--params",
                   str(side), "-q", *trial_args(side)])
    assert rc == 0
    out = next(p for p in written if p.suffix == ".png" and "kpca" in p.name)
    np.testing.assert_array_equal(read_item(tmp_path / "cli" / out.name).array,
                                  read_item(out).array)
    # the preview (parameters not run yet) denoises the frame with the frames, as the run
    with qtbot.waitSignal(window.runner.finished, timeout=RUN_TIMEOUT_MS):
        window.params_panel.set_params(params.replace(strength=1.5))
        window.toggle_preview()
    pv = window.session.preview(window.entries[2], params.replace(strength=1.5))
    assert pv.sequence["decision"] == "sequence" and (pv.sequence["first"],
                                                      pv.sequence["last"]) == (0, FRAMES - 1)
    assert any("the preview denoised image 3 of 5 with images 1–5 in load order" in x
               for x in window.log_view.lines)
    window.toggle_preview()
    # 'no': the frame alone, the page-by-page pixels
    alone = params.replace(sequence="no")
    run(qtbot, window, alone)
    rec = window.session.record(window.entries[2], alone)
    assert rec.fit_set == () and "page_sequence" not in rec.resolved
    one = denoise_set([frames[2]], alone).images[0].outputs[None]
    np.testing.assert_array_equal(rec.ranks[None].output, one)
    assert not np.array_equal(one, want.images[2].outputs[None])
    # 'auto': separate images alone, as the command line does; the log says how to link them
    auto = params.replace(sequence="auto")
    run(qtbot, window, auto)
    rec = window.session.record(window.entries[2], auto)
    assert rec.fit_set == ()
    np.testing.assert_array_equal(rec.ranks[None].output, one)
    assert any(texts.separate_images_alone_text(FRAMES) in x for x in window.log_view.lines)


def test_a_sequences_progress_counts_its_pages_and_both_passes(qapp):
    """A run of sequences only shows the stages their sweep reports; the time left during
    the first pass counts the second too, and a new pass starts the rate again."""
    from kpca_denoise.gui.panels import ProgressPanel

    panel = ProgressPanel()
    panel.start("grouped", 8, one_model=True, sets_only=True, passes=2)
    assert panel.shown == ["noise", "page", "metrics"]
    panel.update_stage("page", 1, 8, "stage 1")
    t0 = panel._stage_t0
    assert panel._estimate("page", 2, 8, "stage 1", t0 + 2.0) == pytest.approx(6 + 8)
    panel.update_stage("page", 8, 8, "stage 1")
    panel._stage_t0 = t0 - 100.0  # the first pass took 100 s
    panel.update_stage("page", 1, 8, "stage 2")
    assert panel._stage_t0 >= t0  # the second pass's rate is its own
    assert panel._estimate("page", 2, 8, "stage 2", panel._stage_t0 + 2.0) == pytest.approx(6)
    panel.start("grouped", 8, one_model=True, sets_only=True, passes=1)
    panel.update_stage("page", 1, 8, "stage 1")
    assert panel._estimate("page", 2, 8, "stage 1", panel._stage_t0 + 2.0) == pytest.approx(6)
    # a run with an image alone besides the sequence shows the single image's stages too
    panel.start("grouped", 9, one_model=True, sets_only=False)
    assert "grouping" in panel.shown and "page" in panel.shown and "image" not in panel.shown
    panel.start("global", 3, one_model=True)
    assert "image" in panel.shown and "page" not in panel.shown
    panel.finish("done")
