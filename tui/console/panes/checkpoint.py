"""Checkpoint: the live WAL's size, the last checkpoints (busy, log, checkpointed,
ms) and a sparkline of the WAL over the event phase.

The pane reads the recorded checkpoints itself (``load``: a worker that posts
``CheckpointsLoaded`` to the pane); the app tells it the WAL's size and hands it
the running operation's events (``event``)."""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.message import Message
from textual.widgets import DataTable, Sparkline, Static

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.stream import BatchMoved, CheckpointRan, Event
from coldkeep.core.store.checkpointlog import recent_checkpoints
from coldkeep.core.store.manifest import Manifest

from ...text.fmt import human
from ..widgets.tables import Cell, keyed_table, sync_table
from .base import Pane

HISTORY = 120
SHOWN = 20  # checkpoints in the table


@dataclass
class CheckpointsLoaded(Message):
    results: list[CheckpointRan]


class CheckpointPane(Pane):
    TITLE: ClassVar[str] = "Checkpoint"

    def __init__(self) -> None:
        super().__init__()
        self.results: deque[CheckpointRan] = deque(maxlen=50)
        self.wal_history: deque[float] = deque(maxlen=HISTORY)
        self.wal_text = "WAL: -"

    def compose(self) -> ComposeResult:
        yield Static("WAL: -", id="checkpoint-wal", classes="pane-summary")
        yield Sparkline([], id="checkpoint-spark")
        yield keyed_table(
            "checkpoint-table",
            [("At", "at"), ("Busy", "busy"), ("Log", "log"), ("Done", "done"), ("ms", "ms")],
        )

    def on_mount(self) -> None:
        super().on_mount()
        # A fast event phase reports the WAL a hundred times a second; the pane
        # shows the latest at each flush. Its text never changes the pane's size,
        # so no update re-lays the screen out (a layout per batch was the
        # console's worst stall during a pass).
        self.dirty = False

    def wal_polled(self, size: int) -> None:
        """The WAL's size as the app polled it (negative: there is no state_db)."""
        if size >= 0:
            self.wal(size)
        else:
            self.wal(0, applicable=False)

    def wal(self, size: int, *, during_phase: bool = False, applicable: bool = True) -> None:
        """The WAL's size now; during an event phase it also joins the sparkline."""
        self.wal_text = f"WAL {human(size)}" if applicable else "WAL: not applicable (no state_db)"
        if applicable and during_phase:
            self.wal_history.append(size)
            self.dirty = True
        else:
            self._show(force=True)

    def flush(self) -> None:
        self._show()

    def _show(self, force: bool = False) -> None:
        if not (self.dirty or force):
            return
        self.dirty = False
        self.query_one("#checkpoint-wal", Static).update(self.wal_text, layout=False)
        self.query_one("#checkpoint-spark", Sparkline).data = list(self.wal_history)
        self._show_rows()

    def load(self, archiver: Archiver) -> None:
        self._read(archiver.layout.manifest)

    @work(exclusive=True, group="checkpoints", exit_on_error=False)
    async def _read(self, manifest: Path) -> None:
        """The last checkpoints recorded in ``manifest`` (none before there is one)."""
        opened = await Manifest.open_existing(manifest)
        if opened is None:
            return
        async with opened:
            self.post_message(CheckpointsLoaded(await recent_checkpoints(opened, SHOWN)))

    def on_checkpoints_loaded(self, message: CheckpointsLoaded) -> None:
        self.results.clear()
        self.results.extend(message.results)
        self._show_rows()

    def event(self, event: Event, at_ms: int) -> None:
        """An event of the operation running: a checkpoint it ran, a batch's WAL."""
        match event:
            case CheckpointRan():
                # Stamped when the console saw it, as a read of the log would be.
                self.add(dataclasses.replace(event, at_ms=at_ms))
            case BatchMoved():
                self.wal(event.wal_bytes, during_phase=True)

    def add(self, result: CheckpointRan) -> None:
        self.results.append(result)
        self.wal(result.wal_after, during_phase=True)

    def _show_rows(self) -> None:
        # Rows keyed by position, newest first: a new result rewrites cells and
        # adds a row only while there are fewer than SHOWN (adding and removing
        # rows re-lays the whole screen out, once per checkpoint in a pass).
        rows: dict[str, list[Cell]] = {}
        for n, r in enumerate(reversed(list(self.results)[-SHOWN:])):
            busy = "ERR" if r.error else str(r.busy)
            at = time.strftime("%H:%M:%S", time.localtime(r.at_ms / 1000))
            rows[str(n)] = [at, busy, r.log, r.checkpointed, f"{r.ms:.0f}"]
        sync_table(self.query_one("#checkpoint-table", DataTable), rows)
