"""A month snapshot read in place through the remote VFS, from a real folder
remote: the rows are the database's; a lookup fetches no more than twice the
pages SQLite reads, a scan few GETs for the whole object; an object of another
size than the manifest records is refused, named; one replaced at its key by
another of the same size, before the query or while it reads, fails it and
answers no row; nothing can be written."""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.base.errors import RemoteError
from coldkeep.core.events.query import RemoteMonth
from coldkeep.core.remote.filestore import FileStore
from coldkeep.core.remote.monthvfs import PAGE, RemoteMonths, _MonthFile
from coldkeep.core.remote.objectstore import RemoteReplaced

from s3kit import S3Site

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


def _shipped(remote: Path) -> RemoteMonth:
    """The month's snapshot as a ship records it: what the HEAD that confirmed
    it said."""
    info = asyncio.run(FileStore(remote).head(f"web-1/{PATH}"))
    assert info is not None and info.sha256 is not None
    return RemoteMonth(PATH, info.size, info.sha256, info.version)


def _attached(
    reader: RemoteMonths, remote: Path, shipped: RemoteMonth | None = None
) -> apsw.Connection:
    uri = reader.attach_uri("2025-03", shipped or _shipped(remote))
    con = apsw.Connection(":memory:", flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_URI)
    con.execute("ATTACH ? AS m", (uri,))
    return con


def _forged(remote: Path) -> Path:
    """A copy of the month with other rows, the same size: what a writer of the
    bucket could put at its key."""
    forged = remote / "forged.db"
    shutil.copyfile(remote / "web-1" / PATH, forged)
    with sqlite3.connect(forged) as con:
        con.execute("UPDATE events SET payload = replace(payload, 'payload', 'FORGED!')")
    with sqlite3.connect(forged) as con:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for side in remote.glob("forged.db-*"):
        side.unlink()
    assert forged.stat().st_size == (remote / "web-1" / PATH).stat().st_size
    return forged


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
    shipped = _shipped(remote)
    with pytest.raises(
        RemoteError, match=rf"{PATH}: {shipped.size} bytes where the manifest records 4096"
    ):
        reader.attach_uri("2025-03", replace(shipped, size=4096))
    with pytest.raises(RemoteError, match="month 2025-04 is not on the remote"):
        reader.attach_uri("2025-04", replace(shipped, path="events/2025-04.000000000000.db"))


def test_a_sealed_month_is_refused_in_one_line(reader: RemoteMonths) -> None:
    """Age cannot be read a page at a time: its rows come back by restore-events."""
    sealed = RemoteMonth(f"{PATH}.0123456789ab-0a1b2c3d.age", 4096, "0" * 64, "1:2", "0123456789ab")
    with pytest.raises(RemoteError) as err:
        reader.attach_uri("2025-03", sealed)
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
    reader.attach_uri("2025-03", _shipped(remote))
    f = _MonthFile(reader, reader.objects["2025-03"])
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


def _replace(remote: Path, how: str) -> None:
    """The month's object replaced by a forgery of the same size: another file
    renamed onto its key, or the file itself written over (its inode kept)."""
    obj = remote / "web-1" / PATH
    if how == "renamed over":
        os.replace(_forged(remote), obj)
    else:
        obj.write_bytes(_forged(remote).read_bytes())


RECORDED = pytest.mark.parametrize(
    "recorded", [True, False], ids=["version recorded", "shipped before versions"]
)


@RECORDED
def test_an_object_replaced_by_one_of_the_same_size_is_refused_before_any_page(
    reader: RemoteMonths, remote: Path, recorded: bool
) -> None:
    """Without a version recorded too: a folder's HEAD hashes the file, and its
    sha256 must be the one shipped."""
    shipped = _shipped(remote)
    _replace(remote, "renamed over")
    with pytest.raises(RemoteReplaced, match=rf"{PATH}: no longer the object shipped"):
        reader.attach_uri("2025-03", shipped if recorded else replace(shipped, version=None))
    assert reader.gets == 0


@RECORDED
@pytest.mark.parametrize("how", ["renamed over", "written in place"])
def test_an_object_replaced_while_it_is_read_fails_the_query_not_a_row_forged(
    reader: RemoteMonths, remote: Path, recorded: bool, how: str
) -> None:
    """Replaced after the month was attached and read: the next page read
    fails. Without a version recorded, the reads were pinned to the one the
    HEAD saw."""
    shipped = _shipped(remote)
    con = _attached(reader, remote, shipped if recorded else replace(shipped, version=None))
    try:
        assert con.execute("SELECT count(*) FROM m.events WHERE id < 10").fetchall() == [(9,)]
        assert reader.objects["2025-03"].version == shipped.version
        _replace(remote, how)
        with pytest.raises(RemoteReplaced):
            con.execute("SELECT payload FROM m.events WHERE payload LIKE 'FORGED%'").fetchall()
    finally:
        con.close()


def test_a_month_in_a_bucket_replaced_while_it_is_read_fails_the_query(
    remote: Path, s3: S3Site
) -> None:
    """The object put at its key after the month was attached: the next GET
    (If-Match the ETag shipped) fails; no forged row comes back."""
    key = f"p/web-1/{PATH}"
    s3.server.put_raw(s3.bucket, key, (remote / "web-1" / PATH).read_bytes())
    etag = s3.server.client.head_object(Bucket=s3.bucket, Key=key)["ETag"]
    settings = RemoteSettings(
        f"s3://{s3.bucket}/p", endpoint_url=s3.endpoint, region="us-east-1", site="web-1"
    )
    in_bucket = RemoteMonths(settings)
    try:
        con = _attached(in_bucket, remote, replace(_shipped(remote), version=etag))
        s3.server.put_raw(s3.bucket, key, _forged(remote).read_bytes())
        try:
            with pytest.raises(RemoteReplaced, match=rf"{PATH}: no longer the object shipped"):
                con.execute("SELECT payload FROM m.events WHERE payload LIKE 'FORGED%'").fetchall()
        finally:
            con.close()
    finally:
        in_bucket.close()


def test_the_same_bytes_put_again_are_still_the_snapshot_shipped(
    reader: RemoteMonths, remote: Path
) -> None:
    """A folder copied to another disk (every file a new inode): the version
    recorded is no more, the bytes' sha256 still shows the snapshot shipped."""
    shipped = _shipped(remote)
    again = remote / "again.db"
    shutil.copy2(remote / "web-1" / PATH, again)
    os.replace(again, remote / "web-1" / PATH)
    con = _attached(reader, remote, shipped)
    try:
        assert con.execute("SELECT count(*) FROM m.events").fetchall() == [(ROWS,)]
    finally:
        con.close()
    assert reader.objects["2025-03"].version != shipped.version
