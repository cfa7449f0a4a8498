"""A bounded on-disk cache of remote objects' bytes, so that a copy only the
remote tier holds is read without downloading it whole (``coldkeep mount``,
``cat``): reads of (offset, length) in a *window* of an object (the whole object,
a gzip of its own; or a bundle member's span) are served from fixed-size blocks,
each fetched by one ranged GET and kept as a file under one folder, the least
recently used removed first. ``RemoteFile`` is a seekable read-only file over
one window, for a gzip inflater in a worker thread.

Blocks are aligned to the window's start, not the object's: a 20 KiB bundle
member costs one GET of its 20 KiB, never the 1 MiB of the bundle around it.

Invariants:
- The folder (``rcache-<random>`` in ``[mount] cache_dir``) belongs to one open
  cache: made on open, removed on close; one a crash left is removed by the next
  open in the same cache_dir (the lock file inside it is free). A block is never
  read by another process or after a crash, so blocks are written under a temp
  name and renamed (no reader in this process sees half of one) without fsync:
  nothing in the folder outlives the process that wrote it.
- The files in the folder hold at most ``cache_bytes``: room is made (least
  recently used blocks removed) before a block is fetched, the blocks being
  fetched counted; a fetch waits while the room left is taken by fetches in
  flight.
- One GET per block: concurrent reads of a block not cached wait for the one
  fetch. A fetch that fails caches nothing, and each of its readers gets the
  ``RemoteError`` (the next read tries again). A block that comes back shorter
  than its window says is an error naming the key: the object is not what the
  manifest records.
- Read-ahead fetches only what the room allows, like any fetch; one that fails
  is forgotten (a reader that needs the block fetches it again).
- The GETs run on the event loop the store belongs to (its client is bound to
  it), reached with ``run_coroutine_threadsafe``; reads come from any other
  thread (a read on the loop's own thread is refused: it would wait for itself).
- Only the object a window names is read: every GET names its version (the
  one its row recorded), so another object put at the key since fails the
  read (``RemoteReplaced``) instead of filling a block; and a block is cached
  under its window's version, so none is served for another version.
- What is read is not trusted here: whoever reads it checks it (``cat`` its
  sha256, the mount's inflater the gzip's CRC).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import fcntl
import functools
import hashlib
import io
import os
import secrets
import shutil
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ..base.cancel import CancelToken
from ..base.configmount import MountSettings
from ..base.errors import RemoteError, UsageError
from ..base.fsutil import open_file
from ..base.layout import PARTIAL_SUFFIX
from ..base.ratelimit import UNLIMITED, RateLimiter
from .objectstore import ObjectStore

# Measured against the moto server and a folder (docs/performance.md, "Remote
# reads through the block cache"): per-GET cost dominates below 256 KiB, and
# above 1 MiB a 4 KiB random read pays for bytes it does not use.
BLOCK_BYTES = 1 << 20
# Blocks fetched ahead of a reader that has read a whole block's worth in order
# (an inflater streaming a gzip): their GETs overlap the reader's use of the
# bytes before them. A random read (a 4 KiB read from a seek point) never reads
# that far in order, and costs only its own block.
READ_AHEAD = 4
FOLDER_PREFIX = "rcache-"
_LOCK = ".lock"
T = TypeVar("T")


class CacheDirError(UsageError):
    """``[mount] cache_dir`` cannot hold the cache (not writable, not a folder)."""


@dataclass(frozen=True)
class Window:
    """The bytes ``[start, start + size)`` of the object ``key`` as ``version``
    (None: whatever the key holds, for a row shipped before versions were
    recorded): what a ``RemoteFile`` reads, offsets relative to ``start``."""

    key: str
    start: int
    size: int
    version: str | None = None


@dataclass
class CacheStats:
    """What the cache has cost so far (read under its lock; a snapshot is
    ``RangeCache.stats``)."""

    gets: int = 0  # ranged GETs sent
    bytes_fetched: int = 0  # bytes they brought back
    hits: int = 0  # block reads served from the folder
    evicted: int = 0  # blocks removed to make room
    failed: int = 0  # fetches that failed (nothing cached)
    not_kept: int = 0  # blocks served but not written (the folder refused them)


@dataclass(frozen=True)
class _Block:
    window: Window
    index: int

    def name(self) -> str:
        w = self.window
        window = f"{w.key}\0{w.start}\0{w.size}\0{w.version}"
        ident = hashlib.sha256(window.encode()).hexdigest()[:24]
        return f"{ident}-{self.index}"


class RangeCache:
    """Blocks of remote objects in one private folder, at most ``cache_bytes``.
    Build it with ``RangeCache.open`` (from any thread) or ``range_cache`` (on
    the loop); ``close`` after the last read."""

    def __init__(
        self,
        store: ObjectStore,
        folder: Path,
        lock_fd: int,
        cache_bytes: int,
        loop: asyncio.AbstractEventLoop,
        *,
        block_bytes: int = BLOCK_BYTES,
        limiter: RateLimiter = UNLIMITED,
        read_ahead: int = READ_AHEAD,
    ) -> None:
        if cache_bytes < block_bytes:
            raise ValueError(f"a cache of {cache_bytes} bytes holds no {block_bytes}-byte block")
        self.store = store
        self.folder = folder
        self.cache_bytes = cache_bytes
        self.block_bytes = block_bytes
        self._lock_fd = lock_fd
        self._loop = loop
        self._limiter = limiter
        self._cancel = CancelToken()
        self._cond = threading.Condition()
        self._blocks: OrderedDict[_Block, int] = OrderedDict()  # oldest use first
        self._inflight: dict[_Block, concurrent.futures.Future[bytes]] = {}
        self._calls: set[concurrent.futures.Future[Any]] = set()
        self._cached = 0
        self._reserved = 0
        self._closed = False
        self._stats = CacheStats()
        self.read_ahead = read_ahead
        self._ahead: concurrent.futures.ThreadPoolExecutor | None = None

    @classmethod
    def open(
        cls,
        store: ObjectStore,
        cache_dir: Path,
        cache_bytes: int,
        loop: asyncio.AbstractEventLoop,
        *,
        block_bytes: int = BLOCK_BYTES,
        limiter: RateLimiter = UNLIMITED,
        read_ahead: int = READ_AHEAD,
    ) -> RangeCache:
        """A new cache in a folder of its own under ``cache_dir`` (made, with its
        parents, if missing), for ``store`` whose client lives on ``loop``;
        folders a crash left in ``cache_dir`` are removed first. A cache_dir
        that cannot hold it is a ``CacheDirError``."""
        if cache_bytes < block_bytes:
            raise ValueError(f"a cache of {cache_bytes} bytes holds no {block_bytes}-byte block")
        try:
            folder, lock_fd = _make_folder(cache_dir)
        except OSError as err:
            raise CacheDirError(
                f"{cache_dir}: the remote read cache cannot be made there "
                f"({err.strerror or err}; set [mount] cache_dir to a folder coldkeep's "
                "user can write)"
            ) from None
        return cls(
            store,
            folder,
            lock_fd,
            cache_bytes,
            loop,
            block_bytes=block_bytes,
            limiter=limiter,
            read_ahead=read_ahead,
        )

    @property
    def stats(self) -> CacheStats:
        with self._cond:
            return CacheStats(**vars(self._stats))

    @property
    def cached_bytes(self) -> int:
        """The bytes of the blocks in the folder now."""
        with self._cond:
            return self._cached

    def file(self, key: str, size: int, start: int = 0) -> RemoteFile:
        """A read-only file over ``size`` bytes of ``key`` from ``start``."""
        return RemoteFile(self, Window(key, start, size))

    # reads ---------------------------------------------------------------------

    def readinto(self, window: Window, offset: int, buf: memoryview) -> int:
        """Bytes of ``window`` from ``offset`` into ``buf`` (fewer only at its end);
        how many. From any thread but the store's loop."""
        if offset < 0:
            raise ValueError(
                f"{self.store.where(window.key)}: a read at {offset}, before the start"
            )
        self._not_on_loop()
        end = min(offset + len(buf), window.size)
        done = 0
        while offset + done < end:
            at = offset + done
            index, lo = divmod(at, self.block_bytes)
            hi = min(self.block_bytes, end - index * self.block_bytes)
            self._read_block(_Block(window, index), lo, buf[done : done + hi - lo])
            done += hi - lo
        return done

    def read(self, window: Window, offset: int, length: int) -> bytes:
        buf = bytearray(max(0, min(length, window.size - offset)))
        n = self.readinto(window, offset, memoryview(buf))
        return bytes(buf[:n])

    async def aread(self, window: Window, offset: int, length: int) -> bytes:
        """``read`` for code on the store's loop."""
        return await asyncio.to_thread(self.read, window, offset, length)

    def _not_on_loop(self) -> None:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            return
        if running is self._loop:
            raise RuntimeError("RangeCache.read on its store's event loop: use aread")

    def _read_block(self, block: _Block, lo: int, out: memoryview) -> None:
        fd, waiting, mine = self._claim(block)
        if waiting is None:
            try:
                n = os.preadv(fd, [out], lo)
            finally:
                os.close(fd)
            if n != len(out):
                raise RemoteError(f"{self.folder / block.name()}: a cached block was cut short")
            return
        if mine:
            self._fetch(block, waiting)
        data = waiting.result()
        out[:] = data[lo : lo + len(out)]

    def _claim(self, block: _Block) -> tuple[int, concurrent.futures.Future[bytes] | None, bool]:
        """The cached block's file, opened under the lock (an eviction after
        leaves it readable); or else the fetch to wait for, and whether it is
        this reader's to make."""
        with self._cond:
            self._check_open(block.window.key)
            if block in self._blocks:
                try:
                    fd = open_file(self.folder / block.name(), os.O_RDONLY, root=self.folder)
                except FileNotFoundError:  # removed behind the cache's back: fetched again
                    self._cached -= self._blocks.pop(block)
                else:
                    self._blocks.move_to_end(block)
                    self._stats.hits += 1
                    return fd, None, False
            waiting = self._inflight.get(block)
            if waiting is not None:
                return -1, waiting, False
            waiting = self._inflight[block] = concurrent.futures.Future()
            return -1, waiting, True

    def prefetch(self, window: Window, first: int) -> None:
        """The ``read_ahead`` blocks of ``window`` from block ``first`` fetched in
        the background, those not cached or on their way already."""
        last = min(first + self.read_ahead, -(-window.size // self.block_bytes))
        for index in range(first, last):
            block = _Block(window, index)
            with self._cond:
                if self._closed or block in self._blocks or block in self._inflight:
                    continue
                result = self._inflight[block] = concurrent.futures.Future()
                if self._ahead is None:
                    self._ahead = concurrent.futures.ThreadPoolExecutor(
                        self.read_ahead, thread_name_prefix="coldkeep-read-ahead"
                    )
                task = self._ahead.submit(self._fetch, block, result)
            task.add_done_callback(functools.partial(self._abandon, block, result))

    def _abandon(
        self,
        block: _Block,
        result: concurrent.futures.Future[bytes],
        task: concurrent.futures.Future[None],
    ) -> None:
        """A read-ahead that close cancelled before it started: a reader waiting
        for its block is woken with the error."""
        if task.cancelled():
            with self._cond:
                self._inflight.pop(block, None)
            result.set_exception(RemoteError(f"{self.folder}: the remote cache was closed"))

    def _check_open(self, key: str) -> None:
        if self._closed:
            raise RemoteError(f"{self.store.where(key)}: read after the remote cache was closed")

    # fetches ---------------------------------------------------------------------

    def _length(self, block: _Block) -> int:
        return min(self.block_bytes, block.window.size - block.index * self.block_bytes)

    def _fetch(self, block: _Block, result: concurrent.futures.Future[bytes]) -> None:
        """The block fetched (room made first) and placed; its readers woken with
        its bytes, or with the error and nothing cached."""
        n = self._length(block)
        try:
            self._reserve(block, n)
            try:
                data = self._get(block, n)
                kept = self._place(block, data)
            finally:
                with self._cond:
                    self._reserved -= n
                    self._cond.notify_all()
        except BaseException as err:  # noqa: BLE001 - handed on: its readers re-raise it
            with self._cond:
                self._inflight.pop(block, None)
                self._stats.failed += 1
            result.set_exception(err)
            return
        with self._cond:
            self._inflight.pop(block, None)
            if kept:
                self._blocks[block] = n
                self._cached += n
            else:
                self._stats.not_kept += 1
        result.set_result(data)

    def _reserve(self, block: _Block, n: int) -> None:
        with self._cond:
            while self._cached + self._reserved + n > self.cache_bytes:
                self._check_open(block.window.key)
                if self._blocks:
                    self._evict_oldest()
                elif self._reserved:
                    self._cond.wait()
                else:
                    break
            self._reserved += n

    def _evict_oldest(self) -> None:
        """Under the lock: a reader that opened the file before keeps reading it."""
        old, n = self._blocks.popitem(last=False)
        os.unlink(self.folder / old.name())
        self._cached -= n
        self._stats.evicted += 1

    def _get(self, block: _Block, n: int) -> bytes:
        w = block.window
        start = w.start + block.index * self.block_bytes
        self._limiter.take(n, self._cancel)
        with self._cond:
            self._stats.gets += 1
        data = self._on_loop(w.key, self.store.read_range(w.key, start, n, w.version))
        if len(data) != n:
            raise RemoteError(
                f"{self.store.where(w.key)}: {len(data)} bytes at byte {start} where {n} "
                "were expected (the object is shorter than the manifest records; "
                "run coldkeep verify --remote)"
            )
        with self._cond:
            self._stats.bytes_fetched += n
        return data

    def _on_loop(self, key: str, call: Coroutine[Any, Any, T]) -> T:
        with self._cond:  # none sent after close took the ones to cancel
            if self._closed:
                call.close()
            self._check_open(key)
            try:
                pending = asyncio.run_coroutine_threadsafe(call, self._loop)
            except RuntimeError:  # the loop is closed
                call.close()
                raise RemoteError(
                    f"{self.store.where(key)}: the remote's connection was closed (read ends)"
                ) from None
            self._calls.add(pending)
        try:
            return pending.result()
        except concurrent.futures.CancelledError:
            raise RemoteError(
                f"{self.store.where(key)}: read cut short: the remote cache was closed"
            ) from None
        finally:
            with self._cond:
                self._calls.discard(pending)

    def _place(self, block: _Block, data: bytes) -> bool:
        """The block in the folder under its name (a temp name renamed); False
        when the folder refused it (full disk, closed): served, not kept."""
        final = self.folder / block.name()
        tmp = self.folder / f".{block.name()}.{secrets.token_hex(4)}{PARTIAL_SUFFIX}"
        with self._cond:
            if self._closed:
                return False
        try:
            fd = open_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, root=self.folder)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            os.rename(tmp, final)
        except OSError:
            # Not kept: this read still has its bytes, a later one fetches again.
            tmp.unlink(missing_ok=True)
            return False
        return True

    # the end -----------------------------------------------------------------------

    def close(self) -> None:
        """Every GET in flight cancelled (its readers get a ``RemoteError``), the
        folder removed. Idempotent."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            calls = list(self._calls)
            self._cond.notify_all()
        self._cancel.cancel("the remote cache was closed")
        for call in calls:
            call.cancel()
        if self._ahead is not None:
            self._ahead.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(self.folder)
        os.close(self._lock_fd)


class RemoteFile(io.RawIOBase):
    """A seekable, read-only file over one window of a remote object, read
    through a ``RangeCache``: from a worker thread, as a gzip inflater reads a
    file (``readinto``, ``read``, ``seek``, ``tell``). One per reader, as an open
    file is (its position is its own); the cache behind it is shared. Reading a
    whole block's worth in order starts the read-ahead."""

    def __init__(self, cache: RangeCache, window: Window) -> None:
        super().__init__()
        self.cache = cache
        self.window = window
        self._pos = 0
        self._in_order = 0  # bytes read in order up to _pos (read-ahead past a block)

    @property
    def name(self) -> str:
        """The object as messages name it (its URL, and the member's offset)."""
        where = self.cache.store.where(self.window.key)
        return where if self.window.start == 0 else f"{where}@{self.window.start}"

    @property
    def size(self) -> int:
        return self.window.size

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self.closed:
            raise ValueError("read of a closed file")
        view = memoryview(b).cast("B")
        start = self._pos
        n = self.cache.readinto(self.window, start, view)
        self._pos += n
        self._in_order += n
        if self._in_order >= self.cache.block_bytes and self.cache.read_ahead and n:
            self.cache.prefetch(self.window, (self._pos - 1) // self.cache.block_bytes + 1)
        return n

    def readall(self) -> bytes:
        """The rest of the window in one read (not a chunk at a time)."""
        buf = bytearray(max(0, self.window.size - self._pos))
        n = self.readinto(buf)
        return bytes(buf[:n])

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._pos, os.SEEK_END: self.window.size}
        if whence not in base:
            raise ValueError(f"whence {whence} is not SEEK_SET, SEEK_CUR or SEEK_END")
        pos = base[whence] + offset
        if pos < 0:
            raise OSError(22, f"{self.name}: seek to {pos}, before the start")
        if pos != self._pos:
            self._in_order = 0
        self._pos = pos
        return pos

    def tell(self) -> int:
        return self._pos


@asynccontextmanager
async def range_cache(
    store: ObjectStore, mount: MountSettings, limiter: RateLimiter = UNLIMITED
) -> AsyncIterator[RangeCache]:
    """A cache for ``store`` (whose client lives on the running loop), as
    ``[mount]`` says, for the life of the block (closed after it)."""
    loop = asyncio.get_running_loop()
    cache = await asyncio.to_thread(
        RangeCache.open, store, mount.cache_dir, mount.cache_bytes, loop, limiter=limiter
    )
    try:
        yield cache
    finally:
        await asyncio.to_thread(cache.close)


# the folder ---------------------------------------------------------------------------


def _make_folder(cache_dir: Path) -> tuple[Path, int]:
    """A new folder of this process's own in ``cache_dir``, locked for its life
    (the lock is how a later open knows it is not stale): made under a temp
    name, locked, then renamed, so no folder is ever seen unlocked but a stale one."""
    cache_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    clear_stale(cache_dir)
    name = f"{FOLDER_PREFIX}{secrets.token_hex(8)}"
    tmp = cache_dir / f".{name}{PARTIAL_SUFFIX}"
    tmp.mkdir(mode=0o700)
    fd = os.open(tmp / _LOCK, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    folder = cache_dir / name
    os.rename(tmp, folder)
    return folder, fd


def clear_stale(cache_dir: Path) -> list[Path]:
    """The cache folders in ``cache_dir`` no open cache holds (a crash left
    them), removed; which."""
    removed = []
    with os.scandir(cache_dir) as it:
        names = [e.name for e in it if e.name.startswith(FOLDER_PREFIX) and e.is_dir()]
    for name in names:
        folder = cache_dir / name
        if _remove_if_free(folder):
            removed.append(folder)
    return removed


def _remove_if_free(folder: Path) -> bool:
    try:
        fd = os.open(folder / _LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return False  # another open removing it right now
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # in use
        shutil.rmtree(folder)
        return True
    finally:
        os.close(fd)
