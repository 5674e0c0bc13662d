"""The window exports, remembers its settings, and keeps a set fit beside each image's own results (pytest-qt, offscreen; the fixtures are :mod:`gui_support`'s).

Small synthetic images and method='global' keep every run to a second or two.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from gui_support import FAST, RUN_TIMEOUT_MS, run, settle, trial_args, smooth
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QApplication

from kpca_denoise import cli
from kpca_denoise.gui import app as gui_app
from kpca_denoise.gui.jobs import params_key
from kpca_denoise.gui.main_window import MainWindow, rank_tag
from kpca_denoise.io import read_item
from kpca_denoise.params import DenoiseParams


# -- export --------------------------------------------------------------------------


def test_export_keeps_format_and_bit_depth_and_never_overwrites(window, images, tmp_path, qtbot):
    window.load_paths([images["u16"], images["u8"]])
    run(qtbot, window, FAST.replace(ranks=(4,)))
    window.select_rank(4)
    outdir = tmp_path / "out"
    written = window.export_current(outdir)
    target = outdir / "gray16_kpca_r4.png"
    assert target in written and (outdir / "gray16_kpca_r4.json").is_file()
    back = read_item(target)
    assert back.array.dtype == np.uint16 and back.format == "PNG"
    rec = window.cache.get(window.entries[0].key, params_key(window.params_panel.params()))
    np.testing.assert_array_equal(back.array, rec.ranks[4].output)
    assert not list(outdir.glob(".*"))  # no temporary files left behind

    # export into a folder where the output name is one of the inputs: refused, original intact
    clash_dir = tmp_path / "clash"
    clash_dir.mkdir()
    src = clash_dir / "a.png"
    Image.fromarray(smooth(48, 48, 255, 5).astype(np.uint8)).save(src)
    victim = clash_dir / f"a_{rank_tag(4)}.png"
    Image.fromarray(np.zeros((48, 48), np.uint8)).save(victim)
    original = victim.read_bytes()
    window.load_paths([src, victim])
    window.imageset.set_current(window.session.row_of(next(e.key for e in window.entries if e.path == src)))
    run(qtbot, window, FAST.replace(ranks=(4,)))
    assert window.export_current(clash_dir) == []
    assert victim.read_bytes() == original
    assert window.banner.isVisible() and "overwrite" in window.banner.text()


def test_export_set_asks_before_computing_missing_then_writes_all(window, images, tmp_path, qtbot):
    window.load_paths([images["u8"], images["u16"]])
    window.imageset.set_current(0)
    run(qtbot, window, FAST.replace(ranks=(2,)))  # only the first image is computed
    outdir = tmp_path / "set"
    asked = []
    window.ask = lambda title, text, choices: (asked.append(text), "Cancel")[1]
    jobs = []
    window.runner.started.connect(jobs.append)
    assert window.export_set(outdir) == [] and not outdir.exists() and jobs == []  # cancelled: nothing
    assert "gray16.png" in asked[0] and "method = global" in asked[0] and "n train = 300" in asked[0]
    window.ask = lambda title, text, choices: "Export the computed only"
    assert window.export_set(outdir) and (outdir / "gray8_kpca_r2.png").is_file()
    assert not (outdir / "gray16_kpca_r2.png").exists() and jobs == []
    window.ask = lambda title, text, choices: "Compute and export"
    with qtbot.waitSignal(window.runner.finished, timeout=RUN_TIMEOUT_MS):
        assert window.export_set(tmp_path / "set2") == []  # computing first
    assert [it.name for it in jobs[0].items] == ["gray16.png"]  # only what was missing
    outdir = tmp_path / "set2"
    settle(qtbot, window)
    qtbot.waitUntil(lambda: (outdir / "gray16_kpca_r2.png").is_file())
    assert (outdir / "gray8_kpca_r2.png").is_file()
    assert read_item(outdir / "gray16_kpca_r2.png").array.dtype == np.uint16
    assert read_item(outdir / "gray8_kpca_r2.png").array.dtype == np.uint8


def test_export_error_is_shown(window, images, tmp_path, qtbot):
    window.load_paths([images["u8"]])
    run(qtbot, window, FAST.replace(ranks=(2,)))
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("a file where the folder should be")
    assert window.export_current(blocker) == []
    assert window.banner.isVisible() and "cannot write" in window.banner.text()
    assert QApplication.activeModalWidget() is None


def test_an_export_refused_by_the_system_names_the_target(window, images, tmp_path, qtbot,
                                                          monkeypatch):
    # a read-only folder refused the hidden temporary file, and the banner named that
    import kpca_denoise.gui.export as export

    window.load_paths([images["u8"]])
    run(qtbot, window, FAST.replace(ranks=(2,)))

    def refused(item, out, target, **kw):
        raise PermissionError(13, "Permission denied",
                              str(target.parent / f".{target.name}.kpca-host-1-abc.part"))

    monkeypatch.setattr(export, "write_item", refused)
    assert window.export_current(tmp_path / "ro") == []
    text = window.banner.text()
    assert "gray8_kpca_r2.png: cannot write (Permission denied)" in text, text
    assert ".part" not in text


def test_comparison_sheet_png(window, images, tmp_path, qtbot):
    # the export dialogs open in the last export's folder, else the inputs', never in the
    # shipped samples' (inside the installed package)
    from kpca_denoise.samples import sample_images_dir

    window.load_paths([sample_images_dir() / "camera.png"])
    assert window.export_start() == str(Path.home())
    window.load_paths([images["u8"]])
    assert window.export_start() == str(images["u8"].parent)
    run(qtbot, window, FAST.replace(ranks=(2, 4, 8), add_noise=20.0))
    path = window.export_sheet(tmp_path / "sheet.png")
    assert path is not None and path.is_file()
    with Image.open(path) as im:
        w, h = im.size
        assert im.format == "PNG"
    assert w > 3 * h  # clean, noisy and three ranks side by side
    # the ranks compared on screen, not every rank computed (it held all of them)
    window.params_panel.set_ranks((8, 2))
    assert window.shown_ranks() == (2, 8)
    path = window.export_sheet(tmp_path / "two.png")
    with Image.open(path) as im:  # 48 px tiles enlarged to 160, 12 px apart
        assert im.size == (12 + 4 * (160 + 12), h)
    window.export_current(tmp_path / "exported")
    assert window.export_start() == str(tmp_path / "exported")
    # the sheet cannot replace an input
    assert window.export_sheet(images["u8"]) is None
    assert read_item(images["u8"]).array.shape == (48, 48)


def test_sidecar_round_trip_through_the_command_line(window, images, tmp_path, qtbot):
    window.load_paths([images["u8"]])
    params = FAST.replace(ranks=(4, 8), add_noise=15.0, seed=3)
    run(qtbot, window, params)
    window.select_rank(8)
    gui_out = tmp_path / "gui"
    window.export_current(gui_out)
    sidecar = gui_out / "gray8_kpca_r8.json"
    data = json.loads(sidecar.read_text())
    assert set(data) >= {"params", "resolved"}
    assert DenoiseParams.from_dict(data["params"]) == params.replace(ranks=(8,))
    assert data["resolved"]["gamma"] > 0
    cli_out = tmp_path / "cli"
    rc = cli.main(["denoise", str(images["u8"]), "-o", str(cli_out), "--params", str(sidecar), "-q",
                   *trial_args(sidecar)])
    assert rc == 0
    a = read_item(gui_out / "gray8_kpca_r8.png").array.astype(int)
    b = read_item(cli_out / "gray8_kpca_r8.png").array.astype(int)
    assert np.abs(a - b).max() <= 1  # same parameters, same result (rounding aside)


# -- settings, about, entry point ----------------------------------------------------------


def test_settings_are_remembered_in_the_temporary_location(qtbot, tmp_path, images, temp_settings):
    w = MainWindow()  # the default constructor: must land in the temporary settings path
    qtbot.addWidget(w)
    w.params_panel.set_params(FAST.replace(ranks=(3, 6), seed=7))
    w.load_paths([images["u8"]])
    w.close()
    files = list(Path(temp_settings).rglob("*.ini"))
    assert files, "settings were not written to the temporary location"
    w2 = MainWindow()
    qtbot.addWidget(w2)
    p = w2.params_panel.params()
    assert p.ranks == (3, 6) and p.seed == 7 and p.method == "global"
    assert Path(w2.last_dir) == images["u8"].parent


def test_about_box_lists_the_references(window):
    dlg = window.show_about()
    text = dlg.browser.toPlainText()
    for ref in ("Schölkopf", "Neural Computation", "Mika", "NIPS", "LPG-PCA", "Zhang", "Dabov", "BM3D"):
        assert ref in text
    assert not dlg.isModal()


def test_gui_entry_point_errors(monkeypatch, tmp_path, capsys):
    assert gui_app.main([], demo=False, screenshot=str(tmp_path / "x.png")) == 2
    monkeypatch.setattr(gui_app, "sample_images_dir", lambda: tmp_path / "missing")
    assert gui_app.main([], demo=True, screenshot=str(tmp_path / "x.png")) == 2
    assert "sample images" in capsys.readouterr().err


def test_throttle_always_delivers_the_final_spectrum():
    """Iterations faster than the plot's update interval are thinned out, but
    the converged eigenvalues reach the plot when the next stage starts."""
    from kpca_denoise.core.progress import ProgressEvent
    from kpca_denoise.gui.compute import Throttle

    sent = []
    th = Throttle(lambda kind, payload: sent.append((kind, payload)))
    for it in range(1, 6):  # converges at iteration 5 of at most 200, all within microseconds
        th(ProgressEvent("eigensolver", it, 200, eigenvalues=np.full(3, float(it))))
    th(ProgressEvent("projection", 0, 10))
    spectra = [p for k, p in sent if k == "spectrum"]
    assert len(spectra) == 2
    np.testing.assert_array_equal(spectra[0], 1.0)
    np.testing.assert_array_equal(spectra[-1], 5.0)


def test_patch_set_auto_rank_is_marked_on_the_spectrum(window, images, qtbot):
    window.load_paths([images["npz"]])
    summary = run(qtbot, window, DenoiseParams(ranks=(None, 4), noise_sigma=40.0))
    assert summary.status == "done"
    rec = window.cache.get(window.entries[0].key, window.result_key(window.entries[0],
                                                                   window.current_params()))
    auto = rec.resolved["auto_rank"]
    assert 1 <= auto <= 20  # at most half of the 40 samples
    assert set(rec.ranks) == {None, 4}
    line = window.spectrum._rank_lines[None]
    assert line.value() == auto and line.label.format == f"auto={auto}"
    assert window.spectrum._rank_lines[4].value() == 4


# -- issue 10: export what is shown, set fit beside own results --------------------------


def _displayed(window, rank) -> np.ndarray:
    return np.asarray(window.grid.rank_panels[rank].image.image)


def test_export_writes_the_displayed_pixels_and_a_set_fit_keeps_own_results(window, images, tmp_path, qtbot):
    window.load_paths([images["u8"], images["big"]])
    window.imageset.set_current(0)
    e0, e1 = window.entries
    own = FAST.replace(ranks=(2, 4, 8))
    run(qtbot, window, own)
    window.select_rank(4)
    jobs = []
    window.runner.started.connect(jobs.append)
    window.ask = lambda *a: pytest.fail("nothing is missing: the export must not ask")
    written = window.export_current(tmp_path / "own")
    back = read_item(tmp_path / "own" / "gray8_kpca_r4.png").array
    assert written and np.array_equal(back, _displayed(window, 4)) and jobs == []
    umask = os.umask(0)
    os.umask(umask)
    assert all(f.stat().st_mode & 0o777 == 0o666 & ~umask for f in written)  # normal permissions
    asked = []
    window.ask = lambda title, text, choices: (asked.append(text), "Cancel")[1]
    assert window.export_current(tmp_path / "own") == [] and "2 file(s) already exist" in asked[0]
    window.ask = lambda title, text, choices: "Replace"
    assert window.export_current(tmp_path / "own") == written  # replaced only when confirmed
    window.ask = lambda *a: pytest.fail("nothing is missing: the export must not ask")
    # the explicit set fit (one model for both grey images) lives beside the own results
    summary = run(qtbot, window, own.replace(ranks=(4,)), run=window.run_set_fit)
    assert summary.status == "done" and jobs[0].sets == [(0, 1)]
    assert window.set_fit_box.isChecked()
    set_rec = window.cache.get(e0.key, params_key(own, (e0.key, e1.key)))
    own_rec = window.cache.get(e0.key, params_key(own))
    assert set(own_rec.ranks) == {2, 4, 8} and set(set_rec.ranks) == {4}
    assert not np.array_equal(set_rec.ranks[4].output, own_rec.ranks[4].output)
    np.testing.assert_array_equal(_displayed(window, 4), set_rec.ranks[4].output)
    window.select_rank(4)
    window.export_set(tmp_path / "set")
    for i, e in enumerate(window.entries):
        window.imageset.set_current(i)
        settle(qtbot, window)
        back = read_item(tmp_path / "set" / f"{e.path.stem}_kpca_r4.png").array
        assert np.array_equal(back, _displayed(window, 4)), e.name
    data = json.loads((tmp_path / "set" / "gray8_kpca_r4.json").read_text())
    assert len(data["fit_set"]) == 2
    # the own results are still there, three ranks, shown again when the set fit is unticked
    window.imageset.set_current(0)
    window.params_panel.set_params(own)
    window.set_fit_box.setChecked(False)
    settle(qtbot, window)
    assert all(window.grid.rank_panels[r].has_image() for r in (2, 4, 8))
    np.testing.assert_array_equal(_displayed(window, 4), own_rec.ranks[4].output)
    assert len(jobs) == 1  # no export recomputed anything


def test_session_model_is_qt_free_and_keeps_results_per_parameters(tmp_path):
    import ast

    gui = Path(__file__).resolve().parents[2] / "kpca_denoise" / "gui"
    for name in ("model.py", "jobs.py"):  # the model and what it imports from the gui package
        tree = ast.parse((gui / name).read_text())
        mods = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        mods += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        assert not [m for m in mods if m.startswith(("PySide6", "pyqtgraph", "."))
                    and m not in (".jobs", "..io", "..params", "..pipeline", "..core.progress")], name
    from kpca_denoise.gui.jobs import ItemOutcome
    from kpca_denoise.gui.model import ImageEntry, Session
    from kpca_denoise.io import LoadedItem

    def entry(name, shape):
        return ImageEntry(LoadedItem(path=tmp_path / name, array=np.zeros(shape, np.uint8),
                                     kind="image", format="PNG"))

    s = Session()
    a, b, c = entry("a.png", (8, 8)), entry("b.png", (8, 8)), entry("c.png", (8, 8, 3))
    for e in (a, b, c):
        s.add(e)
    assert [[e.name for e in g] for g in s.kind_groups(s.entries)] == [["a.png", "b.png"], ["c.png"]]
    p1, p2 = FAST.replace(ranks=(2,)), FAST.replace(ranks=(2,), seed=5)

    def outcome(e, p, r, fit_set=()):
        return ItemOutcome(key=e.key, name=e.name, params_key=params_key(p, fit_set), params=p,
                           outputs={r: np.full((8, 8), r, np.uint8)}, noisy=np.zeros((8, 8)),
                           fit_set=fit_set)

    s.add_outcome(outcome(a, p1, 2))
    s.add_outcome(outcome(a, p1, 4, (a.key, b.key)))  # a set fit: beside, not instead
    assert s.shown(a, p1).matches and set(s.shown(a, p1).record.ranks) == {2}
    s.show_set_fit = True
    assert set(s.shown(a, p1).record.ranks) == {4}
    ready, missing = s.export_plan([a, b], p1, 4)
    assert [e for e, _ in ready] == [a] and missing == [b]
    s.show_set_fit = False
    shown = s.shown(a, p2)  # the panel's parameters have no result: the latest is shown, marked
    assert not shown.matches and shown.record.params == p1
    items, sets = s.plan([a, b, c], p1, set_fit=True)
    assert [it.name for it in items] == ["a.png", "b.png", "c.png"] and sets == [(0, 1)]
    s.remove(0)
    assert s.cache.records_for(a.key) == [] and s.shown(a, p1).record is None


def test_every_parameter_is_reachable_on_a_1366x768_screen(qtbot, tmp_path):
    from PySide6.QtCore import QPoint, QRect
    from PySide6.QtWidgets import QAbstractButton, QAbstractSpinBox, QComboBox, QLineEdit

    w = MainWindow(settings=QSettings(str(tmp_path / "w.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    avail = QRect(0, 0, 1366, 768)
    w.place_on_screen(avail)
    w.show()
    qtbot.waitExposed(w)
    w.params_panel.set_params(FAST.replace(ranks=(1, 2, 4, 8, 16)))  # five ranks widen nothing
    QApplication.processEvents()
    assert avail.contains(w.frameGeometry()), w.frameGeometry()
    from kpca_denoise.gui.views import CELL_WIDTH

    assert w.grid.width() <= w.width() and w.grid.width() / w.grid.columns >= CELL_WIDTH
    wide = w.grid.columns
    w.resize(1000, 768)  # narrower: the grid wraps onto more rows, the window stays narrow
    QApplication.processEvents()
    assert w.width() == 1000 and w.grid.columns < wide and w.grid.width() <= w.width()
    w.resize(1366, 768)
    panel = w.params_panel
    controls = [c for t in (QLineEdit, QAbstractSpinBox, QComboBox, QAbstractButton)
                for c in panel.widget().findChildren(t) if c.isVisibleTo(panel)]
    assert len(controls) >= 10
    for c in controls:
        panel.ensureWidgetVisible(c)
        QApplication.processEvents()
        assert not c.visibleRegion().isEmpty(), c.toolTip() or c.objectName()
        assert w.rect().contains(QRect(c.mapTo(w, QPoint(0, 0)), c.size())), c.toolTip()
    # a saved geometry larger than the screen is shrunk into it
    w.resize(1800, 1000)
    w.place_on_screen(avail)
    assert avail.contains(w.frameGeometry()), w.frameGeometry()
    # log and progress can be hidden: the images get the room
    w.dock_progress.toggleViewAction().trigger()
    assert not w.dock_progress.isVisible()


def _shows_whole_image(vb, h, w) -> bool:
    (x0, x1), (y0, y1) = vb.viewRange()
    covers = x0 <= 0.5 and x1 >= w - 0.5 and y0 <= 0.5 and y1 >= h - 0.5
    tight = min((x1 - x0) / w, (y1 - y0) / h) < 1.05  # fitted, not a postage stamp
    return covers and tight


def test_views_stay_fitted_until_the_user_zooms(window, images, qtbot):
    window.load_paths([images["big"]])
    run(qtbot, window, FAST.replace(ranks=(2,)))
    master = window.grid.master
    qtbot.waitUntil(lambda: _shows_whole_image(master, 96, 96), timeout=5000)
    # adding ranks: new columns, the grid re-flows, the views are fitted again
    with qtbot.waitSignal(window.runner.finished, timeout=RUN_TIMEOUT_MS):
        window.params_panel.set_ranks((2, 4, 8, 16))
    settle(qtbot, window)
    qtbot.waitUntil(lambda: _shows_whole_image(master, 96, 96), timeout=5000)
    for r in (2, 16):
        assert _shows_whole_image(window.grid.rank_panels[r].vb, 96, 96)
    window.residuals_box.setChecked(False)
    qtbot.waitUntil(lambda: _shows_whole_image(master, 96, 96), timeout=5000)
    # the user zooms: kept through a rank change and a resize
    master.scaleBy((0.25, 0.25))
    master.sigRangeChangedManually.emit([True, True])

    def region():  # the part of the image in view: its centre and its smaller extent
        (x0, x1), (y0, y1) = master.viewRange()
        return ((x0 + x1) / 2, (y0 + y1) / 2), min(x1 - x0, y1 - y0)

    centre, extent = region()
    assert extent < 60
    window.params_panel.set_ranks((2, 4))
    window.resize(window.width() - 40, window.height())
    # the same centre and scale stay in view after the re-layout, not refitted
    qtbot.waitUntil(lambda: not window._fit_pending, timeout=5000)
    QApplication.processEvents()
    centre_now, extent_now = region()
    assert not _shows_whole_image(master, 96, 96) and extent_now < 60
    assert np.allclose(centre, centre_now, atol=2)
    window.act_reset_zoom.trigger()  # Ctrl+0: fitted again, and kept fitted
    qtbot.waitUntil(lambda: _shows_whole_image(master, 96, 96), timeout=5000)


def test_cancel_keeps_the_ranks_that_finished_and_progress_says_which_rank(window, images, qtbot):
    window.load_paths([images["big"]])
    params = DenoiseParams(method="global", ranks=(2, 8, 32), n_train=1200, preimage_iterations=200)
    window.params_panel.set_params(params)
    messages, done = [], []
    window.runner.progress.connect(lambda s, d, t, m: messages.append((s, m)))
    window.runner.itemDone.connect(done.append)
    with qtbot.waitSignal(window.runner.finished, timeout=RUN_TIMEOUT_MS) as blocker:
        assert window.run_current()
        assert window.progress.clock.isActive() and window.progress.clock.interval() == 1000
        qtbot.waitUntil(lambda: bool(done), timeout=RUN_TIMEOUT_MS)  # the first rank is done
        window.cancel_run()
    assert blocker.args[0].status == "cancelled"
    assert done[0].partial and list(done[0].outputs) == [32]  # the largest first: one fit for all
    assert ("preimage", "rank 32, 1 of 3") in messages
    rec = window.cache.get(window.entries[0].key, params_key(params))
    assert 32 in rec.ranks and 2 not in rec.ranks  # finished kept, unfinished not invented
    settle(qtbot, window)
    assert window.grid.rank_panels[32].has_image() and not window.grid.rank_panels[2].has_image()
    assert not window.progress.clock.isActive() and "cancelled" in window.progress.overall.text()
    assert window.spectrum.status_text() != "eigensolver iterating…"
    # running again computes only what is missing
    jobs, missing = [], {r for r in (2, 8) if r not in rec.ranks}
    window.runner.started.connect(jobs.append)
    with qtbot.waitSignal(window.runner.finished, timeout=RUN_TIMEOUT_MS):
        assert window.run_current()
    assert set(jobs[0].items[0].ranks) == missing


def test_pages_of_a_stack_are_the_sets_images_and_export_as_one_stack(window, images, tmp_path, qtbot):
    tifffile = pytest.importorskip("tifffile")
    pages = np.stack([smooth(48, 48, 255, s).astype(np.uint8) for s in (7, 8, 9)])
    stack = tmp_path / "stack.tif"
    tifffile.imwrite(stack, pages, photometric="minisblack")
    gif = images["dir"] / "anim.gif"
    Image.fromarray(pages[0]).save(gif)
    assert window.load_paths([stack, images["dir"]]) == 5  # 3 pages + 2 images
    assert [e.name for e in window.entries[:3]] == [f"stack.tif [page {k}/3]" for k in (1, 2, 3)]
    assert any("skipped 1 file" in line and "anim.gif" in line for line in window.log_view.lines)
    window.imageset.set_current(1)
    params = FAST.replace(ranks=(2,))
    window.params_panel.set_params(params)
    window.ask = lambda title, text, choices: "Compute and export"
    with qtbot.waitSignal(window.runner.finished, timeout=RUN_TIMEOUT_MS):
        window.export_current(tmp_path / "out")  # one page shown: the stack needs all three
    qtbot.waitUntil(lambda: (tmp_path / "out" / "stack_kpca_r2.tif").is_file(), timeout=5000)
    back = read_item(tmp_path / "out" / "stack_kpca_r2.tif")
    assert back.is_stack and back.array.shape == (3, 48, 48)
    for k in range(3):
        window.imageset.set_current(k)
        settle(qtbot, window)
        np.testing.assert_array_equal(back.array[k], _displayed(window, 2))
    # a format that cannot hold a stack: one error for the stack, not one per page
    window.set_export_format("png")
    window.imageset.set_current(0)
    window.export_current(tmp_path / "png")
    text = window.banner.text()
    assert text.startswith("Export: 1 problem. stack.tif: cannot be written as PNG: a stack of "
                           "3 pages needs a multi-page format"), text
    assert not (tmp_path / "png").exists() or not list((tmp_path / "png").iterdir())


def test_a_folder_of_only_bad_files_says_so(window, tmp_path):
    d = tmp_path / "bad"
    d.mkdir()
    for n in ("a.png", "b.png"):
        (d / n).write_bytes(b"not an image")
    assert window.load_paths([d]) == 0
    text = window.banner.text()
    assert text.startswith("None of the 2 inputs could be read") and "loaded" not in text
