"""An event month's database written as one Parquet file (zstd) for the fleet's
lake: the events table's columns typed from their declared types
(``column_type``; one named ``site`` or ``month`` as ``app_site``,
``app_month``: the partitions' names), in id order, and ``coldkeep_raw``.

Two ways, one result. Most months go straight through DuckDB's SQLite reader
(the ``sqlite_scanner`` extension, loaded from its package): when every column
is declared INTEGER, TEXT, REAL or BLOB and SQLite's ``typeof`` finds every
value of that type (or NULL), the reader carries each exactly. Otherwise (a
value of another type than its column declares or text that is not UTF-8,
which the reader refuses, converts or passes on into a file no reader
accepts; a column declared DATETIME, BOOLEAN or NUMERIC, which it would
convert) the rows are first copied into a scratch SQLite database whose
columns are declared as the lake types, each value that type cannot carry
exactly left NULL there and written into the row's ``coldkeep_raw`` (a JSON
object: column -> [SQLite type, value as text; hex for a BLOB and for text
that is not UTF-8, its type then ``text-bytes``]), then read the same way.

Invariants:
- Nothing is lost: every row, and every value either in its column, equal to
  the month's, or in ``coldkeep_raw`` (a test compares them both ways, through
  DuckDB and through pyarrow).
- The month's database is only read (attached read-only); the scratch copy
  and the Parquet file are the caller's paths, written whole before it returns.
- What the direct way writes is read back (its rows counted, its text decoded)
  before it is returned; a file that does not read back is written the other way.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from .duckquery import CONFIG, extension
from .eventschema import q
from .laketypes import DECLARED, RAW, Column, ExportFailed, affinity, columns_of
from .queryterms import sql_text

_BATCH = 10_000
_FLOAT_EXACT = 1 << 53  # an integer a DOUBLE holds exactly


def write_parquet(month: Path, table: str, out: Path, scratch: Path) -> int:
    """The rows of ``table`` in the month database ``month`` written to ``out``
    (new), through ``scratch`` (a new scratch path, left for the caller to
    remove) when they need it; how many rows. ``ExportFailed`` says why not."""
    try:
        return _write(month, table, out, scratch)
    except (sqlite3.Error, duckdb.Error) as err:
        raise ExportFailed(f"{month}: cannot be written as Parquet: {err}") from err


def _write(month: Path, table: str, out: Path, scratch: Path) -> int:
    with _reading(month) as src:
        cols = columns_of(src, table)
        exact = _exact(src, table, cols)
    if exact:
        try:
            rows = _copy(month, table, cols, out, raw=False)
            _read_back(out, cols, rows)
            return rows
        except duckdb.Error:  # a value the reader refuses (see _exact)
            out.unlink(missing_ok=True)
    with _reading(month) as src:
        _normalised(src, table, cols, scratch)
    lake_cols = [Column(c.lake_name, DECLARED[c.lake], c.lake_name) for c in cols]
    return _copy(scratch, table, lake_cols, out, raw=True)


@contextmanager
def _reading(db: Path) -> Iterator[sqlite3.Connection]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        yield con
    finally:
        con.close()


def _exact(db: sqlite3.Connection, table: str, cols: Sequence[Column]) -> bool:
    """Whether DuckDB's reader carries every value of the month exactly as its
    column's lake type, or refuses the month: it refuses a value of another
    type in an INTEGER, TEXT or REAL column, and text that is not UTF-8, but
    turns any value of a BLOB column into bytes (3 into b'3'), so those are
    looked at first."""
    if any(DECLARED[c.lake] != affinity(c.declared) for c in cols):
        return False
    blobs = [c for c in cols if c.lake == "BLOB"]
    if not blobs:
        return True
    odd = " OR ".join(f"typeof({q(c.name)}) NOT IN ('blob', 'null')" for c in blobs)
    [(none,)] = db.execute(f"SELECT NOT EXISTS (SELECT 1 FROM {q(table)} WHERE {odd})")
    return bool(none)


def _copy(db: Path, table: str, cols: Sequence[Column], out: Path, *, raw: bool) -> int:
    con = duckdb.connect(config=CONFIG)
    try:
        con.execute(f"LOAD {sql_text(str(extension()))}")
        con.execute(f"ATTACH {sql_text(str(db))} AS m (TYPE sqlite, READ_ONLY)")
        picks = [f"CAST({q(c.name)} AS {c.lake}) AS {q(c.lake_name)}" for c in cols]
        picks.append(f"{q(RAW)}" if raw else f"CAST(NULL AS VARCHAR) AS {q(RAW)}")
        # In the table's order (its rowid's): COPY keeps the order it reads in.
        [(rows,)] = con.execute(
            f"COPY (SELECT {', '.join(picks)} FROM m.{q(table)}) TO {sql_text(str(out))} "
            "(FORMAT parquet, COMPRESSION zstd)"
        ).fetchall()
        return int(rows)
    finally:
        con.close()


def _read_back(out: Path, cols: Sequence[Column], rows: int) -> None:
    """The Parquet read back: its rows counted, every text value decoded.
    DuckDB's SQLite reader refuses some text that is not UTF-8 and passes
    other such text on (a lone 0x80), which its Parquet reader refuses:
    ``duckdb.Error`` for any."""
    texts = [f"sum(length({q(c.lake_name)}))" for c in cols if c.lake == "VARCHAR"]
    with duckdb.connect(config=CONFIG) as con:
        [(got, *_)] = con.execute(
            f"SELECT count(*), {', '.join(texts) or 'NULL'} FROM read_parquet({sql_text(str(out))})"
        ).fetchall()
    if got != rows:
        raise duckdb.InvalidInputException(f"{out}: {got} rows read back, {rows} written")


def _normalised(src: sqlite3.Connection, table: str, cols: Sequence[Column], scratch: Path) -> None:
    """The month's rows copied into ``scratch`` (a new database) with every
    column named and declared as the lake's: a value its type cannot carry
    exactly left NULL and put in the row's ``coldkeep_raw``."""
    dst = sqlite3.connect(scratch)
    try:
        decls = ", ".join(f"{q(c.lake_name)} {DECLARED[c.lake]}" for c in cols)
        dst.execute(f"CREATE TABLE {q(table)} ({decls}, {q(RAW)} TEXT)")
        marks = ", ".join("?" * (len(cols) + 1))
        insert = f"INSERT INTO {q(table)} VALUES ({marks})"
        for batch in _rows(src, table, cols):
            dst.executemany(insert, batch)
        dst.commit()
    finally:
        dst.close()


