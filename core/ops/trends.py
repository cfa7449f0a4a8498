"""What the console's Trends screen charts, read from what coldkeep already
records: the bytes archived each day (the manifest's entries), the backlog each
day (the ``stats`` series the scheduler's stats job writes), the last passes'
durations (the pass log), the event rows of each month database, and the
archive's gzip bytes by tier (here, shipped, remote-only, expired).

Invariants:
- Read only: nothing here writes, takes the lock or touches a live file; the
  manifest may be opened read-only, and a month database is opened ``mode=ro``.
- Every manifest read is one aggregate statement through the manifest's own
  connection (its thread), never one row per entry in Python: a million entries
  cost a range of an index, not a million rows carried to the loop. Month
  databases are counted in a worker thread.
- ``days`` always holds every day of the window, oldest first, whether or not
  anything happened on it: a chart's x axis is the list itself.
"""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from ..base.errors import UsageError
from ..base.layout import Layout
from ..base.times import DAY_MS, DAY_S, day_name
from ..remote.months import count_rows, signature
from ..store import passlog, stats
from ..store.entries import KEPT_STATUSES
from ..store.manifest import Manifest
from ..store.remoteobjects import MonthCount, RemoteObjects

PASSES_SHOWN = 50
MAX_DAYS = 3660  # ten years: beyond it a per-day chart says nothing more


@dataclass(frozen=True)
class Trends:
    """Per-day series over the last ``len(days)`` UTC days, the last passes, the
    event rows per month and the bytes per tier (docs/json.md, "trends")."""

    days: list[str]  # "YYYY-MM-DD", oldest first, every day present
    bytes_in: list[int]  # per day: original bytes of files archived that day
    bytes_out: list[int]  # per day: their gzip bytes
    backlog_bytes: list[int | None]  # per day: its last stats sample's (None: no sample)
    backlog_files: list[int | None]
    pass_started: list[int]  # the last PASSES_SHOWN ended passes' starts, UTC s, oldest first
    pass_seconds: list[float]  # each one's duration
    month_rows: list[tuple[str, int]]  # rows in each local month database, oldest first
    tiers: dict[str, int]  # gzip bytes: local, shipped, remote_only, expired
    pass_status: list[str] = field(default_factory=list)  # each pass's: ok, failed, …

    def ratio(self) -> list[float | None]:
        """Per day: gzip bytes over original bytes (None: nothing archived)."""
        return [o / i if i else None for i, o in zip(self.bytes_in, self.bytes_out, strict=True)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "days": self.days,
            "bytes_in": self.bytes_in,
            "bytes_out": self.bytes_out,
            "ratio": self.ratio(),
            "backlog_bytes": self.backlog_bytes,
            "backlog_files": self.backlog_files,
            "passes": {
                "started": self.pass_started,
                "seconds": self.pass_seconds,
                "status": self.pass_status,
            },
            "month_rows": [{"month": m, "rows": n} for m, n in self.month_rows],
            "tiers": self.tiers,
        }


async def read_trends(manifest: Manifest, layout: Layout, *, days: int = 30, now_s: int) -> Trends:
    """The trends of the archive ``manifest`` describes over the ``days`` UTC days
    ending with the one ``now_s`` falls in; the month databases under
    ``layout``'s ``events/``."""
    if not 1 <= days <= MAX_DAYS:
        raise UsageError(f"days = {days}: trends cover 1 to {MAX_DAYS} days")
    first = now_s // DAY_S - days + 1
    since = first * DAY_MS
    slot = {first + k: k for k in range(days)}
    bytes_in, bytes_out = [0] * days, [0] * days
    for day, size, gz_size in await manifest.archived_by_day(since):
        if day in slot:  # an archived_at in the future (a clock set back) is left out
            bytes_in[slot[day]], bytes_out[slot[day]] = size, gz_size
    backlog_bytes: list[int | None] = [None] * days
    backlog_files: list[int | None] = [None] * days
    for day, size, files in await stats.last_by_day(manifest, since):
        if day in slot:
            backlog_bytes[slot[day]], backlog_files[slot[day]] = size, files
    spans = await passlog.finished_spans(manifest, PASSES_SHOWN)
    return Trends(
        days=[day_name(first + k) for k in range(days)],
        bytes_in=bytes_in,
        bytes_out=bytes_out,
        backlog_bytes=backlog_bytes,
        backlog_files=backlog_files,
        pass_started=[start // 1000 for start, _, _ in spans],
        pass_seconds=[max(end - start, 0) / 1000 for start, end, _ in spans],
        month_rows=await month_rows(manifest, layout),
        tiers=await tier_bytes(manifest),
        pass_status=[status for _, _, status in spans],
    )


async def tier_bytes(manifest: Manifest) -> dict[str, int]:
    """The entries' gzip bytes by where the gzip is: ``local`` (here only, not
    shipped), ``shipped`` (here and in the remote tier), ``remote_only`` (its
    local copy dropped), ``expired`` (deleted by retention). A ``missing`` gzip
    counts in none."""
    counts = await manifest.status_counts()  # one scan of the status index
    kept = sum(counts.get(s, (0, 0, 0))[2] for s in KEPT_STATUSES)
    shipped, remote_only = await RemoteObjects(manifest).kept_bytes_shipped()
    return {
        "local": kept - shipped - remote_only,
        "shipped": shipped,
        "remote_only": remote_only,
        "expired": counts.get("expired", (0, 0, 0))[2],
    }


async def month_rows(manifest: Manifest, layout: Layout) -> list[tuple[str, int]]:
    """The rows of each month database under ``events/``, in month order: as the
    last ship counted them (``event_months``) while the database's signature is
    still the one counted, else counted now. An expired month has no database
    and is not listed; one that cannot be read counts 0."""
    counted = await RemoteObjects(manifest).month_counts()
    return await asyncio.to_thread(_count_months, layout, counted)


def _count_months(layout: Layout, counted: dict[str, MonthCount]) -> list[tuple[str, int]]:
    found = []
    for month, db in layout.event_months().items():
        known = counted.get(month)
        try:
            same = known is not None and known.sig == signature(db)
            found.append((month, known.rows if known is not None and same else count_rows(db)))
        except (OSError, sqlite3.Error):
            # The chart shows the month empty; the pass, ship and doctor say why.
            found.append((month, 0))
    return found
