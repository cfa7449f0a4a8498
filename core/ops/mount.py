"""``mount``: the archive as a read-only FUSE filesystem (libfuse 3 through
mfusepy, as libfuse.py loads it): every archived path at its original place,
its newest version (as restore takes it: the source's mtime, then the entry
id), with its original size, mtime and mode; ``.versions/<path>/<archived-at>``
for every version; with ``with_live``, the live tree merged over it. The tree
is read from the manifest as it is looked at (mounttree.py); a version's
bytes are inflated from its gzip or its bundle member by ``files/reader.py``
as they are read, or, for a copy only the remote tier holds, from its
object's bytes fetched by ranged GETs into a bounded block cache
(remote/rangecache.py) as they are read.

Threads: libfuse calls in on its own threads (mfusepy's multithreaded loop);
lookups and listings query the manifest on those threads, each on a read-only
connection of its own; opening a version and inflating it run on one asyncio
loop in a thread of its own, reached with ``run_coroutine_threadsafe``. A small
version (``SMALL``: every bundle member) is read whole at its first read, on the
FUSE thread, checked, and served from memory (``Smalls``, bounded). A larger
version is one inflate from the start of its gzip (``_Stream``), at most
``WINDOW`` bytes ahead of the furthest read and ``KEEP`` behind it. A read
before what is kept, or more than ``AHEAD`` past it, is a random read: served
on its FUSE thread by ``files/seek.py`` from the nearest seek point (or its
checkpoint cache for a gzip written without them), the stream left where it is.
With a ``[remote]``, its store, a reader of its copies and the block cache are
opened on the loop as the mount starts (in the background: a read that needs
them waits) and closed when it ends (``_Remote``); the GETs run on the loop,
the reads that wait for them on the other threads.

Invariants:
- Read-only: the manifest opened read-only, no archive lock, nothing written
  anywhere; the mount is ``ro`` and an open for writing is EROFS.
- A pass during the mount shows within ``RECHECK`` plus the kernel's
  ``TIMEOUT``: new versions appear, expired ones vanish.
- The bytes are checked against the entry's sha256 as they stream: a mismatch
  (or a gzip that cannot be read) makes the read that reaches the end EIO. A
  random read cannot be checked (the hash needs every byte before it): what it
  serves is the gzip's bytes at that place, and a gzip that cannot be inflated
  there is EIO.
- A version only the remote tier holds is read through the block cache: a
  bundle member costs the GETs of its own bytes, never the bundle's; a random
  read the blocks its seek point needs. A sealed copy (client-side
  encryption) is read through the same cache as its age stream and opened
  whole, at its first read, into a file in the cache's folder (age cannot be
  read by ranges; fetch.py), read from there; without ``--identity`` it is EIO
  with the line naming the key it needs; one in a cold class (GLACIER,
  DEEP_ARCHIVE) not thawed now is EIO with the line saying what a thaw takes
  and costs and the ``coldkeep thaw`` that asks for it. Its blocks live in a folder of their
  own under ``[mount] cache_dir``, at most ``cache_bytes``, removed when the
  mount ends (the cache's GETs and bytes fetched logged then). Nothing is
  written under archive_root: the reader is built here, not by
  ``remote_reader`` (which clears scratch files, an operation under the lock's).
- An open file outlives its local copy: where a ship drops it (keep_local_days)
  under an open handle, the handle's next read that needs it looks the copy up
  again and reads the remote one, as a new open would; an inflate already under
  way reads on from the descriptor it holds.
- Without a ``[remote]``, or with one that cannot be read when the mount starts
  (unreachable, its marker missing, its cache_dir unusable), the mount still
  serves every local copy; a version only the remote holds is EIO with a log
  line naming why, until the archive is mounted again.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import io
import logging
import os
import shutil
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, Protocol, TypeVar, cast

from ..base.cancel import CancelToken
from ..base.codec import Digest
from ..base.config import Settings
from ..base.errors import ColdkeepError, UsageError
from ..base.layout import Layout, UnsafePath
from ..base.ratelimit import RateLimiter
from ..files.reader import GzipAt, copy_entry, stream_entry
from ..files.seek import SeekReader
from ..remote.cold import RemoteCold
from ..remote.connect import connected
from ..remote.fetch import RemoteReader
from ..remote.rangecache import RangeCache, range_cache
from ..remote.sealing import Identities
from ..store.entries import Entry
from ..store.manifest import Manifest
from . import libfuse
from .mounttree import DIR_MODE, RECHECK, Catalog, Dir, File, Live, LiveTree, Target, View

log = logging.getLogger(__name__)

WINDOW = 4 << 20  # inflated bytes held ahead of the furthest read
KEEP = 4 << 20  # and behind it: the kernel's readahead reads a little out of order
# A version at most this size is read whole at its first read, in the FUSE
# thread, and checked before a byte is served; SMALL_HELD bytes of them are kept.
SMALL = 1 << 20
SMALL_HELD = 64 << 20
# A read this far past what the stream holds waits for it; further is a random
# read (from a seek point at most a MiB of inflate away).
AHEAD = 2 << 20
# The kernel's cache of names and attributes: short, so a pass shows soon.
TIMEOUT = RECHECK
_LOOP_ENDED = 8  # fuse_main's status when its loop ended (a signal, or an error)
# How long the mount waits, as it starts, for the remote to say it is the one
# shipped to: an endpoint that does not answer must not hold the mount back.
REMOTE_CHECK_S = 15.0
T = TypeVar("T")


class MountError(ColdkeepError):
    """This machine cannot mount (no FUSE): the message says what to install."""


class _Unreadable(OSError):
    """EIO for a read of an archived version, ``strerror`` saying why. The mount
    logs it once for each open file (``ArchiveFS.read``): the kernel asks again
    after an EIO (its readahead, then the page), and a reader that gets one
    stops, so a line for every ask says one failure two or three times."""

    def __init__(self, problem: str) -> None:
        super().__init__(errno.EIO, problem)
        self.problem = problem


class _Closed(Exception):
    """The file was released while its inflate ran: the inflate stops."""


class _Stream:
    """One open file's bytes as they are inflated, for the readers of its handle
    (the inflate thread writes; FUSE threads read)."""

    def __init__(self, size: int) -> None:
        self.size = size  # a read that reaches it waits for the verdict
        self.cond = threading.Condition()
        self.buf = bytearray()
        self.base = 0  # the offset of buf[0]
        self.furthest = 0
        self.done = False
        self.problem: str | None = None
        self.closed = False
        self.cancel = CancelToken()

    def write(self, piece: bytes) -> int:
        with self.cond:
            while not self.closed and self.base + len(self.buf) >= self.furthest + WINDOW:
                self.cond.wait()
            if self.closed:
                raise _Closed
            self.buf += piece
            # Held from KEEP behind the furthest read: a read far ahead never
            # makes the buffer hold everything before it.
            drop = max(0, min(len(self.buf), self.furthest - KEEP - self.base))
            del self.buf[:drop]
            self.base += drop
            self.cond.notify_all()
        return len(piece)

    def flush(self) -> None:
        """The reader's sink flushes after every piece; nothing to do here."""

    def finish(self, problem: str | None) -> None:
        with self.cond:
            self.done, self.problem = True, problem
            self.cond.notify_all()

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()
        self.cancel.cancel("the file was released")

    def reaches(self, offset: int) -> bool:
        """Whether a read at ``offset`` is the stream's: among what it keeps, or
        at most ``AHEAD`` past it."""
        with self.cond:
            return not self.closed and self.base <= offset <= self.base + len(self.buf) + AHEAD

    def read(self, offset: int, size: int) -> bytes | None:
        """``size`` bytes at ``offset``; None when they are no longer kept (or
        the file was released): the caller reads them elsewhere."""
        with self.cond:
            self.furthest = max(self.furthest, offset + size)
            self.cond.notify_all()
            while True:
                if self.closed or offset < self.base:
                    return None
                end = self.base + len(self.buf)
                if self.done or (end >= offset + size and offset + size < self.size):
                    break
                self.cond.wait()
            if self.problem is not None and offset + size >= end:
                raise _Unreadable(self.problem)
            return bytes(self.buf[offset - self.base : offset - self.base + size])


