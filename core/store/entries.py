"""The entries (``entries``): one row per archived file version, saying where
its gzip lies (a gzip of its own, or a bundle member by its span) and what
became of it (``EntryStatus``); a tombstone, once retention deleted the gzip,
keeps its sha256 and paths. The ``Manifest``'s entry methods (``Entries``) are
here, and the reads of them on a plain read-only connection (``read_entries``,
``read_entry_count``, ``entry_by_id``) for work off the event loop.

Invariants:
- An entry is committed (durably) before its source may be unlinked (step 6 before
  step 7): a crash can leave a source with an entry, never an entry-less gzip that
  recovery cannot explain, nor a lost source.
- Entries that reach step 6 while a commit is in flight share the next one
  (``add_entry``); each caller returns once its own entry is durable.
- A source seen gone (step 7) may be marked later, with the next entries'
  transaction or on close (``sources_gone_later``): a mark lost to a crash is
  one recovery makes again.
- Entries are read through named queries (no caller's SQL condition is spliced
  into them).
- Stored paths are relative to ``archive_root`` (gzips) or to ``live_root``
  (relpaths); the archive can be moved as a whole.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

import aiosqlite

from ..base.codec import Span
from ..base.grouped import Grouped
from ..base.ioerror import naming_db
from ..base.names import is_text
from ..base.times import DAY_MS
from .connection import IDS_PER_STATEMENT, ManifestConnection, Statement, in_statements
from .pathlisting import bytes_after, text_after

EntryStatus = Literal["archived", "stale", "restored", "missing", "expired"]
_MARK_GONE = "UPDATE entries SET source_present = 0 WHERE id IN"


@dataclass(frozen=True)
class NewEntry:
    unit: str
    relpath: str
    bytes: int
    sha256: str
    gz_path: str
    gz_bytes: int
    mtime_ns: int
    dev: int | None
    ino: int | None
    mode: int
    archived_at: int
    status: EntryStatus = "archived"
    grace_until: int | None = None  # restored in place: passes leave it alone until then
    source_present: bool = True
    member_offset: int | None = None  # a bundle member: where its gzip lies in gz_path
    member_length: int | None = None
    ctime_ns: int | None = None  # the source's when archived (None: not recorded)
    seek_points: str | None = None  # codec.encode_points of its gzip's (None: none)

    @property
    def span(self) -> Span | None:
        """Where the gzip lies in ``gz_path`` when that is a bundle."""
        if self.member_offset is None or self.member_length is None:
            return None
        return Span(self.member_offset, self.member_length)

    @property
    def location(self) -> str:
        """The gzip's place, as an operator reads it: its path, and for a bundle
        member the byte where it starts."""
        return self.gz_path if self.span is None else f"{self.gz_path}@{self.member_offset}"


@dataclass(frozen=True)
class Entry(NewEntry):
    id: int = 0
    verified_at: int | None = None
    verify_error: str | None = None
    expired_at: int | None = None  # a tombstone: when retention deleted its gzip


# An entry's fields are its columns, but one: the restore grace is stored in the
# column ``hold_until`` (its name since schema 1, on disk). This is the one place
# the field and the column meet.
_COLUMN_OF = {"grace_until": "hold_until"}
_ENTRY_FIELDS = tuple(f.name for f in fields(Entry))
_NEW_FIELDS = tuple(f.name for f in fields(NewEntry))
_ENTRY_COLUMNS = tuple(_COLUMN_OF.get(f, f) for f in _ENTRY_FIELDS)
_NEW_COLUMNS = tuple(_COLUMN_OF.get(f, f) for f in _NEW_FIELDS)
# The statuses whose gzip should be in the archive (every copy kept: not
# "missing", not expired); the same as SQL (``KEPT_SQL``: after a column), and
# as the condition over ``entries.status`` (``HAS_GZIP``).
KEPT_STATUSES: tuple[EntryStatus, ...] = ("archived", "stale", "restored")
KEPT_SQL = f"IN ({', '.join(repr(s) for s in KEPT_STATUSES)})"
HAS_GZIP = f"status {KEPT_SQL}"
# Every status but the tombstone's.
_NOT_EXPIRED = "status IN ('archived', 'stale', 'restored', 'missing')"


@dataclass(frozen=True)
class ArchiveFile:
    """One archive file (a gzip, or a bundle) and its entries, summed."""

    gz_path: str
    unit: str
    entries: int
    newest_mtime_ns: int
    gz_bytes: int
    bundled: bool
    shipped_bytes: int | None = None  # its remote copy's size (None: not shipped)
    dropped: bool = False  # its local copy dropped for the remote one
    retain_until: int | None = None  # ms: the bucket's Object Lock keeps its remote copy until
    shipped_at: int | None = None  # ms: when its remote copy was shipped


def tombstone(gz_path: str, at: int) -> Statement:
    """The entries of archive file ``gz_path`` made tombstones (``expired``, with
    when; their sha256 and paths kept), for an expiry's transaction."""
    return (
        "UPDATE entries SET status = 'expired', expired_at = ?, verify_error = NULL "
        f"WHERE gz_path = ? AND {_NOT_EXPIRED}",
        [at, gz_path],
    )


