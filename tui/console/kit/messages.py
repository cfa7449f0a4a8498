"""What workers, panes and screens tell the app. Workers only post these; the
app's handlers own the state. A pane that reads for itself posts to itself and
its message goes on up to the app: it lives here when the app keeps what it
carries too (the backlog, the findings), else in the pane's module.

Bursts coalesce (Toolong's ``can_replace``): a newer file-progress message for the
same file replaces one still waiting in the queue, and so does a newer
"the live tree changed" notice, so a flood of events never backs the queue up.
Every one of them is a ``Report``: it can still be in the app's queue when the
panes are taken down (a console closing, the test harness's shutdown), and the
app drops it then rather than look for a pane that is gone.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from coldkeep.core.base.lock import Holder
from coldkeep.core.base.stream import Event, FileStep
from coldkeep.core.files.recovery import RecoveryReport
from coldkeep.core.ops.attach import AttachClient
from coldkeep.core.ops.plan import Plan
from coldkeep.core.ops.status import Status

from ...operations.spec import Result, Run


class Report(Message):
    """What a worker, a poller, a pane or a screen tells the app."""


@dataclass
class CoreEvent(Report):
    """One event from the core's stream."""

    event: Event

    def can_replace(self, message: Message) -> bool:
        mine, theirs = self.event, getattr(message, "event", None)
        return (
            isinstance(mine, FileStep)
            and isinstance(theirs, FileStep)
            and mine.step == theirs.step == "reading"
            and mine.relpath == theirs.relpath
        )


@dataclass
class StatusLoaded(Report):
    status: Status


@dataclass
class BacklogLoaded(Report):
    """What a pass would take now (the Backlog pane's count, or a plan read to ask)."""

    plan: Plan


@dataclass
class FindingsLoaded(Report):
    """What recovery would settle (a walk of the archive, loaded apart from the
    backlog because it is slower on a big archive): sent as the walk goes, each
    report holding everything the one before it did."""

    recovery: RecoveryReport

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, FindingsLoaded)


@dataclass
class HolderChanged(Report):
    holder: Holder | None
    alive: bool
    wal_bytes: int


class LiveTreeChanged(Report):
    """Files appeared, changed or went in the live tree (a burst is one message)."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, LiveTreeChanged)


@dataclass
class Confirmed(Report):
    """The operator said yes to ``action``'s question (the app's, or the restore
    browser's; or a job had nothing to ask about): ``run`` is to start, under
    the label ``operation``, unless nothing can change the archive now."""

    action: str
    operation: str
    run: Run


@dataclass
class OperationFinished(Report):
    """A mutating operation ran to its end (its result may still say "failed")."""

    operation: str  # the label the operator saw: "pass", "job verify", …
    result: Result


@dataclass
class OperationFailed(Report):
    """A mutating operation was refused or stopped by an error before a result."""

    operation: str
    error: str


@dataclass
class OperationStopped(Report):
    """A mutating operation stopped at a safe point because it was asked to (the
    stop key, or quitting), before a result."""

    operation: str
    reason: str


@dataclass
class LoadFailed(Report):
    """A background read (the backlog, the findings) failed; nothing was running."""

    what: str
    error: str


@dataclass
class Logged(Report):
    """A line for the log, from a worker."""

    level: str
    text: str


@dataclass
class HoldsChanged(Report):
    """The holds screen placed or released a hold: its line for the log."""

    level: str
    said: str


@dataclass
class Attached(Report):
    """Watching another process's operation through ``client`` (None: that ended)."""

    client: AttachClient | None
