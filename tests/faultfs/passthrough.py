"""The filesystem operations: a passthrough to the backing directory, with the
fault rules consulted and the volatile journal kept on every call.

Owns what one FUSE call does: path mapping (the backing's ``.faultfs-state`` is
invisible), the freeze gate a cut closes, the open-handle table (backing file
descriptors are the FUSE file handles), full-disk accounting on writes, and the
calls into ``volatile.Volatile`` around every change of data or names.
"""

from __future__ import annotations

import ctypes
import errno as E
import os
import stat
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import mfusepy  # type: ignore[import-untyped, import-not-found, unused-ignore]

from .renameat2 import RENAME_EXCHANGE, RENAME_NOREPLACE, renameat2
from .rules import Faults, Verdict
from .volatile import HIDDEN, Volatile

_STRIP = (
    os.O_APPEND
    | os.O_DIRECT
    | os.O_CREAT
    | os.O_EXCL
    | os.O_NOCTTY
    | os.O_TRUNC
    | os.O_SYNC
    | os.O_DSYNC
)
_STAT_KEYS = (
    "st_mode",
    "st_ino",
    "st_nlink",
    "st_uid",
    "st_gid",
    "st_rdev",
    "st_size",
    "st_blocks",
    "st_blksize",
)


_tls = threading.local()


def _err(code: int) -> OSError:
    return OSError(code, os.strerror(code))


