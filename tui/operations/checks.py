"""The operations that check and rebuild what the archive knows: ``verify``
(gzips re-read against the manifest; with ``--remote`` the remote copies),
``rebuild-manifest`` (a lost coldkeep.db from the gzips, or from the remote
tier) and ``checkpoint`` (one checkpoint of the live database's WAL now).
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from coldkeep.core.base.errors import EXIT_FAILED, EXIT_OK, UsageError
from coldkeep.core.base.signing import parse_fingerprint
from coldkeep.core.base.stream import CheckpointRan
from coldkeep.core.files.rebuild import RebuildReport
from coldkeep.core.files.verify import VerifyReport
from coldkeep.core.remote.months import MonthLost
from coldkeep.core.remote.rebuild import DrChoice, FromRemoteReport, SnapshotList
from coldkeep.core.remote.verify import RemoteVerifyReport

from ..text.fmt import human, plural
from .spec import (
    Console,
    ConsoleAction,
    Operation,
    Options,
    Run,
    Words,
    identity_option,
    unsealing,
)

# verify -----------------------------------------------------------------------


def _verify(options: Options) -> Run:
    sample, max_duration = options["sample"], options["max_duration"]
    deep = options["deep"]
    if (deep or options["identity"]) and not options["remote"]:
        raise UsageError("--deep and --identity read the remote copies: give --remote too")
    if options["remote"]:
        return unsealing(
            options["identity"],
            lambda archiver, cancel: archiver.verify_remote(sample, cancel, deep),
        )
    return lambda archiver, cancel: archiver.verify(sample, max_duration, cancel)


NOTHING_ARCHIVED = "nothing archived yet (no coldkeep.db): nothing to verify"


def _verified(r: VerifyReport) -> str:
    if r.nothing_archived:
        return NOTHING_ARCHIVED
    # A gzip that could not be read proves nothing about its bytes: it is said
    # apart from the ones that failed (and nothing is marked on it).
    unread = sum(p.result == "error" for p in r.problems)
    bad = len(r.problems) - unread
    failed = (f", {bad} FAILED" if bad else "") + (
        f", {unread} could not be read" if unread else ""
    )
    state = "" if r.complete else "; stopped at the deadline, resumes next run"
    remote = (
        f"; {plural(r.remote_only, 'entry', 'entries')} only on the remote, not read "
        "(verify --remote reads them)"
        if r.remote_only
        else ""
    )
    return f"{r.ok}/{r.checked} ok{failed}, {human(r.bytes)}{state}{remote}"


def _remote_verified(r: RemoteVerifyReport) -> str:
    if r.nothing_archived:
        return NOTHING_ARCHIVED
    text = f"{r.ok}/{r.checked} remote copies ok, {human(r.bytes)}"
    if r.reshipped:
        text += f", {len(r.reshipped)} shipped again"
    text += f", {len(r.failed)} FAILED" if r.failed else ""
    if r.lake:
        text += f"; {r.lake_ok}/{r.lake} lake files there as shipped"
    return text + _cold_said(r)


def _cold_said(r: RemoteVerifyReport) -> str:
    """What a remote verify could not read because it is cold, in words."""
    if not r.cold:
        return ""
    return (
        f"; {plural(r.cold, 'cold object')} not thawed: size and S3's checksum match, "
        "bytes not read (coldkeep thaw, then verify again)"
    )


VERIFY = Operation(
    "verify",
    "Re-read archived gzips and compare them with the manifest (or, with\n"
    "--remote, the remote copies with what was shipped).\n\n"
    "--max-duration stops at the deadline and the next run with it resumes where\n"
    "this one stopped; --sample checks a random fraction, drawn afresh each run.\n"
    "With --remote, --sample rotates instead: each run starts where the last one\n"
    "stopped. Entries whose local copy was dropped once shipped are read by\n"
    "--remote only; a local verify says how many it left out.",
    bind=_verify,
    params=(
        click.Option(
            ["--sample"],
            type=click.FloatRange(0, 1, min_open=True),
            help="Check this fraction, chosen at random each run (with --remote: the next "
            "fraction, rotating).",
        ),
        click.Option(
            ["--max-duration"],
            type=float,
            metavar="SECONDS",
            help="Stop after this long; the next run resumes where this one stopped.",
        ),
        click.Option(
            ["--remote"],
            is_flag=True,
            help="Read the remote tier's copies back instead (ranged GETs); a bad one is "
            "shipped again from its local copy, else alerted.",
        ),
        click.Option(
            ["--deep"],
            is_flag=True,
            help="With --remote: open each sealed copy too (with --identity) and compare its "
            "plaintext with the local file's recorded size and sha256.",
        ),
        identity_option(),
    ),
    words=(
        Words(
            VerifyReport,
            _verified,
            failed=lambda r: r.failed,
            detail=lambda r: [f"{p.result:<9} {p.gz_path}  {p.detail}" for p in r.problems],
        ),
        Words(
            RemoteVerifyReport,
            _remote_verified,
            failed=lambda r: bool(r.failed),
            detail=lambda r: [f"shipped again {p}" for p in r.reshipped] + list(r.failed),
        ),
    ),
    console=Console(
        ConsoleAction(
            "verify",
            "v",
            "Verify",
            "Re-read every gzip and compare it with the manifest",
            mutating=True,
            place=90,
        ),
        start=lambda _: lambda archiver, cancel: archiver.verify(cancel=cancel),
    ),
)

# rebuild-manifest -------------------------------------------------------------


_REMOTE_ONLY = ("identity", "site_key", "site_id", "snapshot", "list")


def _rebuild(options: Options) -> Run:
    out: Path | None = options["out"]
    given = [f"--{o.replace('_', '-')}" for o in _REMOTE_ONLY if options[o]]
    if given and not options["from_remote"]:
        raise UsageError(f"{', '.join(given)}: the remote tier's options; give --from-remote too")
    if not options["from_remote"]:
        return lambda archiver, cancel: archiver.rebuild_manifest(out, cancel)
    if out is not None:
        raise UsageError("--out and --from-remote: the remote rebuilds this site's own coldkeep.db")
    key = options["site_key"]
    choice = DrChoice(
        None if key is None else parse_fingerprint(key, "--site-key"),
        options["site_id"],
        options["snapshot"],
    )
    if options["list"]:
        return lambda archiver, cancel: archiver.remote_snapshots(choice)
    return unsealing(
        options["identity"], lambda archiver, cancel: archiver.rebuild_from_remote(cancel, choice)
    )


def _rebuilt(r: RebuildReport) -> str:
    unreadable = f", {len(r.unreadable)} unreadable" if r.unreadable else ""
    refused = f", {len(r.refused)} refused" if r.refused else ""
    return f"{plural(r.entries, 'entry', 'entries')} written to {r.out}{unreadable}{refused}"


def _rebuilt_from_remote(r: FromRemoteReport) -> str:
    fetched = plural(r.fetched, "archive file")
    source = f"snapshot {r.snapshot}" if r.snapshot else f"{fetched} fetched"
    if r.generation is not None:
        source += f" (generation {r.generation} of site {r.site_id})"
    elif r.unsigned:
        source += " (unsigned, as picked)"
    text = f"{plural(r.entries, 'entry', 'entries')} from {source}, "
    text += f"{plural(r.remote_only, 'file')} read from the remote, "
    text += f"{plural(r.months, 'event month')} fetched"
    if r.never_shipped:
        never = len(r.never_shipped)
        text += f"; {plural(never, 'archive file')} {'was' if never == 1 else 'were'} NEVER SHIPPED"
    if r.events_never_shipped:
        rows = sum(m.lost for m in r.events_never_shipped)
        months = plural(len(r.events_never_shipped), "month")
        were = "was" if rows == 1 else "were"
        text += f"; {plural(rows, 'event row')} of {months} {were} NEVER SHIPPED"
    return text + (f"; {plural(len(r.problems), 'problem')}" if r.problems else "")


def _from_remote_detail(r: FromRemoteReport) -> list[str]:
    lines = [f"trusted {r.trusted}"] if r.trusted else []
    if r.unsigned:
        lines.append(
            f"{r.snapshot}: an older coldkeep's unsigned snapshot, taken because it was picked: "
            "nothing proves this site shipped it"
        )
    lines += [f"not taken {o}" for o in r.others]
    lines += [f"never shipped {p}" for p in r.never_shipped]
    lines += [f"sealed bundle not fetched {p}" for p in r.sealed_skipped]
    lines += [*map(_month_lost, r.events_never_shipped), *r.problems]
    return lines + ([f"site key: {r.site_key}"] if r.site_key else [])


def _listed(r: SnapshotList) -> str:
    lines = [f"{r.where}: {plural(len(r.snapshots), 'snapshot')}"]
    lines.append(f"trusted {r.trusted}" if r.trusted else f"trusted nothing: {r.untrusted}")
    for s in r.snapshots:
        st = s.statement
        if st is None:
            lines.append(f"  {s.verdict:<13} {s.key}  {s.why}")
            continue
        taken = time.strftime("%Y-%m-%d %H:%M", time.gmtime(st.taken_at / 1000))
        line = f"  {s.verdict:<13} g{st.generation:<6} {taken}  {st.host}  {st.key}  {s.key}"
        lines.append(line + (f"  {s.why}" if s.why else ""))
    return "\n".join(lines)


def _month_lost(m: MonthLost) -> str:
    line = f"event month {m.month}: {m.lost} archived rows were NEVER SHIPPED"
    if m.shipped_rows:
        line += f" (its newest snapshot holds {m.shipped_rows} of its {m.rows})"
    return line


REBUILD_MANIFEST = Operation(
    "rebuild-manifest",
    "Rebuild the manifest from the gzips alone (when coldkeep.db is lost), or\n"
    "with --from-remote from the remote tier (when the whole host is lost).",
    bind=_rebuild,
    params=(
        click.Option(
            ["--out"],
            type=click.Path(path_type=Path, dir_okay=False),
            help="Write here (default: archive_root/coldkeep.db, only if it does not exist).",
        ),
        click.Option(
            ["--from-remote"],
            is_flag=True,
            help="From the remote tier: the newest of the site's own signed manifest snapshots "
            "(else, with no snapshot at all, every archive file there), on a fresh host with only "
            "the bucket and credentials.",
        ),
        click.Option(
            ["--site-key"],
            metavar="FINGERPRINT",
            help="With --from-remote: take only snapshots this key signed (the fingerprint "
            "coldkeep status printed, which you wrote down). Without it: this host's key, else "
            "the only key signing the site's snapshots there, said.",
        ),
        click.Option(
            ["--site-id"],
            metavar="ID",
            help="With --from-remote: the site's id, where snapshots of several sites are "
            "under one remote.site (coldkeep status prints it).",
        ),
        click.Option(
            ["--snapshot"],
            metavar="KEY",
            help="With --from-remote: this snapshot (a key --list shows) instead of the newest.",
        ),
        click.Option(
            ["--list"],
            is_flag=True,
            help="With --from-remote: list every snapshot there and what it is; write nothing.",
        ),
        identity_option(),
    ),
    words=(
        Words(
            RebuildReport,
            _rebuilt,
            failed=lambda r: bool(r.unreadable or r.refused),
            detail=lambda r: (
                [f"unreadable {u}" for u in r.unreadable] + [f"refused {x}" for x in r.refused]
            ),
        ),
        Words(SnapshotList, lambda r: r.where, text=_listed),
        Words(
            FromRemoteReport,
            _rebuilt_from_remote,
            failed=lambda r: r.failed,
            detail=_from_remote_detail,
            # Data in neither place (an archive file, event rows) fails the
            # rebuild's exit, not its "ok".
            exit=lambda r: EXIT_FAILED if r.failed or r.lost else EXIT_OK,
        ),
    ),
)

# checkpoint -------------------------------------------------------------------


def _checkpointed(r: CheckpointRan) -> str:
    if r.error:
        return f"failed: {r.error}"
    return (
        f"busy={r.busy} log={r.log} checkpointed={r.checkpointed} "
        f"{r.ms:.0f} ms, WAL {human(r.wal_before)} → {human(r.wal_after)}"
    )


def _checkpoint(_: object) -> Run:
    return lambda archiver, cancel: archiver.checkpoint()


CHECKPOINT = Operation(
    "checkpoint",
    "Run one checkpoint of the live database's WAL now (PASSIVE by default).",
    bind=_checkpoint,
    words=(Words(CheckpointRan, _checkpointed, failed=lambda r: r.error is not None),),
    console=Console(
        ConsoleAction(
            "checkpoint",
            "c",
            "Checkpoint",
            "Checkpoint the live database's WAL now (PASSIVE)",
            mutating=True,
            place=100,
        ),
        start=_checkpoint,
    ),
)

OPERATIONS = (VERIFY, REBUILD_MANIFEST, CHECKPOINT)
