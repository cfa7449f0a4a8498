"""Help: every key and action, from the same registry the bindings come from (the
main console's, or the fleet view's)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ...operations.spec import ConsoleAction
from ..actions import ACTIONS

PANES_HELP = (
    "Panes: 1-7 show a pane and focus its table (in a narrow terminal the panes "
    "are tabs); arrow keys move within a table. esc closes this."
)


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [("escape,q,question_mark,f1", "dismiss", "Close")]

    def __init__(
        self,
        unavailable: dict[str, str],
        *,
        actions: Sequence[ConsoleAction] = ACTIONS,
        title: str = "coldkeep console: keys",
        foot: str = PANES_HELP,
    ) -> None:
        super().__init__()
        self.unavailable = unavailable  # action name -> why it cannot run now
        self.actions = actions
        self.title_text = title
        self.foot = foot

    def keys(self) -> Table:
        """Every key, its action and what it does, wrapped to the screen (a table
        that cut its last column lost the reason an action is unavailable)."""
        table = Table(box=None, expand=True, padding=(0, 1), header_style="bold")
        table.add_column("Key", no_wrap=True)
        table.add_column("Action", no_wrap=True)
        table.add_column("What it does", ratio=1, overflow="fold")
        for a in self.actions:
            what = Text(a.help)
            if why := self.unavailable.get(a.name):
                what.append(f" (unavailable: {why})", style="bold")
            table.add_row(a.key_label, a.label, what)
        table.add_row("tab", "Focus", "Move between panes and tables")
        table.add_row("ctrl+p", "Palette", "Search every action by name")
        return table

    def compose(self) -> ComposeResult:
        # The box scrolls (arrow keys) when the screen is too short for it.
        with VerticalScroll(id="help-box"):
            yield Static(self.title_text, id="help-title")
            yield Static(self.keys(), id="help-keys")
            yield Static(self.foot, id="help-foot")
