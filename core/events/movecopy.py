"""The event mover's steps 1 and 2 (dbmove.py tells the whole batch): the next
eligible row found and its batch's id range; per month, the rows the month DB
holds already with the same content left, the same id with other content a
conflict kept in both, the rest copied by ``INSERT … SELECT`` over the range
(the first month's copy stopping at ``events.batch_rows``, a range of mixed
months copied a month at a time), committed, and fsynced on the month DBs'
thread. Rows a restore put back are left out everywhere.
"""

from __future__ import annotations

import bisect
import sqlite3
from array import array
from contextlib import suppress

from ..base.ioerror import DatabaseFailed, naming_db
from ..base.space import OutOfSpace, out_of_space
from .eventschema import SqlCondition
from .moverun import (
    CONFLICTS_LISTED,
    Batch,
    Conflict,
    First,
    Mixed,
    MonthShare,
    MoverState,
    MoveRun,
    Span,
    skipping,
    undo,
)


def end_at(m: MonthShare, last: int) -> None:
    """Cut a month's share of a batch at ``last``: the rows after it, found
    archived or conflicting, are the next batch's."""
    m.hi = last
    m.held = m.held[: bisect.bisect_right(m.held, last)]
    m.before = {i for i in m.before if i <= last}
    m.already = {i for i in m.already if i <= last}
    m.conflicts = {i for i in m.conflicts if i <= last}


