"""The fleet's lake read with SQL (lakequery.py), from a folder and from S3
(moto): the newest generation of each site's month alone (a count shows the
older was not read), sites and months chosen by their keys, files read by
column name; the connection locked so that SQL reaching anything but the view
is refused in one line, and DuckDB itself opens nothing else; a one-site
one-month lookup opens one object. And the lake's definitions (lakeddl.py):
DuckDB's, run, counts what the query counts; before any export, the columns
from the site's events table."""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from pathlib import Path

import duckdb
import pytest
from hypothesis import given
from hypothesis import strategies as st

from coldkeep.core.base.config import Settings
from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.base.errors import UsageError
from coldkeep.core.events.query import TimeRange, parse_range
from coldkeep.core.events.queryterms import BadQuery, QueryError
from coldkeep.core.remote.lakeddl import DDL_ENGINES, LakeDdlError, ddl, lake_table
from coldkeep.core.remote.lakelayout import EVENTS, RAW, parse
from coldkeep.core.remote.lakequery import (
    Lake,
    LakeFile,
    LakeQuery,
    NoLake,
    open_query,
    s3_secret,
)
from coldkeep.core.remote.objectstore import RemoteAuthError

from helpers import make_events_db
from lakekit import COUNTS, GEN, LAKE, MONTHS, OLD, SITES, build, folder_put, webhooks
from s3kit import S3Site

PREFIX = "fleet"
COUNT = "SELECT site, month, count(*) FROM events GROUP BY ALL ORDER BY ALL"


@pytest.fixture
def folder(tmp_path: Path) -> RemoteSettings:
    root = tmp_path / "bucket"
    build(folder_put(root), tmp_path)
    return RemoteSettings(url=root.as_uri())


@pytest.fixture
def bucket(s3: S3Site, tmp_path: Path) -> RemoteSettings:
    build(lambda key, data: s3.server.put_raw(s3.bucket, f"{PREFIX}/{key}", data), tmp_path)
    return RemoteSettings(url=f"s3://{s3.bucket}/{PREFIX}", endpoint_url=s3.endpoint)


def opened(
    remote: RemoteSettings, sites: Collection[str] | None = None, span: TimeRange | None = None
) -> LakeQuery:
    return asyncio.run(open_query(remote, sites, span or TimeRange()))


def rows(lake: LakeQuery, sql: str) -> list[tuple[object, ...]]:
    return [r for batch in lake.run(sql).batches() for r in batch]


def counted(lake: LakeQuery) -> dict[tuple[str, str], int]:
    return {(str(s), str(m)): int(str(n)) for s, m, n in rows(lake, COUNT)}


def test_a_folder_lake_reads_each_months_newest_file_once(folder: RemoteSettings) -> None:
    lake = opened(folder)
    try:
        assert counted(lake) == COUNTS, "the older generation of 2024's March is not read"
        assert [f.name.key for f in lake.lake.files] == [m.key for m in LAKE if m is not OLD]
        got = lake.run("SELECT * FROM events LIMIT 0")
        assert got.columns[:2] == ["site", "month"] and RAW in got.columns
        # site is text though it looks like a number; the file without tenant reads NULL.
        assert rows(lake, "SELECT DISTINCT typeof(site), typeof(month) FROM events") == [
            ("VARCHAR", "VARCHAR")
        ]
        assert rows(
            lake, "SELECT site, month, count(tenant) FROM events GROUP BY ALL ORDER BY ALL"
        )[-1] == ("web-1", "2026-03", 0)
        raw = rows(lake, f"SELECT {RAW} FROM events WHERE {RAW} IS NOT NULL AND site = '2024'")
        assert len(raw) == 2 and "payload" in str(raw[0][0]), "a value kept as the file has it"
        webhook = rows(
            lake, "SELECT site, count(*) FROM events WHERE kind = 'webhook_event' "
            "AND month = '2026-03' GROUP BY site ORDER BY site",
        )  # fmt: skip
        assert webhook == [("2024", webhooks(12)), ("web-1", webhooks(9))]
    finally:
        lake.close()


