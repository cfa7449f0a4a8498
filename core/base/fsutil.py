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
- Every path is resolved under a ``root`` (beneath.py): no directory below it is
  ever followed through a link, so a user who can write the tree cannot redirect
  an operation out of it.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from . import beneath
from .durable import Site, fsync
from .errors import ColdkeepError
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


def identity_of(path: Path, *, root: Path) -> FileIdentity:
    """The ``lstat`` identity of ``path`` under ``root`` (raises ``FileNotFoundError``
    if it, or a directory on the way, is absent)."""
    with beneath.parent(root, path) as (fd, name), naming(path):
        return FileIdentity.of_stat(os.stat(name, dir_fd=fd, follow_symlinks=False))


def identity_or_none(path: Path, *, root: Path) -> FileIdentity | None:
    try:
        return identity_of(path, root=root)
    except FileNotFoundError:
        return None


def open_file(
    path: Path, flags: int, mode: int = 0o600, *, root: Path, create_parents: bool = False
) -> int:
    """``open`` of ``path`` under ``root``, never through a link (its directories
    made on the way when asked, each one durable)."""
    with beneath.parent(root, path, create=create_parents) as (fd, name), naming(path):
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=fd)


def set_mtime(path: Path, mtime_ns: int, *, root: Path) -> None:
    """``utimensat`` on ``path`` itself (never a link's target)."""
    with beneath.parent(root, path) as (fd, name), naming(path):
        os.utime(name, ns=(mtime_ns, mtime_ns), dir_fd=fd, follow_symlinks=False)


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


def fsync_dir(path: Path, *, root: Path, site: Site) -> None:
    """Make the names in ``path`` (``root`` or a directory under it) durable; an
    error names the directory. Never retried on failure: see
    ``codec.compress_fd``."""
    with beneath.directory(root, path) as fd, naming(path):
        fsync(fd, site)


def ensure_dir(path: Path, *, root: Path) -> None:
    """``mkdir -p`` under ``root`` that makes each new directory's name durable in
    its parent, never through a link."""
    with beneath.directory(root, path, create=True):
        pass


_AT_FDCWD = -100
_RENAME_NOREPLACE = 1
# errno values that mean "this kernel or filesystem has no RENAME_NOREPLACE".
_UNSUPPORTED = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP}
_libc = ctypes.CDLL(None, use_errno=True)
_renameat2 = getattr(_libc, "renameat2", None)

RenameResult = Literal["renamed", "exists"]


class NoReplaceUnsupported(ColdkeepError, OSError):
    """renameat2(RENAME_NOREPLACE) is not available here."""


def _renameat2_noreplace(src_fd: int, src: str, dst_fd: int, dst: str) -> RenameResult:
    """The kernel's atomic rename-without-replace; raises ``NoReplaceUnsupported``
    where the libc, kernel or filesystem refuses it."""
    if _renameat2 is None:
        raise NoReplaceUnsupported(errno.ENOSYS, "libc has no renameat2")
    rc = _renameat2(src_fd, os.fsencode(src), dst_fd, os.fsencode(dst), _RENAME_NOREPLACE)
    if rc == 0:
        return "renamed"
    err = ctypes.get_errno()
    if err == errno.EEXIST:
        return "exists"
    if err in _UNSUPPORTED:
        raise NoReplaceUnsupported(err, os.strerror(err), src)
    raise OSError(err, os.strerror(err), src, None, dst)


def _link_noreplace(src_fd: int, src: str, dst_fd: int, dst: str) -> RenameResult:
    """The portable fallback: ``link`` refuses an existing name, then ``unlink``."""
    try:
        os.link(src, dst, src_dir_fd=src_fd, dst_dir_fd=dst_fd, follow_symlinks=False)
    except FileExistsError:
        return "exists"
    os.unlink(src, dir_fd=src_fd)
    return "renamed"


def rename_noreplace(src: Path, dst: Path, *, root: Path) -> RenameResult:
    """Move ``src`` to ``dst`` (both under ``root``) unless ``dst`` exists; never
    replaces, never through a link. The caller fsyncs the directory."""
    with (
        beneath.parent(root, src) as (src_fd, src_name),
        beneath.parent(root, dst) as (dst_fd, dst_name),
        naming(src),
    ):
        try:
            return _renameat2_noreplace(src_fd, src_name, dst_fd, dst_name)
        except NoReplaceUnsupported:
            return _link_noreplace(src_fd, src_name, dst_fd, dst_name)


def unlink_if_present(path: Path, *, root: Path, durably: Site | None = None) -> bool:
    """Unlink ``path`` under ``root`` (False: it, or a directory on the way, was not
    there); ``durably``: its directory fsynced after, as that fsync site."""
    try:
        with beneath.parent(root, path) as (fd, name), naming(path):
            try:
                os.unlink(name, dir_fd=fd)
            except FileNotFoundError:
                return False
            if durably:
                fsync(fd, durably)
    except FileNotFoundError:
        return False
    return True


UnlinkResult = Literal["removed", "gone", "changed"]


def unlink_if_identity(
    path: Path, identity: FileIdentity, *, root: Path, durably: Site | None
) -> UnlinkResult:
    """Unlink ``path`` only if it is still the file ``identity`` describes, and make
    the removal durable as the fsync site ``durably`` (unless the caller fsyncs the
    directory itself, once for many: ``durably=None``). Anything else at the path
    (another inode, a directory, a link, new bytes) is ``changed`` and left alone.
    The check and the unlink are both relative to the same directory descriptor:
    the directory cannot be swapped between them."""
    try:
        with beneath.parent(root, path) as (fd, name), naming(path):
            try:
                now = FileIdentity.of_stat(os.stat(name, dir_fd=fd, follow_symlinks=False))
            except FileNotFoundError:
                return "gone"
            if not identity.same_file(now) or not now.is_regular:
                return "changed"
            try:
                os.unlink(name, dir_fd=fd)
            except FileNotFoundError:
                return "gone"
            if durably:
                fsync(fd, durably)
    except FileNotFoundError:  # a directory on the way is gone
        return "gone"
    return "removed"
