"""Help: every key and action, from the same registry the bindings come from."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from ..actions import ACTIONS
from ..tables import Cell


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [("escape,q,question_mark,f1", "dismiss", "Close")]

    def __init__(self, unavailable: dict[str, str]) -> None:
        super().__init__()
        self.unavailable = unavailable  # action name -> why it cannot run now

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box"):
            yield Static("coldkeep console: keys", id="help-title")
            table: DataTable[Cell] = DataTable(id="help-table", cursor_type="row")
            table.add_columns("Key", "Action", "What it does")
            for a in ACTIONS:
                why = self.unavailable.get(a.name)
                table.add_row(a.key_label, a.label, a.help + (f" ({why})" if why else ""))
            table.add_row("tab", "Focus", "Move between panes and tables")
            table.add_row("ctrl+p", "Palette", "Search every action by name")
            yield table
            yield Static(
                "Panes: arrow keys move within a table; in a narrow terminal the tabs "
                "above the panes choose which one shows. esc closes this.",
                id="help-foot",
            )
