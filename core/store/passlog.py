"""The pass log (``passes``): one row per pass in mode on, ``running`` from its
start and settled with its summary (``PassSummary.to_dict()``, docs/json.md) and
status when it ends.

Invariants:
- A row is written before the pass does anything, so a pass whose process died
  shows as ``running``; only a caller holding the archive lock may settle such
  rows (``interrupt``: then no other pass can be alive).
- An interrupted pass's summary says what the manifest shows it archived: the
  entries recorded from its start until the next action took the lock.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from . import audit
from .manifest import Manifest


@dataclass(frozen=True)
class PassRecord:
    id: int
    started_at: int
    finished_at: int | None
    mode: str
    origin: str
    status: str
    summary: dict[str, Any]


async def start(manifest: Manifest, mode: str, origin: str, at: int) -> int:
    return await manifest.insert(
        "INSERT INTO passes (started_at, mode, origin) VALUES (?, ?, ?)", (at, mode, origin)
    )


async def finish(
    manifest: Manifest, pass_id: int, status: str, summary: dict[str, Any], at: int
) -> None:
    await manifest.run(
        "UPDATE passes SET finished_at = ?, status = ?, summary = ? WHERE id = ?",
        (at, status, json.dumps(summary, sort_keys=True), pass_id),
    )


async def interrupt(manifest: Manifest, current: int | None, at: int) -> list[PassRecord]:
    """Settle every pass still ``running`` but ``current`` as ``interrupted``: only
    a caller holding the archive lock may ask, and then no other pass can be
    alive. Each one's summary says what the manifest shows it archived: the
    entries recorded from its start until the next action took the lock (the
    audit's next row; ``at`` when there is none)."""
    stuck = [p for p in await recent(manifest, -1, "running") if p.id != current]
    for p in stuck:
        next_action = await audit.next_after(manifest, p.started_at)
        until = at if next_action is None else next_action
        files, size, gz_size = await manifest.archived_between(p.started_at, until)
        summary = {
            **p.summary,
            "files": {"archived": files, "bytes_in": size, "bytes_out": gz_size},
            "problems": ["the process died mid-pass; recovery settled what it left behind"],
        }
        await finish(manifest, p.id, "interrupted", summary, until)
    return stuck


async def recent(
    manifest: Manifest, limit: int = 20, status: str | None = None
) -> list[PassRecord]:
    """The last ``limit`` passes (-1: all), of ``status`` if given, newest first."""
    rows = await manifest.rows(
        "SELECT id, started_at, finished_at, mode, origin, status, summary FROM passes "
        "WHERE coalesce(?, status) = status ORDER BY id DESC LIMIT ?",
        (status, limit),
    )
    return [
        PassRecord(r[0], r[1], r[2], r[3], r[4], r[5], json.loads(r[6]) if r[6] else {})
        for r in rows
    ]


async def finished_spans(manifest: Manifest, limit: int) -> list[tuple[int, int, str]]:
    """(started_at, finished_at, status) of the last ``limit`` passes that ended,
    however they ended, oldest first."""
    rows = await manifest.rows(
        "SELECT started_at, finished_at, status FROM passes WHERE finished_at IS NOT NULL "
        "ORDER BY id DESC LIMIT ?",
        [limit],
    )
    return [(int(s), int(f), str(st)) for s, f, st in reversed(rows)]
