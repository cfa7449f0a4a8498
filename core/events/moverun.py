"""What the event mover's steps share: one run's state (``MoveRun``: the live
connection, the table, the month DBs, the eligibility test, the helpers on
their threads), a batch and each month's share of it, the mover's own state
across batches (``MoverState``), its report, and the small SQL helpers every
step uses.
"""

from __future__ import annotations

import bisect
import sqlite3
from array import array
from collections.abc import Callable, Iterable
from concurrent import futures
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from ..base.cancel import CancelToken
from ..base.config import Settings
from ..base.steps import ThreadStep
from ..base.stream import BatchMoved, CheckpointRan
from .checkpoint import LiveCheckpointer, WalIndex
from .eventschema import EventSchema, EventsError, SqlCondition, q, rollback
from .monthdbs import MonthDbs
from .movechecker import Checker
from .readshare import ChangeShare

T = TypeVar("T")

# A pass lists at most this many of its conflicts (the first by batch, then id)
# and counts the rest: a conflict stays live, so every pass finds it again, and
# an application that reuses archived ids makes thousands that each pass's
# stored summary, and the alerts that read twenty of them back, would repeat.
CONFLICTS_LISTED = 100


@dataclass(frozen=True)
class Conflict:
    row_id: int
    month: str
    detail: str


@dataclass
class MoveReport:
    moved: int = 0  # copied into a month DB and deleted from live
    already_archived: int = 0  # found archived with the same content, deleted from live
    kept_changed: int = 0  # updated by the application between copy and delete
    conflicts: list[Conflict] = field(default_factory=list)  # the first CONFLICTS_LISTED
    conflicts_total: int = 0
    unparsable: int = 0
    held: int = 0  # eligible rows left live because a restore put them back
    months_refused: dict[str, str] = field(default_factory=dict)
    locked_rows: int = 0  # archived, still live: the live DB stayed locked
    batches: int = 0
    months: set[str] = field(default_factory=set)
    wal_peak: int = 0
    checkpointer: str = "off"  # "on", or why not
    checkpoints: int = 0  # ran during the phase (failed or busy ones included)
    cancelled: bool = False


class Span(NamedTuple):
    """One month of a batch's range other than its first row's (step 2)."""

    month: str | None  # None: time stamps no month can be found for
    rows: int
    lo: int  # the lowest and highest id
    hi: int


class Mixed(Exception):
    """The rows of a month copied up to the limit have other months' rows among
    them: the copy is rolled back."""


class First(NamedTuple):
    """Step 1's answer: where the next batch starts."""

    row_id: int  # the first eligible row after the last batch
    month: str | None  # its month (None: Python cannot place it)
    hi: int  # the last id the batch may reach


@dataclass
class MonthShare:
    """One month's share of a batch: its id range in live, and what step 2 found."""

    lo: int
    hi: int
    where: SqlCondition  # "in this month"
    # Ids the month DB held in [lo, hi], in order: never deleted from it.
    held: array[int] = field(default_factory=lambda: array("q"))
    before: set[int] = field(default_factory=set)  # ...of them, the ones live holds too
    already: set[int] = field(default_factory=set)  # ...of those, eligible and identical
    conflicts: set[int] = field(default_factory=set)  # ...eligible, and not
    copied: int = 0  # rows this batch copied in
    deleted: int = 0  # rows step 3 removed from live

    def held_within(self, lo: int, hi: int) -> bool:
        """Whether the month DB held an id in [lo, hi] before this batch."""
        at = bisect.bisect_left(self.held, lo)
        return at < len(self.held) and self.held[at] <= hi


@dataclass
class Batch:
    number: int
    first_id: int
    last_id: int
    restored: list[int]  # ids a restore put back in [first_id, last_id]: never touched
    months: dict[str, MonthShare] = field(default_factory=dict)  # the months archived

    @property
    def info(self) -> dict[str, Any]:
        return {"batch": self.number, "first_id": self.first_id, "last_id": self.last_id}

    @property
    def archived(self) -> int:
        """Rows durably in their month DB, to delete from live."""
        return sum(m.copied + len(m.already) for m in self.months.values())


