"""Volatile mode: what survives a power cut, kept while the filesystem runs.

Owns the durability journal of one volatile faultfs server and the rollback a
``cut`` performs on the backing directory.

The model (a strict POSIX filesystem after a power loss)
--------------------------------------------------------
Everything in the backing directory when the server starts is durable.

File data (per inode, so hard links share it):
  * a file's content survives as of its last ``fsync``/``fdatasync`` (of any of
    its descriptors); writes, truncations and ``fallocate`` since then are lost,
    and so is the size change they made;
  * a file created during the run and never fsynced comes back *empty* if its
    name survives (whether it does is the directory's business, below);
  * a failed (injected) fsync makes nothing durable; a write on an ``O_SYNC`` /
    ``O_DSYNC`` descriptor is durable (the kernel follows it with an fsync).

Directory entries (per directory inode):
  * a directory's set of names survives as of its last ``fsync`` (FUSE
    ``fsyncdir``, reached by ``os.open(dir, O_RDONLY | O_DIRECTORY)`` +
    ``os.fsync``); creates, mkdirs, links, unlinks, rmdirs and renames into or out
    of it since then are undone;
  * a rename is two entry changes: the new name survives only if the destination
    directory was synced after it, the old name is gone only if the source
    directory was; so a cut can leave both names (one inode, two links) or
    neither (the file is lost); within one directory one fsync covers both;
  * symlinks, sockets and FIFOs are names like any other (a symlink's target is
    fixed when it is made);
  * a new directory never synced comes back empty (if its name survives at all);
  * a name whose directory survived but whose inode no longer exists anywhere is
    impossible: unlinked/replaced inodes are kept until the unlink is durable.
  * a directory renamed between directories appears where the most recently
    synced of its durable parents says (it cannot have two names); if that
    parent is itself lost, so is the directory (real journaling filesystems make
    a rename atomic; this model is stricter, and cycles it could build are lost).

What is NOT modelled (simplifications):
  * metadata: mode, owner, atime/mtime set by ``chmod``/``chown``/``utime`` are
    not journaled: what the backing has at the cut survives, synced or not; a
    file whose data is rolled back gets back the atime/mtime it had at its first
    unsynced change. Directory mtimes and every ctime change during the rollback.
  * ``sync()``/``syncfs()`` never reach a FUSE filesystem; ``FaultFS.sync()``
    stands in for them.
  * no torn writes or reordering inside an fsync interval: an unsynced write is
    wholly lost, a synced one wholly kept (use fault rules for short writes).
  * xattrs are not served at all.

How it stays fast
-----------------
  * data: copy-on-first-write *of the overwritten range only*. The first change
    of an inode since its last fsync records its size; a write (or truncate)
    inside that durable size first copies the old bytes of the range not yet
    saved into a sparse undo file at the same offsets. Appends cost nothing;
    fsync drops the record.
  * names: the first entry change of a directory since its last fsync records
    its listing (name -> inode); fsyncdir drops it. Unlink, rmdir and a rename
    that replaces move the doomed inode into a hidden trash instead of freeing
    it, as long as some recorded listing still names it.
  * the cut (server frozen, nothing served): every inode is moved into a pool,
    the durable tree is rebuilt from the root by renaming directories and
    hard-linking files back, saved ranges are copied back and sizes restored, and
    the pool, trash and undo files are deleted.

The cut keeps inode numbers (directories are renamed, files hard-linked back,
data rewritten in place), so ``st_ino`` after a remount is the one before;
``st_dev`` is the mount's and changes with every mount, as it would not on a
real disk.

The journal lives in the server's memory and in ``<backing>/.faultfs-state``
(hidden from the mount, visible in the backing while the server runs); a
server that ends without a cut leaves the current state as the durable one and
deletes that directory; a server killed outright loses its journal (the next
server removes the directory).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import stat
import threading
from dataclasses import dataclass, field
from typing import Any

#: The directory under the backing root that holds trash, undo data and the pool.
HIDDEN = ".faultfs-state"
_INF = float("inf")
_CHUNK = 1 << 20


def missing_ranges(saved: list[tuple[int, int]], start: int, end: int) -> list[tuple[int, int]]:
    """The parts of [start, end) not covered by the sorted, disjoint ``saved``."""
    out: list[tuple[int, int]] = []
    pos = start
    for s, e in saved:
        if e <= pos:
            continue
        if s >= end:
            break
        if s > pos:
            out.append((pos, s))
        pos = max(pos, e)
        if pos >= end:
            break
    if pos < end:
        out.append((pos, end))
    return out


def add_range(saved: list[tuple[int, int]], start: int, end: int) -> list[tuple[int, int]]:
    """``saved`` with [start, end) merged in (still sorted and disjoint)."""
    out: list[tuple[int, int]] = []
    for s, e in saved:
        if e < start or s > end:
            out.append((s, e))
        else:
            start, end = min(s, start), max(e, end)
    out.append((start, end))
    out.sort()
    return out


@dataclass
class FileRecord:
    """A file changed since its last fsync: its durable size and saved old bytes."""

    size: int
    atime_ns: int
    mtime_ns: int
    saved: list[tuple[int, int]] = field(default_factory=list)
    undo_fd: int | None = None
    read_fd: int | None = None
    undo_path: str | None = None

    def close(self) -> None:
        for fd in (self.undo_fd, self.read_fd):
            if fd is not None:
                os.close(fd)
        self.undo_fd = self.read_fd = None
        if self.undo_path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.undo_path)
            self.undo_path = None


@dataclass
class DirRecord:
    """A directory changed since its last fsync: its durable listing."""

    entries: dict[str, int]
    synced_at: int


class Volatile:
    """The journal of one backing directory; every method is thread-safe."""

    def __init__(self, backing: str) -> None:
        self.root = os.path.abspath(backing)
        self.root_ino = os.lstat(self.root).st_ino
        self.hidden = os.path.join(self.root, HIDDEN)
        self.trash_dir = os.path.join(self.hidden, "trash")
        self.undo_dir = os.path.join(self.hidden, "undo")
        shutil.rmtree(self.hidden, ignore_errors=True)
        os.makedirs(self.trash_dir)
        os.makedirs(self.undo_dir)
        self.lock = threading.RLock()
        self.files: dict[int, FileRecord] = {}
        self.dirs: dict[int, DirRecord] = {}
        self.refs: dict[int, int] = {}
        self.trash: dict[int, str] = {}
        self.synced_at: dict[int, int] = {}
        self._seq = itertools.count(1)
        self._undo_seq = itertools.count(1)

    # -- file data -------------------------------------------------------------------
    def before_data_change(self, ino: int, fd: int, start: int, end: float) -> None:
        """Called before bytes [start, end) of the inode open as ``fd`` change
        (end may be inf for a truncation); saves what the change destroys."""
        with self.lock:
            rec = self.files.get(ino)
            if rec is None:
                st = os.fstat(fd)
                rec = FileRecord(st.st_size, st.st_atime_ns, st.st_mtime_ns)
                self.files[ino] = rec
            hi = int(min(end, rec.size))
            if start >= hi:
                return
            todo = missing_ranges(rec.saved, start, hi)
            if not todo:
                return
            if rec.read_fd is None:
                rec.read_fd = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
            if rec.undo_fd is None:
                rec.undo_path = os.path.join(self.undo_dir, f"{ino}.{next(self._undo_seq)}")
                rec.undo_fd = os.open(
                    rec.undo_path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600
                )
            for s, e in todo:
                pos = s
                while pos < e:
                    data = os.pread(rec.read_fd, min(_CHUNK, e - pos), pos)
                    if not data:
                        break
                    os.pwrite(rec.undo_fd, data, pos)
                    pos += len(data)
                rec.saved = add_range(rec.saved, s, e)

    def created(self, ino: int, fd_or_path: int | str) -> None:
        """A new regular file: durable content is empty until its first fsync."""
        st = os.stat(fd_or_path) if isinstance(fd_or_path, int) else os.lstat(fd_or_path)
        with self.lock:
            old = self.files.pop(ino, None)
            if old is not None:
                old.close()
            self.files[ino] = FileRecord(0, st.st_atime_ns, st.st_mtime_ns)

    def synced(self, ino: int) -> None:
        with self.lock:
            rec = self.files.pop(ino, None)
            if rec is not None:
                rec.close()

    # -- directory entries ------------------------------------------------------
    def capture(self, dir_path: str) -> None:
        """Called (under ``lock``) before an entry change in ``dir_path``."""
        ino = os.lstat(dir_path).st_ino
        if ino in self.dirs:
            return
        entries = {}
        with os.scandir(dir_path) as it:
            for e in it:
                if ino == self.root_ino and e.name == HIDDEN:
                    continue
                entries[e.name] = e.stat(follow_symlinks=False).st_ino
        self.dirs[ino] = DirRecord(entries, self.synced_at.get(ino, 0))
        for child in entries.values():
            self.refs[child] = self.refs.get(child, 0) + 1

    def new_dir(self, ino: int) -> None:
        """A directory made during the run: durably empty until synced."""
        with self.lock:
            self._drop_dir(ino)
            self.dirs[ino] = DirRecord({}, next(self._seq))

    def dir_synced(self, ino: int) -> None:
        with self.lock:
            self.synced_at[ino] = next(self._seq)
            self._drop_dir(ino)

    def _drop_dir(self, ino: int) -> None:
        rec = self.dirs.pop(ino, None)
        if rec is None:
            return
        for child in rec.entries.values():
            left = self.refs.get(child, 0) - 1
            if left > 0:
                self.refs[child] = left
            else:
                self.refs.pop(child, None)
                self._collect(child)

    def keep(self, path: str) -> int:
        """Called (under ``lock``) before ``path`` loses its name: keep its inode in
        the trash. Directories are moved there (the caller must not remove them
        again); for files a second name is made. Returns the inode."""
        st = os.lstat(path)
        ino = st.st_ino
        if ino in self.trash:
            return ino
        spare = os.path.join(self.trash_dir, str(ino))
        if stat.S_ISDIR(st.st_mode):
            os.rename(path, spare)
        else:
            os.link(path, spare, follow_symlinks=False)
        self.trash[ino] = spare
        return ino

    def collect(self, ino: int) -> None:
        with self.lock:
            self._collect(ino)

    def _collect(self, ino: int) -> None:
        """Free a trashed inode that no recorded listing names any more."""
        if self.refs.get(ino, 0) > 0 or ino not in self.trash:
            return
        spare = self.trash.pop(ino)
        st = os.lstat(spare)
        if stat.S_ISDIR(st.st_mode):
            os.rmdir(spare)
            self._drop_dir(ino)
            self.synced_at.pop(ino, None)
        else:
            os.unlink(spare)
            if st.st_nlink <= 1:
                rec = self.files.pop(ino, None)
                if rec is not None:
                    rec.close()

    # -- whole-state operations ------------------------------------------------------
    def pending(self) -> dict[str, int]:
        with self.lock:
            return {"files": len(self.files), "dirs": len(self.dirs), "trash": len(self.trash)}

    def sync_all(self) -> None:
        """Everything as it is now becomes durable (a ``sync``, or a clean unmount)."""
        with self.lock:
            for rec in self.files.values():
                rec.close()
            self.files.clear()
            self.dirs.clear()
            self.refs.clear()
            for spare in self.trash.values():
                if os.path.isdir(spare) and not os.path.islink(spare):
                    shutil.rmtree(spare, ignore_errors=True)
                else:
                    os.unlink(spare)
            self.trash.clear()

    def finish(self) -> None:
        """The server is going away cleanly: current state is durable, state dir gone."""
        self.sync_all()
        shutil.rmtree(self.hidden, ignore_errors=True)

    def rollback(self) -> dict[str, Any]:
        """The power cut: turn the backing directory into its durable state. The
        caller has stopped serving; nothing else touches the backing meanwhile."""
        with self.lock:
            return _Rollback(self).run()


class _Rollback:
    """One cut: snapshot the namespace, disassemble it into a pool, rebuild."""

    def __init__(self, vol: Volatile) -> None:
        self.vol = vol
        self.pool = os.path.join(vol.hidden, "pool")
        self.listing: dict[int, dict[str, int]] = {}
        self.is_dir: dict[int, bool] = {}
        self.placed_files: dict[int, str] = {}
        self.placed_dirs: dict[int, str] = {}
        self.lost_names = 0

    def run(self) -> dict[str, Any]:
        vol = self.vol
        for rec in vol.files.values():  # no descriptor of ours may pin anything
            if rec.read_fd is not None:
                os.close(rec.read_fd)
            rec.read_fd = None
        self._scan(vol.root, vol.root_ino)
        with os.scandir(vol.trash_dir) as it:
            for e in it:
                st = e.stat(follow_symlinks=False)
                self.is_dir.setdefault(st.st_ino, stat.S_ISDIR(st.st_mode))
                if stat.S_ISDIR(st.st_mode):
                    self.listing.setdefault(st.st_ino, {})
        winner = self._winners()
        os.mkdir(self.pool)
        self._strip(vol.root, top=True)
        self._strip(vol.trash_dir, top=False)
        self._build(vol.root_ino, vol.root, winner)
        restored: list[str] = []
        for ino, rec in vol.files.items():
            where = self.placed_files.get(ino)
            if where is None:
                continue
            _restore_data(where, rec)
            restored.append(os.path.relpath(where, vol.root))
        reverted = sorted(
            os.path.relpath(self.placed_dirs[d], vol.root)
            for d in vol.dirs
            if d in self.placed_dirs
        )
        summary: dict[str, Any] = {
            "files_rolled_back": sorted(restored),
            "dirs_reverted": reverted,
            "names_missing": self.lost_names,
        }
        shutil.rmtree(self.pool)
        for rec in vol.files.values():
            rec.close()
        vol.files.clear()
        vol.dirs.clear()
        vol.refs.clear()
        vol.trash.clear()
        vol.synced_at.clear()
        shutil.rmtree(vol.hidden)  # the journal is spent: the backing is all durable
        return summary

    def _scan(self, path: str, ino: int) -> None:
        self.is_dir[ino] = True
        names: dict[str, int] = {}
        with os.scandir(path) as it:
            entries = list(it)
        for e in entries:
            if ino == self.vol.root_ino and e.name == HIDDEN:
                continue
            st = e.stat(follow_symlinks=False)
            names[e.name] = st.st_ino
            if stat.S_ISDIR(st.st_mode):
                self._scan(e.path, st.st_ino)
            else:
                self.is_dir.setdefault(st.st_ino, False)
        self.listing[ino] = names

    def _durable(self, ino: int) -> tuple[dict[str, int], float]:
        rec = self.vol.dirs.get(ino)
        if rec is not None:
            return rec.entries, rec.synced_at
        return self.listing.get(ino, {}), _INF

    def _winners(self) -> dict[int, tuple[int, str]]:
        """For each directory named by several durable listings, the one place it
        goes: the listing synced most recently."""
        best: dict[int, tuple[float, int, str]] = {}
        for parent in sorted(set(self.listing) | set(self.vol.dirs)):
            entries, when = self._durable(parent)
            for name, child in sorted(entries.items()):
                if not self.is_dir.get(child, False):
                    continue
                if child not in best or when > best[child][0]:
                    best[child] = (when, parent, name)
        return {child: (p, n) for child, (_, p, n) in best.items()}

    def _strip(self, path: str, *, top: bool) -> None:
        """Move every inode under ``path`` into the pool (children first)."""
        with os.scandir(path) as it:
            entries = list(it)
        for e in entries:
            if top and e.name == HIDDEN:
                continue
            st = e.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                self._strip(e.path, top=False)
            target = os.path.join(self.pool, str(st.st_ino))
            if os.path.lexists(target):
                os.unlink(e.path)
            else:
                os.rename(e.path, target)

    def _build(self, ino: int, path: str, winner: dict[int, tuple[int, str]]) -> None:
        self.placed_dirs[ino] = path
        entries, _ = self._durable(ino)
        for name, child in sorted(entries.items()):
            src = os.path.join(self.pool, str(child))
            dst = os.path.join(path, name)
            if child not in self.is_dir or not os.path.lexists(src):
                self.lost_names += 1  # cannot happen while the trash keeps its promise
                continue
            if self.is_dir[child]:
                if winner.get(child) != (ino, name) or child in self.placed_dirs:
                    continue
                os.rename(src, dst)
                self._build(child, dst, winner)
            else:
                os.link(src, dst, follow_symlinks=False)
                self.placed_files.setdefault(child, dst)


def _restore_data(path: str, rec: FileRecord) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if rec.undo_fd is not None:
            for s, e in rec.saved:
                pos = s
                while pos < e:
                    data = os.pread(rec.undo_fd, min(_CHUNK, e - pos), pos)
                    if not data:
                        break
                    os.pwrite(fd, data, pos)
                    pos += len(data)
        os.ftruncate(fd, rec.size)
        os.utime(fd, ns=(rec.atime_ns, rec.mtime_ns))
    finally:
        os.close(fd)
