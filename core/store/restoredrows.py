"""``event_holds`` in coldkeep.db: live event rows a restore put back, which passes
leave alone until their hold runs out.

The hold is written before the row goes back into live (events.restore), and
every reader of the eligible rows (the mover, the plan) skips held ids.
"""

from __future__ import annotations

from collections.abc import Iterable

from .manifest import IDS_PER_STATEMENT, Manifest


async def held_event_rows(manifest: Manifest, now: int) -> set[int]:
    """Ids of live rows still under a hold at ``now`` (ms)."""
    rows = await manifest.rows("SELECT row_id FROM event_holds WHERE hold_until > ?", (now,))
    return {int(r[0]) for r in rows}


async def hold_event_rows(manifest: Manifest, ids: Iterable[int], until: int) -> None:
    """Hold these rows until ``until`` (ms); an existing hold is moved to it."""
    todo = list(ids)
    for at in range(0, len(todo), IDS_PER_STATEMENT):
        part = todo[at : at + IDS_PER_STATEMENT]
        await manifest.run(
            "INSERT INTO event_holds (row_id, hold_until) VALUES "
            + ", ".join(["(?, ?)"] * len(part))
            + " ON CONFLICT (row_id) DO UPDATE SET hold_until = excluded.hold_until",
            [v for i in part for v in (i, until)],
        )