class MoveCopy(MoverState):
    """Steps 1 and 2: a batch found and copied into its months."""

    def _first(self, run: MoveRun, after: int) -> First | None:
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
        return First(row_id, month, min(row_id + self._ids - 1, largest - 1))

    def _months_in(self, run: MoveRun, lo: int, hi: int) -> list[Span]:
        """The months of the eligible rows in [lo, hi]."""
        pk = run.pk
        sql = (
            f"SELECT {run.schema.month_sql()}, count(*), min({pk}), max({pk}) "
            f"FROM {run.table} NOT INDEXED WHERE {pk} BETWEEN ? AND ? AND "
            f"{run.eligible.sql} GROUP BY 1"
        )
        return [Span(*r) for r in run.live.execute(sql, [lo, hi, *run.eligible.params])]

    def _restored_in(self, lo: int, hi: int) -> list[int]:
        ids = self._restored
        return ids[bisect.bisect_left(ids, lo) : bisect.bisect_right(ids, hi)]

    def _count_restored(self, run: MoveRun, restored: list[int]) -> int:
        restored_ids = skipping(run.live, restored, run.pk)
        sql = f"SELECT count(*) FROM {run.table} WHERE {run.eligible.sql} AND {restored_ids}"
        return int(run.live.execute(sql, run.eligible.params).fetchone()[0])

    def _archive_batch(self, run: MoveRun, first: First) -> Batch:
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
            with suppress(Mixed):  # and None: the month is refused
                m = self._archive_month(run, month, where, (lo, hi), restored, self.cfg.batch_rows)
        spans: list[Span] = []
        if m is not None:
            hi = m.hi
        else:
            with naming_db(self.db, "reading the next batch of event rows"):
                hi = self._batch_end(run, lo, hi)
                spans = self._months_in(run, lo, hi)
        batch = Batch(self.report.batches, lo, hi, self._restored_in(lo, hi))
        if batch.restored:
            self.report.held += self._count_restored(run, batch.restored)
        if month is not None and m is not None:
            self._conflicts(run, month, m)
            batch.months[month] = m
            self.report.months.add(month)
        self._archive(run, spans, batch)
        return batch

    def _alone(self, run: MoveRun, alias: str, m: MonthShare, end: int, limit: int) -> int | None:
        """Where the month's copy, which reached ``end``, must stop for the
        batch to hold this month's rows alone: None when no other month's
        eligible row lies in [m.lo, end]; else the id before the first one,
        this copy's rows after it taken out again (a month's turn: the
        batch ends with the month, and the next one starts the next month
        with one delete, not two). ``Mixed`` when that would leave few rows
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
        if other - m.lo < limit // 8 or m.held_within(other, end):
            raise Mixed
        cur = run.live.execute(
            f"DELETE FROM {alias}.{table} WHERE {pk} BETWEEN ? AND ?", (other, end)
        )
        m.copied -= int(cur.rowcount)
        return other - 1

    def _batch_end(self, run: MoveRun, lo: int, hi: int) -> int:
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

    def _archive(self, run: MoveRun, spans: list[Span], batch: Batch) -> None:
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
        run: MoveRun,
        month: str,
        where: SqlCondition,
        span: tuple[int, int],
        restored_ids: list[int],
        limit: int | None = None,
    ) -> MonthShare | None:
        """One month's share of the batch in ``span``: what the month DB holds
        already, then a copy of the rest (at most ``limit`` rows, in id order:
        the month's range then ends at the last one copied), committed; None
        when the month is refused. With a limit, the range ends before another
        month's first eligible row in it (``_alone``), or ``Mixed`` (rolled
        back) when it cannot."""
        alias = run.months.alias(month)
        if alias is None:
            return None
        m = MonthShare(*span, where)
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
            undo(run.live)
            if out_of_space(err):
                raise OutOfSpace(path, err, doing="copying event rows into") from err
            if isinstance(err, sqlite3.Error):
                # Reading live or writing the month: SQLite does not say which.
                doing = f"copying event rows into it from {self.db}; rolled back"
                raise DatabaseFailed(path, err, doing) from err
            raise
        if last is not None:
            end_at(m, last)
        return m

    def _conflicts(self, run: MoveRun, month: str, m: MonthShare) -> None:
        name = run.months.path(month).name
        report = self.report
        report.conflicts_total += len(m.conflicts)
        room = max(0, CONFLICTS_LISTED - len(report.conflicts))
        report.conflicts += [
            Conflict(
                row_id,
                month,
                f"row {row_id} is archived in {name} with other content; both copies are "
                "kept (compare them and remove one)",
            )
            for row_id in sorted(m.conflicts)[:room]
        ]

    def _present(self, run: MoveRun, alias: str, m: MonthShare, restored: set[int]) -> None:
        """Fill ``m.held``, ``m.before``, ``m.already`` and ``m.conflicts``: the
        month DB's rows in this batch's range, those live holds too, and which of
        this month's eligible live rows they match. Usually there are none: one
        range probe says so. A range that starts at a live row under an archived
        id (a conflict: it stays live, so every pass starts a batch there) holds
        a whole window of archived rows: ``held`` keeps their ids compactly, and
        only the few live holds too are sets the copy and the delete skip."""
        table, pk, live = run.table, run.pk, run.live
        in_range = f"FROM {alias}.{table} WHERE {pk} BETWEEN ? AND ?"
        if not live.execute(f"SELECT EXISTS (SELECT 1 {in_range})", (m.lo, m.hi)).fetchone()[0]:
            return
        # Two walks of the window, not one LEFT JOIN that says both: a bare id
        # scan, then a join that yields only the few live holds; the one walk,
        # a Python loop over pairs, took 0.28 s a pass over 4,000 conflicts
        # against 0.19.
        rows = live.execute(f"SELECT {pk} {in_range} ORDER BY {pk}", (m.lo, m.hi))
        m.held = array("q", (r[0] for r in rows))
        m.before = {
            r[0]
            for r in live.execute(
                f"SELECT a.{pk} FROM {alias}.{table} a JOIN main.{table} l ON l.{pk} = a.{pk} "
                f"WHERE a.{pk} BETWEEN ? AND ?",
                (m.lo, m.hi),
            )
        }
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
        self, run: MoveRun, alias: str, m: MonthShare, skip_ids: list[int], limit: int | None
    ) -> tuple[int, int | None]:
        """Copy this month's eligible rows in the range from live into the month
        DB, but for ``skip_ids``, at most ``limit`` of them in id order; returns
        how many, and the last id copied when the limit stopped the copy (None
        when every row of the range was copied)."""
        table, pk, cols = run.table, run.pk, run.schema.select_columns
        skip = skipping(run.live, skip_ids, pk)
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