class Source(Protocol):
    """An open file's bytes: ``size`` bytes at ``offset`` (fewer at its end)."""

    def read(self, offset: int, size: int) -> bytes: ...

    def close(self) -> None: ...


class _LiveSource:
    """A live file, read where it lies."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def read(self, offset: int, size: int) -> bytes:
        return os.pread(self.fd, size, offset)

    def close(self) -> None:
        os.close(self.fd)


class _Dropped(Exception):
    """The local copy a handle was reading is gone (``dropped``)."""


def dropped(at: GzipAt, err: OSError) -> bool:
    """Whether ``err`` says the local copy ``at`` was deleted after it was found:
    a ship dropped it (keep_local_days) under an open handle. Looked up again, it
    is the remote copy, the one a new open reads."""
    return at.source == "local" and isinstance(err, FileNotFoundError)


class _SmallSource:
    """A small archived version, served from its bytes read whole and checked
    (``Smalls``): no stream, no hop to the event loop. Its local copy dropped
    before they were read, the handle reads on as a new open would
    (``_ArchivedSource``: the remote copy)."""

    def __init__(self, fs: ArchiveFS, node: File, at: GzipAt, entry: Entry) -> None:
        self.fs, self.node, self.at, self.entry = fs, node, at, entry
        self.lock = threading.Lock()
        self.instead: _ArchivedSource | None = None

    def read(self, offset: int, size: int) -> bytes:
        if self.instead is None:
            try:
                return self.fs.smalls.get(self.at, self.entry)[offset : offset + size]
            except _Dropped:
                with self.lock:
                    if self.instead is None:
                        self.instead = _ArchivedSource(self.fs, self.node)
        return self.instead.read(offset, size)

    def close(self) -> None:
        """The bytes are the cache's; only a source read instead is closed."""
        with self.lock:
            instead = self.instead
        if instead is not None:
            instead.close()


