"""The events table's definition as discovered, and the SQL built from it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from coldkeep.core.base.configevents import EventsSettings, TsFormat
from coldkeep.core.events.eventschema import END_S, FIRST_S, SqlCondition, discover

# Every kind of value a time stamp column can hold, the months' edges among them.
TRICKY: list[object] = [
    None, 0, 1_700_000_000, 1_700_000_000_000, -1, 1.5, float("inf"), float("-inf"),
    FIRST_S, FIRST_S - 1, END_S, END_S - 1, FIRST_S * 1000, FIRST_S * 1000 - 1,
    END_S * 1000, END_S * 1000 - 1, -(2**63), 2**63 - 1, "1700000000000", "12",
    "2020-03-04T05:06:07Z", "later", "", b"\x00", b"1700000000",
]  # fmt: skip


@pytest.mark.parametrize("declared", ["INTEGER", "REAL", "NUMERIC", "BLOB", "", "TEXT", "VARCHAR"])
@pytest.mark.parametrize("fmt", ["ms", "s", "iso"])
@pytest.mark.parametrize("indexed", [True, False])
def test_unparsable_rows_counted_by_ranges_as_by_the_expression(
    tmp_path: Path, declared: str, fmt: TsFormat, indexed: bool
) -> None:
    conn = sqlite3.connect(tmp_path / "live.db")
    conn.execute(f"CREATE TABLE events (id INTEGER PRIMARY KEY, ts {declared}, kind TEXT)")
    if indexed:
        conn.execute("CREATE INDEX events_kind_ts ON events (kind, ts)")
    rows = [(v, k) for v in TRICKY for k in ("a", "b", "c")]
    conn.executemany("INSERT INTO events (ts, kind) VALUES (?, ?)", rows)
    schema = discover(conn, tmp_path / "live.db", EventsSettings(ts_format=fmt))
    assert schema.ts_text_affinity == (declared in ("TEXT", "VARCHAR"))
    for kinds in (None, SqlCondition("kind IN (?, ?)", ["a", "c"])):
        of_kinds = f"{kinds.sql} AND " if kinds else ""
        by_expr = conn.execute(
            f"SELECT count(*) FROM events WHERE {of_kinds}{schema.unparsable_sql()}",
            kinds.params if kinds else [],
        ).fetchone()[0]
        where = schema.unparsable_of_kinds(kinds)
        by_ranges = conn.execute(f"SELECT count(*) FROM events WHERE {where.sql}", where.params)
        assert by_ranges.fetchone()[0] == by_expr > 0
