"""The image set: opening files and folders, removing images, clean references, the current image.

A mixin of :class:`~kpca_denoise.gui.main_window.MainWindow`.  Files are read
only through :mod:`kpca_denoise.io`; unreadable ones are reported and the
others kept.  A multi-page TIFF becomes one image per page.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QFileDialog

from ..io import SUPPORTED_SUFFIXES, InputError, collect_inputs, read_item, read_items
from ..params import DenoiseParams
from .model import FitRecord, ImageEntry, entries_for
from .texts import load_errors_text, loaded_status_text, nothing_loaded_text, skipped_log_text
from .jobs import compute_metrics

__all__ = ["ImageLoading", "FILE_FILTER"]

FILE_FILTER = "Images and patch sets (" + " ".join(f"*{s}" for s in sorted(SUPPORTED_SUFFIXES)) + ")"


class ImageLoading:
    """Open, remove and step through images; attach clean references (mixed into the window)."""

    # -- opening -------------------------------------------------------------------
    def open_files_dialog(self) -> None:
        files, _ = QFileDialog.getOpenFileNames(self, "Open images or patch sets", self.last_dir,
                                                FILE_FILTER + ";;All files (*)")
        if files:
            self.load_paths(files)

    def open_folder_dialog(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Open a folder of images", self.last_dir)
        if folder:
            self.load_paths([folder])

    def load_paths(self, paths) -> int:
        """Load files and folders; bad ones are reported, the rest are kept. Returns how many loaded.

        A multi-page TIFF becomes one image per page (exported back as one stack)."""
        found, problems, skipped = collect_inputs(paths)
        args = [Path(p).absolute() for p in paths]

        def given_at(path) -> int:  # which argument named this file (or its folder)
            q = Path(path).absolute()
            return next((k for k, a in enumerate(args) if q == a or a in q.parents), len(args))

        errors = [(given_at(p), msg) for p, msg in problems]
        known = {e.path.resolve(): i for i, e in enumerate(self.entries)}
        fresh = [f for f in found if f.path.resolve() not in known]
        QApplication.setOverrideCursor(Qt.CursorShape.WaitCursor)
        try:
            items, bad = read_items(fresh)
        finally:
            QApplication.restoreOverrideCursor()
        # an OME-Zarr image is read chunk by chunk, never whole: the command line's
        bad += [(it.path, f"{it.path}: an OME-Zarr image is denoised by the command line "
                          f"(kpca-denoise denoise {it.path.name} -o OUTDIR), not in the window")
                for it in items if it.is_lazy]
        items = [it for it in items if not it.is_lazy]
        errors.extend((given_at(p), msg) for p, msg in bad)
        # in the order given, so that "First:" names the first input that failed
        errors = [msg for _, msg in sorted(errors, key=lambda e: e[0])]
        first_new = len(self.entries)
        new = [e for it in items for e in entries_for(it)]
        for e in new:
            self.session.add(e)
            self.imageset.add_entry(e)
            self.log(f"loaded {e.name} ({e.describe()}) from {e.path}")
        if skipped:
            self.log(skipped_log_text(skipped, SUPPORTED_SUFFIXES), "warning")
        if paths:
            p0 = Path(paths[0])
            self.last_dir = str(p0 if p0.is_dir() else p0.parent)
        if errors:
            self.report_error(load_errors_text(errors, len(items)), errors if len(errors) > 1 else None)
        elif skipped and not items:
            self.report_error(nothing_loaded_text(skipped))
        if new:
            self.imageset.set_current(first_new)
            if not errors:  # an error message must stay visible, not be replaced
                self.statusBar().showMessage(loaded_status_text(len(new), len(skipped)), 8000)
        elif not errors and found:
            # everything was already loaded: show the first of them
            self.imageset.set_current(known.get(found[0].path.resolve(), self.current_index()))
        self._update_actions()
        return len(new)

    def remove_image(self, row: int) -> None:
        """Take an image out of the set, asking first when it has results."""
        if not 0 <= row < len(self.entries):
            return
        e = self.entries[row]
        if self.session.has_results(e) and not self.confirm(
                "Remove image", f"Remove {e.name} from the set?  Its computed results are discarded."):
            return
        self.session.remove(row)
        self._levels.pop(e.key, None)
        self.imageset.remove_row(row)
        self.log(f"removed {e.name} from the set")
        if self.entries:
            self.imageset.set_current(min(row, len(self.entries) - 1))
        self._update_actions()
        self.refresh_views()

    # -- clean references ------------------------------------------------------------
    def choose_reference(self) -> None:
        if self.current_entry() is None:
            self.report_error("Load an image first, then choose its clean reference.")
            return
        f, _ = QFileDialog.getOpenFileName(self, "Clean reference image", self.last_dir, FILE_FILTER)
        if f:
            self.set_reference(f)

    def set_reference(self, path) -> bool:
        """Attach a clean reference to the current image (None clears it)."""
        e = self.current_entry()
        if e is None:
            return False
        if path is None:
            e.reference, e.reference_path = None, None
        else:
            try:
                ref = read_item(path)
            except InputError as exc:
                self.report_error(f"Reference not loaded: {exc}")
                return False
            if ref.array.shape != e.array.shape:
                self.report_error(f"Reference not loaded: {ref.path.name} is {ref.array.shape}, "
                                  f"{e.name} is {e.array.shape}; they must have the same size and channels.")
                return False
            e.reference, e.reference_path = ref.array, ref.path
            self.log(f"reference for {e.name}: {ref.path}")
        self.params_panel.set_reference_text(str(e.reference_path) if e.reference_path else None)
        # metrics of cached results now mean something else: recompute them
        for rec in self.cache.records_for(e.key):
            self._recompute_metrics(e, rec)
        self.refresh_views()
        return True

    def _clean_for(self, e: ImageEntry, params: DenoiseParams) -> np.ndarray | None:
        """What the metrics compare with: the reference, else the input noise was added to."""
        if e.reference is not None:
            return e.reference
        return e.array if params.add_noise else None

    def _recompute_metrics(self, e: ImageEntry, rec: FitRecord) -> None:
        clean = self._clean_for(e, rec.params)
        dtype = e.array.dtype
        if clean is not None:
            rec.noisy_metrics = compute_metrics(rec.noisy, clean, dtype, e.is_patchset)
        elif not e.is_patchset:
            rec.noisy_metrics = {"noise_sigma": rec.noise_sigma}
        for rr in rec.ranks.values():
            rr.metrics = compute_metrics(rr.output, clean, dtype, e.is_patchset)

    # -- the current image -------------------------------------------------------------
    def current_index(self) -> int:
        return self.imageset.current()

    def current_entry(self) -> ImageEntry | None:
        i = self.current_index()
        return self.entries[i] if 0 <= i < len(self.entries) else None

    def next_image(self) -> None:
        if self.entries:
            self.imageset.set_current((self.current_index() + 1) % len(self.entries))

    def previous_image(self) -> None:
        if self.entries:
            self.imageset.set_current((self.current_index() - 1) % len(self.entries))

    def _on_current_changed(self, _row: int) -> None:
        e = self.current_entry()
        self.params_panel.set_reference_text(str(e.reference_path) if e and e.reference_path else None)
        self.cursor_label.setText("")  # the last image's values are not this one's
        self.keep_roi_inside(e.display(e.array).shape if e is not None else None)
        if self.preview_roi is not None:  # the rectangle was the last image's
            self.toggle_preview()
        self.refresh_views(reset_zoom=True)
        self.schedule_prepare()
