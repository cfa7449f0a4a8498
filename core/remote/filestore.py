"""A directory as an object store (``file:///path``): the embedded default the
demo and most tests use, and a real off-host tier when the folder is a mounted
network or removable disk.

Invariants:
- An object appears whole or not at all: it is written under a temporary name
  beside its key, fsynced, then linked to its key without replacing anything
  (``rename_noreplace``), and its directory fsynced. A crash leaves at most a
  ``.partial`` that no listing shows.
- ``head`` reads the object back to hash it: a directory keeps no checksum, and
  reading is the only proof of what is on its disk.
- An object's version is its file's inode and mtime, read by ``fstat`` of the
  descriptor the bytes are read from (never of the path, which another file
  can be renamed onto between the check and the read). A read pinned to a
  version checks it after reading: a write that changed the bytes read moved
  the mtime before the check.
- No key leaves the folder: every path is resolved beneath it, never through a
  link planted inside.
- The folder is never created by an upload: only ``create_root`` makes it, when
  the remote marker is first written (remote/marker.py). A folder that is gone
  (a disk not mounted) fails every upload instead of filling the disk below.
"""

from __future__ import annotations

import asyncio
import glob
import hashlib
import os
import secrets
import stat
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

from ..base.durable import fsync
from ..base.errors import RemoteError
from ..base.fsutil import ensure_dir, fsync_dir, open_file, rename_noreplace, unlink_if_present
from ..base.layout import PARTIAL_SUFFIX, UnsafePath, check_relpath, is_temp_name
from .objectstore import (
    ObjectInfo,
    ObjectLock,
    ObjectStore,
    Put,
    RemoteMissing,
    RemoteReplaced,
)

CHUNK = 1 << 20


def _version(st: os.stat_result) -> str:
    """A folder's object's version: its file (a new object at the key is a new
    inode: objects are placed by rename) and its last change."""
    return f"{st.st_ino}:{st.st_mtime_ns}"


