"""Remote: the off-host tier. Where it is and how long local copies stay; what is
still to ship (archive files, and archived event rows no month snapshot holds
yet), what is shipped, what lives only there now, remote copies that
failed their verify; the last ship; and, while a ship runs, its progress and
transfer rate, and every problem it meets.

The pane reads what a ship would send and drop itself (``load``: a worker that
posts ``ShipPlanLoaded`` to the pane); the app tells it what the status says
(``show``) and hands it every event as it arrives (``ship_event``). The pane
keeps the ship's tally (objects, bytes, the rate measured from them) and draws
it at the next frame."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.message import Message
from textual.widgets import DataTable, Static

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.base.errors import RemoteError
from coldkeep.core.base.stream import Event, FileDone, Finished, Phase, Started
from coldkeep.core.base.times import now_ms
from coldkeep.core.ops.status import RemoteState
from coldkeep.core.remote.months import PendingEvents
from coldkeep.core.remote.shipplan import ShipPlan
from coldkeep.core.store.audit import AuditRecord
from coldkeep.core.store.connection import ManifestError

from ...text.fmt import classes_said, clock_time, human, plural, remote_where, thaws_said
from ..kit.messages import LoadFailed
from ..widgets.tables import Cell, MeasuredTable, sync_table
from .base import Pane

NO_REMOTE = "no remote tier: add [remote] to coldkeep.toml"
PROBLEMS_SHOWN = 5
ALERT = "bold red"


def styled(text: str, style: str) -> Text:
    """``text`` in ``style`` as a span: Text compares its spans, not its base
    style, so a cell whose style alone changed would not be redrawn."""
    return Text().append(text, style or None)


def keep_text(keep_local_days: float) -> str:
    """How long local copies stay once shipped, in words."""
    if keep_local_days < 0:
        return "local copies kept for ever"
    if keep_local_days == 0:
        return "local copies dropped on ship"
    return f"local copies kept {keep_local_days:g} days"


def audit_problems(record: AuditRecord) -> list[str]:
    """The problems a finished ship recorded in its audit row (its report as
    JSON, or one line when it ended in an error)."""
    if record.detail is None:
        return []
    try:
        detail = json.loads(record.detail)
    except ValueError:
        # Not JSON: the exception that ended it (or a report cut at its length cap).
        return [] if record.outcome == "ok" else [record.detail]
    problems = detail.get("problems") if isinstance(detail, dict) else None
    return [str(p) for p in problems] if isinstance(problems, list) else []


@dataclass
class ShipPlanLoaded(Message):
    """What a ship would send and drop now (read with the status, or to ask)."""

    plan: ShipPlan


@dataclass
class Transfer:
    """One ship as its events tell it: objects sent, bytes, the rate."""

    started: float
    files: int = 0  # archive files the ship's files phase set out to send
    done: int = 0  # of them sent or found there already
    months: int = 0  # event month snapshots sent (not counted in ``done``)
    sent: int = 0  # bytes uploaded
    rate: float = 0.0  # bytes per second since the phase began
    problems: list[str] = field(default_factory=list)
    ended: float | None = None  # when it ended (None: still running)

    @property
    def running(self) -> bool:
        return self.ended is None


class RemotePane(Pane):
    TITLE: ClassVar[str] = "Remote"

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.monotonic = monotonic
        self.where: str | None = None  # None: no remote tier configured
        self.keep_local_days = -1.0
        self.state: RemoteState | None = None
        self.plan: ShipPlan | None = None
        self.transfer: Transfer | None = None  # the ship seen here (running or last)
        self.dirty = False

    def compose(self) -> ComposeResult:
        yield Static("reading…", id="remote-where", classes="pane-summary")
        yield Static("", id="remote-problems", classes="pane-summary")
        table = MeasuredTable(id="remote-table", show_header=False, cursor_type="none")
        table.add_column("What", key="what")
        table.add_column("Value", key="value")
        yield table

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#remote-problems").display = False

    # what the app tells it -------------------------------------------------------

    def show(self, remote: RemoteSettings | None, base: Path, state: RemoteState | None) -> None:
        """The status's word: the remote configured (None: none), shown relative
        to ``base`` when a folder, and its totals (None: nothing archived yet)."""
        self.where = remote_where(remote, base) if remote is not None else None
        self.keep_local_days = remote.keep_local_days if remote is not None else -1.0
        self.state = state
        self._show()

    def load(self, archiver: Archiver) -> None:
        if archiver.settings.remote is not None:  # nothing to read without one
            self._plan(archiver)

    @work(exclusive=True, group="ship-plan", exit_on_error=False)
    async def _plan(self, archiver: Archiver) -> None:
        """What a ship would send and drop now."""
        try:
            self.post_message(ShipPlanLoaded(await archiver.ship_plan()))
        except (ManifestError, RemoteError, OSError) as err:
            self.post_message(LoadFailed("what a ship would do", str(err)))

    def on_ship_plan_loaded(self, message: ShipPlanLoaded) -> None:
        self.plan = message.plan
        self._show()

    def ship_event(self, event: Event) -> None:
        """An event of any operation: a ship's are tallied (the last ones can land
        after its result, and only add to the tally of the ship that sent them)."""
        match event:
            case Started(operation="ship"):
                self.ship_started()
            case Phase(phase="ship", items=items):
                self.ship_phase(items)
            case FileDone(op="ship"):
                self.object_done(event)
            case Finished(operation="ship", summary=summary):
                problems = summary.get("problems")
                self.ship_ended(problems=problems if isinstance(problems, list) else None)

    def ship_started(self) -> None:
        self.transfer = Transfer(self.monotonic())
        self.dirty = True

    def ship_phase(self, files: int) -> None:
        """The files phase began: ``files`` archive files to send."""
        if self.transfer is None:  # attached after the start
            self.transfer = Transfer(self.monotonic())
        self.transfer.started = self.monotonic()
        self.transfer.files = files
        self.dirty = True

    def object_done(self, event: FileDone) -> None:
        t = self.transfer
        if t is None:
            t = self.transfer = Transfer(self.monotonic())
        if event.result == "error":
            t.problems.append(event.detail or event.relpath)
        elif event.relpath.startswith("events/"):
            t.months += 1
        elif not event.relpath.startswith("manifest/"):
            t.done += 1
        if event.result == "shipped":
            t.sent += event.bytes
        # Measured up to now, or to its end for the last events of a ship that
        # arrive after it ended (the stream's reader runs apart from the ship).
        elapsed = (t.ended or self.monotonic()) - t.started
        t.rate = t.sent / elapsed if elapsed > 0 else 0.0
        self.dirty = True

    def ship_ended(self, problem: str | None = None, *, problems: list[str] | None = None) -> None:
        """The ship is over. ``problems``: its report's, all of them (a local copy
        that could not be dropped has no event of its own); ``problem``: the error
        that ended it early."""
        t = self.transfer
        if t is None:
            return
        if problems is not None:
            t.problems = list(problems)
        if t.running:
            t.ended = self.monotonic()
            if problem:  # said only while it runs: another operation's error is not its
                t.problems.append(problem)
        self.dirty = True

    def flush(self) -> None:
        if self.dirty:
            self.dirty = False
            self._show()

    # drawing ---------------------------------------------------------------------

    def _show(self) -> None:
        where = self.query_one("#remote-where", Static)
        if self.where is None:
            where.update(Text(NO_REMOTE))
            self.border_subtitle = ""
            self._problems([])
            sync_table(self.query_one("#remote-table", DataTable), {})
            return
        where.update(Text(self.where + self._locked()))
        self.border_subtitle = keep_text(self.keep_local_days)
        t = self.transfer
        last = self.state.last_ship if self.state else None
        if t is not None:
            self._problems(t.problems)
        else:
            self._problems(audit_problems(last) if last else [])
        sync_table(self.query_one("#remote-table", DataTable), self._rows())

    def _locked(self) -> str:
        """The bucket's Object Lock and client-side encryption, where either is
        in use, and a cold storage class: `` · compliance lock: 27 locked (2
        expired), 3 legally held · 27 sealed · DEEP_ARCHIVE 1.2 GiB, ~under 0.01
        USD/month, 3 thawing, 1 restores waiting``; and the months this site
        has in the fleet's lake."""
        s = self.state
        if s is None:
            return ""
        said = ""
        if s.object_lock != "off" or s.locked or s.legal_held:
            expired = f" ({s.locked_expired} expired)" if s.locked_expired else ""
            said += (
                f" · {s.object_lock} lock: {s.locked} locked{expired}, {s.legal_held} legally held"
            )
        if s.sealed_to is not None or s.sealed:
            said += f" · {s.sealed} sealed"
        if s.classes:
            said += f" · {classes_said(s.classes)}/month"
        if s.cold is not None and (thawing := thaws_said(s.cold, now_ms())):
            said += f" · {thawing}"
        if s.lake is not None:
            said += f" · lake {plural(s.lake.months, 'month')}"
        return said

    def _rows(self) -> dict[str, list[Cell]]:
        rows: dict[str, list[Cell]] = {}
        totals = self.state.totals if self.state else None
        plan = self.plan
        if plan is not None:
            pending = f"{plural(plan.pending_files, 'file')}, {human(plan.pending_bytes)}"
        else:
            pending = plural(totals.pending_files if totals else 0, "file")
        rows["pending"] = ["pending", pending]
        shipped, shipped_bytes = (totals.shipped, totals.shipped_bytes) if totals else (0, 0)
        rows["shipped"] = ["shipped", f"{plural(shipped, 'object')}, {human(shipped_bytes)}"]
        only, only_bytes = (totals.remote_only, totals.remote_only_bytes) if totals else (0, 0)
        rows["remote_only"] = ["remote only", f"{plural(only, 'file')}, {human(only_bytes)}"]
        failed = totals.verify_failed if totals else 0
        style = ALERT if failed else ""
        rows["verify_failed"] = [styled("verify failed", style), styled(str(failed), style)]
        # One row for the last ship, or the one running: the pane's height holds
        # every row at 120x36 (with archived event rows pending too, all but the
        # last ship's rate).
        last = self.state.last_ship if self.state else None
        t = self.transfer
        if t is not None and t.running:
            of = f"/{t.files}" if t.files else ""
            rows["last"] = ["shipping", f"{t.done}{of}, {human(t.sent)}"]
        elif last is None:
            rows["last"] = ["last ship", "never"]
        else:
            style = {"ok": "", "cancelled": "yellow"}.get(last.outcome, ALERT)
            outcome = styled(last.outcome, style)
            rows["last"] = ["last ship", Text(f"{clock_time(last.at)} ") + outcome]
        if t is not None:
            # Measured from the ship's own events: bytes uploaded over the time
            # since its files phase began (to its end, once over).
            label = "rate" if t.running else "last rate"
            rows["rate"] = [label, f"{human(t.rate)}/s"]
        events = self.state.pending_events if self.state else PendingEvents()
        if events.rows and not (t is not None and t.running):
            # Archived event rows only this host holds, until a ship sends their
            # months: said while there are any (a row added later comes last).
            n = len(events.months)
            rows["pending_events"] = [
                styled("pending rows", "yellow"),
                styled(f"{events.rows} in {n} month{'' if n == 1 else 's'}", "yellow"),
            ]
        return rows

    def _problems(self, problems: list[str]) -> None:
        box = self.query_one("#remote-problems", Static)
        if box.display != bool(problems):
            box.display = bool(problems)
        if not problems:
            return
        which = "this" if self.transfer is not None and self.transfer.running else "the last"
        n = len(problems)
        text = styled(f"{n} problem{'s' if n > 1 else ''} in {which} ship:", ALERT)
        for p in problems[:PROBLEMS_SHOWN]:
            text.append(f"\n{p}", "red")
        if len(problems) > PROBLEMS_SHOWN:
            text.append(f"\n… and {len(problems) - PROBLEMS_SHOWN} more (coldkeep history)", "red")
        box.update(text)
