"""Event rows back from their month databases into the live table, never
overwriting anything.

Invariants:
- Each row is recorded as restored (``store/restoredrows.py``, for ``grace_days``,
  the config's ``hold_days``) BEFORE it is inserted, so a crash in between can
  never let a pass move it straight back.
- A row goes back only where live has no row with its id; a live row with the
  same content is counted as already there, one with other content is a
  conflict: reported, never overwritten.
- Each batch goes back in one short ``BEGIN IMMEDIATE`` transaction, under the
  share with the queries that read event rows (readshare.py).
- Months or kinds no archive holds are refused before the lock
  (``check_selection``), and a live table whose INSERT triggers would run on the
  rows put back is refused unless ``events.triggers = "fire"``: nothing is
  recorded or inserted then.
"""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.cancel import CancelToken, in_thread
from ..base.config import Settings
from ..base.errors import UsageError
from ..base.space import OutOfSpace, out_of_space
from ..base.times import day_of, days_after, now_ms
from ..store import expiry
from ..store.manifest import Manifest
from ..store.remoteobjects import RemoteObject, RemoteObjects
from ..store.restoredrows import keep_restored_rows
from .eventschema import (
    EventSchema,
    EventsError,
    delete_effects,
    discover,
    open_live,
    q,
    reading_month,
    rollback,
)
from .moverun import Conflict
from .query import TimeRange
from .readshare import ChangeShare


class NothingToRestore(UsageError):
    """A restore of event rows whose months or kinds no archive holds: refused
    before anything is written; the message lists what is archived."""


@dataclass
class EventsRestoreReport:
    restored: int = 0
    already_live: int = 0
    conflicts: list[Conflict] = field(default_factory=list)
    months: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)  # month -> why it was not read

    def to_dict(self) -> dict[str, Any]:
        return {
            "restored": self.restored,
            "already_live": self.already_live,
            "conflicts": [
                {"row_id": c.row_id, "month": c.month, "detail": c.detail} for c in self.conflicts
            ],
            "months": self.months,
            "refused": self.refused,
        }


@dataclass(frozen=True)
class ArchivedMonth:
    month: str
    kind: str
    rows: int


def _count_month(db: Path, kind_col: str, table: str) -> list[tuple[str, int]]:
    with reading_month(db) as conn:
        sql = f"SELECT {q(kind_col)}, count(*) FROM {q(table)} GROUP BY 1 ORDER BY 1"
        return [(str(k), int(n)) for k, n in conn.execute(sql)]


async def archived_months(settings: Settings, events_dir: Path) -> list[ArchivedMonth]:
    """What the month DBs hold, per month and kind (read-only)."""
    cfg = settings.events
    paths = await asyncio.to_thread(lambda: sorted(events_dir.glob("*.db")))
    out: list[ArchivedMonth] = []
    for path in paths:
        try:
            counts = await asyncio.to_thread(_count_month, path, cfg.kind_column, cfg.table)
        except sqlite3.DatabaseError:
            continue  # a damaged month shows as missing here; the pass reports it
        out += [ArchivedMonth(path.stem, kind, n) for kind, n in counts]
    return out


def _live_schema(settings: Settings) -> EventSchema:
    """The live table, refused (``EventsError``) when its INSERT triggers would
    run on the rows put back and the config does not say to let them."""
    assert settings.state_db is not None
    live = open_live(settings.state_db, busy_timeout_s=settings.events.busy_timeout_ms / 1000)
    try:
        schema = discover(live, settings.state_db, settings.events)
        effects = delete_effects(live, schema.table)
        refused = effects.restore_refusal(schema.db, schema.table, settings.events)
        if refused is not None:
            raise EventsError(refused)
        return schema
    finally:
        live.close()


def _month_rows(
    db: Path, schema: EventSchema, kinds: set[str] | None, span: TimeRange | None
) -> list[tuple[Any, ...]]:
    """The live table's columns, in its order, of the archived rows of ``kinds``
    whose time stamp lies in ``span``."""
    conds: list[str] = []
    params: list[Any] = []
    if kinds:
        conds.append(f"{q(schema.kind)} IN ({', '.join('?' * len(kinds))})")
        params += sorted(kinds)
    for op, bound in ((">=", span and span.start), ("<", span and span.end)):
        if bound is not None:
            conds.append(f"{schema.ts_seconds_sql()} {op} ?")
            params.append(bound)
    where = f" WHERE {' AND '.join(conds)}" if conds else ""
    with reading_month(db) as conn:
        sql = f"SELECT {schema.select_columns} FROM {q(schema.table)}{where}"
        return conn.execute(f"{sql} ORDER BY {q(schema.pk)}", params).fetchall()


