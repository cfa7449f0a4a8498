"""The backlog and what recovery would settle, in words, written once:
``coldkeep plan``'s text, what the console's pass confirmation says of its plan,
and the months the Backlog pane lists all come from here.

Event rows are counted per month, every kind together (``months``); a path
recovery found is shown relative to archive_root.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .fmt import LIST_MAX, human, plural

if TYPE_CHECKING:
    from coldkeep.core.base.layout import Layout
    from coldkeep.core.events.eventschema import KindsSeen
    from coldkeep.core.files.recovery import RecoveryReport
    from coldkeep.core.ops.plan import EventsPlan, Plan, PlanReport


def months(events: EventsPlan | None) -> dict[str, tuple[int, int]]:
    """Eligible rows per month, every kind together: (rows, approximate bytes),
    oldest month first."""
    per_month: dict[str, tuple[int, int]] = {}
    for m in events.months if events else ():
        rows, size = per_month.get(m.month, (0, 0))
        per_month[m.month] = (rows + m.rows, size + m.approx_bytes)
    return dict(sorted(per_month.items()))


def plan_text(report: PlanReport, layout: Layout) -> str:
    """``coldkeep plan``'s text: files per unit, rows per month, what recovery
    would settle (the first ``LIST_MAX`` of each list)."""
    plan = report.plan
    lines = _files(plan) + _events(plan) + _recovery(report.recovery, layout)
    return "\n".join(lines)


def _files(p: Plan) -> list[str]:
    lines = [f"files: {p.files} eligible, {human(p.bytes)}"]
    skipped = ", ".join(f"{n} {why}" for why, n in sorted(p.skipped.items()))
    if skipped:
        lines.append(f"  skipped: {skipped}")
    for u in p.units[:LIST_MAX]:
        files = "file " if u.files == 1 else "files"
        lines.append(f"  {u.unit:<30} {u.files:>6} {files} {human(u.bytes):>10}")
    if len(p.units) > LIST_MAX:
        more = plural(len(p.units) - LIST_MAX, "more unit")
        lines.append(f"  … and {more} (--json for all)")
    return lines


def _events(p: Plan) -> list[str]:
    lines = []
    if p.events is not None:
        ev = p.events
        lines.append(f"events: {plural(ev.rows, 'row')} eligible (~{human(ev.approx_bytes)})")
        lines += [
            f"  {month} {rows:>10} {'row' if rows == 1 else 'rows'}"
            for month, (rows, _) in months(ev).items()
        ]
        if ev.unparsable:
            lines.append(f"  {plural(ev.unparsable, 'row')} with unparsable time stamps stay live")
        lines.append(f"  index: {ev.index}" if ev.index else f"  note: {ev.note}")
        if ev.kinds is not None:
            lines += kinds_lines(ev.kinds)
    if p.events_error:
        lines.append(f"events: {p.events_error}")
    return lines


def _some(kinds: list[str], most: int = 8) -> str:
    shown = ", ".join(kinds[:most])
    return shown + (f", … ({len(kinds) - most} more)" if len(kinds) > most else "")


def kinds_lines(kinds: KindsSeen) -> list[str]:
    """The kinds the table has and those events.kinds archives, where they differ."""
    if not kinds.differ:
        return []
    lines = [
        f"  kinds: the table has {plural(len(kinds.in_table), 'kind')}"
        + (f" ({_some(list(kinds.in_table))})" if kinds.in_table else "")
        + f"; events.kinds archives {_some(kinds.moving) or 'none of them'}"
    ]
    if kinds.staying:
        lines.append(f"  kinds staying live: {_some(kinds.staying)}")
    if kinds.not_in_table:
        lines.append(
            f"  events.kinds names kinds with no row in the table: {_some(kinds.not_in_table)}"
        )
    return lines


def _recovery(rec: RecoveryReport, layout: Layout) -> list[str]:
    lines = []
    if rec.busy:
        lines.append(
            f"in flight: the archive is locked by {rec.busy}; its "
            f"{plural(rec.in_flight, 'partial')} {'is' if rec.in_flight == 1 else 'are'} "
            "work in progress, not leftovers"
        )
    if not rec.anything:
        return lines
    interrupted = (
        f", {plural(len(rec.interrupted), 'pass', 'passes')} to mark interrupted"
        if rec.interrupted
        else ""
    )
    unlink = plural(len(rec.sources_unlinked), "source", "sources")
    lines.append(
        f"recovery: {plural(len(rec.partials), 'partial')}, {plural(len(rec.orphans), 'orphan')}, "
        f"{len(rec.missing)} MISSING, {unlink} to unlink{interrupted}"
    )
    found = [
        *(("partial", layout.rel(x)) for x in rec.partials),
        *(("orphan", layout.rel(o.gz)) for o in rec.orphans),
        *(("MISSING", e.gz_path) for e in rec.missing),
    ]
    lines += [f"  {what:<8} {path}" for what, path in found[:LIST_MAX]]
    if len(found) > LIST_MAX:
        lines.append(f"  … and {len(found) - LIST_MAX} more (--json for all)")
    return lines


def pass_summary(report: PlanReport) -> str:
    """What a pass in mode on will do, for its confirmation: the files, the rows,
    and what its recovery will settle first."""
    plan, rec = report.plan, report.recovery
    per_month = months(plan.events)
    rows = sum(n for n, _ in per_month.values())
    summary = (
        f"{plural(plan.files, 'file')} ({human(plan.bytes)}) in "
        f"{plural(len(plan.units), 'unit')} will be archived; {rows:,} event "
        f"{'row' if rows == 1 else 'rows'} in {plural(len(per_month), 'month')} will move."
    )
    fixes = []
    if rec.partials:
        fixes.append(f"remove {plural(len(rec.partials), 'leftover partial')}")
    if rec.orphans:
        orphans = plural(len(rec.orphans), "orphan gzip")
        fixes.append(f"re-verify {orphans} (a corrupt one is deleted)")
    if rec.sources_unlinked:
        live = plural(len(rec.sources_unlinked), "live file")
        fixes.append(f"remove {live} already archived")
    if fixes:
        summary += "\nRecovery will " + "; ".join(fixes) + "."
    return summary


def pass_rows(plan: Plan) -> list[tuple[str, str, str]]:
    """The confirmation's rows: each unit's files, then each month's rows."""
    rows = [(u.unit, str(u.files), human(u.bytes)) for u in plan.units]
    return rows + [(f"rows {month}", f"{n:,}", "") for month, (n, _) in months(plan.events).items()]


def pass_warning(plan: Plan) -> str:
    return (
        f"Each live file is REMOVED once its gzip is verified and recorded "
        f"({plan.files} files); event rows leave state.db once archived."
    )