class FileStore(ObjectStore):
    def __init__(self, root: Path) -> None:
        self.root = root
        self.url = root.as_uri()

    def _path(self, key: str) -> Path:
        try:
            return self.root / check_relpath(key)
        except UnsafePath as err:
            raise RemoteError(f"{self.url}: {err}") from None

    def _missing(self, key: str) -> RemoteMissing:
        return RemoteMissing(f"{self.where(key)}: not there (run coldkeep verify --remote)")

    def _failed(self, key: str, err: OSError) -> RemoteError:
        return RemoteError(f"{self.where(key)}: {err.strerror or err} (check the remote folder)")

    async def put_new(
        self,
        key: str,
        src: Path,
        size: int,
        sha256: str,
        lock: ObjectLock | None = None,
        *,
        storage_class: str | None = None,
        random_key: bool = False,
    ) -> Put:
        # The config allows no Object Lock on a folder (nothing could keep it),
        # nor a cold class (a folder has none): every class reads the same here.
        assert lock is None
        try:
            return Put(await asyncio.to_thread(self._put_new, key, src))
        except OSError as err:
            raise self._failed(key, err) from err

    def _put_new(self, key: str, src: Path) -> bool:
        dest = self._path(key)
        # The folder itself is made only with the remote marker (create_root): a
        # folder that vanished is a disk not mounted, never one to make again.
        ensure_dir(dest.parent, root=self.root)
        tmp = dest.with_name(f"{dest.name}.{secrets.token_hex(4)}{PARTIAL_SUFFIX}")
        out = open_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, root=self.root)
        try:
            with open(src, "rb") as f, os.fdopen(out, "wb", closefd=False) as w:
                while chunk := f.read(CHUNK):
                    w.write(chunk)
            fsync(out, "remote.object_data")
        except BaseException:
            os.close(out)
            unlink_if_present(tmp, root=self.root)
            raise
        os.close(out)
        placed = rename_noreplace(tmp, dest, root=self.root)
        if placed == "exists":
            unlink_if_present(tmp, root=self.root)
        fsync_dir(dest.parent, root=self.root, site="remote.object_placed")
        return placed == "renamed"

    def unmarked(self) -> str:
        # A folder on a disk not mounted is an empty mount point, or none.
        return f"the remote folder {self.url} has no marker: is its disk mounted?"

    async def create_root(self) -> None:
        # The configured folder (links above it are the operator's), each new
        # name durable in its parent: a folder whose name a power cut takes back
        # takes every object recorded in it.
        await asyncio.to_thread(ensure_dir, self.root, root=self.root)

    async def head(self, key: str) -> ObjectInfo | None:
        try:
            return await asyncio.to_thread(self._head, key)
        except OSError as err:
            raise self._failed(key, err) from err

    def _head(self, key: str) -> ObjectInfo | None:
        digest = hashlib.sha256()
        size = 0
        try:
            fd = open_file(self._path(key), os.O_RDONLY, root=self.root)
        except FileNotFoundError:
            return None
        with os.fdopen(fd, "rb") as f:
            # Before the hash: a write while it reads moves the mtime, so the
            # version said no longer matches the file, and a read pinned to it fails.
            st = os.fstat(f.fileno())
            while chunk := f.read(CHUNK):
                digest.update(chunk)
                size += len(chunk)
        return ObjectInfo(
            key,
            size,
            digest.hexdigest(),
            version=_version(st),
            modified=st.st_mtime_ns // 1_000_000,
        )

    async def read_range(
        self, key: str, start: int, length: int, version: str | None = None
    ) -> bytes:
        try:
            return await asyncio.to_thread(self._read_range, key, start, length, version)
        except FileNotFoundError:
            raise self._missing(key) from None
        except OSError as err:
            raise self._failed(key, err) from err

    def _read_range(self, key: str, start: int, length: int, version: str | None) -> bytes:
        fd = open_file(self._path(key), os.O_RDONLY, root=self.root)
        try:
            data = os.pread(fd, length, start)
            # After the read: see the module's invariants.
            if version is not None and _version(os.fstat(fd)) != version:
                raise RemoteReplaced(self.where(key))
            return data
        finally:
            os.close(fd)

    async def download(self, key: str, fd: int) -> int:
        try:
            return await asyncio.to_thread(self._download, key, fd)
        except FileNotFoundError:
            raise self._missing(key) from None
        except OSError as err:
            if err.filename is None:  # writing to the caller's file: its error to name
                raise
            raise self._failed(key, err) from err

    def _download(self, key: str, out: int) -> int:
        src = open_file(self._path(key), os.O_RDONLY, root=self.root)
        size = 0
        with os.fdopen(src, "rb") as f:
            while chunk := f.read(CHUNK):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(out, view) :]
                size += len(chunk)
        return size

    async def list_objects(self, prefix: str) -> AsyncIterator[ObjectInfo]:
        found = await asyncio.to_thread(lambda: list(self._walk(prefix)))
        for info in found:
            yield info

    def _walk(self, prefix: str) -> Iterator[ObjectInfo]:
        start = self.root / prefix.rpartition("/")[0] if "/" in prefix else self.root
        for dirpath, dirnames, filenames in os.walk(start):
            dirnames.sort()
            rel_dir = Path(dirpath).relative_to(self.root).as_posix()
            for name in sorted(filenames):
                key = name if rel_dir == "." else f"{rel_dir}/{name}"
                st = os.lstat(os.path.join(dirpath, name))
                if key.startswith(prefix) and not is_temp_name(name) and stat.S_ISREG(st.st_mode):
                    yield ObjectInfo(
                        key, st.st_size, version=_version(st), modified=st.st_mtime_ns // 1_000_000
                    )

    async def list_dirs(self, prefix: str) -> list[str]:
        def names() -> list[str]:
            folder = self.root / prefix if prefix else self.root
            if not folder.is_dir():
                return []
            with os.scandir(folder) as it:
                # A dot folder is no site's (the fleet's index of beats).
                return sorted(
                    e.name
                    for e in it
                    if e.is_dir(follow_symlinks=False) and not e.name.startswith(".")
                )

        return await asyncio.to_thread(names)

    async def clear_incomplete(self, prefix: str) -> int:
        return await asyncio.to_thread(self._clear_incomplete, prefix)

    def _clear_incomplete(self, prefix: str) -> int:
        start = self.root / prefix
        if start.is_dir():
            found = [
                Path(dirpath) / name
                for dirpath, _, filenames in os.walk(start)
                for name in filenames
                if name.endswith(PARTIAL_SUFFIX)
            ]
        elif start.parent.is_dir():  # one key's: ``<key>.<random>.partial`` beside it
            found = list(start.parent.glob(f"{glob.escape(start.name)}.*{PARTIAL_SUFFIX}"))
        else:
            return 0
        # Not durably: nothing rests on their absence, and one a power cut
        # brings back is removed by the next ship.
        return sum(unlink_if_present(p, root=self.root) for p in found)

    async def delete(self, key: str) -> None:
        try:
            await asyncio.to_thread(
                unlink_if_present, self._path(key), root=self.root, durably="remote.object_deleted"
            )
        except OSError as err:
            raise self._failed(key, err) from err
