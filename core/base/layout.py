"""Where things live under ``archive_root``, and the containment rules for paths.

    <archive_root>/coldkeep.db               the manifest and every table of coldkeep's (store/)
    <archive_root>/coldkeep.site             the live tree the archive belongs to (site.py)
    <archive_root>/.lock                     the mutex (see lock.py)
    <archive_root>/.events-read              the share between reads of event rows and the
                                             moves of them (events/readshare.py)
    <archive_root>/.reserve                  room kept to record a full filesystem (space.py)
    <archive_root>/.coldkeep.sock            the attach socket of the lock's holder (ops/attach.py)
    <archive_root>/coldkeep.paths            every entry's path, for the browser's filter: a cache
                                             (files/pathindex.py), ``coldkeep.paths.<hex>.partial``
                                             while it is built
    <archive_root>/.remote-<what>-<hex>.partial
                                             a copy read back from the remote tier (remote/fetch.py)
    <archive_root>/files/<relpath>.gz        one gzip per archived file version
    <archive_root>/events/<YYYY-MM>.db       moved event rows

Every name under ``archive_root`` is spelled here, once: the others ask ``Layout``
(or use a name this module defines).

``relpath`` is the live file's path relative to ``live_root``, ``/``-separated; its
first segment is the unit (``.`` for files directly in ``live_root``). A second
version of the same path is ``<relpath>.<sha12>.gz``.

Invariants:
- Temporary names end in ``.partial`` (archive side) or ``.restore-partial`` (live
  side), or are a source set aside for its removal (``.coldkeep-unlinking-<hex>``,
  live side, ``aside_of``), and are never eligible for archiving, whatever the
  include globs say.
- A relpath that comes from outside (the manifest, a restore selection) is checked
  before it becomes a path: no absolute path, no ``..``, no empty segment, and no
  symlink among the parents between the root and the target. A name read from a
  gzip header must also be one segment that fits in a file name
  (``check_stored_name``); any byte but ``/`` and NUL is a name's own.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from .errors import UsageError

PARTIAL_SUFFIX = ".partial"
RESTORE_PARTIAL_SUFFIX = ".restore-partial"
# A live source renamed aside in its own directory while its identity is checked
# and it is unlinked: the name is fixed by the source's name (recovery finds it
# from the entry's relpath) and short whatever that name's length.
ASIDE_PREFIX = ".coldkeep-unlinking-"
GZ_SUFFIX = ".gz"
MANIFEST_NAME = "coldkeep.db"
SITE_NAME = "coldkeep.site"
PATH_INDEX_NAME = "coldkeep.paths"
LOCK_NAME = ".lock"
EVENTS_READ_NAME = ".events-read"
RESERVE_NAME = ".reserve"
SOCKET_NAME = ".coldkeep.sock"
# A remote copy read back lies beside the archive while it is read, under a name
# no walk of files/ or events/ sees: ``.remote-<what>-<hex>.partial``.
SCRATCH_PREFIX = ".remote-"
# What SQLite leaves beside a database it opened: a snapshot's rollback journal,
# and the WAL and its index of a database in WAL mode opened read-only to check it
# (a manifest snapshot is one: ``<scratch>.partial-wal``, ``-shm``).
SQLITE_SIDECARS = ("-journal", "-wal", "-shm")
PROBE_PREFIX = ".coldkeep-doctor."  # doctor's write test
_MONTH_DB = re.compile(r"(\d{4}-\d{2})\.db")  # an event month's database under events/


class UnsafePath(UsageError, ValueError):
    """A path that would leave its root; the message names it."""


def is_temp_name(name: str) -> bool:
    """coldkeep's own temporary files: never archived, never taken for data."""
    return name.endswith((PARTIAL_SUFFIX, RESTORE_PARTIAL_SUFFIX)) or name.startswith(ASIDE_PREFIX)


def aside_name(name: str) -> str:
    """The name a source called ``name`` is set aside under, in its own directory,
    between its last identity check and its unlink."""
    return ASIDE_PREFIX + hashlib.sha256(os.fsencode(name)).hexdigest()[:16]


def aside_of(path: Path) -> Path:
    return path.with_name(aside_name(path.name))


def is_scratch_name(name: str) -> bool:
    """A remote copy's scratch file (``Layout.scratch``), or what SQLite left
    beside one (``<scratch>.partial-journal``, ``-wal``, ``-shm``)."""
    return name.startswith(SCRATCH_PREFIX) and PARTIAL_SUFFIX in name


