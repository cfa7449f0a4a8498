"""The lake's table definitions (``coldkeep lake ddl``): SQL that makes the
fleet's lake (lakelayout.py) a table in Athena, Trino (its Hive connector),
Spark or DuckDB, partitioned by ``site`` and ``month`` from the keys.

Each definition makes two things in the schema named (``coldkeep``):

- ``events_all``: every Parquet file under ``lake/events/``;
- ``events``: a view of it that reads, per site and month, only the file of
  the newest generation (the file name's ``g<13 digits>``; the sha after it
  breaks a tie, as ``lakelayout.newest`` does). A month exported again gets
  a new file beside the old one, deleted only once the new one is recorded:
  for those seconds ``events_all`` counts the month twice, ``events`` once.

The columns are one lake file's (the newest written: its footer read, that
file alone), or, before any site has exported, those the site's events table
would give (``lakelayout.column_type``), and ``coldkeep_raw``. Athena projects
``site`` from the sites the listing found (an enum: a query may then span every
site; a new site means the definition again) and ``month`` as a date.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..base.config import Settings
from ..base.configremote import RemoteSettings
from ..base.errors import ColdkeepError
from ..events.eventschema import discover, open_live
from ..events.laketypes import columns_of
from ..events.queryterms import sql_text
from .connect import connected
from .lakelayout import EVENTS, RAW
from .lakequery import HIVE_TYPES, file_columns, file_url, listed, s3_options

DdlEngine = Literal["athena", "trino", "spark", "duckdb"]
DDL_ENGINES: tuple[DdlEngine, ...] = ("athena", "trino", "spark", "duckdb")
# The file name's generation and sha, which order a month's files as
# lakelayout.newest does (13 digits: text order is number order). No
# backslash: Spark's string literals would take it as an escape.
GENERATION = "/g([0-9]{13}-[0-9a-f]{12})[.]parquet$"
# The month the projection starts at when the lake has none yet.
FIRST_MONTH = "2000-01"
# DuckDB's type of a lake column -> Athena's (Hive DDL), Trino's, Spark's.
_TYPES: dict[str, tuple[str, str, str]] = {
    "BIGINT": ("bigint", "bigint", "BIGINT"),
    "INTEGER": ("int", "integer", "INT"),
    "SMALLINT": ("smallint", "smallint", "SMALLINT"),
    "DOUBLE": ("double", "double", "DOUBLE"),
    "FLOAT": ("float", "real", "FLOAT"),
    "BOOLEAN": ("boolean", "boolean", "BOOLEAN"),
    "VARCHAR": ("string", "varchar", "STRING"),
    "BLOB": ("binary", "varbinary", "BINARY"),
    "DATE": ("date", "date", "DATE"),
}


class LakeDdlError(ColdkeepError):
    """The lake's definition cannot be written; the message says why."""


@dataclass(frozen=True)
class LakeTable:
    """What a definition is made from: where the lake is (``url`` as Athena,
    Trino and Spark name it, ``duck`` as DuckDB reads it), the files' columns
    (name, DuckDB's type), the sites and first month the listing found, and
    where the columns were read."""

    url: str
    duck: str
    columns: tuple[tuple[str, str], ...]
    sites: tuple[str, ...]
    first_month: str | None
    source: str
    secret: str | None = None  # DuckDB's secret for the bucket (None: a folder)


async def lake_table(remote: RemoteSettings, settings: Settings | None) -> LakeTable:
    """The lake under ``remote`` as one listing finds it; its columns from the
    newest file written, else from ``settings``' events table."""
    async with connected(remote) as store:
        lake = await listed(store)
    url = remote.folder.as_uri() + "/" + EVENTS if remote.folder else file_url(remote, EVENTS)
    where = (url, file_url(remote, EVENTS))
    secret = None if remote.folder else _duck_secret(remote)
    if lake.files:
        latest = max(lake.files, key=lambda f: (f.name.generation, f.name.key))
        columns = await file_columns(remote, latest.name.key)
        source = lake.where + latest.name.key.removeprefix(EVENTS)
        return LakeTable(*where, tuple(columns), lake.sites, lake.months[0], source, secret)
    if settings is None or settings.state_db is None:
        raise LakeDdlError(
            f"no site has a lake under {lake.where} yet, and no coldkeep.toml names an events "
            "table to take the columns from: give the site's --config, or run coldkeep lake "
            "export on a site first"
        )
    sites = (settings.remote.site,) if settings.remote is not None else ()
    source = f"{settings.state_db}'s table {settings.events.table} (no lake file yet)"
    return LakeTable(*where, tuple(table_columns(settings)), sites, None, source, secret)


