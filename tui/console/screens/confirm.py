"""A confirmation that shows exactly what will happen before anything does
(Harlequin's confirm modal): a summary, the rows it will touch, and a warning
line for what cannot be undone. ``y`` or the button confirms; ``n``, escape or
the other button cancels. Nothing is confirmed by default."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from ...operations.spec import Question
from ..widgets.tables import Cell, MeasuredTable


class ConfirmScreen(ModalScreen[bool]):
    BINDINGS: ClassVar[list[BindingType]] = [("y", "confirm", "Yes"), ("n,escape", "cancel", "No")]

    def __init__(
        self,
        title: str,
        summary: str,
        *,
        columns: Sequence[str] = (),
        rows: Sequence[Sequence[Cell]] = (),
        warning: str = "",
        confirm: str = "Run",
    ) -> None:
        super().__init__()
        self.title_text = title
        self.summary = summary
        self.columns = columns
        self.rows = rows
        self.warning = warning
        self.confirm_label = confirm

    @classmethod
    def asking(cls, question: Question) -> ConfirmScreen:
        """The dialog of an operation's question (tui/operations)."""
        return cls(
            question.title,
            question.summary,
            columns=question.columns,
            rows=question.rows,
            warning=question.warning,
            confirm=question.confirm,
        )

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box"):
            yield Static(self.title_text, id="confirm-title")
            yield Static(self.summary, id="confirm-summary")
            if self.columns:
                table = MeasuredTable(id="confirm-table", cursor_type="row")
                table.add_columns(*self.columns)
                table.add_rows(self.rows)
                yield table
            # Docked at the bottom: on a short terminal (80x24) the table gives up
            # rows, never the warning or the buttons.
            with Vertical(id="confirm-foot"):
                if self.warning:
                    yield Static(self.warning, id="confirm-warning")
                with Horizontal(id="confirm-buttons"):
                    # "\[": a label is markup, and a bare [y] would be read as a style.
                    yield Button(f"{self.confirm_label} \\[y]", id="confirm-yes", variant="warning")
                    yield Button("Cancel \\[n]", id="confirm-no", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#confirm-no", Button).focus()

    @on(Button.Pressed, "#confirm-yes")
    def action_confirm(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#confirm-no")
    def action_cancel(self) -> None:
        self.dismiss(False)
