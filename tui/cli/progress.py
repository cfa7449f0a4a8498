"""How the CLI shows an operation while it runs: on a terminal, Rich progress bars
on stderr; otherwise one plain line per thing worth a line (files that did not
simply archive, batches every so often, orphans, failed checkpoints, notices). stdout is
left to the result (or the ``--json`` document).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from coldkeep.core.base.stream import (
    BatchMoved,
    CheckpointRan,
    Event,
    EventStream,
    FileDone,
    Finished,
    Notice,
    OrphanSeen,
    Phase,
    Started,
)

from ..text.fmt import human


def describe(event: Event) -> str | None:
    """One line for the events worth one, else None."""
    match event:
        case Started(operation=op, detail=detail):
            return f"{op}: started {detail}".rstrip()
        case Phase(phase=phase, items=items, bytes=size):
            extra = f", {human(size)}" if size else ""
            return f"{phase}: {items} to do{extra}" if items else f"{phase}:"
        case FileDone(op=op, relpath=rel, result=result, detail=detail):
            if (op, result) in _ROUTINE:
                return None
            return f"  {op} {result:<13} {rel}" + (f"  ({detail})" if detail else "")
        case BatchMoved(number=n, moved=moved, already=already, months=months, locked=locked):
            if not locked and n % 25:
                return None
            state = "LOCKED, retried later" if locked else f"{moved} moved, {already} already"
            return f"  events batch {n}: {state} ({', '.join(months)})"
        case OrphanSeen(gz=gz, relpath=rel, outcome=outcome, detail=detail):
            return f"  recovery {outcome:<9} {gz}" + (f"  ({detail})" if detail else "")
        case CheckpointRan(error=error) if error:
            # One that worked is routine (a pass runs dozens; the Checkpoints pane
            # and the pass summary count them): only a failure is worth a line.
            return f"  checkpoint failed: {error}"
        case Notice(level=level, message=message):
            return f"{level.upper()}: {message}"
        case Finished(operation=op, status=status):
            return f"{op}: {status}"
    return None


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
        if self.tty and not self.quiet:
            self._progress = Progress(
                TextColumn("{task.description:<10}"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                TimeRemainingColumn(),
                console=Console(file=self.out),
                transient=True,
            )
            self._progress.start()
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
            return self._progress.console.print
        return lambda text: print(text, file=self.out, flush=True)

    def _show(self, event: Event) -> None:
        if self.quiet:
            return
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


_PHASE_OF = {"archive": "files"}
# A file's outcome that is what the operation is for: no line of its own.
_ROUTINE = {
    ("archive", "archived"),
    ("verify", "ok"),
    ("rebuild", "entered"),
    ("ship", "shipped"),
    ("ship", "exists"),
}
