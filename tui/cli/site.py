"""``coldkeep site``: the site's identity (its id, and the fingerprint of the key
that signs its manifest snapshots: what an operator writes down beside the
identity file), and ``site new-key`` when that key is lost or leaked.
"""

from __future__ import annotations

from pathlib import Path

import click

from coldkeep.core.base.errors import EXIT_FAILED, EXIT_OK
from coldkeep.core.ops.siteops import NewKey, SiteIdentity

from .kit import command, ctx_for, run_command


def _shown(site: SiteIdentity | None) -> str:
    if site is None:
        return "no manifest yet: the site's identity is made by its first pass"
    lines = [
        f"site id     {site.site_id}",
        f"site key    {site.key or 'none yet (the first ship makes it)'}",
        f"snapshots   generation {site.generation}"
        + (f", the last shipped from here {site.snapshot}" if site.snapshot else ""),
    ]
    if site.retired:
        lines.append(f"retired     {', '.join(site.retired)}")
    if site.key_problem:
        lines.append(f"PROBLEM     {site.key_problem}")
    lines.append(
        "Write the site key's fingerprint down beside the age identity file: on the day this "
        "host is gone, rebuild-manifest --from-remote --site-key FINGERPRINT takes only "
        "snapshots it signed."
    )
    return "\n".join(lines)


def _made(done: NewKey) -> str:
    lines = [f"new site key {done.fingerprint}: WRITE IT DOWN beside the identity file"]
    if done.moved_aside:
        lines.append(f"the old key file is now {done.moved_aside}")
    if done.retired:
        lines.append(
            f"retired: {', '.join(done.retired)} (the snapshots they signed stay this site's; a "
            "disaster recovery given only an old fingerprint takes only those)"
        )
    lines.append("the next ship signs its snapshot with the new key")
    return "\n".join(lines)


@click.group()
def site() -> None:
    """The site's identity: its id and the key that signs its snapshots."""


@site.command("show")
@command()
def show(config: Path | None, json_out: bool) -> None:
    """The site's id, its signing key's fingerprint and its snapshots' generation."""
    ctx = ctx_for(config, json_out)

    async def go() -> int:
        found = (await ctx.archiver().status()).site
        problem = found is not None and found.key_problem is not None
        ctx.emit("site", not problem, found.to_dict() if found else None, lambda: _shown(found))
        return EXIT_FAILED if problem else EXIT_OK

    run_command(go(), ctx)


@site.command("new-key")
@command()
def new_key(config: Path | None, json_out: bool) -> None:
    """Make a new signing key for the site (the old one lost or leaked).

    The old key is retired (its file, where it is still here, moved aside): the
    snapshots it signed stay the site's own. Write the new fingerprint down: a
    disaster recovery trusts the snapshots signed by the key it is given."""
    ctx = ctx_for(config, json_out)

    async def go() -> int:
        done = await ctx.archiver().new_site_key()
        ctx.emit("site new-key", True, done.to_dict(), lambda: _made(done))
        return EXIT_OK

    run_command(go(), ctx)
