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
