"""Two sites ship to one bucket (moto's S3 server) with the lake on; two
independent readers of the lake — DuckDB through ``query --fleet``'s engine,
and pyarrow's dataset reader over S3 — each give back every site's months row
for row as the SQLite months hold them, each month once even while one is
being replaced."""

from __future__ import annotations

import sqlite3
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pyarrow.fs as pafs

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.config import load_settings
from coldkeep.core.base.configlake import LakeSettings
from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.base.stream import EventStream
from coldkeep.core.events.query import parse_range
from coldkeep.core.ops.demo import write_demo
from coldkeep.core.remote.lakelayout import newest
from coldkeep.core.remote.lakequery import open_query

from s3kit import S3Site

PREFIX = "fleet"
COLUMNS = ("id", "ts", "kind", "unit", "payload")


def shipped_site(tmp: Path, s3: S3Site, name: str, seed: int) -> Archiver:
    config = write_demo(tmp / name, seed=seed, scale=0.02).config
    remote = RemoteSettings(
        f"s3://{s3.bucket}/{PREFIX}", endpoint_url=s3.endpoint, region="us-east-1", site=name,
        keep_local_days=-1,
    )  # fmt: skip
    settings = replace(load_settings(config), remote=remote, lake=LakeSettings(True))
    return Archiver(settings, stream=EventStream(), clock=lambda: int(time.time() * 1000))


def sqlite_rows(archive: Path) -> dict[tuple[str, str], list[tuple[Any, ...]]]:
    site = archive.parent.name
    found = {}
    for db in sorted((archive / "events").glob("*.db")):
        with sqlite3.connect(db) as con:
            found[(site, db.stem)] = con.execute(
                f"SELECT {', '.join(COLUMNS)} FROM events ORDER BY id"
            ).fetchall()
    return found


def pyarrow_rows(s3: S3Site) -> dict[tuple[str, str], list[tuple[Any, ...]]]:
    """The lake through pyarrow alone: its own listing, its own hive parsing,
    each month's newest file taken by its name as a reader is told to."""
    fs = pafs.S3FileSystem(
        endpoint_override=s3.endpoint, scheme="http", region="us-east-1",
        access_key=s3.server.env["AWS_ACCESS_KEY_ID"],
        secret_key=s3.server.env["AWS_SECRET_ACCESS_KEY"],
    )  # fmt: skip
    root = f"{s3.bucket}/{PREFIX}/lake/events"
    listed = [
        i.path for i in fs.get_file_info(pafs.FileSelector(root, recursive=True)) if i.is_file
    ]
    keep = {
        n.key for n in newest(p.removeprefix(f"{s3.bucket}/{PREFIX}/") for p in listed).values()
    }
    files = [f"{s3.bucket}/{PREFIX}/{k}" for k in sorted(keep)]
    table = ds.dataset(files, filesystem=fs, format="parquet", partitioning="hive",
                       partition_base_dir=root).to_table()  # fmt: skip
    found: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
    for row in sorted(table.to_pylist(), key=lambda r: (r["site"], r["month"], r["id"])):
        assert row["coldkeep_raw"] is None, row
        found.setdefault((row["site"], row["month"]), []).append(tuple(row[c] for c in COLUMNS))
    return found


async def duckdb_rows(
    remote: RemoteSettings,
) -> dict[tuple[str, str], list[tuple[Any, ...]]]:
    query = await open_query(remote, None, parse_range(None, None))
    try:
        rows = query.run(
            f"SELECT site, month, {', '.join(COLUMNS)} FROM events ORDER BY site, month, id"
        )
        assert rows.columns == ["site", "month", *COLUMNS]
        found: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
        for batch in rows.batches():
            for r in batch:
                found.setdefault((r[0], r[1]), []).append(tuple(r[2:]))
        return found
    finally:
        query.close()


async def test_duckdb_and_pyarrow_read_every_sites_months_as_sqlite_holds_them(
    tmp_path: Path, s3: S3Site
) -> None:
    sites = [shipped_site(tmp_path, s3, name, seed) for name, seed in (("web-1", 5), ("web-2", 6))]
    want: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
    for ck in sites:
        await ck.run_pass()
        assert not (await ck.ship()).problems
        want |= sqlite_rows(ck.settings.archive_root)
    # One month grows and ships again: its older file is gone by then, but a
    # reader coming between the two would see both: one is planted back.
    ck = sites[0]
    newest_db = sorted((ck.settings.archive_root / "events").glob("*.db"))[-1]
    client, bucket = s3.server.client, s3.bucket
    [old] = s3.server.list_keys(bucket, f"{PREFIX}/lake/events/site=web-1/month={newest_db.stem}/")
    old_bytes = client.get_object(Bucket=bucket, Key=old)["Body"].read()
    with sqlite3.connect(newest_db) as con:
        con.execute(
            "INSERT INTO events (ts, kind, unit, payload) "
            "SELECT ts, kind, unit, payload FROM events ORDER BY id DESC LIMIT 25"
        )
    assert (await ck.ship()).lake == 1
    client.put_object(Bucket=bucket, Key=old, Body=old_bytes)
    want |= sqlite_rows(ck.settings.archive_root)
    assert ck.settings.remote is not None
    assert await duckdb_rows(ck.settings.remote) == want
    assert pyarrow_rows(s3) == want