class Smalls:
    """Small versions' bytes, each read whole (its gzip or bundle member) and
    checked against its length and sha256 before any is served; at most
    ``held`` bytes kept, the least recently read dropped first."""

    def __init__(self, held: int = SMALL_HELD) -> None:
        self.held = held
        self.lock = threading.Lock()
        self.kept: OrderedDict[int, bytes] = OrderedDict()
        self.bytes = 0

    def get(self, at: GzipAt, entry: Entry) -> bytes:
        """``entry``'s bytes, read from its gzip ``at`` unless kept; ``_Dropped``
        when ``at`` is a local copy deleted since it was found."""
        with self.lock:
            data = self.kept.get(entry.id)
            if data is not None:
                self.kept.move_to_end(entry.id)
                return data
        data = self._read(at, entry)
        with self.lock:
            if entry.id not in self.kept:
                self.kept[entry.id] = data
                self.bytes += len(data)
                while self.bytes > self.held:
                    self.bytes -= len(self.kept.popitem(last=False)[1])
        return data

    def _read(self, at: GzipAt, entry: Entry) -> bytes:
        out = io.BytesIO()
        try:
            done = copy_entry(at, Digest(entry.bytes, entry.sha256), out)
        except OSError as err:
            if dropped(at, err):
                raise _Dropped from err
            problem: str | None = str(err)
        else:
            problem = done.problem
        if problem is not None:
            problem = f"{entry.relpath} (entry {entry.id}): {problem}"
            raise _Unreadable(problem)
        return out.getvalue()


