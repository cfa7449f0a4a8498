"""Filesystem primitives the protocol is built from. All synchronous: callers run
them in threads (``asyncio.to_thread``), never on the event loop.

Invariants:
- Identity is what ``lstat`` says (dev, ino, size, mtime_ns, mode); a symlink is
  described, never followed. Two identities are "the same file, unchanged" when
  dev, ino, size and mtime_ns agree. The same inode on another device number
  (``same_inode_elsewhere``: a remount or a reboot renumbered the filesystem) is
  only a candidate: whoever acts on it compares the bytes first.
- A name is made durable by fsyncing the directory that holds it: after a rename,
  after a create, after an unlink that matters.
- ``rename_noreplace`` never replaces anything: ``renameat2(RENAME_NOREPLACE)``
  where the kernel and filesystem support it, else ``link`` + ``unlink`` (``link``
  fails on an existing name). A crash between the two leaves both names; the
  source is always a temporary name that recovery removes.
- ``unlink_if_identity`` re-``lstat``s first and refuses on any change.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .ioerror import naming


@dataclass(frozen=True)
class FileIdentity:
    dev: int
    ino: int
    size: int
    mtime_ns: int
    mode: int

    @classmethod
    def of_stat(cls, st: os.stat_result) -> FileIdentity:
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode)

    @property
    def is_regular(self) -> bool:
        return stat.S_ISREG(self.mode)

    def same_file(self, other: FileIdentity | None) -> bool:
        """Same inode, same size, same mtime: nothing has written to it."""
        return other is not None and (self.dev, self.ino, self.size, self.mtime_ns) == (
            other.dev,
            other.ino,
            other.size,
            other.mtime_ns,
        )

    def same_inode_elsewhere(self, other: FileIdentity | None) -> bool:
        """Same inode number, size, mtime and mode, on another device number: the
        same file after a remount or a reboot renumbered its filesystem (FUSE
        gives every mount a new one; device-mapper and NVMe numbering can change
        across a boot), or another file that merely agrees. Never enough to act
        on alone: the caller compares the bytes."""
        return (
            other is not None
            and self.dev != other.dev
            and (self.ino, self.size, self.mtime_ns, self.mode)
            == (other.ino, other.size, other.mtime_ns, other.mode)
        )

    def describe(self) -> str:
        return f"dev {self.dev} ino {self.ino} {self.size} B mtime_ns {self.mtime_ns}"


def identity_of(path: Path) -> FileIdentity:
    """The ``lstat`` identity of ``path`` (raises ``FileNotFoundError`` if absent)."""
    return FileIdentity.of_stat(os.lstat(path))


def identity_or_none(path: Path) -> FileIdentity | None:
    try:
        return identity_of(path)
    except FileNotFoundError:
        return None


def kind_of(mode: int) -> str:
    """A file type in words, for refusals."""
    for test, word in (
        (stat.S_ISLNK, "a symlink"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return word
    return "a regular file" if stat.S_ISREG(mode) else "an unknown file type"


def fsync_dir(path: Path) -> None:
    """Make the names in ``path`` durable (an error names the directory). Never
    retried on failure: see ``codec.compress_fd``."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with naming(path):
            os.fsync(fd)
    finally:
        os.close(fd)


def ensure_dir(path: Path) -> None:
    """``mkdir -p`` that makes each new directory's name durable in its parent."""
    missing: list[Path] = []
    p = path
    while not p.is_dir():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir()
        except FileExistsError:
            if not d.is_dir():
                raise
        fsync_dir(d.parent)


_AT_FDCWD = -100
_RENAME_NOREPLACE = 1
# errno values that mean "this kernel or filesystem has no RENAME_NOREPLACE".
_UNSUPPORTED = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP}
_libc = ctypes.CDLL(None, use_errno=True)
_renameat2 = getattr(_libc, "renameat2", None)

RenameResult = Literal["renamed", "exists"]


class NoReplaceUnsupported(OSError):
    """renameat2(RENAME_NOREPLACE) is not available here."""


def renameat2_noreplace(src: Path, dst: Path) -> RenameResult:
    """The kernel's atomic rename-without-replace; raises ``NoReplaceUnsupported``
    where the libc, kernel or filesystem refuses it."""
    if _renameat2 is None:
        raise NoReplaceUnsupported(errno.ENOSYS, "libc has no renameat2")
    rc = _renameat2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), _RENAME_NOREPLACE)
    if rc == 0:
        return "renamed"
    err = ctypes.get_errno()
    if err == errno.EEXIST:
        return "exists"
    if err in _UNSUPPORTED:
        raise NoReplaceUnsupported(err, os.strerror(err), str(src))
    raise OSError(err, os.strerror(err), str(src), None, str(dst))


def link_noreplace(src: Path, dst: Path) -> RenameResult:
    """The portable fallback: ``link`` refuses an existing name, then ``unlink``."""
    try:
        os.link(src, dst, follow_symlinks=False)
    except FileExistsError:
        return "exists"
    os.unlink(src)
    return "renamed"


def rename_noreplace(src: Path, dst: Path) -> RenameResult:
    """Move ``src`` to ``dst`` unless ``dst`` exists; never replaces. The caller
    fsyncs the directory."""
    try:
        return renameat2_noreplace(src, dst)
    except NoReplaceUnsupported:
        return link_noreplace(src, dst)


def unlink_if_present(path: Path) -> bool:
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


UnlinkResult = Literal["removed", "gone", "changed"]


def unlink_if_identity(path: Path, identity: FileIdentity) -> UnlinkResult:
    """Unlink ``path`` only if it is still the file ``identity`` describes, and make
    the removal durable. Anything else at the path (another inode, a directory, a
    link, new bytes) is ``changed`` and left alone."""
    now = identity_or_none(path)
    if now is None:
        return "gone"
    if not identity.same_file(now) or not now.is_regular:
        return "changed"
    if not unlink_if_present(path):
        return "gone"
    fsync_dir(path.parent)
    return "removed"