def _entry(row: Sequence[Any]) -> Entry:
    values = dict(zip(_ENTRY_FIELDS, row, strict=True))
    values["source_present"] = bool(values["source_present"])
    return Entry(**values)


def read_entries(
    db: sqlite3.Connection, names: Sequence[str], chunk: int = 50_000
) -> Iterator[list[Any]]:
    """Every entry's fields ``names``, in id order, ``chunk`` rows at a time, on a
    connection from ``connection.reading``."""
    unknown = set(names) - set(_ENTRY_FIELDS)
    assert not unknown, f"not entry fields: {unknown}"
    columns = ", ".join(_COLUMN_OF.get(n, n) for n in names)
    cur = db.execute(f"SELECT {columns} FROM entries ORDER BY id")
    while rows := cur.fetchmany(chunk):
        yield rows


# How many entries: the totals the schema's triggers keep (a few rows).
_ENTRY_COUNT = "SELECT coalesce(sum(entries), 0) FROM entry_totals"


def read_entry_count(db: sqlite3.Connection) -> int:
    """How many entries, on a connection from ``connection.reading``; counted
    on a manifest older than the totals (a fleet site's snapshot)."""
    try:
        [(n,)] = db.execute(_ENTRY_COUNT).fetchall()
    except sqlite3.OperationalError:
        [(n,)] = db.execute("SELECT count(*) FROM entries").fetchall()
    return int(n)


def entry_by_id(db: sqlite3.Connection, entry_id: int) -> Entry | None:
    """Entry ``entry_id``, on a connection from ``connection.connect_readonly``
    (the mount reads a small version whole on its own threads, off the event
    loop)."""
    row = db.execute(
        f"SELECT {', '.join(_ENTRY_COLUMNS)} FROM entries WHERE id = ?", [entry_id]
    ).fetchone()
    return None if row is None else _entry(row)


