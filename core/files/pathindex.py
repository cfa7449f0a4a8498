"""Every entry's path in one flat file beside the manifest (``coldkeep.paths``),
for the restore browser's filter: a word is looked for with ``memmem`` over the
whole file, a tenth of a second at 10,000,000 entries, where the relpath index
takes a second (SQLite steps through each path). It is ``locate``'s flat
database, searched the same way, and asks nothing of the writers: the console
and the scheduler (after a pass) build it once and append what was archived
since.

The file: a 4 KiB header, then each covered entry's relpath as the manifest
stores its bytes (UTF-8, or a name's raw bytes), in id order, each ended by a NUL
(the one byte no path holds).

It is a cache, so nothing is lost when it is missing, stale or broken (the
filter then reads the manifest), and its writes are not fsynced. Instead:
- the header names the manifest (device, inode), the records (how many, where
  they end, their CRC-32), the runs of consecutive ids they map to, and the last
  entry covered with its path's sha256. Bytes past the end (an append a crash cut short)
  are never read.
- a process checks the CRC once per index file before it trusts it (a power cut
  may keep the header and lose the records it names); a header that does not
  read, or another manifest, or a last entry whose path differs, means a build
  anew. The manifest never deletes an entry nor changes a path, so a covered
  record stays true.
- readers hold a shared ``flock`` while they scan, the one appending an
  exclusive one; a build writes a ``.partial`` and renames it over the old file,
  which a reader that has it open keeps reading whole.
- a build starts only where the filesystem keeps room: four times the likely
  size and 1 GiB beside it (the archive's own writes come first).
"""

from __future__ import annotations

import bisect
import contextlib
import ctypes
import fcntl
import glob
import hashlib
import json
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from isal.isal_zlib import crc32

from ..base.fsutil import write_all
from ..base.layout import PARTIAL_SUFFIX, PATH_INDEX_NAME
from ..base.space import free_bytes
from ..store.connection import reading
from ..store.entries import read_entry_count

_MAGIC = b"coldkeep-paths 1\n"
HEADER_BYTES = 4096
# Past this many runs of consecutive ids the index is not kept (the header holds
# them; a site's own manifest has one).
MAX_RUNS = 64
_CHUNK = 4 << 20  # bytes scanned per read
_ROWS = 65_536  # entries read per statement while building or appending
_ROOM = 1 << 30
_LIKELY_BYTES_PER_ENTRY = 64
_DEAD_AFTER_S = 600
_NEW = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

_libc = ctypes.CDLL(None, use_errno=True)
_memmem = _libc.memmem
_memmem.restype = ctypes.c_void_p
_memmem.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t)


class Stopped(Exception):
    """A filter given up part way: its ``stop`` said a newer one replaced it."""


class Unusable(Exception):
    """The index cannot be kept here; the message says why (the filter reads the
    manifest instead)."""


@dataclass(frozen=True)
class Header:
    dev: int  # the manifest's
    ino: int
    records: int
    end: int  # the offset past the last record
    crc: int  # of the bytes from HEADER_BYTES to ``end``
    runs: tuple[tuple[int, int], ...]  # (first record of the run, its id)
    last_id: int  # 0: none covered
    last_sha: str  # the sha256 of its relpath's bytes

    def to_bytes(self) -> bytes:
        # At most MAX_RUNS runs and fixed-size fields: it always fits.
        raw = _MAGIC + json.dumps(asdict(self), separators=(",", ":")).encode() + b"\n"
        assert len(raw) <= HEADER_BYTES, raw
        return raw.ljust(HEADER_BYTES, b" ")

    @classmethod
    def from_bytes(cls, raw: bytes) -> Header | None:
        if not raw.startswith(_MAGIC):
            return None
        try:
            fields = json.loads(raw[len(_MAGIC) :])
            fields["runs"] = tuple((int(r), int(i)) for r, i in fields["runs"])
            return cls(**fields)
        except (ValueError, TypeError, KeyError):
            return None

    def id_of(self, record: int) -> int:
        first, first_id = self.runs[bisect.bisect_right(self.runs, (record, 1 << 62)) - 1]
        return first_id + record - first

    def extended(self, ids: list[int], data: bytes) -> Header:
        """This header with records for ``ids`` (ascending, above ``last_id``)
        appended: ``data``, their paths each ended by a NUL."""
        runs = list(self.runs)
        record, prev = self.records, self.last_id
        if runs and ids[0] == prev + 1 and ids[-1] - ids[0] == len(ids) - 1:
            record, prev = record + len(ids), ids[-1]  # the last run goes on
        else:
            for entry_id in ids:
                if not runs or entry_id != prev + 1:
                    runs.append((record, entry_id))
                record, prev = record + 1, entry_id
        if len(runs) > MAX_RUNS:
            raise Unusable(f"the ids of the entries make more than {MAX_RUNS} runs")
        last = data[data.rfind(b"\0", 0, len(data) - 1) + 1 : -1]
        return replace(
            self, records=record, end=self.end + len(data), crc=crc32(data, self.crc),
            runs=tuple(runs), last_id=prev, last_sha=hashlib.sha256(last).hexdigest(),
        )  # fmt: skip


