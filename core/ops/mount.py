"""``mount``: the archive as a read-only FUSE filesystem (libfuse3 through
mfusepy): every archived path at its original place, its newest version (as
restore takes it: the source's mtime, then the entry id), with its original
size, mtime and mode; its bytes inflated from its gzip or its bundle member by
``files/reader.py`` as they are read.

Threads: libfuse calls in on its own threads (mfusepy's multithreaded loop);
the manifest and the reader live on one asyncio loop in a thread of its own,
reached with ``run_coroutine_threadsafe``. An open file is one inflate from the
start of its gzip (``_Stream``), at most ``WINDOW`` bytes ahead of the furthest
read and ``KEEP`` behind it; a read before what is kept starts the inflate over
(random access is slow for now: seek points in the gzips are the way out).

Invariants:
- Read-only: the manifest opened read-only, no archive lock, nothing written
  anywhere; the mount is ``ro`` and an open for writing is EROFS.
- The tree is the manifest as it was at mount time; names are the manifest's
  (any byte but ``/`` and NUL, as ``os.fsdecode`` gives them). A relpath with an
  empty, ``.`` or ``..`` component is left out, so no path leaves the tree.
- The bytes are checked against the entry's sha256 as they stream: a mismatch
  (or a gzip that cannot be read) makes the read that reaches the end EIO.
- Only local copies are read: a version only the remote tier holds is EIO.
"""

from __future__ import annotations

import asyncio
import errno
import gc
import logging
import os
import stat
import threading
import time
from collections.abc import Coroutine, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple, TypeVar, cast

from ..base.cancel import CancelToken
from ..base.codec import Digest
from ..base.config import Settings
from ..base.layout import Layout
from ..files.reader import entry_gzip, stream_entry
from ..store.manifest import Manifest

log = logging.getLogger(__name__)

WINDOW = 4 << 20  # inflated bytes held ahead of the furthest read
KEEP = 4 << 20  # and behind it: the kernel's readahead reads a little out of order
TIMEOUT = 60.0  # kernel cache of names and attributes: the tree never changes
_LOOP_ENDED = 8  # fuse_main's status when its loop ended (a signal, or an error)
T = TypeVar("T")


class File(NamedTuple):
    id: int
    size: int
    mtime_ns: int
    mode: int


@dataclass
class Tree:
    """Directories (relpath -> {name: File, or None for a subdirectory}); ""
    is the root."""

    dirs: dict[str, dict[str, File | None]]
    made_ns: int
    left_out: int = 0

    @classmethod
    def of(cls, rows: list[tuple[int, str, int, int, int]]) -> Tree:
        tree = cls({"": {}}, time.time_ns())
        for entry_id, relpath, size, mtime_ns, mode in rows:
            parts = relpath.split("/")
            if any(p in ("", ".", "..") for p in parts):
                tree.left_out += 1
                continue
            for depth in range(len(parts) - 1):
                parent, name = "/".join(parts[:depth]), parts[depth]
                if tree.dirs[parent].get(name) is not None:
                    tree.left_out += 1  # a file where a directory is needed: the directory wins
                tree.dirs[parent][name] = None
                tree.dirs.setdefault("/".join(parts[: depth + 1]), {})
            leaf_dir = "/".join(parts[:-1])
            if relpath in tree.dirs:
                tree.left_out += 1
                continue
            tree.dirs[leaf_dir][parts[-1]] = File(entry_id, size, mtime_ns, mode)
        return tree

    def lookup(self, path: str) -> File | None:
        """The file at ``path`` (FUSE's, "/"-rooted); None for a directory;
        ENOENT when neither."""
        rel = path.strip("/")
        if rel in self.dirs:
            return None
        parent, _, name = rel.rpartition("/")
        got = self.dirs.get(parent, {}).get(name)
        if got is None:
            raise OSError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        return got

    def attrs(self, node: File | None) -> dict[str, Any]:
        if node is None:
            mode, size, nlink, mtime_ns = stat.S_IFDIR | 0o555, 0, 2, self.made_ns
        else:
            mode = stat.S_IFREG | stat.S_IMODE(node.mode)
            size, nlink, mtime_ns = node.size, 1, node.mtime_ns
        # Times in integer ns (mfusepy's use_ns): a float loses the last digits.
        return {
            "st_mode": mode,
            "st_size": size,
            "st_nlink": nlink,
            "st_mtime": mtime_ns,
            "st_atime": mtime_ns,
            "st_ctime": mtime_ns,
            "st_uid": os.getuid(),
            "st_gid": os.getgid(),
        }

    def listing(self, path: str) -> Iterator[tuple[str, dict[str, Any], int]]:
        for name, node in self.dirs[path.strip("/")].items():
            yield name, self.attrs(node), 0


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

    def read(self, offset: int, size: int) -> bytes | None:
        """``size`` bytes at ``offset``; None when they are no longer kept (or
        the stream was closed for a fresh one): the caller starts over."""
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
                log.error("mount: %s", self.problem)
                raise OSError(errno.EIO, self.problem)
            return bytes(self.buf[offset - self.base : offset - self.base + size])


