"""``coldkeep fleet status``: every site under a remote prefix, its health
(ok, warn, critical, silent) and why, worst first, from each one's signed
heartbeat and manifest snapshot, for cron, a health-check ping or a Nagios
check: exit 1 when any site is not ok. Reads only; needs no coldkeep.toml.
"""

from __future__ import annotations

from pathlib import Path

import click

from coldkeep.core.base.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, ColdkeepError
from coldkeep.core.base.times import now_ms
from coldkeep.core.ops.fleet import Fleet, FleetSite, fleet_cache
from coldkeep.core.ops.health import HealthRules, span

from ..operations.spec import IDENTITY_HELP
from ..text.fmt import plural
from .console import fleet_remote
from .kit import Context, ctx_for, fail, identities_for, run_command

#: Marks that say the state without colour (NO_COLOR, a log, a pager).
MARKS = {"critical": "!!", "silent": "??", "warn": "! ", "ok": "ok"}


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
    counts = {state: sum(s.health.state == state for s in sites) for state in MARKS}
    said = ", ".join(f"{n} {state}" for state, n in counts.items() if n)
    lines = [site_line(s) for s in sites]
    lines.append(f"fleet: {plural(len(sites), 'site')} under {where}: {said or 'none'}")
    return "\n".join(lines)


@click.group()
def fleet() -> None:
    """Every site that ships to one remote prefix, seen from the bucket alone."""


@fleet.command(name="status")
@click.option(
    "--remote", "url", required=True, metavar="URL", help="The prefix (s3://bucket/prefix or "
    "file:///path) the sites ship to."
)  # fmt: skip
@click.option("--endpoint-url", metavar="URL", help="An S3-compatible endpoint (http(s)).")
@click.option("--region", help="The bucket's region (default: the environment's).")
@click.option("--identity", type=click.Path(path_type=Path), metavar="FILE", help=IDENTITY_HELP)
@click.option(
    "--silent-after",
    type=click.FloatRange(min=0.1),
    default=HealthRules.silent_cap_h,
    show_default=True,
    metavar="HOURS",
    help="A site is silent after twice its heartbeat's interval, or this, the shorter.",
)
@click.option(
    "--backlog-days",
    type=click.FloatRange(min=0),
    default=HealthRules.backlog_days,
    show_default=True,
    help="A backlog standing this long is a warning.",
)
@click.option("--json", "json_out", is_flag=True, help="One JSON document on stdout.")
def status(
    url: str,
    endpoint_url: str | None,
    region: str | None,
    identity: Path | None,
    silent_after: float,
    backlog_days: float,
    json_out: bool,
) -> None:
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
    ctx = ctx_for(None, json_out)
    try:
        remote = fleet_remote(url, endpoint_url, region)
        identities = identities_for(identity)
    except ValueError as err:
        fail(str(err), EXIT_USAGE, ctx)
    except ColdkeepError as err:
        fail(str(err), err.exit_code, ctx)
    rules = HealthRules(silent_cap_h=silent_after, backlog_days=backlog_days)

    async def go() -> int:
        found = Fleet(remote, fleet_cache(remote), identities, rules)
        try:
            sites = await found.load(counts=False)
        finally:
            await found.close()
        return _said(ctx, sorted(sites, key=lambda s: (s.health.sort_key(), s.site)), url)

    run_command(go(), ctx, progress=False)


def _said(ctx: Context, sites: list[FleetSite], where: str) -> int:
    ok = all(s.health.state == "ok" for s in sites)
    result = {"at": now_ms(), "sites": [site_dict(s) for s in sites]}
    ctx.emit("fleet status", ok, result, lambda: _text(sites, where))
    return EXIT_OK if ok else EXIT_FAILED
