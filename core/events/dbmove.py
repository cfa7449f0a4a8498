"""The event mover: old rows of the archivable kinds, out of the application's live
SQLite database into ``archive_root/events/<YYYY-MM>.db``, batch by batch, while
the application keeps writing.

One batch, oldest ids first (at most ``events.batch_rows`` rows, over an id span
sized so that step 3 holds live's write lock about LOCK_TARGET_S):

  1. find the next eligible row in live (of a kind ``events.kinds`` names, any
     kind without it; time stamp parsable and older than
     ``events.min_age_days``, never the row with the largest id) and its month:
     the batch's id range starts there; one SELECT, no transaction left open;
  2. per month, that month first, in one transaction on the live connection
     with the month DB attached: rows the month DB already holds with the same
     content need nothing; the same id with OTHER content is a conflict:
     refused, reported, kept in both; the rest are copied (``INSERT … SELECT``
     over the id range, eligibility and month tested as they are copied; the
     first month's copy stops at ``batch_rows`` rows, and the batch's range
     ends where it stopped, or before the next month's first row (a month's
     turn); when other months' rows are interleaved with it, the copy is
     rolled back and each month of the range copied the same way) and committed
     (WAL, synchronous=NORMAL), then made durable by an fsync of the month's
     WAL on a thread of its own (``MonthDbs.sync``). Rows a restore put back
     are left out everywhere                                   ->  batch_archived
  3. per month, delete them from live in one short ``BEGIN IMMEDIATE``
     transaction, then leave live free until every writer it refused has
     retried (``writer_gap_s``). The rows are found from the month DB's ids
     in the range (each a seek by id in live). Only rows identical to their
     archived copy go: while the DELETE runs, a second connection (``Checker``) counts the
     others on the DELETE's own snapshot (why that is sound:
     ``EventMover._delete_month``); if there are any (the application updated a
     row after it was copied), the delete is rolled back and redone with the
     identity check inside the DELETE. A row the application updated meanwhile
     stays live, and the copy of it this batch made goes       ->  batch_deleted

Rows never pass through Python, nor do their ids: the rows go from database to
database in SQL, over id ranges. One connection does the reading, copying and
deleting, with the month DBs attached (at most eight at a time), so that its page
cache stays warm from one step to the next; the checker has the same months
attached under the same names. Each database commits on its own (a transaction
over ATTACHed WAL databases is not atomic across them, and nothing here needs it
to be). The batches run one ahead (``EventMover._loop``): batch N+1's steps 1
and 2 run before batch N's step 3, and its fsync runs while that delete holds
live; the steps are still announced in order, each once it is durable.

Invariants:
- A row is deleted from live only once it is durably in its month DB with
  identical content, established on the snapshot the delete runs on (by the
  checker, or inside the DELETE: ``EventMover._delete_month``). A crash
  anywhere leaves at worst a row in both places; the next batch that reads it
  finds the same content archived and only deletes it.
- coldkeep never holds the live write lock while doing anything slow: the only
  live write is step 3, under ``busy_timeout``. If live stays locked past it, the
  batch stays in both places, is retried at the end of the phase, and what is
  still locked is reported and settled by the next pass.
- Each batch's copy into a month and its delete from live commit under the
  share with the queries that read event rows (readshare.py), taken before any
  SQLite lock: a query reads a batch in both places or in one, never in
  neither or counted twice. A query reading past ``READERS_WAIT_S`` (or past
  the time the phase has worked besides) is overtaken, and told, never waited
  for longer.
- The row with the largest id never moves: without AUTOINCREMENT, SQLite gives
  the next insert max(id) + 1, and deleting the largest row would hand its id to
  a new row while the old one sits in the archive.
- The mover's live connection runs with ``wal_autocheckpoint = 0``; the WAL is
  checkpointed by ``LiveCheckpointer`` (PASSIVE) every N batches and whenever it
  grows past a size; once it reaches ``events.wal_restart_bytes`` into its file,
  the next delete waits (briefly) for a checkpoint to copy all of it, so that the
  log starts over (``EventMover._catch_up``). Its own commits to live are
  ``synchronous = NORMAL``: a delete lost to a power cut puts the row back in
  live, beside its archived copy, which the next pass settles. The month DBs commit with NORMAL too:
  step 2 fsyncs each month's WAL before any of its rows is deleted.
- A month DB that cannot be opened or fails its quick check is refused for this
  pass (its rows stay live); the other months go on.
- The application's triggers that a DELETE on the events table fires, and the
  foreign keys referencing it, would change or orphan rows coldkeep does not
  archive: they refuse the phase before anything is copied, unless
  ``events.triggers`` / ``events.foreign_keys`` say how to treat them. Foreign
  keys are enforced on the mover's connection only when told to fire, and then
  only around the DELETE.

Synchronous: ``EventMover.run`` runs on one worker thread (``move_events`` does
that), the checker on one more, the month DBs' fsyncs on another, the next
month DB's creation on another (``MonthDbs._prepare_next``), and a detached
month's checkpoint (``MonthDbs._detach``: a month idle for a few batches, the
ninth attached, or at the end) on a closer thread; steps
are announced through the async step hook from the first. One run's state (the
live connection, the table, the month DBs, the eligibility test) is set up
once, as a ``_Run``.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import os
import sqlite3
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from concurrent import futures
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from ..base import times
from ..base.cancel import Cancelled, CancelToken, in_thread
from ..base.config import Settings
from ..base.durable import fsync
from ..base.fsutil import ensure_dir, fsync_dir, rename_noreplace, unlink_if_present
from ..base.ioerror import DatabaseFailed, describe, naming, naming_db
from ..base.layout import partial_of
from ..base.space import OutOfSpace, out_of_space
from ..base.steps import StepHook, ThreadStep, no_step, thread_step
from ..base.stream import BatchMoved, CheckpointRan
from ..store.checkpointlog import record_checkpoint
from ..store.manifest import Manifest
from ..store.restoredrows import restored_row_ids
from .checkpoint import LiveCheckpointer, WalIndex, wal_bytes
from .eventschema import (
    EventSchema,
    EventsError,
    SqlCondition,
    check_delete_effects,
    check_month_version,
    discover,
    journal_mode,
    month_of_ms,
    next_month,
    open_live,
    q,
    rollback,
)
from .readshare import ChangeShare

T = TypeVar("T")

# Consecutive locked deletes after which no more batches are read this phase.
MAX_LOCKED_BATCHES = 3
# Month DBs attached to the live connection at once (SQLite's limit is 10).
MAX_ATTACHED = 8
# A month no batch has used for this many batches is detached (with a closer:
# its checkpoint then runs during the run, not all of them at its end). More
# than the one batch read ahead, so that a month is not detached between its
# copy and its delete.
IDLE_BATCHES = 4
# A delete holds live's write lock about LOCK_TARGET_S; live is then left free
# long enough for every writer refused meanwhile to get in at its next retry
# (``writer_gap_s``). Steps 1 and 2 of the next batch usually fill that gap.
# Under 3 ms, the retry of SQLite's busy handler a writer refused at the lock's
# start makes: a hold past it costs that writer 5 ms more (the next retry is at
# 8 ms). With the rows per batch at 2600 the span shrinks to it as the table
# grows (docs/performance.md, "Batches sized to the hold").
LOCK_TARGET_S = 0.0025
# SQLite's default busy handler (the one an application's busy_timeout installs)
# retries a refused writer this long after its first try, then every 100 ms.
BUSY_RETRIES_MS = (0, 1, 3, 8, 18, 33, 53, 78, 103, 128, 178, 228)
GAP_MARGIN_S = 0.0005
MIN_IDS = 64
# No memory-mapped I/O on live or the month DBs (set to 0 whatever SQLite's build
# default): a read error on a mapped page is a SIGBUS, which kills coldkeep (and a
# scheduler with it) without a word, where read() gives SQLITE_IOERR and the phase
# stops with an error naming the database (tests/faults/test_io_errors.py). A
# 1 GiB map bought nothing measurable: bench/events.py, 7 runs each, 137-160k
# rows/s mapped, 146-166k not, the writer's p99 alike.
MMAP_BYTES = 0
# How long a delete waits for the checkpoints to catch up with the live WAL
# (``EventMover._catch_up``) before it goes on without.
CATCH_UP_S = 0.1


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
    conflicts: list[Conflict] = field(default_factory=list)
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


class _Span(NamedTuple):
    """One month of a batch's range other than its first row's (step 2)."""

    month: str | None  # None: time stamps no month can be found for
    rows: int
    lo: int  # the lowest and highest id
    hi: int


class _Mixed(Exception):
    """The rows of a month copied up to the limit have other months' rows among
    them: the copy is rolled back."""


class _First(NamedTuple):
    """Step 1's answer: where the next batch starts."""

    row_id: int  # the first eligible row after the last batch
    month: str | None  # its month (None: Python cannot place it)
    hi: int  # the last id the batch may reach


