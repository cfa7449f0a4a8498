"""The coldkeep console: the archive's state, live, and every action on it.

Threading model (Harlequin's): everything slow runs in workers (async workers over
the async core API, thread workers for plain blocking reads); workers only post
messages (kit/messages.py, or a pane's own to itself); the handlers own the state
and tell the panes what to show. The core's event stream is read by one
long-lived worker. Every action comes from one registry (kit/actions.py) that
also makes the bindings, the buttons, the help screen and the command palette.

The app is three classes, each over the one before: the state and what it
permits (state.py), the console's own actions (own.py: the screens over this
one, stop, quit), and here the layout, the operations' one path and the
handlers.

Every operation of the registry (tui/operations) runs through one path: its
action is refused with the reason, or its entry's question is asked (its plan
read first, in a worker), and a yes (``Confirmed``, which the restore browser
sends too) starts it (``operate``: In flight's worker runs it); its result,
failure or stop comes back as a message. A scheduled job run from here asks the
same question as its operation.

Mutating actions are refused (with the reason) in ``--read-only``, while another
operation runs here, and while another process holds the archive lock (the
status line names it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from textual import work
from textual.actions import ActionParseResult
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Container
from textual.dom import DOMNode
from textual.message import Message
from textual.screen import Screen

from coldkeep.core.base.cancel import CancelToken
from coldkeep.core.base.errors import explain
from coldkeep.core.ops.plan import PlanReport
from coldkeep.core.remote.shipplan import ShipPlan

from ..operations.jobs import run_job
from ..operations.registry import BY_ACTION, BY_NAME, headline
from ..operations.spec import Nothing, Operation, Question, Run, Site
from ..text.events import describe
from .kit.actions import ACTIONS, bindings, palette
from .kit.messages import (
    Attached,
    BacklogLoaded,
    Confirmed,
    CoreEvent,
    FindingsLoaded,
    HolderChanged,
    HoldsChanged,
    LoadFailed,
    Logged,
    OperationFailed,
    OperationFinished,
    OperationStopped,
    Report,
    StatusLoaded,
)
from .kit.priority import background_executor
from .own import OwnActions
from .panes import (
    PANES,
    BacklogPane,
    CheckpointPane,
    InFlightPane,
    JobsPane,
    OrphansPane,
    PaneTabs,
    RemotePane,
)
from .panes.log import level
from .panes.remote import ShipPlanLoaded
from .screens import ConfirmScreen
from .widgets.footer import FittedFooter
from .widgets.header import ActionBar, StatusLine, lock_words

HOLDER_POLL_S = 2.0
AGEING_S = 60.0
# What the panes gathered is shown this often, all in one redraw. Each redraw
# holds the loop 9-27 ms under load: at 0.1 s the loop's lag p99 during a pass was
# under 25 ms in 6 of 13 runs, at 0.2 s in 8 of 9 (docs/performance.md).
FRAME_S = 0.2


class ColdkeepApp(OwnActions):
    CSS_PATH = Path(__file__).with_name("app.tcss")
    TITLE = "coldkeep"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]  # noqa: RUF012 - Textual's own
    BINDINGS: ClassVar[list[Binding | tuple[str, str] | tuple[str, str, str]]] = [
        *bindings(),
        # Each key again, tried when its action is off (check_action): it says why.
        *(Binding(a.keys, f"refused({a.name!r})", show=False) for a in ACTIONS),
        *(Binding(str(i + 1), f"show_pane({i})", show=False) for i in range(len(PANES))),
    ]

    # layout ---------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield StatusLine("coldkeep", id="status-line")
        yield ActionBar([a for a in ACTIONS if a.button and self.offered(a)], id="actions")
        yield PaneTabs(PANES, id="pane-tabs")
        # With no remote tier the wide grid gives the Remote pane's place to
        # Checkpoint; its tab (narrow) says there is none.
        no_remote = "-no-remote" if self.archiver.settings.remote is None else ""
        with Container(id="panes", classes=no_remote):
            for pane in PANES:
                yield pane()
        # Compact, and only the keys that fit (Quit and Stop always; help has all).
        yield FittedFooter(compact=True, help_hint=True)

    def on_mount(self) -> None:
        asyncio.get_running_loop().set_default_executor(background_executor())
        self.query(".pane").first().add_class("active")
        self.listen()
        self.refresh_all()
        self.set_interval(HOLDER_POLL_S, self.poll_holder)
        self.set_interval(AGEING_S, self.recount)  # files age into eligibility
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
        identities = self.archiver.sessions.identities
        for warning in (
            *self.archiver.settings.warnings,
            *(identities.warnings if identities else ()),
        ):
            self.log_line("warning", warning)

    def action_show_pane(self, index: int) -> None:
        """Digits 1–7 show a pane (in a narrow terminal, where panes are tabs) and
        focus it (its first table: the Jobs pane's is what ``j`` runs from)."""
        pane = self.query_one(PaneTabs).choose(index)
        self.screen.set_focus(pane.query(pane.FOCUS).first())

    # the registry: keys and palette ---------------------------------------------

    async def run_action(
        self,
        action: str | ActionParseResult,
        default_namespace: DOMNode | None = None,
        namespaces: Mapping[str, DOMNode] | None = None,
    ) -> bool:
        """A registry operation's action (its key, its button, its name) has no
        method of its own: it runs as ``operation('<name>')``."""
        if isinstance(action, str) and action in BY_ACTION and default_namespace in (None, self):
            action = f"operation({action!r})"
        return await super().run_action(action, default_namespace, namespaces)

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        offered = (a for a in ACTIONS if self.offered(a))
        return palette(super().get_system_commands(screen), offered, self.run_action)

    # operations -----------------------------------------------------------------

    def action_operation(self, name: str) -> None:
        """The action ``name`` of a registry operation: refused with the reason;
        else, as its entry says, asked about first or started at once."""
        if self.refuse(name):
            return
        op = BY_ACTION[name]
        assert op.console is not None
        first = op.console.first(self.archiver.settings)
        if isinstance(first, Nothing):
            self._say(first)
        elif first == "ask":
            self.ask(op, name)
        else:
            self.operate(op.name, op.console.start(None))

    @work(exclusive=True, group="confirm", exit_on_error=False)
    async def ask(self, op: Operation, action: str, job: str | None = None) -> None:
        """``op``'s plan and question; a yes is ``Confirmed``. For ``job`` (the
        scheduler's job of that name, run now) a yes starts the job, and a plan
        with nothing to ask about starts it unasked."""
        assert op.console is not None and op.console.ask is not None
        site = Site(self.archiver, self.shown_from(), self.query_one(OrphansPane).chosen())
        try:
            plan, question = await op.console.ask(site)
        except Exception as err:
            known = explain(err)
            if known is None:
                raise  # a bug: the worker's error shows it whole
            self.notify(known[1], title=op.name, severity="error", markup=False)
            return
        self._plan_read(plan)
        if job is not None:
            confirmed = Confirmed(action, f"job {job}", run_job(job))
            if isinstance(question, Question):  # it says which job runs
                question = replace(question, title=f"Job {job}: {question.title}")
        else:
            confirmed = Confirmed(action, op.name, op.console.start(plan))
        if not isinstance(question, Nothing):
            if await self.push_screen_wait(ConfirmScreen.asking(question)):
                self.post_message(confirmed)
        elif job is not None:  # nothing to ask about: the job runs
            self.post_message(confirmed)
        else:
            self._say(question)

    def _plan_read(self, plan: object) -> None:
        """A plan read to ask about tells the panes what it found too."""
        match plan:
            case PlanReport():
                self.query_one(BacklogPane).post_message(BacklogLoaded(plan.plan))
                self.query_one(OrphansPane).post_message(FindingsLoaded(plan.recovery))
            case ShipPlan():
                self.query_one(RemotePane).post_message(ShipPlanLoaded(plan))

    def _say(self, nothing: Nothing) -> None:
        self.notify(nothing.text, title=nothing.title, severity=nothing.severity, markup=False)

    def on_confirmed(self, message: Confirmed) -> None:
        if not self.refuse(message.action, changes=True):
            self.operate(message.operation, message.run)

    def operate(self, name: str, run: Run) -> None:
        """Run one mutating operation (In flight's worker); how it ends comes back
        as a message."""
        self.running = name
        self.cancel_token = CancelToken()
        inflight = self.query_one(InFlightPane)
        inflight.idle(f"{name}: starting…")
        inflight.run(name, run, self.archiver, self.cancel_token)
        self._status_line()

    def action_run_job(self) -> None:
        """The job chosen in the Jobs pane (its table focused). From anywhere else
        nothing runs: the Jobs pane is shown and focused, to choose one."""
        if self.refuse("run_job"):
            return
        pane = self.query_one(JobsPane)
        name = pane.chosen()
        if name is None:
            if not pane.jobs():
                self._say(Nothing("no job is configured ([jobs])", "Run job", "warning"))
                return
            self.action_show_pane(PANES.index(JobsPane))
            self._say(Nothing("choose the job to run here (↑ ↓), then j", "Run job", "warning"))
            return
        op = BY_NAME.get(name)
        if op and op.console and op.console.first(self.archiver.settings) == "ask":
            # The job does what its operation does: the same plan and question first.
            self.ask(op, "run_job", name)
            return
        self.operate(f"job {name}", run_job(name))

    # handlers -------------------------------------------------------------------

    def on_core_event(self, message: CoreEvent) -> None:
        event = message.event
        # A ship's events always reach its pane: the last ones can land after its
        # result, and they only add to the tally of the ship that sent them.
        self.query_one(RemotePane).ship_event(event)
        # The stream's reader and the operation's worker post independently: the
        # last events of an operation can arrive after its result. Once nothing
        # runs (here or attached) they are only logged, or a late Phase would
        # empty the bar the result just filled.
        if self.running is not None or self.attached is not None:
            self.query_one(InFlightPane).event(event)
            self.query_one(CheckpointPane).event(event, self.clock())
        text = describe(event)
        if text is not None:
            self.log_line(level(event), text.strip())

    def on_status_loaded(self, message: StatusLoaded) -> None:
        self.status = message.status
        self.query_one(OrphansPane).attention(message.status)
        self._status_line()
        self.query_one(RemotePane).show(
            self.archiver.settings.remote, self.shown_from(), self.status.remote
        )
        self._maybe_ready()

    def on_backlog_loaded(self, message: BacklogLoaded) -> None:
        self.backlog = message.plan  # the Backlog pane showed it on its way up
        self._maybe_ready()

    def _maybe_ready(self) -> None:
        if self.ready_at is None and self.status is not None and self.backlog is not None:
            self.ready_at = time.perf_counter()
            self.call_after_refresh(self.log_line, "info", "ready")

    def on_findings_loaded(self, message: FindingsLoaded) -> None:
        self.recovery = message.recovery  # the Orphans pane showed it on its way up

    async def _on_message(self, message: Message) -> None:
        # A report posted before the console began closing can land after its
        # panes, or some of their parts, are gone: it has nothing left to show.
        # (Shutting down stops the app running first, then removes the panes.)
        if isinstance(message, Report) and (not self.is_running or not self.query(CheckpointPane)):
            return
        await super()._on_message(message)

    def on_holder_changed(self, message: HolderChanged) -> None:
        self.holder_text, self.other_holder = lock_words(message.holder, message.alive)
        if self.other_holder and self.attached is None and not self._attaching():
            self.query_one(InFlightPane).follow(self.archiver.settings.archive_root)
        self.query_one(CheckpointPane).wal_polled(message.wal_bytes)
        self._status_line()

    def _attaching(self) -> bool:
        return any(w.group == "attach" and not w.is_finished for w in self.workers)

    def on_attached(self, message: Attached) -> None:
        self.attached = message.client
        if message.client is not None:
            pid, op = message.client.hello.get("pid"), message.client.hello.get("operation", "?")
            self.log_line("info", f"attached to pid {pid}: its {op}, live")
            self.query_one(InFlightPane).idle(f"watching pid {pid}: {op}")
        else:
            self.log_line("info", "the attached operation ended")
            self.refresh_all()
            self.poll_holder()
        self._status_line()

    def on_logged(self, message: Logged) -> None:
        self.log_line(message.level, message.text)

    def on_live_tree_changed(self) -> None:
        self.recount()

    def on_operation_finished(self, message: OperationFinished) -> None:
        summary = headline(message.result)
        self.query_one(InFlightPane).idle(f"{message.operation}: {summary}", finished=True)
        self.last_result = f"{message.operation}: {summary}"
        self.notify(summary, title=message.operation)
        if (browser := self.browser()) is not None:
            browser.finished(message.result, summary)
        self._settled()

    def on_operation_failed(self, message: OperationFailed) -> None:
        self.query_one(RemotePane).ship_ended(message.error)
        self.query_one(InFlightPane).idle(f"{message.operation}: {message.error}")
        self.notify(message.error, title=message.operation, severity="error", timeout=10)
        self.log_line("error", f"{message.operation}: {message.error}")
        if (browser := self.browser()) is not None:
            browser.failed(f"{message.operation}: {message.error}")
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

    def on_holds_changed(self, message: HoldsChanged) -> None:
        self.log_line(message.level, message.said)
        self.refresh_all()
