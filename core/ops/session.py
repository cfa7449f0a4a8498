"""One mutating operation as the stream and the audit see it, and the archive lock
held around it.

``Operation.start`` tells the stream the operation began; ``finish`` tells it how
it ended, with its summary, and settles the audit row the same way (an exception
settles it on its own, in ``Archiver.session``). ``locked`` takes the archive
lock for a block and reports a refusal before raising it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.lock import ArchiveLock, LockHeld
from ..base.stream import EventStream, Finished, Started
from ..base.stream import Status as Outcome
from ..files.filemove import FileMover
from ..store.manifest import Manifest


@dataclass
class Operation:
    """One operation as the stream and the audit see it: ``start`` says it began,
    ``finish`` says how it ended, with its summary; the audit row is settled with
    the same status and the summary as JSON (an exception settles it on its own)."""

    command: str
    stream: EventStream
    outcome: str = "ok"
    detail: str | None = None

    def start(self, detail: str = "") -> None:
        self.stream.emit(Started(self.command, detail))

    def finish(self, status: Outcome, summary: dict[str, Any]) -> None:
        self.settle(status, json.dumps(summary, sort_keys=True, default=str)[:2000])
        self.stream.emit(Finished(self.command, status, summary))

    def settle(self, outcome: str, detail: str | None = None) -> None:
        """How the audit row ends, without telling the stream."""
        self.outcome, self.detail = outcome, detail


@dataclass
class Session(Operation):
    """An operation under the lock, with the manifest open, and a mover on it."""

    manifest: Manifest = field(kw_only=True)
    mover: FileMover = field(kw_only=True)


@asynccontextmanager
async def locked(
    archive_root: Path,
    holder: str,
    *,
    wait: float = 0.0,
    refused: Callable[[str], Awaitable[None]] | None = None,
) -> AsyncIterator[ArchiveLock]:
    """The archive lock for the whole block (waiting up to ``wait`` seconds for a
    holder to let go); ``refused`` hears why before ``LockHeld`` is raised."""
    try:
        lock = await ArchiveLock.acquire(archive_root, holder, wait=wait)
    except LockHeld as err:
        if refused is not None:
            await refused(str(err))
        raise
    try:
        yield lock
    finally:
        lock.release()
