"""What every pane shares: a bordered box with a title and a tab label."""

from __future__ import annotations

from typing import ClassVar

from textual.containers import Vertical


class Pane(Vertical):
    """A titled pane. In a narrow terminal only the pane whose tab is chosen shows."""

    TITLE: ClassVar[str] = ""
    DEFAULT_CLASSES = "pane"

    def on_mount(self) -> None:
        self.border_title = self.TITLE

    def flush(self) -> None:
        """Show what arrived since the last frame. The app calls every pane's
        flush in one tick (five a second), so a burst of events from every pane
        is one redraw, not one per pane per event."""
