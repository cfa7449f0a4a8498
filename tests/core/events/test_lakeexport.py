"""An event month written as Parquet for the fleet's lake (core/events/lakeexport.py):
whatever its rows hold — NULLs, BLOBs, the largest integers, text that is not
UTF-8, a value of another type than its column declares, ISO time stamps —
every row comes back from the Parquet equal to the SQLite month's, read by
DuckDB and by pyarrow (an independent reader), each value either in its
typed column or in ``coldkeep_raw``."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coldkeep.core.events.eventschema import q
from coldkeep.core.events.lakeexport import write_parquet
from coldkeep.core.events.laketypes import RAW, column_type, lake_names

# Declared types as applications write them: each affinity, and NUMERIC's
# date, boolean and decimal spellings.
DECLS = ["INTEGER", "TEXT", "REAL", "BLOB", "", "DATETIME", "BOOLEAN", "NUMERIC", "VARCHAR(20)"]
# Column names as applications give them, the lake's own names among them.
NAMES = st.sampled_from(
    ["c", "kind", "site", "MONTH", "coldkeep_raw", "app_site", "APP_month", "a b", 'q"t', "é", "ts"]
)
INT64 = st.integers(-(2**63), 2**63 - 1)
TEXTS = st.text(max_size=12)
NOT_UTF8 = st.binary(min_size=1, max_size=8).filter(lambda b: not _utf8(b))
# A value as SQLite will hold it: (typeof, Python value); text that is not
# UTF-8 is inserted as CAST(blob AS TEXT).
VALUES = st.one_of(
    st.just(("null", None)),
    INT64.map(lambda v: ("integer", v)),
    st.floats(allow_nan=False).map(lambda v: ("real", v)),
    TEXTS.map(lambda v: ("text", v.encode())),
    NOT_UTF8.map(lambda v: ("text", v)),
    st.binary(max_size=12).map(lambda v: ("blob", v)),
    st.sampled_from(["2026-03-14T09:26:53.589Z", "2026-03-14 09:26:53"]).map(
        lambda v: ("text", v.encode())
    ),
)


def _utf8(b: bytes) -> bool:
    try:
        b.decode()
    except UnicodeDecodeError:
        return False
    return True


def month_db(
    path: Path,
    decls: list[str],
    rows: list[list[tuple[str, Any]]],
    names: list[str] | None = None,
) -> None:
    names = names or [f"c{i}" for i in range(len(decls))]
    cols = ", ".join(f"{q(n)} {d}" for n, d in zip(names, decls, strict=True))
    with sqlite3.connect(path) as db:
        db.execute(f"CREATE TABLE events (id INTEGER PRIMARY KEY, {cols})")
        for n, row in enumerate(rows, 1):
            exprs = ["CAST(? AS TEXT)" if kind == "text" else "?" for kind, _ in row]
            db.execute(
                f"INSERT INTO events VALUES (?, {', '.join(exprs)})", [n, *[v for _, v in row]]
            )


def stored(path: Path) -> list[list[tuple[str, Any]]]:
    """Each row's values as SQLite holds them now (affinity applied): typeof and
    the value (text as its bytes)."""
    db = sqlite3.connect(path)
    try:
        names = [r[1] for r in db.execute("PRAGMA table_info(events)")]
        db.text_factory = bytes
        picks = ", ".join(f"typeof({q(n)}), {q(n)}" for n in names)
        return [
            [(row[i].decode(), row[i + 1]) for i in range(0, len(row), 2)]
            for row in db.execute(f"SELECT {picks} FROM events ORDER BY id")
        ]
    finally:
        db.close()


def from_lake(names: list[str], row: dict[str, Any], decls: list[str]) -> list[tuple[str, Any]]:
    """A Parquet row made back into SQLite's values: each typed column's, or
    ``coldkeep_raw``'s where it names the column."""
    raw = json.loads(row[RAW]) if row[RAW] is not None else {}
    out: list[tuple[str, Any]] = []
    for name, decl in zip(names, decls, strict=True):
        if name in raw:
            kind, text = raw[name]
            out.append(_raw_value(kind, text))
            continue
        assert name not in raw
        out.append(_typed_value(row[name], column_type(decl)))
    return out


