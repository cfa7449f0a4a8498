"""``thaw``: the remote objects in GLACIER or DEEP_ARCHIVE that a restore of a
selection would read, asked to be made readable (S3's restore request, hours).

Without ``--yes`` the command shows the plan (each object's class and state, the
bytes to thaw, the tier's usual wait, the estimated cost) and sends nothing; with
it, one request per object not already thawing or thawed.
"""

from __future__ import annotations

import click

from coldkeep.core.base.configprices import usd
from coldkeep.core.files.restore import Selection
from coldkeep.core.remote.thaw import MISSING, THAWED, THAWING, ThawPlan

from ..text.fmt import cut, day, human, plural
from .restore import selection_of, selection_params, thaw_params
from .spec import Operation, Options, Run, Words

# The console's thaw (the restore browser's ``t``): S3's default tier.
TIER = "standard"


def thaw_files(selection: Selection, tier: str, days: int, ask: bool = True) -> Run:
    """The cold objects ``selection`` needs, thawed for ``days`` at ``tier``
    (without ``ask``: the plan only)."""
    return lambda archiver, cancel: archiver.thaw(selection, tier, days, ask, cancel)


def _thaw(options: Options) -> Run:
    return thaw_files(selection_of(options), options["tier"], options["days"], options["yes"])


def _wait(plan: ThawPlan) -> str:
    waits = plan.waits()
    return "; ".join(f"{c} usually {w}" for c, w in waits.items())


def _headline(plan: ThawPlan) -> str:
    if not plan.objects:
        local = f"all {plural(plan.local, 'file')} selected read from local copies"
        return f"nothing to thaw ({local})" if plan.local else "nothing to thaw"
    others = [
        f"{plan.count(THAWING)} thawing" if plan.count(THAWING) else "",
        f"{plan.count(THAWED)} thawed" if plan.count(THAWED) else "",
        f"{plan.count(MISSING)} NOT THERE (run coldkeep verify --remote)"
        if plan.count(MISSING)
        else "",
    ]
    rest = "".join(f", {o}" for o in others if o)
    todo = plural(len(plan.to_ask), "object")
    cost = f"estimated {usd(plan.cost_usd())} (list prices)"
    at = f"{plan.tier} tier, {plural(plan.days, 'day')}"
    if plan.acted:
        asked = f"{len(plan.asked)} asked ({human(plan.bytes_to_ask)}, {at}; {_wait(plan)})"
        if not plan.to_ask:
            asked = "none to ask"
        under = f", {len(plan.under_way)} already under way" if plan.under_way else ""
        failed = f", {len(plan.failed)} FAILED" if plan.failed else ""
        then = (
            f"; the restore (#{plan.waiting_restore}) follows once they are thawed: "
            "coldkeep run finishes it"
            if plan.waiting_restore is not None
            else ""
        )
        return f"{asked}{under}{failed}{rest}{then}"
    if not plan.to_ask:
        return f"none to ask{rest}"
    return (
        f"{todo} to thaw ({human(plan.bytes_to_ask)}) at the {at}: {_wait(plan)}; "
        f"{cost}{rest}; run again with --yes to ask"
    )


def _detail(plan: ThawPlan) -> list[str]:
    lines = [
        f"{o.state:<9} {o.storage_class or 'STANDARD':<12} {human(o.bytes):>9}  {o.path}"
        + (f"  ({plural(o.entries, 'file')})" if o.entries > 1 else "")
        + (f"  until {day(o.until)}" if o.until is not None else "")
        for o in plan.objects
    ]
    return [*cut(lines, ""), *plan.failed]


THAW = Operation(
    "thaw",
    "Ask for the remote copies in GLACIER or DEEP_ARCHIVE that a restore of\n"
    "the selection needs: by entry IDS, --unit, --path, --sha or time range.\n\n"
    "Without --yes: the plan (each object's class and state, the bytes to thaw,\n"
    "the tier's usual wait and the estimated cost), nothing sent. With --yes: one\n"
    "restore request per object (a bundle once, however many of its files were\n"
    "selected), never for one already thawing or thawed; each is recorded first.\n"
    "Restore the files once their objects are thawed (run thaw again to see).",
    bind=_thaw,
    params=(
        *selection_params(),
        *thaw_params(),
        click.Option(
            ["--yes"], is_flag=True, help="Ask for the thaws (without it: the plan only)."
        ),
    ),
    words=(Words(ThawPlan, _headline, failed=lambda p: bool(p.failed), detail=_detail),),
)

OPERATIONS = (THAW,)
