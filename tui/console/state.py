"""The console's state and what it permits: what runs here (or is watched in
another process), who holds the lock, the last status, backlog and findings;
which action is off now and why; the workers that read it all again; the status
line and the Log pane that show it.

``ConsoleState`` is the first of the app's three classes, each over the one
before: the console's own actions (own.py) are methods over this state, and the
app (app.py) adds the layout, the operations' one path and the handlers. Each
reads only what is below it, so no module of the three imports one above.

Invariant: workers only post messages; only the app's handlers and its
operations' path (app.py) change the state.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual import work
from textual.app import App
from textual.worker import Worker
from watchfiles import awatch

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.cancel import CancelToken
from coldkeep.core.base.config import Settings
from coldkeep.core.base.lock import read_holder
from coldkeep.core.base.stream import EventStream
from coldkeep.core.base.times import now_ms
from coldkeep.core.events.checkpoint import wal_bytes
from coldkeep.core.files.recovery import RecoveryReport
from coldkeep.core.ops.attach import AttachClient
from coldkeep.core.ops.plan import Plan
from coldkeep.core.ops.status import Status
from coldkeep.core.remote.sealing import Identities

from ..operations.retention import NO_RETENTION
from ..operations.spec import ConsoleAction
from .kit.actions import BY_NAME as ACTION
from .kit.messages import CoreEvent, HolderChanged, LiveTreeChanged, StatusLoaded
from .kit.pilot import busy
from .panes import BacklogPane, LogPane, Pane
from .panes.remote import NO_REMOTE
from .screens import RestoreScreen
from .widgets.header import StatusLine

# Worker groups that outlive a settle: they last as long as the console, or as
# another process's operation that it watches.
LONG_LIVED = {"stream", "watch", "attach"}

NO_EVENTS = "no state_db is configured: there are no event rows to read"


class ConsoleState(App[None]):
    """The console's state, the questions every action asks of it, and the
    workers that keep it current."""

    def __init__(
        self,
        settings: Settings,
        *,
        read_only: bool = False,
        clock: Callable[[], int] = now_ms,
        watch_live: bool = True,
        identities: Identities | None = None,
    ) -> None:
        super().__init__()
        # One file per core, not two: a third and fourth worker make a pass ~15 %
        # faster and the console's frames slower (docs/performance.md).
        self.archiver = Archiver(
            settings, stream=EventStream(), origin="console", clock=clock, workers_per_core=1
        )
        # `console --identity`: every read of a sealed remote copy opens it.
        self.archiver.sessions.identities = identities
        self.read_only = read_only
        self.clock = clock
        self.watch_live = watch_live
        self.running: str | None = None
        self.cancel_token: CancelToken | None = None
        self.status: Status | None = None
        self.backlog: Plan | None = None
        self.recovery: RecoveryReport | None = None
        self.holder_text = "lock free"
        self.other_holder: str | None = None  # another process holds the lock
        self.last_result = ""
        self.ready_at: float | None = None  # perf_counter when the first full paint had its data
        self.attached: AttachClient | None = None  # watching another process's operation

    # what may run now -----------------------------------------------------------

    def unavailable(self, name: str) -> str | None:
        """Why an action cannot run now (None: it can)."""
        a = ACTION[name]
        return self._off(a) or (self.why_unchangeable() if a.mutating else None)

    def offered(self, a: ConsoleAction) -> bool:
        """Whether ``a`` has a button, a footer key and a palette entry: not the
        mutating ones in read-only, nor those off in this console (help still
        lists them, saying why)."""
        return not ((a.mutating and self.read_only) or self._off(a))

    def _off(self, a: ConsoleAction) -> str | None:
        """Why ``a`` is off in this console at all: the remote tier's with none
        configured, expiry without a retention."""
        settings = self.archiver.settings
        if a.remote and settings.remote is None:
            return NO_REMOTE
        if a.retention and not settings.retention.configured:
            return NO_RETENTION
        if a.events and settings.state_db is None:
            return NO_EVENTS
        return None

    def why_unchangeable(self) -> str | None:
        """Why nothing that changes the archive can run now (None: it can)."""
        if self.read_only:
            return "the console is read-only (--read-only)"
        if self.running:
            return f"{self.running} is running; stop it first (x) or wait"
        if self.other_holder:
            return f"the archive is locked by {self.other_holder}"
        return None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        name = str(parameters[0]) if action in ("operation", "refused") and parameters else action
        a = ACTION.get(name)
        if a is None:
            return True
        if self.screen is not self.screen_stack[0] and a.name not in ("help", "quit"):
            return False  # the main screen's actions stay with the main screen
        if action == "refused":
            return not self.offered(a)  # its key, pressed while it is off
        # Hidden from the footer in read-only (and the remote tier's with none
        # configured); refused if reached another way.
        return self.offered(a)

    def action_refused(self, name: str) -> None:
        """The key of an action that is off here (read-only, no [remote], no
        [retention]): hidden from the footer, and pressed it says why."""
        self.refuse(name)

    def refuse(self, name: str, *, changes: bool = False) -> bool:
        """Whether ``name`` is refused now (said, and logged). ``changes``: it is
        about to change the archive, whatever the action is (a browser's restore)."""
        why = self.unavailable(name) or (self.why_unchangeable() if changes else None)
        if why:
            self.notify(f"{ACTION[name].label}: {why}", severity="warning", markup=False)
            self.log_line("warning", f"{ACTION[name].label} refused: {why}")
        return why is not None

    # reading it again (workers) -------------------------------------------------

    @work(exclusive=True, group="stream", exit_on_error=False)
    async def listen(self) -> None:
        with self.archiver.stream.subscribe() as sub:
            async for event in sub:
                self.post_message(CoreEvent(event))

    def refresh_all(self) -> None:
        """Everything read again: the status here, each pane's own data there."""
        self.load_status()
        for pane in self.query(Pane):
            pane.load(self.archiver)

    @work(exclusive=True, group="status", exit_on_error=False)
    async def load_status(self) -> None:
        self.post_message(StatusLoaded(await self.archiver.status()))

    def recount(self) -> None:
        """The backlog counted again (files age into eligibility; the tree changed)."""
        self.query_one(BacklogPane).load(self.archiver)

    @work(thread=True, exclusive=True, group="holder", exit_on_error=False)
    def poll_holder(self) -> None:
        holder = read_holder(self.archiver.layout.lock)
        db = self.archiver.settings.state_db
        self.post_message(
            HolderChanged(holder, holder.alive if holder else False, wal_bytes(db) if db else -1)
        )

    @work(exclusive=True, group="watch", exit_on_error=False)
    async def watch_tree(self) -> None:
        async for _changes in awatch(self.archiver.settings.live_root, recursive=True):
            self.post_message(LiveTreeChanged())

    def busy_workers(self) -> list[Worker[Any]]:
        return busy(self, LONG_LIVED)

    def flush_panes(self) -> None:
        with self.batch_update():
            for pane in self.query(Pane):
                pane.flush()

    # what it shows --------------------------------------------------------------

    def shown_from(self) -> Path:
        """The folder paths are shown relative to: the config's."""
        config = self.archiver.settings.config_path
        return config.parent if config else Path.cwd()

    def _status_line(self) -> None:
        self.query_one(StatusLine).show(
            self.archiver.settings,
            self.shown_from(),
            status=self.status,
            lock=self.holder_text,
            watching=self.attached is not None,
            read_only=self.read_only,
            running=self.running,
            now_ms=self.clock(),
        )
        if (browser := self.browser()) is not None:
            browser.blocked = self.why_unchangeable()

    def log_line(self, level: str, text: str) -> None:
        self.query_one(LogPane).write(level, text, self.clock())

    def browser(self) -> RestoreScreen | None:
        """The restore browser, while it is open."""
        return next((s for s in self.screen_stack if isinstance(s, RestoreScreen)), None)
