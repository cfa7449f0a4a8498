"""rebuild-manifest: a manifest from the gzips alone, for when coldkeep.db is lost.

Every gzip under ``files/`` describes itself: where it sits gives the directory of
its live path, its header the file name, the exact mtime and the mode (coldkeep's
extra field), and inflating it gives the length and sha256. The rebuilt entries
are written into a NEW database (never over an existing one); a gzip that does
not inflate is reported and left where it is.

A gzip's header is not trusted (the archive may have been copied from anywhere): a
name that is not one plain, printable file name or an impossible mtime refuses
that gzip, reported by name, and the rest is rebuilt; only the permission bits of
its mode are kept.

What cannot be rebuilt: the source's dev/ino (recovery then never unlinks a live
file on the strength of a rebuilt entry), the stale/restored statuses and holds
(every entry comes back ``archived``), and when each was archived (the gzip's
ctime stands in).
"""

from __future__ import annotations

import asyncio
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ..cancel import CancelToken, in_thread
from ..codec import CorruptGzip, inflate, read_gzip_header
from ..layout import Layout, UnsafePath, unit_of
from ..manifest import Manifest, ManifestError, NewEntry
from ..ratelimit import RateLimiter
from ..stream import EventStream, FileDone, Phase
from .recovery import archive_files

MAX_MTIME_NS = 1 << 62  # year 2116: later than any file coldkeep archived


@dataclass
class RebuildReport:
    out: Path
    entries: int = 0
    bytes: int = 0
    unreadable: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # headers that cannot be trusted


def _describe(layout: Layout, gz: Path, limiter: RateLimiter, cancel: CancelToken) -> NewEntry:
    """The entry a gzip describes. Its header may come from anywhere (a copied
    archive): a name that is not a plain file name, or an mtime no clock can
    hold, refuses the gzip (``UnsafePath``); a mode keeps its permission bits only
    (a restore by root must never make a set-user-id file)."""
    header = read_gzip_header(gz)
    relpath = layout.relpath_of_gz(gz, header.name)
    if header.mtime_ns is not None and not 0 <= header.mtime_ns < MAX_MTIME_NS:
        raise UnsafePath(f"its header's mtime {header.mtime_ns} ns is not a time")
    digest = inflate(gz, limiter=limiter, cancel=cancel)
    st = gz.lstat()
    return NewEntry(
        unit=unit_of(relpath),
        relpath=relpath,
        bytes=digest.bytes,
        sha256=digest.sha256,
        gz_path=layout.rel(gz),
        gz_bytes=st.st_size,
        mtime_ns=header.mtime_ns if header.mtime_ns is not None else st.st_mtime_ns,
        dev=None,
        ino=None,
        mode=stat.S_IFREG | (stat.S_IMODE(header.mode) & 0o777 if header.mode else 0o644),
        archived_at=st.st_ctime_ns // 1_000_000,
        source_present=False,
    )


async def rebuild_manifest(
    layout: Layout,
    out: Path,
    stream: EventStream,
    *,
    limiter: RateLimiter,
    cancel: CancelToken | None = None,
) -> RebuildReport:
    if await asyncio.to_thread(os.path.lexists, out):
        raise ManifestError(f"{out} exists; rebuild writes a new database (give --out PATH)")
    token = cancel or CancelToken()
    report = RebuildReport(out)
    found = [gz for _, gz in sorted((await asyncio.to_thread(archive_files, layout)).gzips.items())]
    stream.emit(Phase("rebuild", len(found)))
    entries: list[NewEntry] = []
    for gz in found:
        token.check()
        rel = layout.rel(gz)
        try:
            entry = await in_thread(token, _describe, layout, gz, limiter, token)
        except UnsafePath as err:
            report.refused.append(f"{rel}: refused: {err}")
            stream.emit(FileDone("rebuild", rel, "refused", detail=f"refused: {err}"))
            continue
        except (CorruptGzip, OSError) as err:
            report.unreadable.append(f"{rel}: {err}")
            stream.emit(FileDone("rebuild", rel, "unreadable", detail=str(err)))
            continue
        entries.append(entry)
        report.bytes += entry.bytes
        stream.emit(FileDone("rebuild", entry.relpath, "entered", entry.bytes, entry.gz_bytes))
    async with await Manifest.open(out) as manifest:
        await manifest.add_entries(entries)
    report.entries = len(entries)
    return report
