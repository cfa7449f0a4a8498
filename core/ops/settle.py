"""Recovery's own commands, each in a session of the archiver's (``Sessions``):

recover   what a pass settles first, alone (``passes.run_recovery``)
adopt     orphan gzips settled: all of them, or the ones named
sweep     leftover partials, the restore partials intents name and the remote
          tier's scratch files removed; nothing else is touched
"""

from __future__ import annotations

import asyncio
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

from ..base.cancel import CancelToken
from ..base.fsutil import unlink_if_present
from ..files.orphanbundle import Orphan
from ..files.rebuild import RebuildReport, check_rebuild_target, rebuild_manifest
from ..files.recovery import (
    AdoptReport,
    Recovery,
    RecoveryReport,
    SweepReport,
    clear_restore_intents,
)
from ..remote.fetch import clear_scratch
from .passes import emit_orphan, run_recovery
from .session import Sessions


async def recover(sessions: Sessions, cancel: CancelToken | None) -> RecoveryReport:
    async with sessions.open("recover", cancel=cancel) as current:
        current.start()
        report = await run_recovery(current.manifest, current.mover, sessions.stream, cancel)
        failed = report.errors or report.missing
        current.finish("failed" if failed else "ok", report.to_dict())
        return report


async def adopt(
    sessions: Sessions, gz_paths: list[str] | None, cancel: CancelToken | None
) -> AdoptReport:
    """Settle orphan gzips (paths relative to archive_root; None: all)."""
    stream, layout = sessions.stream, sessions.layout
    async with sessions.open("adopt", {"gz": gz_paths or "all"}, cancel) as current:
        current.start()
        recovery = Recovery(current.manifest, current.mover, cancel)
        found = {layout.rel(o.gz): o.gz for o in (await recovery.scan()).orphans}
        wanted = list(found) if gz_paths is None else gz_paths
        done: list[Orphan] = []
        for rel in wanted:
            if rel not in found:
                stream.notice("warning", f"{rel} is not an orphan gzip; left alone")
                continue
            for orphan in await recovery.settle(found[rel]):
                emit_orphan(stream, layout, orphan)
                done.append(orphan)
        report = AdoptReport(done, len(wanted))
        counts: dict[str, Any] = dict(Counter(o.outcome for o in done))
        current.finish("failed" if report.failed else "ok", counts)
        return report


async def sweep(sessions: Sessions) -> SweepReport:
    """Remove leftover ``.partial`` files, intent-named restore partials and the
    remote tier's scratch files."""
    layout = sessions.layout
    async with sessions.open("sweep") as current:
        current.start()
        report = await Recovery(current.manifest, current.mover).scan()
        removed = [
            p
            for p in report.partials
            if await asyncio.to_thread(partial(unlink_if_present, p, root=layout.root))
        ]
        removed += (await clear_restore_intents(current.manifest, current.mover.live_root))[0]
        removed += await asyncio.to_thread(clear_scratch, layout)
        current.finish("ok", {"removed": [str(p) for p in removed]})
        return SweepReport(removed)


async def rebuild(
    sessions: Sessions, out: Path | None, cancel: CancelToken | None
) -> RebuildReport:
    """A new manifest from the gzips alone, at ``out`` (default: coldkeep.db, when
    there is none)."""
    layout = sessions.layout
    check_rebuild_target(out or layout.manifest)  # before the lock: a usage error writes nothing
    async with sessions.lock_only("rebuild-manifest", "rebuild-manifest") as op:
        op.start()
        report = await rebuild_manifest(
            layout, out or layout.manifest, sessions.stream, limiter=sessions.limiter, cancel=cancel
        )
        summary = {
            "entries": report.entries,
            "unreadable": len(report.unreadable),
            "refused": len(report.refused),
        }
        op.finish("failed" if report.unreadable or report.refused else "ok", summary)
        return report
