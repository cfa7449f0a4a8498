"""``expire``: archived data past its retention deleted, locally and remotely.

Without ``--yes`` the command shows the plan (what would go, what holds keep)
and changes nothing; the console asks with the same plan and deletes exactly
the items it showed. Without a [retention] the console's action is off, and the
command says so (``NO_RETENTION``, the one wording of it).
"""

from __future__ import annotations

import click

from coldkeep.core.base.configprices import usd
from coldkeep.core.ops.expire import ExpireItem, ExpirePlan, ExpireReport

from ..text.fmt import LIST_MAX, cut, day, human, plural
from .spec import Console, ConsoleAction, Nothing, Operation, Options, Question, Run, Site, Words

NO_RETENTION = "no [retention] is configured: everything is kept for ever"


def _expire(options: Options) -> Run:
    if options["yes"]:
        return lambda archiver, cancel: archiver.expire(cancel)
    return lambda archiver, cancel: archiver.expire_plan()


def _expired(r: ExpireReport) -> str:
    text = (
        f"{len(r.expired)} deleted ({plural(r.files, 'file')}, "
        f"{plural(r.months, 'event month')}, {human(r.bytes)}); {r.held} kept by holds"
    )
    if r.settled:
        text += f"; {plural(r.settled, 'interrupted expiry', 'interrupted expiries')} finished"
    if r.locked:
        text += f"; {len(r.locked)} with remote copies the bucket's lock still keeps"
    if r.not_due:
        text += f"; {len(r.not_due)} NOT DUE by the bucket's clock (this host's runs ahead)"
    return text + (f", {plural(len(r.problems), 'PROBLEM', 'PROBLEMS')}" if r.problems else "")


def _remote_kept(plan: ExpirePlan) -> str:
    """Which of the plan's remote copies the bucket's lock keeps past their
    expiry, and until when ("": none)."""
    ends = sorted(i.locked_until for i in plan.locked if i.locked_until is not None)
    if not ends:
        return ""
    first, last = day(ends[0]), day(ends[-1])
    shipped = sum(1 for i in plan.items if i.remote)
    which = f"all {shipped}" if len(ends) == shipped else f"{len(ends)} of the {shipped}"
    until = first if first == last else f"{first} to {last}"
    return f"the bucket's lock keeps the remote copies of {which} shipped until {until}"


def _planned(plan: ExpirePlan) -> str:
    if not plan.configured:
        return NO_RETENTION
    days = f"files_days {plan.files_days or '-'}, events_days {plan.events_days or '-'}"
    if not plan.items and not plan.held:
        return f"nothing is past its retention ({days})"
    kept = _remote_kept(plan)
    copies = (
        f"every local copy; {kept}, read then only by cat --expired"
        if kept
        else "every copy, local and remote"
    )
    early = (
        f"; {plural(plan.early, 'remote copy', 'remote copies')} under the cold class's minimum "
        f"stay: deleting them now costs about {usd(plan.early_usd)} (list prices)"
        if plan.early
        else ""
    )
    return (
        f"past retention ({days}): {len(plan.items)} to delete ({plural(plan.files, 'file')}, "
        f"{human(plan.bytes)}, {copies}); {len(plan.held)} kept by holds{early}"
    )


def _copies(i: ExpireItem) -> str:
    """Where it is, and until when the bucket's lock keeps the remote copy."""
    if i.locked_until is None:
        return i.copies
    return f"{i.copies}, remote locked until {day(i.locked_until)}"


def _item(i: ExpireItem) -> str:
    what = plural(i.files, "file") if i.kind != "month" else "event month"
    line = f"  {i.path}  ({i.kind}, {what}, {human(i.bytes)}, {_copies(i)})"
    return line + (f"  HELD by {i.held}" if i.held else "")


