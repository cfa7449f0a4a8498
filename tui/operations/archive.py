"""The operations on the live tree and the archive: ``pass`` (files and event
rows archived, after recovery), ``recover`` (what a crash left, settled),
``adopt`` (orphan gzips settled) and ``sweep`` (leftover partials removed).

A pass in mode on, adopt and sweep each ask in the console with exactly what
they will remove; a pass in mode plan only counts, and starts at once.
"""

from __future__ import annotations

from collections import Counter

import click

from coldkeep.core.base.config import Settings
from coldkeep.core.base.errors import EXIT_FAILED, EXIT_OK
from coldkeep.core.files.recovery import AdoptReport, RecoveryReport, SweepReport
from coldkeep.core.ops.passes import EventsMoved, EventsPlanned, PassSummary
from coldkeep.core.ops.plan import PlanReport

from ..text.fmt import LIST_MAX, adopted, human, plural
from ..text.plan import pass_rows, pass_summary, pass_warning
from .spec import (
    Console,
    ConsoleAction,
    Gate,
    Nothing,
    Operation,
    Options,
    Question,
    Run,
    Site,
    Words,
)

# pass -------------------------------------------------------------------------


def _pass_headline(s: PassSummary) -> str:
    f = s.files
    if s.mode == "plan":
        text = (
            f"{s.status}: {plural(f.eligible, 'file')} eligible, {human(f.eligible_bytes)}; "
            "nothing archived"
        )
    else:
        text = (
            f"{s.status}: {plural(f.archived, 'file')} {human(f.bytes_in)} → {human(f.bytes_out)}"
        )
    if isinstance(s.events, EventsMoved):
        moved = s.events.moved
        text += f", {moved:,} {'row' if moved == 1 else 'rows'}"
    if s.new_problems:
        text += f"; {plural(len(s.new_problems), 'file problem')} (coldkeep status)"
    return text + "".join(f"; {p}" for p in s.problems[:2])


def _pass_text(s: PassSummary) -> str:
    """The CLI's text: how it ended first (as the runbook shows it), then each part."""
    f = s.files
    lines = [f"pass {s.pass_id or '-'} ({s.mode}): {s.status} in {s.seconds:.1f} s"]
    if s.mode == "plan":
        lines.append(
            f"  files: {f.eligible} eligible, {human(f.eligible_bytes)}; nothing "
            'archived (mode = "plan"; coldkeep plan lists them)'
        )
    else:
        lines.append(
            f"  files: {f.archived} archived{adopted(s.recovery)}, "
            f"{human(f.bytes_in)} -> {human(f.bytes_out)}; "
            f"{f.changed} changed, {plural(f.verify_failed, 'verify failure')}, "
            f"{plural(f.errors, 'error')}"
        )
    skipped = ", ".join(f"{n} {why}" for why, n in sorted(f.skipped.items()))
    if skipped:
        lines.append(f"  skipped: {skipped}")
    lines += _pass_recovery(s) + _pass_problems(s) + _pass_events(s)
    return "\n".join(lines + [f"  ATTENTION: {p}" for p in s.problems])


def _pass_problems(s: PassSummary) -> list[str]:
    """The files this pass left as they were: each its reason, then the remedy."""
    found = s.new_problems
    lines = []
    for p in found[:LIST_MAX]:
        lines += [f"  problem: {p['relpath']}: {p['reason']}", f"    -> {p['remedy']}"]
    if len(found) > LIST_MAX:
        lines.append(f"  … and {len(found) - LIST_MAX} more (coldkeep status)")
    return lines


def _pass_recovery(s: PassSummary) -> list[str]:
    rec = {k: v for k, v in s.recovery.items() if v}
    if not rec:
        return []
    if s.mode != "plan":
        return ["  recovery: " + ", ".join(f"{k} {v}" for k, v in rec.items())]
    todo = {
        "partial": rec.get("partials_removed", 0),
        "orphan": rec.get("orphans_found", 0),
        "MISSING": rec.get("missing", 0),
        "source to unlink": rec.get("sources_unlinked", 0),
    }
    said = {"MISSING": "MISSING", "source to unlink": "sources to unlink"}
    return [
        "  recovery, not done: "
        + ", ".join(plural(n, w, said.get(w)) for w, n in todo.items() if n)
    ]


def _pass_events(s: PassSummary) -> list[str]:
    ev = s.events
    if isinstance(ev, EventsPlanned):
        return [f"  events: {plural(ev.eligible_rows, 'row')} eligible"]
    if not isinstance(ev, EventsMoved):
        return []
    lines = [
        f"  events: {plural(ev.moved, 'row')} moved, {ev.already_archived} already archived, "
        f"{plural(ev.conflicts_total, 'conflict')}, WAL peak {human(ev.wal_peak)}, "
        f"{plural(ev.checkpoints, 'checkpoint')}"
    ]
    lines += [f"    conflict: {c.detail}" for c in ev.conflicts[:LIST_MAX]]
    more = ev.conflicts_total - LIST_MAX
    if more > 0 and ev.conflicts_total == len(ev.conflicts):
        lines.append(f"    … and {more} more (--json)")
    elif more > 0:
        listed = len(ev.conflicts)
        lines.append(
            f"    … and {more} more (--json lists the first {listed}; "
            "the next passes list the rest once these are settled)"
        )
    return lines


def _pass_gate(settings: Settings) -> Gate:
    if settings.mode == "off":
        return Nothing('mode = "off" in the config: passes are disabled', severity="error")
    return "run" if settings.mode == "plan" else "ask"


