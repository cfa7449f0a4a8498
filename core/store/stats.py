"""The stats time series (``stats``): one row of archive and backlog totals each
time the ``stats`` job runs (sched/daemon.py), for trends."""

from __future__ import annotations

from collections.abc import Mapping

from .manifest import Manifest

COLUMNS = ("entries", "bytes", "gz_bytes", "backlog_files", "backlog_bytes", "backlog_rows")


async def record(manifest: Manifest, at: int, totals: Mapping[str, int]) -> None:
    """One row: ``totals`` has a value for each of ``COLUMNS``."""
    await manifest.run(
        f"INSERT INTO stats (at, {', '.join(COLUMNS)}) VALUES (?, {', '.join('?' * len(COLUMNS))})",
        (at, *(totals[c] for c in COLUMNS)),
    )