def marks(n: int) -> str:
    return ", ".join("?" * n)


def is_locked(err: sqlite3.OperationalError) -> bool:
    return "locked" in str(err) or "busy" in str(err)


@dataclass
class MoveRun:
    """One run's state, set up once by ``EventMover.run``: the live connection, the
    table as discovered, the month DBs, the eligibility test, and the helpers on
    their own threads (the checker and the checkpointer exist only on a live DB
    in WAL mode)."""

    live: sqlite3.Connection
    schema: EventSchema
    months: MonthDbs
    eligible: SqlCondition  # what a row must meet to move
    checker: Checker | None
    checkpointer: LiveCheckpointer | None
    syncer: futures.ThreadPoolExecutor  # step 2's fsyncs, while step 3 runs
    unparsable: futures.Future[int]  # counted while the first batches move
    share: ChangeShare  # taken around each copy's and each delete's transaction

    @property
    def table(self) -> str:
        return q(self.schema.table)

    @property
    def pk(self) -> str:
        return q(self.schema.pk)

    @property
    def values(self) -> list[str]:
        """Every column but the id, quoted: what "identical" compares."""
        return [q(c) for c in self.schema.columns if c != self.schema.pk]


def undo(conn: sqlite3.Connection) -> None:
    """Roll back after an error. A ROLLBACK that fails too (the disk that failed
    the statement) must not hide that error; the connection is closed next, which
    rolls back whatever is left."""
    with suppress(sqlite3.Error):
        rollback(conn)


def skipping(conn: sqlite3.Connection, ids: Iterable[int], column: str) -> str:
    """A condition true for the ids given (rows a restore put back, rows archived before),
    through a temporary table so that there is no limit on how many."""
    ids = list(ids)
    if not ids:  # usually: the condition names no table, so none is filled
        return "0"
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS coldkeep_skip (id INTEGER PRIMARY KEY)")
    conn.execute("DELETE FROM temp.coldkeep_skip")
    conn.executemany("INSERT OR IGNORE INTO temp.coldkeep_skip VALUES (?)", ((i,) for i in ids))
    return f"{column} IN (SELECT id FROM temp.coldkeep_skip)"


class MoverState:
    """The mover's settings and the state it keeps across batches; each step's
    methods (movecopy.py, movedelete.py, movepace.py) read and update it."""

    def __init__(
        self,
        settings: Settings,
        events_dir: Path,
        *,
        now_ms: int,
        restored: set[int],
        cancel: CancelToken,
        step: ThreadStep,
        on_batch: Callable[[BatchMoved], None] = lambda _b: None,
        on_checkpoint: Callable[[CheckpointRan], None] = lambda _r: None,
    ) -> None:
        if settings.state_db is None:
            raise EventsError("no state_db is configured: there is no event phase")
        self.cfg = settings.events
        self.db = settings.state_db
        self.events_dir = events_dir
        self.now_ms = now_ms
        self._restored = sorted(restored)
        self.cancel = cancel
        self.step = step
        self.on_batch = on_batch
        self.on_checkpoint = on_checkpoint
        self.report = MoveReport()
        self._kinds = None if self.cfg.kinds is None else sorted(self.cfg.kinds)
        # Ids a batch may span: the delete's time grows with the ids it walks as
        # well as the rows it removes. Adapted to LOCK_TARGET_S.
        self._ids = 8 * self.cfg.batch_rows
        self._released = 0.0  # when the last delete let go of live (monotonic)
        self._gap = 0.0  # how long live stays free after it
        self._wal_index = WalIndex(self.db)  # replaced by each run's own
        # How far the WAL must reach before the next catch-up (after one gave up).
        self._catch_up_at = self.cfg.wal_restart_bytes
