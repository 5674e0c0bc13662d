"""The preview of a page the run denoises with its neighbouring pages (a stack's page, an
image of a sequence): the region goes through the stack path with the full run's
decisions and the pages within reach, so it is the full run's result there; a page the
run denoises alone is previewed alone.

Small stacks of a smooth moving pattern under Gaussian noise; the window's test loads
one as a multi-page TIFF (pytest-qt, offscreen; the fixtures are ``conftest.py``'s).
"""

from __future__ import annotations

import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"  # before anything imports Qt

import numpy as np
import pytest

pytest.importorskip("pytestqt")

from kpca_denoise.gui import texts  # noqa: E402
from kpca_denoise.core.progress import CancelToken  # noqa: E402
from kpca_denoise.gui.compute import run_job  # noqa: E402
from kpca_denoise.gui.image_preview import prepare_preview, run_preview  # noqa: E402
from kpca_denoise.gui.jobs import Job, JobItem  # noqa: E402
from kpca_denoise.gui.stack_preview import StackRun, pages_read, stack_page_reach  # noqa: E402
from kpca_denoise.params import DenoiseParams  # noqa: E402
from kpca_denoise.pipeline import denoise_set  # noqa: E402
from gui_support import RUN_TIMEOUT_MS, run, settle  # noqa: E402


