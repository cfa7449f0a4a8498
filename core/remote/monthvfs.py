"""Event months only the remote tier holds, read in place by SQLite (``coldkeep
query --engine sqlite``): an apsw VFS whose file reads are ranged GETs of the
month's snapshot object (``<site>/events/<month>.<sha12>.db[.gz]``), so a point lookup
fetches about the pages it reads, never the whole month.

How a read is served:
1. The pages it covers (4 KiB units, the month databases' page size) are looked
   up in one page cache, held in memory for the whole query and bounded
   (``memory_bytes``, every month together; the least recently used go first).
2. A run of missing pages is fetched in one ranged GET; of a packed month
   (monthgz.py: ``<month>.<sha12>.db.gz``) the run of pieces holding them, each
   inflated alone, every page of them cached. A read that starts where
   the file's previous read ended (or a little after: a B-tree's next leaf) is a
   scan going on: from the third such read in a row each GET takes twice the
   pages of the one before, up to ``MAX_SPAN`` (a scan pays few GETs, a lookup
   no read-ahead).

Invariants:
- Read only: the VFS opens only the objects ``attach_uri`` registered, with
  SQLite's ``immutable`` flag (no lock, no journal, no WAL: a snapshot is one
  committed state, taken by the backup API); every write, truncate or delete
  is refused.
- Only the snapshot shipped is read. One HEAD, before the first read, shows
  that the object at the key is it: its size is the one recorded, and its
  SHA-256 is, where the server gives one (S3 checks the one sent with the PUT;
  a folder's HEAD hashes the file); where the server gives none, its version
  is the one the ship's HEAD confirmed (``remote_objects.version``: a
  VersionId, an ETag, a folder's inode and mtime). Every read then names the
  version that HEAD saw: an object put at the key since, of any size, fails the
  query in one line (``RemoteReplaced``), never answers rows.
- A month shipped before versions were recorded, on a server that keeps no
  SHA-256, has nothing to show it is the snapshot shipped: refused, saying
  that ``coldkeep verify --remote`` (which reads it whole and records its
  version) makes it readable.
- Every page is checked as SQLite reads it (its B-tree structure: a page that
  is not one fails the query, SQLite's "database disk image is malformed").
- A sealed month snapshot (client-side encryption) cannot be read a page at a
  time (an age stream opens whole): with the command's identity it is opened
  whole (``opened``) into a file in a read cache's folder of its own under
  ``[mount] cache_dir`` (rangecache.py: removed by ``close``, or by the next
  reader after a crash), its reads pinned to the version shipped and what it
  opens to checked against the size and sha256 recorded before it is used;
  without one, refused in one line that says ``--identity`` opens it.
- Bytes fetched are counted (``fetched_bytes``); pages read in place are held
  in memory, bounded: nothing of them is written to disk.
- The GETs run on an event loop of this reader's own (its thread), the store's
  client bound to it; SQLite's reads come from the query's thread and wait for
  them. A GET that fails fails the query in one line naming the object.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import threading
import urllib.parse
from collections import OrderedDict
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import apsw

from ..base.cancel import CancelToken
from ..base.codec import Digest
from ..base.configremote import RemoteSettings
from ..base.errors import RemoteError
from ..base.fsutil import open_file, unlink_if_present
from ..base.ratelimit import RateLimiter
from ..events.query import RemoteMonth
from .connect import open_store
from .monthgz import Pieces, inflate_piece
from .objectstore import ObjectInfo, ObjectStore, RemoteReplaced
from .rangecache import BLOCK_BYTES, RangeCache
from .sealing import Identities
from .unseal import RangedSource, open_into

PAGE = 4096  # a month database's page (SQLite's default, which coldkeep keeps)
MAX_SPAN = 512  # pages: a scan's GETs grow to 2 MiB
NEAR = 16  # pages: a read this far past the previous one still continues a scan
MEMORY_BYTES = 32 << 20
OPEN_PIECE = 8 << 20  # bytes: each ranged GET of a sealed month opened whole
T = TypeVar("T")


@dataclass(frozen=True)
class _Object:
    key: str
    size: int  # the database's
    version: str  # the object's, as every read of it names it
    pieces: Pieces | None = None  # packed (monthgz.py): where its pages are deflated


class _Pages:
    """The pages fetched, least recently used first, at most ``budget`` bytes."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._pages: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: str, index: int) -> bytes | None:
        with self._lock:
            page = self._pages.get((key, index))
            if page is not None:
                self._pages.move_to_end((key, index))
            return page

    def put(self, key: str, index: int, page: bytes) -> None:
        with self._lock:
            old = self._pages.pop((key, index), None)
            self._bytes += len(page) - (len(old) if old is not None else 0)
            self._pages[(key, index)] = page
            while self._bytes > self.budget and self._pages:
                _, gone = self._pages.popitem(last=False)
                self._bytes -= len(gone)


