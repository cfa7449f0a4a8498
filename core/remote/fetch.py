"""Archive files read back from the remote tier, for whoever reads gzips (restore,
disaster recovery): one ranged GET for a bundle member, the whole object for a
gzip of its own, into a scratch file under ``archive_root`` that the caller reads
as a plain gzip and that is removed after. Or, for a reader given a block cache
(the mount, ``cat``), a file over the entry's window of its object, read through
the cache (rangecache.py) as it is read: nothing under archive_root.

Invariants:
- What is fetched is not trusted: the reader checks it (restore inflates it and
  compares the SHA-256 with the entry's before anything is placed).
- Scratch files are ``Layout.scratch`` names directly under ``archive_root`` (or
  a fleet site's cache), and what SQLite leaves beside one it opened (a
  snapshot's ``-journal``; a checked snapshot's ``-wal`` and ``-shm``): removed
  with it (``remove_scratch``, also when it was renamed into place); one a crash
  left behind is removed by the next operation that reads the remote
  (``clear_scratch``), and no walk of the archive takes one for data.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from ..base.cancel import CancelToken
from ..base.config import RemoteSettings
from ..base.durable import fsync
from ..base.fsutil import open_file, unlink_if_present, write_all
from ..base.layout import Layout, is_scratch_name, sidecars_of
from ..base.ratelimit import RateLimiter
from ..files.reader import CachedCopy, GzipAt
from ..store.manifest import Entry, Manifest
from ..store.remoteobjects import RemoteObjects
from .connect import connected
from .marker import RemoteUnmounted, check_marker
from .objectstore import ObjectStore
from .rangecache import RangeCache, RemoteFile, Window


def window_of(site: str, entry: Entry) -> Window:
    """Where ``entry``'s gzip lies on the remote: its archive file's object under
    ``site``, all of it or the bundle member's span."""
    key = f"{site}/{entry.gz_path}"
    span = entry.span
    return Window(key, 0, entry.gz_bytes) if span is None else Window(key, span.offset, span.length)


def clear_scratch(layout: Layout) -> list[Path]:
    """Scratch files a crash left behind, removed."""
    root = layout.root
    if not root.is_dir():
        return []
    names = [n for n in os.listdir(root) if is_scratch_name(n)]
    return [root / n for n in names if unlink_if_present(root / n, root=root)]


def remove_scratch(tmp: Path, layout: Layout) -> None:
    """The scratch file ``tmp`` (if still there) and what SQLite left beside it."""
    for path in (tmp, *sidecars_of(tmp)):
        unlink_if_present(path, root=layout.root)