def test_sites_and_months_are_chosen_by_their_keys(folder: RemoteSettings) -> None:
    lake = opened(folder, ["web-1"], parse_range("2026-03", "2026-03"))
    try:
        assert counted(lake) == {("web-1", "2026-03"): 9}
        assert len(lake.lake.files) == 1
    finally:
        lake.close()
    lake = opened(folder, None, parse_range("2026-03-14", None))  # a day: its whole month
    try:
        assert set(counted(lake)) == {(s, "2026-03") for s in SITES}
    finally:
        lake.close()
    with pytest.raises(UsageError, match=r"^--sites web-9: no such site in the lake under "):
        opened(folder, ["web-1", "web-9"])
    with pytest.raises(QueryError, match=r"lies in --from/--to \(it holds 2026-02 to 2026-03\)$"):
        opened(folder, None, parse_range("2025-01", "2025-12"))


def test_no_lake_is_one_line_naming_the_prefix_and_what_to_do(tmp_path: Path) -> None:
    remote = RemoteSettings(url=tmp_path.as_uri())
    with pytest.raises(NoLake) as err:
        opened(remote)
    said = str(err.value)
    assert "\n" not in said and f"{tmp_path.as_uri()}/{EVENTS}" in said
    assert "[lake] enabled = true" in said and "coldkeep lake export" in said


def refusals(other: str) -> list[str]:
    return [
        f"SELECT * FROM read_parquet('{other}')",
        f"SELECT * FROM '{other}'",
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM read_text('/etc/hostname')",
        "SELECT * FROM duckdb_secrets()",
        "SELECT * FROM events UNION ALL SELECT * FROM glob('/*')",
        "COPY (SELECT * FROM events) TO '/tmp/out.csv'",
        "ATTACH '/tmp/x.db' AS x",
        "SET enable_external_access = true",
        "SELECT 1; SELECT 2",
    ]


def test_sql_reaching_anything_else_is_refused_in_one_line(folder: RemoteSettings) -> None:
    folder_root = RemoteSettings(url=folder.url).folder
    assert folder_root is not None
    other = str(folder_root / LAKE[3].key)  # web-1's February, not chosen
    lake = opened(folder, ["2024"])
    try:
        for sql in refusals(other):
            with pytest.raises(BadQuery) as err:
                lake.run(sql)
            assert "\n" not in str(err.value), sql
        # Behind the check, DuckDB itself opens nothing but the files chosen,
        # and no setting of it changes.
        assert lake.con is not None
        for raw in (
            f"SELECT * FROM read_parquet('{other}')",
            "SELECT * FROM read_csv('/etc/passwd')",
        ):
            with pytest.raises(duckdb.PermissionException):
                lake.con.execute(raw)
        with pytest.raises(duckdb.InvalidInputException, match="locked"):
            lake.con.execute("SET allowed_paths = ['/']")
        allowed = "SELECT current_setting('allowed_directories')"
        assert lake.con.execute(allowed).fetchall() == [([],)], "not even a temp folder"
        assert counted(lake) == {k: v for k, v in COUNTS.items() if k[0] == "2024"}
    finally:
        lake.close()


def test_s3_lake_and_a_one_month_lookup_opens_one_object(
    bucket: RemoteSettings, s3: S3Site
) -> None:
    lake = opened(bucket)
    try:
        assert counted(lake) == COUNTS
    finally:
        lake.close()
    read = {x.path for x in s3.proxy.exchanges if x.method == "GET" and "/lake/events/" in x.path}
    assert f"/{s3.bucket}/{PREFIX}/{OLD.key}" not in read, "the older generation is not opened"
    assert len(read) == len(COUNTS)

    s3.proxy.reset_counts()
    lake = opened(bucket, ["web-1"], parse_range("2026-02", "2026-02"))
    try:
        assert counted(lake) == {("web-1", "2026-02"): 20}
        other = f"s3://{s3.bucket}/{PREFIX}/{LAKE[0].key}"
        with pytest.raises(BadQuery):
            lake.run(f"SELECT count(*) FROM read_parquet('{other}')")
        assert lake.con is not None
        with pytest.raises(duckdb.PermissionException):
            lake.con.execute(f"SELECT count(*) FROM read_parquet('{other}')")
    finally:
        lake.close()
    objects = {x.path for x in s3.proxy.exchanges if "/lake/events/" in x.path}
    assert objects == {f"/{s3.bucket}/{PREFIX}/{LAKE[3].key}"}, objects


