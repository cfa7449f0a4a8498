"""rebuild-manifest: a manifest from the gzips alone, for when coldkeep.db is lost.

A bundle's members are read from its index, or, when the index is damaged, from
its tar headers and each member's own gzip header. Every gzip under ``files/``
describes itself: where it sits gives the directory of
its live path, its header the file name, the exact mtime and the mode (coldkeep's
comment; an older coldkeep's extra field), and inflating it gives the length and
sha256. The rebuilt entries
are written into a NEW database (never over an existing one); a gzip that does
not inflate is reported and left where it is.

A gzip's header is not trusted (the archive may have been copied from anywhere): a
name that is not one plain file name or an impossible mtime refuses
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.cancel import CancelToken, in_thread
from ..base.codec import CorruptGzip, inflate, read_gzip_header
from ..base.errors import UsageError
from ..base.layout import Layout, UnsafePath, unit_of
from ..base.ratelimit import RateLimiter
from ..base.stream import EventStream, FileDone, Phase
from ..base.times import NS_PER_MS, is_mtime
from ..store.entries import NewEntry
from ..store.manifest import Manifest
from .bundle import is_bundle_name, read_bundle
from .orphanbundle import trusted_mode
from .recovery import archive_files


@dataclass
class RebuildReport:
    out: Path
    entries: int = 0
    bytes: int = 0
    unreadable: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # headers that cannot be trusted

    def to_dict(self) -> dict[str, Any]:
        return {
            "out": str(self.out),
            "entries": self.entries,
            "bytes": self.bytes,
            "unreadable": self.unreadable,
            "refused": self.refused,
        }


def _describe(layout: Layout, gz: Path, limiter: RateLimiter, cancel: CancelToken) -> NewEntry:
    """The entry a gzip describes. Its header may come from anywhere (a copied
    archive): a name that is not a plain file name, or an mtime no clock can
    hold, refuses the gzip (``UnsafePath``); a mode keeps its permission bits only
    (a restore by root must never make a set-user-id file)."""
    header = read_gzip_header(gz)
    relpath = layout.relpath_of_gz(gz, header.name)
    if header.mtime_ns is not None and not is_mtime(header.mtime_ns):
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
        mode=trusted_mode(header.mode, None),
        archived_at=st.st_ctime_ns // NS_PER_MS,
        source_present=False,
    )


def _describe_bundle(
    layout: Layout, bundle: Path, limiter: RateLimiter, cancel: CancelToken
) -> tuple[list[NewEntry], list[str], list[str]]:
    """The entries a bundle's members describe (from its index, or its tar
    headers and each member's gzip header when the index is damaged), and the
    members refused and unreadable, by name."""
    contents = read_bundle(bundle)
    archived_at = bundle.lstat().st_ctime_ns // NS_PER_MS
    found: list[NewEntry] = []
    unreadable: list[str] = []
    for m in contents.members:
        cancel.check()
        try:
            header = None if contents.index_used else read_gzip_header(bundle, m.span.offset)
            digest = inflate(bundle, span=m.span, limiter=limiter, cancel=cancel)
        except (CorruptGzip, OSError) as err:
            unreadable.append(f"{layout.rel(bundle)} member {m.relpath}: {err}")
            continue
        mtime_ns = m.mtime_ns if header is None or header.mtime_ns is None else header.mtime_ns
        mode = m.mode if header is None or header.mode is None else header.mode
        if not is_mtime(mtime_ns):
            contents.refused.append(f"member {m.relpath}: its mtime {mtime_ns} ns is not a time")
            continue
        found.append(
            NewEntry(
                unit=unit_of(m.relpath),
                relpath=m.relpath,
                bytes=digest.bytes,
                sha256=digest.sha256,
                gz_path=layout.rel(bundle),
                gz_bytes=m.span.length,
                mtime_ns=mtime_ns,
                dev=None,
                ino=None,
                mode=trusted_mode(mode, None),
                archived_at=archived_at,
                source_present=False,
                member_offset=m.span.offset,
                member_length=m.span.length,
            )
        )
    return found, contents.refused, unreadable


class RebuildTargetExists(UsageError):
    """The rebuild's output is already there: it writes a new database only."""


def check_rebuild_target(out: Path) -> None:
    """Refuse an output that exists (a rebuild never writes over a database)."""
    if os.path.lexists(out):
        raise RebuildTargetExists(
            f"{out} exists; rebuild writes a new database (give --out PATH, a new file)"
        )


async def rebuild_manifest(
    layout: Layout,
    out: Path,
    stream: EventStream,
    *,
    limiter: RateLimiter,
    cancel: CancelToken | None = None,
) -> RebuildReport:
    await asyncio.to_thread(check_rebuild_target, out)
    token = cancel or CancelToken()
    report = RebuildReport(out)
    walked = await asyncio.to_thread(archive_files, layout)
    found = [Path(gz) for _, gz in sorted(walked.gzips.items())]
    stream.emit(Phase("rebuild", len(found)))
    entries: list[NewEntry] = []
    for gz in found:
        token.check()
        rel = layout.rel(gz)
        if is_bundle_name(gz.name):
            await _rebuild_bundle(layout, gz, report, entries, stream, limiter, token)
            continue
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


async def _rebuild_bundle(
    layout: Layout,
    bundle: Path,
    report: RebuildReport,
    entries: list[NewEntry],
    stream: EventStream,
    limiter: RateLimiter,
    token: CancelToken,
) -> None:
    rel = layout.rel(bundle)
    try:
        found, refused, unreadable = await in_thread(
            token, _describe_bundle, layout, bundle, limiter, token
        )
    except OSError as err:
        report.unreadable.append(f"{rel}: {err}")
        stream.emit(FileDone("rebuild", rel, "unreadable", detail=str(err)))
        return
    for why in refused:
        report.refused.append(f"{rel}: refused: {why}")
        stream.emit(FileDone("rebuild", rel, "refused", detail=f"refused: {why}"))
    for why in unreadable:
        report.unreadable.append(why)
        stream.emit(FileDone("rebuild", rel, "unreadable", detail=why))
    for entry in found:
        entries.append(entry)
        report.bytes += entry.bytes
        stream.emit(FileDone("rebuild", entry.relpath, "entered", entry.bytes, entry.gz_bytes))
