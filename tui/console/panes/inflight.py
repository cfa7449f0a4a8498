"""In flight: each file in progress (its protocol step, bytes done, rate) and the
operation's progress bar with an ETA.

The operation shown is run here (``run``: a worker that posts how it ended up
to the app: ``OperationFinished``, ``OperationStopped`` or ``OperationFailed``)
or followed in the process that holds the lock (``follow``: a worker on the
attach socket that posts ``Attached`` and every event up to the app, as if the
operation ran here, until it ends). The app hands the pane the operation's
events as they arrive (``event``)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.widgets import DataTable, ProgressBar, Static

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.cancel import Cancelled, CancelToken
from coldkeep.core.base.errors import explain
from coldkeep.core.base.layout import Layout
from coldkeep.core.base.stream import Event, FileDone, FileStep, Phase, Progress
from coldkeep.core.ops.attach import AttachClient, NotAttachable

from ...operations.spec import Run
from ...text.fmt import human
from ..kit.messages import (
    Attached,
    CoreEvent,
    Logged,
    OperationFailed,
    OperationFinished,
    OperationStopped,
)
from ..widgets.tables import Cell, keyed_table, sync_table
from .base import Pane

# Steps after which an object is done with no FileDone of its own: a ship's
# local drop and its manifest snapshot (their rows would stay until the end).
LAST_STEPS = {"local_dropped", "manifest_shipped"}


@dataclass
class _File:
    step: str
    done: int
    total: int
    started: float


class InFlightPane(Pane):
    TITLE: ClassVar[str] = "In flight"

    def __init__(self) -> None:
        super().__init__()
        self.files: dict[str, _File] = {}
        self.phase = ""
        self.phase_total = 0
        self.phase_done = 0
        self.phase_started = 0.0
        # One table row per slot, held by one file at a time: a file finishing
        # empties its slot instead of removing a row (adding and removing rows
        # re-lays the whole screen out, once per file in a fast pass).
        self.slots: list[str | None] = []

    def compose(self) -> ComposeResult:
        yield Static("idle", id="inflight-phase", classes="pane-summary")
        yield ProgressBar(id="inflight-bar", show_eta=True)
        yield keyed_table(
            "inflight-files",
            [("File", "file"), ("Step", "step"), ("Done", "done"), ("Rate", "rate")],
        )

    def on_mount(self) -> None:
        super().on_mount()
        # Always shown (hiding it would re-lay the whole screen out), empty when idle.
        self.query_one("#inflight-bar", ProgressBar).update(total=1, progress=0)
        # Steps arrive by the hundred a second in a fast pass; the table is redrawn
        # from the latest state at each flush, not once per event.
        self.dirty = False

    def flush(self) -> None:
        if self.dirty:
            self.dirty = False
            self._show_files()
            self.query_one("#inflight-bar", ProgressBar).update(progress=self.phase_done)

    def idle(self, text: str = "idle", *, finished: bool = False) -> None:
        """Nothing in flight; the bar full after an operation that finished, empty
        otherwise (a bar back at 0 % read as "nothing was done")."""
        self.files.clear()
        self.slots.clear()
        self.phase = ""
        # A flush still pending from the operation's last events would redraw
        # the bar from its old count: it is settled here instead.
        self.phase_total, self.phase_done, self.dirty = 1, int(finished), False
        self.query_one("#inflight-bar", ProgressBar).update(total=1, progress=int(finished))
        self.query_one("#inflight-phase", Static).update(text)
        self._show_files()

    @work(exclusive=True, group="operation", exit_on_error=False)
    async def run(self, name: str, run: Run, archiver: Archiver, token: CancelToken) -> None:
        """The operation ``name`` (the label the operator sees), run here."""
        try:
            self.post_message(OperationFinished(name, await run(archiver, token)))
        except Cancelled as stopped:  # an operation that ends by raising it (ship)
            self.post_message(OperationStopped(name, str(stopped) or token.reason))
        except Exception as err:
            known = explain(err)
            if known is None:
                # A bug: the operator is told it ended, and how; the worker
                # keeps the error with its traceback (Textual's log shows it).
                self.post_message(
                    OperationFailed(
                        name,
                        f"stopped on an unexpected error: {type(err).__name__}: {err} "
                        "(a bug: please report it)",
                    )
                )
                raise
            self.post_message(OperationFailed(name, known[1]))

    @work(exclusive=True, group="attach", exit_on_error=False)
    async def follow(self, archive_root: Path) -> None:
        """The lock holder's operation, through its attach socket."""
        try:
            client = await AttachClient.connect(Layout(archive_root).socket)
        except (NotAttachable, OSError) as err:
            self.post_message(Logged("info", f"cannot attach: {err}"))
            return
        self.post_message(Attached(client))
        try:
            async for event in client.events():
                self.post_message(CoreEvent(event))
        except (OSError, ValueError) as err:
            self.post_message(Logged("warning", f"the attached stream ended: {err}"))
        finally:
            await client.close()
            self.post_message(Attached(None))

    def event(self, event: Event) -> None:
        """An event of the operation running (here, or watched)."""
        match event:
            case Phase():
                self.phase_began(event)
            case FileStep():
                self.step(event)
            case FileDone():
                self.done(event)
            case Progress():
                self.caught_up(event)

    def phase_began(self, event: Phase) -> None:
        # What the last phase left in flight is over (recovery reports an adopted
        # orphan's steps but no FileDone for it).
        self.files.clear()
        self.dirty = True
        self.phase = event.phase
        self.phase_total = event.bytes or event.items
        self.phase_done = 0
        self.phase_started = time.monotonic()
        bar = self.query_one("#inflight-bar", ProgressBar)
        bar.update(total=self.phase_total or 1, progress=0)
        size = f", {human(event.bytes)}" if event.bytes else ""
        self.query_one("#inflight-phase", Static).update(
            f"{event.phase}: {event.items} to do{size}" if event.items else f"{event.phase}…"
        )

    def step(self, event: FileStep) -> None:
        if event.step in LAST_STEPS:
            self.files.pop(event.relpath, None)
            self.dirty = True
            return
        f = self.files.get(event.relpath)
        if f is None:
            f = self.files[event.relpath] = _File(
                event.step, 0, event.bytes_total, time.monotonic()
            )
        if event.step != "reading":
            f.step = event.step
        f.done = max(f.done, event.bytes_done)
        f.total = max(f.total, event.bytes_total)
        self.dirty = True

    @property
    def by_bytes(self) -> bool:
        return bool(self.phase_total) and self.phase in ("files", "restore", "verify")

    def caught_up(self, event: Progress) -> None:
        """Attached mid-phase: the bar starts where the work stands."""
        if event.phase == self.phase:
            self.phase_done = event.bytes_done if self.by_bytes else event.items_done
            self.dirty = True

    def done(self, event: FileDone) -> None:
        self.files.pop(event.relpath, None)
        self.dirty = True
        if not self.phase:
            # Attached between a Phase and its catch-up: no total to count against
            # (counting anyway showed 100 % and an ETA of 0 from the first file).
            return
        self.phase_done += event.bytes if self.by_bytes else 1

    def _show_files(self) -> None:
        now = time.monotonic()
        self.slots = [rel if rel in self.files else None for rel in self.slots]
        for new in sorted(self.files.keys() - set(self.slots)):
            if None in self.slots:
                self.slots[self.slots.index(None)] = new
            else:
                self.slots.append(new)
        rows: dict[str, list[Cell]] = {}
        for n, slot in enumerate(self.slots):
            f = self.files.get(slot) if slot is not None else None
            if slot is None or f is None:
                rows[str(n)] = ["", "", "", ""]
                continue
            rel = slot
            rate = f.done / (now - f.started) if now > f.started and f.done else 0
            total = f"/{human(f.total)}" if f.total else ""
            speed = f"{human(rate)}/s" if rate else ""
            rows[str(n)] = [rel, f.step, f"{human(f.done)}{total}", speed]
        sync_table(self.query_one("#inflight-files", DataTable), rows)