def _moving(pages: int, side: int, seed: int = 0, dtype=np.uint8) -> list:
    """``pages`` pages of one smooth pattern moving 2 px right and 1 down a page, noise
    σ 20 (of 255)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:side, 0:side].astype(np.float64)
    out = []
    for k in range(pages):
        c = (128 + 60 * np.sin((x + 2 * k) / 6.0) * np.cos((y + k) / 9.0)
             + 40 * ((x + 2 * k) % 40 > 20))
        out.append(np.clip(c + rng.normal(0, 20, c.shape), 0, 255).astype(dtype))
    return out


def _unrelated(pages: int, side: int) -> list:
    """Pages of different patterns (other frequencies and directions), noise σ 20."""
    rng = np.random.default_rng(1)
    y, x = np.mgrid[0:side, 0:side].astype(np.float64)
    return [np.clip(128 + 80 * np.sin(x * (k + 1) / 4.0 + y * (3 - k) / 5.0)
                    + rng.normal(0, 20, x.shape), 0, 255).astype(np.uint8) for k in range(pages)]


def _items(pages: list, params: DenoiseParams, stack: str) -> list:
    """The pages as the window sends them (keys unique to ``stack``: the compute module
    keeps decisions by key)."""
    return [JobItem(f"{stack}#{k}", f"page {k}", a, False, tuple(params.ranks))
            for k, a in enumerate(pages)]


def _overlap(a, b) -> tuple:
    """The pixels of two previews (outputs at one rank) on the part their boxes share."""
    (pa, ba), (pb, bb) = a, b
    y0, y1, x0, x1 = max(ba[0], bb[0]), min(ba[1], bb[1]), max(ba[2], bb[2]), min(ba[3], bb[3])
    return (pa[y0 - ba[0]:y1 - ba[0], x0 - ba[2]:x1 - ba[2]],
            pb[y0 - bb[0]:y1 - bb[0], x0 - bb[2]:x1 - bb[2]])


def test_a_linked_pages_preview_is_the_full_runs_pixels_there():
    """A middle page of a stack 'auto' links: the preview's core is the full run's pixels
    (denoise_set of the pages, the window's run) at every rank, to floating-point noise;
    the page denoised alone differs.  The decisions, made ahead (the window's background
    job) or by the first preview, are kept: the next region and page re-use them."""
    pages = _moving(5, 72, dtype=np.float32)
    params = DenoiseParams(ranks=(2, None))
    full = denoise_set(pages, params)
    assert full.resolved["sequence"][0]["linked"] == [True] * 4
    items = _items(pages, params, "linked")
    assert prepare_preview(items[1], params, None, items)
    assert not prepare_preview(items[2], params, None, items)  # the stack's, made
    pv = run_preview(items[2], params, (20, 44, 26, 52), None, None, items)
    assert not pv.error and pv.decided_before
    y0, y1, x0, x1 = pv.box
    assert (y0, x0) <= (20, 26) and (y1, x1) >= (44, 52) and y1 - y0 < 36
    want = full.images[2].outputs
    atol = 1e-6 * float(np.ptp(want[None]))
    for r in params.ranks:
        np.testing.assert_allclose(pv.outputs[r], want[r][y0:y1, x0:x1], rtol=0, atol=atol)
    assert pv.noise_sigma == full.images[2].noise_sigma  # the stack's one level
    seq = pv.sequence
    assert (seq["decision"], seq["page"], seq["pages"], seq["first"], seq["last"]) == (
        "sequence", 2, 5, 0, 4)
    assert set(seq["neighbours_used"]) == {"-2", "-1", "0", "1", "2"}
    assert texts.preview_sequence_text(seq).startswith(
        "the preview denoised page 3 of 5 with pages 1–5 (the region on each), as the run does")
    alone = run_preview(items[2], params, (20, 44, 26, 52), None, None)  # no sequence given
    a, b = _overlap((alone.outputs[None], alone.box), (pv.outputs[None], pv.box))
    assert alone.sequence is None and np.mean(np.abs(a - b)) > 100 * atol
    moved = run_preview(items[3], params.replace(ranks=(None,)), (40, 60, 8, 30), None, None,
                        items)
    assert moved.decided_before and moved.sequence["page"] == 3 and list(moved.outputs) == [None]
    y0, y1, x0, x1 = moved.box
    np.testing.assert_allclose(moved.outputs[None], full.images[3].outputs[None][y0:y1, x0:x1],
                               rtol=0, atol=atol)


def test_an_unrelated_stack_previews_the_page_alone():
    """Pages 'auto' finds unrelated: the run denoises each alone, and so does the preview
    (today's path, the page's own decisions), saying why."""
    pages = _unrelated(4, 64)
    params = DenoiseParams(ranks=(None,))
    full = denoise_set(pages, params)
    assert full.resolved["sequence"][0]["decision"] == "pages"
    items = _items(pages, params, "unrelated")
    pv = run_preview(items[1], params, (16, 40, 16, 40), None, None, items)
    assert not pv.error and pv.sequence["decision"] == "pages" and "first" not in pv.sequence
    y0, y1, x0, x1 = pv.box
    np.testing.assert_array_equal(pv.outputs[None], full.images[1].outputs[None][y0:y1, x0:x1])
    alone = run_preview(items[1], params, (16, 40, 16, 40), None, None)
    np.testing.assert_array_equal(pv.outputs[None], alone.outputs[None])
    assert texts.preview_sequence_text(pv.sequence) == (
        "the preview shows page 2 of 4 alone, as the run denoises it (sequence auto: 0 of 3 "
        "neighbouring pairs alike)")


def test_the_pages_a_preview_reads_are_those_within_reach_in_its_scene():
    """Four times the groups' page reach with two stages (the pilot's reach twice over),
    twice with one; a cut ends them, the page beyond it read (its neighbour takes its own
    slices there, as in the whole stack)."""
    assert stack_page_reach(DenoiseParams()) == 36
    params = DenoiseParams(grouped={"two_stage": False})
    assert stack_page_reach(params) == 18

    def run(n: int, cuts=()):
        linked = np.ones(n - 1, bool)
        linked[list(cuts)] = False
        return StackRun(tuple(range(n)), items=[None] * n, params=params, linked=linked)

    assert pages_read(run(50), 25) == (7, 43)
    assert pages_read(run(50), 3) == (0, 21)
    assert pages_read(run(50, cuts=(20, 30)), 25) == (20, 31)
    assert pages_read(run(50, cuts=(24,)), 25) == (24, 43)  # the cut just before it


def test_a_long_stacks_page_reads_only_the_pages_within_reach():
    """A page of a 39-page stack ('yes') far from its start: the preview reads pages 1-38,
    not page 0, and still gets the full run's pixels."""
    pages = _moving(39, 40)
    params = DenoiseParams(ranks=(None,), sequence="yes")
    full = denoise_set(pages, params)
    items = _items(pages, params, "long")
    pv = run_preview(items[37], params, (8, 32, 8, 32), None, None, items)
    assert (pv.sequence["first"], pv.sequence["last"]) == (1, 38)
    y0, y1, x0, x1 = pv.box
    np.testing.assert_array_equal(pv.outputs[None], full.images[37].outputs[None][y0:y1, x0:x1])