def sidecars_of(db: Path) -> list[Path]:
    """The files SQLite may leave beside the database ``db`` (``SQLITE_SIDECARS``)."""
    return [db.with_name(db.name + s) for s in SQLITE_SIDECARS]


def partial_of(dest: Path) -> Path:
    return dest.with_name(dest.name + PARTIAL_SUFFIX)


def restore_partial_of(target: Path) -> Path:
    """The temporary a restore writes ``target`` under, beside it: a name that
    fits in NAME_MAX even when ``target``'s own name is 255 bytes long."""
    stem = fitted_name(target.name, len(os.fsencode(RESTORE_PARTIAL_SUFFIX)))
    return target.with_name(stem + RESTORE_PARTIAL_SUFFIX)


NAME_MAX = 255  # bytes in one path segment, on every filesystem coldkeep meets
PATH_MAX = 4096  # bytes in a path the kernel takes, its NUL included (Linux)
# Bytes a gzip's name may add to its file's: ``.<sha12>-999`` (a second
# version), ``.gz``, then ``.partial`` while it is written.
GZ_NAME_ROOM = len(".0123456789ab-999") + len(GZ_SUFFIX) + len(PARTIAL_SUFFIX)
_HASH_CHARS = 16


def fitted_name(name: str, room: int) -> str:
    """``name`` itself when ``room`` more bytes still fit in NAME_MAX; else its
    first bytes (cut at a character boundary), ``~`` and 16 hex digits of the
    sha256 of the whole name: the same name always gives the same result, and
    two names that share their first 200 bytes do not. The real name is kept
    where the archive records names (the gzip header, the manifest, a bundle's
    index), never taken back from this one."""
    raw = os.fsencode(name)
    if len(raw) + room <= NAME_MAX:
        return name
    keep = NAME_MAX - room - _HASH_CHARS - 1
    while keep > 0 and raw[keep] & 0xC0 == 0x80:  # not inside a UTF-8 character
        keep -= 1
    return f"{os.fsdecode(raw[:keep])}~{hashlib.sha256(raw).hexdigest()[:_HASH_CHARS]}"


def unit_of(relpath: str) -> str:
    head, sep, _ = relpath.partition("/")
    return head if sep else "."


def versioned_name(gz_name: str, sha256: str, n: int = 0) -> str:
    """``x.jsonl.gz`` -> ``x.jsonl.<sha12>.gz`` (``-<n>`` added when n > 0)."""
    stem = gz_name.removesuffix(GZ_SUFFIX)
    tag = sha256[:12] if n == 0 else f"{sha256[:12]}-{n}"
    return f"{stem}.{tag}{GZ_SUFFIX}"


def check_relpath(relpath: str) -> str:
    """Refuse a relpath that could name something outside its root."""
    if not relpath or "\0" in relpath:
        raise UnsafePath(f"{relpath!r} is not a usable relative path")
    if relpath.startswith("/") or os.path.isabs(relpath):
        raise UnsafePath(f"{relpath!r} is absolute; only paths relative to the root are allowed")
    segs = relpath.split("/")
    if any(s in ("", ".", "..") for s in segs):
        raise UnsafePath(f"{relpath!r} contains '..', '.' or an empty segment")
    return relpath


def check_stored_name(name: str) -> str:
    """A file name read back from the archive (a gzip header's FNAME), which may
    come from a copied archive or a bucket: one plain segment that can be written
    to a disk, or ``UnsafePath`` saying why not. Any other byte is a name's own
    (a tab, an ESC, a byte that is not UTF-8): a file system takes it, so the
    archive gives it back; it is escaped where it is shown, never refused."""
    shown = repr(name) if len(name) <= 60 else f"{name[:40]!r}… ({len(name)} characters)"
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise UnsafePath(f"{shown} is not a plain file name")
    if len(os.fsencode(name)) > NAME_MAX:
        raise UnsafePath(f"{shown} is longer than a file name can be ({NAME_MAX} bytes)")
    return name


