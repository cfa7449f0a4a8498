"""Where to write a result: a file name, asked in a modal (enter writes, escape
cancels). A name ending in ``.csv`` is written as CSV, any other as JSON lines;
a file that is already there is never replaced."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static


class ExportScreen(ModalScreen[Path | None]):
    BINDINGS: ClassVar[list[BindingType]] = [("escape", "cancel", "Cancel")]

    def __init__(self, suggested: Path) -> None:
        super().__init__()
        self.suggested = suggested

    def compose(self) -> ComposeResult:
        with Vertical(id="export-box"):
            yield Static(
                "Export the rows shown (every one, not only those read)", id="export-title"
            )
            yield Static(
                "A .csv name is written as CSV (a header row), any other as JSON lines. "
                "enter writes, escape cancels.",
                id="export-help",
            )
            yield Input(str(self.suggested), id="export-path")
            yield Static("", id="export-error")

    @on(Input.Submitted, "#export-path")
    def _write(self, event: Input.Submitted) -> None:
        path = Path(event.value.strip()).expanduser()
        if not event.value.strip():
            return
        if path.exists():
            self.query_one("#export-error", Static).update(f"{path} is there: give another name")
            return
        if not path.parent.is_dir():
            self.query_one("#export-error", Static).update(f"{path.parent} is not a folder")
            return
        self.dismiss(path)

    def action_cancel(self) -> None:
        self.dismiss(None)
