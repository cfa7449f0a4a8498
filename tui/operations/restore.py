"""The operations that put archived data back: ``restore`` (files, to their live
paths or under ``--to``; with ``--list`` only what a selection names) and
``restore-events`` (event rows, never over a live row).

In the console both start from the restore browser, which asks first and sends
the call up (``restore_files``, ``restore_months``): they have no action here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.cancel import CancelToken
from coldkeep.core.events.query import TimeRange, parse_range
from coldkeep.core.events.restore import ArchivedMonth, EventsRestoreReport
from coldkeep.core.files.restore import RestoreReport, Selection
from coldkeep.core.remote.cold import TIERS
from coldkeep.core.store.entries import Entry

from ..text.fmt import day, human, plural, shown
from .spec import ID, Operation, Options, Run, Words, identity_option, parse_when, unsealing

# restore ----------------------------------------------------------------------

DEFAULT_THAW_DAYS = 7


def selection_params() -> tuple[click.Parameter, ...]:
    """The options that select archived files, as ``restore`` and ``thaw`` take them."""
    return (
        click.Argument(["ids"], nargs=-1, type=ID),
        click.Option(["--unit"], help="Every file of this unit."),
        click.Option(["--path", "glob"], metavar="GLOB", help="Relative paths matching this glob."),
        click.Option(["--sha"], metavar="PREFIX", help="Files whose sha256 starts with this."),
        click.Option(
            ["--after"], metavar="DATE", help="Files last modified at or after DATE (local time)."
        ),
        click.Option(
            ["--before"], metavar="DATE", help="Files last modified before DATE (local time)."
        ),
        click.Option(
            ["--all-versions"], is_flag=True, help="Every archived version, not just the newest."
        ),
    )


@dataclass(frozen=True)
class Listing:
    """``restore --list``: the entries a selection names (no lock, nothing written)."""

    entries: list[Entry]

    def to_dict(self) -> list[dict[str, Any]]:
        fields = (
            "id", "status", "bytes", "mtime_ns", "relpath", "sha256",
            "gz_path", "member_offset", "member_length", "expired_at",
        )  # fmt: skip
        return [{k: getattr(e, k) for k in fields} for e in self.entries]


def _listed(listing: Listing) -> str:
    text = plural(len(listing.entries), "entry", "entries")
    expired = sum(e.status == "expired" for e in listing.entries)
    return text + (f" ({expired} expired)" if expired else "")


def _listed_line(e: Entry) -> str:
    line = (
        f"{e.id:>8}  {e.status:<9} {human(e.bytes):>10}  "
        f"{datetime.fromtimestamp(e.mtime_ns / 1e9).isoformat(timespec='seconds')}  "
        f"{shown(e.relpath)}"
    )
    if e.status != "expired":
        return line
    when = f" {day(e.expired_at)}" if e.expired_at is not None else ""
    return f"{line}  (expired{when}; sha256 {e.sha256})"


def _listing_text(listing: Listing) -> str:
    return "\n".join([*map(_listed_line, listing.entries), _listed(listing)])


async def _listing(archiver: Archiver, selection: Selection) -> Listing:
    return Listing(await archiver.select(selection))


def restore_files(selection: Selection, to: Path | None) -> Run:
    """Files back: to their live paths, or under ``to``."""
    return lambda archiver, cancel: archiver.restore(selection, to, cancel)


def selection_of(options: Options) -> Selection:
    """The entries ``selection_params`` name."""
    return Selection(
        ids=options["ids"],
        unit=options["unit"],
        glob=options["glob"],
        sha=options["sha"],
        after_ns=parse_when(options["after"], "--after"),
        before_ns=parse_when(options["before"], "--before"),
        all_versions=options["all_versions"],
    )


def thaw_params() -> tuple[click.Parameter, ...]:
    """``--tier`` and ``--days``, as ``thaw`` and ``restore --thaw`` take them."""
    return (
        click.Option(
            ["--tier"],
            type=click.Choice(TIERS),
            default="standard",
            show_default=True,
            help="How fast a thaw is, and at what price (DEEP_ARCHIVE has no expedited tier).",
        ),
        click.Option(
            ["--days"],
            type=click.IntRange(1, 30_000),
            default=DEFAULT_THAW_DAYS,
            show_default=True,
            help="How long the thawed copies stay readable.",
        ),
    )


def _restore(options: Options) -> Run:
    selection = selection_of(options)
    if options["thaw"]:
        if options["list_only"]:
            raise click.UsageError("--thaw restores: it does not go with --list")
        to, tier, days = options["to"], options["tier"], options["days"]
        return unsealing(
            options["identity"],
            lambda archiver, cancel: archiver.restore_thawing(selection, to, tier, days, cancel),
        )
    if options["list_only"]:
        return lambda archiver, cancel: _listing(archiver, selection)
    return unsealing(options["identity"], restore_files(selection, options["to"]))


def _restore_line(r: RestoreReport) -> str:
    if r.nothing_archived:
        return "nothing archived yet (no coldkeep.db): nothing to restore"
    return r.said


def _restore_detail(r: RestoreReport) -> list[str]:
    return [
        f"{f.result:<9} {f.relpath}"
        + (f" -> {f.target}" if f.target else "")
        + (f"  ({f.detail})" if f.detail and f.result != "restored" else "")
        for f in r.files
    ]


RESTORE = Operation(
    "restore",
    "Restore archived files: by entry IDS, --unit, --path, --sha or time range.\n\n"
    "To their live paths (never over an existing file; held from the next passes\n"
    "for hold_days) or, with --to, under another directory.",
    bind=_restore,
    params=(
        *selection_params(),
        click.Option(
            ["--to"],
            type=click.Path(path_type=Path, file_okay=False),
            help="Restore under this directory instead of to the live paths.",
        ),
        click.Option(
            ["--thaw"],
            is_flag=True,
            help="Files whose only copy is in GLACIER or DEEP_ARCHIVE: ask for their thaw "
            "(as thaw --yes) and restore once it is done (coldkeep run does it; now when none "
            "has to be waited for). Sealed copies need --identity: its path is recorded and "
            "coldkeep run reads the file when it restores.",
        ),
        *thaw_params(),
        click.Option(
            ["--list", "list_only"],
            is_flag=True,
            help="Only list what the selection names (entry id, status, size, modified, path); "
            "takes no lock, writes nothing.",
        ),
        identity_option(),
    ),
    words=(
        Words(RestoreReport, _restore_line, failed=lambda r: r.failed, detail=_restore_detail),
        Words(Listing, _listed, text=_listing_text),
    ),
)

# restore-events ---------------------------------------------------------------


def _events_restored(r: EventsRestoreReport) -> str:
    return (
        f"{r.restored:,} {'row' if r.restored == 1 else 'rows'} restored, "
        f"{r.already_live:,} already live, {plural(len(r.conflicts), 'conflict')}"
    )


def _restore_events(options: Options) -> Run:
    kinds, months = set(options["kinds"]) or None, list(options["months"]) or None
    span = None
    if options["start"] or options["end"]:
        span = parse_range(options["start"], options["end"])
    return unsealing(
        options["identity"],
        lambda archiver, cancel: archiver.restore_events(kinds, months, cancel, span),
    )


def restore_months(months: list[ArchivedMonth]) -> Run:
    """The restore browser's choice of rows: each month with its own kinds, one
    call per month, added up in one report."""
    kinds_of: dict[str, set[str]] = {}
    for m in months:
        kinds_of.setdefault(m.month, set()).add(m.kind)

    async def run(archiver: Archiver, cancel: CancelToken) -> EventsRestoreReport:
        total = EventsRestoreReport()
        for month, kinds in sorted(kinds_of.items()):
            report = await archiver.restore_events(kinds, [month], cancel)
            total.restored += report.restored
            total.already_live += report.already_live
            total.conflicts += report.conflicts
            total.months += report.months
        return total

    return run


def restore_span(kinds: Sequence[str], span: TimeRange) -> Run:
    """The Events screen's choice of rows: its kinds (none: every kind) whose
    time stamps lie in its range, from every archived month the range holds."""
    chosen = set(kinds) or None
    return lambda archiver, cancel: archiver.restore_events(chosen, None, cancel, span)


RESTORE_EVENTS = Operation(
    "restore-events",
    "Put archived event rows back into the live table (held for hold_days).\n\n"
    "A live row with the same id is never overwritten: same content counts as\n"
    "already there, other content is reported as a conflict.",
    bind=_restore_events,
    params=(
        click.Option(
            ["--kind", "kinds"], multiple=True, help="Only rows of this kind (repeatable)."
        ),
        click.Option(
            ["--month", "months"], multiple=True, metavar="YYYY-MM", help="Only this month."
        ),
        click.Option(
            ["--from", "start"],
            metavar="YYYY-MM[-DD]",
            help="Only rows from this month or day (UTC): the months before are not read.",
        ),
        click.Option(
            ["--to", "end"],
            metavar="YYYY-MM[-DD]",
            help="Only rows through this month or day (UTC, included).",
        ),
        identity_option(),
    ),
    words=(
        Words(
            EventsRestoreReport,
            _events_restored,
            failed=lambda r: bool(r.conflicts or r.refused),
            detail=lambda r: (
                [c.detail for c in r.conflicts]
                + [f"refused {m}: {why}" for m, why in r.refused.items()]
            ),
        ),
    ),
)

OPERATIONS = (RESTORE, RESTORE_EVENTS)