class _ArchivedSource:
    """An archived version: read in order through its stream (checked against
    its sha256), anywhere else through the seek reader. The stream starts with
    the first read near the start: a reader that only reads at random (the end
    of a log) never inflates, nor fetches from the remote, the bytes before."""

    def __init__(self, fs: ArchiveFS, node: File) -> None:
        self.fs, self.node = fs, node
        self.stream: _Stream | None = None
        self.lock = threading.Lock()  # FUSE threads read one handle at once
        self.closed = False
        self.at: tuple[GzipAt, Entry] | None = None

    def _stream_for(self, offset: int) -> _Stream | None:
        with self.lock:
            if self.stream is None and offset <= AHEAD and not self.closed:
                self.stream = self.fs.start(self.node)
            return self.stream

    def read(self, offset: int, size: int) -> bytes:
        size = max(0, min(size, self.node.size - offset))
        stream = self._stream_for(offset)
        if stream is not None and stream.reaches(offset):
            got = stream.read(offset, size)
            if got is not None:
                return got
        return self._seek(offset, size)

    def _seek(self, offset: int, size: int) -> bytes:
        if self.at is None:
            self.at = self.fs.gzip_of(self.node)
        at, entry = self.at
        try:
            return self.fs.seeker.read_entry(at, entry, offset, size)
        except OSError as err:
            if dropped(at, err):
                self.at = None  # looked up again: the copy a new open would read
                return self._seek(offset, size)
            problem = f"{entry.relpath} (entry {entry.id}) at byte {offset}: {err}"
        except RemoteCold as err:
            problem = str(err.for_entry(entry.id, entry.relpath))
        except ColdkeepError as err:  # CorruptGzip, a remote's error
            problem = f"{entry.relpath} (entry {entry.id}) at byte {offset}: {err}"
        raise _Unreadable(problem)

    def close(self) -> None:
        with self.lock:
            self.closed = True
            stream = self.stream
        if stream is not None:
            stream.close()


class _NoCopy(Exception):
    """No copy of the entry's gzip can be read here; the message says why."""


class _Remote:
    """The remote tier for the life of the mount, opened on its loop in the
    background (the mount is ready without waiting for it; a read that needs it
    waits): a reader of its copies through a block cache (``reader``,
    ``cache``); or, when there is none or it cannot be read, ``why`` (said in
    every EIO it causes)."""

    def __init__(self, identities: Identities | None = None) -> None:
        self.identities = identities  # opens sealed copies (``--identity``)
        self.reader: RemoteReader | None = None
        self.cache: RangeCache | None = None
        self.why = "no [remote] is configured to read it from"
        self._stack = contextlib.AsyncExitStack()
        self._opening: asyncio.Task[None] | None = None

    async def start(self, settings: Settings, manifest: Manifest) -> None:
        """On the loop: the opening begun, not waited for."""
        if settings.remote is not None:
            self._opening = asyncio.create_task(self._open(settings, manifest))

    async def opened(self) -> None:
        """Once the opening is over (shielded: a read given up does not stop it)."""
        if self._opening is not None:
            await asyncio.shield(self._opening)

    async def _open(self, settings: Settings, manifest: Manifest) -> None:
        """The store, the cache and the reader, the remote asked once whether it
        is the one shipped to; whatever fails leaves ``why`` naming it."""
        remote = settings.remote
        assert remote is not None
        try:
            store = await self._stack.enter_async_context(connected(remote))
            limiter = RateLimiter(remote.bytes_per_s)
            cache = await self._stack.enter_async_context(
                range_cache(store, settings.mount, limiter)
            )
            layout = Layout(settings.archive_root)
            reader = RemoteReader(
                store, remote.site, manifest, layout, limiter, cache, self.identities
            )
            await asyncio.wait_for(reader.check(), REMOTE_CHECK_S)
        except (ColdkeepError, OSError, TimeoutError) as err:
            said = str(err) or f"no answer within {REMOTE_CHECK_S:.0f} s"
            self.why = f"the remote tier cannot be read ({said}); mount again once it can"
            log.warning("mount: copies only the remote tier holds will be EIO: %s", said)
            await self._stack.aclose()
            return
        self.reader, self.cache = reader, cache

    async def close(self) -> None:
        """An opening still under way stopped; the cache closed (its folder
        removed) and the store; what the cache cost, logged."""
        if self._opening is not None and not self._opening.done():
            self._opening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._opening
        cache, self.reader, self.cache = self.cache, None, None
        await self._stack.aclose()
        if cache is not None:
            st = cache.stats
            log.info(
                "mount: remote reads: %d GETs, %d bytes fetched, %d block reads from the "
                "cache, %d blocks evicted",
                st.gets, st.bytes_fetched, st.hits, st.evicted,
            )  # fmt: skip