class ArchiveFS:
    """The filesystem's operations, as mfusepy calls them (paths as ``str``)."""

    def __init__(
        self, settings: Settings, tree: Tree, manifest: Manifest, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.layout = Layout(settings.archive_root)
        self.tree, self.manifest, self.loop = tree, manifest, loop
        self.handles: dict[int, tuple[File, _Stream]] = {}
        self.next_fh = 1
        self.lock = threading.Lock()

    def _on_loop(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        return self.tree.attrs(self.tree.lookup(path))

    def readdir(self, path: str, fh: int) -> Iterator[Any]:
        yield from (".", "..")
        yield from self.tree.listing(path)

    def open(self, path: str, flags: int) -> int:
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC | os.O_APPEND):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)
        node = self.tree.lookup(path)
        if node is None:
            raise OSError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        with self.lock:
            fh, self.next_fh = self.next_fh, self.next_fh + 1
            self.handles[fh] = (node, self._start(node))
        return fh

    def _start(self, node: File) -> _Stream:
        stream = _Stream(node.size)
        self._on_loop(self._inflate(node, stream))
        return stream

    async def _inflate(self, node: File, stream: _Stream) -> None:
        try:
            problem = await self._stream_to(node, stream)
        except _Closed:
            return
        except OSError as err:
            problem = f"entry {node.id}: {err}"
        stream.finish(problem)

    async def _stream_to(self, node: File, stream: _Stream) -> str | None:
        """The entry's bytes into ``stream``; what is wrong with them, or None."""
        entry = await self.manifest.entry(node.id)
        if entry is None:
            return f"entry {node.id} is no longer in the manifest"
        async with entry_gzip(entry, self.layout, None, stream.cancel) as at:
            if at is None:
                return f"{entry.relpath}: no local copy of its gzip (remote reads come later)"
            expect = Digest(entry.bytes, entry.sha256)
            # Only write and flush are called on it: _Stream is one.
            done = await stream_entry(at, expect, cast(BinaryIO, stream), cancel=stream.cancel)
        return None if done.problem is None else f"{entry.relpath}: {done.problem}"

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        node, stream = self.handles[fh]
        size = max(0, min(size, node.size - offset))
        while (got := stream.read(offset, size)) is None:
            # Before what is kept: inflate again from the start (one fresh
            # stream for the handle, whichever of its readers gets here first).
            with self.lock:
                current = self.handles[fh][1]
                if current is stream:
                    stream.close()
                    current = self._start(node)
                    self.handles[fh] = (node, current)
            stream = current
        return got

    def release(self, path: str, fh: int) -> int:
        with self.lock:
            _, stream = self.handles.pop(fh)
        stream.close()
        return 0


def _loop_thread() -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="mount-loop", daemon=True)
    thread.start()
    return loop, thread


def serve(settings: Settings, mountpoint: Path) -> None:
    """Mount the archive at ``mountpoint`` and serve until it is unmounted
    (``fusermount3 -u``, Ctrl-C or SIGTERM: libfuse's handlers unmount); a
    mount libfuse refuses raises ``RuntimeError``."""
    # Here, not at the top: importing mfusepy loads libfuse3 (and fails without
    # it), which only the mount itself needs.
    import mfusepy  # type: ignore[import-untyped, import-not-found, unused-ignore]  # noqa: PLC0415

    loop, thread = _loop_thread()

    async def opened() -> tuple[Manifest, Tree]:
        manifest = await Manifest.open(Layout(settings.archive_root).manifest, readonly=True)
        return manifest, Tree.of(await manifest.newest_versions())

    manifest, tree = asyncio.run_coroutine_threadsafe(opened(), loop).result()
    # The tree lives as long as the mount: out of the collector's sight, or each
    # full collection (every few thousand getattr dicts) walks a million nodes.
    gc.collect()
    gc.freeze()
    if tree.left_out:
        log.warning(
            "mount: %d archived paths left out (a '.', '..' or empty component)", tree.left_out
        )
    fs = ArchiveFS(settings, tree, manifest, loop)

    class Kernel(mfusepy.Operations):  # type: ignore[misc]
        use_ns = True
        getattr = staticmethod(fs.getattr)
        readdir = staticmethod(fs.readdir)
        open = staticmethod(fs.open)
        read = staticmethod(fs.read)
        release = staticmethod(fs.release)

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
    finally:
        asyncio.run_coroutine_threadsafe(manifest.close(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
