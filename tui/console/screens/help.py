"""Help: every key and action, from the same registry the bindings come from: the
main console's, the fleet view's, or the screen's on top (``KeyedScreen``).

A screen over the main one declares its keys once, as a registry (``KEYS``), and
its bindings are made from it (``actions.bindings``): what its help lists is
what its keys do there, never the main screen's (``v`` is the pager in the
restore browser, Verify only on the main screen)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from ...operations.spec import ConsoleAction
from ..kit.actions import ACTIONS

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
        table.add_row("tab", "Focus", "Move between panes, tables and fields")
        table.add_row("ctrl+p", "Palette", "Search every action by name")
        return table

    def compose(self) -> ComposeResult:
        # The box scrolls (arrow keys) when the screen is too short for it.
        with VerticalScroll(id="help-box"):
            yield Static(self.title_text, id="help-title")
            yield Static(self.keys(), id="help-keys")
            yield Static(self.foot, id="help-foot")


class KeyedScreen(Screen[None]):
    """A screen over the main one whose keys are its own registry: a subclass
    sets ``KEYS`` and ``BINDINGS = bindings(KEYS)``, and ``HELP_TITLE`` and
    ``HELP_FOOT`` (what else moves there: tables, fields, tabs)."""

    KEYS: ClassVar[tuple[ConsoleAction, ...]] = ()
    HELP_TITLE: ClassVar[str] = ""
    HELP_FOOT: ClassVar[str] = "esc closes this."

    def unavailable(self) -> dict[str, str]:
        """Why a key of ``KEYS`` does nothing here now, by action name."""
        return {}

    def help_screen(self, *app_keys: ConsoleAction) -> HelpScreen:
        """This screen's keys, then those of ``app_keys`` (the app's that still
        act over it: help, quit) whose keys it does not take for itself."""
        taken = {k for a in self.KEYS for k in a.keys.split(",")}
        still = [a for a in app_keys if not taken & set(a.keys.split(","))]
        return HelpScreen(
            self.unavailable(),
            actions=(*self.KEYS, *still),
            title=self.HELP_TITLE,
            foot=self.HELP_FOOT,
        )
