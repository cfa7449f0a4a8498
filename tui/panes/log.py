"""Log: every event, levelled; type to search."""

from __future__ import annotations

import time
from collections import deque
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.widgets import Input, RichLog

from .base import Pane

STYLE = {"info": "", "warning": "yellow", "error": "bold red"}
KEEP = 5000


class LogPane(Pane):
    TITLE: ClassVar[str] = "Log"

    def __init__(self) -> None:
        super().__init__()
        self.lines: deque[tuple[str, str]] = deque(maxlen=KEEP)
        self.search = ""

    def compose(self) -> ComposeResult:
        yield Input(placeholder="search the log", id="log-search")
        yield RichLog(id="log-view", wrap=True, markup=False, max_lines=KEEP)

    def on_mount(self) -> None:
        super().on_mount()
        self.pending: list[tuple[str, str]] = []
        self.set_interval(0.1, self._flush)  # a burst of events is one redraw

    def write(self, level: str, text: str, at_ms: int) -> None:
        line = f"{time.strftime('%H:%M:%S', time.localtime(at_ms / 1000))} {text}"
        self.lines.append((level, line))
        if self.search.lower() in line.lower():
            self.pending.append((level, line))

    def _flush(self) -> None:
        if self.pending:
            log = self.query_one(RichLog)
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
