"""Filesystem primitives the protocol is built from. All synchronous: callers run
them in threads (``asyncio.to_thread``), never on the event loop.

Invariants:
- Identity is what ``lstat`` says (dev, ino, size, mtime_ns, ctime_ns, mode); a
  symlink is described, never followed. Two identities are "the same file,
  unchanged" when dev, ino, size, mtime_ns and ctime_ns agree: a writer can put
  the mtime back (``touch -r``, ``rsync -t --inplace``), never the ctime. Only an
  identity recorded before ctime was kept (``ctime_ns`` None) is compared
  without it. The same inode on another device number
  (``same_inode_elsewhere``: a remount or a reboot renumbered the filesystem) is
  only a candidate: whoever acts on it compares the bytes first.
- A name is made durable by fsyncing the directory that holds it: after a rename,
  after a create, after an unlink that matters.
- ``rename_noreplace`` never replaces anything: ``renameat2(RENAME_NOREPLACE)``
  where the kernel and filesystem support it, else ``link`` + ``unlink`` (``link``
  fails on an existing name). A crash between the two leaves both names; the
  source is always a temporary name that recovery removes.
- ``unlink_if_identity`` re-``lstat``s first and refuses on any change.
- ``unlink_source`` (a live source, which others may rename or replace at any
  moment) removes only the inode it checked: the name is renamed aside in its own
  directory (``layout.aside_of``), the aside name's inode checked, and only that
  name unlinked. A file that is not the one archived goes back to its name
  (never replacing one that took it meanwhile).
- A live file open in another process is never archived nor removed, where the
  kernel can say so: a write lease (``fcntl`` ``F_SETLEASE`` ``F_WRLCK``, which
  fails while anyone else has the file open) is taken on the source before it is
  read and again around its removal; its break (another process opening it) is
  polled, never waited for, and signalled with SIGURG, whose default is to be
  ignored (SIGIO's would kill the process). Without the capability (not the
  file's owner and no CAP_LEASE) or on a filesystem without leases (NFS, most
  FUSE), ``take_lease`` says ``unsupported`` and the identity check (ctime
  included) is the guard.
- Every path is resolved under a ``root`` (beneath.py): no directory below it is
  ever followed through a link, so a user who can write the tree cannot redirect
  an operation out of it.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import functools
import os
import queue
import signal
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeAlias

from . import beneath
from .durable import Site, fsync
from .errors import ColdkeepError
from .ioerror import naming
from .layout import aside_name


@dataclass(frozen=True)
class FileIdentity:
    dev: int
    ino: int
    size: int
    mtime_ns: int
    mode: int
    # None: recorded by a coldkeep that did not keep it (compared without it).
    ctime_ns: int | None = None

    @classmethod
    def of_stat(cls, st: os.stat_result) -> FileIdentity:
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode, st.st_ctime_ns)

    @property
    def is_regular(self) -> bool:
        return stat.S_ISREG(self.mode)

    def same_file(self, other: FileIdentity | None) -> bool:
        """Same inode, size, mtime and ctime: nothing has written to it (a write
        whose mtime was put back still moved the ctime)."""
        if other is None or not self.same_inode_and_times(other):
            return False
        return self.ctime_ns is None or other.ctime_ns is None or self.ctime_ns == other.ctime_ns

    def same_inode_and_times(self, other: FileIdentity) -> bool:
        """Same inode, size and mtime, the ctime not compared: what is left to
        compare after coldkeep itself renamed the file (a rename moves the ctime)."""
        return (self.dev, self.ino, self.size, self.mtime_ns) == (
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
        ctime = "" if self.ctime_ns is None else f" ctime_ns {self.ctime_ns}"
        return f"dev {self.dev} ino {self.ino} {self.size} B mtime_ns {self.mtime_ns}{ctime}"


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


def write_all(fd: int, data: bytes, offset: int | None = None) -> None:
    """All of ``data`` written to ``fd`` (a short write goes on where it
    stopped): at the file's position, or from ``offset`` (pwrite). Not fsynced."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view) if offset is None else os.pwrite(fd, view, offset)
        view = view[n:]
        offset = None if offset is None else offset + n


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
    if src.parent == dst.parent:  # a temporary beside its final name: one walk
        with beneath.parent(root, dst) as (fd, name), naming(src):
            return _rename_noreplace_at(fd, src.name, fd, name)
    with (
        beneath.parent(root, src) as (src_fd, src_name),
        beneath.parent(root, dst) as (dst_fd, dst_name),
        naming(src),
    ):
        return _rename_noreplace_at(src_fd, src_name, dst_fd, dst_name)


