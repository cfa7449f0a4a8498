"""The backlog, without writing anything: eligible files per unit and eligible event
rows per kind and month.

The plan never takes the lock and never writes: files are scanned (scan.py), the
live database is opened read-only. Counting rows uses one grouped query; with an
index on (kind, ts) SQLite answers it from the index alone, and the plan says
which index it used, or that there was none and the whole table was scanned.
``PlanReport`` is what ``coldkeep plan`` shows: the backlog beside what recovery
would settle (its scan, which changes nothing).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from ..base import times
from ..base.config import Settings
from ..base.layout import Layout
from ..base.times import NS_PER_MS
from ..events.eventschema import (
    EventSchema,
    EventsError,
    KindsSeen,
    SqlCondition,
    check_delete_effects,
    discover,
    open_live,
    q,
    table_kinds,
)
from ..files.recovery import RecoveryReport
from ..files.scan import FileScan, SkipReason, scan_files
from ..store.manifest import Manifest
from ..store.restoredrows import restored_row_ids


@dataclass(frozen=True)
class UnitBacklog:
    unit: str
    files: int
    bytes: int
    oldest_mtime_ns: int


@dataclass(frozen=True)
class MonthBacklog:
    kind: str
    month: str
    rows: int
    approx_bytes: int


@dataclass
class EventsPlan:
    months: list[MonthBacklog] = field(default_factory=list)
    unparsable: int = 0
    held: int = 0  # eligible rows left live because a restore put them back
    index: str | None = None
    note: str = ""
    kinds: KindsSeen | None = None  # the table's kinds beside those archived

    @property
    def rows(self) -> int:
        return sum(m.rows for m in self.months)

    @property
    def approx_bytes(self) -> int:
        return sum(m.approx_bytes for m in self.months)


@dataclass
class Plan:
    units: list[UnitBacklog]
    skipped: Counter[SkipReason]
    events: EventsPlan | None  # None: no state_db configured
    events_error: str | None = None
    scan: FileScan | None = None

    @property
    def files(self) -> int:
        return sum(u.files for u in self.units)

    @property
    def bytes(self) -> int:
        return sum(u.bytes for u in self.units)


def units_of(scan: FileScan) -> list[UnitBacklog]:
    per: dict[str, list[int]] = {}
    for c in scan.eligible:
        acc = per.setdefault(c.unit, [0, 0, c.identity.mtime_ns])
        acc[0] += 1
        acc[1] += c.identity.size
        acc[2] = min(acc[2], c.identity.mtime_ns)
    return [UnitBacklog(u, n, b, m) for u, (n, b, m) in sorted(per.items())]


def _index_used(conn: sqlite3.Connection, sql: str, params: dict[str, object]) -> str | None:
    for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params):
        detail = str(row[3])
        for marker in ("USING COVERING INDEX ", "USING INDEX "):
            if marker in detail:
                return detail.split(marker, 1)[1].split(" ", 1)[0]
    return None


def _avg_row_bytes(conn: sqlite3.Connection, schema: EventSchema) -> float:
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    rows = conn.execute(f"SELECT count(*) FROM {q(schema.table)}").fetchone()[0]
    return (pages - free) * size / rows if rows else 0.0


def plan_events(settings: Settings, *, now_ms: int, restored: set[int]) -> EventsPlan:
    """Eligible rows per kind and month, read-only. Raises ``EventsError``."""
    assert settings.state_db is not None
    cfg = settings.events
    conn = open_live(settings.state_db, busy_timeout_s=cfg.busy_timeout_ms / 1000, readonly=True)
    try:
        schema = discover(conn, settings.state_db, cfg)
        check_delete_effects(conn, schema, cfg)  # a pass would refuse: so does the plan
        kinds = sorted(cfg.kinds) if cfg.kinds is not None else []
        params: dict[str, object] = {f"k{i}": k for i, k in enumerate(kinds)}
        params["cutoff"] = schema.cutoff(now_ms, cfg.min_age_days)
        # None: every kind is archived, and the condition has no kind in it.
        of_kinds = (
            f"{q(schema.kind)} IN ({', '.join(f':k{i}' for i in range(len(kinds)))}) AND "
            if cfg.kinds is not None
            else ""
        )
        table, pk = q(schema.table), q(schema.pk)
        where = (
            f"{of_kinds}{schema.eligible_sql()} "
            f"AND {pk} < (SELECT max({pk}) FROM {table})"  # as dbmove: the last row stays
        )
        sql = (
            f"SELECT {q(schema.kind)}, {schema.month_sql()}, count(*) "
            f"FROM {q(schema.table)} WHERE {where} GROUP BY 1, 2 ORDER BY 2, 1"
        )
        plan = EventsPlan(index=_index_used(conn, sql, params))
        plan.kinds = KindsSeen(tuple(table_kinds(conn, schema)), cfg.kinds)
        if plan.index is None:
            plan.note = (
                f"no index on ({schema.kind}, {schema.ts}): the whole table was scanned; "
                f"CREATE INDEX ON {schema.table} ({schema.kind}, {schema.ts}) makes this fast"
            )
        counts = Counter({(k, m): n for k, m, n in conn.execute(sql, params)})
        restored_ids = sorted(restored)
        for i in range(0, len(restored_ids), 500):
            chunk = restored_ids[i : i + 500]
            marks = ", ".join(f":h{j}" for j in range(len(chunk)))
            hp = params | {f"h{j}": h for j, h in enumerate(chunk)}
            restored_sql = sql.replace(" WHERE ", f" WHERE {q(schema.pk)} IN ({marks}) AND ", 1)
            for k, m, n in conn.execute(restored_sql, hp):
                counts[(k, m)] -= n
                plan.held += n
        avg = _avg_row_bytes(conn, schema)
        plan.months = [
            MonthBacklog(k, m, n, int(n * avg)) for (k, m), n in sorted(counts.items()) if n > 0
        ]
        # Index ranges where the time stamps are numbers (as the mover counts
        # them): no walk of every row of the kinds.
        kind_of = None
        if cfg.kinds is not None:
            kind_of = SqlCondition(f"{q(schema.kind)} IN ({', '.join('?' * len(kinds))})", kinds)
        bad = schema.unparsable_of_kinds(kind_of)
        sql = f"SELECT count(*) FROM {q(schema.table)} WHERE {bad.sql}"
        plan.unparsable = conn.execute(sql, bad.params).fetchone()[0]
        return plan
    finally:
        conn.close()


async def make_plan(
    settings: Settings, manifest: Manifest | None = None, *, now_ms: int | None = None
) -> Plan:
    """The whole backlog. What a restore put back and passes leave alone comes
    from the manifest when one is given, as do the sources archived already whose
    removal is pending (recovery's, or refused: an immutable file), which a pass
    leaves out too."""
    now = now_ms if now_ms is not None else times.now_ms()
    in_grace = await manifest.relpaths_in_grace(now) if manifest else set()
    restored = await restored_row_ids(manifest, now) if manifest else set()
    scan = await asyncio.to_thread(scan_files, settings, now_ns=now * NS_PER_MS, in_grace=in_grace)
    if manifest is not None:
        pending = {e.relpath for e in await manifest.entries_pending_unlink()}
        scan.eligible = [c for c in scan.eligible if c.relpath not in pending]
    plan = Plan(units_of(scan), scan.skipped, None, scan=scan)
    if settings.state_db is not None:
        try:
            plan.events = await asyncio.to_thread(
                plan_events, settings, now_ms=now, restored=restored
            )
        except EventsError as err:
            plan.events_error = str(err)
    return plan


@dataclass
class PlanReport:
    """The backlog, and what recovery would settle (a dry run)."""

    plan: Plan
    recovery: RecoveryReport

    def to_dict(self, layout: Layout) -> dict[str, Any]:
        p = self.plan
        events = None
        if p.events is not None:
            events = {
                "rows": p.events.rows,
                "approx_bytes": p.events.approx_bytes,
                "unparsable": p.events.unparsable,
                "held": p.events.held,
                "index": p.events.index,
                "note": p.events.note,
                "kinds": None if p.events.kinds is None else p.events.kinds.to_dict(),
                "months": [asdict(m) for m in p.events.months],
            }
        rec = self.recovery
        return {
            "files": {
                "eligible": p.files,
                "bytes": p.bytes,
                "skipped": dict(p.skipped),
                "units": [asdict(u) for u in p.units],
            },
            "events": events,
            "events_error": p.events_error,
            "recovery": {
                "partials": [layout.rel(x) for x in rec.partials],
                "restore_partials": [str(x) for x in rec.restore_partials],
                "orphans": [{"gz": layout.rel(o.gz), "relpath": o.relpath} for o in rec.orphans],
                "missing": [e.gz_path for e in rec.missing],
                "sources_to_unlink": rec.sources_unlinked,
                "passes_interrupted": rec.interrupted,
                "busy": rec.busy,
                "in_flight": rec.in_flight,
            },
        }