def _rows(
    src: sqlite3.Connection, table: str, cols: Sequence[Column]
) -> Iterator[list[tuple[Any, ...]]]:
    """The month's rows, a batch at a time, each made fit for its lake type."""
    src.text_factory = bytes  # text as stored: whether it is UTF-8 is checked here
    picks = ", ".join(f"{q(c.name)}, typeof({q(c.name)})" for c in cols)
    cur = src.execute(f"SELECT {picks} FROM {q(table)}")
    lakes = [c.lake for c in cols]
    while batch := cur.fetchmany(_BATCH):
        out = []
        for row in batch:
            values: list[Any] = []
            odd: dict[str, list[str]] = {}
            for i, lake in enumerate(lakes):
                value, kind = row[2 * i], row[2 * i + 1].decode()
                fit = _fit(value, kind, lake)
                if fit is _ODD:
                    odd[cols[i].lake_name] = _as_raw(value, kind)
                    fit = None
                values.append(fit)
            values.append(json.dumps(odd, sort_keys=True) if odd else None)
            out.append(tuple(values))
        yield out


_ODD = object()


def _fit(value: Any, kind: str, lake: str) -> Any:
    """``value`` (of SQLite type ``kind``) as the lake column ``lake`` holds
    it, or ``_ODD`` when that column cannot hold it exactly."""
    if kind == "null":
        return None
    if lake == "BIGINT":
        return value if kind == "integer" else _ODD
    if lake == "DOUBLE":
        if kind == "real":
            return value
        return float(value) if kind == "integer" and abs(value) <= _FLOAT_EXACT else _ODD
    if lake == "VARCHAR":
        if kind != "text":
            return _ODD
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return _ODD
    return value if kind == "blob" else _ODD


def _as_raw(value: Any, kind: str) -> list[str]:
    """A value ``coldkeep_raw`` keeps: its SQLite type and text that gives it
    back exactly (text that is not UTF-8: type ``text-bytes``, in hex)."""
    if kind == "blob":
        return [kind, bytes(value).hex()]
    if kind == "text":
        try:
            return [kind, value.decode("utf-8")]
        except UnicodeDecodeError:
            return ["text-bytes", bytes(value).hex()]
    return [kind, repr(value)]
