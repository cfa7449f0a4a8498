"""The live WAL checkpoint log (``checkpoints``): one row per checkpoint a pass's
event phase or the ``checkpoint`` command ran (events/checkpoint.py), busy and
failed ones included; the console's Checkpoints pane reads it back.
"""

from __future__ import annotations

from ..base.stream import CheckpointRan
from .manifest import Manifest


async def record_checkpoint(manifest: Manifest, r: CheckpointRan) -> None:
    """One row of the log."""
    await manifest.run(
        "INSERT INTO checkpoints (at, mode, busy, log, checkpointed, ms, wal_before, "
        "wal_after, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (r.at_ms, r.mode, r.busy, r.log, r.checkpointed, r.ms, r.wal_before, r.wal_after, r.error),
    )


async def recent_checkpoints(manifest: Manifest, limit: int = 50) -> list[CheckpointRan]:
    """The last ``limit`` checkpoints, oldest first."""
    rows = await manifest.rows(
        "SELECT at, busy, log, checkpointed, ms, wal_before, wal_after, mode, error "
        "FROM checkpoints ORDER BY id DESC LIMIT ?",
        (limit,),
    )
    return [CheckpointRan(*r) for r in reversed(rows)]
