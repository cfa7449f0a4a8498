"""Each operation's result in words, written once: the CLI's text output and the
console's one-line summaries both come from here. (The JSON output is the
results' own data, docs/json.md.)

``headline(result)`` is one line: the console's notification and in-flight line,
and the last line of the CLI's text. ``report(result)`` is the CLI's whole text:
what needs a look first, one line each, then the headline.
"""

from __future__ import annotations

from collections import Counter
from typing import assert_never

from coldkeep.core.base.stream import CheckpointRan
from coldkeep.core.events.restore import EventsRestoreReport
from coldkeep.core.files.rebuild import RebuildReport
from coldkeep.core.files.recovery import AdoptReport, RecoveryReport, SweepReport
from coldkeep.core.files.restore import RestoreReport
from coldkeep.core.files.verify import VerifyReport
from coldkeep.core.ops.expire import ExpireReport
from coldkeep.core.ops.passes import EventsMoved, EventsPlanned, PassSummary, recovery_counts
from coldkeep.core.remote.rebuild import FromRemoteReport
from coldkeep.core.remote.ship import ShipReport
from coldkeep.core.remote.verify import RemoteVerifyReport
from coldkeep.core.store.jobruns import JobRun

from .fmt import human

# What each operation of the API returns.
OperationResult = (
    PassSummary
    | RecoveryReport
    | AdoptReport
    | SweepReport
    | RestoreReport
    | EventsRestoreReport
    | VerifyReport
    | RebuildReport
    | CheckpointRan
    | ShipReport
    | ExpireReport
    | FromRemoteReport
    | RemoteVerifyReport
    | JobRun
)
# Lists longer than this are cut in the text (--json has them all).
LIST_MAX = 20


def headline(result: OperationResult) -> str:
    match result:
        case PassSummary():
            return _pass_headline(result)
        case RecoveryReport():
            done = {k: v for k, v in recovery_counts(result).items() if v}
            return ", ".join(f"{k} {v}" for k, v in done.items()) or "nothing to do"
        case AdoptReport(orphans=orphans):
            counts = Counter(o.outcome for o in orphans)
            return ", ".join(f"{n} {o}" for o, n in sorted(counts.items())) or "nothing to adopt"
        case SweepReport(removed=removed):
            return f"{len(removed)} removed"
        case RestoreReport():
            counts_text = ", ".join(f"{n} {k}" for k, n in sorted(result.counts.items()))
            return counts_text or "nothing selected"
        case EventsRestoreReport():
            return (
                f"{result.restored:,} rows restored, {result.already_live:,} already live, "
                f"{len(result.conflicts)} conflicts"
            )
        case VerifyReport():
            # A gzip that could not be read proves nothing about its bytes: it is
            # said apart from the ones that failed (and nothing is marked on it).
            unread = sum(p.result == "error" for p in result.problems)
            bad = len(result.problems) - unread
            failed = (f", {bad} FAILED" if bad else "") + (
                f", {unread} could not be read" if unread else ""
            )
            state = "" if result.complete else "; stopped at the deadline, resumes next run"
            return f"{result.ok}/{result.checked} ok{failed}, {human(result.bytes)}{state}"
        case RebuildReport():
            unreadable = f", {len(result.unreadable)} unreadable" if result.unreadable else ""
            refused = f", {len(result.refused)} refused" if result.refused else ""
            return f"{result.entries} entries written to {result.out}{unreadable}{refused}"
        case CheckpointRan():
            if result.error:
                return f"failed: {result.error}"
            return (
                f"busy={result.busy} log={result.log} checkpointed={result.checkpointed} "
                f"{result.ms:.0f} ms, WAL {human(result.wal_before)} → {human(result.wal_after)}"
            )
        case ShipReport():
            parts = [f"{result.uploaded} objects shipped ({human(result.bytes)})"]
            if result.already:
                parts.append(f"{result.already} found there already")
            if result.months:
                parts.append(f"{result.months} event months")
            if result.dropped:
                parts.append(
                    f"{result.dropped} local copies dropped ({human(result.dropped_bytes)})"
                )
            if result.pending:
                parts.append(f"{result.pending} still to ship")
            if result.problems:
                parts.append(f"{len(result.problems)} PROBLEMS")
            return ", ".join(parts)
        case ExpireReport():
            text = (
                f"{len(result.expired)} deleted ({result.files} files, {result.months} event "
                f"months, {human(result.bytes)}); {result.held} kept by holds"
            )
            if result.settled:
                text += f"; {result.settled} interrupted expiries finished"
            return text + (f", {len(result.problems)} PROBLEMS" if result.problems else "")
        case FromRemoteReport():
            source = (
                f"snapshot {result.snapshot}"
                if result.snapshot
                else (f"{result.fetched} archive files fetched")
            )
            text = f"{result.entries} entries from {source}, {result.remote_only} files read "
            text += f"from the remote, {result.months} event months fetched"
            if result.never_shipped:
                text += f"; {len(result.never_shipped)} archive files were NEVER SHIPPED"
            return text + (f"; {len(result.problems)} problems" if result.problems else "")
        case RemoteVerifyReport():
            text = f"{result.ok}/{result.checked} remote copies ok, {human(result.bytes)}"
            if result.reshipped:
                text += f", {len(result.reshipped)} shipped again"
            return text + (f", {len(result.failed)} FAILED" if result.failed else "")
        case JobRun():
            return result.describe()
        case _:
            assert_never(result)


