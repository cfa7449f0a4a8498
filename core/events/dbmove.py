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
     ``MoveDelete._delete_month``); if there are any (the application updated a
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
  checker, or inside the DELETE: ``MoveDelete._delete_month``). A crash
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
  log starts over (``MovePace._catch_up``). Its own commits to live are
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
once, as a ``MoveRun``.

Each part is a module of its own: the run's shared state (moverun.py), steps 1
and 2 (movecopy.py), step 3 (movedelete.py), the pace of the deletes and the
WAL's catch-up (movepace.py), the month DBs (monthdbs.py) and the checker
(movechecker.py); this one sets a run up, runs the batches one ahead, and
announces the steps.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from concurrent import futures
from contextlib import ExitStack
from pathlib import Path

from ..base import times
from ..base.cancel import Cancelled, CancelToken, in_thread
from ..base.config import Settings
from ..base.ioerror import naming_db
from ..base.steps import StepHook, no_step, thread_step
from ..base.stream import BatchMoved, CheckpointRan
from ..store.checkpointlog import record_checkpoint
from ..store.manifest import Manifest
from ..store.restoredrows import restored_row_ids
from .checkpoint import LiveCheckpointer, WalIndex, wal_bytes
from .eventschema import (
    EventSchema,
    SqlCondition,
    check_delete_effects,
    discover,
    journal_mode,
    month_of_ms,
    open_live,
    q,
)
from .monthdbs import MMAP_BYTES, MonthDbs
from .movechecker import Checker
from .movecopy import MoveCopy
from .movedelete import MoveDelete
from .moverun import Batch, MoveReport, MoveRun, T, marks
from .readshare import ChangeShare

# Consecutive locked deletes after which no more batches are read this phase.
MAX_LOCKED_BATCHES = 3


class EventMover(MoveCopy, MoveDelete):
    """One event phase: the batches run one ahead, each step in its module."""

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

    def _open(self, closing: ExitStack) -> MoveRun:
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
        return MoveRun(
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
        sql = f"{q(schema.kind)} IN ({marks(len(self._kinds))}) AND {schema.eligible_sql('?')}"
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
            kinds = SqlCondition(f"{q(schema.kind)} IN ({marks(len(self._kinds))})", self._kinds)
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

    def _loop(self, run: MoveRun) -> None:
        """The batches, one ahead: batch N+1 is read and copied, and its copy's
        fsync started on the syncer thread, before batch N is deleted, so that
        the month DB's fsync runs while the delete holds live. The steps are
        announced in order all the same (N deleted, then N+1 archived, once
        its fsync is done). Cancelled, the batch copied ahead is finished."""
        after = 0
        locked_in_a_row = 0
        retry: list[Batch] = []
        pending: Batch | None = None  # archived and announced, not yet deleted
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
        self, run: MoveRun, after: int
    ) -> tuple[Batch, futures.Future[None]] | None:
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

    def _delete_and_tell(self, run: MoveRun, batch: Batch) -> bool:
        """Step 3 of a batch archived, announced; False when live stayed locked
        (the batch is then in both places, to retry)."""
        deleted = self._delete(run, batch)
        self.step("batch_deleted", batch.info)
        self._progress(run, batch, locked=not deleted)
        return deleted

    def _progress(self, run: MoveRun, batch: Batch, *, locked: bool) -> None:
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


def _last_checkpoint(checkpointer: LiveCheckpointer) -> None:
    """Wait for a checkpoint in progress, run one more, and close."""
    checkpointer.wait_idle(checkpointer.timeout_s)
    if checkpointer.request():
        checkpointer.wait_idle(checkpointer.timeout_s)
    checkpointer.close()


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
