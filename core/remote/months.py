"""Event month databases as the remote tier sees them: each month's signature
(what changes when its content may have), a consistent snapshot of it, its rows
counted; what the remote does not hold yet (``status``, the console, metrics),
and what a lost host had archived that its bucket never got (``rebuild-manifest
--from-remote``).

A month is due to ship whenever its database changed since its newest snapshot,
the month passes still add rows to as well: rows moved into it live nowhere else
until then.

Invariants:
- Read only: month databases are opened ``mode=ro``; a snapshot is SQLite's
  backup API in one step, so it holds one committed state of the month however
  a writer commits meanwhile (and the mover writes month databases only under the
  archive lock, which a ship holds too).
- A count is every row of every table of the database (a month database holds
  the events table alone): it needs no config, and a table renamed since does
  not stop a month from shipping.
- What the bucket cannot give back is known only from what the manifest
  snapshot recorded (``event_months``: each month's rows when the ship that took
  it last counted them) against each month's newest snapshot (its row count);
  rows moved after that ship are unknown to the bucket, and said nowhere.
"""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.layout import Layout
from ..events.eventschema import q
from ..store import expiry
from ..store.manifest import Manifest
from ..store.remoteobjects import RemoteObject, RemoteObjects


@dataclass(frozen=True)
class LocalMonth:
    db: Path
    sig: str  # its signature now


def signature(db: Path) -> str:
    """What changes when a month database's content may have: its size and
    mtime, and its WAL's while that holds frames. (Reading a database in WAL mode,
    as the snapshot does, leaves an empty WAL behind: that is no change.)"""
    parts = []
    for p in (db, db.with_name(db.name + "-wal")):
        try:
            st = p.stat()
        except FileNotFoundError:
            continue
        if st.st_size:
            parts.append(f"{st.st_size}:{st.st_mtime_ns}")
    return "/".join(parts)


def local_months(layout: Layout) -> dict[str, LocalMonth]:
    """Every month database under ``events/`` and its signature, in month order.
    Runs in a thread."""
    return {m: LocalMonth(db, signature(db)) for m, db in sorted(layout.event_months().items())}


def is_due(month: LocalMonth, last: RemoteObject | None) -> bool:
    """The month changed since its newest snapshot ``last``, or has none."""
    return last is None or last.source_sig != month.sig


def snapshot_db(src: Path, dest: Path) -> None:
    """A consistent copy of the database ``src`` at the new file ``dest``: SQLite's
    backup API in one step (one read transaction of ``src``). Not fsynced: a
    scratch file, read by its upload in this boot and removed after it (a session
    after a crash removes what is left), never renamed into place; the remote
    copy's durability is the remote's (a PUT, or a folder's own fsyncs)."""
    with (
        closing(sqlite3.connect(f"file:{src}?mode=ro", uri=True)) as source,
        closing(sqlite3.connect(dest)) as out,
    ):
        source.backup(out)


def count_rows(db: Path) -> int:
    """Every row of every table of the database at ``db``, read in one
    transaction."""
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        conn.execute("BEGIN")
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        return sum(int(conn.execute(f"SELECT count(*) FROM {q(t)}").fetchone()[0]) for t in tables)


# what the remote does not hold yet ---------------------------------------------------


@dataclass(frozen=True)
class PendingEvents:
    """Archived event rows the remote tier does not hold: per month, the rows its
    database has beyond its newest snapshot's (all of them without a snapshot, or
    with one shipped before snapshots were counted)."""

    months: dict[str, int] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return sum(self.months.values())


def _pending(changed: dict[str, tuple[Path, int]]) -> dict[str, int]:
    """Each changed month's rows beyond ``shipped`` (its database unreadable: left
    to the pass and the ship, which say why). Runs in a thread."""
    pending = {}
    for month, (db, shipped) in changed.items():
        try:
            rows = count_rows(db)
        except (sqlite3.Error, OSError):
            continue
        if rows > shipped:
            pending[month] = rows - shipped
    return pending


async def pending_events(layout: Layout, objects: RemoteObjects) -> PendingEvents:
    """What ``events/`` holds that no month snapshot does, read without the lock:
    only the months whose database changed since their newest snapshot are
    counted."""
    latest = await objects.latest_months()
    local = await asyncio.to_thread(local_months, layout)
    changed = {
        month: (m.db, _shipped_rows(latest.get(month)))
        for month, m in local.items()
        if is_due(m, latest.get(month))
    }
    return PendingEvents(await asyncio.to_thread(_pending, changed) if changed else {})


def _shipped_rows(last: RemoteObject | None) -> int:
    return (last.row_count or 0) if last is not None else 0


# what a lost host had that its bucket never got ---------------------------------------


@dataclass(frozen=True)
class MonthLost:
    """An event month the lost host had archived ``rows`` of, and whose newest
    snapshot holds only ``shipped_rows`` (0: none was ever shipped)."""

    month: str
    rows: int
    shipped_rows: int

    @property
    def lost(self) -> int:
        return self.rows - self.shipped_rows

    def to_dict(self) -> dict[str, Any]:
        return {"month": self.month, "rows": self.rows, "shipped_rows": self.shipped_rows}


async def months_lost(layout: Layout, manifest: Manifest) -> list[MonthLost]:
    """The months ``manifest`` (a snapshot, placed on a new host) says were
    archived with more rows than their newest snapshot holds, among those with no
    database here (one that is here is not lost); expired months left out. A
    snapshot shipped before counts were recorded tells nothing: left out."""
    objects = RemoteObjects(manifest)
    counted = await objects.month_counts()
    if not counted:
        return []
    latest = await objects.latest_months()
    expired = {m for m, _ in await expiry.expired_months(manifest, sorted(counted))}
    here = await asyncio.to_thread(lambda: set(layout.event_months()))
    lost = []
    for month, count in sorted(counted.items()):
        if month in expired or month in here:
            continue
        last = latest.get(month)
        shipped = 0 if last is None else last.row_count
        if shipped is not None and shipped < count.rows:
            lost.append(MonthLost(month, count.rows, shipped))
    return lost