class ArchiveFS:
    """The filesystem's operations, as mfusepy calls them (paths as ``str``)."""

    def __init__(
        self,
        settings: Settings,
        view: View,
        manifest: Manifest,
        loop: asyncio.AbstractEventLoop,
        remote: _Remote | None = None,
    ) -> None:
        self.layout = Layout(settings.archive_root)
        self.view, self.manifest, self.loop = view, manifest, loop
        self.remote = remote or _Remote()
        self.made_ns = time.time_ns()
        self.owner = os.getuid(), os.getgid()  # every name shown as the mounting user's
        self.handles: dict[int, Source] = {}
        self.said: set[tuple[int, str]] = set()  # (handle, problem) logged (``_Unreadable``)
        self.seeker = SeekReader()
        self.smalls = Smalls()
        self.next_fh = 1
        self.lock = threading.Lock()

    def attrs(self, target: Target) -> dict[str, Any]:
        kind = target.kind
        if isinstance(kind, Dir):
            mode, size, nlink, mtime_ns = DIR_MODE, 0, 2, self.made_ns
        else:
            mode = stat.S_IFREG | stat.S_IMODE(kind.mode)
            size, nlink, mtime_ns = kind.size, 1, kind.mtime_ns
        # Times in integer ns (mfusepy's use_ns): a float loses the last digits.
        return {
            "st_mode": mode,
            "st_size": size,
            "st_nlink": nlink,
            "st_mtime": mtime_ns,
            "st_atime": mtime_ns,
            "st_ctime": mtime_ns,
            "st_uid": self.owner[0],
            "st_gid": self.owner[1],
        }

    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        return self.attrs(self.view.resolve(path.strip("/")))

    def readdir(self, path: str, fh: int) -> Iterator[Any]:
        yield from (".", "..")
        # The mode alone: all a listing gives the kernel (mfusepy takes an int).
        yield from self.view.names(path.strip("/"))

    def open(self, path: str, flags: int) -> int:
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC | os.O_APPEND):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)
        target = self.view.resolve(path.strip("/"))
        if isinstance(target.kind, Dir):
            raise OSError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        source = self.source(target)
        with self.lock:
            fh, self.next_fh = self.next_fh, self.next_fh + 1
            self.handles[fh] = source
        return fh

    def source(self, target: Target) -> Source:
        """Where an open file's bytes come from."""
        if isinstance(target.kind, Live):
            assert self.view.live is not None
            return _LiveSource(self.view.live.open(target.rel))
        node = target.kind
        assert isinstance(node, File)
        if node.size <= SMALL:
            entry = self.view.catalog.entry(node.id)
            try:
                at = self._local_gzip(entry) if entry is not None else None
            except UnsafePath:
                at = None  # the stream's read says so, EIO
            if at is not None and entry is not None:
                return _SmallSource(self, node, at, entry)
        return _ArchivedSource(self, node)

    def _local_gzip(self, entry: Entry) -> GzipAt | None:
        """``entry``'s local gzip; None when it is recorded missing or not on
        disk (a ship dropped it). ``UnsafePath`` for a gz_path that would leave
        archive_root."""
        path = self.layout.abs(entry.gz_path)
        if entry.status != "missing" and path.exists():
            return GzipAt(path, entry.span, "local")
        return None

    def gzip_of(self, node: File) -> tuple[GzipAt, Entry]:
        """Where ``node``'s gzip is read (a local file, or the remote copy through
        the block cache), and its entry (for its seek points); EIO when no copy
        can be read here."""
        try:
            return asyncio.run_coroutine_threadsafe(self._where(node), self.loop).result()
        except RemoteCold as err:
            problem = str(err.for_entry(node.id))
        except (_NoCopy, ColdkeepError) as err:
            problem = str(err)
        raise _Unreadable(problem)

    async def _where(self, node: File) -> tuple[GzipAt, Entry]:
        entry = await self.manifest.entry(node.id)
        if entry is None:
            raise _NoCopy(f"entry {node.id} is no longer in the manifest")
        return await self._gzip_at(entry), entry

    async def _gzip_at(self, entry: Entry) -> GzipAt:
        """The copy of ``entry``'s gzip to read: the local one when it is there
        (the remote not waited for), else the remote tier's through the cache;
        ``_NoCopy`` saying why not."""
        local = await asyncio.to_thread(self._local_gzip, entry)
        if local is not None:
            return local
        await self.remote.opened()
        reader, cache = self.remote.reader, self.remote.cache
        if reader is None or cache is None:
            raise _NoCopy(
                f"{entry.relpath}: entry {entry.id}: no local copy of its gzip "
                f"({self.layout.root / entry.gz_path}), "
                f"and {self.remote.why}"
            )
        source = await reader.source_of(entry)
        if source == "remote":
            return await reader.cached_gzip(entry, cache)
        if source == "local":  # placed back since the look above
            path = await asyncio.to_thread(self.layout.abs, entry.gz_path)
            return GzipAt(path, entry.span, "local")
        raise _NoCopy(f"{entry.relpath}: entry {entry.id} has no copy of its gzip (missing)")

    def start(self, node: File) -> _Stream:
        stream = _Stream(node.size)
        asyncio.run_coroutine_threadsafe(self._inflate(node, stream), self.loop)
        return stream

    async def _inflate(self, node: File, stream: _Stream) -> None:
        try:
            problem = await self._stream_to(node, stream)
        except _Closed:
            return
        except _NoCopy as err:
            problem = str(err)
        except RemoteCold as err:
            problem = str(err.for_entry(node.id))
        except (OSError, ColdkeepError) as err:  # the gzip unreadable, a remote's error
            problem = f"entry {node.id}: {err}"
        stream.finish(problem)

    async def _stream_to(self, node: File, stream: _Stream) -> str | None:
        """The entry's bytes into ``stream``; what is wrong with them, or None."""
        at, entry = await self._where(node)
        expect = Digest(entry.bytes, entry.sha256)
        # Only write and flush are called on it: _Stream is one.
        try:
            done = await stream_entry(at, expect, cast(BinaryIO, stream), cancel=stream.cancel)
        except OSError as err:
            # Dropped between the look and the open (once open, the inflate
            # reads its descriptor to the end): nothing sent yet, looked up again.
            if not dropped(at, err):
                raise
            return await self._stream_to(node, stream)
        return None if done.problem is None else f"{entry.relpath}: {done.problem}"

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        try:
            return self.handles[fh].read(offset, size)
        except _Unreadable as err:
            self._say(fh, err.problem)
            raise

    def _say(self, fh: int, problem: str) -> None:
        """``problem`` logged, once for the open file ``fh``."""
        with self.lock:
            said = (fh, problem) in self.said
            self.said.add((fh, problem))
        if not said:
            log.error("mount: %s", problem)

    def release(self, path: str, fh: int) -> int:
        with self.lock:
            source = self.handles.pop(fh)
            self.said = {(h, why) for h, why in self.said if h != fh}
        source.close()
        return 0