def resolve_inside(root: Path, relpath: str) -> Path:
    """``root/relpath``, refusing traversal and any symlinked parent directory.

    Parents that do not exist yet are fine (restore creates them); one that exists
    must be a real directory, so a link planted in the tree cannot redirect a write.
    """
    check_relpath(relpath)
    if root.is_symlink():
        raise UnsafePath(f"{root} is a symlink; give the real directory")
    path = root
    for seg in relpath.split("/")[:-1]:
        path = path / seg
        try:
            st = path.lstat()
        except FileNotFoundError:
            break
        if stat.S_ISLNK(st.st_mode):
            raise UnsafePath(f"{path} is a symlink; refusing to write through it")
        if not stat.S_ISDIR(st.st_mode):
            raise UnsafePath(f"{path} is not a directory")
    return root / relpath


@dataclass(frozen=True)
class Layout:
    """The archive's paths, from its root."""

    root: Path

    @property
    def manifest(self) -> Path:
        return self.root / MANIFEST_NAME

    @property
    def site(self) -> Path:
        return self.root / SITE_NAME

    @property
    def lock(self) -> Path:
        return self.root / LOCK_NAME

    @property
    def events_read(self) -> Path:
        return self.root / EVENTS_READ_NAME

    @property
    def reserve(self) -> Path:
        return self.root / RESERVE_NAME

    @property
    def socket(self) -> Path:
        return self.root / SOCKET_NAME

    def scratch(self, what: str) -> Path:
        """A new name for a scratch file (a remote copy read back, a snapshot
        being taken) directly under the root."""
        return self.root / f"{SCRATCH_PREFIX}{what}-{secrets.token_hex(4)}{PARTIAL_SUFFIX}"

    def probe(self) -> Path:
        """A new name for doctor's test of writing under the root."""
        return self.root / f"{PROBE_PREFIX}{os.getpid()}.{secrets.token_hex(4)}.tmp"

    @property
    def files(self) -> Path:
        return self.root / "files"

    @property
    def events(self) -> Path:
        return self.root / "events"

    def event_months(self) -> dict[str, Path]:
        """Each event month's database under ``events/`` by its ``YYYY-MM``
        (reads the directory: call it from a thread)."""
        folder = self.events
        names = sorted(os.listdir(folder)) if folder.is_dir() else []
        return {m[1]: folder / name for name in names if (m := _MONTH_DB.fullmatch(name))}

    def gz_for(self, relpath: str) -> Path:
        """The first-choice gzip path of a live relpath (checked). A name too long
        to take ``.gz``, a version tag and ``.partial`` within NAME_MAX is
        shortened (``fitted_name``); its gzip header keeps the real one."""
        head, _, name = check_relpath(relpath).rpartition("/")
        fitted = fitted_name(name, GZ_NAME_ROOM)
        return (
            self.files / head / (fitted + GZ_SUFFIX) if head else self.files / (fitted + GZ_SUFFIX)
        )

    def too_long(self, relpath: str) -> bool:
        """Whether the gzip of ``relpath`` (while written: its ``.partial`` with a
        version tag) would be a path longer than the kernel takes: that file is
        refused alone (``path_too_long``), never half archived."""
        room = GZ_NAME_ROOM - len(GZ_SUFFIX)
        # The relpath's own length bounds the gzip's (a fitted name is shorter):
        # the exact path is built only for the rare one near the limit.
        files = len(os.fsencode(str(self.files))) + 1
        if files + len(relpath.encode("utf-8", "surrogateescape")) + room + 4 < PATH_MAX:
            return False
        return len(os.fsencode(str(self.gz_for(relpath)))) + room >= PATH_MAX

    def rel(self, path: Path) -> str:
        """A path under the archive as the manifest stores it."""
        return path.relative_to(self.root).as_posix()

    def abs(self, stored: str) -> Path:
        """A manifest's stored path back to an absolute one, refusing traversal."""
        return resolve_inside(self.root, stored)

    def relpath_of_gz(self, gz: Path, original_name: str | None = None) -> str:
        """The live relpath a gzip under ``files/`` belongs to.

        The directory comes from where the gzip sits; the file name from its gzip
        header when known (a versioned ``x.<sha12>.gz`` cannot be undone from its
        name alone), else from its name without ``.gz``. A header's name is not
        trusted: one that is not a plain file name that fits a disk raises
        ``UnsafePath``.
        """
        rel_dir = gz.parent.relative_to(self.files).as_posix()
        name = (
            check_stored_name(original_name) if original_name else gz.name.removesuffix(GZ_SUFFIX)
        )
        return name if rel_dir == "." else f"{rel_dir}/{name}"