def _put_back(
    settings: Settings,
    schema: EventSchema,
    rows: list[tuple[Any, ...]],
    month: str,
    report: EventsRestoreReport,
    share: ChangeShare,
) -> None:
    """Insert the rows whose id live does not have, in one short transaction,
    under the share with the queries (a query counts them once: live, or
    still only archived)."""
    assert settings.state_db is not None
    live = open_live(settings.state_db, busy_timeout_s=settings.events.busy_timeout_ms / 1000)
    try:
        with share.changing():
            live.execute("BEGIN IMMEDIATE")
            try:
                new = _new_rows(live, schema, rows, month, report)
                marks = ", ".join("?" * len(schema.columns))
                live.executemany(
                    f"INSERT INTO {q(schema.table)} ({schema.select_columns}) VALUES ({marks})",
                    new,
                )
                live.execute("COMMIT")
                report.restored += len(new)
            except BaseException as err:
                rollback(live)
                if out_of_space(err):
                    raise OutOfSpace(
                        settings.state_db,
                        err,
                        doing="putting event rows back into",
                        remedy="free space on the live database's filesystem",
                    ) from err
                raise
    finally:
        live.close()


def _new_rows(
    live: sqlite3.Connection,
    schema: EventSchema,
    rows: list[tuple[Any, ...]],
    month: str,
    report: EventsRestoreReport,
) -> list[tuple[Any, ...]]:
    """The rows whose id live does not have; those it has are counted as there
    already (the same content) or as conflicts."""
    table, pk, cols, at = q(schema.table), q(schema.pk), schema.select_columns, schema.pk_index
    ids = [r[at] for r in rows]
    have: dict[Any, tuple[Any, ...]] = {}
    for i in range(0, len(ids), 900):
        chunk = ids[i : i + 900]
        sql = f"SELECT {cols} FROM {table} WHERE {pk} IN ({', '.join('?' * len(chunk))})"
        have.update({r[at]: r for r in live.execute(sql, chunk)})
    new = []
    for row in rows:
        there = have.get(row[at])
        if there is None:
            new.append(row)
        elif there == row:
            report.already_live += 1
        else:
            report.conflicts.append(
                Conflict(
                    row[at],
                    month,
                    f"live has row {row[at]} with other content; "
                    "the archived row was not restored over it",
                )
            )
    return new


async def _expired(manifest: Manifest, months: list[str]) -> list[tuple[str, str]]:
    """Which of ``months`` retention deleted, the day it did, and until when
    the bucket's lock still keeps their snapshots (said, never read)."""
    objects, now = RemoteObjects(manifest), now_ms()
    said = []
    for month, at in await expiry.expired_months(manifest, months):
        until = max((o.retain_until or 0 for o in await objects.of_month(month)), default=0)
        kept = (
            f"; the bucket's lock keeps its snapshots until {day_of(until)}, not read"
            if until > now
            else ""
        )
        said.append((month, f"expired on {day_of(at)} (past [retention] events_days){kept}"))
    return said


def _not_fetched(obj: RemoteObject) -> str:
    bad = "" if obj.verify_error is None else f"; verify --remote found it {obj.verify_error}"
    return (
        f"{obj.month} is only in the remote tier, and its snapshot {obj.path} could not be "
        f"fetched back{bad}"
    )


