"""SQL over the fleet's lake (``coldkeep query --fleet``): every site's event
months, as the lake's Parquet files hold them (lakelayout.py), seen as one
DuckDB view, ``events``: the files' columns, and ``site`` and ``month`` from
each file's key.

A query, step by step:

1. ``lake/events/`` is listed once; per (site, month) only the file of the
   newest generation is kept (``lakelayout.newest``): a month being replaced
   is read as one file, never as two nor as half of one.
2. Sites not asked for and months outside the range are left out by their
   keys alone: such a file is never opened.
3. A DuckDB connection makes the view over exactly the files kept. Its
   extensions come from their packages only (httpfs loaded by its file, for
   an S3 remote), never downloaded; an S3 remote is read with a secret made
   from the AWS chain and the ``[remote]`` settings a ship uses.
4. Before the caller's SQL runs, the connection is locked: DuckDB may open
   the files kept and nothing else (``allowed_paths``: with access to files
   switched off and none allowed, the view could not read its own files), its
   configuration cannot be changed, and the SQL must be one SELECT that reads
   nothing but the view (duckquery's check).

Invariants:
- Nothing is written; nothing is read but the listing and the files kept.
- ``site`` and ``month`` are text whatever they look like (a site named
  ``2024`` is not a number); a row's ``coldkeep_raw`` is kept as the file has
  it (it shows a value its column's type could not carry).
- No message carries a credential: the secret's statement is never shown.
"""

from __future__ import annotations

import asyncio
import os
import urllib.parse
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.configremote import RemoteSettings
from ..base.errors import UsageError
from ..events.query import Rows, TimeRange
from ..events.queryterms import VIEW, BadQuery, QueryError, first_line, sql_text
from .connect import connected
from .lakelayout import EVENTS, LakeName, newest
from .objectstore import ObjectStore, RemoteAuthError

if TYPE_CHECKING:
    # Imported by the functions that connect: `coldkeep lake` and `query`
    # load this module's names without loading DuckDB.
    import duckdb

# The view's partition columns, from each file's key, typed here: DuckDB
# would otherwise make a site named "2024" a number.
HIVE_TYPES = "{'site': 'VARCHAR', 'month': 'VARCHAR'}"
# check_sql allows one attached database's events table; the lake attaches
# none, and no table of the caller's SQL can be named so.
_NO_TABLE = "\x00"
_CREDENTIALS = (
    "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile in ~/.aws/credentials, "
    "or run where an instance role provides them"
)


class NoLake(QueryError):
    """No site has written a lake under the remote's prefix."""

    def __init__(self, where: str) -> None:
        super().__init__(
            f"no site has a lake under {where}: set [lake] enabled = true in each site's "
            "coldkeep.toml and run coldkeep lake export there"
        )


@dataclass(frozen=True)
class LakeFile:
    """A month's file a reader reads, and its size as the listing said it."""

    name: LakeName
    size: int


@dataclass(frozen=True)
class Lake:
    """The lake as one listing found it (``where``: its ``lake/events/``): per
    site and month the file of the newest generation, by site then month."""

    where: str
    files: tuple[LakeFile, ...]

    @property
    def sites(self) -> tuple[str, ...]:
        return tuple(sorted({f.name.site for f in self.files}))

    @property
    def months(self) -> tuple[str, ...]:
        return tuple(sorted({f.name.month for f in self.files}))

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    def chosen(self, sites: Collection[str] | None, span: TimeRange) -> Lake:
        """The files of ``sites`` (None: every site) whose month lies in
        ``span``. A site the lake does not hold is a usage error; a choice
        that leaves nothing, a ``QueryError`` saying what there is."""
        unknown = sorted(set(sites or ()) - set(self.sites))
        if unknown:
            raise UsageError(
                f"--sites {','.join(unknown)}: no such site in the lake under {self.where} "
                f"(it holds {', '.join(self.sites)})"
            )
        kept = tuple(
            f
            for f in self.files
            if (sites is None or f.name.site in sites) and span.holds_month(f.name.month)
        )
        if not kept:
            months = self.months
            raise QueryError(
                f"no month of the lake under {self.where} lies in --from/--to (it holds "
                f"{months[0]} to {months[-1]})"
            )
        return Lake(self.where, kept)