def _raw_value(kind: str, text: str) -> tuple[str, Any]:
    if kind == "integer":
        return kind, int(text)
    if kind == "real":
        return kind, float(text)
    if kind == "text":
        return kind, text.encode()
    if kind == "text-bytes":
        return "text", bytes.fromhex(text)
    assert kind == "blob"
    return kind, bytes.fromhex(text)


def _typed_value(value: Any, lake: str) -> tuple[str, Any]:
    if value is None:
        return "null", None
    if lake == "BIGINT":
        return "integer", int(value)
    if lake == "DOUBLE":
        return "real", float(value)
    if lake == "VARCHAR":
        return "text", str(value).encode()
    return "blob", bytes(value)


def same(got: list[tuple[str, Any]], want: list[tuple[str, Any]]) -> bool:
    """Equal values; an integer a DOUBLE column holds exactly counts as equal
    to its float."""
    if len(got) != len(want):
        return False
    for (gk, gv), (wk, wv) in zip(got, want, strict=True):
        if gk == wk and gv == wv:
            continue
        if {gk, wk} == {"integer", "real"} and float(gv) == float(wv):
            continue
        return False
    return True


def check_both_readers(
    out: Path, db: Path, decls: list[str], given: list[str] | None = None
) -> None:
    want = stored(db)
    given = given or [f"c{i}" for i in range(len(decls))]
    names = ["id", *lake_names(given)]
    all_decls = ["INTEGER", *decls]
    con = duckdb.connect()
    cur = con.execute(f"SELECT * FROM read_parquet('{out}') ORDER BY id")
    cols = [d[0] for d in cur.description or []]
    duck = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
    arrow = sorted(pq.read_table(out).to_pylist(), key=lambda r: r["id"])
    assert cols == [*names, RAW]
    assert len(duck) == len(arrow) == len(want)
    for d, a, w in zip(duck, arrow, want, strict=True):
        assert same(from_lake(names, d, all_decls), w), (d, w)
        assert same(from_lake(names, a, all_decls), w), (a, w)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    decls=st.lists(st.sampled_from(DECLS), min_size=1, max_size=4),
    data=st.data(),
)
def test_every_row_comes_back_through_duckdb_and_pyarrow(
    tmp_path_factory: pytest.TempPathFactory, decls: list[str], data: st.DataObject
) -> None:
    tmp = tmp_path_factory.mktemp("lake")
    rows = data.draw(st.lists(st.lists(VALUES, min_size=len(decls), max_size=len(decls))))
    n = len(decls)
    names = data.draw(st.lists(NAMES, min_size=n, max_size=n, unique_by=str.lower))
    db, out = tmp / "2026-03.db", tmp / "out.parquet"
    month_db(db, decls, rows, names)
    assert write_parquet(db, "events", out, tmp / "scratch.db") == len(rows)
    check_both_readers(out, db, decls, names)


