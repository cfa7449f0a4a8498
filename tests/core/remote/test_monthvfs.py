"""A month snapshot read in place through the remote VFS, from a real folder
remote: the rows are the database's; a lookup fetches no more than twice the
pages SQLite reads, a scan few GETs for the whole object; an object of another
size than the manifest records is refused, named; nothing can be written."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coldkeep.core.base.config import RemoteSettings
from coldkeep.core.base.errors import RemoteError
from coldkeep.core.remote.monthvfs import PAGE, RemoteMonths, _MonthFile, _Object

PATH = "events/2025-03.0123456789ab.db"
ROWS = 50_000


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    folder = tmp_path / "remote"
    db = folder / "web-1" / PATH
    db.parent.mkdir(parents=True)
    with sqlite3.connect(db) as con:
        con.execute("PRAGMA journal_mode = WAL")  # as a snapshot of a month is
        con.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, ts INTEGER, payload TEXT)")
        con.executemany(
            "INSERT INTO events VALUES (?, ?, ?)",
            ((i, i * 1000, f"payload {i:08d} " * 3) for i in range(1, ROWS + 1)),
        )
    with sqlite3.connect(db) as con:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for side in db.parent.glob("*.db-*"):
        side.unlink()
    return folder


@pytest.fixture
def reader(remote: Path) -> Iterator[RemoteMonths]:
    months = RemoteMonths(RemoteSettings(remote.as_uri(), site="web-1"))
    try:
        yield months
    finally:
        months.close()


def _attached(reader: RemoteMonths, remote: Path) -> apsw.Connection:
    size = (remote / "web-1" / PATH).stat().st_size
    con = apsw.Connection(":memory:", flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_URI)
    con.execute("ATTACH ? AS m", (reader.attach_uri("2025-03", PATH, size),))
    return con


def test_a_lookup_fetches_at_most_twice_the_pages_it_reads(
    reader: RemoteMonths, remote: Path
) -> None:
    con = _attached(reader, remote)
    try:
        got = con.execute("SELECT * FROM m.events WHERE id = 31337").fetchall()
    finally:
        con.close()
    assert got == [(31337, 31_337_000, "payload 00031337 " * 3)]
    assert reader.pages_read <= 5
    assert reader.fetched_bytes <= 2 * reader.pages_read * PAGE


def test_a_scan_reads_every_row_in_few_gets(reader: RemoteMonths, remote: Path) -> None:
    size = (remote / "web-1" / PATH).stat().st_size
    con = _attached(reader, remote)
    try:
        [(n, total)] = con.execute("SELECT count(*), sum(id) FROM m.events").fetchall()
    finally:
        con.close()
    assert (n, total) == (ROWS, ROWS * (ROWS + 1) // 2)
    assert reader.fetched_bytes <= size
    assert reader.gets < size // PAGE // 20, "the read-ahead grew"


def test_an_object_of_another_size_than_recorded_is_refused(
    reader: RemoteMonths, remote: Path
) -> None:
    size = (remote / "web-1" / PATH).stat().st_size
    with pytest.raises(RemoteError, match=rf"{PATH}: {size} bytes where the manifest records 4096"):
        reader.attach_uri("2025-03", PATH, 4096)
    with pytest.raises(RemoteError, match="month 2025-04 is not on the remote"):
        reader.attach_uri("2025-04", "events/2025-04.000000000000.db", 4096)


def test_a_sealed_month_is_refused_in_one_line(reader: RemoteMonths) -> None:
    """Age cannot be read a page at a time: its rows come back by restore-events."""
    with pytest.raises(RemoteError) as err:
        reader.attach_uri("2025-03", f"{PATH}.0123456789ab-0a1b2c3d.age", 4096, "0123456789ab")
    said = str(err.value)
    assert f"{PATH}.0123456789ab-0a1b2c3d.age: month 2025-03 is sealed: coldkeep" in said
    assert "--month 2025-03 --identity FILE" in said and "\n" not in said
    assert reader.gets == 0


def test_nothing_can_be_written(reader: RemoteMonths, remote: Path) -> None:
    before = (remote / "web-1" / PATH).read_bytes()
    con = _attached(reader, remote)
    try:
        with pytest.raises(apsw.ReadOnlyError):
            con.execute("DELETE FROM m.events WHERE id = 1")
    finally:
        con.close()
    assert (remote / "web-1" / PATH).read_bytes() == before
    assert sorted(p.name for p in (remote / "web-1" / "events").iterdir()) == [PATH[7:]]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(reads=st.lists(st.tuples(st.integers(0, 3 << 20), st.integers(1, 3 * PAGE)), max_size=30))
def test_any_read_is_the_bytes_of_the_object(
    reader: RemoteMonths, remote: Path, reads: list[tuple[int, int]]
) -> None:
    data = (remote / "web-1" / PATH).read_bytes()
    reader.attach_uri("2025-03", PATH, len(data))
    f = _MonthFile(reader, _Object(f"web-1/{PATH}", len(data)))
    for offset, amount in [*reads, *((o + a, a) for o, a in reads)]:  # each, and what follows
        assert f.xRead(amount, offset) == data[offset : offset + amount]


def test_an_object_gone_after_it_was_attached_fails_the_read_naming_it(
    reader: RemoteMonths, remote: Path
) -> None:
    con = _attached(reader, remote)
    (remote / "web-1" / PATH).unlink()
    try:
        with pytest.raises(
            RemoteError, match=rf"{PATH}: not there \(run coldkeep verify --remote\)"
        ):
            con.execute("SELECT count(*) FROM m.events").fetchall()
    finally:
        con.close()