class Entries(ManifestConnection):
    """The ``Manifest``'s entries: added (a group commit), read by named queries,
    their statuses, restore grace and sources' marks set, summed."""

    def __init__(self, db: aiosqlite.Connection, path: Path) -> None:
        super().__init__(db, path)
        # Entries waiting for the commit after the one in flight (add_entry).
        self._entries = Grouped(self._add_named)
        # Sources confirmed gone, not yet written (sources_gone_later).
        self._gone: list[int] = []

    async def close(self) -> None:
        try:
            # A mark that cannot be written is not lost: recovery finds those
            # sources gone and marks them again.
            with contextlib.suppress(sqlite3.Error):
                await self.flush_sources_gone()
        finally:
            await super().close()

    async def add_entry(self, new: NewEntry) -> Entry:
        """Insert and commit one entry (durable on return). Entries added while a
        commit is in flight go into the next one together: one transaction and
        one fsync for files that finish at the same time."""
        return await self._entries.submit(new)

    async def _add_named(self, news: list[NewEntry]) -> list[Entry]:
        more = f" and {len(news) - 1} more" if len(news) > 1 else ""
        with naming_db(self.path, f"recording the entry of {news[0].relpath}{more}"):
            return await self.add_entries(news)

    async def add_entries(self, new: Sequence[NewEntry]) -> list[Entry]:
        """Insert many entries in one transaction (a bundle's members, a rebuild):
        all of them are durable on return, or none is. Their ids are the next
        free ones, taken inside the transaction."""
        columns = ("id", *_NEW_COLUMNS)
        marks = ", ".join("?" * len(columns))
        values = ("id", *_NEW_FIELDS)
        async with self._gate:
            gone, self._gone = self._gone, []
            try:
                async with self._transaction():
                    await self._mark_gone(gone)
                    [(last,)] = await self._rows("SELECT coalesce(max(id), 0) FROM entries")
                    added = [
                        Entry(**{f: getattr(e, f) for f in _NEW_FIELDS}, id=last + 1 + i)
                        for i, e in enumerate(new)
                    ]
                    await self._run_many(
                        f"INSERT INTO entries ({', '.join(columns)}) VALUES ({marks})",
                        [[getattr(e, f) for f in values] for e in added],
                    )
            except BaseException:
                self._gone += gone  # written with the next transaction instead
                raise
        return added

    async def entry(self, entry_id: int) -> Entry | None:
        rows = await self._select("WHERE id = ?", (entry_id,))
        return rows[0] if rows else None

    async def entry_by_gz(self, gz_path: str) -> Entry | None:
        rows = await self._select("WHERE gz_path = ?", (gz_path,))
        return rows[0] if rows else None

    async def entries(self) -> list[Entry]:
        """Every entry, in id order."""
        return await self._select("", ())

    async def bytes_of(self, ids: Sequence[int]) -> int:
        """The original bytes of the entries ``ids``, summed."""
        [(size,)] = await self.rows(
            "SELECT coalesce(sum(bytes), 0) FROM entries WHERE id IN "
            "(SELECT value FROM json_each(?))",
            [json.dumps(list(ids))],
        )
        return int(size)

    async def entries_pending_unlink(self) -> list[Entry]:
        """Committed entries whose live source has not been seen gone (a crash
        between steps 6 and 7)."""
        await self.flush_sources_gone()
        return await self._select("WHERE source_present = 1 AND status = 'archived'", ())

    async def entries_needing_attention(self, limit: int) -> list[Entry]:
        """Stale or missing entries, and those whose gzip failed its last verify."""
        # Two index ranges (the status index, the partial verify_error one), not an
        # OR that SQLite answered by walking every entry in id order.
        return await self._select(
            "WHERE id IN (SELECT id FROM entries WHERE status IN ('stale', 'missing') "
            "UNION SELECT id FROM entries WHERE verify_error IS NOT NULL)",
            (),
            limit=limit,
        )

    async def entries_missing(self, limit: int) -> list[Entry]:
        return await self._select("WHERE status = 'missing'", (), limit=limit)

    async def select(
        self,
        *,
        ids: Sequence[int] = (),
        unit: str | None = None,
        sha_prefix: str | None = None,
        mtime_from_ns: int | None = None,
        mtime_before_ns: int | None = None,
    ) -> list[Entry]:
        """The entries matching every condition given (a restore's selection): ids,
        unit, a prefix of the sha256 (lower-case hex), the source's mtime from
        ``mtime_from_ns`` (inclusive) and before ``mtime_before_ns``; oldest path
        first, each path's versions by mtime. Tombstones (``expired``) too: what
        retention deleted is still found, and said to be gone."""
        where = ["1"]
        params: list[Any] = []
        if ids:
            where.append(f"id IN ({', '.join('?' * len(ids))})")
            params += ids
        if unit:
            where.append("unit = ?")
            params.append(unit)
        if sha_prefix:
            where.append("sha256 LIKE ?")
            params.append(sha_prefix + "%")
        if mtime_from_ns is not None:
            where.append("mtime_ns >= ?")
            params.append(mtime_from_ns)
        if mtime_before_ns is not None:
            where.append("mtime_ns < ?")
            params.append(mtime_before_ns)
        clause = "WHERE " + " AND ".join(where)
        return await self._select(clause, params, order="relpath, mtime_ns, id")

    async def paths_from(
        self, prefix: str, containing: Sequence[str] = ()
    ) -> list[tuple[int, str]]:
        """(id, relpath) of every entry whose relpath starts with ``prefix`` and
        contains each of ``containing``: a range of the relpath index (TEXT
        names), then the names stored as BLOBs (not UTF-8: names.py), which sort
        after every TEXT, by the range of their bytes."""
        found: list[tuple[int, str]] = []
        if is_text(prefix) and all(map(is_text, containing)):
            above = text_after(prefix)
            # Below every BLOB when no text is above the prefix: the TEXT range runs
            # to its end. The planner takes the covering index (relpath, id).
            sql = "SELECT id, relpath FROM entries WHERE relpath >= ? AND relpath < ?"
            params: list[Any] = [prefix, above if above is not None else b""]
            for piece in containing:
                sql += " AND instr(relpath, ?) > 0"
                params.append(piece)
            found += [(r[0], r[1]) for r in await self.rows(sql, params)]
        low = os.fsencode(prefix)
        high = bytes_after(low)
        sql = "SELECT id, relpath FROM entries WHERE relpath >= ?" + (
            " AND relpath < ?" if high is not None else ""
        )
        blobs = await self.rows(sql, [low] if high is None else [low, high])
        found += [(r[0], r[1]) for r in blobs if all(p in r[1] for p in containing)]
        return found

    async def paths_after(self, after_id: int, containing: str) -> list[tuple[int, str]]:
        """(id, relpath) of the entries past ``after_id`` whose relpath may
        contain ``containing``: those whose TEXT holds it, and every name stored
        as a BLOB (``instr`` over a BLOB's bytes is not a name's containment: the
        caller looks)."""
        rows = await self.rows(
            "SELECT id, relpath FROM entries WHERE id > ? "
            "AND (typeof(relpath) = 'blob' OR instr(relpath, ?) > 0)",
            [after_id, containing],
        )
        return [(r[0], r[1]) for r in rows]

    async def entries_with_ids(self, ids: Sequence[int]) -> list[Entry]:
        """The entries of ``ids`` (one statement, the ids as a JSON array), in id
        order."""
        return await self._select(
            "WHERE id IN (SELECT value FROM json_each(?))", [json.dumps(list(ids))]
        )

    async def versions_of(self, relpath: str) -> list[Entry]:
        """Every version of the file at ``relpath`` (tombstones too), by the
        source's mtime then id: the newest last, as restore takes it."""
        return await self._select("WHERE relpath = ?", (relpath,), order="mtime_ns, id")

    async def unknown_ids(self, ids: Sequence[int]) -> list[int]:
        """Those of ``ids`` that no entry has, in the order given."""
        rows = await self.rows(
            "SELECT value FROM json_each(?) WHERE value NOT IN (SELECT id FROM entries)",
            [json.dumps(list(ids))],
        )
        return [int(r[0]) for r in rows]

    async def _select(
        self, where: str, params: Iterable[Any], *, order: str = "id", limit: int | None = None
    ) -> list[Entry]:
        sql = f"SELECT {', '.join(_ENTRY_COLUMNS)} FROM entries {where} ORDER BY {order}"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        rows = await self.rows(sql, params)
        return [_entry(r) for r in rows]

    async def local_gz_paths(self, chunk: int = 50_000) -> set[str]:
        """The gzip path of every entry whose gzip should be here: kept, its local
        copy not dropped after shipping. Read from the schema's partial index of
        them: it costs the archive's local copies, not its every entry (a site
        that ships keeps a few here of many millions); ``chunk`` at a time, in
        the index's order, so no list of them all is held beside the set."""
        paths: set[str] = set()
        after: str = ""  # every TEXT path sorts after it, and every BLOB one
        while True:
            rows = await self.rows(
                "SELECT gz_path FROM entries INDEXED BY entries_local "
                f"WHERE remote < 2 AND {HAS_GZIP} AND gz_path > ? ORDER BY gz_path LIMIT ?",
                [after, chunk],
            )
            paths.update(r[0] for r in rows)
            if len(rows) < chunk:
                return paths
            after = rows[-1][0]

    async def gz_statuses_of(self, gz_paths: Iterable[str]) -> list[tuple[str, str]]:
        """The gzip path and status of every entry whose gzip is one of
        ``gz_paths`` (a bundle's path has a row per member). Bound as
        parameters, never as JSON: a path that is not UTF-8 is a BLOB (names.py),
        and JSON would turn it into other bytes."""
        todo = list(gz_paths)
        rows: list[Any] = []
        for i in range(0, len(todo), IDS_PER_STATEMENT):
            chunk = todo[i : i + IDS_PER_STATEMENT]
            marks = ", ".join("?" * len(chunk))
            rows += await self.rows(
                f"SELECT gz_path, status FROM entries WHERE gz_path IN ({marks})", chunk
            )
        return [(r[0], r[1]) for r in rows]

    async def entries_by_gz(self, gz_paths: list[str]) -> list[Entry]:
        found: list[Entry] = []
        for i in range(0, len(gz_paths), 900):
            chunk = gz_paths[i : i + 900]
            marks = ", ".join("?" * len(chunk))
            found += await self._select(f"WHERE gz_path IN ({marks})", chunk)
        return found

    async def _update_ids(self, sql: str, params: Sequence[Any], ids: Iterable[int]) -> None:
        """``sql`` ends in ``WHERE id IN``: one statement, so one commit, per
        IDS_PER_STATEMENT ids (an executemany outside a transaction commits, and
        fsyncs, once per row)."""
        for statement, values in in_statements(sql, params, ids):
            await self.run(statement, values)

    async def any_expired(self) -> bool:
        return bool(await self.rows("SELECT 1 FROM entries WHERE status = 'expired' LIMIT 1"))

    async def expired_under(self, prefix: str) -> list[str]:
        """The gzip paths of tombstones starting with ``prefix`` (a range of the key)."""
        rows = await self.rows(
            "SELECT DISTINCT gz_path FROM entries WHERE gz_path >= ? AND gz_path < ? "
            "AND status = 'expired'",
            [prefix, prefix + "\U0010ffff"],
        )
        return [r[0] for r in rows]

    async def set_status(self, ids: Iterable[int], status: EntryStatus) -> None:
        await self._update_ids("UPDATE entries SET status = ? WHERE id IN", [status], ids)

    async def set_status_and_grace(
        self, ids: Iterable[int], status: EntryStatus, grace_until: int | None
    ) -> None:
        await self._update_ids(
            "UPDATE entries SET status = ?, hold_until = ? WHERE id IN", [status, grace_until], ids
        )

    async def mark_sources_gone(self, ids: Iterable[int]) -> None:
        """Step 7 confirmed. Not critical to durability: if lost, recovery finds the
        source gone and marks it again."""
        await self._update_ids(_MARK_GONE, [], ids)

    def sources_gone_later(self, ids: Iterable[int]) -> None:
        """``mark_sources_gone``, written with the next entries' transaction (or
        ``flush_sources_gone``, or on close): off the path of the file that
        confirmed it, at the cost of nothing but a mark recovery would redo."""
        self._gone += ids

    async def flush_sources_gone(self) -> None:
        gone, self._gone = self._gone, []
        try:
            await self.mark_sources_gone(gone)
        except BaseException:
            self._gone += gone
            raise

    async def _mark_gone(self, ids: list[int]) -> None:
        """Inside a transaction the caller holds the gate for."""
        for statement, values in in_statements(_MARK_GONE, [], ids):
            await self._run(statement, values)

    # the restore grace ---------------------------------------------------------

    async def relpaths_in_grace(self, now: int) -> set[str]:
        """Live paths restored in place whose restore grace has not run out."""
        rows = await self.rows(
            "SELECT relpath FROM entries WHERE status = 'restored' AND hold_until > ?", (now,)
        )
        return {str(r[0]) for r in rows}

    async def status_counts(self) -> dict[str, tuple[int, int, int]]:
        """status -> (entries, bytes, gz bytes)."""
        # Kept by the schema's triggers (entry_totals): a few rows, at any size.
        rows = await self.rows(
            "SELECT status, sum(entries), sum(bytes), sum(gz_bytes) FROM entry_totals "
            "GROUP BY status HAVING sum(entries) > 0"
        )
        return {r[0]: (r[1], r[2], r[3]) for r in rows}

    async def entry_count(self) -> int:
        [(n,)] = await self.rows(_ENTRY_COUNT)
        return int(n)

    async def archived_between(self, start: int, until: int) -> tuple[int, int, int]:
        """(entries, bytes, gz bytes) archived from ``start`` until before ``until``
        (ms): what a pass that died in that time had done."""
        [(files, size, gz_size)] = await self.rows(
            "SELECT count(*), coalesce(sum(bytes), 0), coalesce(sum(gz_bytes), 0) "
            "FROM entries WHERE archived_at >= ? AND archived_at < ?",
            (start, until),
        )
        return int(files), int(size), int(gz_size)

    async def archived_by_day(self, since: int) -> list[tuple[int, int, int]]:
        """(UTC day number, bytes, gz bytes) of the entries archived each day from
        ``since`` (ms) on, in day order; days with none left out. Every entry
        counts, whatever became of it since (restored, expired): it was archived
        that day."""
        rows = await self.rows(
            f"SELECT archived_at / {DAY_MS} AS day, sum(bytes), sum(gz_bytes) FROM entries "
            "WHERE archived_at >= ? GROUP BY day ORDER BY day",
            [since],
        )
        return [(int(d), int(b), int(g)) for d, b, g in rows]

    async def members_of(self, gz_paths: Sequence[str]) -> list[tuple[str, int, str, str]]:
        """(gz path, entry id, unit, relpath) of every entry in the archive files
        ``gz_paths``: a bundle's every member."""
        found: list[tuple[str, int, str, str]] = []
        for start in range(0, len(gz_paths), IDS_PER_STATEMENT):
            chunk = gz_paths[start : start + IDS_PER_STATEMENT]
            marks = ",".join("?" * len(chunk))
            rows = await self.rows(
                f"SELECT gz_path, id, unit, relpath FROM entries WHERE gz_path IN ({marks})", chunk
            )
            found += [(r[0], r[1], r[2], r[3]) for r in rows]
        return found

    async def past_retention(
        self, cutoffs: Mapping[str, int], otherwise: int | None
    ) -> list[ArchiveFile]:
        """The archive files (with an entry not expired) every entry of which has
        an mtime at or before its unit's cutoff (ns: ``cutoffs[unit]``, else
        ``otherwise``; a unit with neither has none), in path order: what
        retention lets go. Decided in SQL, so an archive of millions of entries
        costs one scan, not a row each in memory."""
        cases = "".join(" WHEN ? THEN ?" for _ in cutoffs)
        cutoff = f"CASE unit{cases} ELSE ? END" if cutoffs else "?"
        params = [*(v for pair in cutoffs.items() for v in pair), otherwise]
        newest = max([*cutoffs.values(), otherwise or 0])
        # One scan of the table finds the files with an entry old enough (no
        # index has mtimes; the status index would cost a lookup per entry:
        # two minutes at 10,000,000), then each one's entries by its path.
        rows = await self.rows(
            "WITH due(gz_path) AS (SELECT DISTINCT gz_path FROM entries NOT INDEXED "
            f"WHERE mtime_ns <= ? AND {_NOT_EXPIRED}), "
            "files AS (SELECT e.gz_path, e.unit, count(*) AS n, max(e.mtime_ns) AS newest, "
            "sum(e.gz_bytes) AS size, max(e.member_offset IS NOT NULL) AS bundled "
            "FROM due CROSS JOIN entries AS e INDEXED BY entries_location USING (gz_path) "
            f"WHERE e.{_NOT_EXPIRED} GROUP BY e.gz_path "
            f"HAVING min(coalesce(e.mtime_ns <= {cutoff}, 0))) "
            "SELECT f.gz_path, f.unit, n, newest, size, bundled, r.bytes, "
            "r.local_gone_at IS NOT NULL, r.retain_until, r.shipped_at FROM files AS f "
            "LEFT JOIN remote_objects AS r ON r.path = f.gz_path ORDER BY f.gz_path",
            [newest, *params],
        )
        return [
            ArchiveFile(r[0], r[1], r[2], r[3], r[4], bool(r[5]), r[6], bool(r[7]), r[8], r[9])
            for r in rows
        ]