class RemoteReader:
    """The remote copies of one site's archive files: read through ``cache`` when
    given (a block cache of ``store``), else fetched into scratch files."""

    def __init__(
        self,
        store: ObjectStore,
        site: str,
        manifest: Manifest,
        layout: Layout,
        limiter: RateLimiter,
        cache: RangeCache | None = None,
    ) -> None:
        self.store = store
        self.cache = cache
        self.site = site
        self.objects = RemoteObjects(manifest)
        self.layout = layout
        self.limiter = limiter
        self._marked = False  # the remote marker seen (or legacy objects): checked once
        self._unmounted: RemoteUnmounted | None = None  # or found missing, once

    async def _check_marker(self) -> None:
        """Before the first read: the remote is the one shipped to (a folder whose
        disk is not mounted is not). Not before: a restore of local copies alone
        never asks the remote anything. Found missing, every later read is
        refused with the same line, without asking again."""
        if self._unmounted is not None:
            raise self._unmounted
        if self._marked:
            return
        try:
            await check_marker(self.store, self.objects, self.site, self.layout, may_write=False)
        except RemoteUnmounted as err:
            self._unmounted = err
            raise
        self._marked = True

    async def check(self) -> None:
        """The remote asked now whether it is the one shipped to (its marker):
        a ``RemoteError`` naming why it cannot be read. A reader that must know
        before its first read (the mount, at mount time) calls it."""
        await self._check_marker()

    async def source_of(self, entry: Entry) -> str | None:
        """Where ``entry``'s gzip is to be read: "local", "remote", or None if
        neither holds it."""
        obj = await self.objects.get(entry.gz_path)
        if obj is not None and not obj.local:
            return "remote"
        local = await asyncio.to_thread(self.layout.abs(entry.gz_path).exists)
        if local and entry.status != "missing":
            return "local"
        return "remote" if obj is not None else None

    async def remote_file(self, entry: Entry, cache: RangeCache) -> RemoteFile:
        """``entry``'s gzip as a file read through ``cache`` (a cache of this
        reader's store), to be read from a worker thread; the marker checked
        first, as for any fetch."""
        await self._check_marker()
        return RemoteFile(cache, window_of(self.site, entry))

    async def cached_gzip(self, entry: Entry, cache: RangeCache) -> GzipAt:
        """``entry``'s gzip read through ``cache`` (a cache of this reader's
        store): each reader opens a ``RemoteFile`` of its own over its window;
        the marker checked first, as for any fetch."""
        await self._check_marker()
        window = window_of(self.site, entry)
        where = RemoteFile(cache, window).name
        opener = functools.partial(RemoteFile, cache, window)
        copy = CachedCopy(where, (window.key, window.start, window.size), opener)
        return GzipAt(copy, None, "remote")

    @asynccontextmanager
    async def gzip_of(self, entry: Entry, cancel: CancelToken) -> AsyncIterator[GzipAt]:
        """``entry``'s gzip for the life of the block: through the reader's cache
        when it has one, else fetched into a scratch file."""
        if self.cache is not None:
            yield await self.cached_gzip(entry, self.cache)
            return
        async with self.fetched(entry, cancel) as tmp:
            yield GzipAt(tmp, None, "remote")

    @asynccontextmanager
    async def fetched(self, entry: Entry, cancel: CancelToken) -> AsyncIterator[Path]:
        """``entry``'s gzip alone in a scratch file, for the life of the block."""
        await self._check_marker()
        key = f"{self.site}/{entry.gz_path}"
        span = entry.span
        if span is None:
            await asyncio.to_thread(self.limiter.take, entry.gz_bytes, cancel)
            async with downloaded(self.store, key, self.layout, f"fetch-{entry.id}") as tmp:
                yield tmp
            return
        await asyncio.to_thread(self.limiter.take, span.length, cancel)
        data = await self.store.read_range(key, span.offset, span.length)
        async with scratch_file(self.layout, f"fetch-{entry.id}") as (tmp, fd):
            # Not fsynced: a bundle member's bytes for a restore to read in this
            # boot (it fsyncs what it writes); the scratch is never renamed into place.
            await asyncio.to_thread(write_all, fd, data)
            yield tmp


@asynccontextmanager
async def remote_reader(
    remote: RemoteSettings | None, manifest: Manifest, layout: Layout
) -> AsyncIterator[RemoteReader | None]:
    """The remote tier's copies, for reading, its store open for the block (None:
    no remote configured). Scratch files a crash left are removed first."""
    if remote is None:
        yield None
        return
    await asyncio.to_thread(clear_scratch, layout)
    async with connected(remote) as store:
        yield RemoteReader(store, remote.site, manifest, layout, RateLimiter(remote.bytes_per_s))


@asynccontextmanager
async def scratch_file(layout: Layout, what: str) -> AsyncIterator[tuple[Path, int]]:
    """A new scratch file under archive_root and its descriptor, for the life of
    the block (closed after); the file is removed after the block unless the
    block renamed it into place, and what SQLite left beside it either way."""
    tmp = layout.scratch(what)
    root = layout.root
    try:
        fd = await asyncio.to_thread(
            open_file, tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, root=root
        )
        try:
            yield tmp, fd
        finally:
            os.close(fd)
    finally:
        await asyncio.to_thread(remove_scratch, tmp, layout)


@asynccontextmanager
async def downloaded(
    store: ObjectStore, key: str, layout: Layout, what: str
) -> AsyncIterator[Path]:
    """The whole object ``key`` in a scratch file, fsynced, for the life of the
    block (which may rename it into place); removed after if still there."""
    async with scratch_file(layout, what) as (tmp, fd):
        await store.download(key, fd)
        await asyncio.to_thread(fsync, fd, "fetch.scratch")
        yield tmp
