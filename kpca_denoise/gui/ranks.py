"""Which ranks the views compare and which one is selected; results of other parameters.

A mixin of :class:`~kpca_denoise.gui.main_window.MainWindow`.  The compared
ranks are the panel's (ordered by components kept, 'auto' where its rank
falls); when the image has no result for the panel's parameters its latest
result is shown instead, marked, with a link that puts its parameters back.
"""

from __future__ import annotations

from .model import PATCH_SET_RANKS, FitRecord, ImageEntry, auto_neighbours, describe_params
from .texts import mismatch_html
from .texts import rank_title as _rank_title
from .jobs import rank_label, rank_sort_key

__all__ = ["RankSelection"]


class RankSelection:
    """Compared and selected ranks, the mismatch marker, the set-fit box (mixed into the window)."""

    def compared_ranks(self) -> tuple:
        """The panel's ranks in order of components kept, 'auto' where its rank falls
        (once known; 16 for images under 'global'; else last: no cap keeps the most)."""
        p = self.current_params()
        if not p:
            return ()
        e = self.current_entry()
        rec = self.session.record(e, p) if e is not None else None
        auto = rec.resolved.get("auto_rank") if rec is not None else None
        if auto is None and p.method == "global" and e is not None and not e.is_patchset:
            auto = 16
        return tuple(sorted(p.ranks, key=lambda r: (rank_sort_key(auto if r is None else r), r is None)))

    def shown_ranks(self) -> tuple:
        """The ranks the views show: the panel's, or those of the other parameters' result shown."""
        shown = self.session.shown(self.current_entry(), self.current_params())
        return self.compared_ranks() if shown.matches else shown.ranks

    @staticmethod
    def rank_title(e: ImageEntry, rec: FitRecord | None, r) -> str:
        """A rank's title in the views and on the sheet (see :func:`texts.rank_title`)."""
        return _rank_title(e, rec, r)

    def select_rank(self, rank) -> None:
        if rank not in self.shown_ranks():
            return
        self.selected_rank = rank
        self.refresh_views()

    def select_rank_index(self, i: int) -> None:
        """Select the i-th rank shown (keys 1 … 9)."""
        ranks = self.shown_ranks()
        if 0 <= i < len(ranks):
            self.select_rank(ranks[i])

    def _on_spectrum_click(self, k: int) -> None:
        """Select the compared rank near the click, or add k to the comparison."""
        ranks = [r for r in self.compared_ranks() if r is not None]
        n = max(self.spectrum.eigenvalues.size, 1)
        near = [r for r in ranks if abs(r - k) <= max(0.5, 0.02 * n)]
        if near:
            self.select_rank(min(near, key=lambda r: abs(r - k)))
            return
        p = self.current_params()
        if p is None:
            return
        new = tuple(sorted(set(p.ranks) | {k}, key=rank_sort_key))
        self.selected_rank = k
        self.log(f"rank {k} added to the comparison (clicked on the spectrum)")
        self.params_panel.set_ranks(new)

    def suggest_ranks(self) -> None:
        """The suggested ranks for the method and the current image (patch set or image)."""
        e = self.current_entry()
        self.params_panel.suggest_ranks(e is not None and e.is_patchset)

    def _add_auto_neighbours(self) -> None:
        """A patch set compared at 'auto' only: once the fit chose the rank, compare its
        neighbours too (computed at once, from the same model)."""
        e, p = self.current_entry(), self.current_params()
        if e is None or p is None or not e.is_patchset or tuple(p.ranks) != PATCH_SET_RANKS:
            return
        rec = self.session.record(e, p)
        auto = rec.resolved.get("auto_rank") if rec is not None else None
        if auto:
            ranks = auto_neighbours(int(auto), e.array.shape[0])
            self.log(f"{e.name}: auto chose {auto} components; comparing with "
                     f"{', '.join(rank_label(r) for r in ranks if r is not None)} as well")
            self.params_panel.set_ranks(ranks)

    # -- results of other parameters, the set fit ------------------------------------------
    def _show_mismatch(self, shown, p) -> None:
        """The marker over the views when the result shown came from other parameters."""
        if shown.record is None or shown.matches or p is None:
            self.mismatch.hide()
            return
        self.mismatch.setText(mismatch_html(shown.record, p))
        self.mismatch.setToolTip(describe_params(shown.record.params))
        self.mismatch.show()

    def use_shown_params(self) -> None:
        """Put the parameters of the shown result into the panel."""
        shown = self.session.shown(self.current_entry(), self.current_params())
        if shown.record is not None:
            self.params_panel.set_params(shown.record.params.replace(
                ranks=tuple(sorted(shown.record.ranks, key=rank_sort_key))))
            self.session.show_set_fit = (bool(shown.record.fit_set)
                                         and shown.record.params.method == "global")
            self.set_fit_box.setChecked(self.session.show_set_fit)
            self.refresh_views()

    def _on_set_fit_toggled(self, on: bool) -> None:
        self.session.show_set_fit = on
        self.refresh_views()
