"""``coldkeep fleet status``: every site under a remote prefix, its health
(ok, warn, critical, silent) and why, worst first, from each one's signed
heartbeat and manifest snapshot, for cron, a health-check ping or a Nagios
check: exit 1 when any site is not ok. ``coldkeep fleet metrics``: the same
as Prometheus gauges. Both read only and need no coldkeep.toml.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

import click
from prometheus_client import CollectorRegistry, generate_latest

from coldkeep.core.base.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, ColdkeepError
from coldkeep.core.base.times import now_ms
from coldkeep.core.ops.fleet import Fleet, FleetSite, fleet_cache
from coldkeep.core.ops.fleetmetrics import FleetCollector
from coldkeep.core.ops.health import MARKS, HealthRules, load_rules, span, tally

from ..operations.spec import IDENTITY_HELP
from ..text.fmt import plural
from .console import fleet_remote
from .kit import Context, ctx_for, fail, identities_for, run_command


def site_dict(s: FleetSite) -> dict[str, object]:
    beat = s.heard.beat if s.heard is not None else None
    return {
        "site": s.site,
        "state": s.health.state,
        "reasons": list(s.health.reasons),
        "quiet_ms": s.health.quiet_ms,
        "heartbeat": beat.to_dict() if beat is not None else None,
        "snapshot": s.snapshot,
        "snapshot_taken_at": s.taken_at,
    }


def site_line(s: FleetSite) -> str:
    quiet = s.health.quiet_ms
    heard = f"beat {span(quiet)} ago" if quiet is not None else "no beat"
    return f"{MARKS[s.health.state]} {s.health.state:<8} {s.site}  ({heard}): {s.health.reason}"


def _text(sites: list[FleetSite], where: str) -> str:
    counts = tally(s.health for s in sites)
    said = ", ".join(f"{n} {state}" for state, n in counts.items() if n)
    lines = [site_line(s) for s in sites]
    lines.append(f"fleet: {plural(len(sites), 'site')} under {where}: {said or 'none'}")
    return "\n".join(lines)


@click.group()
def fleet() -> None:
    """Every site that ships to one remote prefix, seen from the bucket alone."""


def _where(fn: Callable[..., None]) -> Callable[..., None]:
    """The options that say which fleet: the prefix, its endpoint and region,
    and the identity for sealed snapshots."""
    fn = click.option(
        "--identity", type=click.Path(path_type=Path), metavar="FILE", help=IDENTITY_HELP
    )(fn)
    fn = click.option("--region", help="The bucket's region (default: the environment's).")(fn)
    fn = click.option("--endpoint-url", metavar="URL", help="An S3-compatible endpoint (http(s)).")(
        fn
    )
    return click.option(
        "--remote", "url", required=True, metavar="URL",
        help="The prefix (s3://bucket/prefix or file:///path) the sites ship to.",
    )(fn)  # fmt: skip


def _rules(fn: Callable[..., None]) -> Callable[..., None]:
    fn = click.option(
        "--rules",
        "rules_file",
        type=click.Path(path_type=Path, dir_okay=False),
        metavar="FILE",
        help="The fleet's health rules, a [health] table (default: "
        "~/.config/coldkeep/fleet.toml where it exists); the options below win.",
    )(fn)
    fn = click.option(
        "--backlog-days",
        type=click.FloatRange(min=0),
        help=f"A backlog standing this long is a warning (default {HealthRules.backlog_days:g}).",
    )(fn)
    return click.option(
        "--silent-after",
        type=click.FloatRange(min=0.1),
        metavar="HOURS",
        help="A site is silent after twice its heartbeat's interval, or this, the shorter "
        f"(default {HealthRules.silent_cap_h:g}).",
    )(fn)


def rules_for(
    rules_file: Path | None, silent_after: float | None, backlog_days: float | None
) -> HealthRules:
    """The health rules: the file's (named, or the operator's own), then the
    options given. Raises UsageError for a file that cannot be used."""
    rules = load_rules(rules_file)
    if silent_after is not None:
        rules = replace(rules, silent_cap_h=silent_after)
    if backlog_days is not None:
        rules = replace(rules, backlog_days=backlog_days)
    return rules


def _fleet(
    ctx: Context, url: str, endpoint_url: str | None, region: str | None,
    identity: Path | None, rules: Callable[[], HealthRules],
) -> Fleet:  # fmt: skip
    """The fleet the options name, judged by ``rules()``; a usage error ends
    the command here."""
    try:
        remote = fleet_remote(url, endpoint_url, region)
        identities = identities_for(identity)
        return Fleet(remote, fleet_cache(remote), identities, rules())
    except ValueError as err:
        fail(str(err), EXIT_USAGE, ctx)
    except ColdkeepError as err:
        fail(str(err), err.exit_code, ctx)


async def _load(found: Fleet) -> tuple[list[FleetSite], int]:
    """Every site judged, worst first, and the bucket's time then."""
    try:
        sites = await found.load()
        now = await found.store.server_now()
    finally:
        await found.close()
    return sorted(sites, key=lambda s: (s.health.sort_key(), s.site)), now