@dataclass
class _Month:
    """One month's share of a batch: its id range in live, and what step 2 found."""

    lo: int
    hi: int
    where: SqlCondition  # "in this month"
    before: set[int] = field(default_factory=set)  # ids the month DB held in [lo, hi]
    already: set[int] = field(default_factory=set)  # ...of them, identical to live
    conflicts: set[int] = field(default_factory=set)  # ...of them, not
    copied: int = 0  # rows this batch copied in
    deleted: int = 0  # rows step 3 removed from live


@dataclass
class _Batch:
    number: int
    first_id: int
    last_id: int
    restored: list[int]  # ids a restore put back in [first_id, last_id]: never touched
    months: dict[str, _Month] = field(default_factory=dict)  # the months archived

    @property
    def info(self) -> dict[str, Any]:
        return {"batch": self.number, "first_id": self.first_id, "last_id": self.last_id}

    @property
    def archived(self) -> int:
        """Rows durably in their month DB, to delete from live."""
        return sum(m.copied + len(m.already) for m in self.months.values())


def writer_gap_s(locked_s: float) -> float:
    """How long live must stay free after its write lock was taken for
    ``locked_s`` for every writer it refused to find it free at its next retry.
    A writer refused at x ms into a lock of H ms retries at x + 1, x + 3, x + 8,
    …; the first of those past H comes at most one step of that schedule after
    H, and the longest such step is the one H falls in (from x = 0): 5 ms for
    locks up to 8 ms, 10 ms up to 18 ms, and so on. A writer waits at most that
    step past the lock."""
    locked_ms = locked_s * 1000
    for before, after in itertools.pairwise(BUSY_RETRIES_MS):
        if locked_ms <= after:
            return (after - before) / 1000 + GAP_MARGIN_S
    return 0.1 + GAP_MARGIN_S


def _marks(n: int) -> str:
    return ", ".join("?" * n)


def _uri(path: Path) -> str:
    return "file:" + urllib.parse.quote(str(path))


def _locked(err: sqlite3.OperationalError) -> bool:
    return "locked" in str(err) or "busy" in str(err)


