"""The manifest as the restore browser (and the fleet view) filters it while an
operator types: each filter one SQL statement on a read-only connection of its
own, so that nothing the size of the archive is ever held in memory and the
first page costs the same at 10,000,000 entries as at 1,000.

A filter lists the first ``limit`` matching entries in path order (the order the
browser shows them in), read from the manifest's indexes: by path (a word is
looked for in the relpath index, which holds every path and nothing else: the
first page of a common word is found at once, a rare one scans that index), by
unit, by status, by sha256 prefix. Its count stops at ``cap`` (the operator
narrows the filter). Each listed row carries which copies of its gzip there are
and the legal hold that covers it. bench/console.py and bench/scale.py measure it.

Query language, words separated by spaces (all must hold):

    unit:NAME        exactly this unit
    sha:PREFIX       sha256 starts with PREFIX
    status:STATUS    archived | stale | restored | missing
    after:DATE       the file's mtime at or after DATE (YYYY-MM-DD, local time)
    before:DATE      … before DATE
    anything else    a substring of the relative path
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

from ..base.errors import UsageError
from ..base.given import parse_time
from ..base.names import is_text, to_db
from ..base.times import NS_PER_MS, now_ms
from ..store.connection import connect_readonly, reading
from ..store.entries import EntryStatus, read_entry_count
from ..store.legalholds import ActiveHolds, read_active
from ..store.remoteobjects import read_copies
from .pathindex import PathIndex, Stopped, Unusable

# Stopped is the filter's, raised from either module.
__all__ = [
    "Catalog",
    "CatalogRow",
    "Query",
    "QueryError",
    "Stopped",
    "close_all",
    "load_catalog",
    "parse_query",
    "path_order",
]


class QueryError(UsageError, ValueError):
    """A filter word that cannot be understood; the message says which."""


@dataclass(frozen=True)
class Query:
    text: tuple[str, ...] = ()
    unit: str | None = None
    sha: str | None = None
    status: str | None = None
    after_ns: int | None = None
    before_ns: int | None = None


STATUSES: tuple[str, ...] = get_args(EntryStatus)


def _date_ns(word: str, value: str) -> int:
    at = parse_time(value)
    if at is None:
        raise QueryError(f"{word}: use YYYY-MM-DD")
    return at * NS_PER_MS


def parse_query(text: str) -> Query:
    words: list[str] = []
    fields: dict[str, object] = {}
    for word in text.split():
        key, sep, value = word.partition(":")
        if sep and key == "status" and value and value not in STATUSES:
            # Refused, naming the ones there are, rather than silently matching none.
            raise QueryError(f"{word}: use one of {', '.join(STATUSES)}")
        if sep and key in ("unit", "sha", "status") and value:
            fields[key] = value.lower() if key == "sha" else value
        elif sep and key in ("after", "before") and value:
            fields[f"{key}_ns"] = _date_ns(word, value)
        else:
            words.append(word)
    return Query(tuple(words), **fields)  # type: ignore[arg-type]


def path_order(relpath: str) -> tuple[bool, str | bytes]:
    """A listed path's place in the order a filter lists them in (SQLite's:
    the UTF-8 paths first, then the others, stored as BLOBs, by their bytes),
    for merging lists that SQL sorted."""
    return (False, relpath) if is_text(relpath) else (True, os.fsencode(relpath))


@dataclass(frozen=True)
class CatalogRow:
    id: int
    relpath: str
    unit: str
    sha256: str
    status: str
    bytes: int
    mtime_ns: int
    archived_at: int
    gz_path: str
    member_offset: int | None = None
    copies: str = "local"  # local | remote | local + remote | none (expired)
    held: str | None = None  # the legal hold that covers it, described

    @property
    def location(self) -> str:
        """Where its gzip is: its own file, or a member of a bundle; and which
        copies there are (here, on the remote tier, or both)."""
        where = self.gz_path
        if self.member_offset is not None:
            where += f" (member at byte {self.member_offset})"
        return f"{where} · {self.copies}"

    def extract_command(self, archive_root: Path) -> str:
        """A shell line that gives the file's bytes back with the system's tools."""
        path = shlex.quote(str(archive_root / self.gz_path))
        if self.member_offset is None:
            return f"gunzip -c {path}"
        return f"tar -xOf {path} {shlex.quote(self.relpath + '.gz')} | gunzip -c"


@dataclass
class Catalog:
    """One manifest's entries as a filter reads them (module doc). Cheap to make:
    the count of entries and the holds in force, read when it is loaded."""

    manifest: Path
    entries: int = 0
    holds: ActiveHolds = field(default_factory=lambda: ActiveHolds([]))
    paths: PathIndex | None = None
    # One connection kept for every filter (``close`` ends it), where a
    # filter would otherwise open its own: opening one reads the manifest's
    # schema, about a millisecond, and the fleet view filters a thousand
    # manifests at each key typed. Only for a file nothing writes to.
    keep_open: bool = False
    _kept: sqlite3.Connection | None = field(default=None, repr=False, compare=False)
    _guard: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def __len__(self) -> int:
        return self.entries

    def close(self) -> None:
        with self._guard:
            if self._kept is not None:
                self._kept.close()
                self._kept = None

    @contextlib.contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """The connection a filter reads through: its own, or the kept one
        (one filter at a time: a filter given up by a newer one lets go
        within a millisecond)."""
        if not self.keep_open:
            with reading(self.manifest) as db:
                yield db
            return
        with self._guard:
            if self._kept is None:
                self._kept = connect_readonly(self.manifest)
            try:
                yield self._kept
            finally:
                self._kept.set_progress_handler(None, 0)

    def prepare(self) -> str | None:
        """The index of paths built or brought up to date (seconds at 10,000,000
        entries, a worker's job; until then a word scans the relpath index).
        None, or why there is none (the filter still works, slower)."""
        if self.paths is None:
            return None
        try:
            self.paths.prepare()
        except (Unusable, OSError, sqlite3.Error) as err:
            return f"{self.paths.path}: {err}"
        return None

    def filter(
        self,
        query: Query,
        limit: int = 500,
        cap: int = 50_000,
        stop: Callable[[], bool] | None = None,
        upto: str | None = None,
    ) -> tuple[int, list[CatalogRow], bool]:
        """(how many entries match, the first ``limit`` in path order, whether
        the count stopped at ``cap`` because more match: narrow the filter).
        Only paths up to ``upto`` are listed, where given (they are counted
        all the same): what a search of many catalogs already has ``limit``
        of before it needs no more. ``stop`` is asked every few thousand rows
        read; when it says so, the filter is given up (Stopped): a rare word
        scans every path, a second at 10,000,000 entries, and each key typed
        starts the next one."""
        if not self.entries:
            return 0, [], False
        with self._reading() as db:
            if stop is not None:
                db.set_progress_handler(stop, _STEPS_BETWEEN_STOPS)
            try:
                found = self._indexed(db, query, limit, cap, stop, upto)
                if found is None:
                    found = self._filter(db, query, limit, cap, upto)
            except sqlite3.OperationalError as err:
                if stop is not None and stop():
                    raise Stopped from err
                raise
        # A read of the copies that was stopped answers none: never shown.
        if stop is not None and stop():
            raise Stopped
        return found

    def _filter(
        self, db: sqlite3.Connection, query: Query, limit: int, cap: int, upto: str | None
    ) -> tuple[int, list[CatalogRow], bool]:
        where, params = _where(query)
        page, page_params = _where(query, upto)
        # The page chosen by id first: from an index that holds the path (the
        # relpath index, the sha256 one) no other row is read.
        rows = db.execute(
            f"SELECT {_SELECTED} FROM (SELECT id AS pick FROM entries {page} "
            "ORDER BY relpath, id LIMIT ?) CROSS JOIN entries ON id = pick ORDER BY relpath, id",
            [*page_params, limit],
        ).fetchall()
        if len(rows) < limit and upto is None:
            total, capped = len(rows), False
        elif not where:
            total, capped = self.entries, False
        else:
            [(n,)] = db.execute(
                f"SELECT count(*) FROM (SELECT 1 FROM entries {where} LIMIT ?)",
                [*params, cap + 1],
            ).fetchall()
            total, capped = min(n, cap), n > cap
        copies = read_copies(db, (r[8] for r in rows))
        return total, [self._row(r, copies) for r in rows], capped

    def _indexed(
        self,
        db: sqlite3.Connection,
        query: Query,
        limit: int,
        cap: int,
        stop: Callable[[], bool] | None,
        upto: str | None,
    ) -> tuple[int, list[CatalogRow], bool] | None:
        """The filter answered from the entries whose path holds its longest word
        (the index of paths, and the entries archived since it was brought up to
        date); None when there is no index yet, or more than ``cap`` hold the word
        (a common word: the relpath index finds its first page at once)."""
        if not query.text or self.paths is None:
            return None
        word = max(query.text, key=len)
        found = self.paths.candidates(os.fsencode(word), cap, stop)
        if found is None or len(found[0]) > cap:
            return None
        ids, covered = found
        ids += [i for (i,) in db.execute(_SINCE, [covered, to_db(word), cap + 1 - len(ids)])]
        if len(ids) > cap:
            return None
        where, params = _where(query)
        page, page_params = _where(query, upto)
        candidates = json.dumps(ids)
        rows = db.execute(
            f"SELECT {_SELECTED} {_AMONG} {page} ORDER BY relpath, id LIMIT ?",
            [candidates, *page_params, limit],
        ).fetchall()
        [(total,)] = db.execute(
            f"SELECT count(*) {_AMONG} {where}", [candidates, *params]
        ).fetchall()
        copies = read_copies(db, (r[8] for r in rows))
        return total, [self._row(r, copies) for r in rows], False

    def _row(self, r: tuple[Any, ...], copies: dict[str, bool]) -> CatalogRow:
        entry_id, relpath, unit, sha, status, size, mtime, archived, gz, offset = r
        hold = self.holds.for_entry(unit, relpath, entry_id) if self.holds else None
        where = "none" if status == "expired" else _COPIES[copies.get(gz)]
        return CatalogRow(
            entry_id, relpath, unit, sha, status, size, mtime, archived, gz, offset, where,
            hold.describe() if hold else None,
        )  # fmt: skip


# SQLite's virtual machine steps between two questions to a filter's ``stop``:
# about a millisecond of scanning.
_STEPS_BETWEEN_STOPS = 20_000
# A row's copies by read_copies' answer for its gzip: none remote, the local one
# still relied on, or dropped.
_COPIES: dict[bool | None, str] = {None: "local", True: "local + remote", False: "remote"}
# The entries with the given ids (a JSON list), each read by its id.
_AMONG = "FROM (SELECT value AS candidate FROM json_each(?)) CROSS JOIN entries ON id = candidate"
# Entries past those the index of paths covers, whose path holds a word.
_SINCE = "SELECT id FROM entries WHERE id > ? AND instr(relpath, ?) > 0 ORDER BY id LIMIT ?"
_SELECTED = (
    "id, relpath, unit, sha256, status, bytes, mtime_ns, archived_at, gz_path, member_offset"
)


def _where(query: Query, upto: str | None = None) -> tuple[str, list[Any]]:
    """The query as a WHERE clause and its parameters (names bound as the
    manifest stores them: names.py), paths after ``upto`` left out where it is
    given (a stored path, as a listed row has it)."""
    terms: list[str] = []
    params: list[Any] = []
    if upto is not None:
        terms.append("relpath <= ?")
        params.append(to_db(upto))
    if query.unit is not None:
        terms.append("unit = ?")
        params.append(to_db(query.unit))
    if query.status is not None:
        terms.append("status = ?")
        params.append(query.status)
    if query.sha is not None:
        # Lower-case hex: every sha256 with the prefix sorts below it + "g".
        terms.append("sha256 >= ? AND sha256 < ?")
        params += [query.sha, query.sha + "g"]
    for word in query.text:
        terms.append("instr(relpath, ?) > 0")
        params.append(to_db(word))
    if query.after_ns is not None:
        terms.append("mtime_ns >= ?")
        params.append(query.after_ns)
    if query.before_ns is not None:
        terms.append("mtime_ns < ?")
        params.append(query.before_ns)
    return ("WHERE " + " AND ".join(terms) if terms else ""), params


def close_all(catalogs: Iterable[Catalog]) -> None:
    """Every kept connection of ``catalogs`` closed (each waits for a filter
    still running on it to let go). Blocking: run it in a thread."""
    for catalog in catalogs:
        catalog.close()


def load_catalog(manifest: Path, *, keep_open: bool = False, index_from: int = 0) -> Catalog:
    """The catalog of the manifest at ``manifest`` (read-only; none there:
    empty), its connection kept open between filters where asked, with an
    index of paths if it holds ``index_from`` entries or more (below some
    tens of thousands a scan of the relpath index is quicker: the fleet
    view's 200 sites of 700 entries filtered in 140 ms by scans, 420 ms by
    their indexes)."""
    if not manifest.exists():
        return Catalog(manifest)
    with reading(manifest) as db:
        entries = read_entry_count(db)
        return Catalog(
            manifest,
            entries,
            read_active(db, now_ms()),
            PathIndex(manifest) if entries >= index_from else None,
            keep_open=keep_open,
        )