def _plan_text(plan: ExpirePlan) -> str:
    """The plan: what goes (the first ``LIST_MAX``), then what holds keep."""
    lines = [_planned(plan)]
    lines += cut([_item(i) for i in plan.items])
    lines += [_item(i) for i in plan.held[:LIST_MAX]]
    return "\n".join(lines)


async def _ask_expire(site: Site) -> tuple[ExpirePlan, Question | Nothing]:
    plan = await site.archiver.expire_plan()
    if not plan.items:
        kept = f"; {len(plan.held)} kept by legal holds" if plan.held else ""
        return plan, Nothing(f"nothing is past its retention{kept}", title="expire")
    rows: list[tuple[str, ...]] = [
        (i.path, i.kind, str(i.files) if i.kind != "month" else "", human(i.bytes), _copies(i))
        for i in plan.items
    ]
    rows += [(i.path, "HELD", "", human(i.bytes), i.held or "") for i in plan.held]
    n_held = len(plan.held)
    held = (
        f" {n_held} more {'is' if n_held == 1 else 'are'} past it but held (listed last)."
        if n_held
        else ""
    )
    unlocked = any(i.remote and i.locked_until is None for i in plan.items)
    remote = " AND the remote tier" if unlocked else ""
    months = sum(i.kind == "month" for i in plan.items)
    what = [plural(len(plan.items) - months, "archive file"), plural(months, "event month")]
    return plan, Question(
        f"Expire {' and '.join(w for w in what if not w.startswith('0 '))}",
        f"Past their retention (files_days {plan.files_days or '-'}, events_days "
        f"{plan.events_days or '-'}): {plural(plan.files, 'file')}, {human(plan.bytes)}.{held} "
        "Their entries stay as tombstones (sha256, when) and each deletion is in "
        "the history.",
        columns=("Path", "Kind", "Files", "Size", "Copies"),
        rows=rows,
        warning=_warning(plan, remote),
        confirm="Delete them",
    )


def _warning(plan: ExpirePlan, remote: str) -> str:
    kept = _remote_kept(plan)
    if not kept:
        return f"These are DELETED from the archive{remote}: no copy of them is left anywhere."
    return (
        f"These are DELETED from the archive{remote}, but {kept} (the dates shown): they "
        "stay in the bucket, expired, read only by coldkeep cat --expired, and an expiry "
        "after that deletes them."
    )


def _expire_shown(plan: ExpirePlan) -> Run:
    """Exactly the items the question showed: none that became due since."""
    shown = frozenset(i.path for i in plan.items)
    return lambda archiver, cancel: archiver.expire(cancel, only=shown)


EXPIRE = Operation(
    "expire",
    "Delete archived data past its retention ([retention]), locally and remotely.\n\n"
    "Without --yes: the plan (what would go, what holds keep), nothing changed.\n"
    "A gzip goes when its file's mtime is files_days old (or its unit's own); a\n"
    "bundle when all its members are; an event month's database when the month\n"
    "ended events_days ago. Entries stay as tombstones (status expired, their\n"
    "sha256 and when); each deletion is in `coldkeep history`. Nothing a legal\n"
    "hold covers goes. Resumable after a kill.",
    bind=_expire,
    params=(
        click.Option(
            ["--yes"], is_flag=True, help="Delete what the plan lists (without it: the plan only)."
        ),
    ),
    words=(
        Words(
            ExpireReport,
            _expired,
            failed=lambda r: r.failed,
            detail=lambda r: [*r.problems, *r.not_due, *r.locked],
        ),
        Words(ExpirePlan, _planned, text=_plan_text),
    ),
    console=Console(
        ConsoleAction(
            "expire",
            "e",
            "Expire",
            "Delete archived data past its retention, locally and remotely (shows exactly what "
            "goes and what holds keep, and asks first)",
            mutating=True,
            retention=True,
            place=40,
        ),
        start=_expire_shown,
        ask=_ask_expire,
    ),
)

OPERATIONS = (EXPIRE,)
