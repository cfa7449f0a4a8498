"""Verify: re-read archived gzips and compare them with the manifest.

Every gzip of an entry (``archived``, ``stale`` or ``restored``) is inflated with
its sha256 and length compared to the entry's; a failure is marked on the entry
(``verify_error``) and reported, a gzip that is gone turns the entry ``missing``.
A read error (EACCES, EIO) is reported and marks nothing: it proves nothing about
the bytes.

Large archives verify over several nights: with ``max_duration`` the walk goes
in entry-id order from where the last run stopped (a cursor in coldkeep.db) and
stops at the deadline; the round is complete when it reaches the end. With
``sample`` a random fraction is checked instead, drawn afresh each run (the
cursor is left alone). Entries whose local copy was dropped once shipped are
not read here (``verify --remote`` reads the remote copies); the report counts
them (``remote_only``) so a total that leaves them out says so.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

from ..base.cancel import CancelToken
from ..base.codec import Digest
from ..base.layout import UnsafePath
from ..base.stream import EventStream, FileDone, FileStep, Phase, thread_progress
from ..base.times import now_ms
from ..store.entries import Entry
from ..store.manifest import Manifest
from .filemove import FileMover
from .gzfile import Corrupt, Mismatch, verify_gzip

VerifyOutcome = Literal["ok", "mismatch", "corrupt", "missing", "error"]
# Entries read from the manifest at a time.
PAGE = 1000


@dataclass(frozen=True)
class Checked:
    entry_id: int
    relpath: str
    gz_path: str
    result: VerifyOutcome
    detail: str = ""


@dataclass
class VerifyReport:
    checked: int = 0
    ok: int = 0
    bytes: int = 0
    problems: list[Checked] = field(default_factory=list)
    complete: bool = True  # the whole round (or sample) was checked
    resumed_from: int | None = None
    seconds: float = 0.0
    remote_only: int = 0  # entries left out: only the remote holds their gzip
    nothing_archived: bool = False  # no coldkeep.db yet: nothing read, nothing written

    @property
    def failed(self) -> bool:
        return bool(self.problems)

    def to_dict(self) -> dict[str, Any]:
        return {
            "checked": self.checked,
            "ok": self.ok,
            "bytes": self.bytes,
            "complete": self.complete,
            "resumed_from": self.resumed_from,
            "seconds": self.seconds,
            "remote_only": self.remote_only,
            "problems": [
                {
                    "entry_id": p.entry_id,
                    "relpath": p.relpath,
                    "gz_path": p.gz_path,
                    "result": p.result,
                    "detail": p.detail,
                }
                for p in self.problems
            ],
        }


async def verify_entries(
    manifest: Manifest,
    mover: FileMover,
    stream: EventStream,
    *,
    sample: float | None = None,
    max_duration: float | None = None,
    cancel: CancelToken | None = None,
    workers: int = 2,
    rng: random.Random | None = None,
) -> VerifyReport:
    token = cancel or CancelToken()
    report = VerifyReport()
    t0 = time.monotonic()
    deadline = t0 + max_duration if max_duration else None
    round_started = now_ms()
    after = 0
    chosen: list[int] | None = None
    if sample is not None:
        pool = await manifest.verifiable_ids()
        k = max(1, round(len(pool) * sample)) if pool else 0
        chosen = sorted((rng or random.Random()).sample(pool, k))
        del pool
        stream.emit(Phase("verify", len(chosen), await manifest.bytes_of(chosen)))
    else:
        cursor = await manifest.verify_cursor() if max_duration else None
        if cursor is not None:
            after, round_started = cursor
            report.resumed_from = after
        stream.emit(Phase("verify", *await manifest.verifiable_totals(after_id=after)))
    report.remote_only = await manifest.remote_only_count(after_id=after)
    last: Entry | None = None
    async for chunk in _chunks(manifest, chosen, after, workers):
        token.check()
        if last is not None and deadline is not None and time.monotonic() >= deadline:
            report.complete = False
            await manifest.set_verify_cursor(last.id, round_started)
            break
        await _check_chunk(manifest, mover, stream, token, chunk, report)
        last = chunk[-1]
    else:
        if sample is None:
            await manifest.set_verify_cursor(None)  # the round is complete
    report.seconds = time.monotonic() - t0
    return report


async def _chunks(
    manifest: Manifest, ids: list[int] | None, after: int, size: int
) -> AsyncIterator[list[Entry]]:
    """``size`` entries at a time, in id order: those of ``ids``, or (None)
    every verifiable one after ``after``; read PAGE at a time, so that a round
    over millions of entries never holds them all."""
    at = 0
    while True:
        if ids is None:
            page = await manifest.verifiable_entries(after_id=after, limit=PAGE)
            if not page:
                return
            after = page[-1].id
        else:
            if at >= len(ids):
                return
            page = await manifest.entries_with_ids(ids[at : at + PAGE])
            at += PAGE
        for start in range(0, len(page), size):
            yield page[start : start + size]


async def _check_chunk(
    manifest: Manifest,
    mover: FileMover,
    stream: EventStream,
    token: CancelToken,
    chunk: list[Entry],
    report: VerifyReport,
) -> None:
    """``chunk``'s gzips verified at once; what they prove marked."""
    results = await asyncio.gather(*(_check(mover, e, stream, token) for e in chunk))
    at = now_ms()
    await manifest.mark_verified([c.entry_id for c in results if c.result == "ok"], at)
    for entry, checked in zip(chunk, results, strict=True):
        report.checked += 1
        report.bytes += entry.bytes
        if checked.result == "ok":
            report.ok += 1
            continue
        report.problems.append(checked)
        if checked.result == "missing":
            await manifest.set_status([entry.id], "missing")
        elif checked.result in ("mismatch", "corrupt"):
            await manifest.mark_verify_failed(entry.id, at, checked.detail)


async def _check(
    mover: FileMover, entry: Entry, stream: EventStream, token: CancelToken
) -> Checked:
    def out(result: VerifyOutcome, detail: str = "") -> Checked:
        stream.emit(FileDone("verify", entry.relpath, result, entry.bytes, entry.gz_bytes, detail))
        return Checked(entry.id, entry.relpath, entry.location, result, detail)

    try:
        # Its parents are lstat'ed (no link on the way): off the event loop.
        gz = await asyncio.to_thread(mover.layout.abs, entry.gz_path)
    except UnsafePath as err:
        return out("error", f"entry {entry.id}: {err}")
    stream.emit(FileStep("verify", entry.relpath, "started", 0, entry.bytes))
    try:
        verdict = await verify_gzip(
            gz,
            Digest(entry.bytes, entry.sha256),
            span=entry.span,
            limiter=mover.limiter,
            cancel=token,
            progress=thread_progress(stream, "verify", entry.relpath, entry.bytes),
        )
    except FileNotFoundError:
        return out("missing", f"{entry.gz_path} is gone from the archive")
    except OSError as err:
        return out("error", f"{entry.gz_path} could not be read ({err}); nothing marked")
    if isinstance(verdict, Corrupt):
        return out("corrupt", verdict.detail)
    if isinstance(verdict, Mismatch):
        return out("mismatch", verdict.detail)
    return out("ok")
