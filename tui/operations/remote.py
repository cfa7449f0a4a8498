"""``ship``: what is archived copied to the remote tier, then local copies
dropped. The console asks first with what a ship would send and drop (and says
when nothing is waiting); without a [remote] the action is off.
"""

from __future__ import annotations

from coldkeep.core.base.config import Settings
from coldkeep.core.remote.shipplan import ShipPlan
from coldkeep.core.remote.shiprun import ShipReport

from ..text.fmt import human, plural, remote_where
from .spec import Console, ConsoleAction, Gate, Nothing, Operation, Question, Run, Site, Words

NOTHING_TO_SHIP = (
    "nothing to ship: no archived file or event month is waiting for the remote "
    "tier, and no local copy is due to be dropped"
)


def _shipped(r: ShipReport) -> str:
    parts = [f"{plural(r.uploaded, 'object')} shipped ({human(r.bytes)})"]
    if r.already:
        parts.append(f"{r.already} found there already")
    if r.months:
        parts.append(plural(r.months, "event month"))
    if r.lake:
        parts.append(f"{plural(r.lake, 'event month')} written to the lake")
    if r.lake_deleted:
        parts.append(f"{plural(r.lake_deleted, 'superseded lake file')} deleted")
    if r.dropped:
        copies = plural(r.dropped, "local copy", "local copies")
        parts.append(f"{copies} dropped ({human(r.dropped_bytes)})")
    if r.held:
        parts.append(f"{plural(r.held, 'local copy', 'local copies')} kept by legal holds")
    if r.locked:
        parts.append(f"{r.locked} locked by the bucket until their expiry")
    if r.holds_placed or r.holds_lifted:
        parts.append(f"S3 legal holds {r.holds_placed} placed, {r.holds_lifted} lifted")
    if r.pending:
        parts.append(f"{r.pending} still to ship")
    if r.superseded:
        snapshots = plural(r.superseded, "superseded event month snapshot")
        parts.append(f"{snapshots} let go")
    if r.loose_deleted:
        parts.append(f"{plural(r.loose_deleted, 'leftover copy', 'leftover copies')} deleted")
    if r.loose_kept:
        copies = plural(r.loose_kept, "leftover copy", "leftover copies")
        parts.append(f"{copies} kept by the bucket's lock until it ends")
    if r.problems:
        parts.append(plural(len(r.problems), "PROBLEM", "PROBLEMS"))
    return ", ".join(parts)


def _ship_gate(settings: Settings) -> Gate:
    # Without a remote the action is off; the ship job then runs unasked (and says why).
    return "ask" if settings.remote is not None else "run"


async def _ask_ship(site: Site) -> tuple[ShipPlan, Question | Nothing]:
    plan = await site.archiver.ship_plan()
    if not plan.pending_files and not plan.drops and not plan.months and not plan.lake:
        return plan, Nothing(NOTHING_TO_SHIP, title="ship")
    remote = site.archiver.settings.remote
    assert remote is not None  # a plan exists only with a remote
    where = remote_where(remote, site.base)
    send = (
        f"Ship {plural(plan.pending_files, 'archive file')} ({human(plan.pending_bytes)}, "
        f"{plural(plan.pending_entries, 'entry', 'entries')}) to {where}"
    )
    rows = [(f"ship to {where}", f"{plan.pending_files}", human(plan.pending_bytes))]
    if plan.months:
        rows.append(("event month snapshots", f"{plan.months}", ""))
    if plan.lake:
        rows.append(("event months into the lake (Parquet)", f"{plan.lake}", ""))
    then, warning, drop = _drops(plan)
    rows += drop
    if plan.held:
        kept = plural(plan.held, "more local copy", "more local copies")
        then += f"; {kept} {'is' if plan.held == 1 else 'are'} kept by legal holds"
    summary = (
        f"{send}; {then}.\nEvent months changed since their last snapshot (the one "
        "passes still add rows to as well), and a snapshot of the manifest, go too. "
        "Each object is read back (size and SHA-256) before it counts as shipped."
    )
    if plan.lake:
        summary += (
            f"\n{plural(plan.lake, 'event month')} shipped before the lake had them "
            "are written into the fleet's lake as Parquet ([lake])."
        )
    return plan, Question(
        "Ship to the remote tier",
        summary,
        columns=("Step", "Files", "Size"),
        rows=list(rows),
        warning=warning,
        confirm="Ship",
    )


def _drops(plan: ShipPlan) -> tuple[str, str, list[tuple[str, str, str]]]:
    """What happens to local copies: the summary's words for it, the warning, the row."""
    keep = plan.keep_local_days
    if keep < 0:
        return "local copies are kept for ever (keep_local_days < 0)", "", []
    if keep == 0:
        earlier = (
            f" and the {plan.drops} ({human(plan.drop_bytes)}) shipped before" if plan.drops else ""
        )
        most = plan.pending_files + plan.drops
        return (
            f"then drop the local copy of each file it ships once it reads back whole"
            f"{earlier} (keep_local_days = 0)",
            "Every local copy shipped is DELETED from the archive: the remote "
            "tier then holds the only copy (restores read it back from there).",
            [("drop local copies", f"up to {most}", human(plan.pending_bytes + plan.drop_bytes))],
        )
    if not plan.drops:
        return (
            f"no local copy is dropped: none was shipped more than {keep:g} days ago",
            "",
            [("drop local copies", "0", "")],
        )
    copies = plural(plan.drops, "local copy", "local copies")
    return (
        f"then drop {copies} ({human(plan.drop_bytes)}) shipped more than {keep:g} days ago",
        f"{copies} {'is' if plan.drops == 1 else 'are'} DELETED from the archive: the "
        f"remote tier then holds the only {'copy' if plan.drops == 1 else 'copies'} "
        "(restores read it back from there).",
        [("drop local copies", f"{plan.drops}", human(plan.drop_bytes))],
    )


def _ship(_: object) -> Run:
    return lambda archiver, cancel: archiver.ship(cancel)


SHIP = Operation(
    "ship",
    "Copy what is archived to the remote tier ([remote]), then drop local copies.\n\n"
    "Each archive file (a bundle or a gzip) is uploaded create-only, read back and\n"
    "recorded; event months changed since their last snapshot follow as database\n"
    "snapshots (the current month too), then a snapshot of the manifest. Local\n"
    "copies whose remote copy was verified more than remote.keep_local_days ago\n"
    "are dropped (recorded first, unlinked after), unless a legal hold keeps them.\n"
    "Run it again after a failure or a kill: it resumes.",
    bind=_ship,
    words=(
        Words(ShipReport, _shipped, failed=lambda r: r.failed, detail=lambda r: list(r.problems)),
    ),
    console=Console(
        ConsoleAction(
            "ship",
            "u",
            "Ship",
            "Ship the archive to the remote tier, then drop local copies past keep_local_days "
            "(shows both and asks first)",
            mutating=True,
            remote=True,
            place=30,
        ),
        start=_ship,
        ask=_ask_ship,
        gate=_ship_gate,
    ),
)

OPERATIONS = (SHIP,)
