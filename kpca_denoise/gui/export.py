"""Export actions of the main window: write exactly the results shown, the sidecar, the sheet.

A mixin of :class:`~kpca_denoise.gui.main_window.MainWindow` (it uses the
window's session, views and message helpers).  Nothing here computes a result:
when the selected rank is missing for some image the user is asked, with the
parameters, whether to compute it (see :meth:`ExportActions._export_or_compute`).
Files are written only through :mod:`kpca_denoise.io`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QFont, QImage, QPainter
from PySide6.QtWidgets import QFileDialog

from .. import __version__
from ..io import (InputError, atomic_write, check_not_input, in_format, jsonable, output_path,
                  rank_tag, write_item)
from ..params import DenoiseParams
from ..pipeline import result_keys
from ..samples import sample_images_dir
from .imageset import qimage_from_array, to_uint8
from .model import FitRecord, ImageEntry, describe_params
from .texts import format_metrics
from .jobs import rank_label, rank_sort_key

__all__ = ["ExportActions"]


class ExportActions:
    """Export, export set, comparison sheet (mixed into the main window)."""

    #: the format exports are written in; None: each image's own (``kpca-denoise --format``)
    export_format: str | None = None

    def set_export_format(self, fmt: str | None) -> None:
        """Write later exports as ``fmt`` (a key of :data:`kpca_denoise.io.OUTPUT_FORMATS`)
        or, with None, in each image's own format; remembered."""
        self.export_format = fmt
        for a in self.export_format_actions:
            a.setChecked(a.data() == (fmt or ""))
        if self.persist:
            self.settings.setValue("export_format", fmt or "")

    def _input_paths(self) -> list[Path]:
        paths = [e.path for e in self.entries]
        paths += [e.reference_path for e in self.entries if e.reference_path is not None]
        return paths

    def export_start(self) -> str:
        """Where the export dialog opens: the last export's folder, else the inputs'
        folder, but never the shipped sample images' (inside the installed package)."""
        last = getattr(self, "last_export_dir", None)
        if last:
            return last
        try:
            shipped = Path(self.last_dir).resolve() == sample_images_dir().resolve()
        except OSError:
            shipped = False
        return str(Path.home()) if shipped else self.last_dir

    def _choose_folder(self, title: str) -> str | None:
        folder = QFileDialog.getExistingDirectory(self, title, self.export_start())
        return folder or None

    def export_current(self, folder=None) -> list[Path]:
        """Write the selected rank of the current image as shown (+ JSON sidecar) to ``folder``."""
        e = self.current_entry()
        if e is None:
            self.report_error("Nothing to export: open and denoise an image first.")
            return []
        folder = folder or self._choose_folder("Export the selected rank to a folder")
        if not folder:
            return []
        shown = self.session.shown(e, self.current_params())
        rank = self.selected_rank
        if shown.record is not None and rank in shown.record.ranks and e.stack is None:
            return self._export_records([(e, shown.record)], Path(folder), rank)
        return self._export_or_compute([e], Path(folder))

    def export_set(self, folder=None) -> list[Path]:
        """Write the selected rank of every image as computed; asks before computing what is missing."""
        if not self.entries:
            self.report_error("Nothing to export: open images first.")
            return []
        folder = folder or self._choose_folder("Export the whole set to a folder")
        if not folder:
            return []
        return self._export_or_compute(list(self.entries), Path(folder))

    def _export_or_compute(self, entries: list[ImageEntry], folder: Path) -> list[Path]:
        """Export the results there are; never computes without asking.  When some image lacks
        the selected rank for the panel's parameters, the user chooses: compute it (the
        parameters are shown), export only the images that have it, or cancel."""
        params = self._params_or_report()
        if params is None:
            return []
        rank = self.selected_rank
        ready, missing = self.session.export_plan(entries, params, rank)
        if not missing:
            return self._export_records(ready, folder, rank)
        names = ", ".join(e.name for e in missing[:5]) + (" …" if len(missing) > 5 else "")
        fit = "the set fit" if self.session.show_set_fit else "each image's own fit"
        text = (f"Rank {rank_label(rank)} is not computed for {len(missing)} of {len(entries)} "
                f"image{'s' if len(entries) != 1 else ''} ({names}) with these parameters "
                f"({fit}):\n\n{describe_params(params.replace(ranks=(rank,)))}\n\n"
                f"Compute {'it' if len(missing) == 1 else 'them'} now and export when done?")
        choices = ("Compute and export", "Export the computed only", "Cancel") if ready else \
            ("Compute and export", "Cancel")
        answer = self.ask("Export: results missing", text, choices)
        if answer == "Export the computed only":
            self.log(f"export: skipped {len(missing)} image(s) without rank {rank_label(rank)}: {names}",
                     "warning")
            return self._export_records(ready, folder, rank)
        if answer != "Compute and export":
            self.log("export cancelled: nothing written")
            return []
        self._pending_export = (entries, folder, params, rank)
        if self._start(missing, "export", (rank,)):
            self.log(f"computing rank {rank_label(rank)} for {names} before exporting")
        else:
            self._pending_export = None
        return []

    def _export_after_run(self, entries, folder: Path, params: DenoiseParams, rank) -> list[Path]:
        ready, missing = self.session.export_plan(entries, params, rank)
        for e in missing:
            self.report_error(f"Export: {e.name}: rank {rank_label(rank)} could not be computed; not written")
        return self._export_records(ready, folder, rank)

    def _export_records(self, pairs, folder: Path, rank) -> list[Path]:
        """Write ``rank`` of each ``(entry, record)``: exactly the arrays the views show."""
        written: list[Path] = []
        errors: list[str] = []
        inputs = self._input_paths()
        units = []  # (item written, its array, the noisy input, entry and record for the sidecar)
        stacks_done: set[int] = set()
        for e, rec in pairs:
            if e.stack is not None:  # a stack once, for all its pages (and its error once)
                if id(e.stack) in stacks_done:
                    continue
                stacks_done.add(id(e.stack))
            try:
                written_as = in_format(e.item if e.stack is None else e.stack, self.export_format)
            except InputError as exc:
                errors.append(str(exc))
                continue
            if e.stack is None:
                units.append((written_as, rec.ranks[rank].output, rec.noisy, e, rec))
                continue
            pages = sorted(((x, r) for x, r in pairs if x.stack is e.stack), key=lambda xr: xr[0].page)
            if len(pages) != e.stack.array.shape[0]:
                errors.append(f"{e.path.name}: a stack is written whole; {len(pages)} of its "
                              f"{e.stack.array.shape[0]} pages have rank {rank_label(rank)}")
                continue
            units.append((written_as, np.stack([r.ranks[rank].output for _, r in pages]),
                          np.stack([r.noisy for _, r in pages]), e, rec))
        # never replace a file without asking (io refuses with replace=False)
        ins = {Path(p).resolve() for p in inputs}  # an input is never replaced: io refuses it below
        existing = [t for item, _, _, e, rec in units for t in self._targets(item, folder, rank, rec, e)
                    if t.exists() and t.resolve() not in ins]
        replace = False
        if existing:
            names = ", ".join(t.name for t in existing[:4]) + (" …" if len(existing) > 4 else "")
            if self.ask("Export: files exist", f"{len(existing)} file(s) already exist in {folder} "
                        f"({names}). Replace them?", ("Replace", "Cancel")) != "Replace":
                self.log("export cancelled: existing files kept")
                return []
            replace = True
        for item, out, noisy, e, rec in units:
            target = output_path(item, folder, self.file_tag(e, rec, rank))
            try:
                written.append(write_item(item, out, target, inputs=inputs, replace=replace))
                if rec.params.add_noise:
                    written.append(write_item(item, noisy, output_path(item, folder, "noisy"), inputs=inputs,
                                              replace=replace))
                written.append(self._write_sidecar(e, rec, rank, target, inputs, replace))
            except (InputError, OSError, ValueError) as exc:
                # the system's reason, not its temporary file's name (.NAME.kpca-....part)
                why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
                errors.append(f"{target}: cannot write ({why})")
        for w in written:
            self.log(f"wrote {w}")
        if errors:
            self.report_error(f"Export: {len(errors)} problem{'s' if len(errors) != 1 else ''}. {errors[0]}",
                              errors[1:])
        if written:
            n_json = sum(1 for w in written if w.suffix == ".json")
            self.report_info(f"Exported rank {rank_label(rank)} to {folder}"
                             f"{f' as {self.export_format.upper()}' if self.export_format else ''} "
                             f"({len(written) - n_json} image file(s) and {n_json} JSON sidecar(s))",
                             banner=not errors)
            self.last_export_dir = str(folder)
        return written

    @staticmethod
    def file_tag(e: ImageEntry, rec: FitRecord, rank) -> str:
        """A rank's file-name tag, as the command line names that rank's file ('auto' of an
        image under 'global' is rank 16: ``_kpca_r16``)."""
        return rank_tag(result_keys(rec.params.replace(ranks=(rank,)), e.is_patchset)[0])

    def _targets(self, item, folder: Path, rank, rec: FitRecord, e: ImageEntry) -> list[Path]:
        """The files an export of ``item`` writes: the result, its sidecar, the noisy input."""
        target = output_path(item, folder, self.file_tag(e, rec, rank))
        out = [target, target.with_name(target.stem + ".json")]
        return out + ([output_path(item, folder, "noisy")] if rec.params.add_noise else [])

    def _write_sidecar(self, e: ImageEntry, rec: FitRecord, rank, target: Path, inputs,
                       replace: bool = False) -> Path:
        """``{"params", "resolved"}``: ``kpca-denoise denoise IN -o OUT --params`` reads it back."""
        side = target.with_name(target.stem + ".json")
        check_not_input(side, inputs)
        rr = rec.ranks[rank]
        # the ranks of a run that gives this output exactly (with the global method a
        # rank depends on the largest rank its model was fitted for); that run also
        # writes the other rank's file, and this one under the same name as here
        used = rec.params.replace(ranks=rr.fit_ranks or (rank,))
        data = {
            "params": used.to_dict(),
            "rank": jsonable(rank),
            "resolved": jsonable({**rec.resolved, "noise_sigma": rec.noise_sigma,
                                  "noise_estimated": rec.noise_estimated}),
            "input": str(e.path),
            # a set fitted together: ``kpca-denoise denoise`` on these files reproduces it
            "fit_set": [self._key_path(k) for k in rec.fit_set] if rec.fit_set else None,
            "output": str(target),
            "reference": str(e.reference_path) if e.reference_path else None,
            "ranks_compared": jsonable(sorted(rec.ranks, key=rank_sort_key)),
            "metrics": jsonable(rr.metrics),
            "timings": jsonable(rec.timings),
            "software": f"kpca-denoise {__version__} (GUI)",
        }
        text = json.dumps(data, indent=2)
        return atomic_write(side, lambda p: p.write_text(text), replace=replace)

    def _key_path(self, key: str) -> str:
        e = next((x for x in self.entries if x.key == key), None)
        return str(e.path) if e is not None else key.split(":", 1)[-1]  # removed since: the key's path

    def export_sheet(self, path=None) -> Path | None:
        """Save the noisy image and every computed rank side by side as a PNG."""
        e = self.current_entry()
        rec = self.session.shown(e, self.current_params()).record
        if rec is None or not rec.ranks:
            self.report_error("No comparison to save: run the current image first (Ctrl+R).")
            return None
        if path is None:
            default = str(Path(self.export_start()) / f"{e.path.stem}_comparison.png")
            path, _ = QFileDialog.getSaveFileName(self, "Save comparison sheet", default, "PNG (*.png)")
            if not path:
                return None
        path = Path(path)
        if path.suffix.lower() != ".png":
            path = path.with_suffix(".png")
        try:
            check_not_input(path, self._input_paths())
            # the ranks compared on screen, in their order (not every rank computed);
            # every computed one when none of those is
            shown = [r for r in self.shown_ranks() if r in rec.ranks]
            sheet = self.comparison_sheet(e, rec, shown or None)

            def save(tmp: Path) -> None:
                if not sheet.save(str(tmp), "PNG"):
                    raise OSError("Qt could not encode the PNG")

            atomic_write(path, save)
        except (InputError, OSError) as exc:
            self.report_error(f"Comparison sheet not saved: {path}: {exc}")
            return None
        self.report_info(f"Comparison sheet saved to {path}", banner=True)
        return path

    def comparison_sheet(self, e: ImageEntry, rec: FitRecord, ranks: Sequence | None = None,
                         min_tile: int = 160) -> QImage:
        """The input and ``ranks`` (None: every rank computed) titled as the views title
        them, every tile at the source's resolution (small images are enlarged to
        ``min_tile`` pixels with whole pixels, never shrunk)."""
        levels = self._levels_for(e)
        tiles = [("noisy" if rec.params.add_noise else "input", rec.noisy, rec.noisy_metrics)]
        clean = self._clean_for(e, rec.params)
        if clean is not None:
            tiles.insert(0, ("reference" if e.reference is not None else "clean", clean, {}))
        for r in sorted(rec.ranks, key=rank_sort_key) if ranks is None else ranks:
            tiles.append((self.rank_title(e, rec, r), rec.ranks[r].output, rec.ranks[r].metrics))
        imgs = [qimage_from_array(to_uint8(e.display(a), levels)) for _, a, _ in tiles]
        h0, w0 = imgs[0].height(), imgs[0].width()
        scale = max(1.0, min_tile / max(h0, w0))
        tw, th = max(1, round(w0 * scale)), max(1, round(h0 * scale))
        pad, head, foot = 12, 34, 26
        sheet = QImage(pad + len(tiles) * (tw + pad), head + th + foot + pad, QImage.Format.Format_RGB32)
        sheet.fill(QColor("white"))
        qp = QPainter(sheet)
        qp.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, False)  # pixels stay pixels
        f = QFont(qp.font())
        f.setPixelSize(15)
        f.setBold(True)
        small = QFont(f)
        small.setBold(False)
        small.setPixelSize(12)
        for i, ((title, _, m), img) in enumerate(zip(tiles, imgs)):
            x = pad + i * (tw + pad)
            qp.setFont(f)
            qp.setPen(QColor("#222222"))
            qp.drawText(QRectF(x, 6, tw, head - 8), Qt.AlignmentFlag.AlignCenter, title)
            qp.drawImage(QRectF(x, head, tw, th), img)
            qp.setFont(small)
            qp.drawText(QRectF(x, head + th + 2, tw, foot), Qt.AlignmentFlag.AlignCenter, format_metrics(m))
        qp.end()
        return sheet