async def _ask_pass(site: Site) -> tuple[PlanReport, Question]:
    report = await site.archiver.plan()
    return report, Question(
        "Run a pass (mode on)",
        pass_summary(report),
        columns=("Unit / month", "Files / rows", "Size"),
        rows=list(pass_rows(report.plan)),
        warning=pass_warning(report.plan),
        confirm="Run the pass",
    )


def _run_pass(_: object) -> Run:
    return lambda archiver, cancel: archiver.run_pass(cancel)


PASS = Operation(
    "pass",
    "Run one pass: recovery, then eligible files, then eligible event rows.\n\n"
    'In mode "plan" it only counts; in mode "off" it refuses.',
    bind=_run_pass,
    words=(
        Words(
            PassSummary,
            _pass_headline,
            failed=lambda s: s.status != "ok",
            text=_pass_text,
            exit=lambda s: EXIT_OK if s.status in ("ok", "cancelled") else EXIT_FAILED,
        ),
    ),
    console=Console(
        ConsoleAction(
            "run_pass",
            "p",
            "Pass",
            "Run a pass: shows the plan and asks before it removes anything",
            mutating=True,
            place=10,
        ),
        start=_run_pass,
        ask=_ask_pass,
        gate=_pass_gate,
    ),
)

# recover ----------------------------------------------------------------------


def _recovered(r: RecoveryReport) -> str:
    done = {k: v for k, v in r.to_dict().items() if v}
    return ", ".join(f"{k} {v}" for k, v in done.items()) or "nothing to do"


def _recovery_detail(r: RecoveryReport) -> list[str]:
    # What needs a look: orphans left as found, gzips gone.
    return [f"{o.outcome:<9} {o.gz}  ({o.detail})" for o in r.errors] + [
        f"MISSING   {e.gz_path}  (entry {e.id}, {e.relpath})" for e in r.missing
    ]


RECOVER = Operation(
    "recover",
    "Settle what a crash left: partials, orphans, unfinished restores.",
    bind=lambda options: lambda archiver, cancel: archiver.recover(cancel),
    words=(
        Words(
            RecoveryReport,
            _recovered,
            failed=lambda r: bool(r.errors or r.missing),
            detail=_recovery_detail,
        ),
    ),
)

# adopt ------------------------------------------------------------------------


def _adopt(options: Options) -> Run:
    if bool(options["gz"]) == options["all_"]:
        raise click.UsageError("name orphan gzips, or pass --all")
    gz = None if options["all_"] else list(options["gz"])
    return lambda archiver, cancel: archiver.adopt(gz, cancel)


async def _ask_adopt(site: Site) -> tuple[tuple[str, ...], Question | Nothing]:
    targets = site.orphans
    if not targets:
        return targets, Nothing(
            "no orphan gzip to adopt (select one in Orphans & stale)", severity="warning"
        )
    return targets, Question(
        f"Adopt {plural(len(targets), 'orphan gzip')}",
        "Each is re-read and compared with its live source: the same bytes → "
        "entry written and the source removed; other bytes → kept as a stale version.",
        columns=("Gzip",),
        rows=[(t,) for t in targets],
        warning="A gzip that does not decompress is DELETED (its live source stays).",
        confirm="Adopt",
    )


def _adopted(r: AdoptReport) -> str:
    counts = Counter(o.outcome for o in r.orphans)
    return ", ".join(f"{n} {o}" for o, n in sorted(counts.items())) or "nothing to adopt"


ADOPT = Operation(
    "adopt",
    "Settle orphan gzips (GZ: paths relative to archive_root, as plan lists them).",
    bind=_adopt,
    params=(
        click.Argument(["gz"], nargs=-1),
        click.Option(["--all", "all_"], is_flag=True, help="Every orphan gzip."),
    ),
    words=(
        Words(
            AdoptReport,
            _adopted,
            failed=lambda r: r.failed,
            detail=lambda r: [
                f"{o.outcome:<9} {o.relpath}  ({o.detail or o.gz})" for o in r.orphans
            ],
        ),
    ),
    console=Console(
        ConsoleAction(
            "adopt",
            "a",
            "Adopt",
            "Settle the selected orphan gzip (shows what will happen)",
            mutating=True,
            place=70,
        ),
        start=lambda targets: lambda archiver, cancel: archiver.adopt(list(targets), cancel),
        ask=_ask_adopt,
    ),
)

# sweep ------------------------------------------------------------------------


async def _ask_sweep(site: Site) -> tuple[PlanReport, Question | Nothing]:
    report = await site.archiver.plan()
    rec, layout = report.recovery, site.archiver.layout
    paths = [layout.rel(p) for p in rec.partials] + [str(p) for p in rec.restore_partials]
    if not paths:
        return report, Nothing("nothing to sweep: no leftover partials")
    return report, Question(
        f"Sweep {plural(len(paths), 'leftover')}",
        "These temporary files were left by an interrupted write or restore:",
        columns=("Path",),
        rows=[(p,) for p in paths],
        warning="They will be DELETED. None of them holds data found nowhere else.",
        confirm="Delete them",
    )


def _sweep(_: object) -> Run:
    return lambda archiver, cancel: archiver.sweep()


SWEEP = Operation(
    "sweep",
    "Remove leftover .partial files and unfinished restores' partials.",
    bind=_sweep,
    words=(
        Words(
            SweepReport,
            lambda r: f"{len(r.removed)} removed",
            detail=lambda r: [f"removed {p}" for p in r.removed],
        ),
    ),
    console=Console(
        ConsoleAction(
            "sweep",
            "s",
            "Sweep",
            "Remove leftover partials (shows the exact paths first)",
            mutating=True,
            place=80,
        ),
        start=_sweep,
        ask=_ask_sweep,
    ),
)

OPERATIONS = (PASS, RECOVER, ADOPT, SWEEP)
