"""The local verify as the archiver runs it: the archive's gzips read again and
compared with the manifest (files/verify.py), inside a session of the
archiver's, its summary recorded. A site with nothing archived yet reads and
writes nothing."""

from __future__ import annotations

from ..base.cancel import CancelToken
from ..files.verify import VerifyReport, verify_entries
from .session import Sessions


async def verify(
    sessions: Sessions,
    sample: float | None,
    max_duration: float | None,
    cancel: CancelToken | None,
    workers: int,
) -> VerifyReport:
    """Every archived gzip (or ``sample`` of them, for at most ``max_duration``
    s) read again, ``workers`` at a time."""
    if await sessions.nothing_archived():
        return VerifyReport(nothing_archived=True)
    args = {"sample": sample, "max_duration": max_duration}
    async with sessions.open("verify", args, cancel) as current:
        current.start()
        report = await verify_entries(
            current.manifest,
            current.mover,
            sessions.stream,
            sample=sample,
            max_duration=max_duration,
            cancel=cancel,
            workers=workers,
        )
        summary = {"checked": report.checked, "ok": report.ok, "failed": len(report.problems)}
        current.finish("failed" if report.failed else "ok", summary)
        return report