class Gate:
    """Counts calls in flight; ``freeze`` makes every later call fail with EIO and
    waits for the ones in flight to finish."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._inflight = 0
        self.frozen = False

    def enter(self) -> None:
        with self._cond:
            if self.frozen:
                raise _err(E.EIO)
            self._inflight += 1

    def leave(self) -> None:
        with self._cond:
            self._inflight -= 1
            if self._inflight == 0:
                self._cond.notify_all()

    def freeze(self) -> None:
        with self._cond:
            self.frozen = True
            self._cond.wait_for(lambda: self._inflight == 0)


class Passthrough(mfusepy.Operations):  # type: ignore[misc]
    """mfusepy operations over ``backing``; see the package docstring for the model."""

    use_ns = True

    def __init__(self, backing: str, faults: Faults, vol: Volatile | None) -> None:
        self.root = os.path.abspath(backing)
        self.faults = faults
        self.vol = vol
        self.gate = Gate()
        self.handles: dict[int, tuple[int, str]] = {}  # fd -> (inode, relpath at open)

    # -- helpers ---------------------------------------------------------------------------
    def _real(self, path: str) -> str:
        if path == "/" + HIDDEN or path.startswith("/" + HIDDEN + "/"):
            raise _err(E.ENOENT)
        return self.root + path if path != "/" else self.root

    @staticmethod
    def _rel(path: str | None) -> str:
        if path is None:
            return "?"
        return path[1:] if path != "/" else "."

    def _fh_rel(self, path: str | None, fh: int) -> str:
        if path is not None:
            return self._rel(path)
        return self.handles.get(fh, (0, "?"))[1]

    def _parent(self, path: str) -> str:
        return self._real(os.path.dirname(path))

    @contextmanager
    def _op(self, op: str, *paths: str, nbytes: int = 0) -> Iterator[Verdict]:
        if not getattr(_tls, "pinned", False):
            # A libfuse worker is no Python thread: each callback would create and
            # destroy a thread state. One Ensure never released keeps it (-40 % per call).
            ctypes.pythonapi.PyGILState_Ensure()
            _tls.pinned = True
        self.gate.enter()
        try:
            verdict = self.faults.check(op, paths, nbytes)
            if verdict.delay > 0:
                time.sleep(verdict.delay)
            if verdict.errno is not None:
                raise _err(verdict.errno)
            yield verdict
        finally:
            self.gate.leave()

    def _track(self, fd: int, rel: str) -> int:
        self.handles[fd] = (os.fstat(fd).st_ino, rel)
        return fd

    def _ino(self, fh: int) -> int:
        known = self.handles.get(fh)
        return known[0] if known is not None else os.fstat(fh).st_ino

    # -- the control side ---------------------------------------------------------------
    def cut(self) -> dict[str, Any]:
        """Stop serving (every later call fails with EIO), then roll back."""
        if self.vol is None:
            raise ValueError("cut needs a volatile mount (volatile=True)")
        self.gate.freeze()
        for fd in list(self.handles):
            # Only a handle taken from the table here: release is never gated, and
            # the kernel releases a killed process's files while the cut runs (its
            # close of the same descriptor made this one fail with EBADF, or close
            # a number reused meanwhile).
            if self.handles.pop(fd, None) is not None:
                os.close(fd)
        return self.vol.rollback()

    # -- attributes ----------------------------------------------------------------------------
    def getattr(self, path: str, fh: int | None = None) -> dict[str, int]:
        with self._op("getattr", self._fh_rel(path, fh) if fh is not None else self._rel(path)):
            st = os.fstat(fh) if fh is not None else os.lstat(self._real(path))
            attrs = {k: getattr(st, k) for k in _STAT_KEYS}
            attrs["st_atime"] = st.st_atime_ns
            attrs["st_mtime"] = st.st_mtime_ns
            attrs["st_ctime"] = st.st_ctime_ns
            return attrs

    def readlink(self, path: str) -> str:
        with self._op("readlink", self._rel(path)):
            return os.readlink(self._real(path))

    def chmod(self, path: str | None, mode: int, fh: int | None = None) -> int:
        with self._op("chmod", self._fh_rel(path, fh or 0)):
            if fh is not None:
                os.chmod(fh, mode)
            else:
                os.chmod(self._real(path or "/"), mode)
            return 0

    def chown(self, path: str | None, uid: int, gid: int, fh: int | None = None) -> int:
        with self._op("chown", self._fh_rel(path, fh or 0)):
            if fh is not None:
                os.chown(fh, uid, gid)
            else:
                os.chown(self._real(path or "/"), uid, gid, follow_symlinks=False)
            return 0

    def utimens(
        self,
        path: str | None,
        times: tuple[int | None, int | None] | None = None,
        fh: int | None = None,
    ) -> int:
        with self._op("utimens", self._fh_rel(path, fh or 0)):
            target: int | str = fh if fh is not None else self._real(path or "/")
            if times is None:
                os.utime(target)
                return 0
            atime, mtime = times
            if atime is None or mtime is None:
                st = os.stat(target) if isinstance(target, int) else os.lstat(target)
                atime = st.st_atime_ns if atime is None else atime
                mtime = st.st_mtime_ns if mtime is None else mtime
            if isinstance(target, int):
                os.utime(target, ns=(atime, mtime))
            else:
                os.utime(target, ns=(atime, mtime), follow_symlinks=False)
            return 0

    def statfs(self, path: str) -> dict[str, int]:
        with self._op("statfs", self._rel(path)):
            st = os.statvfs(self._real(path))
            out = {
                k: getattr(st, k)
                for k in (
                    "f_bsize",
                    "f_frsize",
                    "f_blocks",
                    "f_bfree",
                    "f_bavail",
                    "f_files",
                    "f_ffree",
                    "f_favail",
                    "f_namemax",
                )
            }
            left = self.faults.full_left
            if left is not None:
                blocks = left // max(st.f_frsize, 1)
                out["f_bfree"] = min(out["f_bfree"], blocks)
                out["f_bavail"] = min(out["f_bavail"], blocks)
            return out

    # -- names -------------------------------------------------------------------------------
    def mknod(self, path: str, mode: int, dev: int) -> int:
        with self._op("mknod", self._rel(path)):
            real = self._real(path)
            if self.vol is None:
                os.mknod(real, mode, dev)
                return 0
            with self.vol.lock:
                self.vol.capture(self._parent(path))
                os.mknod(real, mode, dev)
                if stat.S_ISREG(mode):
                    self.vol.created(os.lstat(real).st_ino, real)
            return 0

    def mkdir(self, path: str, mode: int) -> int:
        with self._op("mkdir", self._rel(path)):
            real = self._real(path)
            if self.vol is None:
                os.mkdir(real, mode)
                return 0
            with self.vol.lock:
                self.vol.capture(self._parent(path))
                os.mkdir(real, mode)
                self.vol.new_dir(os.lstat(real).st_ino)
            return 0

    def symlink(self, target: str, source: str) -> int:
        """``target`` is the new name, ``source`` what it points to (mfusepy's words)."""
        with self._op("symlink", self._rel(target)):
            real = self._real(target)
            if self.vol is None:
                os.symlink(source, real)
                return 0
            with self.vol.lock:
                self.vol.capture(self._parent(target))
                os.symlink(source, real)
            return 0

    def link(self, target: str, source: str) -> int:
        """``target`` is the new name, ``source`` the existing one (mfusepy's words)."""
        with self._op("link", self._rel(target), self._rel(source)):
            new, old = self._real(target), self._real(source)
            if self.vol is None:
                os.link(old, new, follow_symlinks=False)
                return 0
            with self.vol.lock:
                self.vol.capture(self._parent(target))
                os.link(old, new, follow_symlinks=False)
            return 0

    def unlink(self, path: str) -> int:
        with self._op("unlink", self._rel(path)):
            real = self._real(path)
            if self.vol is None:
                os.unlink(real)
                return 0
            with self.vol.lock:
                self.vol.capture(self._parent(path))
                ino = self.vol.keep(real)
                os.unlink(real)
                self.vol.collect(ino)
            return 0

    def rmdir(self, path: str) -> int:
        with self._op("rmdir", self._rel(path)):
            real = self._real(path)
            if self.vol is None:
                os.rmdir(real)
                return 0
            with self.vol.lock:
                if not stat.S_ISDIR(os.lstat(real).st_mode):
                    raise _err(E.ENOTDIR)
                if os.listdir(real):
                    raise _err(E.ENOTEMPTY)
                self.vol.capture(self._parent(path))
                self.vol.collect(self.vol.keep(real))  # keep() moves it into the trash
            return 0

    def rename(self, old: str, new: str, flags: int = 0) -> int:
        with self._op("rename", self._rel(old), self._rel(new)):
            src, dst = self._real(old), self._real(new)
            if self.vol is None:
                if flags:
                    renameat2(src, dst, flags)
                else:
                    os.rename(src, dst)
                return 0
            with self.vol.lock:
                self.vol.capture(self._parent(old))
                self.vol.capture(self._parent(new))
                if flags & RENAME_EXCHANGE:
                    renameat2(src, dst, flags)
                    return 0
                try:
                    dst_st: os.stat_result | None = os.lstat(dst)
                except FileNotFoundError:
                    dst_st = None
                if dst_st is None:
                    if flags:
                        renameat2(src, dst, flags)
                    else:
                        os.rename(src, dst)
                    return 0
                if flags & RENAME_NOREPLACE:
                    raise _err(E.EEXIST)
                src_st = os.lstat(src)
                if (src_st.st_dev, src_st.st_ino) == (dst_st.st_dev, dst_st.st_ino):
                    return 0  # POSIX: renaming a name onto another link of itself does nothing
                if stat.S_ISDIR(dst_st.st_mode):
                    if not stat.S_ISDIR(src_st.st_mode):
                        raise _err(E.EISDIR)
                    if os.listdir(dst):
                        raise _err(E.ENOTEMPTY)
                elif stat.S_ISDIR(src_st.st_mode):
                    raise _err(E.ENOTDIR)
                ino = self.vol.keep(dst)
                try:
                    os.rename(src, dst)
                except OSError:
                    if stat.S_ISDIR(dst_st.st_mode):  # keep() moved it away: put it back
                        os.rename(self.vol.trash.pop(ino), dst)
                    raise
                self.vol.collect(ino)
            return 0

    # -- file data ---------------------------------------------------------------------------
    def open(self, path: str, flags: int) -> int:
        with self._op("open", self._rel(path)):
            real = self._real(path)
            fd = os.open(real, (flags & ~_STRIP) | os.O_CLOEXEC)
            try:
                if flags & os.O_TRUNC:
                    if self.vol is not None:
                        self.vol.before_data_change(os.fstat(fd).st_ino, fd, 0, float("inf"))
                    os.ftruncate(fd, 0)
                return self._track(fd, self._rel(path))
            except BaseException:
                os.close(fd)
                raise

    def create(self, path: str, mode: int, flags: int = os.O_WRONLY) -> int:
        with self._op("create", self._rel(path)):
            real = self._real(path)
            bflags = (flags & ~_STRIP) | os.O_CREAT | (flags & os.O_EXCL) | os.O_CLOEXEC
            if self.vol is None:
                fd = os.open(real, bflags | (flags & os.O_TRUNC), mode)
                return self._track(fd, self._rel(path))
            with self.vol.lock:
                self.vol.capture(self._parent(path))
                existed = os.path.lexists(real)
                fd = os.open(real, bflags, mode)
                try:
                    ino = os.fstat(fd).st_ino
                    if not existed:
                        self.vol.created(ino, fd)
                    elif flags & os.O_TRUNC:
                        self.vol.before_data_change(ino, fd, 0, float("inf"))
                        os.ftruncate(fd, 0)
                except BaseException:
                    os.close(fd)
                    raise
            return self._track(fd, self._rel(path))

    def read(self, path: str | None, size: int, offset: int, fh: int) -> bytes:
        with self._op("read", self._fh_rel(path, fh)):
            return os.pread(fh, size, offset)

    def write(self, path: str | None, data: bytes, offset: int, fh: int) -> int:
        with self._op("write", self._fh_rel(path, fh), nbytes=len(data)) as verdict:
            n = len(data) if verdict.allow is None else min(len(data), verdict.allow)
            if self.faults.full_left is not None:
                growth = max(0, offset + n - os.fstat(fh).st_size)
                granted = self.faults.charge_growth(growth)
                if granted is not None and granted < growth:
                    n -= growth - granted
                    if n <= 0:
                        raise _err(self.faults.full_errno)
            if self.vol is not None:
                self.vol.before_data_change(self._ino(fh), fh, offset, offset + n)
            return os.pwrite(fh, memoryview(data)[:n], offset)

    def truncate(self, path: str | None, length: int, fh: int | None = None) -> int:
        with self._op("truncate", self._fh_rel(path, fh or 0)):
            own = fh is None
            fd = os.open(self._real(path or "/"), os.O_WRONLY | os.O_CLOEXEC) if own else fh
            assert fd is not None
            try:
                if self.vol is not None:
                    self.vol.before_data_change(os.fstat(fd).st_ino, fd, length, float("inf"))
                os.ftruncate(fd, length)
            finally:
                if own:
                    os.close(fd)
            return 0

    def fallocate(self, path: str | None, mode: int, offset: int, size: int, fh: int) -> int:
        with self._op("fallocate", self._fh_rel(path, fh)):
            if mode != 0:
                raise _err(E.EOPNOTSUPP)
            if self.faults.full_left is not None:
                growth = max(0, offset + size - os.fstat(fh).st_size)
                granted = self.faults.charge_growth(growth)
                if granted is not None and granted < growth:
                    raise _err(self.faults.full_errno)
            if self.vol is not None:
                self.vol.before_data_change(self._ino(fh), fh, 0, 0)
            os.posix_fallocate(fh, offset, size)
            return 0

    def flush(self, path: str | None, fh: int) -> int:
        with self._op("flush", self._fh_rel(path, fh)):
            return 0

    def release(self, path: str | None, fh: int) -> int:
        self.faults.count("release", self._fh_rel(path, fh))
        if self.handles.pop(fh, None) is not None:
            os.close(fh)
        return 0

    def fsync(self, path: str | None, datasync: int, fh: int) -> int:
        with self._op("fsync", self._fh_rel(path, fh)):
            if datasync:
                os.fdatasync(fh)
            else:
                os.fsync(fh)
            if self.vol is not None:
                self.vol.synced(self._ino(fh))
            return 0

    # -- directories --------------------------------------------------------------------------
    def opendir(self, path: str) -> int:
        with self._op("opendir", self._rel(path)):
            fd = os.open(self._real(path), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            return self._track(fd, self._rel(path))

    def readdir(self, path: str | None, fh: int) -> list[Any]:
        with self._op("readdir", self._fh_rel(path, fh)):
            at_root = path == "/"
            out: list[Any] = [".", ".."]
            with os.scandir(self._real(path) if path is not None else f"/proc/self/fd/{fh}") as it:
                for e in it:
                    if at_root and e.name == HIDDEN:
                        continue
                    if e.is_dir(follow_symlinks=False):
                        mode = stat.S_IFDIR
                    elif e.is_symlink():
                        mode = stat.S_IFLNK
                    elif e.is_file(follow_symlinks=False):
                        mode = stat.S_IFREG
                    else:
                        mode = stat.S_IFMT(e.stat(follow_symlinks=False).st_mode)
                    out.append((e.name, {"st_mode": mode, "st_ino": e.inode()}, 0))
            return out

    def releasedir(self, path: str | None, fh: int) -> int:
        self.faults.count("releasedir", self._fh_rel(path, fh))
        if self.handles.pop(fh, None) is not None:
            os.close(fh)
        return 0

    def fsyncdir(self, path: str | None, datasync: int, fh: int) -> int:
        with self._op("fsyncdir", self._fh_rel(path, fh)):
            os.fsync(fh)
            if self.vol is not None:
                self.vol.dir_synced(self._ino(fh))
            return 0
