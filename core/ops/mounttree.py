"""The tree ``coldkeep mount`` shows, answered on demand: each folder's names
read from the manifest when it is first listed or looked into (an index range
over the relpaths under it, a subfolder one seek whatever it holds), kept in a
cache bounded by names, and dropped whole when the manifest changes (a pass
committed: ``PRAGMA data_version``, checked at most once a ``RECHECK``); the
``.versions`` tree of every version of every path; and, with the live tree
merged in, its folders read from the live tree (``LiveTree``).

Invariants:
- Read-only: the manifest through read-only connections, the live tree through
  descriptors opened ``O_RDONLY | O_NOFOLLOW``; nothing written anywhere.
- A name is a relpath component as the manifest has it (any character but "/",
  ``os.fsdecode``'s for bytes that are not UTF-8); an empty, ``.`` or ``..``
  component is never shown, so no path leaves the tree; ``.versions`` at the
  top is always the versions tree (an archived path of that name is reached
  under ``.versions/.versions``).
- A file's version shown is the newest as restore takes it (the source's
  mtime, then the entry id); a folder wins over a file at the same path.
- A live file wins over the archived one at its path; only live regular files
  and folders are shown (a symlink, a device or a FIFO never is), never the
  archive's root nor the mount's own folder.
"""

from __future__ import annotations

import errno
import logging
import operator
import os
import queue
import sqlite3
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

from ..store.connection import connect_readonly, data_version
from ..store.entries import Entry, entry_by_id
from ..store.pathlisting import Listed, listed_name, listing, versions_at

log = logging.getLogger(__name__)

VERSIONS = ".versions"
RECHECK = 1.0  # seconds between two looks at the manifest (and live folders' life)
CACHE_NAMES = 200_000  # names held over every cached folder
_BAD = ("", ".", "..")


class File(NamedTuple):
    """One archived version of a file."""

    id: int
    size: int
    mtime_ns: int
    mode: int
    archived_at: int  # ms since the epoch


class Node(NamedTuple):
    """What the archive has at a path: a folder (names under it), a file's
    versions (newest last), or both."""

    folder: bool
    versions: tuple[File, ...]


class Live(NamedTuple):
    """A live regular file, or a live folder, as ``lstat`` gave it."""

    folder: bool
    size: int
    mtime_ns: int
    mode: int


class Dir(NamedTuple):
    """A folder of the mount."""


class Target(NamedTuple):
    """What a path of the mount is: a folder, an archived version, or a live
    file (``rel``: its relpath under live_root)."""

    kind: Dir | File | Live
    rel: str = ""


FOLDER = Target(Dir())
DIR_MODE = stat.S_IFDIR | 0o555
_REG = stat.S_IFREG


def _file_mode(mode: int) -> int:
    return stat.S_IFREG | stat.S_IMODE(mode)


def _mode(node: Node) -> int:
    return DIR_MODE if node.folder else _file_mode(node.versions[-1].mode)


def _age(f: File) -> tuple[int, int]:
    return f.mtime_ns, f.id


def _newest_last(rows: list[Listed]) -> tuple[File, ...]:
    return tuple(sorted((File(r[0], r[2], r[3], r[4], r[5]) for r in rows), key=_age))