def test_s3_without_credentials_is_one_line(
    bucket: RemoteSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    for step in (open_query(bucket, None, TimeRange()), s3_secret(bucket)):  # the listing first
        with pytest.raises(RemoteAuthError, match=r": no AWS credentials found \(set AWS_ACCESS"):
            asyncio.run(step)


def test_duckdbs_definition_counts_what_the_query_counts(folder: RemoteSettings) -> None:
    table = asyncio.run(lake_table(folder, None))
    assert table.sites == SITES and table.first_month == MONTHS[0]
    assert table.source.endswith(LAKE[2].key), "the newest file written"
    assert [n for n, _ in table.columns] == ["id", "ts", "kind", "tenant", "payload", RAW]
    con = duckdb.connect()
    try:
        con.execute(ddl(table, "duckdb", "fleet"))
        got = con.execute(COUNT.replace("events", "fleet.events")).fetchall()
        assert {(s, m): n for s, m, n in got} == COUNTS
        every = con.execute("SELECT count(*) FROM fleet.events_all").fetchall()
        assert every == [(sum(COUNTS.values()) + OLD.rows,)], "the view, not the table, is newest"
    finally:
        con.close()
    for engine in DDL_ENGINES:
        text = ddl(table, engine, "fleet")
        assert "newest generation" in text and "g<13 digits>" in text, engine
    athena = ddl(table, "athena", "fleet")
    assert "'projection.site.values' = '2024,web-1'" in athena
    assert "'projection.month.range' = '2026-02,NOW'" in athena


def test_before_any_export_the_columns_are_the_events_tables(tmp_path: Path) -> None:
    db = tmp_path / "app.db"
    make_events_db(db, 3, now_ms=GEN)
    (tmp_path / "bucket").mkdir()
    remote = RemoteSettings(url=(tmp_path / "bucket").as_uri(), site="web-7")
    settings = Settings(tmp_path / "live", tmp_path / "archive", state_db=db, remote=remote)
    table = asyncio.run(lake_table(remote, settings))
    assert table.columns == (
        ("id", "BIGINT"), ("ts", "BIGINT"), ("kind", "VARCHAR"), ("payload", "VARCHAR"),
        ("n", "DOUBLE"), (RAW, "VARCHAR"),
    )  # fmt: skip
    assert table.sites == ("web-7",) and "'projection.site.values' = 'web-7'" in ddl(
        table, "athena", "coldkeep"
    )
    with pytest.raises(LakeDdlError, match=r"no site has a lake under .* yet"):
        asyncio.run(lake_table(remote, None))


KEYS = [m.key for m in LAKE if m is not OLD]


@given(
    st.sets(st.sampled_from(SITES)) | st.none(),
    st.sampled_from([None, "2026-01", "2026-02", "2026-03"]),
    st.sampled_from([None, "2026-02", "2026-03", "2026-04"]),
)
def test_chosen_keeps_exactly_the_sites_and_months_asked(
    sites: set[str] | None, start: str | None, end: str | None
) -> None:
    lake = Lake("file:///x/lake/events/", tuple(LakeFile(n, 1) for k in KEYS if (n := parse(k))))
    try:
        span = parse_range(start, end)
    except UsageError:
        return  # --from after --to
    want = [
        k
        for k in KEYS
        if (n := parse(k))
        and (sites is None or n.site in sites)
        and (start is None or n.month >= start)
        and (end is None or n.month <= end)
    ]
    try:
        got = [f.name.key for f in lake.chosen(sites, span).files]
    except QueryError:
        got = []
    assert got == want