def _duck_secret(remote: RemoteSettings) -> str:
    """DuckDB's secret for the bucket, its credentials from the AWS chain of
    whoever runs the SQL (the aws extension's ``credential_chain``)."""
    options = {"TYPE": "s3", "PROVIDER": "credential_chain", **s3_options(remote, remote.region)}
    said = ", ".join(f"{k} {v}" for k, v in options.items())
    return f"CREATE OR REPLACE SECRET coldkeep_lake ({said});"


def table_columns(settings: Settings) -> list[tuple[str, str]]:
    """The columns a site's lake files have: its events table's, typed as the
    export types them, and ``coldkeep_raw``."""
    db = settings.state_db
    assert db is not None
    live = open_live(db, busy_timeout_s=settings.events.busy_timeout_ms / 1000, readonly=True)
    try:
        cols = columns_of(live, discover(live, db, settings.events).table)
    finally:
        live.close()
    return [*((c.lake_name, c.lake) for c in cols), (RAW, "VARCHAR")]


def ddl(table: LakeTable, engine: DdlEngine, schema: str) -> str:
    """The statements (each ended by ``;``, with ``--`` comments) that make
    ``schema.events_all`` and ``schema.events`` in ``engine``."""
    head = [
        f"-- coldkeep's lake for {engine}: every site's event months as Parquet under",
        f"-- {table.url}, by site and month (from each key);",
        f"-- the columns as in {table.source}.",
    ]
    make = {"athena": _athena, "trino": _trino, "spark": _spark, "duckdb": _duckdb}[engine]
    return "\n".join(head + make(table, schema)) + "\n"


def _newest_note(schema: str) -> str:
    return (
        "-- While a month's new generation replaces the old one, both files are there for a few\n"
        f"-- seconds: query {schema}.events, which reads only the newest generation (the file\n"
        "-- name's g<13 digits>) of each site's month; events_all would count it twice."
    )


def _quoted(name: str, mark: str) -> str:
    return mark + name.replace(mark, mark * 2) + mark


def _typed(table: LakeTable, engine: int, mark: str) -> list[str]:
    """The files' columns as ``name type``, in the engine's types (its index
    in ``_TYPES``' tuples)."""
    out = []
    for name, duck in table.columns:
        types = _TYPES.get(duck.upper())
        if types is None:
            raise LakeDdlError(
                f"{table.source}: column {name!r} is {duck}, which coldkeep lake ddl cannot "
                "write for this engine: define that column by hand"
            )
        out.append(f"  {_quoted(name, mark)} {types[engine]}")
    return out


def _view(table: LakeTable, schema: str, path: str, mark: str) -> list[str]:
    """``schema.events`` for the engines without ``EXCLUDE``: the newest file
    of each month joined to its rows by the generation in ``path``'s name
    (an engine's file name column), the columns listed."""
    cols = ", ".join(
        f"f.{_quoted(c, mark)}" for c in ("site", "month", *(n for n, _ in table.columns))
    )
    return [
        _newest_note(schema),
        f"CREATE OR REPLACE VIEW {schema}.events AS",
        "WITH f AS (",
        f"  SELECT *, regexp_extract({path}, {sql_text(GENERATION)}, 1) AS coldkeep_gen",
        f"  FROM {schema}.events_all",
        "), newest AS (",
        "  SELECT site, month, max(coldkeep_gen) AS coldkeep_gen FROM f",
        "  WHERE coldkeep_gen <> '' GROUP BY site, month",
        ")",
        f"SELECT {cols}",
        "FROM f JOIN newest n",
        "  ON f.site = n.site AND f.month = n.month AND f.coldkeep_gen = n.coldkeep_gen;",
    ]