def place_noreplace(src: Path, dst: Path, *, root: Path) -> FileIdentity | None:
    """``rename_noreplace`` of ``src`` to ``dst`` in the same directory, then the
    identity of the file placed, ``lstat``'ed through the same walk (after the
    rename: it changed the file's ctime); None when ``dst`` exists and nothing
    moved. The caller fsyncs the directory."""
    if src.parent != dst.parent:
        raise ValueError(f"{src} and {dst} are not in one directory")
    with beneath.parent(root, dst) as (fd, name):
        with naming(src):
            if _rename_noreplace_at(fd, src.name, fd, name) == "exists":
                return None
        with naming(dst):
            return FileIdentity.of_stat(os.stat(name, dir_fd=fd, follow_symlinks=False))


def create_unless_there(there: Path, new: Path, *, root: Path) -> int | None:
    """``new`` created (write-only, 0600, ``O_EXCL``, never through a link) in
    the directory of ``there`` (its directories made on the way, each one
    durable), unless ``there`` exists, whatever it is: then None, and nothing
    is created. One walk for both names (a restore's target and its partial).
    ``new`` already there is ``FileExistsError``."""
    if new.parent != there.parent:
        raise ValueError(f"{new} and {there} are not in one directory")
    with beneath.parent(root, there, create=True) as (fd, name):
        try:
            with naming(there):
                os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            pass
        else:
            return None
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        with naming(new):
            return os.open(new.name, flags, 0o600, dir_fd=fd)


def _rename_noreplace_at(src_fd: int, src: str, dst_fd: int, dst: str) -> RenameResult:
    try:
        return _renameat2_noreplace(src_fd, src, dst_fd, dst)
    except NoReplaceUnsupported:
        return _link_noreplace(src_fd, src, dst_fd, dst)


LeaseResult = Literal["held", "open", "unsupported"]
# Another process has the file open (the lease is refused while it does).
_IN_USE = {errno.EAGAIN, errno.EWOULDBLOCK, errno.EBUSY}


def take_lease(fd: int) -> LeaseResult:
    """A write lease on the open regular file ``fd``: ``held`` (no other process
    has the file open, and one that opens it now waits until the lease is
    released or ``lease_held`` sees the break), ``open`` (another process has it
    open), or ``unsupported`` (no CAP_LEASE and not the owner, or a filesystem
    without leases). The lease lasts until ``fd`` is closed."""
    try:
        # The break's signal first: SIGIO, the default, would kill the process.
        fcntl.fcntl(fd, fcntl.F_SETSIG, signal.SIGURG)
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
    except OSError as err:
        return "open" if err.errno in _IN_USE else "unsupported"
    return "held"


def lease_held(fd: int) -> bool:
    """The write lease on ``fd`` is still whole: no other process is opening the
    file (a break in progress reads as the lease it is broken down to)."""
    try:
        return fcntl.fcntl(fd, fcntl.F_GETLEASE) == fcntl.F_WRLCK
    except OSError:
        return False


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