def _loop_thread() -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="mount-loop", daemon=True)
    thread.start()
    return loop, thread


def check_mountpoint(mountpoint: Path) -> None:
    """Refuse a mountpoint that is missing, not a folder, not empty, or already
    a mountpoint: one line naming it (UsageError)."""
    if not mountpoint.exists():
        raise UsageError(f"{mountpoint} does not exist: create an empty folder to mount on")
    if not mountpoint.is_dir():
        raise UsageError(f"{mountpoint} is not a folder: mount on an empty folder")
    if os.path.ismount(mountpoint):
        raise UsageError(f"{mountpoint} is already a mountpoint (fusermount3 -u {mountpoint})")
    if any(os.scandir(mountpoint)):
        raise UsageError(f"{mountpoint} is not empty: mount on an empty folder")


def fuse_problem() -> str | None:
    """Why this machine cannot make a FUSE mount, and what to install; None if
    it should be able to."""
    if not os.path.exists("/dev/fuse"):
        return (
            "/dev/fuse does not exist: load the fuse module (modprobe fuse), or in a "
            "container pass the device (--device /dev/fuse --cap-add SYS_ADMIN)"
        )
    missing = libfuse.problem()
    if missing is not None:
        return missing
    if os.geteuid() != 0:
        # A user's mount is made by the setuid fusermount3, but libfuse opens
        # /dev/fuse itself first and gives up if it may not.
        if shutil.which("fusermount3") is None:
            return "fusermount3 is not installed (apt-get install fuse3; dnf install fuse3)"
        if not os.access("/dev/fuse", os.R_OK | os.W_OK):
            mode = stat.filemode(os.stat("/dev/fuse").st_mode)
            return (
                f"/dev/fuse ({mode}) may not be opened by uid {os.getuid()}: a user's "
                "mount needs it crw-rw-rw- (fuse3's udev rule sets it so: "
                "chmod 0666 /dev/fuse), or mount as root"
            )
        return None
    try:
        os.close(os.open("/dev/fuse", os.O_RDWR))
    except OSError as err:
        return f"cannot open /dev/fuse: {err.strerror}"
    return None


