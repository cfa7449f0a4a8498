"""The coldkeep console: the archive's state, live, and every action on it.

Threading model (Harlequin's): everything slow runs in workers (async workers over
the async core API, thread workers for plain blocking reads); workers only post
messages (messages.py); the handlers here own the state and tell the panes what
to show. The core's event stream is read by one long-lived worker. Every action
comes from one registry (actions.py) that also makes the bindings, the buttons,
the help screen and the command palette.

Mutating actions are refused (with the reason) in ``--read-only``, while another
operation runs here, and while another process holds the archive lock (the
header names it).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, ClassVar
from zoneinfo import ZoneInfo

from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Container, Horizontal
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Footer, Static, Tab, Tabs
from textual.worker import Worker
from watchfiles import awatch

from coldkeep.core.archiver import Archiver, NoRemote, PlanReport, Status
from coldkeep.core.base.cancel import Cancelled, CancelToken
from coldkeep.core.base.config import Settings
from coldkeep.core.base.errors import RemoteError, explain
from coldkeep.core.base.lock import read_holder
from coldkeep.core.base.stream import (
    BatchMoved,
    CheckpointRan,
    Event,
    EventStream,
    FileDone,
    FileStep,
    Finished,
    Notice,
    OrphanSeen,
    Phase,
    Progress,
    Started,
)
from coldkeep.core.base.times import now_ms
from coldkeep.core.events.checkpoint import wal_bytes
from coldkeep.core.events.restore import EventsRestoreReport
from coldkeep.core.files.recovery import RecoveryReport
from coldkeep.core.files.restore import RestoreReport
from coldkeep.core.files.scan import ScanError
from coldkeep.core.ops.attach import AttachClient, NotAttachable
from coldkeep.core.ops.plan import Plan
from coldkeep.core.remote.ship import ShipPlan
from coldkeep.core.sched.clock import SystemClock
from coldkeep.core.sched.daemon import Scheduler
from coldkeep.core.sched.jobs import job_infos
from coldkeep.core.store.checkpointlog import recent_checkpoints
from coldkeep.core.store.jobruns import JobRun, job_history
from coldkeep.core.store.legalholds import HoldError
from coldkeep.core.store.manifest import Manifest, ManifestError

from ..cli.progress import describe
from ..text.fmt import age, human, parse_day, remote_where
from ..text.results import OperationResult, headline
from .actions import ACTIONS, BY_NAME, ConsoleAction, bindings
from .messages import (
    Attached,
    BacklogLoaded,
    CheckpointsLoaded,
    CoreEvent,
    EventsRestoreRequested,
    FindingsLoaded,
    HolderChanged,
    JobsLoaded,
    LiveTreeChanged,
    LoadFailed,
    OperationFailed,
    OperationFinished,
    OperationStopped,
    RestoreRequested,
    ShipPlanLoaded,
    StatusLoaded,
)
from .panes import (
    PANES,
    BacklogPane,
    CheckpointPane,
    InFlightPane,
    JobsPane,
    LogPane,
    OrphansPane,
    Pane,
    RemotePane,
)
from .panes.orphans import Finding
from .panes.remote import NO_REMOTE
from .priority import background_executor
from .screens import ConfirmScreen, HelpScreen, HoldsScreen, RestoreScreen
from .screens.holds import HoldReleaseRequested, HoldRequested
from .tables import Cell

NO_RETENTION = "no [retention] is configured: everything is kept for ever"
HOLDER_POLL_S = 2.0
# Worker groups that outlive a settle: they last as long as the console, or as
# another process's operation that it watches.
LONG_LIVED = {"stream", "watch", "attach"}
AGEING_S = 60.0
# What the panes gathered is shown this often, all in one redraw. Each redraw
# holds the loop 9-27 ms under load: at 0.1 s the loop's lag p99 during a pass was
# under 25 ms in 6 of 13 runs, at 0.2 s in 8 of 9 (docs/performance.md).
FRAME_S = 0.2


class ColdkeepApp(App[None]):
    CSS_PATH = Path(__file__).with_name("app.tcss")
    TITLE = "coldkeep"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]  # noqa: RUF012 - Textual's own
    BINDINGS: ClassVar[list[Binding | tuple[str, str] | tuple[str, str, str]]] = [
        *bindings(),
        *(Binding(str(i + 1), f"show_pane({i})", show=False) for i in range(len(PANES))),
    ]

    def __init__(
        self,
        settings: Settings,
        *,
        read_only: bool = False,
        clock: Callable[[], int] = now_ms,
        watch_live: bool = True,
    ) -> None:
        super().__init__()
        # One file per core, not two: a third and fourth worker make a pass ~15 %
        # faster and the console's frames slower (docs/performance.md).
        self.archiver = Archiver(
            settings, stream=EventStream(), origin="console", clock=clock, workers_per_core=1
        )
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
        self.browser: RestoreScreen | None = None  # the restore browser, while it is open
        self.holds_screen: HoldsScreen | None = None  # the holds, while they are shown

    # layout ------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static("coldkeep", id="status-line")
        with Horizontal(id="actions"):
            for a in ACTIONS:
                if a.button and self.offered(a):
                    yield Button(a.label, id=f"do-{a.name}", classes="action")
        yield Tabs(*(Tab(p.TITLE, id=f"tab-{i}") for i, p in enumerate(PANES)), id="pane-tabs")
        # With no remote tier the wide grid gives the Remote pane's place to
        # Checkpoint; its tab (narrow) says there is none.
        no_remote = "-no-remote" if self.archiver.settings.remote is None else ""
        with Container(id="panes", classes=no_remote):
            for pane in PANES:
                yield pane()
        # Compact: every key fits in one line at 120 columns.
        yield Footer(compact=True)

    def on_mount(self) -> None:
        asyncio.get_running_loop().set_default_executor(background_executor())
        self.query(".pane").first().add_class("active")
        self.listen()
        self.refresh_all()
        self.set_interval(HOLDER_POLL_S, self.poll_holder)
        self.set_interval(AGEING_S, self.load_backlog)  # files age into eligibility
        self.set_interval(FRAME_S, self.flush_panes)
        self.poll_holder()
        if self.watch_live:
            self.watch_tree()
        config = self.archiver.settings.config_path
        self.log_line(
            "info", f"console on {config.parent.name}/{config.name}" if config else "console"
        )
        if self.read_only:
            self.log_line("info", "read-only: every action that changes the archive is off")
        for warning in self.archiver.settings.warnings:
            self.log_line("warning", warning)

    @on(Tabs.TabActivated, "#pane-tabs")
    def _tab(self, event: Tabs.TabActivated) -> None:
        index = int((event.tab.id or "tab-0").split("-")[1])
        for i, pane in enumerate(self.query(".pane")):
            pane.set_class(i == index, "active")

    def action_show_pane(self, index: int) -> None:
        """Digits 1–6 show a pane (in a narrow terminal, where panes are tabs)."""
        self.query_one("#pane-tabs", Tabs).active = f"tab-{index}"

    # the registry: availability, palette, help --------------------------------

    def unavailable(self, name: str) -> str | None:
        """Why an action cannot run now (None: it can)."""
        a = BY_NAME[name]
        if a.remote and self.archiver.settings.remote is None:
            return NO_REMOTE
        if a.retention and not self.archiver.settings.retention.configured:
            return NO_RETENTION
        return self.why_unchangeable() if a.mutating else None

    def offered(self, a: ConsoleAction) -> bool:
        """Whether ``a`` has a button, a footer key and a palette entry: not the
        mutating ones in read-only, not the remote tier's with none configured,
        nor expiry without a retention (help still lists them, saying why)."""
        settings = self.archiver.settings
        return not (
            (a.mutating and self.read_only)
            or (a.remote and settings.remote is None)
            or (a.retention and not settings.retention.configured)
        )

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
        a = BY_NAME.get(action)
        if a is None:
            return True
        if self.screen is not self.screen_stack[0] and a.name not in ("help", "quit"):
            return False  # the main screen's actions stay with the main screen
        # Hidden from the footer in read-only (and the remote tier's with none
        # configured); refused if reached another way.
        return self.offered(a)

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for a in ACTIONS:
            if self.offered(a):
                yield SystemCommand(
                    a.label, f"{a.help} \\[{a.key_label}]", getattr(self, f"action_{a.name}")
                )

    @on(Button.Pressed, ".action")
    async def _button(self, event: Button.Pressed) -> None:
        await self.run_action((event.button.id or "").removeprefix("do-"))

    def _refuse(self, name: str) -> bool:
        why = self.unavailable(name)
        if why:
            self.notify(f"{BY_NAME[name].label}: {why}", severity="warning", markup=False)
            self.log_line("warning", f"{BY_NAME[name].label} refused: {why}")
        return why is not None

    # workers -----------------------------------------------------------------

    @work(exclusive=True, group="stream", exit_on_error=False)
    async def listen(self) -> None:
        with self.archiver.stream.subscribe() as sub:
            async for event in sub:
                self.post_message(CoreEvent(event))

    def refresh_all(self) -> None:
        self.load_status()
        self.load_backlog()
        self.load_findings()
        self.load_checkpoints()
        self.load_jobs()
        self.load_ship_plan()

    @work(exclusive=True, group="status", exit_on_error=False)
    async def load_status(self) -> None:
        self.post_message(StatusLoaded(await self.archiver.status()))

    @work(exclusive=True, group="ship-plan", exit_on_error=False)
    async def load_ship_plan(self) -> None:
        if self.archiver.settings.remote is None:
            return
        try:
            self.post_message(ShipPlanLoaded(await self.archiver.ship_plan()))
        except (ManifestError, RemoteError, OSError) as err:
            self.post_message(LoadFailed("what a ship would do", str(err)))

    @work(exclusive=True, group="backlog", exit_on_error=False)
    async def load_backlog(self) -> None:
        try:
            self.post_message(BacklogLoaded(await self.archiver.backlog()))
        except (ManifestError, ScanError, OSError) as err:
            self.post_message(LoadFailed("the backlog", str(err)))

    @work(exclusive=True, group="findings", exit_on_error=False)
    async def load_findings(self) -> None:
        try:
            found = await self.archiver.recovery_scan(
                lambda so_far: self.post_message(FindingsLoaded(so_far))
            )
            self.post_message(FindingsLoaded(found))
        except (ManifestError, OSError) as err:
            self.post_message(LoadFailed("the findings", str(err)))

    @work(exclusive=True, group="checkpoints", exit_on_error=False)
    async def load_checkpoints(self) -> None:
        path = self.archiver.layout.manifest
        if not await asyncio.to_thread(path.exists):
            return
        async with await Manifest.open(path, readonly=True) as manifest:
            self.post_message(CheckpointsLoaded(await recent_checkpoints(manifest, 20)))

    @work(exclusive=True, group="jobs", exit_on_error=False)
    async def load_jobs(self) -> None:
        settings = self.archiver.settings
        path = self.archiver.layout.manifest
        tz = ZoneInfo(settings.jobs.timezone) if settings.jobs.timezone else None
        if not await asyncio.to_thread(path.exists):
            empty = await Manifest.open(Path(":memory:"))
            async with empty:
                infos = await job_infos(empty, settings.jobs.jobs, tz, self.clock() / 1000)
            self.post_message(JobsLoaded(infos, []))
            return
        async with await Manifest.open(path, readonly=True) as manifest:
            infos = await job_infos(manifest, settings.jobs.jobs, tz, self.clock() / 1000)
            self.post_message(JobsLoaded(infos, await job_history(manifest, 30)))

    @work(exclusive=True, group="attach", exit_on_error=False)
    async def attach(self) -> None:
        """Watch the lock holder's operation: its events drive the panes as if it
        ran here, until it ends."""
        try:
            client = await AttachClient.connect(self.archiver.layout.socket)
        except (NotAttachable, OSError) as err:
            self.log_line("info", f"cannot attach: {err}")
            return
        self.attached = client
        self.post_message(Attached(client.hello))
        try:
            async for event in client.events():
                self.post_message(CoreEvent(event))
        except (OSError, ValueError) as err:
            self.log_line("warning", f"the attached stream ended: {err}")
        finally:
            self.attached = None
            await client.close()
            self.post_message(Attached(None))

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
        """Workers still doing something (not the long-lived listeners, and not a
        confirmation that is waiting for the operator's answer)."""
        asking = isinstance(self.screen, ModalScreen)
        return [
            w
            for w in self.workers
            if w.group not in LONG_LIVED
            and not (asking and w.group == "confirm")
            and not w.is_finished
        ]

    def operate(self, name: str, call: Callable[[CancelToken], Awaitable[OperationResult]]) -> None:
        """Run one mutating operation in a worker; its result comes back as a message."""
        self.running = name
        token = self.cancel_token = CancelToken()
        self.query_one(InFlightPane).idle(f"{name}: starting…")
        self._status_line()

        async def run() -> None:
            try:
                self.post_message(OperationFinished(name, await call(token)))
            except Cancelled as stopped:  # an operation that ends by raising it (ship)
                self.post_message(OperationStopped(name, str(stopped) or token.reason))
            except Exception as err:
                known = explain(err)
                if known is None:
                    raise  # a bug: the worker's error shows it whole
                self.post_message(OperationFailed(name, known[1]))

        self.run_worker(run(), group="operation", exclusive=True, exit_on_error=False)

    def flush_panes(self) -> None:
        with self.batch_update():
            for pane in self.query(Pane):
                pane.flush()

    # handlers ------------------------------------------------------------------

    def on_core_event(self, message: CoreEvent) -> None:
        event = message.event
        inflight = self.query_one(InFlightPane)
        # A ship's events always reach its pane: the last ones can land after its
        # result, and they only add to the tally of the ship that sent them.
        self._ship_event(event)
        # The stream's reader and the operation's worker post independently: the
        # last events of an operation can arrive after its result. Once nothing
        # runs (here or attached) they are only logged, or a late Phase would
        # empty the bar the result just filled.
        live = self.running is not None or self.attached is not None
        match event:
            case _ if not live:
                pass
            case Phase():
                inflight.phase_began(event)
            case FileStep():
                inflight.step(event)
            case FileDone():
                inflight.done(event)
            case Progress():
                inflight.caught_up(event)
            case CheckpointRan():
                self.query_one(CheckpointPane).add(
                    CheckpointRan(
                        self.clock(),
                        event.busy,
                        event.log,
                        event.checkpointed,
                        event.ms,
                        event.wal_before,
                        event.wal_after,
                        event.mode,
                        event.error,
                    )
                )
            case BatchMoved():
                self.query_one(CheckpointPane).wal(event.wal_bytes, during_phase=True)
        level = event.level if isinstance(event, Notice) else "info"
        if isinstance(event, FileDone) and event.result in (
            "verify_failed",
            "error",
            "mismatch",
            "corrupt",
            "missing",
        ):
            level = "error"
        if isinstance(event, OrphanSeen) and event.outcome in ("error",):
            level = "error"
        if isinstance(event, Finished) and event.status == "failed":
            level = "warning"
        text = describe(event)
        if text is not None:
            self.log_line(level, text.strip())

    def _ship_event(self, event: Event) -> None:
        remote = self.query_one(RemotePane)
        match event:
            case Started(operation="ship"):
                remote.ship_started()
            case Phase(phase="ship", items=items):
                remote.ship_phase(items)
            case FileDone(op="ship"):
                remote.object_done(event)
            case Finished(operation="ship", summary=summary):
                problems = summary.get("problems")
                remote.ship_ended(problems=problems if isinstance(problems, list) else None)

    def on_status_loaded(self, message: StatusLoaded) -> None:
        self.status = message.status
        self._findings()
        self._status_line()
        self._show_remote()
        self._maybe_ready()

    def _show_remote(self) -> None:
        remote = self.archiver.settings.remote
        where = remote_where(remote, self._base()) if remote is not None else None
        state = self.status.remote if self.status is not None else None
        keep = remote.keep_local_days if remote is not None else -1.0
        self.query_one(RemotePane).show(where, keep, state)

    def on_ship_plan_loaded(self, message: ShipPlanLoaded) -> None:
        self.query_one(RemotePane).planned(message.plan)

    def on_backlog_loaded(self, message: BacklogLoaded) -> None:
        self.backlog = message.plan
        self.query_one(BacklogPane).show(message.plan, self.clock())
        self._maybe_ready()

    def _maybe_ready(self) -> None:
        if self.ready_at is None and self.status is not None and self.backlog is not None:
            self.ready_at = time.perf_counter()
            self.call_after_refresh(self.log_line, "info", "ready")

    def on_findings_loaded(self, message: FindingsLoaded) -> None:
        self.recovery = message.recovery
        self._findings()

    def on_checkpoints_loaded(self, message: CheckpointsLoaded) -> None:
        self.query_one(CheckpointPane).show(message.results)

    def on_holder_changed(self, message: HolderChanged) -> None:
        panes = self.query(CheckpointPane)
        if not panes:
            return  # the app is closing: a poll posted before it can land after the panes go
        holder = message.holder
        mine = holder is not None and holder.pid == os.getpid()
        if holder is None or not message.alive:
            self.other_holder = None
            self.holder_text = "lock free"
        elif mine:
            self.other_holder = None
            self.holder_text = "lock: this console"
        else:
            self.other_holder = holder.describe()
            self.holder_text = f"LOCKED by pid {holder.pid} ({holder.command})"
            if self.attached is None and not self._attaching():
                self.attach()
        pane = panes.first()
        if message.wal_bytes >= 0:
            pane.wal(message.wal_bytes)
        else:
            pane.wal(0, applicable=False)
        self._status_line()

    def _attaching(self) -> bool:
        return any(w.group == "attach" and not w.is_finished for w in self.workers)

    def on_jobs_loaded(self, message: JobsLoaded) -> None:
        self.query_one(JobsPane).show(message.jobs, message.runs)

    def on_attached(self, message: Attached) -> None:
        if message.hello is not None:
            op = message.hello.get("operation", "?")
            self.log_line("info", f"attached to pid {message.hello.get('pid')}: its {op}, live")
            self.query_one(InFlightPane).idle(f"watching pid {message.hello.get('pid')}: {op}")
        else:
            self.log_line("info", "the attached operation ended")
            self.refresh_all()
            self.poll_holder()
        self._status_line()

    def on_live_tree_changed(self) -> None:
        self.load_backlog()

    def on_operation_finished(self, message: OperationFinished) -> None:
        summary = headline(message.result)
        self.query_one(InFlightPane).idle(f"{message.operation}: {summary}", finished=True)
        self.last_result = f"{message.operation}: {summary}"
        self.notify(summary, title=message.operation)
        if self.browser is not None:
            match message.result:
                case RestoreReport(files=files):
                    self.browser.show_results(
                        [(f.result, f.relpath, f.detail or f.target) for f in files]
                    )
                case EventsRestoreReport():
                    self.browser.show_events_result(summary)
        self._settled()

    def on_operation_failed(self, message: OperationFailed) -> None:
        self.query_one(RemotePane).ship_ended(message.error)
        self.query_one(InFlightPane).idle(f"{message.operation}: {message.error}")
        self.notify(message.error, title=message.operation, severity="error", timeout=10)
        self.log_line("error", f"{message.operation}: {message.error}")
        if self.browser is not None:
            self.browser.show_events_result(f"{message.operation}: {message.error}")
        self._settled()

    def on_operation_stopped(self, message: OperationStopped) -> None:
        # Not a problem: the last ship's outcome ("cancelled") says it.
        reason = message.reason
        text = reason if reason.startswith("stopped") else f"stopped: {reason}"
        self.query_one(InFlightPane).idle(f"{message.operation}: {text}")
        self.last_result = f"{message.operation}: {text}"
        self.notify(text, title=message.operation, severity="warning", markup=False)
        self.log_line("warning", f"{message.operation}: {text}")
        self._settled()

    def _settled(self) -> None:
        """Nothing runs here any more: everything is read again."""
        self.query_one(RemotePane).ship_ended()
        self.running = None
        self.cancel_token = None
        self.refresh_all()
        self.poll_holder()

    def on_load_failed(self, message: LoadFailed) -> None:
        self.notify(message.error, title=f"reading {message.what}", severity="error", timeout=10)
        self.log_line("error", f"reading {message.what}: {message.error}")

    # what the header and the orphan pane show ---------------------------------

    def _base(self) -> Path:
        """The folder paths are shown relative to: the config's."""
        config = self.archiver.settings.config_path
        return config.parent if config else Path.cwd()

    def _status_line(self) -> None:
        s = self.archiver.settings
        base = self._base()

        def short(p: Path) -> str:
            return str(p.relative_to(base)) + "/" if p.is_relative_to(base) else str(p)

        # What needs the operator first: at 80 columns the end of the line is cut.
        parts = []
        if self.status and self.status.verify_failures:
            parts.append(f"VERIFY FAILED {self.status.verify_failures}")
        if self.status and self.status.remote and self.status.remote.totals.verify_failed:
            parts.append(f"REMOTE VERIFY FAILED {self.status.remote.totals.verify_failed}")
        parts.append(self.holder_text)
        if self.attached is not None:
            parts.append("attached: x stops it")
        if self.read_only:
            parts.append("READ-ONLY")
        if self.running:
            parts.append(f"running: {self.running}")
        elif self.status and self.status.last_passes:
            p = self.status.last_passes[0]
            ago = age((self.clock() - (p.finished_at or p.started_at)) / 1000)
            parts.append(f"last pass #{p.id} {p.status} {ago} ago")
        parts += [f"mode {s.mode}", f"{short(s.live_root)} → {short(s.archive_root)}"]
        self.query_one("#status-line", Static).update(" · ".join(parts))
        if self.browser is not None:
            self.browser.blocked = self.why_unchangeable()

    def _findings(self) -> None:
        findings: list[Finding] = []
        rec = self.recovery
        layout = self.archiver.layout
        if rec is not None:
            findings += [Finding(layout.rel(p), "partial", None, None) for p in rec.partials]
            findings += [
                Finding(str(p), "restore-partial", None, None) for p in rec.restore_partials
            ]
            findings += [Finding(layout.rel(o.gz), "orphan", None, None) for o in rec.orphans]
            findings += [Finding(e.location, "MISSING", e.bytes, None) for e in rec.missing]
        if self.status is not None:
            now = self.clock() / 1000
            for e in self.status.attention:
                kind = "verify-failed" if e.verify_error else e.status
                findings.append(Finding(e.location, kind, e.gz_bytes, now - e.mtime_ns / 1e9))
        unique = {f.path: f for f in findings}
        walking = rec.walked if rec is not None and rec.walking else None
        self.query_one(OrphansPane).show(list(unique.values()), walking)

    def log_line(self, level: str, text: str) -> None:
        self.query_one(LogPane).write(level, text, self.clock())

    # actions -------------------------------------------------------------------

    def action_run_pass(self) -> None:
        if self._refuse("run_pass"):
            return
        mode = self.archiver.settings.mode
        if mode == "off":
            self.notify('mode = "off" in the config: passes are disabled', severity="error")
            return
        if mode == "plan":
            self.operate("pass", self.archiver.run_pass)
            return
        self.confirm_pass()

    @work(exclusive=True, group="confirm", exit_on_error=False)
    async def confirm_pass(
        self, action: str = "run_pass", go: Callable[[], None] | None = None
    ) -> None:
        """Show the plan and ask; on yes, ``go`` (by default: run the pass)."""
        report = await self.archiver.plan()
        self._loaded(report)
        plan, rec = report.plan, report.recovery
        months: dict[str, int] = defaultdict(int)
        for m in plan.events.months if plan.events else ():
            months[m.month] += m.rows
        rows = [(u.unit, str(u.files), human(u.bytes)) for u in plan.units]
        rows += [(f"rows {month}", f"{n:,}", "") for month, n in sorted(months.items())]
        fixes = []
        if rec.partials:
            fixes.append(f"remove {len(rec.partials)} leftover partials")
        if rec.orphans:
            fixes.append(f"re-verify {len(rec.orphans)} orphan gzips (a corrupt one is deleted)")
        if rec.sources_unlinked:
            fixes.append(f"remove {len(rec.sources_unlinked)} live files already archived")
        summary = (
            f"{plan.files} files ({human(plan.bytes)}) in {len(plan.units)} units will be "
            f"archived; {sum(months.values()):,} event rows in {len(months)} months will move."
        )
        if fixes:
            summary += "\nRecovery will " + "; ".join(fixes) + "."
        ok = await self.push_screen_wait(
            ConfirmScreen(
                "Run a pass (mode on)",
                summary,
                columns=("Unit / month", "Files / rows", "Size"),
                rows=rows,
                warning=(
                    f"Each live file is REMOVED once its gzip is verified and recorded "
                    f"({plan.files} files); event rows leave state.db once archived."
                ),
                confirm="Run the pass",
            )
        )
        if ok:
            if self._refuse(action):
                return
            if go is None:
                self.operate("pass", self.archiver.run_pass)
            else:
                go()

    def _loaded(self, report: PlanReport) -> None:
        self.post_message(BacklogLoaded(report.plan))
        self.post_message(FindingsLoaded(report.recovery))

    def action_plan(self) -> None:
        self.load_backlog()
        self.load_findings()
        self.notify("recounting the backlog")

    def action_restore(self) -> None:
        if self._refuse("restore"):
            return
        settings = self.archiver.settings
        self.browser = RestoreScreen(
            settings,
            base=settings.config_path.parent if settings.config_path else Path.cwd(),
            read_only=self.read_only,
            blocked=self.why_unchangeable(),
        )

        def closed(_: None) -> None:
            self.browser = None

        self.push_screen(self.browser, closed)

    def _refuse_restore(self) -> bool:
        """Browsing is not mutating; restoring from the browser is."""
        why = self.why_unchangeable()
        if why:
            self.notify(f"Restore: {why}", severity="warning")
            self.log_line("warning", f"Restore refused: {why}")
        return why is not None

    @on(RestoreRequested)
    def _start_restore(self, message: RestoreRequested) -> None:
        if self._refuse_restore():
            return
        selection, to = message.selection, message.to
        self.operate("restore", lambda token: self.archiver.restore(selection, to, token))

    @on(EventsRestoreRequested)
    def _start_restore_events(self, message: EventsRestoreRequested) -> None:
        if self._refuse_restore():
            return
        by_month: dict[str, set[str]] = defaultdict(set)
        for m in message.months:
            by_month[m.month].add(m.kind)

        async def run(token: CancelToken) -> EventsRestoreReport:
            # Each month with its own kinds: one restore_events call per month.
            total = EventsRestoreReport()
            for month, kinds in sorted(by_month.items()):
                report = await self.archiver.restore_events(kinds, [month], token)
                total.restored += report.restored
                total.already_live += report.already_live
                total.conflicts += report.conflicts
                total.months += report.months
            return total

        self.operate("restore-events", run)

    def action_adopt(self) -> None:
        if self._refuse("adopt"):
            return
        self.confirm_adopt()

    @work(exclusive=True, group="confirm", exit_on_error=False)
    async def confirm_adopt(self) -> None:
        pane = self.query_one(OrphansPane)
        chosen = pane.selected()
        orphans = [f for f in pane.findings.values() if f.kind == "orphan"]
        targets = [chosen] if chosen is not None and chosen.kind == "orphan" else orphans
        if not targets:
            self.notify(
                "no orphan gzip to adopt (select one in Orphans & stale)", severity="warning"
            )
            return
        ok = await self.push_screen_wait(
            ConfirmScreen(
                f"Adopt {len(targets)} orphan gzips",
                "Each is re-read and compared with its live source: the same bytes → "
                "entry written and the source removed; other bytes → kept as a stale version.",
                columns=("Gzip",),
                rows=[(t.path,) for t in targets],
                warning="A gzip that does not decompress is DELETED (its live source stays).",
                confirm="Adopt",
            )
        )
        if ok and not self._refuse("adopt"):
            paths = [t.path for t in targets]
            self.operate("adopt", lambda token: self.archiver.adopt(paths, token))

    def action_sweep(self) -> None:
        if self._refuse("sweep"):
            return
        self.confirm_sweep()

    @work(exclusive=True, group="confirm", exit_on_error=False)
    async def confirm_sweep(self) -> None:
        report = await self.archiver.plan()
        self._loaded(report)
        rec, layout = report.recovery, self.archiver.layout
        paths = [layout.rel(p) for p in rec.partials] + [str(p) for p in rec.restore_partials]
        if not paths:
            self.notify("nothing to sweep: no leftover partials")
            return
        ok = await self.push_screen_wait(
            ConfirmScreen(
                f"Sweep {len(paths)} leftovers",
                "These temporary files were left by an interrupted write or restore:",
                columns=("Path",),
                rows=[(p,) for p in paths],
                warning="They will be DELETED. None of them holds data found nowhere else.",
                confirm="Delete them",
            )
        )
        if ok and not self._refuse("sweep"):
            self.operate("sweep", lambda token: self.archiver.sweep())

    def action_ship(self) -> None:
        if self._refuse("ship"):
            return
        self.confirm_ship()

    @work(exclusive=True, group="confirm", exit_on_error=False)
    async def confirm_ship(
        self, action: str = "ship", go: Callable[[], None] | None = None
    ) -> None:
        """What a ship would send and drop, then the question; on yes, ``go`` (by
        default: the ship)."""
        try:
            plan = await self.archiver.ship_plan()
        except (NoRemote, ManifestError, RemoteError, OSError) as err:
            self.notify(str(err), title="ship", severity="error", markup=False)
            return
        self.post_message(ShipPlanLoaded(plan))
        if not plan.pending_files and not plan.drops and not plan.months:
            if go is not None:  # the job: nothing to ask about (no copy is dropped)
                go()
                return
            self.notify(
                "nothing to ship: no archived file or event month is waiting for the remote "
                "tier, and no local copy is due to be dropped",
                title="ship",
            )
            return
        title, summary, rows, warning = self._ship_question(plan)
        ok = await self.push_screen_wait(
            ConfirmScreen(
                title,
                summary,
                columns=("Step", "Files", "Size"),
                rows=rows,
                warning=warning,
                confirm="Ship",
            )
        )
        if ok and not self._refuse(action):
            if go is None:
                self.operate("ship", self.archiver.ship)
            else:
                go()

    def _ship_question(self, plan: ShipPlan) -> tuple[str, str, list[tuple[str, str, str]], str]:
        """The confirmation's title, summary, rows and warning for ``plan``."""
        remote = self.archiver.settings.remote
        assert remote is not None  # a plan exists only with a remote
        where = remote_where(remote, self._base())
        keep = plan.keep_local_days
        send = (
            f"Ship {plan.pending_files} archive files ({human(plan.pending_bytes)}, "
            f"{plan.pending_entries} entries) to {where}"
        )
        rows = [(f"ship to {where}", f"{plan.pending_files}", human(plan.pending_bytes))]
        if plan.months:
            rows.append(("event month snapshots", f"{plan.months}", ""))
        if keep < 0:
            then = "local copies are kept for ever (keep_local_days < 0)"
            warning = ""
        elif keep == 0:
            earlier = (
                f" and the {plan.drops} ({human(plan.drop_bytes)}) shipped before"
                if plan.drops
                else ""
            )
            then = (
                f"then drop the local copy of each file it ships once it reads back whole"
                f"{earlier} (keep_local_days = 0)"
            )
            warning = (
                "Every local copy shipped is DELETED from the archive: the remote "
                "tier then holds the only copy (restores read it back from there)."
            )
            most = plan.pending_files + plan.drops
            rows.append(
                ("drop local copies", f"up to {most}", human(plan.pending_bytes + plan.drop_bytes))
            )
        elif not plan.drops:
            then = f"no local copy is dropped: none was shipped more than {keep:g} days ago"
            warning = ""
            rows.append(("drop local copies", "0", ""))
        else:
            then = (
                f"then drop {plan.drops} local copies ({human(plan.drop_bytes)}) "
                f"shipped more than {keep:g} days ago"
            )
            warning = (
                f"{plan.drops} local copies are DELETED from the archive: the remote tier "
                "then holds the only copy (restores read it back from there)."
            )
            rows.append(("drop local copies", f"{plan.drops}", human(plan.drop_bytes)))
        if plan.held:
            then += f"; {plan.held} more local copies are kept by legal holds"
        summary = (
            f"{send}; {then}.\nClosed event months changed since their last snapshot, and "
            "a snapshot of the manifest, go too. Each object is read back (size and "
            "SHA-256) before it counts as shipped."
        )
        return "Ship to the remote tier", summary, rows, warning

    # retention and legal holds --------------------------------------------------

    def action_expire(self) -> None:
        if self._refuse("expire"):
            return
        self.confirm_expire()

    @work(exclusive=True, group="confirm", exit_on_error=False)
    async def confirm_expire(
        self, action: str = "expire", go: Callable[[], None] | None = None
    ) -> None:
        """Exactly what an expiry would delete, and what holds keep, then the
        question; on yes, ``go`` (by default: the expiry)."""
        try:
            plan = await self.archiver.expire_plan()
        except (ManifestError, OSError) as err:
            self.notify(str(err), title="expire", severity="error", markup=False)
            return
        if not plan.items:
            if go is not None:  # the job: nothing to ask about (nothing is deleted)
                go()
                return
            kept = f"; {len(plan.held)} kept by legal holds" if plan.held else ""
            self.notify(f"nothing is past its retention{kept}", title="expire")
            return
        rows: list[tuple[Cell, ...]] = [
            (i.path, i.kind, str(i.files) if i.kind != "month" else "", human(i.bytes), i.copies)
            for i in plan.items
        ]
        rows += [(i.path, "HELD", "", human(i.bytes), i.held or "") for i in plan.held]
        held = f" {len(plan.held)} more are past it but held (listed last)." if plan.held else ""
        ok = await self.push_screen_wait(
            ConfirmScreen(
                f"Expire {len(plan.items)} archive files and event months",
                f"Past their retention (files_days {plan.files_days or '-'}, events_days "
                f"{plan.events_days or '-'}): {plan.files} files, {human(plan.bytes)}.{held} "
                "Their entries stay as tombstones (sha256, when) and each deletion is in "
                "the history.",
                columns=("Path", "Kind", "Files", "Size", "Copies"),
                rows=rows,
                warning="These are DELETED from the archive"
                + (" AND the remote tier" if any(i.remote for i in plan.items) else "")
                + ": no copy of them is left anywhere.",
                confirm="Delete them",
            )
        )
        if ok and not self._refuse(action):
            if go is None:
                shown = frozenset(i.path for i in plan.items)
                self.operate("expire", lambda token: self.archiver.expire(token, only=shown))
            else:
                go()

    def action_holds(self) -> None:
        self.open_holds()

    @work(exclusive=True, group="holds", exit_on_error=False)
    async def open_holds(self) -> None:
        try:
            holds = await self.archiver.holds()
        except (ManifestError, OSError) as err:
            self.notify(str(err), title="holds", severity="error", markup=False)
            return
        blocked = "the console is read-only (--read-only)" if self.read_only else None
        self.holds_screen = HoldsScreen(holds, blocked=blocked)

        def closed(_: None) -> None:
            self.holds_screen = None

        self.push_screen(self.holds_screen, closed)

    @on(HoldRequested)
    @work(exclusive=True, group="holds", exit_on_error=False)
    async def _place_hold(self, message: HoldRequested) -> None:
        try:
            until = parse_day(message.until) if message.until else None
            hold = await self.archiver.place_hold(
                message.scope, message.target, message.reason, until
            )
        except (HoldError, ManifestError, OSError, ValueError) as err:
            self.notify(str(err), title="holds", severity="error", markup=False)
            return
        self.log_line("info", f"placed {hold.describe()}")
        if self.holds_screen is not None:
            self.holds_screen.placed()
            self.holds_screen.show(await self.archiver.holds(), f"placed {hold.describe()}")
        self.refresh_all()

    @on(HoldReleaseRequested)
    @work(exclusive=True, group="holds", exit_on_error=False)
    async def _release_hold(self, message: HoldReleaseRequested) -> None:
        try:
            hold = await self.archiver.release_hold(message.hold_id)
        except (HoldError, ManifestError, OSError) as err:
            self.notify(str(err), title="holds", severity="error", markup=False)
            return
        self.log_line("warning", f"released {hold.describe()}")
        if self.holds_screen is not None:
            self.holds_screen.show(await self.archiver.holds(), f"released {hold.describe()}")
        self.refresh_all()

    def action_verify(self) -> None:
        if self._refuse("verify"):
            return
        self.operate("verify", lambda token: self.archiver.verify(cancel=token))

    def action_checkpoint(self) -> None:
        if self._refuse("checkpoint"):
            return
        self.operate("checkpoint", lambda token: self.archiver.checkpoint())

    async def action_stop(self) -> None:
        if self.attached is not None and self.running is None:
            await self.attached.request("stop")
            pid = self.attached.hello.get("pid")
            self.log_line("warning", f"asked pid {pid} to stop at its next safe point")
            self.notify(f"asked pid {pid} to stop at its next safe point")
            return
        if self.cancel_token is None or self.running is None:
            self.notify("nothing is running")
            return
        self.cancel_token.cancel("stopped from the console")
        self.log_line("warning", f"stopping {self.running} at its next safe point")

    def action_run_job(self) -> None:
        if self._refuse("run_job"):
            return
        name = self.query_one(JobsPane).selected()
        if name is None:
            self.notify("select a job in the Jobs pane first", severity="warning")
            return

        def go() -> None:
            self.operate(f"job {name}", lambda token: self._run_job(name, token))

        if name == "pass" and self.archiver.settings.mode == "on":
            # The job removes what a pass removes: the same plan and question first.
            self.confirm_pass("run_job", go)
            return
        if name == "ship" and self.archiver.settings.remote is not None:
            # The job drops what a ship drops: the same plan and question first.
            self.confirm_ship("run_job", go)
            return
        if name == "expire":
            # The job deletes what an expiry deletes: the same plan and question first.
            self.confirm_expire("run_job", go)
            return
        go()

    async def _run_job(self, name: str, token: CancelToken) -> JobRun:
        scheduler = Scheduler(self.archiver, clock=SystemClock())
        runner = await scheduler.open()
        try:
            return await runner.run_now(name, token)
        finally:
            await scheduler.close()

    def action_refresh(self) -> None:
        self.refresh_all()
        self.poll_holder()

    def action_help(self) -> None:
        self.push_screen(
            HelpScreen({a.name: w for a in ACTIONS if (w := self.unavailable(a.name))})
        )

    async def action_quit(self) -> None:
        if self.running is None:
            self.exit()
            return
        self.confirm_quit()

    @work(exclusive=True, group="confirm", exit_on_error=False)
    async def confirm_quit(self) -> None:
        running = self.running
        ok = await self.push_screen_wait(
            ConfirmScreen(
                f"Quit while {running} runs?",
                f"{running} will stop at its next safe point (between files or batches, or "
                "mid-file with its partial removed), then the console quits.",
                warning="Nothing is lost: what is left is what the next pass's recovery handles.",
                confirm="Stop and quit",
            )
        )
        if not ok:
            return
        if self.cancel_token is not None:
            self.cancel_token.cancel("the console is quitting")
        for worker in self.workers:
            if worker.group == "operation":
                await worker.wait()
        self.exit()
