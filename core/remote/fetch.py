"""Archive files read back from the remote tier, for whoever reads gzips (restore,
disaster recovery): one ranged GET for a bundle member, the whole object for a
gzip of its own, into a scratch file under ``archive_root`` that the caller reads
as a plain gzip and that is removed after. Or, for a reader given a block cache
(the mount, ``cat``), a file over the entry's window of its object, read through
the cache (rangecache.py) as it is read: nothing under archive_root.

A sealed copy (client-side encryption, unseal.py) is fetched as its age stream:
a bundle member's by one ranged GET of the stream recorded for it, a gzip of
its own whole; opened with the command's identity into the scratch file, then
read as a plain gzip. Age cannot be read by ranges, so a block-cache reader
reads the stream through the cache and opens it whole into a file in the
cache's own folder (``.opened-*``: kept for later reads of the same copy, at
most ``cache_bytes`` of them besides the blocks, least recently used removed;
gone with the folder when the cache closes).

Invariants:
- What is fetched is not trusted: the reader checks it (restore inflates it and
  compares the SHA-256 with the entry's before anything is placed). A read
  through the block cache names the object's recorded version (rangecache.py):
  the mount serves a random read unchecked, so only the object shipped may
  answer it. A fetch into a scratch file names none: its SHA-256 is checked
  whole before use, and a copy of the bucket (other versions of the same
  bytes) still restores. A sealed
  copy's opened bytes are read only once the stream opened whole and gave the
  recorded size (and sha256, for a whole object); on any error the scratch is
  removed unread.
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
import io
import os
import secrets
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from ..base.cancel import CancelToken, in_thread
from ..base.codec import Digest
from ..base.configremote import RemoteSettings
from ..base.durable import fsync
from ..base.fsutil import open_file, unlink_if_present, write_all
from ..base.layout import Layout, is_scratch_name, sidecars_of
from ..base.ratelimit import RateLimiter
from ..files.reader import CachedCopy, GzipAt
from ..store.entries import Entry
from ..store.manifest import Manifest
from ..store.remoteobjects import RemoteObject, RemoteObjects
from .connect import connected
from .marker import RemoteUnmounted, check_marker
from .objectstore import ObjectStore
from .rangecache import RangeCache, RemoteFile, Window
from .sealing import Identities
from .unseal import Readable, SealedUnreadable, identity_for, open_into


def window_of(site: str, entry: Entry, version: str | None) -> Window:
    """Where ``entry``'s gzip lies on the remote: its archive file's object under
    ``site`` as ``version``, all of it or the bundle member's span."""
    key = f"{site}/{entry.gz_path}"
    span = entry.span
    if span is None:
        return Window(key, 0, entry.gz_bytes, version)
    return Window(key, span.offset, span.length, version)


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