def _opened(
    settings: Settings, mountpoint: Path, with_live: bool, loop: asyncio.AbstractEventLoop
) -> tuple[Manifest, View]:
    path = Layout(settings.archive_root).manifest
    if not path.exists():
        raise UsageError(f"nothing is archived yet: {path} does not exist (no pass has run)")
    manifest = asyncio.run_coroutine_threadsafe(Manifest.open(path, readonly=True), loop).result()
    try:
        catalog = Catalog(path)
        live = None
        if with_live:
            live = LiveTree(settings.live_root, [settings.archive_root, mountpoint])
    except BaseException:
        asyncio.run_coroutine_threadsafe(manifest.close(), loop).result()
        raise
    return manifest, View(catalog, live)


def serve(
    settings: Settings,
    mountpoint: Path,
    *,
    with_live: bool = False,
    ready: Callable[[], None] | None = None,
    identities: Identities | None = None,
) -> None:
    """Mount the archive at ``mountpoint`` and serve until it is unmounted
    (``fusermount3 -u``, Ctrl-C or SIGTERM: libfuse's handlers unmount);
    ``ready`` is called once the mount is made; sealed remote copies are
    opened with ``identities``. A mountpoint that will not do
    is ``UsageError``, a machine without FUSE ``MountError``, a mount libfuse
    refuses ``RuntimeError``."""
    check_mountpoint(mountpoint)
    loop, thread = _loop_thread()
    try:
        manifest, view = _opened(settings, mountpoint, with_live, loop)
        try:
            problem = fuse_problem()
            if problem is not None:
                raise MountError(f"cannot mount {mountpoint}: {problem}")
            # Here, not at the top: importing mfusepy loads libfuse (and fails
            # without it), which only the mount itself needs.
            try:
                mfusepy = libfuse.mfusepy()
            except libfuse.NoLibfuse3 as err:
                raise MountError(f"cannot mount {mountpoint}: {err}") from None
            remote = _Remote(identities)
            asyncio.run_coroutine_threadsafe(remote.start(settings, manifest), loop).result()
            try:
                fs = ArchiveFS(settings, view, manifest, loop, remote)
                _run(mfusepy, fs, mountpoint, ready)
            finally:
                asyncio.run_coroutine_threadsafe(remote.close(), loop).result()
        finally:
            view.catalog.close()
            if view.live is not None:
                view.live.close()
            asyncio.run_coroutine_threadsafe(manifest.close(), loop).result()
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()


def _run(mfusepy: Any, fs: ArchiveFS, mountpoint: Path, ready: Callable[[], None] | None) -> None:
    def init(path: str) -> None:
        if ready is not None:
            ready()

    class Kernel(mfusepy.Operations):  # type: ignore[misc]
        use_ns = True

    for name in ("getattr", "readdir", "open", "read", "release"):
        setattr(Kernel, name, staticmethod(getattr(fs, name)))
    Kernel.init = staticmethod(init)
    try:
        mfusepy.FUSE(
            Kernel(),
            str(mountpoint),
            foreground=True,
            ro=True,
            fsname="coldkeep",
            subtype="coldkeep",
            attr_timeout=TIMEOUT,
            entry_timeout=TIMEOUT,
        )
    except RuntimeError as err:
        # libfuse's main returns 8 when its loop ends on SIGINT/SIGTERM (its own
        # handlers, which unmount on the way out) and on a loop error, which
        # libfuse has already printed: either way the mount is gone. Anything
        # else (1: the mount refused) is the caller's to report.
        if err.args != (_LOOP_ENDED,):
            raise