async def _unknown_months(
    manifest: Manifest | None, months: list[str], available: list[str]
) -> EventsError | NothingToRestore | None:
    """The error for the months asked for that no archive holds (here, or
    shipped), saying when retention deleted any of them; None if there are none.
    Months never archived are a usage error; a month retention deleted, or one
    shipped whose snapshot could not be fetched back, is a failure to restore
    what was archived (as an expired file is)."""
    unknown = sorted(set(months) - set(available))
    if not unknown:
        return None
    have = ", ".join(available) or "none"
    expired = await _expired(manifest, unknown) if manifest is not None else []
    gone = {m for m, _ in expired}
    shipped = await RemoteObjects(manifest).latest_months() if manifest is not None else {}
    away = [shipped[m] for m in unknown if m in shipped and m not in gone]
    if away:  # the fetch before this said why
        return EventsError("; ".join(_not_fetched(o) for o in away))
    why = "".join(f"; {m} {d}" for m, d in expired)
    said = f"no archived events for {', '.join(unknown)} (archived months: {have}){why}"
    return EventsError(said) if expired else NothingToRestore(said)


async def check_selection(
    settings: Settings,
    events_dir: Path,
    manifest: Manifest | None,
    *,
    kinds: set[str] | None,
    months: list[str] | None,
) -> None:
    """Refuse (``NothingToRestore``, read-only, before the lock) months that
    neither the month DBs here nor the remote tier hold, and kinds that no month
    asked for has a row of. A month whose kinds cannot be read here (shipped
    only, or damaged) is left to the restore to say."""
    paths = await asyncio.to_thread(lambda: sorted(events_dir.glob("*.db")))
    shipped = set(await RemoteObjects(manifest).latest_months()) if manifest else set()
    if manifest is not None:  # the bucket's lock may keep an expired month's snapshots
        shipped -= {m for m, _ in await expiry.expired_months(manifest, sorted(shipped))}
    available = sorted({p.stem for p in paths} | shipped)
    error = await _unknown_months(manifest, months or [], available)
    if error is not None:
        raise error
    if not kinds:
        return
    chosen = set(months or available)
    have: set[str] = set()
    for path in paths:
        if path.stem in chosen:
            try:
                counts = await asyncio.to_thread(
                    _count_month, path, settings.events.kind_column, settings.events.table
                )
            except sqlite3.DatabaseError:
                return
            have |= {kind for kind, _ in counts}
    if chosen - {p.stem for p in paths} or kinds & have:
        return
    where = f"in {', '.join(sorted(chosen))}" if months else "in any archived month"
    raise NothingToRestore(
        f"no archived row of kind {', '.join(sorted(kinds))} {where} "
        f"(archived kinds there: {', '.join(sorted(have)) or 'none'})"
    )


async def restore_events(
    settings: Settings,
    events_dir: Path,
    manifest: Manifest,
    *,
    kinds: set[str] | None,
    months: list[str] | None,
    grace_days: float,
    span: TimeRange | None = None,
    cancel: CancelToken | None = None,
    batch_rows: int = 2000,
) -> EventsRestoreReport:
    """Put archived event rows (of ``kinds`` in ``months``, their time stamps in
    ``span``; None: all) back into the live table, each recorded as restored
    first (passes leave it alone for ``grace_days``)."""
    if settings.state_db is None:
        raise EventsError("no state_db is configured: there are no event rows to restore")
    token = cancel or CancelToken()
    schema = await in_thread(token, _live_schema, settings)
    paths = await asyncio.to_thread(lambda: sorted(events_dir.glob("*.db")))
    available = [p.stem for p in paths]
    error = await _unknown_months(manifest, months or [], available)
    if error is not None:  # shipped, and the fetch before this could not bring it back
        raise error
    report = EventsRestoreReport()
    until = days_after(now_ms(), grace_days, "hold_days")
    chosen = available if months is None else sorted(set(months))
    share = await asyncio.to_thread(ChangeShare, settings.archive_root)
    try:
        for month in [m for m in chosen if span is None or span.holds_month(m)]:
            db = events_dir / f"{month}.db"
            try:
                rows = await in_thread(token, _month_rows, db, schema, kinds, span)
            except sqlite3.DatabaseError as err:  # damaged, or a newer coldkeep's
                report.refused[month] = str(err)
                continue
            report.months.append(month)
            for i in range(0, len(rows), batch_rows):
                token.check()
                chunk = rows[i : i + batch_rows]
                await keep_restored_rows(manifest, [r[schema.pk_index] for r in chunk], until)
                await in_thread(token, _put_back, settings, schema, chunk, month, report, share)
    finally:
        share.close()
    return report