def test_a_month_of_ordinary_rows_keeps_its_types_and_no_raw(tmp_path: Path) -> None:
    """The common case goes straight through: typed columns, no scratch copy,
    ``coldkeep_raw`` NULL in every row, the ids in order."""
    db, out, scratch = tmp_path / "m.db", tmp_path / "m.parquet", tmp_path / "s.db"
    decls = ["INTEGER NOT NULL", "TEXT NOT NULL", "REAL", "BLOB"]
    rows = [
        [("integer", 2**63 - 1), ("text", b"webhook_event"), ("real", 0.1), ("blob", b"\0")],
        [("integer", -(2**63)), ("text", "é".encode()), ("null", None), ("null", None)],
    ]
    month_db(db, decls, rows)
    assert write_parquet(db, "events", out, scratch) == 2
    assert not scratch.exists()
    schema = duckdb.sql(f"DESCRIBE SELECT * FROM '{out}'").fetchall()
    assert [(c[0], c[1]) for c in schema] == [
        ("id", "BIGINT"), ("c0", "BIGINT"), ("c1", "VARCHAR"), ("c2", "DOUBLE"),
        ("c3", "BLOB"), (RAW, "VARCHAR"),
    ]  # fmt: skip
    assert duckdb.sql(f"SELECT count(*) FROM '{out}' WHERE {RAW} IS NOT NULL").fetchone() == (0,)
    check_both_readers(out, db, decls)


def test_a_value_that_does_not_fit_goes_to_raw_and_its_column_is_null(tmp_path: Path) -> None:
    db, out = tmp_path / "m.db", tmp_path / "m.parquet"
    month_db(
        db,
        ["INTEGER", "TEXT"],
        [[("text", b"soon"), ("text", b"\xffok")], [("integer", 7), ("text", b"fine")]],
    )
    write_parquet(db, "events", out, tmp_path / "s.db")
    got = duckdb.sql(f"SELECT c0, c1, {RAW} FROM '{out}' ORDER BY id").fetchall()
    assert got == [
        (None, None, json.dumps({"c0": ["text", "soon"], "c1": ["text-bytes", "ff6f6b"]})),
        (7, "fine", None),
    ]


def test_a_column_named_for_a_partition_keeps_its_values_under_another_name(
    tmp_path: Path,
) -> None:
    """Every reader fills ``site`` and ``month`` from a file's path, over any
    column of that name, and ``coldkeep_raw`` is the lake's: the application's
    own are written as ``app_site``, ``app_month`` and ``app_coldkeep_raw``."""
    db, out, scratch = tmp_path / "m.db", tmp_path / "m.parquet", tmp_path / "s.db"
    with sqlite3.connect(db) as con:
        con.execute(
            "CREATE TABLE events (id INTEGER PRIMARY KEY, site TEXT, Month INTEGER, "
            "coldkeep_raw TEXT)"
        )
        con.execute("INSERT INTO events VALUES (1, 'eu-west', 3, 'x'), (2, 'us', 4, NULL)")
    write_parquet(db, "events", out, scratch)
    assert not scratch.exists(), "straight through: every value fits"
    got = duckdb.sql(f"SELECT * FROM read_parquet('{out}', hive_partitioning = false)")
    assert got.columns == ["id", "app_site", "app_Month", "app_coldkeep_raw", RAW]
    assert got.fetchall() == [(1, "eu-west", 3, "x", None), (2, "us", 4, None, None)]
    # A value that does not fit: through the scratch copy, under the same name.
    with sqlite3.connect(db) as con:
        con.execute("INSERT INTO events VALUES (3, 'ap', 'soon', NULL)")
    out.unlink()
    write_parquet(db, "events", out, scratch)
    got = duckdb.sql(f"SELECT * FROM read_parquet('{out}', hive_partitioning = false) WHERE id = 3")
    assert got.fetchall() == [(3, "ap", None, None, json.dumps({"app_Month": ["text", "soon"]}))]


def test_a_column_already_named_app_site_keeps_its_name_and_site_moves_aside(
    tmp_path: Path,
) -> None:
    db, out = tmp_path / "m.db", tmp_path / "m.parquet"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, site TEXT, app_site TEXT)")
        con.execute("INSERT INTO events VALUES (1, 'eu', 'frankfurt')")
    write_parquet(db, "events", out, tmp_path / "s.db")
    got = duckdb.sql(f"SELECT * FROM read_parquet('{out}', hive_partitioning = false)")
    assert got.columns == ["id", "app_app_site", "app_site", RAW]
    assert got.fetchall() == [(1, "eu", "frankfurt", None)]
