"""``coldkeep query SQL``: read-only SQL over the live events table and every
archived month as one table, ``events`` (core/events/query.py). A plain
command, not a registry entry: its output is rows, streamed as they come.

Rows go to stdout as aligned text (widths from the first rows), JSON lines or
CSV; what the query read, and any month left out, to stderr. A reader that
leaves early (``| head``) ends it quietly, exit 0.

``--fleet`` runs the SQL over the fleet's lake instead (core/remote/lakequery.py):
every site's exported months, read from the remote, the live table of none.
"""

from __future__ import annotations

import asyncio
import functools
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import click

from coldkeep.core.base.errors import EXIT_OK, EXIT_USAGE
from coldkeep.core.base.space import human_bytes
from coldkeep.core.events.query import ENGINES, Engine, EventsQuery, Plan, TimeRange, parse_range

from ..operations.spec import IDENTITY_HELP, load_identity
from ..text.fmt import plural, shown
from ..text.rows import write
from .kit import Context, command, ctx_for, fail, fail_explained, reader_left
from .lake import lake_remote, remote_options


@click.command()
@click.argument("sql")
@click.option("--from", "start", metavar="YYYY-MM[-DD]", help="Rows from this month or day (UTC).")
@click.option("--to", "end", metavar="YYYY-MM[-DD]", help="Rows through this month or day (UTC).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per row (JSON lines).")
@click.option("--csv", "as_csv", is_flag=True, help="CSV with a header row.")
@click.option(
    "--partial",
    is_flag=True,
    help="Answer without a month that cannot be read (each named on stderr) instead of refusing.",
)
@click.option(
    "--as-text",
    is_flag=True,
    help="Read every column as text: for a table whose rows hold values of "
    "another type than their column declares.",
)
@click.option(
    "--engine",
    type=click.Choice(ENGINES),
    default="duckdb",
    show_default=True,
    help="duckdb: scans in parallel, any number of months. sqlite: a lookup by an indexed "
    "column in milliseconds, a month only the remote tier holds read in place; SQLite's "
    "SQL, at most 124 months.",
)
@click.option("--identity", type=click.Path(path_type=Path), metavar="FILE", help=IDENTITY_HELP)
@click.option("--stats", is_flag=True, help="After the rows, one line on stderr: what was read.")
@click.option(
    "--fleet",
    is_flag=True,
    help="Over the fleet's lake instead: every site's exported months (site and month columns).",
)
@click.option("--sites", metavar="A,B", help="With --fleet: these sites only.")
@remote_options
@command(json_opt=False)
def query(
    sql: str,
    start: str | None,
    end: str | None,
    as_json: bool,
    as_csv: bool,
    partial: bool,
    as_text: bool,
    engine: Engine,
    identity: Path | None,
    stats: bool,
    fleet: bool,
    sites: str | None,
    url: str | None,
    endpoint_url: str | None,
    region: str | None,
    config: Path | None,
) -> None:
    """Run read-only SQL over every event row, archived or live, without
    restoring anything.

    The rows are one table, `events`: the application's live table and every
    archived month, with the live table's columns (a month's row restored into
    the live table counts once). --from and --to (a month or a day, UTC, both
    included) leave out the months outside them unopened and keep only the rows
    whose time stamp lies between.

    The SQL is DuckDB's (close to PostgreSQL's) by default: one SELECT, its
    scans in parallel. --engine sqlite runs it in SQLite instead (SQLite's SQL:
    7/2 is 3 there, 3.5 in DuckDB): a lookup by id or another indexed column
    reads a few pages of each month, not every row; it takes at most 124
    months (narrow --from/--to), and reads a month only the remote tier holds
    without downloading it (--stats says the bytes fetched); a sealed one is
    opened whole with --identity, into the read cache, removed after. Nothing
    is written, nothing but the live table and the months is read. A month
    that cannot be read, or that the manifest knows and nothing holds, refuses
    the query (exit 1) unless --partial; so does a pass that overtook it.
    SQL that is not one SELECT, or reaches anything else: exit 2.

    --fleet reads the fleet's lake (the config's [remote], or --remote):
    `events` is every site's exported months, the newest file of each, with
    `site` and `month`; --sites and --from/--to choose whole months by name.

    \b
      coldkeep query "SELECT kind, count(*) FROM events GROUP BY kind"
      coldkeep query --from 2026-03 --to 2026-05 \\
        "SELECT * FROM events WHERE kind = 'payment_failed' AND user_id = 42"
      coldkeep query --csv "SELECT * FROM events WHERE ts > 1767225600000" > out.csv
      coldkeep query --engine sqlite "SELECT * FROM events WHERE id = 123456"
      coldkeep query --fleet --from 2026-03 --to 2026-03 \\
        "SELECT site, count(*) FROM events WHERE kind = 'webhook_event' GROUP BY site"
    """
    fmt, ctx = _format(as_json, as_csv), ctx_for(config)
    if fleet:
        _not_with_fleet(engine=engine, partial=partial, identity=identity, as_text=as_text)
        answer = functools.partial(_fleet, ctx, (url, endpoint_url, region), sites, sql, fmt)
    else:
        _not_without_fleet(sites=sites, remote=url, endpoint_url=endpoint_url, region=region)
        answer = functools.partial(_local, ctx, sql, fmt, partial, as_text, engine, identity)
    _answered(start, end, stats, answer)