def test_a_preview_job_sends_its_page_alone_once_the_decisions_are_kept():
    """A preview of page 2 of a 12-page stack goes to the compute process with that page's
    array only; the process asks for the others ('pages') until it keeps the stack's
    decisions, and then previews from what it keeps: the pixels of the whole job's."""
    pages = _moving(12, 40)
    params = DenoiseParams(ranks=(None,))
    job = Job(_items(pages, params, "sent"), params, purpose="preview", box=(8, 32, 8, 32),
              sets=[tuple(range(12))], focus=2)
    sent = job.without_pages()
    assert len(sent.items) == 12 and [it.key for it in sent.items] == [it.key for it in job.items]
    assert [k for k, it in enumerate(sent.items) if it.array is not None] == [2]
    assert all(it.array is not None for it in job.items)  # the window's job keeps them

    def run(j: Job) -> tuple:
        outcomes = []
        summary = run_job(j, lambda kind, payload: outcomes.append(payload)
                          if kind == "preview" else None, CancelToken())
        return summary["status"], outcomes

    assert run(sent) == ("pages", [])  # nothing kept yet: the whole job, please
    status, [whole] = run(job)
    assert status == "done" and not whole.error and whole.sequence["decision"] == "sequence"
    status, [pv] = run(sent)
    assert status == "done" and pv.decided_before and pv.sequence == whole.sequence
    assert pv.box == whole.box
    np.testing.assert_array_equal(pv.outputs[None], whole.outputs[None])


def test_the_window_previews_a_stack_page_with_its_neighbours(window, tmp_path, qtbot,
                                                             monkeypatch):
    """A multi-page TIFF: the preview of its middle page is the window's full run's pixels
    in the region, and the log says which pages the preview denoised it with.  The compute
    process gets the other pages once: the second preview sends the page alone."""
    from kpca_denoise.gui.worker import compute_server

    srv = compute_server()
    sent, put = [], srv.jobs.put
    monkeypatch.setattr(srv.jobs, "put", lambda j, *a: (sent.append(j), put(j, *a))[1])
    tifffile = pytest.importorskip("tifffile")
    path = tmp_path / "stack.tif"
    tifffile.imwrite(path, np.stack(_moving(5, 64)), photometric="minisblack")
    window.load_paths([path])
    window.imageset.set_current(2)
    params = DenoiseParams(ranks=(None,))
    window.params_panel.set_params(params)
    with qtbot.waitSignal(window.runner.finished, timeout=RUN_TIMEOUT_MS,
                          check_params_cb=lambda s: s.job.purpose == "preview") as blocker:
        window.draw_preview((16, 12, 48, 44))
    job = blocker.args[0].job
    assert len(job.items) == 5 and job.sets == [tuple(range(5))] and job.focus == 2
    settle(qtbot, window)
    pv = window.session.preview(window.current_entry(), params)
    assert pv is not None and not pv.error and pv.sequence["decision"] == "sequence"
    log = window.log_view.toPlainText()
    assert "the preview denoised page 3 of 5 with pages 1–5 (the region on each)" in log
    # the region moved: the stack's decisions are kept, and the log says whose they are
    with qtbot.waitSignal(window.runner.finished, timeout=RUN_TIMEOUT_MS,
                          check_params_cb=lambda s: s.job.purpose == "preview"):
        window.draw_preview((8, 8, 40, 40))
    settle(qtbot, window)
    assert "(the stack's decisions made before)" in window.log_view.toPlainText()
    assert "(the image's decisions made before)" not in window.log_view.toPlainText()
    # the first preview: the page alone, then (asked for) every page; the second: alone
    assert [sum(it.array is not None for it in j.items) for j in sent
            if j is not None and j.purpose == "preview"] == [1, 5, 1]
    run(qtbot, window, params)  # the first region's preview (pv) against the run
    rec = window.session.record(window.current_entry(), params)
    y0, y1, x0, x1 = pv.box
    np.testing.assert_array_equal(rec.ranks[None].output[y0:y1, x0:x1], pv.outputs[None])


def test_a_rank_added_later_is_previewed_from_the_kept_decisions():
    """The decisions are kept without the ranks: a preview asked for with another rank
    gets that rank (the kept calibration carried the first preview's ranks)."""
    image = _moving(1, 48)[0]
    first = DenoiseParams(ranks=(None,))
    item = JobItem("ranks#0", "image", image, False, first.ranks)
    assert list(run_preview(item, first, (8, 40, 8, 40), None, None).outputs) == [None]
    pv = run_preview(item, first.replace(ranks=(2, None)), (8, 40, 8, 40), None, None)
    assert pv.decided_before and list(pv.outputs) == [2, None]