class RemoteMonths:
    """The remote tier's month snapshots, each attachable by SQLite under a URI
    of this reader's VFS, or (sealed) opened with ``identities`` into a folder
    under ``cache_dir``. Built from any thread; ``close`` after the query."""

    def __init__(
        self,
        remote: RemoteSettings,
        cache_dir: Path | None = None,
        identities: Identities | None = None,
        *,
        memory_bytes: int = MEMORY_BYTES,
    ) -> None:
        self.site = remote.site
        self.cache_dir, self.identities = cache_dir, identities
        self._cache: RangeCache | None = None  # its folder holds the months opened
        self.limiter = RateLimiter(remote.bytes_per_s)
        self.pages = _Pages(memory_bytes)
        self.objects: dict[str, _Object] = {}
        self.gets = 0
        self.fetched_bytes = 0
        self.pages_read = 0  # distinct pages SQLite asked for
        self._seen: dict[str, bytearray] = {}  # a bit for each page of each object
        self._count = threading.Lock()
        self._cancel = CancelToken()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="coldkeep-remote-months", daemon=True
        )
        self._thread.start()
        try:
            self.store: ObjectStore = self._wait(_opened(remote))
        except BaseException:
            self._stop_loop()
            raise
        self.vfs_name = f"coldkeep-remote-{secrets.token_hex(6)}"
        self._vfs: _MonthVFS | None = _MonthVFS(self)

    def _wait(self, call: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(call, self._loop).result()

    def attach_uri(self, month: str, shipped: RemoteMonth) -> str:
        """The URI SQLite attaches ``month``'s snapshot ``shipped`` by, once a HEAD
        showed the object at its key under the site's prefix is it (``_pin``).
        A sealed snapshot is refused: age cannot be read by pages."""
        key = f"{self.site}/{shipped.path}"
        where = self.store.where(key)
        if shipped.sealed_to is not None:
            raise RemoteError(
                f"{where}: month {month} is sealed: coldkeep restore-events --month {month} "
                "--identity FILE first (its rows back in the live table), or --partial "
                "answers without it"
            )
        info = self._wait(self.store.head(key))
        version = _pin(where, month, shipped, info)
        if shipped.seek_points is None:
            obj = _Object(key, shipped.size, version)
        else:
            if shipped.plain_bytes is None:
                raise RemoteError(f"{where}: packed, but its database's size is not recorded")
            pieces = Pieces(shipped.seek_points, shipped.plain_bytes, shipped.size)
            obj = _Object(key, shipped.plain_bytes, version, pieces)
        self.objects[month] = obj
        self._seen[key] = bytearray(-(-obj.size // PAGE) // 8 + 1)
        return f"file:{urllib.parse.quote(month)}?mode=ro&immutable=1&vfs={self.vfs_name}"

    def opened(self, month: str, shipped: RemoteMonth) -> Path:
        """The sealed snapshot ``shipped`` of ``month`` opened whole with the
        identity into a new file in this reader's cache folder (removed by
        ``close``), once it opened to the size and sha256 recorded."""
        key = f"{self.site}/{shipped.path}"
        where = self.store.where(key)
        if self.identities is None or self.cache_dir is None:
            raise RemoteError(
                f"{where}: month {month} is sealed to {shipped.sealed_to}: --identity FILE "
                "opens it for this query (into the read cache's folder, removed after)"
            )
        if self._cache is None:
            self._cache = RangeCache.open(self.store, self.cache_dir, BLOCK_BYTES, self._loop)
        folder = self._cache.folder
        path = folder / f".opened-{secrets.token_hex(8)}"
        self.limiter.take(shipped.size, self._cancel)
        src = RangedSource(self.store, key, shipped.size, self._loop, OPEN_PIECE, shipped.version)
        size, sha = shipped.plain_bytes, shipped.plain_sha256
        expect = size if size is None or sha is None else Digest(size, sha)
        fd = open_file(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, root=folder)
        try:
            open_into(
                src,
                fd,
                self.identities,
                length=shipped.size,
                what=where,
                sealed_to=shipped.sealed_to,
                cancel=self._cancel,
                expect=expect,
            )
        except BaseException:
            unlink_if_present(path, root=folder)
            raise
        finally:
            os.close(fd)
            with self._count:
                self.fetched_bytes += src.at
        return path

    def read(self, obj: _Object, offset: int, amount: int, ahead: int) -> bytes:
        """``amount`` bytes of ``obj`` from ``offset`` (fewer at its end), a
        missing run of pages fetched with ``ahead`` pages at least."""
        end = min(offset + amount, obj.size)
        if end <= offset:
            return b""
        first, last = offset // PAGE, (end - 1) // PAGE
        got: list[bytes] = []
        index = first
        while index <= last:
            self._saw(obj.key, index)
            page = self.pages.get(obj.key, index)
            if page is None:
                page = self._fetch(obj, index, max(ahead, last - index + 1))[0]
            got.append(page)
            index += 1
        data = b"".join(got)
        return data[offset - first * PAGE : end - first * PAGE]

    def _saw(self, key: str, index: int) -> None:
        seen, bit = self._seen[key], 1 << (index % 8)
        with self._count:
            if not seen[index // 8] & bit:
                seen[index // 8] |= bit
                self.pages_read += 1

    def _fetch(self, obj: _Object, first: int, count: int) -> list[bytes]:
        """Pages ``first`` on (``count`` at most, to the object's end or the
        next page cached: none is fetched twice while it is held) in one ranged
        GET, placed in the page cache; them, in order."""
        if obj.pieces is not None:
            return self._fetch_pieces(obj, obj.pieces, first, count)
        start, last = first * PAGE, (obj.size - 1) // PAGE
        n = 1
        while n < count and first + n <= last and self.pages.get(obj.key, first + n) is None:
            n += 1
        length = min(n * PAGE, obj.size - start)
        data = self._get(obj, start, length)
        pages = [data[i : i + PAGE] for i in range(0, length, PAGE)]
        for i, page in enumerate(pages):
            self.pages.put(obj.key, first + i, page)
        return pages

    def _get(self, obj: _Object, start: int, length: int) -> bytes:
        """``length`` bytes of ``obj``'s object from ``start``, in one ranged GET
        pinned to its version, through the rate cap, counted."""
        self.limiter.take(length, self._cancel)
        # Its errors name it; another object at the key is RemoteReplaced.
        data = self._wait(self.store.read_range(obj.key, start, length, obj.version))
        if len(data) != length:
            raise RemoteError(
                f"{self.store.where(obj.key)}: {len(data)} bytes at byte {start} where "
                f"{length} were expected (run coldkeep verify --remote)"
            )
        with self._count:
            self.gets += 1
            self.fetched_bytes += length
        return data

    def _fetch_pieces(self, obj: _Object, pieces: Pieces, first: int, count: int) -> list[bytes]:
        """A packed month's page ``first`` and those after it: the pieces that
        hold ``count`` pages from it (up to the next piece whose first page is
        cached) in one ranged GET, each inflated alone, their pages placed in
        the page cache; the pages from ``first`` on."""
        i = j = pieces.index(first * PAGE)
        want = (first + count) * PAGE
        while (
            j + 1 < len(pieces)
            and pieces[j].end < want
            and self.pages.get(obj.key, pieces[j + 1].start // PAGE) is None
        ):
            j += 1
        start = pieces[i].at
        data = self._get(obj, start, pieces[j].until - start)
        where = self.store.where(obj.key)
        pages: list[bytes] = []
        for k in range(i, j + 1):
            piece = pieces[k]
            raw = inflate_piece(piece, data[piece.at - start : piece.until - start], where)
            for at in range(0, len(raw), PAGE):
                index = (piece.start + at) // PAGE
                page = raw[at : at + PAGE]
                self.pages.put(obj.key, index, page)
                if index >= first:
                    pages.append(page)
        return pages

    def close(self) -> None:
        """The VFS unregistered, the store closed, the loop's thread ended.
        Idempotent; after every connection that attached a month is closed."""
        if self._vfs is None:
            return
        self._vfs.unregister()
        self._vfs = None
        self._cancel.cancel("the query ended")
        try:
            if self._cache is not None:
                self._cache.close()  # the months opened go with its folder
            self._wait(self.store.close())
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


def _pin(where: str, month: str, shipped: RemoteMonth, info: ObjectInfo | None) -> str:
    """The version every read of ``shipped`` names: the one its HEAD ``info``
    saw, once that HEAD shows the object is the snapshot shipped."""
    if info is None:
        raise RemoteError(
            f"{where}: month {month} is not on the remote (run coldkeep verify --remote; "
            "--partial answers without it)"
        )
    if info.size != shipped.size:
        raise RemoteError(
            f"{where}: {info.size} bytes where the manifest records {shipped.size} "
            "(the object is not the snapshot shipped: run coldkeep verify --remote)"
        )
    if info.version is None:
        # S3 answers an ETag at least, a folder its inode and mtime: a server
        # that names neither leaves nothing to pin the reads to.
        raise RemoteError(
            f"{where}: the server names no version (ETag) of it: it cannot be read in place"
        )
    # The bytes' own hash, where the server keeps one, outranks the version
    # recorded: the same bytes put again, or the folder copied, are still the
    # snapshot shipped.
    if info.sha256 is not None:
        if info.sha256 != shipped.sha256:
            raise RemoteReplaced(where)
        return info.version
    if shipped.version is None:
        raise RemoteError(
            f"{where}: month {month} shipped before coldkeep recorded object versions, and "
            "the server keeps no sha256 to tie it to the snapshot shipped (coldkeep verify "
            "--remote checks it whole and records its version)"
        )
    if info.version != shipped.version:
        raise RemoteReplaced(where)
    return info.version


async def _opened(remote: RemoteSettings) -> ObjectStore:
    """The store, made on the loop its client will live on."""
    return open_store(remote)


class _MonthFile:
    """One attached month, read-only (the methods apsw calls on a VFS file)."""

    def __init__(self, reader: RemoteMonths, obj: _Object) -> None:
        self.reader, self.obj = reader, obj
        self._next = -1  # the page after the previous read's last (-1: none yet)
        self._streak = 0  # reads in a row that went on from the previous one
        self._span = 1  # pages the next GET of a scan takes

    def xRead(self, amount: int, offset: int) -> bytes:
        first = offset // PAGE
        if self._next >= 0 and self._next <= first <= self._next + NEAR:
            self._streak += 1
            if self._streak >= 3:
                self._span = min(MAX_SPAN, self._span * 2)
        else:
            self._streak, self._span = 0, 1
        self._next = (offset + amount + PAGE - 1) // PAGE
        return self.reader.read(self.obj, offset, amount, self._span)

    def xFileSize(self) -> int:
        return self.obj.size

    def xWrite(self, data: bytes, offset: int) -> None:
        raise apsw.ReadOnlyError(f"{self.obj.key}: a remote month is read-only")

    def xTruncate(self, newsize: int) -> None:
        raise apsw.ReadOnlyError(f"{self.obj.key}: a remote month is read-only")

    def xSync(self, flags: int) -> None:
        return None

    def xLock(self, level: int) -> None:
        return None

    def xUnlock(self, level: int) -> None:
        return None

    def xCheckReservedLock(self) -> bool:
        return False

    def xFileControl(self, op: int, ptr: int) -> bool:
        return False

    def xSectorSize(self) -> int:
        return PAGE

    def xDeviceCharacteristics(self) -> int:
        return int(apsw.SQLITE_IOCAP_IMMUTABLE)

    def xClose(self) -> None:
        return None


class _MonthVFS(apsw.VFS):
    """Opens the months its reader registered, nothing else."""

    def __init__(self, reader: RemoteMonths) -> None:
        self.reader = reader
        super().__init__(reader.vfs_name, "")

    def xOpen(self, name: str | apsw.URIFilename | None, flags: list[int]) -> apsw.VFSFile:
        month = name.filename() if isinstance(name, apsw.URIFilename) else name
        obj = self.reader.objects.get(month or "")
        if obj is None:
            raise apsw.CantOpenError(f"{month}: no remote month of this query's")
        return cast(apsw.VFSFile, _MonthFile(self.reader, obj))

    def xAccess(self, pathname: str, flags: int) -> bool:
        return False

    def xFullPathname(self, name: str) -> str:
        return name

    def xDelete(self, filename: str, syncdir: bool) -> None:
        raise apsw.ReadOnlyError(f"{filename}: a remote month is read-only")