@dataclass(frozen=True)
class SealedCopy:
    """Where a sealed copy of an entry's gzip is read: its age stream's
    ``window`` in the object, the plaintext bytes before the gzip (``skip``: a
    member's tar header), and what the opened gzip must be (``expect``: the
    local file's size and sha256, or a member's size)."""

    window: Window
    skip: int
    expect: Digest | int
    obj: RemoteObject
    where: str  # the object's URL, for messages


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
        identities: Identities | None = None,
    ) -> None:
        self.store = store
        self.cache = cache
        self.site = site
        self.objects = RemoteObjects(manifest)
        self.layout = layout
        self.limiter = limiter
        self.identities = identities  # opens sealed copies (None: they are refused)
        self._marked = False  # the remote marker seen (or legacy objects): checked once
        self._unmounted: RemoteUnmounted | None = None  # or found missing, once
        # Sealed copies opened into the block cache's folder, oldest use first.
        self._opened: OrderedDict[tuple[str, int, int], asyncio.Future[tuple[Path, int]]] = (
            OrderedDict()
        )

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

    async def _window(self, entry: Entry) -> Window:
        """``entry``'s window, of the object version its row records."""
        obj = await self.objects.get(entry.gz_path)
        return window_of(self.site, entry, None if obj is None else obj.version)

    async def remote_file(self, entry: Entry, cache: RangeCache) -> RemoteFile:
        """``entry``'s gzip as a file read through ``cache`` (a cache of this
        reader's store), to be read from a worker thread; the marker checked
        first, as for any fetch."""
        await self._check_marker()
        return RemoteFile(cache, await self._window(entry))

    async def cached_gzip(self, entry: Entry, cache: RangeCache) -> GzipAt:
        """``entry``'s gzip read through ``cache`` (a cache of this reader's
        store): each reader opens a ``RemoteFile`` of its own over its window;
        the marker checked first, as for any fetch."""
        await self._check_marker()
        sealed = await self.sealed_copy(entry)
        if sealed is not None:
            return await self._opened_in_cache(sealed, cache)
        window = await self._window(entry)
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
            where = self.store.where(f"{self.site}/{entry.gz_path}")
            yield GzipAt(tmp, None, "remote", fetched_from=where)

    @asynccontextmanager
    async def fetched(self, entry: Entry, cancel: CancelToken) -> AsyncIterator[Path]:
        """``entry``'s gzip alone in a scratch file, for the life of the block."""
        await self._check_marker()
        sealed = await self.sealed_copy(entry)
        if sealed is not None:
            async with self._opened_scratch(entry, sealed, cancel) as tmp:
                yield tmp
            return
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

    # sealed copies ----------------------------------------------------------------

    async def sealed_copy(self, entry: Entry) -> SealedCopy | None:
        """Where ``entry``'s gzip is read when its remote copy is sealed (None:
        it is not): refused first, before any GET, without an identity."""
        obj = await self.objects.get(entry.gz_path)
        if obj is None or obj.sealed_to is None:
            return None
        key = f"{self.site}/{obj.key}"
        where = self.store.where(key)
        identity_for(self.identities, where, obj.sealed_to)
        span = entry.span
        if span is None:
            whole = Digest(obj.local_bytes, obj.local_sha256)
            return SealedCopy(Window(key, 0, obj.bytes, obj.version), 0, whole, obj, where)
        found = await self.objects.stream_of(entry.gz_path, span.offset, span.length)
        if found is None:
            raise SealedUnreadable(
                f"{where}: no age stream is recorded for its member at byte {span.offset:,} "
                f"({span.length:,} bytes; rebuilt without the snapshot's sealed_spans?)"
            )
        offset, length, skip = found
        window = Window(key, offset, length, obj.version)
        return SealedCopy(window, skip, span.length, obj, where)

    def _open(self, sealed: SealedCopy, src: Readable, fd: int, cancel: CancelToken) -> None:
        assert self.identities is not None  # sealed_copy refused the read without
        open_into(
            src,
            fd,
            self.identities,
            length=sealed.window.size,
            what=sealed.where,
            sealed_to=sealed.obj.sealed_to,
            cancel=cancel,
            skip=sealed.skip,
            expect=sealed.expect,
        )

    def _open_path(
        self, sealed: SealedCopy, src: Path, root: Path, fd: int, cancel: CancelToken
    ) -> None:
        with open(open_file(src, os.O_RDONLY, root=root), "rb", buffering=0) as f:
            self._open(sealed, f, fd, cancel)

    @asynccontextmanager
    async def _opened_scratch(
        self, entry: Entry, sealed: SealedCopy, cancel: CancelToken
    ) -> AsyncIterator[Path]:
        """A sealed copy's gzip opened into a scratch file (not fsynced: read in
        this boot, never placed): a bundle member's stream by one ranged GET, a
        whole object downloaded into a scratch of its own first."""
        w, root = sealed.window, self.layout.root
        await asyncio.to_thread(self.limiter.take, w.size, cancel)
        async with scratch_file(self.layout, f"fetch-{entry.id}") as (tmp, fd):
            if sealed.skip or w.start or entry.span is not None:
                data = await self.store.read_range(w.key, w.start, w.size)
                await in_thread(cancel, self._open, sealed, io.BytesIO(data), fd, cancel)
            else:
                async with scratch_file(self.layout, f"fetch-{entry.id}-sealed") as (ct, ct_fd):
                    await self.store.download(w.key, ct_fd)
                    await in_thread(cancel, self._open_path, sealed, ct, root, fd, cancel)
            yield tmp

    async def _opened_in_cache(self, sealed: SealedCopy, cache: RangeCache) -> GzipAt:
        """A sealed copy's gzip read from a file in the block cache's folder: its
        stream read through the cache (age cannot be read by ranges) and opened
        there whole, once; later reads of it share the file."""
        w = sealed.window
        ident = (w.key, w.start, w.size)
        opening = self._opened.get(ident)
        if opening is None:
            opening = asyncio.ensure_future(self._open_in_cache(ident, sealed, cache))
            self._opened[ident] = opening
        self._opened.move_to_end(ident)
        path, _ = await asyncio.shield(opening)
        await self._trim(cache.cache_bytes)
        copy = CachedCopy(f"{sealed.where} (opened)", ident, functools.partial(io.FileIO, path))
        return GzipAt(copy, None, "remote")

    async def _open_in_cache(
        self, ident: tuple[str, int, int], sealed: SealedCopy, cache: RangeCache
    ) -> tuple[Path, int]:
        path = cache.folder / f".opened-{secrets.token_hex(8)}"
        cancel = CancelToken()

        def run() -> int:
            fd = open_file(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, root=cache.folder)
            try:
                self._open(sealed, RemoteFile(cache, sealed.window), fd, cancel)
                return os.fstat(fd).st_size
            finally:
                os.close(fd)

        try:
            return path, await in_thread(cancel, run)
        except BaseException:
            self._opened.pop(ident, None)  # the next read tries again
            await asyncio.to_thread(unlink_if_present, path, root=cache.folder)
            raise

    async def _trim(self, budget: int) -> None:
        """Opened copies past ``budget`` bytes removed, least recently used first
        (a reader that has one open keeps reading it)."""
        done = [
            (k, f.result())
            for k, f in self._opened.items()
            if f.done() and not f.cancelled() and f.exception() is None
        ]
        total = sum(size for _, (_, size) in done)
        gone = []
        for ident, (path, size) in done[:-1]:
            if total <= budget:
                break
            del self._opened[ident]
            gone.append(path)
            total -= size
        for path in gone:
            await asyncio.to_thread(unlink_if_present, path, root=path.parent)


@asynccontextmanager
async def remote_reader(
    remote: RemoteSettings | None,
    manifest: Manifest,
    layout: Layout,
    identities: Identities | None = None,
) -> AsyncIterator[RemoteReader | None]:
    """The remote tier's copies, for reading, its store open for the block (None:
    no remote configured), sealed ones opened with ``identities``. Scratch files
    a crash left are removed first."""
    if remote is None:
        yield None
        return
    await asyncio.to_thread(clear_scratch, layout)
    async with connected(remote) as store:
        limiter = RateLimiter(remote.bytes_per_s)
        yield RemoteReader(store, remote.site, manifest, layout, limiter, identities=identities)


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
