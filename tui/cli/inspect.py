"""The commands that read and change nothing, and take no lock: ``status`` (what
is archived, who holds the lock, the last passes, the remote tier), ``plan``
(the backlog and what recovery would settle) and ``history`` (the audit, or
the scheduler's job runs).
"""

from __future__ import annotations

from datetime import datetime
from functools import partial
from pathlib import Path

import click

from coldkeep.core.base.configprices import usd
from coldkeep.core.base.errors import EXIT_FAILED, EXIT_OK
from coldkeep.core.base.layout import Layout
from coldkeep.core.base.times import now_ms
from coldkeep.core.ops.siteops import SiteIdentity
from coldkeep.core.ops.status import RemoteState, Status
from coldkeep.core.ops.trends import MAX_DAYS
from coldkeep.core.store.audit import AuditRecord
from coldkeep.core.store.audit import history as audit_history
from coldkeep.core.store.jobruns import JobRun, job_history
from coldkeep.core.store.manifest import Manifest

from ..text.fmt import LIST_MAX, adopted, classes_said, event_rows, human, plural, thaws_said
from ..text.plan import plan_text
from .kit import command, ctx_for, run_command

# Characters of an action's detail on its history line: a refusal's holder and
# its command line, or an error's line, fit whole; a failed run's summary (JSON,
# up to 2,000) is cut, and ``--full`` or ``--json`` shows it.
DETAIL_SHOWN = 400


@click.command()
@command()
@click.option(
    "--days",
    type=click.IntRange(1, MAX_DAYS),
    default=30,
    show_default=True,
    help="With --json: the UTC days its trends cover.",
)
def status(config: Path | None, json_out: bool, days: int) -> None:
    """What is archived, who holds the lock, the last passes."""
    ctx = ctx_for(config, json_out)

    async def go() -> int:
        archiver = ctx.archiver()
        st = await archiver.status()
        bad = st.verify_failures > 0 or "missing" in st.entries
        result = st.to_dict()
        if json_out:  # the text leaves the charts to the console: not read for it
            result["trends"] = (await archiver.trends(days)).to_dict()
        ctx.emit("status", not bad, result, lambda: _status_text(st))
        return EXIT_FAILED if bad else EXIT_OK

    run_command(go(), ctx)


def _status_text(st: Status) -> str:
    lines = [
        f"config        {st.config}",
        f"live_root     {st.live_root}",
        f"archive_root  {st.archive_root}",
        f"mode          {st.mode}",
    ]
    if st.holder:
        state = "running" if st.holder_alive else "stale record, free"
        lines.append(f"lock          {st.holder.describe()} [{state}]")
    else:
        lines.append("lock          free")
    for name, (n, b, g) in sorted(st.entries.items()):
        files = "file " if n == 1 else "files"
        lines.append(f"{name:<13} {n:>8} {files}  {human(b)} -> {human(g)}")
    if not st.entries:
        lines.append("archive       empty (no pass has run)")
    if st.verify_failures:
        failed = plural(st.verify_failures, "entry", "entries")
        lines.append(f"VERIFY FAILED {failed} (coldkeep verify)")
    if st.restore_intents:
        lines.append(f"unfinished restores: {st.restore_intents} (coldkeep recover)")
    if st.file_problems:
        lines += _problem_lines(st)
    if st.site is not None:
        lines += _site_lines(st.site)
    if st.remote is not None:
        lines += _remote_lines(st.remote)
    for p in st.last_passes[:3]:
        when = datetime.fromtimestamp(p.started_at / 1000).strftime("%Y-%m-%d %H:%M")
        files = plural(p.summary.get("files", {}).get("archived", 0), "file")
        more = adopted(p.summary.get("recovery", {}))  # entered, not archived by the pass
        lines.append(f"pass {p.id:<8} {when} {p.status:<9} {files}{more}")
    return "\n".join(lines)


def _problem_lines(st: Status) -> list[str]:
    """The quarantined files: each its reason, then what to do about it."""
    found = st.file_problems
    lines = [f"FILE PROBLEMS {plural(len(found), 'file')} (left as they were; the rest went on)"]
    for p in found[:LIST_MAX]:
        seen = f"{plural(p.times, 'pass', 'passes')}"
        lines.append(f"  {p.relpath}: {p.reason} [{p.kind}, {seen}]")
        lines.append(f"    -> {p.remedy}")
    if len(found) > LIST_MAX:
        lines.append(f"  … and {len(found) - LIST_MAX} more (coldkeep status --json)")
    return lines


def _site_lines(site: SiteIdentity) -> list[str]:
    """The site's id and key: what to write down beside the identity file."""
    key = site.key or "none yet (the first ship makes it)"
    lines = [f"site id       {site.site_id}", f"site key      {key}"]
    if site.key_problem:
        lines.append(f"  SITE KEY    {site.key_problem}")
    return lines


def _months_named(r: RemoteState) -> str:
    months = list(r.pending_events.months)
    if not months:
        return ""
    more = f", … {len(months) - LIST_MAX} more" if len(months) > LIST_MAX else ""
    return f" ({', '.join(months[:LIST_MAX])}{more}; coldkeep ship)"


