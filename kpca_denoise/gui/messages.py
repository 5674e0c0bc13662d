"""How the window tells the user things: the log, the banner, the status bar, a question.

A mixin of :class:`~kpca_denoise.gui.main_window.MainWindow`.  Errors go to
the inline banner, the status bar and the log; the only dialog is a question
asked before something is discarded or computed.  The texts themselves are
built in :mod:`kpca_denoise.gui.texts`.
"""

from __future__ import annotations

from PySide6.QtWidgets import QMessageBox

__all__ = ["Messages"]


class Messages:
    """Log lines, error and info reports, questions (mixed into the window)."""

    def log(self, text: str, level: str = "info") -> None:
        self.log_view.log(text, level)

    def report_error(self, text: str, details: list[str] | None = None) -> None:
        """Banner + status bar + log; never a modal dialog."""
        self.banner.show_message(text, "error")
        self.statusBar().showMessage(text.splitlines()[0], 15000)
        self.log(text, "error")
        for d in details or []:
            self.log(d, "error")

    def report_info(self, text: str, banner: bool = False) -> None:
        """Status bar + log (+ the banner when asked)."""
        if banner:
            self.banner.show_message(text, "info")
        self.statusBar().showMessage(text, 10000)
        self.log(text)

    def ask(self, title: str, text: str, choices: tuple[str, ...]) -> str | None:
        """A question with one button per choice; returns the choice, None when dismissed.
        (Tests replace this method; the window asks only before it discards or computes.)"""
        box = QMessageBox(QMessageBox.Icon.Question, title, text, parent=self)
        buttons = {box.addButton(c, QMessageBox.ButtonRole.RejectRole if c == "Cancel"
                                 else QMessageBox.ButtonRole.AcceptRole): c for c in choices}
        box.exec()
        return buttons.get(box.clickedButton())

    def confirm(self, title: str, text: str) -> bool:
        return self.ask(title, text, ("OK", "Cancel")) == "OK"
