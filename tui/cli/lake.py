"""``coldkeep lake``: the fleet's event months as a data lake (Parquet by site
and month under the remote's ``lake/events/``). ``lake ddl`` prints the SQL
that makes it a table in Athena, Trino, Spark or DuckDB; ``lake export``
writes this site's months shipped before the lake was enabled
(core/remote/lakebackfill.py).

The lake is found as ``coldkeep fleet`` finds a fleet (``--remote URL``) or
from the config's ``[remote]``; ``query --fleet`` takes the same options
(``remote_options``, ``lake_remote``).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.base.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, ColdkeepError
from coldkeep.core.events.query import parse_range
from coldkeep.core.remote.lakeddl import DDL_ENGINES, DdlEngine

from ..operations.spec import IDENTITY_HELP
from ..text.fmt import cut, plural
from .kit import Context, command, ctx_for, fail, fail_explained, identities_for, run_command

if TYPE_CHECKING:  # query --fleet loads this module: it must not load the ship
    from coldkeep.core.remote.lakebackfill import LakePlan
    from coldkeep.core.remote.shiprun import ShipReport

_SCHEMA = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def remote_options(fn: Callable[..., None]) -> Callable[..., None]:
    """``--remote``, ``--endpoint-url`` and ``--region``: the lake's remote
    when it is not the config's [remote]."""
    fn = click.option(
        "--region", help="With --remote: the bucket's region (default: the environment's)."
    )(fn)
    fn = click.option(
        "--endpoint-url", metavar="URL", help="With --remote: an S3-compatible endpoint."
    )(fn)
    return click.option(
        "--remote", "url", metavar="URL",
        help="The prefix the sites ship to (s3://bucket/prefix or file:///path), "
        "instead of the config's [remote].",
    )(fn)  # fmt: skip


def lake_remote(
    ctx: Context, url: str | None, endpoint: str | None, region: str | None
) -> RemoteSettings:
    """The remote the lake is under: ``--remote``'s, checked as ``coldkeep
    fleet`` checks it, else the config's [remote]. A usage error ends the
    command here."""
    if url is None:
        if endpoint is not None or region is not None:
            fail("--endpoint-url and --region go with --remote URL", EXIT_USAGE)
        if not ctx.config_path.is_file():
            fail(
                f"{ctx.config_path}: no such file to take [remote] from: give --remote URL "
                "(s3://bucket/prefix or file:///path), or --config",
                EXIT_USAGE,
            )
        try:
            remote = ctx.settings.remote
        except ColdkeepError as err:
            fail(str(err), err.exit_code)
        if remote is None:
            fail(
                f"{ctx.config_path} has no [remote]: give --remote URL (s3://bucket/prefix "
                "or file:///path)",
                EXIT_USAGE,
            )
        return remote
    from .console import fleet_remote  # noqa: PLC0415 - the fleet's checks, loaded for it

    try:
        return fleet_remote(url, endpoint, region)
    except ValueError as err:
        fail(str(err), EXIT_USAGE)


@click.group()
def lake() -> None:
    """The fleet's event months as a data lake: Parquet by site and month in the bucket."""


