"""Where to write a result: a file name, asked in a modal (enter writes, escape
cancels). A name ending in ``.csv`` is written as CSV, any other as JSON lines;
a file that is already there is never replaced."""

from __future__ import annotations

import os
from pathlib import Path
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from ..widgets.fields import Field


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
            yield Field(str(self.suggested), id="export-path")
            yield Static("", id="export-error")

    @on(Input.Submitted, "#export-path")
    def _write(self, event: Input.Submitted) -> None:
        path = Path(event.value.strip()).expanduser()
        if not event.value.strip():
            return
        error = self.query_one("#export-error", Static)
        if os.path.lexists(path):  # a link too, even one that leads nowhere
            error.update(f"{path} is there: give another name")
        elif not os.path.lexists(path.parent):
            error.update(f"{path.parent} does not exist: give a folder that does")
        elif not path.parent.is_dir():
            error.update(f"{path.parent} is not a folder")
        else:
            self.dismiss(path)

    def action_cancel(self) -> None:
        self.dismiss(None)