def _matches(
    fd: int, end: int, word: bytes, marks: list[int], stop: Callable[[], bool] | None
) -> Iterator[int]:
    """The records (by number, each once) that hold ``word``. The file is read a
    chunk at a time, each read running on by the word's length less one, so that
    a match starting in a chunk is whole in its read. ``marks[k]`` is how many
    records end before chunk ``k``: a chunk without a match is not counted, unless
    it is past the marks known (then its mark is kept)."""
    size = _CHUNK + len(word) - 1
    buf = bytearray(size)
    view, shared = memoryview(buf), (ctypes.c_char * size).from_buffer(buf)
    base, last = ctypes.addressof(shared), -1
    try:
        for k, offset in enumerate(range(HEADER_BYTES, end, _CHUNK)):
            if stop is not None and stop():
                raise Stopped
            wanted = min(size, end - offset)
            got = os.preadv(fd, [view[:wanted]], offset)
            own, record, start = min(_CHUNK, got), marks[k], 0
            while start < own and (hit := _memmem(base + start, got - start, word, len(word))):
                if (pos := hit - base) >= own:
                    break
                record += buf.count(b"\0", start, pos)
                if record != last:  # a path that runs on into the next chunk
                    yield record
                    last = record
                start = buf.find(b"\0", pos) + 1
                if start == 0:
                    break  # its path runs past this read: nothing else starts here
                record += 1
            if got < wanted:
                return  # shorter than its header says: what is there was read
            if len(marks) == k + 1 and offset + _CHUNK <= end:
                marks.append(marks[k] + buf.count(b"\0", 0, _CHUNK))
    finally:
        view.release()
        del shared


