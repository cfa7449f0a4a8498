"""``coldkeep hold``: legal holds placed, listed and released from the command
line (the console and the scheduler use the same archiver calls).

A hold is placed and released without the archive lock, so one can go on while
a long pass runs; what it covers, neither expiry nor a ship's drop of local
copies may delete.
"""

from __future__ import annotations

from pathlib import Path

import click

from coldkeep.core.base.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from coldkeep.core.ops.holds import HoldChange
from coldkeep.core.store.legalholds import Hold

from ..operations.spec import ID, parse_when
from ..text.fmt import day
from .kit import Context, command, ctx_for, fail, run_command


def _hold_line(h: Hold) -> str:
    until = f" until {day(h.until)}" if h.until else ""
    placed = f"placed {day(h.placed_at)} by {h.placed_by}"
    released = f", released {day(h.released_at)} by {h.released_by}" if h.released_at else ""
    return f"{h.id:>4}  {h.scope} {h.target}{until}: {h.reason}  ({placed}{released})"


def _said(ctx: Context, done: str, change: HoldChange) -> int:
    """The hold as placed or released, then what the bucket's legal holds became:
    exit 1 when the bucket could not be told all of it (the hold stands)."""

    def text() -> str:
        lines = [f"{done} {_hold_line(change.hold).strip()}"]
        if change.placed or change.lifted:
            lines.append(
                f"S3 legal holds: {change.placed} placed, {change.lifted} lifted on the bucket"
            )
        lines += [f"PROBLEM: {p}" for p in change.problems]
        if change.problems:
            lines.append("the hold stands; the next ship tells the bucket what it was not told")
        return "\n".join(lines)

    ctx.emit("hold", not change.problems, change.to_dict(), text)
    return EXIT_FAILED if change.problems else EXIT_OK


@click.group()
def hold() -> None:
    """Legal holds: what neither expiry nor a ship's drop of local copies may delete."""


@hold.command(name="add")
@click.option("--unit", help="Every file of this unit (the unit 'events': every event month).")
@click.option(
    "--path",
    "glob",
    metavar="GLOB",
    help="Archived files whose path matches this glob (events/YYYY-MM for an event month).",
)
@click.option("--entry", type=ID, help="One entry, by id (coldkeep restore --list shows ids).")
@click.option("--reason", required=True, help="Why: what the next operator sees.")
@click.option("--until", metavar="DATE", help="The hold ends by itself then (local time).")
@click.option(
    "--ahead",
    is_flag=True,
    help="Place a --unit or --path hold that covers nothing archived yet (for what will be).",
)
@command()
def hold_add(
    unit: str | None,
    glob: str | None,
    entry: int | None,
    reason: str,
    until: str | None,
    ahead: bool,
    config: Path | None,
    json_out: bool,
) -> None:
    """Place a hold on a unit, a path glob or one entry.

    A unit or path that covers nothing archived now (a typo, most often) is
    refused; --ahead places it for what will be archived under it."""
    ctx = ctx_for(config, json_out)
    named = (("unit", unit), ("path", glob), ("entry", entry))
    chosen = [(scope, value) for scope, value in named if value is not None]
    if len(chosen) != 1:
        fail("name exactly one of --unit, --path or --entry", EXIT_USAGE, ctx)
    [(scope, target)] = chosen
    until_ns = parse_when(until, "--until")

    async def go() -> int:
        until_ms = None if until_ns is None else until_ns // 1_000_000
        # A HoldError (nothing covered, no such entry, …): exit 2, its one line.
        change = await ctx.archiver().place_hold(scope, str(target), reason, until_ms, ahead=ahead)
        return _said(ctx, "placed", change)

    run_command(go(), ctx)


@hold.command(name="list")
@click.option("--all", "all_holds", is_flag=True, help="Released and ended holds too.")
@command()
def hold_list(all_holds: bool, config: Path | None, json_out: bool) -> None:
    """The holds in force (with --all: every hold ever placed)."""
    ctx = ctx_for(config, json_out)

    async def go() -> int:
        holds = await ctx.archiver().holds(all_holds=all_holds)
        text = "\n".join(_hold_line(h) for h in holds) or "no holds in force"
        ctx.emit("hold", True, [h.to_dict() for h in holds], lambda: text)
        return EXIT_OK

    run_command(go(), ctx)


@hold.command(name="release")
@click.argument("hold_id", type=ID)
@command()
def hold_release(hold_id: int, config: Path | None, json_out: bool) -> None:
    """Release hold HOLD_ID: what it kept may be expired or dropped again."""
    ctx = ctx_for(config, json_out)

    async def go() -> int:
        change = await ctx.archiver().release_hold(hold_id)  # a HoldError: exit 2, its line
        return _said(ctx, "released", change)

    run_command(go(), ctx)
