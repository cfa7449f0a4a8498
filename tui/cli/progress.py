"""How the CLI shows an operation while it runs: on a terminal, Rich progress bars
on stderr, and on any stderr one plain line per event worth a line
(``tui.text.events.describe``). stdout is left to the result (or the ``--json``
document), which the command prints once the Reporter has closed: the bars are
transient, so closing erases them and leaves the cursor at the start of a line.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from coldkeep.core.base.stream import Event, EventStream, FileDone, Phase

from ..text.events import describe

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID


class Reporter:
    """Shows a stream's events on ``out`` while an operation runs."""

    def __init__(self, stream: EventStream, out: TextIO | None = None, quiet: bool = False) -> None:
        self.out = out or sys.stderr
        self.sub = stream.subscribe()
        self.quiet = quiet
        self.tty = self.out.isatty()
        self._task: asyncio.Task[None] | None = None
        self._progress: Progress | None = None
        self._bars: dict[str, tuple[TaskID, bool]] = {}  # phase -> (bar, counts bytes)

    async def __aenter__(self) -> Reporter:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.sleep(0)  # let callbacks posted from threads land
        self._drain()
        if self._task is not None:
            self._task.cancel()
        if self._progress is not None:
            self._progress.stop()
        self.sub.close()

    async def _run(self) -> None:
        async for event in self.sub:
            self._show(event)

    def _drain(self) -> None:
        for event in self.sub.pending():
            self._show(event)

    def _line(self) -> Callable[[str], None]:
        if self._progress is not None:
            console = self._progress.console
            # A name's "[bold]" is its own: never read as markup.
            return lambda text: console.print(text, markup=False)
        return lambda text: print(text, file=self.out, flush=True)

    def _show(self, event: Event) -> None:
        if self.quiet:
            return
        if self._progress is None and self.tty and isinstance(event, Phase) and event.items:
            self._progress = _bars(self.out)
        if self._progress is not None:
            self._advance(self._progress, event)
        text = describe(event)
        if text is not None:
            self._line()(text)

    def _advance(self, progress: Progress, event: Event) -> None:
        match event:
            case Phase(phase=phase, items=items, bytes=size) if items:
                self._bars[phase] = (progress.add_task(phase, total=size or items), bool(size))
            case FileDone(op=op, bytes=size):
                bar = self._bars.get(_PHASE_OF.get(op, op))
                if bar is not None:
                    task, by_bytes = bar
                    progress.advance(task, size if by_bytes else 1)


def _bars(out: TextIO) -> Progress:
    """Rich's progress bars on ``out``, started: made (and Rich imported) when
    an operation first has a phase to count, so ``status`` or ``find`` at a
    terminal never loads Rich (docs/performance.md, "The CLI's start")."""
    from rich.console import Console  # noqa: PLC0415
    from rich.progress import (  # noqa: PLC0415
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    progress = Progress(
        TextColumn("{task.description:<10}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=Console(file=out),
        transient=True,
    )
    progress.start()
    return progress


_PHASE_OF = {"archive": "files"}  # the bar a file's FileDone advances