async def listed(store: ObjectStore) -> Lake:
    """The lake under ``store``'s prefix, from one listing of ``lake/events/``."""
    sizes = {info.key: info.size async for info in store.list_objects(EVENTS)}
    best = newest(sizes)
    files = tuple(LakeFile(name, sizes[name.key]) for _, name in sorted(best.items()))
    return Lake(store.where(EVENTS), files)


def file_url(remote: RemoteSettings, key: str) -> str:
    """The name DuckDB reads the object ``key`` (under the remote's prefix)
    by: a path for a folder, an ``s3://`` URL for a bucket."""
    folder = remote.folder
    if folder is not None:
        return os.path.join(folder, key)  # a key's trailing "/" kept: a folder's
    bucket, _, prefix = remote.url.removeprefix("s3://").partition("/")
    prefix = prefix.strip("/")
    return f"s3://{bucket}/{prefix + '/' if prefix else ''}{key}"


def httpfs_extension() -> Path:
    """DuckDB's S3 reader for this DuckDB, from its package."""
    from ..events.duckquery import packaged  # noqa: PLC0415 - DuckDB loads only for a read

    return packaged("duckdb_extension_httpfs", "DuckDB's S3 reader")


async def s3_secret(remote: RemoteSettings) -> str:
    """The ``CREATE SECRET`` statement that lets DuckDB read ``remote``'s
    bucket: the AWS chain's credentials as botocore resolves them for a
    ship, the region and endpoint of ``[remote]``. The statement holds the
    secret: never show it."""
    from botocore.exceptions import BotoCoreError  # noqa: PLC0415 - the S3 client's, on first use

    from .s3store import shared_session  # noqa: PLC0415

    session = shared_session()
    try:
        found = await session.get_credentials()
        creds = await found.get_frozen_credentials() if found is not None else None
    except BotoCoreError as err:
        raise RemoteAuthError(
            f"{remote.url}: the AWS credentials could not be read ({type(err).__name__}; "
            f"{_CREDENTIALS})"
        ) from None
    if creds is None or not creds.access_key or not creds.secret_key:
        raise RemoteAuthError(f"{remote.url}: no AWS credentials found ({_CREDENTIALS})")
    region = remote.region or session.get_config_variable("region") or "us-east-1"
    parts = {
        "TYPE": "s3",
        "KEY_ID": sql_text(creds.access_key),
        "SECRET": sql_text(creds.secret_key),
        **({"SESSION_TOKEN": sql_text(creds.token)} if creds.token else {}),
        **s3_options(remote, str(region)),
    }
    return "CREATE SECRET coldkeep_lake (" + ", ".join(f"{k} {v}" for k, v in parts.items()) + ")"


def s3_options(remote: RemoteSettings, region: str | None) -> dict[str, str]:
    """A DuckDB S3 secret's options (each a SQL value) that say where
    ``remote``'s bucket is, as the ship reaches it."""
    parts = {"REGION": sql_text(region)} if region else {}
    if remote.endpoint_url:  # MinIO, moto, R2...: addressed by path, as the ship does
        endpoint = urllib.parse.urlsplit(remote.endpoint_url)
        parts["ENDPOINT"] = sql_text(endpoint.netloc)
        parts["URL_STYLE"] = "'path'"
        parts["USE_SSL"] = "true" if endpoint.scheme == "https" else "false"
    return parts


def connect(secret: str | None) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection configured as the events query's (duckquery.py):
    no extension downloaded or loaded on its own, no spill to disk, a core
    left to the application; with ``secret``, the S3 reader loaded from its
    package and the secret made."""
    import duckdb  # noqa: PLC0415

    from ..events.duckquery import CONFIG  # noqa: PLC0415

    # Its temp_directory "" matters here too: with access to files off,
    # DuckDB would allow its temp folder beside the files on its own.
    con = duckdb.connect(config=CONFIG)
    try:
        con.execute("SET TimeZone = 'UTC'")  # times shown as every other coldkeep time is
        if secret is not None:
            con.execute(f"LOAD {sql_text(str(httpfs_extension()))}")
            try:
                con.execute(secret)
            except duckdb.Error:
                # DuckDB's message may quote the statement, and the statement
                # holds the credentials.
                raise QueryError("DuckDB refused the S3 settings of [remote]") from None
    except BaseException:
        con.close()
        raise
    return con


def lock(con: duckdb.DuckDBPyConnection, urls: Sequence[str]) -> None:
    """From now on ``con`` opens ``urls`` and nothing else, and no setting of
    it changes. Access to files switched off alone would stop the view's own
    reads (DuckDB checks each file as it opens it, at every query)."""
    con.execute("SET allowed_paths = ?", [list(urls)])
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


def make_view(con: duckdb.DuckDBPyConnection, urls: Sequence[str]) -> None:
    """``events`` over ``urls``: ``site`` and ``month`` first (from the keys),
    then the files' columns matched by name (a site whose table has a column
    more or less than another's reads NULL where it has none)."""
    files = "[" + ", ".join(sql_text(u) for u in urls) + "]"
    con.execute(
        f"CREATE TEMP VIEW {VIEW} AS SELECT site, month, * EXCLUDE (site, month) "
        f"FROM read_parquet({files}, hive_partitioning = true, union_by_name = true, "
        f"hive_types = {HIVE_TYPES})"
    )