def _still(fd: int, name: str, identity: FileIdentity) -> FileIdentity | Literal["gone", "changed"]:
    """What ``name`` (in the directory ``fd``) is now, if it is still the regular
    file ``identity`` describes; else why not."""
    try:
        now = FileIdentity.of_stat(os.stat(name, dir_fd=fd, follow_symlinks=False))
    except FileNotFoundError:
        return "gone"
    if not identity.same_file(now) or not now.is_regular:
        return "changed"
    return now


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
            now = _still(fd, name, identity)
            if isinstance(now, str):
                return now
            try:
                os.unlink(name, dir_fd=fd)
            except FileNotFoundError:
                return "gone"
            if durably:
                fsync(fd, durably)
    except FileNotFoundError:  # a directory on the way is gone
        return "gone"
    return "removed"


# What ``unlink_source`` did: ``displaced``: the file found at the name was not the
# one archived and a newer file took the name meanwhile, so it stays under its
# aside name (the caller reports it); ``open``: the caller's ``still_ours`` said
# another process is opening the file (its lease broke): put back, kept.
SourceUnlink = Literal["removed", "gone", "changed", "displaced", "open"]
# What step 7 did to a source: unlink_source's answer, or "unsettled" when it
# failed with an I/O error (the entry keeps source_present for recovery).
SourceOutcome: TypeAlias = SourceUnlink | Literal["unsettled"]
# Called with the aside path once the source is there (a step hook).
AsideStep = Callable[[Path], None]


def unlink_source(
    path: Path,
    identity: FileIdentity,
    *,
    root: Path,
    durably: Site | None,
    aside: AsideStep | None = None,
    closer: Callable[[int], None] = os.close,
) -> SourceUnlink:
    """Unlink the live source ``path`` only if it is the file ``identity``
    describes, removing that inode and no other: a file renamed onto the name
    between the check and the unlink (logrotate's ``create``, an atomic rewrite)
    is never the one removed. The name is checked (ctime too), renamed aside in
    its directory, the aside name checked again (its inode, size and mtime: the
    rename moved its ctime) and unlinked; anything else goes back to its name.
    A crash in between leaves the aside name, which recovery settles by the same
    check (``settle_aside``). A write lease is held from the check to the unlink
    (``take_lease``): a file another process has open is ``open``, kept; one that
    another process starts opening meanwhile goes back to its name. The lease's
    descriptor, once the source is settled, goes to ``closer``: closing the last
    one of an unlinked file frees its inode and blocks there (``Closer``)."""
    try:
        with beneath.parent(root, path) as (fd, name), naming(path):
            now = _still(fd, name, identity)
            if isinstance(now, str):
                return now
            leased = _lease_at(fd, name, now)
            if isinstance(leased, str):
                return leased
            try:
                return _set_aside_and_unlink(fd, path, name, identity, durably, aside, leased)
            finally:
                if leased is not None:
                    closer(leased)
    except FileNotFoundError:  # a directory on the way is gone
        return "gone"


