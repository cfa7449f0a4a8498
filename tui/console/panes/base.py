"""What every pane shares: a bordered box with a title and a tab label, what it
reads for itself (``load``) and its frame (``flush``); and the tabs that choose
the one pane shown in a narrow terminal."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from textual.containers import Vertical
from textual.widgets import Tab, Tabs

from coldkeep.core.archiver import Archiver


class Pane(Vertical):
    """A titled pane. In a narrow terminal only the pane whose tab is chosen shows."""

    TITLE: ClassVar[str] = ""
    DEFAULT_CLASSES = "pane"
    # What its digit key focuses: its first table (not a text field, which would
    # take the next digit as a character).
    FOCUS: ClassVar[str] = "DataTable"

    def on_mount(self) -> None:
        self.border_title = self.TITLE

    def load(self, archiver: Archiver) -> None:
        """Read again what the pane shows, in a worker that posts it to the pane
        (and up to the app). The app calls every pane's load when it refreshes;
        a pane that is only told what to show reads nothing."""

    def flush(self) -> None:
        """Show what arrived since the last frame. The app calls every pane's
        flush in one tick (five a second), so a burst of events from every pane
        is one redraw, not one per pane per event."""


class PaneTabs(Tabs):
    """A tab per pane, in their order; the chosen tab's pane is the one shown
    (``active``) in a narrow terminal."""

    def __init__(self, panes: Sequence[type[Pane]], *, id: str) -> None:
        super().__init__(*(Tab(p.TITLE, id=f"tab-{i}") for i, p in enumerate(panes)), id=id)

    def on_tabs_tab_activated(self, event: Tabs.TabActivated) -> None:
        self._show(int((event.tab.id or "tab-0").split("-")[1]))

    def _show(self, index: int) -> None:
        for i, pane in enumerate(self.screen.query(".pane")):
            pane.set_class(i == index, "active")

    def choose(self, index: int) -> Pane:
        """Show the pane ``index`` now (its tab chosen) and return it."""
        self.active = f"tab-{index}"
        self._show(index)
        return self.screen.query(Pane)[index]
