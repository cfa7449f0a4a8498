"""An archived file's bytes read back: where its gzip can be read (a gzip of its
own, its bundle member by offset, or the remote tier's copy), and those bytes
inflated to a stream through sha256. ``restore`` places them in a file; ``cat``
and the mount send them to their output.

Invariants:
- A local copy is read where it lies (a bundle member by its span: a seek, never
  the tar's structure); a remote-only copy is read by ``RemoteCopies``: either
  through the remote block cache (a ``CachedCopy``: ranged GETs of the member's
  or the object's bytes as they are read, nothing under archive_root), or
  fetched whole (one ranged GET of a bundle member, else the whole object) into
  a scratch file under archive_root removed after the block. Nothing else is
  written.
- Every reader opens the gzip through ``GzipAt.open``: a path and a cached copy
  are read by the same inflate.
- ``stream_entry`` inflates in a worker thread, at most ``codec.CHUNK`` bytes at a
  time, each written to the output and flushed as it comes: never the whole
  file in memory, and the event loop never waits on the read or the output.
- The verdict comes after the last byte: bytes already sent are not taken back,
  so whoever must trust them checks ``Streamed.problem``.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal, Protocol, cast

from ..base.cancel import CancelToken, in_thread
from ..base.codec import CorruptGzip, Digest, Span, inflate
from ..base.layout import Layout
from ..base.ratelimit import UNLIMITED, RateLimiter
from ..store.entries import Entry


@dataclass(frozen=True)
class CachedCopy:
    """A remote copy's gzip read through the remote block cache, not a file on
    disk: ``open`` gives a new seekable read-only file over its bytes (a
    position of its own, for one reader), ``name`` names it in messages,
    ``ident`` keys its checkpoints (the object's key, the window's start and
    size: a different copy has different ones)."""

    name: str
    ident: tuple[str, int, int]
    open: Callable[[], io.RawIOBase]


@dataclass(frozen=True)
class GzipAt:
    """Where an entry's gzip is read: ``path`` (the archive's file, a scratch copy
    fetched from the remote tier, or a copy read through the remote block
    cache), and the member's ``span`` in it when it is a bundle read in place."""

    path: Path | CachedCopy
    span: Span | None
    source: Literal["local", "remote"]
    # What messages call a scratch copy (its object's URL), not its scratch name.
    fetched_from: str | None = None

    @property
    def name(self) -> str:
        """The gzip as messages name it: its path, or its object's URL."""
        if self.fetched_from is not None:
            return self.fetched_from
        return self.path.name if isinstance(self.path, CachedCopy) else str(self.path)

    def open(self) -> io.RawIOBase:
        """The gzip open for reading (unbuffered: a reader reads what it needs)."""
        if isinstance(self.path, CachedCopy):
            return self.path.open()
        return open(self.path, "rb", buffering=0)


class RemoteCopies(Protocol):
    """Where a gzip is read when its local copy is gone: the remote tier's reader
    (``remote.fetch.RemoteReader``), handed in by whoever has a remote."""

    async def source_of(self, entry: Entry) -> str | None:
        """ "local", "remote", or None when neither holds ``entry``'s gzip."""
        ...

    def gzip_of(self, entry: Entry, cancel: CancelToken) -> AbstractAsyncContextManager[GzipAt]:
        """``entry``'s gzip as the remote tier gives it (a scratch file, or a copy
        read through the block cache), readable for the life of the block."""
        ...


@asynccontextmanager
async def entry_gzip(
    entry: Entry,
    layout: Layout,
    remote: RemoteCopies | None,
    cancel: CancelToken,
    local: Path | None = None,
) -> AsyncIterator[GzipAt | None]:
    """``entry``'s gzip, readable for the life of the block; None when no copy
    holds it (the local one gone or recorded missing, and no remote one). A
    ``gz_path`` that would leave archive_root is ``UnsafePath``. ``local``: its
    local path, already checked by the caller (``layout.abs``)."""
    source = "local" if remote is None else await remote.source_of(entry)
    if source is None or (source == "local" and entry.status == "missing"):
        yield None
        return
    if source == "remote":
        assert remote is not None
        async with remote.gzip_of(entry, cancel) as at:
            yield at
        return
    if local is None:
        # Its parents are lstat'ed (no link on the way): off the event loop.
        local = await asyncio.to_thread(layout.abs, entry.gz_path)
    yield GzipAt(local, entry.span, "local")


@dataclass(frozen=True)
class Streamed:
    """What ``stream_entry`` sent: how many bytes, and ``problem`` (None when they
    are exactly the archived file: its length and sha256)."""

    bytes: int
    problem: str | None = None


class _Sink:
    """The output, flushed after each piece (a pager or ``grep`` sees the bytes
    as they come), counting what went out."""

    def __init__(self, out: BinaryIO) -> None:
        self.out = out
        self.sent = 0

    def write(self, piece: bytes) -> int:
        done = self.out.write(piece)
        while done < len(piece):  # a raw stream takes what one write(2) took
            done += self.out.write(piece[done:])
        self.out.flush()
        self.sent += len(piece)
        return len(piece)


def _short(d: Digest) -> str:
    return f"{d.bytes} bytes / sha256 {d.sha256[:12]}…"


def copy_entry(
    at: GzipAt,
    expect: Digest,
    out: BinaryIO,
    limiter: RateLimiter = UNLIMITED,
    cancel: CancelToken | None = None,
) -> Streamed:
    """``stream_entry`` in the calling thread (one that may block: the mount's
    FUSE threads read a small version whole this way)."""
    cancel = cancel or CancelToken()
    sink = _Sink(out)
    try:
        # Only ``write`` is called on ``out``: the sink is one.
        with at.open() as src:
            got = inflate(
                src, span=at.span, out=cast("BinaryIO", sink), limiter=limiter, cancel=cancel
            )
    except CorruptGzip as err:
        return Streamed(sink.sent, f"{err} after {sink.sent} bytes")
    if (got.bytes, got.sha256) != (expect.bytes, expect.sha256):
        return Streamed(
            got.bytes, f"the bytes read were {_short(got)}, the manifest records {_short(expect)}"
        )
    return Streamed(got.bytes)


async def stream_entry(
    at: GzipAt,
    expect: Digest,
    out: BinaryIO,
    *,
    limiter: RateLimiter = UNLIMITED,
    cancel: CancelToken | None = None,
) -> Streamed:
    """The bytes of the gzip ``at`` to ``out`` as they are inflated, checked
    against ``expect`` (the entry's length and sha256) as they go. An error
    writing ``out`` (``BrokenPipeError``: the reader left) or reading the gzip
    raises; a gzip that is not valid, or gives other bytes, is ``problem``."""
    cancel = cancel or CancelToken()
    return await in_thread(cancel, copy_entry, at, expect, out, limiter, cancel)