def _lease_at(fd: int, name: str, now: FileIdentity) -> int | SourceUnlink | None:
    """The source ``name`` (in the directory ``fd``, ``now`` its identity) opened and
    leased: the descriptor that holds the lease, None where leases are not
    supported (the identity check is the guard), or what to answer instead
    (``open``: another process has it open; ``changed``: another file now)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        lfd = os.open(name, flags, dir_fd=fd)
    except FileNotFoundError:
        return "gone"
    except OSError as err:
        if err.errno in _IN_USE:  # another process holds a lease on it
            return "open"
        if err.errno == errno.ELOOP:
            return "changed"
        return None  # unreadable to open (EACCES on a FUSE mount): no lease
    try:
        if not now.same_file(FileIdentity.of_stat(os.fstat(lfd))):
            os.close(lfd)
            return "changed"
        got = take_lease(lfd)
        # Leased, no other process can open it, so none can write to it: what
        # fstat says now holds until the unlink (a write slipped in since the
        # check, its mtime put back, still moved the ctime).
        if got == "held" and now.same_file(FileIdentity.of_stat(os.fstat(lfd))):
            return lfd
    except OSError:
        os.close(lfd)
        raise
    os.close(lfd)
    if got == "held":  # written to between the check and the lease
        return "changed"
    return "open" if got == "open" else None


def _set_aside_and_unlink(
    fd: int,
    path: Path,
    name: str,
    identity: FileIdentity,
    durably: Site | None,
    aside: AsideStep | None,
    leased: int | None,
) -> SourceUnlink:
    """``unlink_source`` once the name is checked (and leased, ``leased``)."""
    private = aside_name(name)
    try:
        if _rename_noreplace_at(fd, name, fd, private) == "exists":
            raise FileExistsError(
                errno.EEXIST,
                "a file set aside earlier is still there; the next recovery settles it",
                str(path.with_name(private)),
            )
    except FileNotFoundError:
        return "gone"
    if aside is not None:
        aside(path.with_name(private))
    still_ours = None if leased is None else functools.partial(lease_held, leased)
    return _settle_aside_at(fd, name, private, identity, durably, still_ours)


def _settle_aside_at(
    fd: int,
    name: str,
    private: str,
    identity: FileIdentity,
    durably: Site | None,
    still_ours: Callable[[], bool] | None,
) -> SourceUnlink:
    """The aside name ``private`` (in the directory ``fd``) unlinked if it holds the
    archived inode (and ``still_ours`` agrees), else put back at ``name``."""
    try:
        there = FileIdentity.of_stat(os.stat(private, dir_fd=fd, follow_symlinks=False))
    except FileNotFoundError:
        return "gone"
    ours = there.is_regular and identity.same_inode_and_times(there)
    if ours and (still_ours is None or still_ours()):
        os.unlink(private, dir_fd=fd)
        if durably:
            fsync(fd, durably)
        return "removed"
    placed = _rename_noreplace_at(fd, private, fd, name)
    fsync(fd, "source.put_back")
    if placed == "exists":
        return "displaced"
    return "changed" if not ours else "open"


class Closer:
    """Closes descriptors on a thread of its own, in the order given. Closing the
    last descriptor of an unlinked file frees its inode and its blocks, in the
    closing call (ext4: ~0.1-0.2 ms a small file): a bundle's sources, unlinked one
    after another while the pass's walk lane is held, hand their leases here and
    the frees overlap the walk (docs/performance.md, "Against restic and borg").
    ``finish`` waits for every close; a descriptor given after it is closed at once."""

    def __init__(self) -> None:
        self._fds: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._finished = False
        self._thread = threading.Thread(target=self._run, name="coldkeep-closer", daemon=True)
        self._thread.start()

    def __call__(self, fd: int) -> None:
        with self._lock:
            if not self._finished:
                self._fds.put(fd)
                return
        _close_read_only(fd)

    def _run(self) -> None:
        while (fd := self._fds.get()) is not None:
            _close_read_only(fd)

    def finish(self) -> None:
        with self._lock:
            self._finished = True
            self._fds.put(None)
        self._thread.join()


def _close_read_only(fd: int) -> None:
    # A descriptor opened to read and lease a source: nothing was written through
    # it, so an error closing it (EIO on a network filesystem) loses nothing and
    # the descriptor is gone all the same (close(2)).
    with contextlib.suppress(OSError):
        os.close(fd)


def settle_aside(path: Path, identity: FileIdentity | None, *, root: Path) -> SourceUnlink | None:
    """Recovery's half of ``unlink_source``: the aside name of ``path``, if a crash
    left one, unlinked when it holds the archived inode (``identity``), else put
    back at ``path``. None: there is none."""
    try:
        with beneath.parent(root, path) as (fd, name), naming(path):
            private = aside_name(name)
            try:
                os.stat(private, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                return None
            if identity is None:  # nothing to check it against: it goes back
                identity = FileIdentity(-1, -1, -1, -1, 0)
            return _settle_aside_at(fd, name, private, identity, "recovery.aside_settled", None)
    except FileNotFoundError:
        return None