def _athena(table: LakeTable, schema: str) -> list[str]:
    sites = ",".join(table.sites)
    site_projection = (
        [f"  'projection.site.type' = 'enum', 'projection.site.values' = {sql_text(sites)},"]
        if sites
        # No site known: the query names its sites (WHERE site = '...').
        else ["  'projection.site.type' = 'injected',"]
    )
    first = table.first_month or FIRST_MONTH
    return [
        f"-- site is projected from the sites listed ({sites or 'none yet'}): when a site joins,",
        f"-- ALTER TABLE {schema}.events_all SET TBLPROPERTIES ('projection.site.values' = '...').",
        "-- Athena runs one statement at a time.",
        f"CREATE DATABASE IF NOT EXISTS {schema};",
        f"CREATE EXTERNAL TABLE IF NOT EXISTS {schema}.events_all (",
        ",\n".join(_typed(table, 0, "`")),
        ")",
        "PARTITIONED BY (`site` string, `month` string)",
        "STORED AS PARQUET",
        f"LOCATION {sql_text(table.url)}",
        "TBLPROPERTIES (",
        "  'projection.enabled' = 'true',",
        *site_projection,
        "  'projection.month.type' = 'date', 'projection.month.format' = 'yyyy-MM',",
        f"  'projection.month.range' = '{first},NOW', 'projection.month.interval' = '1',",
        "  'projection.month.interval.unit' = 'MONTHS',",
        "  'storage.location.template' = " + sql_text(table.url + "site=${site}/month=${month}/"),
        ");",
        *_view(table, schema, '"$path"', '"'),
    ]


def _trino(table: LakeTable, schema: str) -> list[str]:
    return [
        "-- In a catalog of Trino's Hive connector (USE hive.default, say).",
        f"CREATE SCHEMA IF NOT EXISTS {schema};",
        f"CREATE TABLE IF NOT EXISTS {schema}.events_all (",
        ",\n".join([*_typed(table, 1, '"'), '  "site" varchar', '  "month" varchar']),
        ")",
        "WITH (",
        "  format = 'PARQUET',",
        f"  external_location = {sql_text(table.url)},",
        "  partitioned_by = ARRAY['site', 'month']",
        ");",
        "-- A month is read once registered: run this after each export (from cron).",
        f"CALL system.sync_partition_metadata({sql_text(schema)}, 'events_all', 'FULL');",
        *_view(table, schema, '"$path"', '"'),
    ]


def _spark(table: LakeTable, schema: str) -> list[str]:
    # Hadoop's S3 file system is s3a:// (EMR's own reads s3:// as well).
    url = "s3a://" + table.url.removeprefix("s3://") if table.url.startswith("s3://") else table.url
    return [
        f"CREATE DATABASE IF NOT EXISTS {schema};",
        f"CREATE TABLE IF NOT EXISTS {schema}.events_all (",
        ",\n".join([*_typed(table, 2, "`"), "  `site` STRING", "  `month` STRING"]),
        ")",
        "USING parquet",
        "PARTITIONED BY (site, month)",
        f"LOCATION {sql_text(url)};",
        "-- A month is read once registered: run this after each export (from cron).",
        f"MSCK REPAIR TABLE {schema}.events_all SYNC PARTITIONS;",
        *_view(table, schema, "input_file_name()", "`"),
    ]


def _duckdb(table: LakeTable, schema: str) -> list[str]:
    files = sql_text(table.duck + "site=*/month=*/*.parquet")
    secret = (
        # A secret lasts one session: the views, as long as the database.
        ["-- The bucket's secret, needed in each session that reads the views.", table.secret]
        if table.secret
        else []
    )
    return [
        *secret,
        f"CREATE SCHEMA IF NOT EXISTS {schema};",
        f"CREATE OR REPLACE VIEW {schema}.events_all AS",
        f"SELECT * FROM read_parquet({files},",
        "  hive_partitioning = true, union_by_name = true, filename = 'coldkeep_file',",
        f"  hive_types = {HIVE_TYPES});",
        _newest_note(schema),
        f"CREATE OR REPLACE VIEW {schema}.events AS",
        "WITH f AS (",
        f"  SELECT *, regexp_extract(coldkeep_file, {sql_text(GENERATION)}, 1) AS coldkeep_gen",
        f"  FROM {schema}.events_all",
        "), newest AS (",
        "  SELECT site, month, max(coldkeep_gen) AS coldkeep_gen FROM f",
        "  WHERE coldkeep_gen <> '' GROUP BY site, month",
        ")",
        "SELECT site, month, * EXCLUDE (site, month, coldkeep_file, coldkeep_gen)",
        "FROM f SEMI JOIN newest USING (site, month, coldkeep_gen);",
    ]