def _fleet_command(fn: Callable[[Context, Fleet, str], Awaitable[int]]) -> Callable[..., None]:
    """A fleet subcommand: the options that say which fleet and how its sites
    are judged read into a ``Fleet`` (a usage error ends it here), ``fn``'s
    coroutine then run with its context, the fleet and the URL."""

    @functools.wraps(fn)
    def run(
        url: str, endpoint_url: str | None, region: str | None, identity: Path | None,
        silent_after: float | None, backlog_days: float | None, rules_file: Path | None,
        json_out: bool = False,
    ) -> None:  # fmt: skip
        ctx = ctx_for(None, json_out)
        rules = functools.partial(rules_for, rules_file, silent_after, backlog_days)
        found = _fleet(ctx, url, endpoint_url, region, identity, rules)
        run_command(fn(ctx, found, url), ctx, progress=False)

    return _where(_rules(run))


@fleet.command(name="status")
@click.option("--json", "json_out", is_flag=True, help="One JSON document on stdout.")
@_fleet_command
async def status(ctx: Context, found: Fleet, url: str) -> int:
    """Each site's health, worst first: ok, warn (a backlog standing, files
    quarantined), critical (verify failures, a failed job, no usable snapshot,
    a heartbeat that is not the site's own) or silent (no heartbeat for twice
    its interval, 26 hours at most), and why, by the bucket's clock.

    A heartbeat is believed only when the site's key signs it. Exit 0 when
    every site is ok, 1 when any is not (for cron, a health-check ping, a
    Nagios check), 2 for a usage error. Reads only; the sites' snapshots are
    cached as the fleet view caches them.

    \b
      coldkeep fleet status --remote s3://acme-archive/coldkeep
      coldkeep fleet status --remote s3://acme-archive/coldkeep --json | jq '.result.sites[0]'
    """
    sites, _ = await _load(found)
    return _said(ctx, sites, url)


@fleet.command(name="metrics")
@_fleet_command
async def metrics(ctx: Context, found: Fleet, url: str) -> int:
    """Every site's health as Prometheus gauges (the text exposition format),
    one set per site: its state, its heartbeat's age, verify failures, backlog,
    quarantined files, pending bytes, failed jobs (docs/operations.md, "The
    fleet view"). For node_exporter's textfile collector from cron, write to a
    temporary name and rename it. Reads only."""
    sites, now = await _load(found)
    registry = CollectorRegistry(auto_describe=True)
    registry.register(FleetCollector(sites, now))
    click.echo(generate_latest(registry).decode(), nl=False)
    return EXIT_OK


def _said(ctx: Context, sites: list[FleetSite], where: str) -> int:
    ok = all(s.health.state == "ok" for s in sites)
    result = {"at": now_ms(), "sites": [site_dict(s) for s in sites]}
    ctx.emit("fleet status", ok, result, lambda: _text(sites, where))
    return EXIT_OK if ok else EXIT_FAILED