@lake.command(name="ddl")
@click.option(
    "--engine",
    type=click.Choice(DDL_ENGINES),
    required=True,
    help="The engine the SQL is for (Trino: its Hive connector).",
)
@click.option(
    "--schema",
    default="coldkeep",
    show_default=True,
    help="The schema (Athena's and Spark's database) the table and its view go in.",
)
@remote_options
@command(json_opt=False)
def ddl(
    engine: DdlEngine,
    schema: str,
    url: str | None,
    endpoint_url: str | None,
    region: str | None,
    config: Path | None,
) -> None:
    """Print the SQL that makes the lake a table in Athena, Trino, Spark or DuckDB.

    SCHEMA.events_all is every Parquet file, partitioned by site and month;
    SCHEMA.events, a view of it, reads only the newest generation of each
    site's month (while a month is exported again its old file lingers a few
    seconds): query the view. The columns are the newest lake file's (its
    footer alone is read) or, before any site has exported, the site's events
    table's. Athena projects site from the sites in the lake (run this again
    when one joins) and month as a date; Trino and Spark register new months
    by the statement printed (run it after exports); DuckDB finds them itself.

    \b
      coldkeep lake ddl --engine athena > lake.sql
      coldkeep lake ddl --engine duckdb --remote s3://acme-archive/coldkeep | duckdb fleet.db
    """
    ctx = ctx_for(config)
    if not _SCHEMA.fullmatch(schema):
        fail(f"--schema {schema!r}: give a plain name (letters, digits, '_')", EXIT_USAGE)
    remote = lake_remote(ctx, url, endpoint_url, region)
    from coldkeep.core.remote.lakeddl import ddl as make_ddl  # noqa: PLC0415
    from coldkeep.core.remote.lakeddl import lake_table  # noqa: PLC0415

    try:
        # The events table is the columns' source only while the lake is empty.
        settings = ctx.settings if ctx.config_path.is_file() else None
        table = asyncio.run(lake_table(remote, settings))
        click.echo(make_ddl(table, engine, schema), nl=False)
    except Exception as err:  # noqa: BLE001 - one line and its code, or a bug's traceback
        fail_explained(err)
    raise SystemExit(EXIT_OK)


def _plan_text(plan: LakePlan) -> str:
    if not plan.months:
        return f"the lake has every shipped month in range ({plan.current}): nothing to do"
    here = sum(m.here for m in plan.months)
    lines = [
        f"{plural(len(plan.months), 'shipped month')} to write to the lake: {here} from "
        f"the database here, {len(plan.months) - here} from its snapshot in the bucket"
        f" ({plan.current} already there); coldkeep lake export --yes writes them"
    ]
    lines += cut(
        [
            f"  {m.month}  ({'rows not counted' if m.rows is None else plural(m.rows, 'row')}; "
            f"from {'here' if m.here else 'the bucket'})"
            for m in plan.months
        ]
    )
    return "\n".join(lines)


def _report_text(r: ShipReport) -> str:
    lines = [f"{plural(r.lake, 'month')} written to the lake"]
    if r.lake_deleted:
        lines[0] += f"; {plural(r.lake_deleted, 'superseded file')} deleted"
    lines += r.notices
    lines += [f"PROBLEM: {p}" for p in r.problems]
    return "\n".join(lines)


@lake.command(name="export")
@click.option("--from", "start", metavar="YYYY-MM", help="Months from this one.")
@click.option("--to", "end", metavar="YYYY-MM", help="Months through this one.")
@click.option("--yes", is_flag=True, help="Write them (without it: the plan only).")
@click.option("--identity", type=click.Path(path_type=Path), metavar="FILE", help=IDENTITY_HELP)
@command()
def export(
    start: str | None,
    end: str | None,
    yes: bool,
    identity: Path | None,
    config: Path | None,
    json_out: bool,
) -> None:
    """Write this site's shipped months the lake lacks ([lake] enabled).

    A ship writes each month it snapshots into the lake, and the months shipped
    before the lake was enabled at its next ship; this writes them now, or
    those whose export failed. Each is written from its database here when
    that is still the one shipped, else from its snapshot in the bucket (sealed:
    opened with --identity). Run again after a stop or a kill: it goes on with
    the months still missing. Without --yes: the plan only.

    \b
      coldkeep lake export --from 2025-01 --to 2025-12
      coldkeep lake export --yes
    """
    ctx = ctx_for(config, json_out)

    async def go() -> int:
        archiver = ctx.archiver()
        plan = await archiver.lake_plan(parse_range(start, end))
        if not yes or not plan.months:
            ctx.emit("lake export", True, plan.to_dict(), lambda: _plan_text(plan))
            return EXIT_OK
        archiver.sessions.identities = await asyncio.to_thread(identities_for, identity)
        report = await archiver.lake_export([m.month for m in plan.months])
        ctx.emit("lake export", not report.failed, report.to_dict(), lambda: _report_text(report))
        return EXIT_FAILED if report.failed else EXIT_OK

    run_command(go(), ctx)