class LakeQuery:
    """The lake's files chosen, the view made over them, locked: read by
    ``run`` any number of times, then ``close``."""

    def __init__(self, lake: Lake, con: duckdb.DuckDBPyConnection) -> None:
        self.lake = lake
        self.con: duckdb.DuckDBPyConnection | None = con

    def run(self, sql: str) -> Rows:
        """The rows of ``sql`` (one SELECT over ``events``), streamed."""
        import duckdb  # noqa: PLC0415

        from ..events.duckquery import check_sql  # noqa: PLC0415

        con = self.con
        assert con is not None, "closed"
        try:
            check_sql(con, sql, (), _NO_TABLE)
        except BadQuery as err:
            said, sep, _ = str(err).partition(": a query reads")
            if not sep:
                raise
            raise BadQuery(
                f"{said}: a fleet query reads the events view (the lake's months chosen) "
                "and nothing else"
            ) from None
        try:
            cur = con.execute(sql)
        except duckdb.Error as err:
            raise QueryError(f"the query failed: {first_line(err)}") from None
        columns = [d[0] for d in (cur.description or [])]

        def fetch(size: int) -> list[tuple[Any, ...]]:
            try:
                return cur.fetchmany(size)
            except duckdb.Error as err:  # met as the scan goes on
                raise QueryError(f"the query failed: {first_line(err)}") from None

        return Rows(columns, fetch)

    def close(self) -> None:
        if self.con is not None:
            self.con.close()
            self.con = None


def opened(remote: RemoteSettings, lake: Lake, secret: str | None) -> duckdb.DuckDBPyConnection:
    """A locked connection whose view reads ``lake``'s files (each file's
    footer is read here, to bind the view's columns)."""
    import duckdb  # noqa: PLC0415

    urls = [file_url(remote, f.name.key) for f in lake.files]
    con = connect(secret)
    try:
        make_view(con, urls)
        lock(con, urls)
    except duckdb.Error as err:
        con.close()
        raise QueryError(f"the lake under {lake.where} cannot be read: {first_line(err)}") from None
    except BaseException:
        con.close()
        raise
    return con


async def open_query(
    remote: RemoteSettings, sites: Collection[str] | None, span: TimeRange
) -> LakeQuery:
    """The fleet's lake under ``remote`` ready for SQL: listed once, the
    newest file of each month of ``sites`` (None: all) in ``span`` chosen."""
    async with connected(remote) as store:
        lake = await listed(store)
    if not lake.files:
        raise NoLake(lake.where)
    chosen = lake.chosen(sites, span)
    secret = None if remote.folder is not None else await s3_secret(remote)
    con = await asyncio.to_thread(opened, remote, chosen, secret)
    return LakeQuery(chosen, con)


async def file_columns(remote: RemoteSettings, key: str) -> list[tuple[str, str]]:
    """The columns (name, DuckDB's type) of the lake's file ``key``, from its
    footer: a connection that may open that file alone."""
    secret = None if remote.folder is not None else await s3_secret(remote)
    url = file_url(remote, key)

    def described() -> list[tuple[str, str]]:
        import duckdb  # noqa: PLC0415

        con = connect(secret)
        try:
            lock(con, [url])
            rows = con.execute(
                f"DESCRIBE SELECT * FROM read_parquet({sql_text(url)}, hive_partitioning = false)"
            ).fetchall()
        except duckdb.Error as err:
            raise QueryError(f"{url}: cannot be read as Parquet: {first_line(err)}") from None
        finally:
            con.close()
        return [(str(r[0]), str(r[1])) for r in rows]

    return await asyncio.to_thread(described)
