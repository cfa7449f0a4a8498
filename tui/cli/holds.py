"""``coldkeep expire`` and ``coldkeep hold``: retention and legal holds from the
command line (the console and the scheduler use the same archiver calls).

``expire`` shows its plan and changes nothing unless given ``--yes``; ``hold``
places, lists and releases holds without the archive lock, so a hold can go on
while a long pass runs.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import click

from coldkeep.core.base.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from coldkeep.core.ops.expire import ExpireItem, ExpirePlan
from coldkeep.core.store.legalholds import Hold, HoldError

from ..text.fmt import day, human
from ..text.results import report
from .kit import command, ctx_for, fail, parse_when, run_command

LIST_MAX = 20  # items of a plan shown as text; --json has them all


def _item(i: ExpireItem) -> str:
    what = f"{i.files} files" if i.kind != "month" else "event month"
    line = f"  {i.path}  ({i.kind}, {what}, {human(i.bytes)}, {i.copies})"
    return line + (f"  HELD by {i.held}" if i.held else "")


def plan_text(plan: ExpirePlan) -> str:
    if not plan.configured:
        return "no [retention] is configured: everything is kept for ever"
    days = f"files_days {plan.files_days or '-'}, events_days {plan.events_days or '-'}"
    if not plan.items and not plan.held:
        return f"nothing is past its retention ({days})"
    lines = [
        f"past retention ({days}): {len(plan.items)} to delete ({plan.files} files, "
        f"{human(plan.bytes)}, every copy, local and remote); {len(plan.held)} kept by holds"
    ]
    lines += [_item(i) for i in plan.items[:LIST_MAX]]
    if len(plan.items) > LIST_MAX:
        lines.append(f"  … and {len(plan.items) - LIST_MAX} more (--json lists them all)")
    lines += [_item(i) for i in plan.held[:LIST_MAX]]
    return "\n".join(lines)


@click.command()
@click.option("--yes", is_flag=True, help="Delete what the plan lists (without it: the plan only).")
@command(wait_opt=True)
def expire(yes: bool, config: Path | None, json_out: bool, wait: float) -> None:
    """Delete archived data past its retention ([retention]), locally and remotely.

    Without --yes: the plan (what would go, what holds keep), nothing changed.
    A gzip goes when its file's mtime is files_days old (or its unit's own); a
    bundle when all its members are; an event month's database when the month
    ended events_days ago. Entries stay as tombstones (status expired, their
    sha256 and when); each deletion is in `coldkeep history`. Nothing a legal
    hold covers goes. Resumable after a kill."""
    ctx = ctx_for(config, json_out, wait)

    async def go() -> int:
        archiver = ctx.archiver()
        if not yes:
            plan = await archiver.expire_plan()
            ctx.emit("expire", True, plan.to_dict(), lambda: plan_text(plan))
            return EXIT_OK
        result = await archiver.expire(ctx.cancel)
        ctx.emit("expire", not result.failed, result.to_dict(), partial(report, "expire", result))
        return EXIT_FAILED if result.failed else EXIT_OK

    run_command(go(), ctx)


def _hold_line(h: Hold) -> str:
    until = f" until {day(h.until)}" if h.until else ""
    placed = f"placed {day(h.placed_at)} by {h.placed_by}"
    released = f", released {day(h.released_at)} by {h.released_by}" if h.released_at else ""
    return f"{h.id:>4}  {h.scope} {h.target}{until}: {h.reason}  ({placed}{released})"


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
@click.option("--entry", type=int, help="One entry, by id (coldkeep restore --list shows ids).")
@click.option("--reason", required=True, help="Why: what the next operator sees.")
@click.option("--until", metavar="DATE", help="The hold ends by itself then (local time).")
@command()
def hold_add(
    unit: str | None,
    glob: str | None,
    entry: int | None,
    reason: str,
    until: str | None,
    config: Path | None,
    json_out: bool,
) -> None:
    """Place a hold on a unit, a path glob or one entry."""
    ctx = ctx_for(config, json_out)
    named = (("unit", unit), ("path", glob), ("entry", entry))
    chosen = [(scope, value) for scope, value in named if value is not None]
    if len(chosen) != 1:
        fail("name exactly one of --unit, --path or --entry", EXIT_USAGE, ctx)
    [(scope, target)] = chosen
    until_ns = parse_when(until, "--until")

    async def go() -> int:
        try:
            h = await ctx.archiver().place_hold(
                scope, str(target), reason, None if until_ns is None else until_ns // 1_000_000
            )
        except HoldError as err:
            fail(str(err), EXIT_USAGE, ctx)
        ctx.emit("hold", True, h.to_dict(), lambda: f"placed {_hold_line(h).strip()}")
        return EXIT_OK

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
@click.argument("hold_id", type=int)
@command()
def hold_release(hold_id: int, config: Path | None, json_out: bool) -> None:
    """Release hold HOLD_ID: what it kept may be expired or dropped again."""
    ctx = ctx_for(config, json_out)

    async def go() -> int:
        try:
            h = await ctx.archiver().release_hold(hold_id)
        except HoldError as err:
            fail(str(err), EXIT_USAGE, ctx)
        ctx.emit("hold", True, h.to_dict(), lambda: f"released {_hold_line(h).strip()}")
        return EXIT_OK

    run_command(go(), ctx)