def _format(as_json: bool, as_csv: bool) -> str:
    if as_json and as_csv:
        fail("--json or --csv, not both", EXIT_USAGE)
    return "json" if as_json else "csv" if as_csv else "text"


# What --fleet leaves out, and why.
_FLEET_ONLY_DUCKDB = {
    "engine": "the lake is Parquet, read by DuckDB",
    "partial": "a lake month that cannot be read fails the query",
    "identity": "the lake is plain Parquet, sealed by nothing",
    "as_text": "the lake's columns are typed, and coldkeep_raw holds what a type could not",
}


def _not_with_fleet(*, engine: Engine, **given: object) -> None:
    """A usage error for an option ``--fleet`` does not take."""
    used = {"engine": engine == "sqlite"} | {k: bool(v) for k, v in given.items()}
    for name, why in _FLEET_ONLY_DUCKDB.items():
        if used[name]:
            flag = "--engine sqlite" if name == "engine" else "--" + name.replace("_", "-")
            fail(f"--fleet does not take {flag}: {why}", EXIT_USAGE)


def _not_without_fleet(**given: str | None) -> None:
    for name, value in given.items():
        if value is not None:
            fail(f"--{name.replace('_', '-')} goes with --fleet", EXIT_USAGE)


def _sites(given: str | None) -> list[str] | None:
    if given is None:
        return None
    sites = [s.strip() for s in given.split(",") if s.strip()]
    if not sites:
        fail("--sites: name at least one site (--sites web-1,web-2)", EXIT_USAGE)
    return sites


def _answered(
    start: str | None,
    end: str | None,
    stats: bool,
    answer: Callable[[TimeRange], Callable[[float], str]],
) -> NoReturn:
    """``answer`` run over the range (its rows printed; it gives what --stats
    says, from the seconds it took); the command ended by its outcome."""
    t0 = time.perf_counter()
    try:
        said = answer(parse_range(start, end))
    except BrokenPipeError:
        reader_left()
        raise SystemExit(EXIT_OK) from None
    except Exception as err:  # noqa: BLE001 - one line and its code, or a bug's traceback
        fail_explained(err)
    if stats:
        click.echo(said(time.perf_counter() - t0), err=True)
    raise SystemExit(EXIT_OK)


def _local(
    ctx: Context, sql: str, fmt: str, partial: bool, as_text: bool, engine: Engine,
    identity: Path | None, span: TimeRange,
) -> Callable[[float], str]:  # fmt: skip
    """The query over this site's live table and months."""
    (archiver := ctx.archiver()).sessions.identities = load_identity(identity)
    run = archiver.events_query(span, partial=partial, as_text=as_text, engine=engine)
    plan, count = _answer(run, sql, fmt)
    return lambda seconds: _stats(plan, count, seconds)


def _fleet(
    ctx: Context, where: tuple[str | None, str | None, str | None], sites: str | None,
    sql: str, fmt: str, span: TimeRange,
) -> Callable[[float], str]:  # fmt: skip
    """The query over the fleet's lake (``where``: --remote, --endpoint-url,
    --region): the files chosen, the rows printed."""
    from coldkeep.core.remote.lakequery import open_query  # noqa: PLC0415 - --fleet's alone

    remote = lake_remote(ctx, *where)
    lake = asyncio.run(open_query(remote, _sites(sites), span))
    try:
        rows = lake.run(sql)
        count = write(sys.stdout, fmt, rows.columns, rows.batches())
    finally:
        lake.close()
    chosen = lake.lake

    def said(seconds: float) -> str:
        return (
            f"coldkeep: query --fleet: {plural(count, 'row')} in {seconds:.2f} s from "
            f"{plural(len(chosen.sites), 'site')}, {plural(len(chosen.months), 'month')}: "
            f"{plural(len(chosen.files), 'object')} of {human_bytes(chosen.size)} "
            f"({chosen.size} bytes) read"
        )

    return said


def _stats(plan: Plan, count: int, seconds: float) -> str:
    """What --stats says: the rows, the time, what was read (and fetched)."""
    pruned = f", {plan.pruned} pruned by the range" if plan.pruned else ""
    left = f", {len(plan.left_out)} left out" if plan.left_out else ""
    away = (
        f", {len(plan.remote)} of them read on the remote tier "
        f"({human_bytes(plan.fetched_bytes)} fetched, {plan.fetched_bytes} bytes)"
        if plan.remote
        else ""
    )
    return (
        f"coldkeep: query: {plural(count, 'row')} in {seconds:.2f} s from the live table "
        f"and {plural(len(plan.months), 'month')}{away}{pruned}{left}"
    )


def _answer(engine: EventsQuery, sql: str, fmt: str) -> tuple[Plan, int]:
    """The query run and its rows printed: what it read, and how many rows."""
    try:
        plan = engine.open()
        for month, why in plan.left_out.items():
            click.echo(f"coldkeep: query: left out {month}: {shown(why)}", err=True)
        rows = engine.run(sql)
        return plan, write(sys.stdout, fmt, rows.columns, rows.batches())
    finally:
        engine.close()