class MonthDbs:
    """The month archive databases: created and checked on first use, attached to
    each of the mover's live connections under the same name (at most
    MAX_ATTACHED at a time, the least recently used detached first; detaching the
    last connection checkpoints a month's WAL)."""

    def __init__(
        self,
        conns: Iterable[sqlite3.Connection],
        events_dir: Path,
        schema: EventSchema,
        closer: futures.Executor | None = None,
        *,
        ahead: futures.Executor | None = None,
        last_month: str | None = None,
    ) -> None:
        self.conns = tuple(conns)
        # Where a detached month's last connection is closed (None: at once).
        self.closer = closer
        # Where the month after each one used is prepared, while the mover works
        # on that one (None: each month prepared when first used), up to
        # ``last_month``, the last that can hold eligible rows.
        self.ahead = ahead
        self.last_month = last_month
        self.prepared: dict[str, futures.Future[bool]] = {}  # ... and whether it is new
        self.followed: set[str] = set()  # months whose next month was looked at
        self.dir = events_dir
        self.schema = schema
        self.refused: dict[str, str] = {}
        self.checked: set[str] = set()
        self.attached: dict[str, str] = {}  # month -> schema name, least recently used first
        self.clock = 0  # the batch being read, set by the mover
        self.used: dict[str, int] = {}  # month -> the last batch it was attached for
        # Months attached since their WAL's name was last made durable: the
        # first attach (or one after a detach) may create the -wal file.
        self.new_wal: set[str] = set()

    def path(self, month: str) -> Path:
        return self.dir / f"{month}.db"

    def alias(self, month: str) -> str | None:
        """The schema name ``month`` is attached under; None if it is refused.
        Never inside a transaction (ATTACH and DETACH cannot run there)."""
        if month in self.refused:
            return None
        self.used[month] = self.clock
        if month in self.attached:
            self.attached[month] = self.attached.pop(month)
            # Not at its first use: that batch's fsyncs come first.
            self._prepare_next(month)
            return self.attached[month]
        name = "m_" + month.replace("-", "_")
        try:
            if month not in self.checked:
                self._prepared(month)
                self.checked.add(month)
            if len(self.attached) >= MAX_ATTACHED:
                self._detach(next(iter(self.attached)))
            for done, conn in enumerate(self.conns):
                try:
                    conn.execute(f"ATTACH DATABASE ? AS {name}", (_uri(self.path(month)),))
                except sqlite3.DatabaseError:
                    for attached in self.conns[:done]:
                        attached.execute(f"DETACH DATABASE {name}")
                    raise
        except (sqlite3.DatabaseError, OSError) as err:
            if out_of_space(err):  # not this month's fault: every month would fail
                raise OutOfSpace(self.path(month), err, doing="preparing") from err
            why = describe(err) if isinstance(err, sqlite3.Error) else str(err)
            self.refused[month] = (
                f"{self.path(month)}: {why}; this month is refused, its rows stay live "
                "(check or restore that file)"
            )
            return None
        for conn in self.conns:
            # NORMAL: a commit writes its WAL frames without an fsync; step 2
            # makes them durable itself, off the mover's thread (``sync``).
            conn.execute(f"PRAGMA {name}.synchronous = NORMAL")
            conn.execute(f"PRAGMA {name}.mmap_size = {MMAP_BYTES}")
        self.attached[month] = name
        self.new_wal.add(month)
        return name

    def sync(self, months: list[str]) -> Callable[[], None]:
        """What makes the months' commits so far durable, to run on any thread:
        an fsync of each one's WAL (opened now, so that a later detach, which
        checkpoints and removes it, cannot swap the file), and of the events
        folder when a WAL may be new (what synchronous=FULL would have done at
        the commit)."""
        fds: list[tuple[Path, int]] = []
        try:
            for month in months:
                wal = self.path(month).with_name(f"{month}.db-wal")
                with naming(wal), suppress(FileNotFoundError):
                    # No WAL: nothing written since the last checkpoint (which
                    # synced the DB), or this batch wrote nothing there.
                    fds.append((wal, os.open(wal, os.O_RDONLY | os.O_CLOEXEC)))
        except BaseException:
            for _wal, fd in fds:
                os.close(fd)
            raise
        named = bool(self.new_wal.intersection(months))
        self.new_wal.difference_update(months)

        def run() -> None:
            try:
                for wal, fd in fds:
                    with naming(wal):
                        fsync(fd, "events.month_copied")
                if named:
                    fsync_dir(self.dir, root=self.dir.parent, site="events.month_wal_named")
            finally:
                for _wal, fd in fds:
                    os.close(fd)

        return run

    def _prepared(self, month: str) -> None:
        """``_prepare`` the month, unless it was prepared ahead. A preparation
        ahead that failed is tried again here, so that its error is the one
        the month is refused with."""
        ahead = self.prepared.get(month)
        if ahead is not None:
            futures.wait([ahead])
            if ahead.exception() is None:
                return
        self._prepare(self.path(month))

    def _prepare_next(self, month: str) -> None:
        """Prepare the month after ``month`` on the ahead thread: with rows in
        id order by time, the next month's first batch then finds it ready (a
        new month DB takes several fsyncs). One no batch used is removed at
        ``close`` if it was new."""
        if self.ahead is None or self.last_month is None or month in self.followed:
            return
        self.followed.add(month)
        after = next_month(month)
        if after > self.last_month or after in self.checked or after in self.prepared:
            return
        self.prepared[after] = self.ahead.submit(self._prepare, self.path(after))

    def _prepare(self, path: Path) -> bool:
        """Create or check one month DB; True when it is new."""
        # The events folder and the month DBs live in the archive: reached
        # beneath it, its name made durable when it is new.
        root = self.dir.parent
        ensure_dir(path.parent, root=root)
        if not path.exists() and self._create(path):
            return True
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            check_month_version(conn, path)
            conn.execute("PRAGMA journal_mode = WAL")
            _quick_check(conn)
            check_month_version(conn, path, stamp=True)
            table = self.schema.table
            have = [r[1] for r in conn.execute(f"PRAGMA main.table_info({q(table)})")]
            if not have:
                conn.execute(self.schema.create_sql)
            else:
                # The live table grew a column since this month was created.
                for col in self.schema.columns:
                    if col not in have:
                        conn.execute(f"ALTER TABLE {q(table)} ADD COLUMN {q(col)}")
        finally:
            conn.close()
        return False

    def _create(self, path: Path) -> bool:
        """A new month DB, made whole under a temporary name and renamed into
        place, so that no month DB is ever found without its table (one is
        made on the ahead thread while steps are announced, where a crash can
        come). Closing it checkpoints it, with SQLite's fsyncs; its name is
        made durable with its WAL's, before any of its rows leaves live
        (``sync``). False when a month DB took the name meanwhile."""
        root = self.dir.parent
        tmp = partial_of(path)
        _remove_month(tmp, root)  # what an interrupted run left
        try:
            conn = sqlite3.connect(tmp, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                check_month_version(conn, tmp, stamp=True)
                conn.execute(self.schema.create_sql)
            finally:
                conn.close()
            renamed = rename_noreplace(tmp, path, root=root) == "renamed"
        except BaseException:
            _remove_month(tmp, root)
            raise
        if not renamed:
            _remove_month(tmp, root)
        return renamed

    def _detach(self, month: str) -> None:
        """Detach a month. The last connection to a WAL database to close
        checkpoints it (copying every page written since it was attached, and
        fsyncs): with a closer, a connection of its own opened first stays, and
        is closed there, off the mover's thread."""
        name = self.attached.pop(month)
        keeper = self._keeper(month) if self.closer is not None else None
        for conn in self.conns:
            conn.execute(f"DETACH DATABASE {name}")
        if keeper is not None and self.closer is not None:
            self.closer.submit(keeper.close)

    def _keeper(self, month: str) -> sqlite3.Connection | None:
        """A connection to the month DB holding its WAL open (None: it could not
        be opened; the detach then checkpoints on this thread)."""
        try:
            keeper = sqlite3.connect(
                _uri(self.path(month)), uri=True, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error:
            return None
        try:
            keeper.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
            keeper.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        except sqlite3.Error:
            keeper.close()
            return None
        return keeper

    def detach_idle(self) -> None:
        """Detach the months no batch has used for IDLE_BATCHES batches (only
        with a closer: without one the checkpoint would run here). Between
        batches only: no transaction may be open on any connection."""
        if self.closer is None:
            return
        for month in [m for m in self.attached if self.used[m] <= self.clock - IDLE_BATCHES]:
            self._detach(month)

    def close(self) -> None:
        for month in list(self.attached):
            self._detach(month)
        # Months prepared ahead that no batch used: those this run created hold
        # nothing, and go.
        for month, ahead in self.prepared.items():
            if month in self.used:
                continue
            futures.wait([ahead])
            if ahead.exception() is None and ahead.result():
                _remove_month(self.path(month), self.dir.parent)


def _remove_month(path: Path, root: Path) -> None:
    """Remove a month DB (or its temporary) this run created that holds
    nothing, with its WAL and wal-index."""
    for name in (path.name, f"{path.name}-wal", f"{path.name}-shm"):
        unlink_if_present(path.with_name(name), root=root)


class Checker:
    """A second connection to live, and the thread it runs on: while the mover's
    DELETE runs, it counts the rows that are not identical to their archived
    copy, on the DELETE's snapshot (why that is sound: ``EventMover._delete_month``).
    Only on a live DB in WAL mode."""

    def __init__(self, db: Path, busy_timeout_s: float) -> None:
        self.conn = open_live(db, busy_timeout_s=busy_timeout_s, any_thread=True)
        self.conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
        self._thread = futures.ThreadPoolExecutor(1, thread_name_prefix="coldkeep-checker")

    def count(self, sql: str, args: list[Any]) -> futures.Future[int]:
        """Run ``SELECT count(*) …`` on the checker's thread, to completion (so
        that its read transaction is over when the result is in)."""
        return self._thread.submit(lambda: int(self.conn.execute(sql, args).fetchall()[0][0]))

    def close(self) -> None:
        self._thread.shutdown()
        self.conn.close()


def _quick_check(conn: sqlite3.Connection) -> None:
    ok = conn.execute("PRAGMA quick_check").fetchone()[0]
    if ok != "ok":
        raise sqlite3.DatabaseError(f"quick_check says {ok}")


@dataclass
class _Run:
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


class EventMover:
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

    def run(self) -> MoveReport:
        # Closed in reverse: the month DBs, the checker, the checkpointer (after
        # one last checkpoint), then live. A SQLite error no step named names the
        # live DB (and where the month DBs are).
        where = f"in the event phase; the month DBs are in {self.events_dir}"
        with naming_db(self.db, where), ExitStack() as closing:
            run = self._open(closing)
            try:
                self._loop(run)
            except Cancelled:
                self.report.cancelled = True
            self.report.unparsable += run.unparsable.result()
            self.report.months_refused = dict(run.months.refused)
            return self.report

    def _open(self, closing: ExitStack) -> _Run:
        # Closed last, once every connection to live is (see WalIndex).
        self._wal_index = WalIndex(self.db)
        closing.callback(self._wal_index.close)
        live = open_live(self.db, busy_timeout_s=self.cfg.busy_timeout_ms / 1000)
        closing.callback(live.close)
        live.execute("PRAGMA wal_autocheckpoint = 0")
        live.execute("PRAGMA synchronous = NORMAL")
        live.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
        schema = discover(live, self.db, self.cfg)
        # Before anything is copied: the application's triggers and foreign keys
        # that would act on the DELETE refuse the phase unless the config says
        # how to treat them. Enforcement of foreign keys is off on this
        # connection whatever SQLite's build default, but for the DELETE when
        # they are told to fire (step 3).
        check_delete_effects(live, schema, self.cfg)
        live.execute("PRAGMA foreign_keys = OFF")
        mode = journal_mode(live)
        unparsable = self._count_unparsable(live, schema, mode, closing)
        # The month DBs' last connections close there (see MonthDbs._detach),
        # all of them waited for after live's last checkpoint.
        closer = futures.ThreadPoolExecutor(2, thread_name_prefix="coldkeep-month-close")
        closing.callback(closer.shutdown)
        checkpointer = self._checkpointer(mode)
        if checkpointer is not None:
            closing.callback(_last_checkpoint, checkpointer)
        checker = None
        if mode == "wal":
            checker = Checker(self.db, self.cfg.busy_timeout_ms / 1000)
            closing.callback(checker.close)
        conns = [live] if checker is None else [live, checker.conn]
        # Shut down once the month DBs are closed (which waits for any month
        # prepared ahead that no batch used).
        ahead = futures.ThreadPoolExecutor(1, thread_name_prefix="coldkeep-month-prepare")
        closing.callback(ahead.shutdown)
        last = month_of_ms(self.now_ms - self.cfg.min_age_days * times.DAY_MS)
        months = MonthDbs(conns, self.events_dir, schema, closer, ahead=ahead, last_month=last)
        closing.callback(months.close)
        syncer = futures.ThreadPoolExecutor(1, thread_name_prefix="coldkeep-sync")
        closing.callback(syncer.shutdown)
        eligible = self._eligible(schema)
        share = ChangeShare(self.events_dir.parent)
        closing.callback(share.close)
        return _Run(
            live, schema, months, eligible, checker, checkpointer, syncer, unparsable, share
        )

    def _checkpointer(self, mode: str) -> LiveCheckpointer | None:
        if mode != "wal":
            self.report.checkpointer = f"not applicable: {self.db} is in {mode} mode, not WAL"
            return None

        def ran(result: CheckpointRan) -> None:
            self.report.checkpoints += 1
            self.on_checkpoint(result)

        cp = LiveCheckpointer.configured(self.db, self.cfg, ran)
        self.report.checkpointer = cp.dead or "on"
        return None if cp.dead else cp

    def _eligible(self, schema: EventSchema) -> SqlCondition:
        """The SQL condition a row must meet to move, and its parameters (all
        positional: binding hundreds of named parameters is measurably slower)."""
        cutoff = schema.cutoff(self.now_ms, self.cfg.min_age_days)
        if self._kinds is None:  # every kind
            return SqlCondition(schema.eligible_sql("?"), [cutoff])
        sql = f"{q(schema.kind)} IN ({_marks(len(self._kinds))}) AND {schema.eligible_sql('?')}"
        return SqlCondition(sql, [*self._kinds, cutoff])

    def _count_unparsable(
        self, live: sqlite3.Connection, schema: EventSchema, mode: str, closing: ExitStack
    ) -> futures.Future[int]:
        """The rows of the kinds moved whose time stamps do not parse (index
        ranges, or a scan of the table or its index): in WAL mode on a connection and a thread of
        their own while the first batches move; otherwise here, first (a reader
        there could hold up a delete's commit)."""
        kinds = None
        if self._kinds is not None:
            kinds = SqlCondition(f"{q(schema.kind)} IN ({_marks(len(self._kinds))})", self._kinds)
        where = schema.unparsable_of_kinds(kinds)
        sql, params = f"SELECT count(*) FROM {q(schema.table)} WHERE {where.sql}", where.params
        if mode != "wal":
            counted: futures.Future[int] = futures.Future()
            counted.set_result(int(live.execute(sql, params).fetchone()[0]))
            return counted
        pool = futures.ThreadPoolExecutor(1, thread_name_prefix="coldkeep-unparsable")
        closing.callback(pool.shutdown)
        timeout_s = self.cfg.busy_timeout_ms / 1000

        def count() -> int:
            conn = open_live(self.db, busy_timeout_s=timeout_s, readonly=True, any_thread=True)
            try:
                conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
                return int(conn.execute(sql, params).fetchone()[0])
            finally:
                conn.close()

        return pool.submit(count)

    # the batches ---------------------------------------------------------------

    def _loop(self, run: _Run) -> None:
        """The batches, one ahead: batch N+1 is read and copied, and its copy's
        fsync started on the syncer thread, before batch N is deleted, so that
        the month DB's fsync runs while the delete holds live. The steps are
        announced in order all the same (N deleted, then N+1 archived, once
        its fsync is done). Cancelled, the batch copied ahead is finished."""
        after = 0
        locked_in_a_row = 0
        retry: list[_Batch] = []
        pending: _Batch | None = None  # archived and announced, not yet deleted
        while True:
            ahead = None
            if locked_in_a_row < MAX_LOCKED_BATCHES and not self.cancel.cancelled:
                ahead = self._read_and_archive(run, after)
            if pending is not None:
                if self._delete_and_tell(run, pending):
                    locked_in_a_row = 0
                else:
                    retry.append(pending)
                    locked_in_a_row += 1
            if ahead is None:
                break
            pending, synced = ahead
            after = pending.last_id
            synced.result()
            self.step("batch_archived", pending.info)
        self.cancel.check()
        for batch in retry:
            self.cancel.check()
            if not self._delete(run, batch):
                self.report.locked_rows += batch.archived

    def _read_and_archive(
        self, run: _Run, after: int
    ) -> tuple[_Batch, futures.Future[None]] | None:
        """Steps 1 and 2 of the batch after ``after`` (None: there is none), and
        the fsync that makes its copy durable, under way."""
        run.months.clock = self.report.batches + 1
        run.months.detach_idle()
        with naming_db(self.db, "reading the next batch of event rows"):
            first = self._first(run, after)
        if first is None:
            return None
        batch = self._archive_batch(run, first)
        return batch, run.syncer.submit(run.months.sync(sorted(batch.months)))

    def _delete_and_tell(self, run: _Run, batch: _Batch) -> bool:
        """Step 3 of a batch archived, announced; False when live stayed locked
        (the batch is then in both places, to retry)."""
        deleted = self._delete(run, batch)
        self.step("batch_deleted", batch.info)
        self._progress(run, batch, locked=not deleted)
        return deleted

    def _progress(self, run: _Run, batch: _Batch, *, locked: bool) -> None:
        """Tell how the batch went and where the WAL stands; ask for a checkpoint
        when one is due."""
        wal = wal_bytes(self.db)
        self.report.wal_peak = max(self.report.wal_peak, wal)
        self.on_batch(
            BatchMoved(
                batch.number,
                batch.first_id,
                batch.last_id,
                sum(m.copied for m in batch.months.values()),
                sum(len(m.already) for m in batch.months.values()),
                tuple(sorted(batch.months)),
                wal,
                locked,
            )
        )
        # The size trigger counts the frames still to copy: the WAL file keeps
        # its size after a PASSIVE checkpoint, and comparing that fired a
        # checkpoint after nearly every batch once the file had grown past it.
        index, restart = self._wal_index, self.cfg.wal_restart_bytes
        if run.checkpointer is not None and (
            batch.number % self.cfg.checkpoint_every == 0
            or index.pending_bytes() >= self.cfg.checkpoint_wal_bytes
            or (restart and index.written_bytes() >= restart)
        ):
            run.checkpointer.request()

    def _first(self, run: _Run, after: int) -> _First | None:
        """Step 1: the first eligible row after ``after`` and its month, and the
        last id the batch may reach (``self._ids`` from it, below the largest)."""
        table, pk, eligible = run.table, run.pk, run.eligible
        top = f"(SELECT max({pk}) FROM {table})"
        # NOT INDEXED: walk the table by id from `after`. An index on (kind, ts)
        # would make every batch re-read and sort all eligible rows: quadratic.
        found = run.live.execute(
            f"SELECT {pk}, {run.schema.month_sql()}, {top} FROM {table} NOT INDEXED "
            f"WHERE {pk} > ? AND {pk} < {top} AND {eligible.sql} ORDER BY {pk} LIMIT 1",
            [after, *eligible.params],
        ).fetchone()
        if found is None:
            return None
        row_id, month, largest = found
        return _First(row_id, month, min(row_id + self._ids - 1, largest - 1))

    def _months_in(self, run: _Run, lo: int, hi: int) -> list[_Span]:
        """The months of the eligible rows in [lo, hi]."""
        pk = run.pk
        sql = (
            f"SELECT {run.schema.month_sql()}, count(*), min({pk}), max({pk}) "
            f"FROM {run.table} NOT INDEXED WHERE {pk} BETWEEN ? AND ? AND "
            f"{run.eligible.sql} GROUP BY 1"
        )
        return [_Span(*r) for r in run.live.execute(sql, [lo, hi, *run.eligible.params])]

    def _restored_in(self, lo: int, hi: int) -> list[int]:
        ids = self._restored
        return ids[bisect.bisect_left(ids, lo) : bisect.bisect_right(ids, hi)]

    def _count_restored(self, run: _Run, restored: list[int]) -> int:
        restored_ids = _skip(run.live, restored, run.pk)
        sql = f"SELECT count(*) FROM {run.table} WHERE {run.eligible.sql} AND {restored_ids}"
        return int(run.live.execute(sql, run.eligible.params).fetchone()[0])

    # step 2 --------------------------------------------------------------------

    def _archive_batch(self, run: _Run, first: _First) -> _Batch:
        """Step 2. Usually the range holds rows of the first row's month alone:
        at most ``batch_rows`` of them are copied in id order, and the batch
        ends where that copy stopped (each row's eligibility tested once, as it
        is copied). When other months' rows are among them (rows the
        application wrote late, a month's turn), that copy is rolled back, the
        batch's end is found first, and each month of it is copied in turn."""
        self.report.batches += 1
        lo, hi, month = first.row_id, first.hi, first.month
        where = run.schema.month_condition(month) if month is not None else None
        m = None
        if month is not None and where is not None:
            restored = self._restored_in(lo, hi)
            with suppress(_Mixed):  # and None: the month is refused
                m = self._archive_month(run, month, where, (lo, hi), restored, self.cfg.batch_rows)
        spans: list[_Span] = []
        if m is not None:
            hi = m.hi
        else:
            with naming_db(self.db, "reading the next batch of event rows"):
                hi = self._batch_end(run, lo, hi)
                spans = self._months_in(run, lo, hi)
        batch = _Batch(self.report.batches, lo, hi, self._restored_in(lo, hi))
        if batch.restored:
            self.report.held += self._count_restored(run, batch.restored)
        if month is not None and m is not None:
            self._conflicts(run, month, m)
            batch.months[month] = m
            self.report.months.add(month)
        self._archive(run, spans, batch)
        return batch

    def _alone(self, run: _Run, alias: str, m: _Month, end: int, limit: int) -> int | None:
        """Where the month's copy, which reached ``end``, must stop for the
        batch to hold this month's rows alone: None when no other month's
        eligible row lies in [m.lo, end]; else the id before the first one,
        this copy's rows after it taken out again (a month's turn: the
        batch ends with the month, and the next one starts the next month
        with one delete, not two). ``_Mixed`` when that would leave few rows
        (other months' rows interleaved with this one's) or would take out
        rows the month DB held before. Its test comes first: it looks at the
        time stamp alone, and passes over most rows before the eligibility test."""
        table, pk = run.table, run.pk
        found = run.live.execute(
            f"SELECT {pk} FROM {table} NOT INDEXED WHERE {pk} BETWEEN ? AND ? "
            f"AND NOT ({m.where.sql}) AND {run.eligible.sql} ORDER BY {pk} LIMIT 1",
            [m.lo, end, *m.where.params, *run.eligible.params],
        ).fetchone()
        if found is None:
            return None
        other = int(found[0])
        if other - m.lo < limit // 8 or any(other <= i <= end for i in m.before):
            raise _Mixed
        cur = run.live.execute(
            f"DELETE FROM {alias}.{table} WHERE {pk} BETWEEN ? AND ?", (other, end)
        )
        m.copied -= int(cur.rowcount)
        return other - 1

    def _batch_end(self, run: _Run, lo: int, hi: int) -> int:
        """The id of the ``batch_rows``-th eligible row from ``lo`` (``hi`` when
        there are fewer)."""
        pk = run.pk
        rows = (
            f"SELECT {pk} FROM {run.table} NOT INDEXED WHERE {pk} BETWEEN ? AND ? "
            f"AND {run.eligible.sql} ORDER BY {pk} LIMIT {int(self.cfg.batch_rows)}"
        )
        n, last = run.live.execute(
            f"SELECT count(*), max({pk}) FROM ({rows})", [lo, hi, *run.eligible.params]
        ).fetchone()
        return int(last) if n >= self.cfg.batch_rows else hi

    def _archive(self, run: _Run, spans: list[_Span], batch: _Batch) -> None:
        """Step 2 for the other months, month by month."""
        for span in sorted(spans, key=lambda s: s.month or ""):
            where = run.schema.month_condition(span.month) if span.month is not None else None
            if span.month is None or where is None:  # a time stamp no month can be found for
                self.report.unparsable += span.rows
                continue
            m = self._archive_month(run, span.month, where, (span.lo, span.hi), batch.restored)
            if m is None:
                continue
            self._conflicts(run, span.month, m)
            batch.months[span.month] = m
            self.report.months.add(span.month)

    def _archive_month(
        self,
        run: _Run,
        month: str,
        where: SqlCondition,
        span: tuple[int, int],
        restored_ids: list[int],
        limit: int | None = None,
    ) -> _Month | None:
        """One month's share of the batch in ``span``: what the month DB holds
        already, then a copy of the rest (at most ``limit`` rows, in id order:
        the month's range then ends at the last one copied), committed; None
        when the month is refused. With a limit, the range ends before another
        month's first eligible row in it (``_alone``), or ``_Mixed`` (rolled
        back) when it cannot."""
        alias = run.months.alias(month)
        if alias is None:
            return None
        m = _Month(*span, where)
        restored = set(restored_ids)
        # Deferred, never IMMEDIATE: that would take the write lock on every
        # attached database, live included. This takes it on the month DB only.
        path = run.months.path(month)
        try:
            with run.share.changing():  # a query reads the copy whole or not at all
                run.live.execute("BEGIN")
                self._present(run, alias, m, restored)
                m.copied, last = self._copy(run, alias, m, [*restored, *m.before], limit)
                if limit is not None:
                    cut = self._alone(run, alias, m, m.hi if last is None else last, limit)
                    last = last if cut is None else cut
                run.live.execute("COMMIT")
        except BaseException as err:
            _undo(run.live)
            if out_of_space(err):
                raise OutOfSpace(path, err, doing="copying event rows into") from err
            if isinstance(err, sqlite3.Error):
                # Reading live or writing the month: SQLite does not say which.
                doing = f"copying event rows into it from {self.db}; rolled back"
                raise DatabaseFailed(path, err, doing) from err
            raise
        if last is not None:
            _end_at(m, last)
        return m

    def _conflicts(self, run: _Run, month: str, m: _Month) -> None:
        name = run.months.path(month).name
        self.report.conflicts += [
            Conflict(
                row_id,
                month,
                f"row {row_id} is archived in {name} with other content; both copies are "
                "kept (compare them and remove one)",
            )
            for row_id in sorted(m.conflicts)
        ]

    def _present(self, run: _Run, alias: str, m: _Month, restored: set[int]) -> None:
        """Fill ``m.before``, ``m.already`` and ``m.conflicts``: the month DB's rows
        in this batch's range, and which of this month's eligible live rows they
        match. Usually there are none: one range probe says so."""
        table, pk, live = run.table, run.pk, run.live
        in_range = f"FROM {alias}.{table} WHERE {pk} BETWEEN ? AND ?"
        if not live.execute(f"SELECT EXISTS (SELECT 1 {in_range})", (m.lo, m.hi)).fetchone()[0]:
            return
        m.before = {r[0] for r in live.execute(f"SELECT {pk} {in_range}", (m.lo, m.hi))}
        same = " AND ".join(f"a.{c} IS l.{c}" for c in run.values)
        sql = (
            f"SELECT a.{pk}, ({same}) FROM {alias}.{table} a JOIN main.{table} l "
            f"ON l.{pk} = a.{pk} WHERE a.{pk} BETWEEN ? AND ? AND l.{pk} IN ("
            f"SELECT {pk} FROM main.{table} NOT INDEXED WHERE {pk} BETWEEN ? AND ? "
            f"AND {run.eligible.sql} AND {m.where.sql})"
        )
        params = [m.lo, m.hi, m.lo, m.hi, *run.eligible.params, *m.where.params]
        for row_id, equal in live.execute(sql, params):
            if row_id not in restored:
                (m.already if equal else m.conflicts).add(row_id)

    def _copy(
        self, run: _Run, alias: str, m: _Month, skip_ids: list[int], limit: int | None
    ) -> tuple[int, int | None]:
        """Copy this month's eligible rows in the range from live into the month
        DB, but for ``skip_ids``, at most ``limit`` of them in id order; returns
        how many, and the last id copied when the limit stopped the copy (None
        when every row of the range was copied)."""
        table, pk, cols = run.table, run.pk, run.schema.select_columns
        skip = _skip(run.live, skip_ids, pk)
        # NOT INDEXED: by id, never by the (kind, ts) index the eligibility test
        # would tempt the planner into (a scan of every eligible row); the
        # ORDER BY then costs nothing.
        upto = "" if limit is None else f" ORDER BY {pk} LIMIT {int(limit)}"
        cur = run.live.execute(
            f"INSERT INTO {alias}.{table} ({cols}) SELECT {cols} FROM main.{table} "
            f"NOT INDEXED WHERE {pk} BETWEEN ? AND ? AND {run.eligible.sql} "
            f"AND {m.where.sql} AND NOT ({skip}){upto}",
            [m.lo, m.hi, *run.eligible.params, *m.where.params],
        )
        copied = int(cur.rowcount)
        # Rows go in in id order, so the last row inserted has the largest id.
        last = cur.lastrowid if limit is not None and copied >= limit else None
        return copied, last

    # step 3 --------------------------------------------------------------------

    def _delete(self, run: _Run, batch: _Batch) -> bool:
        """Step 3: each month's share of the batch deleted from live in one short
        write transaction; False when live stayed locked (what is deleted stays
        so). The next batch is sized from how long these held the lock."""
        if not batch.archived:
            return True
        locked_s = 0.0
        for month in sorted(batch.months):
            m, alias = batch.months[month], run.months.alias(month)
            if alias is None:  # refused since step 2: its rows stay in both places
                m.copied, m.already = 0, set()
                continue
            # Restored rows are never touched; rows archived before this batch
            # stay unless step 2 found them identical to an eligible live row
            # (conflicts among them). The checker needs the same.
            untouched = [*batch.restored, *(m.before - m.already)]
            skip = _skip(run.live, untouched, f"a.{run.pk}")
            if run.checker is not None:
                _skip(run.checker.conn, untouched, f"a.{run.pk}")
            with self._keys_enforced(run.live):
                locked = self._delete_month(run, alias, m, skip)
            if locked is None:
                return False
            locked_s += locked
        self._resize(batch.last_id - batch.first_id + 1, locked_s)
        self._settle(run, batch)
        return True

    @contextmanager
    def _keys_enforced(self, live: sqlite3.Connection) -> Iterator[None]:
        """With ``events.foreign_keys = "fire"``, foreign keys enforced around a
        delete (never around the copy: the month DB's table has the keys of the
        live one, and their parents are not there)."""
        if self.cfg.foreign_keys != "fire":
            yield
            return
        live.execute("PRAGMA foreign_keys = ON")
        try:
            yield
        finally:
            live.execute("PRAGMA foreign_keys = OFF")

    def _delete_month(self, run: _Run, alias: str, m: _Month, skip: str) -> float | None:
        """Delete this month's archived rows of the batch from live in one short
        write transaction; returns how long it held the lock, None if live stayed
        locked.

        Only rows identical to their archived copy may go, and that must hold on
        the very snapshot the DELETE runs on. Comparing inside the DELETE (a join
        per row) would keep the lock longer, so while the DELETE runs, the
        checker counts on its own connection and thread the rows that are NOT
        identical. Its count is on the DELETE's snapshot: it starts after BEGIN
        IMMEDIATE gave the mover live's write lock and ends before the mover
        commits, and in between nobody else can commit; in WAL mode a reader
        neither sees the writer's uncommitted pages nor waits for them. (Without
        WAL a reader could hold up the commit, so there is no checker there.)
        The two statements run at once on two cores: the sqlite3 module lets go
        of the GIL while a statement runs. A count above zero (the application
        updated a row after step 2 copied it) rolls the delete back, and it is
        redone with the identity check inside the DELETE itself."""
        where, archived = self._deletable(run, alias, m, skip)
        checker = run.checker
        while True:
            self._catch_up(run)
            self._pause()
            # Taken before live's write lock, never while holding it.
            with run.share.changing():
                try:
                    run.live.execute("BEGIN IMMEDIATE")
                except sqlite3.OperationalError as err:
                    if _locked(err):
                        return None
                    raise DatabaseFailed(self.db, err, "starting a delete") from err
                t0 = time.monotonic()  # the lock is ours from when the application let go
                deleted = self._delete_checked(run, where, archived, checker)
            if deleted is None:  # a row changed: redo, the check inside the DELETE
                self._let_go(t0)
                checker = None
                continue
            m.deleted += deleted
            return self._let_go(t0)

    def _deletable(self, run: _Run, alias: str, m: _Month, skip: str) -> tuple[SqlCondition, str]:
        """The condition on the month's rows step 3 may delete, and the one that a
        row is identical to its archived copy. The rows are found from the month
        DB's ids in the range: those this batch copied and those step 2 found
        archived already (``skip``: the others), each a seek by id in live, no
        eligibility test per row (a row identical to its archived copy was
        eligible when it was copied, and still is)."""
        table, pk = run.table, run.pk
        same = "".join(f"AND a.{c} IS {table}.{c} " for c in run.values)
        archived = f"EXISTS (SELECT 1 FROM {alias}.{table} a WHERE a.{pk} = {table}.{pk} {same})"
        ids = f"SELECT a.{pk} FROM {alias}.{table} a WHERE a.{pk} BETWEEN ? AND ? AND NOT ({skip})"
        # Never the largest id (see the invariants), even if the application
        # deleted the row that was the largest when step 1 ran.
        where = f"{pk} IN ({ids}) AND {pk} < (SELECT max({pk}) FROM main.{table})"
        return SqlCondition(where, [m.lo, m.hi]), archived

    def _delete_checked(
        self, run: _Run, where: SqlCondition, archived: str, checker: Checker | None
    ) -> int | None:
        """Inside the mover's write transaction: the DELETE, committed; with a
        checker, None (rolled back) when it counted a row not identical to its
        copy. Without one the DELETE joins each row with its copy itself."""
        # By id (NOT INDEXED: see _read_batch).
        rows = f"FROM main.{run.table} NOT INDEXED WHERE {where.sql}"
        changed = None
        try:
            if checker is not None:
                changed = checker.count(f"SELECT count(*) {rows} AND NOT {archived}", where.params)
            delete = f"DELETE {rows}" if checker is not None else f"DELETE {rows} AND {archived}"
            deleted = int(run.live.execute(delete, where.params).rowcount)
            if changed is not None and changed.result():
                rollback(run.live)
                return None
            run.live.execute("COMMIT")
        except BaseException as err:
            _undo(run.live)
            if changed is not None:
                futures.wait([changed])  # the checker is idle before it is closed
            if out_of_space(err):  # the live DB's WAL has no room for the delete
                raise OutOfSpace(
                    self.db,
                    err,
                    doing="deleting archived rows from",
                    remedy="free space on the live database's filesystem",
                ) from err
            if isinstance(err, sqlite3.Error):
                doing = "deleting archived rows from it; rolled back, they stay archived too"
                raise DatabaseFailed(self.db, err, doing) from err
            raise
        return deleted

    def _let_go(self, locked_at: float) -> float:
        """Note that live's write lock, taken at ``locked_at``, is released now;
        returns how long it was held."""
        self._released = time.monotonic()
        locked_s = self._released - locked_at
        self._gap = writer_gap_s(locked_s)
        return locked_s

    def _catch_up(self, run: _Run) -> None:
        """Hold the next delete, once the WAL reaches ``wal_restart_bytes`` into
        its file, until checkpoints have copied all of it: the next write (the
        delete's or the application's) then starts the log over from the
        file's beginning. The checkpoints alone fall behind the deletes: each
        ends behind the ones made while it ran, and the log starts over only
        when one finds nothing written since it began. Given up after
        CATCH_UP_S (an old snapshot a reader holds keeps any checkpoint from
        finishing), then tried again once the WAL has grown by half as much."""
        cp, limit = run.checkpointer, self.cfg.wal_restart_bytes
        if cp is None or not limit:
            return
        index = self._wal_index
        written = index.written_bytes()
        if written < limit:
            self._catch_up_at = limit
            return
        if written < self._catch_up_at:
            return
        deadline = time.monotonic() + CATCH_UP_S
        before = None  # the frames left to copy after the last round
        while (left := index.pending_bytes()) and index.written_bytes() >= limit:
            if time.monotonic() >= deadline or cp.dead:
                self._catch_up_at = written + limit // 2
                return
            if before is not None and left >= before:
                # No progress: the application's own checkpoint was running,
                # or a reader holds the frames. Not a busy loop.
                time.sleep(0.001)
            before = left
            cp.request()  # refused while one runs: waited for all the same
            cp.wait_idle(max(0.0, deadline - time.monotonic()))

    def _pause(self) -> None:
        """Leave live unlocked after each delete until every writer it refused
        has retried (``writer_gap_s``)."""
        wait = self._released + self._gap - time.monotonic()
        if wait > 0:
            time.sleep(wait)

    def _resize(self, ids: int, locked_s: float) -> None:
        """Size the next batch's id span so that its delete holds the lock about
        LOCK_TARGET_S (growing at most twofold at a time: the rows may get
        denser)."""
        if locked_s > 0:
            want = ids * LOCK_TARGET_S / locked_s
            self._ids = int(max(MIN_IDS, min((self._ids + want) / 2, 2 * self._ids)))

    def _settle(self, run: _Run, batch: _Batch) -> None:
        """Count what moved. A row still live after its delete was updated by the
        application after it was copied: the copy this batch made is obsolete and
        goes, so the next pass archives the row as it is now. (A copy made earlier,
        by a pass that crashed, stays: the next pass reports the two as a
        conflict.) A row the application deleted meanwhile is simply gone."""
        restored = set(batch.restored)
        for month, m in batch.months.items():
            alias = run.months.alias(month) if m.deleted < m.copied + len(m.already) else None
            if alias is not None:
                self._drop_obsolete(run, alias, m, restored)
            self.report.moved += m.copied
            self.report.already_archived += len(m.already)

    def _drop_obsolete(self, run: _Run, alias: str, m: _Month, restored: set[int]) -> None:
        """The rows of the month's range still in both places after the delete."""
        pk, table = run.pk, run.table
        both = run.live.execute(
            f"SELECT a.{pk} FROM {alias}.{table} a JOIN main.{table} l "
            f"ON l.{pk} = a.{pk} WHERE a.{pk} BETWEEN ? AND ?",
            (m.lo, m.hi),
        ).fetchall()
        for (row_id,) in both:
            if row_id in restored or row_id in m.conflicts:
                continue
            if row_id in m.already:
                m.already.discard(row_id)
                self.report.kept_changed += 1
            elif row_id not in m.before:  # this batch's copy, now obsolete
                run.live.execute(f"DELETE FROM {alias}.{table} WHERE {pk} = ?", (row_id,))
                m.copied -= 1
                self.report.kept_changed += 1


def _end_at(m: _Month, last: int) -> None:
    """Cut a month's share of a batch at ``last``: the rows after it, found
    archived or conflicting, are the next batch's."""
    m.hi = last
    m.before = {i for i in m.before if i <= last}
    m.already = {i for i in m.already if i <= last}
    m.conflicts = {i for i in m.conflicts if i <= last}


def _last_checkpoint(checkpointer: LiveCheckpointer) -> None:
    """Wait for a checkpoint in progress, run one more, and close."""
    checkpointer.wait_idle(checkpointer.timeout_s)
    if checkpointer.request():
        checkpointer.wait_idle(checkpointer.timeout_s)
    checkpointer.close()


def _undo(conn: sqlite3.Connection) -> None:
    """Roll back after an error. A ROLLBACK that fails too (the disk that failed
    the statement) must not hide that error; the connection is closed next, which
    rolls back whatever is left."""
    with suppress(sqlite3.Error):
        rollback(conn)


def _skip(conn: sqlite3.Connection, ids: Iterable[int], column: str) -> str:
    """A condition true for the ids given (rows a restore put back, rows archived before),
    through a temporary table so that there is no limit on how many."""
    ids = list(ids)
    if not ids:  # usually: the condition names no table, so none is filled
        return "0"
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS coldkeep_skip (id INTEGER PRIMARY KEY)")
    conn.execute("DELETE FROM temp.coldkeep_skip")
    conn.executemany("INSERT OR IGNORE INTO temp.coldkeep_skip VALUES (?)", ((i,) for i in ids))
    return f"{column} IN (SELECT id FROM temp.coldkeep_skip)"


def _post(loop: asyncio.AbstractEventLoop, fn: Callable[[T], None], arg: T) -> None:
    loop.call_soon_threadsafe(fn, arg)


async def move_events(
    settings: Settings,
    events_dir: Path,
    *,
    manifest: Manifest | None = None,
    now_ms: int | None = None,
    cancel: CancelToken | None = None,
    step: StepHook = no_step,
    on_batch: Callable[[BatchMoved], None] = lambda _b: None,
    on_checkpoint: Callable[[CheckpointRan], None] = lambda _r: None,
) -> MoveReport:
    """Run the event phase on a worker thread. With a manifest, rows a restore put
    back stay live and every checkpoint is recorded in it. ``on_batch`` and
    ``on_checkpoint`` are called on the event loop."""
    loop = asyncio.get_running_loop()
    cancel = cancel or CancelToken()
    now = now_ms if now_ms is not None else times.now_ms()
    restored = await restored_row_ids(manifest, now) if manifest else set()
    records: list[futures.Future[None]] = []

    def checkpoint_done(result: CheckpointRan) -> None:
        # On the checkpointer's thread: everything goes to the loop's.
        if manifest is not None:
            records.append(
                asyncio.run_coroutine_threadsafe(record_checkpoint(manifest, result), loop)
            )
        _post(loop, on_checkpoint, result)

    mover = EventMover(
        settings,
        events_dir,
        now_ms=now,
        restored=restored,
        cancel=cancel,
        step=thread_step(step, loop),
        on_batch=lambda b: _post(loop, on_batch, b),
        on_checkpoint=lambda r: _post(loop, checkpoint_done, r),
    )
    try:
        return await in_thread(cancel, mover.run)
    finally:
        # Each log row written, or its failure (a full archive) raised here.
        await asyncio.gather(*map(asyncio.wrap_future, records))
