"""The stats time series (``stats``): one row of archive and backlog totals each
time the ``stats`` job runs (sched/daemon.py), for trends."""

from __future__ import annotations

from collections.abc import Mapping

from ..base.times import DAY_MS
from .manifest import Manifest

COLUMNS = ("entries", "bytes", "gz_bytes", "backlog_files", "backlog_bytes", "backlog_rows")


async def record(manifest: Manifest, at: int, totals: Mapping[str, int]) -> None:
    """One row: ``totals`` has a value for each of ``COLUMNS``."""
    await manifest.run(
        f"INSERT INTO stats (at, {', '.join(COLUMNS)}) VALUES (?, {', '.join('?' * len(COLUMNS))})",
        (at, *(totals[c] for c in COLUMNS)),
    )


async def last_by_day(manifest: Manifest, since: int) -> list[tuple[int, int, int]]:
    """(UTC day number, backlog bytes, backlog files) of each day's last row from
    ``since`` (ms) on, in day order; days without a row left out."""
    # SQLite takes a bare column of an aggregate query from the row that gave
    # max(): each day's last sample, in one pass.
    rows = await manifest.rows(
        f"SELECT at / {DAY_MS} AS day, max(at), backlog_bytes, backlog_files FROM stats "
        "WHERE at >= ? GROUP BY day ORDER BY day",
        [since],
    )
    return [(int(d), int(b), int(f)) for d, _, b, f in rows]


async def backlog(manifest: Manifest) -> tuple[int, int, int, int | None]:
    """The newest row's backlog (files, bytes, rows) and since when it has stood:
    the first row after the last one with none (None: none now, or no rows)."""
    newest = await manifest.rows(
        "SELECT backlog_files, backlog_bytes, backlog_rows FROM stats ORDER BY at DESC LIMIT 1"
    )
    if not newest:
        return 0, 0, 0, None
    files, size, rows = (int(v) for v in newest[0])
    [(since,)] = await manifest.rows(
        "SELECT min(at) FROM stats WHERE at > coalesce((SELECT max(at) FROM stats "
        "WHERE backlog_files = 0 AND backlog_rows = 0), -1)"
    )
    return files, size, rows, None if since is None else int(since)