def report(command: str, result: OperationResult) -> str:
    """The CLI's text for ``command``'s result (a pass's summary says how it ended
    in its first line, as the runbook shows it)."""
    if isinstance(result, PassSummary):
        return "\n".join(_pass_detail(result))
    return "\n".join([*_detail(result), f"{command}: {headline(result)}"])


def _pass_headline(s: PassSummary) -> str:
    f = s.files
    if s.mode == "plan":
        text = (
            f"{s.status}: {f.eligible} files eligible, {human(f.eligible_bytes)}; nothing archived"
        )
    else:
        text = f"{s.status}: {f.archived} files {human(f.bytes_in)} → {human(f.bytes_out)}"
    if isinstance(s.events, EventsMoved):
        text += f", {s.events.moved:,} rows"
    return text + "".join(f"; {p}" for p in s.problems[:2])


def _detail(result: OperationResult) -> list[str]:
    match result:
        case RecoveryReport():
            # What needs a look: orphans left as found, gzips gone.
            return [f"{o.outcome:<9} {o.gz}  ({o.detail})" for o in result.errors] + [
                f"MISSING   {e.gz_path}  (entry {e.id}, {e.relpath})" for e in result.missing
            ]
        case AdoptReport(orphans=orphans):
            return [f"{o.outcome:<9} {o.relpath}  ({o.detail or o.gz})" for o in orphans]
        case SweepReport(removed=removed):
            return [f"removed {p}" for p in removed]
        case RestoreReport(files=files):
            return [
                f"{f.result:<9} {f.relpath}"
                + (f" -> {f.target}" if f.target else "")
                + (f"  ({f.detail})" if f.detail and f.result != "restored" else "")
                for f in files
            ]
        case EventsRestoreReport(conflicts=conflicts, refused=refused):
            return [c.detail for c in conflicts] + [
                f"refused {m}: {why}" for m, why in refused.items()
            ]
        case VerifyReport(problems=problems):
            return [f"{p.result:<9} {p.gz_path}  {p.detail}" for p in problems]
        case RebuildReport(unreadable=unreadable, refused=refused):
            return [f"unreadable {u}" for u in unreadable] + [f"refused {r}" for r in refused]
        case ShipReport(problems=problems) | ExpireReport(problems=problems):
            return list(problems)
        case RemoteVerifyReport(reshipped=reshipped, failed=failed):
            return [f"shipped again {p}" for p in reshipped] + list(failed)
        case FromRemoteReport(never_shipped=never, problems=problems):
            return [f"never shipped {p}" for p in never] + list(problems)
    return []


def _pass_detail(s: PassSummary) -> list[str]:
    f = s.files
    lines = [f"pass {s.pass_id or '-'} ({s.mode}): {s.status} in {s.seconds:.1f} s"]
    if s.mode == "plan":
        lines.append(
            f"  files: {f.eligible} eligible, {human(f.eligible_bytes)}; nothing "
            'archived (mode = "plan"; coldkeep plan lists them)'
        )
    else:
        lines.append(
            f"  files: {f.archived} archived, {human(f.bytes_in)} -> {human(f.bytes_out)}; "
            f"{f.changed} changed, {f.verify_failed} verify failures, {f.errors} errors"
        )
    skipped = ", ".join(f"{n} {why}" for why, n in sorted(f.skipped.items()))
    if skipped:
        lines.append(f"  skipped: {skipped}")
    lines += _pass_recovery(s)
    ev = s.events
    if isinstance(ev, EventsMoved):
        lines.append(
            f"  events: {ev.moved} rows moved, {ev.already_archived} already archived, "
            f"{len(ev.conflicts)} conflicts, WAL peak {human(ev.wal_peak)}, "
            f"{ev.checkpoints} checkpoints"
        )
        lines += [f"    conflict: {c.detail}" for c in ev.conflicts[:LIST_MAX]]
        if len(ev.conflicts) > LIST_MAX:
            lines.append(f"    … and {len(ev.conflicts) - LIST_MAX} more (--json)")
    elif isinstance(ev, EventsPlanned):
        lines.append(f"  events: {ev.eligible_rows} rows eligible")
    return lines + [f"  ATTENTION: {p}" for p in s.problems]


def _pass_recovery(s: PassSummary) -> list[str]:
    rec = {k: v for k, v in s.recovery.items() if v}
    if not rec:
        return []
    if s.mode != "plan":
        return ["  recovery: " + ", ".join(f"{k} {v}" for k, v in rec.items())]
    todo = {
        "partials": rec.get("partials_removed", 0),
        "orphans": rec.get("orphans_found", 0),
        "MISSING": rec.get("missing", 0),
        "sources to unlink": rec.get("sources_unlinked", 0),
    }
    return ["  recovery, not done: " + ", ".join(f"{n} {w}" for w, n in todo.items() if n)]