def archived_name(at_ms: int) -> str:
    """An archive time as ``coldkeep versions`` prints it (UTC, to the second)."""
    return datetime.fromtimestamp(at_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def version_names(versions: tuple[File, ...]) -> dict[str, File]:
    """Each version's name under ``.versions/<path>/``: its archive time; one
    archived in the same second as an older one (by id) gets ``-<entry id>``."""
    names: dict[str, File] = {}
    for f in sorted(versions, key=lambda f: f.id):
        name = archived_name(f.archived_at)
        names[name if name not in names else f"{name}-{f.id}"] = f
    return names


def _parent(rel: str) -> tuple[str, str]:
    parent, _, name = rel.rpartition("/")
    return parent, name


# Each node built by tuple.__new__ at C speed, not through the named tuple's
# own __new__ (a Python frame per call).
_new = tuple.__new__
_file_fields = operator.itemgetter(0, 2, 3, 4, 5)  # a Listed row's File

# What a cached folder holds at a name: a Node, or the row of a file of one
# version (nearly every file), made a Node only when looked at.
Held = Node | Listed


def as_node(held: Held) -> Node:
    """What a folder holds at a name, as a ``Node``."""
    if isinstance(held, Node):
        return held
    return Node(False, (_new(File, _file_fields(held)),))


class Catalog:
    """The manifest's tree, folder by folder. Thread-safe: libfuse calls in on
    threads of its own; each takes a connection from a pool for its query."""

    def __init__(self, manifest: Path, cache_names: int = CACHE_NAMES) -> None:
        self.path = manifest
        self.cache_names = cache_names
        self.pool: queue.SimpleQueue[sqlite3.Connection] = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.folders: OrderedDict[str, dict[str, Held]] = OrderedDict()
        self.held = 0  # names over self.folders
        self.watch = connect_readonly(manifest)
        self.version = data_version(self.watch)
        self.checked = time.monotonic()
        self.left_out = False  # said once: a name that cannot be shown

    def close(self) -> None:
        self.watch.close()
        while True:
            try:
                db = self.pool.get_nowait()
            except queue.Empty:
                return
            db.close()

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        try:
            db = self.pool.get_nowait()
        except queue.Empty:
            db = connect_readonly(self.path)
        try:
            yield db
        finally:
            self.pool.put(db)

    def entry(self, entry_id: int) -> Entry | None:
        """The manifest's entry ``entry_id`` as it is now."""
        with self._db() as db:
            return entry_by_id(db, entry_id)

    def recheck(self) -> bool:
        """Drop every cached folder if the manifest changed since the last look
        (at most one look a ``RECHECK``); whether it did."""
        with self.lock:
            now = time.monotonic()
            if now - self.checked < RECHECK:
                return False
            self.checked = now
            version = data_version(self.watch)
            if version == self.version:
                return False
            self.version = version
            self.folders.clear()
            self.held = 0
            return True

    def _read(self, rel: str) -> dict[str, Held]:
        got: dict[str, Held] = {}
        with self._db() as db:
            for part in listing(db, rel + "/" if rel else ""):
                if isinstance(part, str):  # a subfolder
                    was = got.get(part)
                    if part in _BAD:
                        self._leave_out(rel)
                    else:
                        got[part] = Node(True, as_node(was).versions if was is not None else ())
                    continue
                # Nearly every run: files of one version each, taken as they
                # came (a million names listed must not cost a Node apiece).
                run = dict(zip(map(listed_name, part), part, strict=True))
                keys = run.keys()
                if len(run) == len(part) and keys.isdisjoint(got) and keys.isdisjoint(_BAD):
                    got.update(run)
                    continue
                for row in part:
                    self._add(got, rel, row)
        return got

    def _add(self, got: dict[str, Held], rel: str, row: Listed) -> None:
        name = row[1]
        was = got.get(name)
        if name in _BAD:
            self._leave_out(rel)
        elif was is None:
            got[name] = row
        else:
            node = as_node(was)
            more = sorted((*node.versions, _new(File, _file_fields(row))), key=_age)
            got[name] = Node(node.folder, tuple(more))

    def _leave_out(self, rel: str) -> None:
        if not self.left_out:
            self.left_out = True
            log.warning(
                "mount: archived paths with an empty, '.' or '..' component are not shown "
                "(the first under %r; coldkeep find lists them)",
                rel or "/",
            )

    def folder(self, rel: str) -> dict[str, Held]:
        """The names right under the folder ``rel`` ("" for the top), each a
        ``Node`` or, for a file of one version, its row (``as_node``); empty
        for a path that is no folder."""
        with self.lock:
            got = self.folders.get(rel)
            if got is not None:
                self.folders.move_to_end(rel)
                return got
        got = self._read(rel)
        with self.lock:
            if rel not in self.folders and len(got) <= self.cache_names:
                self.folders[rel] = got
                self.held += len(got)
                while self.held > self.cache_names and len(self.folders) > 1:
                    _, dropped = self.folders.popitem(last=False)
                    self.held -= len(dropped)
        return got

    def node(self, rel: str) -> Node | None:
        """What the archive has at ``rel``; None for nothing. From the parent's
        cached names if it has them, else by two index lookups (a lookup never
        reads a whole folder)."""
        parent, name = _parent(rel)
        with self.lock:
            names = self.folders.get(parent)
            if names is not None:  # a folder looked into is kept as one listed
                self.folders.move_to_end(parent)
        if names is not None:
            held = names.get(name)
            return None if held is None else as_node(held)
        if any(part in _BAD for part in rel.split("/")):
            return None
        with self._db() as db:
            rows, folder = versions_at(db, rel)
        return Node(folder, _newest_last(rows)) if rows or folder else None


class LiveTree:
    """The live tree under ``root``, read without following any symlink: each
    folder is reached component by component, ``O_NOFOLLOW | O_DIRECTORY``
    from a descriptor of the root held open. Folders' names are kept a
    ``RECHECK``."""

    def __init__(self, root: Path, hidden: list[Path]) -> None:
        self.root = os.path.realpath(root)
        self.root_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self.hidden = {os.path.realpath(p) for p in hidden}
        self.lock = threading.Lock()
        self.folders: OrderedDict[str, tuple[float, dict[str, Live]]] = OrderedDict()

    def close(self) -> None:
        os.close(self.root_fd)

    def _open(self, rel: str, flags: int) -> int:
        """A descriptor of ``rel``, every component opened without following a
        symlink (ELOOP or ENOTDIR if one is)."""
        parts = rel.split("/") if rel else []
        if any(part in _BAD for part in parts):
            raise _enoent(rel)
        fd = os.dup(self.root_fd)
        try:
            for n, part in enumerate(parts):
                last = n == len(parts) - 1
                mode = flags if last else os.O_RDONLY | os.O_DIRECTORY
                nxt = os.open(part, mode | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        return fd

    def open(self, rel: str) -> int:
        """A descriptor to read the live regular file ``rel`` (ENOENT if it is no
        longer one)."""
        fd = self._open(rel, os.O_RDONLY | os.O_NONBLOCK)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise _enoent(rel)
        return fd

    def _read(self, rel: str) -> dict[str, Live]:
        try:
            fd = self._open(rel, os.O_RDONLY | os.O_DIRECTORY)
        except (FileNotFoundError, NotADirectoryError):
            return {}
        except OSError as err:
            if err.errno in (errno.ELOOP, errno.EACCES):
                return {}
            raise
        here = os.path.join(self.root, rel) if rel else self.root
        got: dict[str, Live] = {}
        try:
            with os.scandir(fd) as it:
                for e in it:
                    if os.path.join(here, e.name) in self.hidden:
                        continue
                    try:
                        st = e.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    if stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode):
                        folder = stat.S_ISDIR(st.st_mode)
                        got[e.name] = Live(folder, st.st_size, st.st_mtime_ns, st.st_mode)
        finally:
            os.close(fd)
        return got

    def folder(self, rel: str) -> dict[str, Live]:
        now = time.monotonic()
        with self.lock:
            kept = self.folders.get(rel)
            if kept is not None and now - kept[0] < RECHECK:
                return kept[1]
        got = self._read(rel)
        with self.lock:
            self.folders[rel] = (now, got)
            self.folders.move_to_end(rel)
            while len(self.folders) > 1024:
                self.folders.popitem(last=False)
        return got

    def node(self, rel: str) -> Live | None:
        parent, name = _parent(rel)
        return self.folder(parent).get(name)


def _enoent(path: str) -> OSError:
    return OSError(errno.ENOENT, os.strerror(errno.ENOENT), path)


class View:
    """The mount's paths ("/"-separated, relative to its top) as targets: the
    archive's newest versions (with the live tree over them), and
    ``.versions/<path>/<archived-at>``."""

    def __init__(self, catalog: Catalog, live: LiveTree | None) -> None:
        self.catalog, self.live = catalog, live

    def resolve(self, rel: str) -> Target:
        """What ``rel`` is; ENOENT when nothing."""
        self.catalog.recheck()
        if rel == "":
            return FOLDER
        top, _, rest = rel.partition("/")
        if top == VERSIONS:
            return self._version(rest)
        node = self.catalog.node(rel)
        live = self.live.node(rel) if self.live is not None else None
        if (node is not None and node.folder) or (live is not None and live.folder):
            return FOLDER
        if live is not None:
            return Target(live, rel)
        if node is not None and node.versions:
            return Target(node.versions[-1])
        raise _enoent(rel)

    def _version(self, rel: str) -> Target:
        if rel == "" or self.catalog.node(rel) is not None:
            return FOLDER
        parent, name = _parent(rel)
        node = self.catalog.node(parent) if parent else None
        got = version_names(node.versions).get(name) if node is not None else None
        if got is None:
            raise _enoent(rel)
        return Target(got)

    def names(self, rel: str) -> Iterator[tuple[str, int, int]]:
        """The names in the folder ``rel``, each with its ``st_mode`` (all a
        listing needs: ``find`` takes the type from it) and offset 0, as
        libfuse's filler takes them; ENOTDIR, ENOENT when ``rel`` is no folder."""
        if not isinstance(self.resolve(rel).kind, Dir):
            raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), rel)
        top, _, rest = rel.partition("/")
        if top == VERSIONS:
            yield from self._version_names(rest)
            return
        names = self.catalog.folder(rel)
        if self.live is None and rel:  # nearly every listing: the archive's names alone
            for name, held in names.items():
                if isinstance(held, Node):
                    yield name, _mode(held), 0
                else:  # a file of one version: its row
                    yield name, _REG | (held[4] & 0o7777), 0
            return
        live = self.live.folder(rel) if self.live is not None else {}
        for name, held in names.items():
            if (rel == "" and name == VERSIONS) or name in live:
                continue
            yield name, _mode(as_node(held)), 0
        for name, got in live.items():
            if rel == "" and name == VERSIONS:
                continue
            folder = got.folder or (name in names and as_node(names[name]).folder)
            yield name, DIR_MODE if folder else _file_mode(got.mode), 0
        if rel == "":
            yield VERSIONS, DIR_MODE, 0

    def _version_names(self, rel: str) -> Iterator[tuple[str, int, int]]:
        for name in self.catalog.folder(rel):
            yield name, DIR_MODE, 0
        node = self.catalog.node(rel) if rel else None
        if node is not None:
            for name, got in version_names(node.versions).items():
                yield name, _file_mode(got.mode), 0