def _remote_lines(r: RemoteState) -> list[str]:
    t = r.totals
    lines = [
        f"remote        {r.url}/{r.site}",
        f"  shipped     {t.shipped:>8} {'object ' if t.shipped == 1 else 'objects'}  "
        f"{human(t.shipped_bytes)}"
        f" ({t.remote_only} only there, {human(t.remote_only_bytes)})",
        f"  pending     {t.pending_files:>8} {'file ' if t.pending_files == 1 else 'files'}  "
        f"({plural(t.pending_entries, 'entry', 'entries')}; coldkeep ship)",
        f"  pending     {event_rows(r.pending_events, 8)}{_months_named(r)}",
    ]
    if r.object_lock != "off" or r.locked or r.legal_held:
        expired = f"{r.locked_expired} of them expired here, " if r.locked_expired else ""
        lines.append(
            f"  locked      {r.locked:>8} {'object ' if r.locked == 1 else 'objects'}  "
            f"(object_lock {r.object_lock}; {expired}{r.legal_held} under legal holds; as "
            "read back when shipped, manifest snapshots not counted)"
        )
    if r.sealed_to is not None or r.sealed:
        to = f"sealed to set {r.sealed_to}" if r.sealed_to else "encrypt_to is not set"
        lines.append(
            f"  encrypted   {r.sealed:>8} {'object ' if r.sealed == 1 else 'objects'}  "
            f"(new ones {to}; coldkeep rekey after a change)"
        )
    if r.classes:
        lines.append(f"  by class    {classes_said(r.classes)} a month (estimates)")
    if r.lake is not None:
        waiting = f"; {r.lake.superseded} superseded, to delete" if r.lake.superseded else ""
        lines.append(
            f"  lake        {r.lake.months:>8} {'month  ' if r.lake.months == 1 else 'months '} "
            f"{human(r.lake.bytes)} (Parquet in the fleet's lake{waiting}; coldkeep lake export)"
        )
    if r.cold is not None:
        c = r.cold
        thawing = thaws_said(c, now_ms())
        thawing = f"; {thawing} (coldkeep thaw shows them)" if thawing else ""
        lines.append(
            f"  cold        {c.objects:>8} {'object ' if c.objects == 1 else 'objects'}  "
            f"{human(c.bytes)} in {c.storage_class}, ~{usd(c.usd_a_month)} a month (estimate)"
            f"{thawing}"
        )
    if t.verify_failed:
        failed = plural(t.verify_failed, "object")
        lines.append(f"  REMOTE VERIFY FAILED {failed} (coldkeep verify --remote)")
    if r.last_ship is not None:
        when = datetime.fromtimestamp(r.last_ship.at / 1000).strftime("%Y-%m-%d %H:%M")
        lines.append(f"  last ship   {when} {r.last_ship.outcome}")
    return lines


@click.command()
@command()
def plan(config: Path | None, json_out: bool) -> None:
    """The backlog and what recovery would do. Writes nothing, takes no lock."""
    ctx = ctx_for(config, json_out)

    async def go() -> int:
        archiver = ctx.archiver()
        report = await archiver.plan()
        text = partial(plan_text, report, archiver.layout)
        ctx.emit("plan", True, report.to_dict(archiver.layout), text)
        return EXIT_OK

    run_command(go(), ctx)


@click.command()
@command()
@click.option(
    "--limit", type=click.IntRange(min=1), default=50, show_default=True, help="How many records."
)
@click.option("--jobs", "jobs_", is_flag=True, help="The scheduler's job runs instead.")
@click.option(
    "--full",
    is_flag=True,
    help=f"Each action's detail whole (text cuts one at {DETAIL_SHOWN} characters; "
    "--json never does).",
)
def history(config: Path | None, json_out: bool, limit: int, jobs_: bool, full: bool) -> None:
    """Who did what to the archive, and how it ended (or the scheduler's runs).

    Times are local; so are the times among an action's arguments (a hold's
    until=, restore's after_ns=), which --json gives as recorded (numbers)."""
    ctx = ctx_for(config, json_out)

    async def go() -> int:
        opened = await Manifest.open_existing(Layout(ctx.settings.archive_root).manifest)
        if opened is None:
            ctx.emit("history", True, [], lambda: "no history yet (no manifest)")
            return EXIT_OK
        async with opened as manifest:
            if jobs_:
                runs = await job_history(manifest, limit)
                result = [r.to_dict() for r in runs]
                text = partial(_runs_text, runs)
            else:
                records = await audit_history(manifest, limit)
                result = [r.to_dict() for r in records]
                text = partial(_audit_text, records, full)
        ctx.emit("history", True, result, text)
        return EXIT_OK

    run_command(go(), ctx)


def _runs_text(runs: list[JobRun]) -> str:
    return (
        "\n".join(
            f"{datetime.fromtimestamp(r.started_at / 1000):%Y-%m-%d %H:%M} "
            f"{r.job:<7} {r.trigger:<8} {r.describe()}"
            for r in runs
        )
        or "no job runs yet"
    )


def _detail(r: AuditRecord, full: bool) -> str:
    """Why an action did not end ok, on its line: a refusal's holder, an error's
    line whole; a longer one (a failed run's summary, as JSON) cut, saying how
    to see it all."""
    if not r.detail or r.outcome == "ok":
        return ""
    said = " ".join(r.detail.split())
    if not full and len(said) > DETAIL_SHOWN:
        said = f"{said[:DETAIL_SHOWN]}… {len(said)} characters: history --full shows them"
    return f"  ({said})"


def _audit_text(records: list[AuditRecord], full: bool) -> str:
    return (
        "\n".join(
            f"{datetime.fromtimestamp(r.at / 1000):%Y-%m-%d %H:%M} "
            f"{r.user}@{r.host} pid {r.pid} {r.origin:<9} {r.action:<15} "
            f"{r.outcome:<9} {r.describe_args()}".rstrip()
            + _detail(r, full)
            for r in records
        )
        or "no actions recorded yet"
    )