class PathIndex:
    """The index of the manifest at ``manifest`` (module doc). ``prepare`` builds
    or brings it up to date (seconds at 10,000,000 entries: a worker's job);
    ``candidates`` answers only once this process has checked the file."""

    def __init__(self, manifest: Path) -> None:
        self.manifest = manifest
        self.path = manifest.with_name(PATH_INDEX_NAME)
        # The index files this process checked, each with its chunks' marks.
        self._marks: dict[tuple[int, int], list[int]] = {}
        self._guard = threading.Lock()  # one prepare at a time in this process

    def candidates(
        self, word: bytes, cap: int, stop: Callable[[], bool] | None = None
    ) -> tuple[list[int], int] | None:
        """The ids of the covered entries whose path holds ``word`` (at most
        ``cap`` + 1, in id order) and the last id covered; None while the index
        is not ready for this manifest."""
        if not word or b"\0" in word:
            return None
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            st, mst = os.fstat(fd), os.stat(self.manifest)
            marks = self._marks.get((st.st_dev, st.st_ino))
            header = Header.from_bytes(os.pread(fd, HEADER_BYTES, 0))
            if (
                marks is None
                or header is None
                or (header.dev, header.ino) != (mst.st_dev, mst.st_ino)
            ):
                return None
            ids: list[int] = []
            for record in _matches(fd, header.end, word, marks, stop):
                ids.append(header.id_of(record))
                if len(ids) > cap:
                    break
            return ids, header.last_id
        finally:
            os.close(fd)

    def prepare(self) -> None:
        """The index checked (once a process) and appended to, or built anew.
        Raises Unusable (or OSError, sqlite3.Error) when it cannot be kept here."""
        with self._guard, reading(self.manifest) as db:
            db.row_factory = None  # paths as the manifest's bytes, not made names
            mst = os.stat(self.manifest)
            if not self._bring_up(db, mst, append=True):
                self._build(db, mst)

    def check(self) -> bool:
        """Whether the index there can be read as it is (checked once a process):
        for a command that writes nothing, it is neither built nor appended to."""
        with self._guard, reading(self.manifest) as db:
            db.row_factory = None
            return self._bring_up(db, os.stat(self.manifest), append=False)

    def _bring_up(self, db: sqlite3.Connection, mst: os.stat_result, *, append: bool) -> bool:
        """The existing index checked, and appended to; False when there is none
        to keep."""
        try:
            fd = os.open(
                self.path, (os.O_RDWR if append else os.O_RDONLY) | os.O_NOFOLLOW | os.O_CLOEXEC
            )
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if append else fcntl.LOCK_SH)
            header = Header.from_bytes(os.pread(fd, HEADER_BYTES, 0))
            if header is None or not self._still_true(fd, header, db, mst):
                return False
            if append:
                _append(fd, header, db)
            return True
        finally:
            os.close(fd)

    def _still_true(
        self, fd: int, header: Header, db: sqlite3.Connection, mst: os.stat_result
    ) -> bool:
        if (header.dev, header.ino) != (mst.st_dev, mst.st_ino):
            return False
        if header.last_id:
            row = db.execute(
                "SELECT CAST(relpath AS BLOB) FROM entries WHERE id = ?", [header.last_id]
            ).fetchone()
            if row is None or hashlib.sha256(row[0]).hexdigest() != header.last_sha:
                return False
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) not in self._marks:
            crc, marks = _read_through(fd, header.end)
            if crc != header.crc:
                return False
            self._marks[st.st_dev, st.st_ino] = marks
        return True

    def _build(self, db: sqlite3.Connection, mst: os.stat_result) -> None:
        room = free_bytes(self.path.parent)
        likely = read_entry_count(db) * _LIKELY_BYTES_PER_ENTRY
        if room is not None and room < 4 * likely + _ROOM:
            raise Unusable(f"{self.path.parent} keeps too little room for it")
        self._sweep()
        partial = self.path.with_name(f"{self.path.name}.{secrets.token_hex(4)}{PARTIAL_SUFFIX}")
        fd = os.open(partial, _NEW, 0o600)
        try:
            empty = Header(mst.st_dev, mst.st_ino, 0, HEADER_BYTES, 0, (), 0, "")
            write_all(fd, empty.to_bytes(), 0)
            built = _append(fd, empty, db)
            os.rename(partial, self.path)
            st = os.fstat(fd)
            self._marks[st.st_dev, st.st_ino] = _read_through(fd, built.end)[1]
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        finally:
            os.close(fd)

    def _sweep(self) -> None:
        """Builds a crash left behind: partials no one has written to for a while
        (one being built now is written to many times a second)."""
        cutoff = time.time() - _DEAD_AFTER_S
        for partial in self.path.parent.glob(f"{glob.escape(self.path.name)}.*{PARTIAL_SUFFIX}"):
            with contextlib.suppress(FileNotFoundError):
                if partial.lstat().st_mtime < cutoff:
                    partial.unlink()


def _append(fd: int, header: Header, db: sqlite3.Connection) -> Header:
    """The entries above ``header.last_id`` appended, a statement's rows at a
    time; the header is written after each batch's records. The last header
    written."""
    while True:
        rows = db.execute(
            "SELECT id, CAST(relpath AS BLOB) FROM entries WHERE id > ? ORDER BY id LIMIT ?",
            [header.last_id, _ROWS],
        ).fetchall()
        if not rows:
            return header
        data = b"\0".join(path for _, path in rows) + b"\0"
        grown = header.extended([entry_id for entry_id, _ in rows], data)
        write_all(fd, data, header.end)
        write_all(fd, grown.to_bytes(), 0)
        header = grown


def _read_through(fd: int, end: int) -> tuple[int, list[int]]:
    """The CRC-32 of the records (-1: fewer bytes than ``end``) and the marks of
    their chunks (``_matches``)."""
    crc, marks = 0, [0]
    for offset in range(HEADER_BYTES, end, _CHUNK):
        chunk = os.pread(fd, min(_CHUNK, end - offset), offset)
        if len(chunk) < min(_CHUNK, end - offset):
            return -1, marks
        crc = crc32(chunk, crc)
        if len(chunk) == _CHUNK:
            marks.append(marks[-1] + chunk.count(b"\0"))
    return crc, marks
