"""``event_holds`` in coldkeep.db: live event rows a restore put back, which passes
leave alone for ``hold_days`` (the table keeps its name: it is on disk).

The row ids are recorded before the rows go back into live (events.restore), and
every reader of the eligible rows (the mover, the plan) skips them.
"""

from __future__ import annotations

from collections.abc import Iterable

from .connection import IDS_PER_STATEMENT
from .manifest import Manifest


async def restored_row_ids(manifest: Manifest, now: int) -> set[int]:
    """Ids of live rows a restore put back that passes still leave alone at
    ``now`` (ms)."""
    rows = await manifest.rows("SELECT row_id FROM event_holds WHERE hold_until > ?", (now,))
    return {int(r[0]) for r in rows}


async def keep_restored_rows(manifest: Manifest, ids: Iterable[int], until: int) -> None:
    """Passes leave these rows alone until ``until`` (ms); a row already kept is
    kept until then instead."""
    todo = list(ids)
    for at in range(0, len(todo), IDS_PER_STATEMENT):
        part = todo[at : at + IDS_PER_STATEMENT]
        await manifest.run(
            "INSERT INTO event_holds (row_id, hold_until) VALUES "
            + ", ".join(["(?, ?)"] * len(part))
            + " ON CONFLICT (row_id) DO UPDATE SET hold_until = excluded.hold_until",
            [v for i in part for v in (i, until)],
        )
