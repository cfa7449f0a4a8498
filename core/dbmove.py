"""The event mover: old rows of the archivable kinds, out of the application's live
SQLite database into ``archive_root/events/<YYYY-MM>.db``, batch by batch, while
the application keeps writing (seeds/000 kinds.ts, livecheckpoint.ts; SPEC §6).

One batch, oldest ids first (``events.batch_rows`` rows):

  1. read the ids (and time stamps) of the next eligible rows from live: kind in
     ``events.kinds``, time stamp parsable and older than ``events.min_age_days``,
     not under a restore hold, never the row with the largest id; an autocommit
     SELECT, no transaction left open;
  2. per month: ids already in the month DB with the same content need nothing;
     the same id with OTHER content is a conflict: refused, reported, kept in
     both; the rest are copied from live into the month DB (``INSERT … SELECT``,
     eligibility checked again as they are copied) and committed durably (WAL,
     synchronous=FULL)                                         ->  batch_archived
  3. delete them from live in one short ``BEGIN IMMEDIATE`` transaction whose
     DELETE joins each live row with its archived copy and removes only rows
     identical in every column: a row the application updated meanwhile stays
     live, and the fresh copy of it this batch made goes      ->  batch_deleted

Rows never pass through Python: ids do, the rows go from database to database in
SQL. Each month DB's connection attaches live for step 2; the live connection
attaches the month DBs for step 3; each only ever reads the other side. Reading
across an ATTACH is all this relies on: each database commits on its own (a
transaction over ATTACHed WAL databases is not atomic across them, and nothing
here needs it to be).

Invariants:
- A row is deleted from live only once it is durably in its month DB with
  identical content, and that identity is checked by SQLite against the archive
  file at the moment of the delete. A crash anywhere leaves at worst a row in
  both places; the next batch that reads it finds the same content archived and
  only deletes it.
- coldkeep never holds the live write lock while doing anything slow: the only
  live write is step 3, under ``busy_timeout``. If live stays locked past it, the
  batch stays in both places, is retried at the end of the phase, and what is
  still locked is reported and settled by the next pass.
- The row with the largest id never moves: without AUTOINCREMENT, SQLite gives
  the next insert max(id) + 1, and deleting the largest row would hand its id to
  a new row while the old one sits in the archive.
- The mover's live connection runs with ``wal_autocheckpoint = 0``; the WAL is
  checkpointed by ``LiveCheckpointer`` (PASSIVE) every N batches and whenever it
  grows past a size.
- A month DB that cannot be opened or fails its quick check is refused for this
  pass (its rows stay live); the other months go on.

Synchronous: ``EventMover.run`` runs on one worker thread (``move_events`` does
that); steps are announced through the async step hook from there. One thread,
one live connection: a second thread for the deletes was measured slower (the
sqlite3 module hands the GIL back on every row, and two threads convoy on it).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
import urllib.parse
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from .cancel import Cancelled, CancelToken, in_thread
from .checkpoint import CheckpointResult, LiveCheckpointer, wal_bytes
from .config import Settings
from .eventschema import EventSchema, EventsError, discover, journal_mode, open_live, q
from .fsutil import ensure_dir
from .manifest import Manifest
from .steps import StepHook, StepName, no_step

T = TypeVar("T")
SyncStep = Callable[[StepName, dict[str, Any]], None]

# Consecutive locked deletes after which no more batches are read this phase.
MAX_LOCKED_BATCHES = 3
# Month DBs attached to the live connection at once (SQLite's limit is 10).
MAX_ATTACHED = 8
# Every commit of the application empties our connections' page caches of live;
# mapped, its pages are re-read without a copy or a syscall.
MMAP_BYTES = 1 << 30
# Ids per SQL statement (SQLite's oldest default limit on variables is 999).
CHUNK = 900


@dataclass(frozen=True)
class Conflict:
    row_id: int
    month: str
    detail: str


@dataclass(frozen=True)
class BatchDone:
    """One batch, for progress: what was moved, and where the WAL stands."""

    number: int
    first_id: int
    last_id: int
    moved: int
    already: int
    months: tuple[str, ...]
    wal_bytes: int
    locked: bool


@dataclass
class MoveReport:
    moved: int = 0  # copied into a month DB and deleted from live
    already_archived: int = 0  # found archived with the same content, deleted from live
    kept_changed: int = 0  # updated by the application between copy and delete
    conflicts: list[Conflict] = field(default_factory=list)
    unparsable: int = 0
    held: int = 0
    months_refused: dict[str, str] = field(default_factory=dict)
    locked_rows: int = 0  # archived, still live: the live DB stayed locked
    batches: int = 0
    months: set[str] = field(default_factory=set)
    wal_peak: int = 0
    checkpointer: str = "off"  # "on", or why not
    cancelled: bool = False


@dataclass
class _Batch:
    number: int
    first_id: int
    last_id: int
    archived: dict[str, list[int]]  # by month: ids durably archived, to delete from live
    inserted: dict[int, str]  # id -> month, for the rows this batch copied
    deleted: int = 0  # rows step 3 removed from live

    @property
    def info(self) -> dict[str, Any]:
        return {"batch": self.number, "first_id": self.first_id, "last_id": self.last_id}

    @property
    def ids(self) -> list[int]:
        return [i for ids in self.archived.values() for i in ids]


def _chunks(seq: Sequence[T], n: int = CHUNK) -> Iterable[Sequence[T]]:
    for i in range(0, len(seq), n):
        yield seq[i : i + n]


def _marks(n: int) -> str:
    return ", ".join("?" * n)


def _uri(path: Path) -> str:
    # Not mode=ro: a read-only connection to a WAL database cannot share its -shm
    # and rebuilds the WAL index by reading the whole WAL in every transaction
    # (measured: 70 ms a batch). Attached read-write, and only ever read.
    return "file:" + urllib.parse.quote(str(path))


def _locked(err: sqlite3.OperationalError) -> bool:
    return "locked" in str(err) or "busy" in str(err)


class MonthDbs:
    """The month archive databases, opened (and created) on first use; each reads
    live through an ATTACH named ``live``."""

    def __init__(self, events_dir: Path, schema: EventSchema) -> None:
        self.dir = events_dir
        self.schema = schema
        self.open: dict[str, sqlite3.Connection] = {}
        self.refused: dict[str, str] = {}
        self.attached: list[str] = []  # months' schema names on the live connection

    def path(self, month: str) -> Path:
        return self.dir / f"{month}.db"

    def get(self, month: str) -> sqlite3.Connection | None:
        if month in self.refused:
            return None
        if month not in self.open:
            try:
                self.open[month] = self._connect(self.path(month))
            except sqlite3.DatabaseError as err:
                self.refused[month] = (
                    f"{self.path(month)}: {err}; this month is refused, its rows stay live "
                    "(check or restore that file)"
                )
                return None
        return self.open[month]

    def _connect(self, path: Path) -> sqlite3.Connection:
        ensure_dir(path.parent)
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
            _quick_check(conn)
            table = self.schema.table
            have = [r[1] for r in conn.execute(f"PRAGMA main.table_info({q(table)})")]
            if not have:
                conn.execute(self.schema.create_sql)
            else:
                # The live table grew a column since this month was created.
                for col in self.schema.columns:
                    if col not in have:
                        conn.execute(f"ALTER TABLE {q(table)} ADD COLUMN {q(col)}")
            conn.execute("ATTACH DATABASE ? AS live", (_uri(self.schema.db),))
            conn.execute(f"PRAGMA live.mmap_size = {MMAP_BYTES}")
        except BaseException:
            conn.close()
            raise
        return conn

    def attach(self, live: sqlite3.Connection, months: Sequence[str]) -> dict[str, str]:
        """Make ``live`` read these months' DBs, detaching the others; returns
        month -> schema. Callers pass at most MAX_ATTACHED months."""
        want = {m: "m_" + m.replace("-", "_") for m in months}
        for alias in [a for a in self.attached if a not in want.values()]:
            live.execute(f"DETACH DATABASE {alias}")
            self.attached.remove(alias)
        for month, alias in want.items():
            if alias not in self.attached:
                live.execute(f"ATTACH DATABASE ? AS {alias}", (_uri(self.path(month)),))
                self.attached.append(alias)
        return want

    def close(self) -> None:
        for conn in self.open.values():
            try:
                conn.execute("DETACH DATABASE live")
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # our own file: no readers
            finally:
                conn.close()
        self.open.clear()


def _quick_check(conn: sqlite3.Connection) -> None:
    ok = conn.execute("PRAGMA quick_check").fetchone()[0]
    if ok != "ok":
        raise sqlite3.DatabaseError(f"quick_check says {ok}")


class EventMover:
    def __init__(
        self,
        settings: Settings,
        events_dir: Path,
        *,
        now_ms: int,
        held: set[int],
        cancel: CancelToken,
        step: SyncStep,
        on_batch: Callable[[BatchDone], None] = lambda _b: None,
        on_checkpoint: Callable[[CheckpointResult], None] = lambda _r: None,
    ) -> None:
        if settings.state_db is None:
            raise EventsError("no state_db is configured: there is no event phase")
        self.cfg = settings.events
        self.db = settings.state_db
        self.events_dir = events_dir
        self.now_ms = now_ms
        self.held = held
        self.cancel = cancel
        self.step = step
        self.on_batch = on_batch
        self.on_checkpoint = on_checkpoint
        self.report = MoveReport()
        self._kinds = sorted(self.cfg.kinds)

    def run(self) -> MoveReport:
        live = open_live(self.db, busy_timeout_s=self.cfg.busy_timeout_ms / 1000)
        try:
            live.execute("PRAGMA wal_autocheckpoint = 0")
            live.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
            schema = discover(live, self.db, self.cfg)
            self._count_unparsable(live, schema)
            checkpointer = self._checkpointer(live)
            months = MonthDbs(self.events_dir, schema)
            try:
                self._loop(live, schema, months, checkpointer)
            except Cancelled:
                self.report.cancelled = True
            finally:
                months.close()
                if checkpointer is not None:
                    checkpointer.wait_idle(checkpointer.timeout_s)
                    if checkpointer.request():
                        checkpointer.wait_idle(checkpointer.timeout_s)
                    checkpointer.close()
            self.report.months_refused = dict(months.refused)
            return self.report
        finally:
            live.close()

    def _checkpointer(self, live: sqlite3.Connection) -> LiveCheckpointer | None:
        mode = journal_mode(live)
        if mode != "wal":
            self.report.checkpointer = f"not applicable: {self.db} is in {mode} mode, not WAL"
            return None
        cp = LiveCheckpointer(
            self.db,
            self.on_checkpoint,
            timeout_s=self.cfg.checkpoint_timeout_s,
            busy_timeout_s=self.cfg.busy_timeout_ms / 1000,
            mode=self.cfg.checkpoint_mode,
        )
        self.report.checkpointer = cp.dead or "on"
        return None if cp.dead else cp

    def _eligible(self, schema: EventSchema) -> tuple[str, list[Any]]:
        """The SQL condition a row must meet to move, and its parameters (all
        positional: binding hundreds of named parameters is measurably slower)."""
        sql = f"{q(schema.kind)} IN ({_marks(len(self._kinds))}) AND {schema.eligible_sql('?')}"
        return sql, [*self._kinds, schema.cutoff(self.now_ms, self.cfg.min_age_days)]

    def _count_unparsable(self, live: sqlite3.Connection, schema: EventSchema) -> None:
        sql = (
            f"SELECT count(*) FROM {q(schema.table)} "
            f"WHERE {q(schema.kind)} IN ({_marks(len(self._kinds))}) "
            f"AND {schema.unparsable_sql()}"
        )
        self.report.unparsable = int(live.execute(sql, self._kinds).fetchone()[0])

    def _read_batch(
        self, live: sqlite3.Connection, schema: EventSchema, after: int
    ) -> list[tuple[int, Any]]:
        """Step 1: the ids and time stamps of the next eligible rows after ``after``."""
        table, pk = q(schema.table), q(schema.pk)
        eligible, params = self._eligible(schema)
        # NOT INDEXED: walk the table by id from `after`. An index on (kind, ts)
        # would make every batch re-read and sort all eligible rows: quadratic.
        sql = (
            f"SELECT {pk}, {q(schema.ts)} FROM {table} NOT INDEXED "
            f"WHERE {pk} > ? AND {pk} < (SELECT max({pk}) FROM {table}) "
            f"AND {eligible} ORDER BY {pk} LIMIT {self.cfg.batch_rows}"
        )
        return live.execute(sql, [after, *params]).fetchall()

    def _loop(
        self,
        live: sqlite3.Connection,
        schema: EventSchema,
        months: MonthDbs,
        checkpointer: LiveCheckpointer | None,
    ) -> None:
        after = 0
        locked_in_a_row = 0
        retry: list[_Batch] = []
        while locked_in_a_row < MAX_LOCKED_BATCHES:
            self.cancel.check()
            rows = self._read_batch(live, schema, after)
            if not rows:
                break
            after = rows[-1][0]
            self.report.batches += 1
            archived, inserted = self._archive(rows, schema, months)
            batch = _Batch(self.report.batches, rows[0][0], after, archived, inserted)
            self.step("batch_archived", batch.info)
            locked = not self._delete(live, batch, schema, months)
            self.step("batch_deleted", batch.info)
            if locked:
                retry.append(batch)
                locked_in_a_row += 1
            else:
                locked_in_a_row = 0
            wal = wal_bytes(self.db)
            self.report.wal_peak = max(self.report.wal_peak, wal)
            self.on_batch(
                BatchDone(
                    batch.number,
                    batch.first_id,
                    after,
                    len(inserted),
                    len(batch.ids) - len(inserted),
                    tuple(sorted(archived)),
                    wal,
                    locked,
                )
            )
            if checkpointer is not None and (
                batch.number % self.cfg.checkpoint_every == 0
                or wal >= self.cfg.checkpoint_wal_bytes
            ):
                checkpointer.request()
        for batch in retry:
            self.cancel.check()
            if not self._delete(live, batch, schema, months):
                self.report.locked_rows += len(batch.ids)

    def _archive(
        self, rows: list[tuple[int, Any]], schema: EventSchema, months: MonthDbs
    ) -> tuple[dict[str, list[int]], dict[int, str]]:
        """Step 2. Returns the ids now safely archived (to delete from live) by
        month, and the ids this batch copied with their months."""
        by_month: dict[str, list[int]] = defaultdict(list)
        for row_id, ts in rows:
            month = schema.month_of(ts)
            if row_id in self.held:
                self.report.held += 1
            elif month is None:  # SQLite read a time its strftime() accepts, Python not
                self.report.unparsable += 1
            else:
                by_month[month].append(row_id)
        archived: dict[str, list[int]] = {}
        inserted: dict[int, str] = {}
        for month, ids in sorted(by_month.items()):
            conn = months.get(month)
            if conn is None:
                continue
            already, conflicts = self._present(conn, schema, ids)
            for row_id in conflicts:
                self.report.conflicts.append(
                    Conflict(
                        row_id,
                        month,
                        f"row {row_id} is archived in {months.path(month).name} with other "
                        "content; both copies are kept (compare them and remove one)",
                    )
                )
            new = [i for i in ids if i not in already and i not in conflicts]
            copied = self._copy(conn, schema, month, new) if new else []
            archived[month] = sorted(already) + copied
            inserted.update((i, month) for i in copied)
            self.report.months.add(month)
        return archived, inserted

    def _present(
        self, conn: sqlite3.Connection, schema: EventSchema, ids: list[int]
    ) -> tuple[set[int], set[int]]:
        """Of ``ids``, those the month DB already holds with the same content as
        live, and those it holds with other content. Usually neither: one range
        probe says so before any lookup by id."""
        table, pk = q(schema.table), q(schema.pk)
        probe = f"SELECT EXISTS (SELECT 1 FROM main.{table} WHERE {pk} BETWEEN ? AND ?)"
        if not conn.execute(probe, (ids[0], ids[-1])).fetchone()[0]:
            return set(), set()
        same = " AND ".join(f"a.{q(c)} IS l.{q(c)}" for c in schema.columns if c != schema.pk)
        already: set[int] = set()
        conflicts: set[int] = set()
        for chunk in _chunks(ids):
            sql = (
                f"SELECT a.{pk}, ({same}) FROM main.{table} a "
                f"JOIN live.{table} l ON l.{pk} = a.{pk} WHERE a.{pk} IN ({_marks(len(chunk))})"
            )
            for row_id, equal in conn.execute(sql, chunk):
                (already if equal else conflicts).add(row_id)
        return already, conflicts

    def _copy(
        self, conn: sqlite3.Connection, schema: EventSchema, month: str, ids: list[int]
    ) -> list[int]:
        """Copy these rows from live into the month DB and commit durably. The
        copy re-checks eligibility and month (the application may have changed a
        row since step 1); returns the ids actually copied."""
        table, pk, cols = q(schema.table), q(schema.pk), schema.select_columns
        # Deferred, never IMMEDIATE: that would take the write lock on every
        # attached database, live included. This takes it on the month DB only.
        conn.execute("BEGIN")
        try:
            copied = 0
            eligible, params = self._eligible(schema)
            for chunk in _chunks(ids):
                # NOT INDEXED: by id, never by the (kind, ts) index the eligibility
                # test would tempt the planner into (a scan of every eligible row).
                cur = conn.execute(
                    f"INSERT INTO main.{table} ({cols}) SELECT {cols} FROM live.{table} "
                    f"NOT INDEXED WHERE {pk} IN ({_marks(len(chunk))}) AND {eligible} "
                    f"AND {schema.month_sql()} = ?",
                    [*chunk, *params, month],
                )
                copied += cur.rowcount
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        if copied == len(ids):
            return ids
        got: list[int] = []
        for chunk in _chunks(ids):
            sql = f"SELECT {pk} FROM main.{table} WHERE {pk} IN ({_marks(len(chunk))})"
            got.extend(r[0] for r in conn.execute(sql, chunk))
        return sorted(got)

    def _delete(
        self, live: sqlite3.Connection, batch: _Batch, schema: EventSchema, months: MonthDbs
    ) -> bool:
        """Step 3: one short write transaction (per eight months in the batch);
        False when live stayed locked.

        The DELETE itself joins each live row with its copy in the month DB
        (attached) and removes it only where every column is identical:
        the invariant is checked by SQLite against the archive file, at the moment
        of the delete, while the application cannot write."""
        if not batch.ids:
            return True
        months_in = sorted(batch.archived)
        for i in range(0, len(months_in), MAX_ATTACHED):
            group = months_in[i : i + MAX_ATTACHED]
            if not self._delete_months(live, batch, schema, months, group):
                return False
        self._settle(live, batch, schema, months)
        return True

    def _delete_months(
        self,
        live: sqlite3.Connection,
        batch: _Batch,
        schema: EventSchema,
        months: MonthDbs,
        which: list[str],
    ) -> bool:
        pk, table = q(schema.pk), q(schema.table)
        same = " AND ".join(f"e.{q(c)} IS a.{q(c)}" for c in schema.columns if c != schema.pk)
        aliases = months.attach(live, which)
        try:
            live.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as err:
            if _locked(err):
                return False
            raise
        try:
            for month in which:
                for chunk in _chunks(batch.archived[month]):
                    batch.deleted += live.execute(
                        f"DELETE FROM main.{table} WHERE {pk} IN ("
                        f"SELECT e.{pk} FROM main.{table} e "
                        f"JOIN {aliases[month]}.{table} a ON a.{pk} = e.{pk} "
                        f"WHERE e.{pk} IN ({_marks(len(chunk))}) AND {same})",
                        chunk,
                    ).rowcount
            live.execute("COMMIT")
        except BaseException:
            live.execute("ROLLBACK")
            raise
        return True

    def _settle(
        self, live: sqlite3.Connection, batch: _Batch, schema: EventSchema, months: MonthDbs
    ) -> None:
        """Count what moved. A row still live after its delete was updated by the
        application after it was copied: the copy this batch made is obsolete and
        goes, so the next pass archives the row as it is now. (A copy made earlier,
        by a pass that crashed, stays: the next pass reports the two as a
        conflict.) A row the application deleted meanwhile is simply gone."""
        pk, table = q(schema.pk), q(schema.table)
        ids = batch.ids
        still: set[int] = set()
        for chunk in _chunks(ids) if batch.deleted < len(ids) else ():
            sql = f"SELECT {pk} FROM main.{table} WHERE {pk} IN ({_marks(len(chunk))})"
            still.update(r[0] for r in live.execute(sql, chunk))
        for row_id in still:
            self.report.kept_changed += 1
            month = batch.inserted.pop(row_id, None)
            conn = months.get(month) if month else None
            if conn is not None:
                conn.execute(f"DELETE FROM main.{table} WHERE {pk} = ?", (row_id,))
        if still:
            for month, month_ids in batch.archived.items():
                batch.archived[month] = [i for i in month_ids if i not in still]
        moved = sum(1 for i in ids if i in batch.inserted and i not in still)
        self.report.moved += moved
        self.report.already_archived += len(ids) - len(still) - moved


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
    on_batch: Callable[[BatchDone], None] = lambda _b: None,
    on_checkpoint: Callable[[CheckpointResult], None] = lambda _r: None,
) -> MoveReport:
    """Run the event phase on a worker thread. With a manifest, rows under a restore
    hold stay live and every checkpoint is recorded in it. ``on_batch`` and
    ``on_checkpoint`` are called on the event loop."""
    loop = asyncio.get_running_loop()
    cancel = cancel or CancelToken()
    now = now_ms if now_ms is not None else time.time_ns() // 1_000_000
    held = await manifest.held_event_rows(now) if manifest else set()
    records: list[asyncio.Task[None]] = []

    def sync_step(name: StepName, info: dict[str, Any]) -> None:
        asyncio.run_coroutine_threadsafe(step(name, info), loop).result()

    def checkpoint_done(result: CheckpointResult) -> None:
        if manifest is not None:
            records.append(loop.create_task(manifest.add_checkpoint(result)))
        on_checkpoint(result)

    mover = EventMover(
        settings,
        events_dir,
        now_ms=now,
        held=held,
        cancel=cancel,
        step=sync_step,
        on_batch=lambda b: _post(loop, on_batch, b),
        on_checkpoint=lambda r: _post(loop, checkpoint_done, r),
    )
    try:
        return await in_thread(cancel, mover.run)
    finally:
        await asyncio.gather(*records)
