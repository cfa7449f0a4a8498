"""The event mover's step 3: per month, the rows a batch archived deleted from
live in one short ``BEGIN IMMEDIATE`` transaction, found from the month DB's
ids in the range; only rows identical to their archived copy go, which the
checker establishes on the DELETE's own snapshot (or, when it finds any that
differ, the DELETE does itself, redone with the identity check inside it); a
copy the application's update made obsolete dropped after. Foreign keys are
enforced only around the DELETE, and only when told to fire.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager

from ..base.ioerror import DatabaseFailed
from ..base.space import OutOfSpace, out_of_space
from .eventschema import SqlCondition, rollback
from .movechecker import Checker
from .movepace import MovePace
from .moverun import Batch, MonthShare, MoveRun, is_locked, skipping, undo


class MoveDelete(MovePace):
    """Step 3: a batch's rows deleted from live, only those identical to their copy."""

    def _delete(self, run: MoveRun, batch: Batch) -> bool:
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
            # that live held then stay unless step 2 found them identical to an
            # eligible live row (conflicts among them). The checker needs the
            # same. (An archived id live did not hold then has no live row to
            # delete; one the application wrote since goes only if identical to
            # its copy, the delete's own test: nothing is lost.)
            untouched = [*batch.restored, *(m.before - m.already)]
            skip = skipping(run.live, untouched, f"a.{run.pk}")
            if run.checker is not None:
                skipping(run.checker.conn, untouched, f"a.{run.pk}")
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

    def _delete_month(self, run: MoveRun, alias: str, m: MonthShare, skip: str) -> float | None:
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
                    if is_locked(err):
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

    def _deletable(
        self, run: MoveRun, alias: str, m: MonthShare, skip: str
    ) -> tuple[SqlCondition, str]:
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
        self, run: MoveRun, where: SqlCondition, archived: str, checker: Checker | None
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
            undo(run.live)
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

    def _drop_obsolete(self, run: MoveRun, alias: str, m: MonthShare, restored: set[int]) -> None:
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
            elif not m.held_within(row_id, row_id):  # this batch's copy, now obsolete
                run.live.execute(f"DELETE FROM {alias}.{table} WHERE {pk} = ?", (row_id,))
                m.copied -= 1
                self.report.kept_changed += 1

    def _settle(self, run: MoveRun, batch: Batch) -> None:
        """Count what moved. A row still live after its delete was updated by the
        application after it was copied: the copy this batch made is obsolete and
        goes, so the next pass archives the row as it is now. (A copy made earlier,
        by a pass that crashed, stays: the next pass reports the two as a
        conflict.) A row the application deleted meanwhile is simply gone."""
        restored = set(batch.restored)
        for month, m in batch.months.items():
            # (More deleted than copied or found identical: such a row written
            # back since step 2. Look then too.)
            alias = run.months.alias(month) if m.deleted != m.copied + len(m.already) else None
            if alias is not None:
                self._drop_obsolete(run, alias, m, restored)
            self.report.moved += m.copied
            self.report.already_archived += len(m.already)
