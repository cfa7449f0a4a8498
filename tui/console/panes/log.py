"""Log: every event worth a line, levelled (``level``); type to search."""

from __future__ import annotations

import time
from collections import deque
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.geometry import Size
from textual.reactive import Reactive
from textual.widgets import Input, RichLog

from coldkeep.core.base.stream import Event, FileDone, Finished, Notice, OrphanSeen

from ..widgets.fields import Field
from .base import Pane

STYLE = {"info": "", "warning": "yellow", "error": "bold red"}
KEEP = 5000
# A file's outcome that needs a look: its line is an error.
FILE_ERRORS = {"verify_failed", "error", "mismatch", "corrupt", "missing"}


def level(event: Event) -> str:
    """The level of an event's line: a notice's own; an error for a file or an
    orphan that failed; a warning for an operation that failed."""
    match event:
        case Notice(level=notice):
            return notice
        case FileDone(result=result) if result in FILE_ERRORS:
            return "error"
        case OrphanSeen(outcome="error"):
            return "error"
        case Finished(status="failed"):
            return "warning"
    return "info"


class StableLog(RichLog):
    """A RichLog whose growth repaints it instead of re-laying the screen out.

    Textual lays the whole screen out whenever a widget's virtual size changes,
    and during a pass the log grows at every frame tick: each time a layout of
    8-16 ms here, measured with the machine idle. A log growing inside its own
    scroll region changes nothing outside it, so its scrollbars are updated in
    place, as Textual does itself when it sizes a widget without a layout
    (``Widget._size_updated``); a scrollbar appearing still re-lays out, once."""

    virtual_size: Reactive[Size] = Reactive(Size(0, 0), layout=False)

    def watch_virtual_size(self, size: Size) -> None:
        if self.is_mounted:
            self._scroll_update(size)


class LogPane(Pane):
    TITLE: ClassVar[str] = "Log"
    FOCUS: ClassVar[str] = "StableLog"

    def __init__(self) -> None:
        super().__init__()
        self.lines: deque[tuple[str, str]] = deque(maxlen=KEEP)
        self.search = ""

    def compose(self) -> ComposeResult:
        yield Field(placeholder="search the log", id="log-search")
        # min_width: RichLog renders 78 columns at least (a horizontal scrollbar and
        # cut lines in a pane a third of the screen wide); wrap at the pane instead.
        yield StableLog(id="log-view", wrap=True, markup=False, max_lines=KEEP, min_width=20)

    def on_mount(self) -> None:
        super().on_mount()
        # Lines not yet in the view; at most as many as the view keeps.
        self.pending: deque[tuple[str, str]] = deque(maxlen=KEEP)

    def write(self, level: str, text: str, at_ms: int) -> None:
        line = f"{time.strftime('%H:%M:%S', time.localtime(at_ms / 1000))} {text}"
        self.lines.append((level, line))
        if self.search.lower() in line.lower():
            self.pending.append((level, line))

    def flush(self) -> None:
        if not self.pending or not (views := self.query(StableLog)):
            return  # nothing new, or the app is closing (its panes being removed)
        log = views.first()
        # A hidden pane (a tab not shown in a narrow terminal) has no width, and
        # RichLog would wrap what it is given then at min_width, for good: the
        # lines wait until the pane is shown.
        if log.scrollable_content_region.width:
            for level, line in self.pending:
                log.write(Text(line, style=STYLE.get(level, "")))
            self.pending.clear()

    @on(Input.Changed, "#log-search")
    def _search(self, event: Input.Changed) -> None:
        self.search = event.value
        self.pending.clear()
        log = self.query_one(RichLog)
        log.clear()
        needle = self.search.lower()
        for level, line in self.lines:
            if needle in line.lower():
                log.write(Text(line, style=STYLE.get(level, "")))
