"""The ``coldkeep`` command line: a thin client of ``coldkeep.core.archiver``.

Every command takes ``--config`` (default ``$COLDKEEP_CONFIG`` or
``./coldkeep.toml``); the ones that report take ``--json`` (one document on
stdout, docs/json.md); the ones that change the archive take ``--wait SECONDS``.
Progress goes to stderr: bars on a terminal, plain lines otherwise.

Exit codes (tui/cli/kit.py): 0 done, 1 failed or something needs attention
(verify failures, missing gzips, conflicts…), 2 bad usage or config, 3 the
archive lock is held by another process (the message names it).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import sys
import traceback
import urllib.parse
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import click

from coldkeep.core.archiver import Archiver, recovery_counts
from coldkeep.core.base.config import (
    ConfigError,
    RemoteSettings,
    RemoteUrlError,
    endpoint_url,
    remote_url,
)
from coldkeep.core.base.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from coldkeep.core.base.stream import as_dict
from coldkeep.core.files.restore import Selection
from coldkeep.core.ops.demo import write_demo
from coldkeep.core.ops.status import RemoteState
from coldkeep.core.sched.daemon import Scheduler
from coldkeep.core.sched.jobs import JobEvent
from coldkeep.core.store.audit import history as audit_history
from coldkeep.core.store.jobruns import job_history
from coldkeep.core.store.manifest import Manifest, ManifestError

from ..text.fmt import human
from ..text.results import LIST_MAX, report
from .doctor import doctor
from .kit import command, ctx_for, fail, kill_hook, parse_when, run_command
from .lifecycle import expire, hold
from .metrics import Exporter, metrics
from .progress import describe


@click.group(
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(package_name="coldkeep")
@click.option(
    "--config",
    "config",
    type=click.Path(path_type=Path, dir_okay=False),
    help="coldkeep.toml for the console, and for any command given none of its own.",
)
@click.option("--read-only", is_flag=True, help="The console shows everything, changes nothing.")
@click.pass_context
def main(click_ctx: click.Context, config: Path | None, read_only: bool) -> None:
    """coldkeep moves an application's cold data out of its live tree, crash-safely.

    Old live files become verified gzips under archive_root/files; old event rows
    move into monthly archive databases under archive_root/events. Everything can
    be restored; any crash is recovered by the next command that takes the lock.

    Start with: coldkeep demo ./demo
    """
    if click_ctx.invoked_subcommand is None:
        click_ctx.invoke(console, config=config, read_only=read_only)


@main.command()
@command(json_opt=False)
@click.option("--read-only", is_flag=True, help="Show everything, change nothing.")
@click.option(
    "--remote",
    "remote_url",
    metavar="URL",
    help="The fleet view instead: every site that ships to this prefix (s3://bucket/prefix "
    "or file:///path), from their manifest snapshots, searched together, restored from to "
    "a local folder. Needs no coldkeep.toml; changes nothing on the remote.",
)
@click.option(
    "--endpoint-url", metavar="URL", help="With --remote: an S3-compatible endpoint (http(s))."
)
@click.option("--region", help="With --remote: the bucket's region (default: the environment's).")
def console(
    config: Path | None,
    read_only: bool = False,
    remote_url: str | None = None,
    endpoint_url: str | None = None,
    region: str | None = None,
) -> None:
    """Open the console (the default command), or with --remote the fleet view."""
    if remote_url is not None:
        if config is not None:
            fail(
                "--remote opens the fleet view, which reads no coldkeep.toml: drop --config",
                EXIT_USAGE,
            )
        _fleet(remote_url, endpoint_url, region)
    if endpoint_url is not None or region is not None:
        fail("--endpoint-url and --region go with --remote URL (the fleet view)", EXIT_USAGE)
    ctx = ctx_for(config)
    root = click.get_current_context().find_root()
    read_only = read_only or bool(root.params.get("read_only"))
    try:
        settings = ctx.settings
    except ConfigError as err:
        fail(f"{err}\n(no config? try: coldkeep demo ./demo)", EXIT_USAGE)
    from ..console.app import ColdkeepApp  # noqa: PLC0415 - Textual loads only for the console

    app = ColdkeepApp(settings, read_only=read_only)
    app.run()
    raise SystemExit(app.return_code or 0)


def fleet_remote(url: str, endpoint: str | None, region: str | None) -> RemoteSettings:
    """The fleet view's remote from its options, checked as a config's [remote]
    is (a relative ``file:`` path is taken from the current directory, and must
    be a directory). Raises ValueError, whose one line never repeats a credential."""
    parts = urllib.parse.urlsplit(url)
    if not parts.scheme and "@" not in url:
        path = Path(os.path.abspath(url))
        raise ValueError(f"--remote {url} is not a URL: for a folder, write {path.as_uri()}")
    try:
        url = remote_url(url, Path.cwd())
    except RemoteUrlError as err:
        raise ValueError(f"--remote {err}") from None
    if endpoint is not None:
        try:
            endpoint_url(endpoint)
        except RemoteUrlError as err:
            raise ValueError(f"--endpoint-url {err}") from None
    folder = RemoteSettings(url).folder
    if folder is not None and not folder.is_dir():
        raise ValueError(f"--remote {url}: {folder} is not a directory")
    return RemoteSettings(url, endpoint_url=endpoint, region=region)


def fleet_cache(remote: RemoteSettings) -> Path:
    """Where the fleet view keeps the snapshots it fetched for ``remote``:
    ``$XDG_CACHE_HOME/coldkeep/fleet/<sha of the URL>`` (~/.cache by default;
    the endpoint counts too, when there is one: another server, other data)."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    # The XDG spec: a relative value is invalid and ignored.
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
    name = remote.url if remote.endpoint_url is None else f"{remote.endpoint_url} {remote.url}"
    return base / "coldkeep" / "fleet" / hashlib.sha256(name.encode()).hexdigest()[:16]


def _fleet(url: str, endpoint_url: str | None, region: str | None) -> None:
    try:
        remote = fleet_remote(url, endpoint_url, region)
    except ValueError as err:
        fail(str(err), EXIT_USAGE)
    from ..console.fleet import FleetApp  # noqa: PLC0415 - Textual loads only for the console

    app = FleetApp(remote, fleet_cache(remote))
    app.run()
    raise SystemExit(app.return_code or 0)


# read-only -------------------------------------------------------------------


@main.command()
@command()
def status(config: Path | None, json_out: bool) -> None:
    """What is archived, who holds the lock, the last passes."""
    ctx = ctx_for(config, json_out)

    async def go() -> int:
        st = await ctx.archiver().status()
        bad = st.verify_failures > 0 or "missing" in st.entries

        def text() -> str:
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
                lines.append(f"{name:<13} {n:>8} files  {human(b)} -> {human(g)}")
            if not st.entries:
                lines.append("archive       empty (no pass has run)")
            if st.verify_failures:
                lines.append(f"VERIFY FAILED {st.verify_failures} entries (coldkeep verify)")
            if st.restore_intents:
                lines.append(f"unfinished restores: {st.restore_intents} (coldkeep recover)")
            if st.remote is not None:
                lines += _remote_lines(st.remote)
            for p in st.last_passes[:3]:
                when = datetime.fromtimestamp(p.started_at / 1000).strftime("%Y-%m-%d %H:%M")
                files = p.summary.get("files", {})
                lines.append(
                    f"pass {p.id:<8} {when} {p.status:<9} {files.get('archived', 0)} files"
                )
            return "\n".join(lines)

        ctx.emit("status", not bad, st.to_dict(), text)
        return EXIT_FAILED if bad else EXIT_OK

    run_command(go(), ctx)


def _remote_lines(r: RemoteState) -> list[str]:
    t = r.totals
    lines = [
        f"remote        {r.url}/{r.site}",
        f"  shipped     {t.shipped:>8} objects  {human(t.shipped_bytes)}"
        f" ({t.remote_only} only there, {human(t.remote_only_bytes)})",
        f"  pending     {t.pending_files:>8} files  ({t.pending_entries} entries; coldkeep ship)",
    ]
    if t.verify_failed:
        lines.append(f"  REMOTE VERIFY FAILED {t.verify_failed} objects (coldkeep verify --remote)")
    if r.last_ship is not None:
        when = datetime.fromtimestamp(r.last_ship.at / 1000).strftime("%Y-%m-%d %H:%M")
        lines.append(f"  last ship   {when} {r.last_ship.outcome}")
    return lines


@main.command()
@command()
def plan(config: Path | None, json_out: bool) -> None:
    """The backlog and what recovery would do. Writes nothing, takes no lock."""
    ctx = ctx_for(config, json_out)

    async def go() -> int:
        archiver = ctx.archiver()
        report = await archiver.plan()
        p = report.plan

        def text() -> str:
            lines = [f"files: {p.files} eligible, {human(p.bytes)}"]
            skipped = ", ".join(f"{n} {why}" for why, n in sorted(p.skipped.items()))
            if skipped:
                lines.append(f"  skipped: {skipped}")
            for u in p.units[:LIST_MAX]:
                lines.append(f"  {u.unit:<30} {u.files:>6} files {human(u.bytes):>10}")
            if len(p.units) > LIST_MAX:
                lines.append(f"  … and {len(p.units) - LIST_MAX} more units (--json for all)")
            if p.events is not None:
                ev = p.events
                lines.append(f"events: {ev.rows} rows eligible (~{human(ev.approx_bytes)})")
                by_month: dict[str, int] = {}
                for m in ev.months:
                    by_month[m.month] = by_month.get(m.month, 0) + m.rows
                for month, rows in sorted(by_month.items()):
                    lines.append(f"  {month} {rows:>10} rows")
                if ev.unparsable:
                    lines.append(f"  {ev.unparsable} rows with unparsable time stamps stay live")
                lines.append(f"  index: {ev.index}" if ev.index else f"  note: {ev.note}")
            if p.events_error:
                lines.append(f"events: {p.events_error}")
            rec = report.recovery
            if rec.busy:
                lines.append(
                    f"in flight: the archive is locked by {rec.busy}; its {rec.in_flight} "
                    "partials are work in progress, not leftovers"
                )
            if rec.anything:
                lines.append(
                    f"recovery: {len(rec.partials)} partials, {len(rec.orphans)} orphans, "
                    f"{len(rec.missing)} MISSING, {len(rec.sources_unlinked)} sources to unlink"
                    + (
                        f", {len(rec.interrupted)} passes to mark interrupted"
                        if rec.interrupted
                        else ""
                    )
                )
                layout = archiver.layout
                found = [
                    *(("partial", layout.rel(x)) for x in rec.partials),
                    *(("orphan", layout.rel(o.gz)) for o in rec.orphans),
                    *(("MISSING", e.gz_path) for e in rec.missing),
                    *(("unlink", rel) for rel in rec.sources_unlinked),
                ]
                lines += [f"  {what:<8} {path}" for what, path in found[:LIST_MAX]]
                if len(found) > LIST_MAX:
                    lines.append(f"  … and {len(found) - LIST_MAX} more (--json for all)")
            return "\n".join(lines)

        ctx.emit("plan", True, report.to_dict(archiver.layout), text)
        return EXIT_OK

    run_command(go(), ctx)


# mutating --------------------------------------------------------------------


@main.command(name="pass")
@command(wait_opt=True)
def pass_(config: Path | None, json_out: bool, wait: float) -> None:
    """Run one pass: recovery, then eligible files, then eligible event rows.

    In mode "plan" it only counts; in mode "off" it refuses.
    """
    ctx = ctx_for(config, json_out, wait)

    async def go() -> int:
        summary = await ctx.archiver().run_pass(ctx.cancel)
        text = partial(report, "pass", summary)
        ctx.emit("pass", summary.status == "ok", summary.to_dict(), text)
        return {"ok": EXIT_OK, "cancelled": EXIT_OK}.get(summary.status, EXIT_FAILED)

    run_command(go(), ctx)


@main.command()
@command(wait_opt=True)
def recover(config: Path | None, json_out: bool, wait: float) -> None:
    """Settle what a crash left: partials, orphans, unfinished restores."""
    ctx = ctx_for(config, json_out, wait)

    async def go() -> int:
        result = await ctx.archiver().recover(ctx.cancel)
        bad = bool(result.errors or result.missing)
        ctx.emit("recover", not bad, recovery_counts(result), partial(report, "recover", result))
        return EXIT_FAILED if bad else EXIT_OK

    run_command(go(), ctx)


@main.command()
@click.argument("gz", nargs=-1)
@click.option("--all", "all_", is_flag=True, help="Every orphan gzip.")
@command(wait_opt=True)
def adopt(
    gz: tuple[str, ...], all_: bool, config: Path | None, json_out: bool, wait: float
) -> None:
    """Settle orphan gzips (GZ: paths relative to archive_root, as plan lists them)."""
    if bool(gz) == all_:
        raise click.UsageError("name orphan gzips, or pass --all")
    ctx = ctx_for(config, json_out, wait)

    async def go() -> int:
        result = await ctx.archiver().adopt(None if all_ else list(gz), ctx.cancel)
        bad = result.failed
        done = [
            {"gz": str(o.gz), "relpath": o.relpath, "outcome": o.outcome} for o in result.orphans
        ]
        ctx.emit("adopt", not bad, done, partial(report, "adopt", result))
        return EXIT_FAILED if bad else EXIT_OK

    run_command(go(), ctx)


@main.command()
@command(wait_opt=True)
def sweep(config: Path | None, json_out: bool, wait: float) -> None:
    """Remove leftover .partial files and unfinished restores' partials."""
    ctx = ctx_for(config, json_out, wait)

    async def go() -> int:
        result = await ctx.archiver().sweep()
        removed = [str(p) for p in result.removed]
        ctx.emit("sweep", True, removed, partial(report, "sweep", result))
        return EXIT_OK

    run_command(go(), ctx)


@main.command()
@click.argument("ids", nargs=-1, type=int)
@click.option("--unit", help="Every file of this unit.")
@click.option("--path", "glob", metavar="GLOB", help="Relative paths matching this glob.")
@click.option("--sha", metavar="PREFIX", help="Files whose sha256 starts with this.")
@click.option("--after", metavar="DATE", help="Files last modified at or after DATE (local time).")
@click.option("--before", metavar="DATE", help="Files last modified before DATE (local time).")
@click.option("--all-versions", is_flag=True, help="Every archived version, not just the newest.")
@click.option(
    "--to",
    type=click.Path(path_type=Path, file_okay=False),
    help="Restore under this directory instead of to the live paths.",
)
@click.option(
    "--list",
    "list_only",
    is_flag=True,
    help="Only list what the selection names (entry id, status, size, modified, path); "
    "takes no lock, writes nothing.",
)
@command(wait_opt=True)
def restore(
    ids: tuple[int, ...],
    unit: str | None,
    glob: str | None,
    sha: str | None,
    after: str | None,
    before: str | None,
    all_versions: bool,
    to: Path | None,
    list_only: bool,
    config: Path | None,
    json_out: bool,
    wait: float,
) -> None:
    """Restore archived files: by entry IDS, --unit, --path, --sha or time range.

    To their live paths (never over an existing file; held from the next passes
    for hold_days) or, with --to, under another directory.
    """
    sel = Selection(
        ids=ids,
        unit=unit,
        glob=glob,
        sha=sha,
        after_ns=parse_when(after, "--after"),
        before_ns=parse_when(before, "--before"),
        all_versions=all_versions,
    )
    ctx = ctx_for(config, json_out, wait)

    async def listing() -> int:
        found = await ctx.archiver().select(sel)

        def text() -> str:
            lines = [
                f"{e.id:>8}  {e.status:<9} {human(e.bytes):>10}  "
                f"{datetime.fromtimestamp(e.mtime_ns / 1e9).isoformat(timespec='seconds')}  "
                f"{e.relpath}"
                for e in found
            ]
            return "\n".join([*lines, f"{len(found)} entries"])

        fields = (
            "id", "status", "bytes", "mtime_ns", "relpath", "sha256",
            "gz_path", "member_offset", "member_length",
        )  # fmt: skip
        result = [{k: getattr(e, k) for k in fields} for e in found]
        ctx.emit("restore", True, result, text)
        return EXIT_OK

    async def go() -> int:
        result = await ctx.archiver().restore(sel, to, ctx.cancel)
        done = [vars(f) for f in result.files]
        ctx.emit("restore", not result.failed, done, partial(report, "restore", result))
        return EXIT_FAILED if result.failed else EXIT_OK

    run_command(listing() if list_only else go(), ctx)


@main.command(name="restore-events")
@click.option("--kind", "kinds", multiple=True, help="Only rows of this kind (repeatable).")
@click.option("--month", "months", multiple=True, metavar="YYYY-MM", help="Only this month.")
@command(wait_opt=True)
def restore_events_cmd(
    kinds: tuple[str, ...],
    months: tuple[str, ...],
    config: Path | None,
    json_out: bool,
    wait: float,
) -> None:
    """Put archived event rows back into the live table (held for hold_days).

    A live row with the same id is never overwritten: same content counts as
    already there, other content is reported as a conflict.
    """
    ctx = ctx_for(config, json_out, wait)

    async def go() -> int:
        result = await ctx.archiver().restore_events(
            set(kinds) or None, list(months) or None, ctx.cancel
        )
        done = {
            "restored": result.restored,
            "already_live": result.already_live,
            "conflicts": [vars(c) for c in result.conflicts],
            "months": result.months,
            "refused": result.refused,
        }
        text = partial(report, "restore-events", result)
        bad = bool(result.conflicts or result.refused)
        ctx.emit("restore-events", not bad, done, text)
        return EXIT_FAILED if bad else EXIT_OK

    run_command(go(), ctx)


@main.command()
@click.option("--sample", type=click.FloatRange(0, 1, min_open=True), help="Check this fraction.")
@click.option(
    "--max-duration",
    type=float,
    metavar="SECONDS",
    help="Stop after this long; the next run resumes where this one stopped.",
)
@click.option(
    "--remote",
    is_flag=True,
    help="Read the remote tier's copies back instead (ranged GETs); a bad one is "
    "shipped again from its local copy, else alerted.",
)
@command(wait_opt=True)
def verify(
    sample: float | None,
    max_duration: float | None,
    remote: bool,
    config: Path | None,
    json_out: bool,
    wait: float,
) -> None:
    """Re-read archived gzips and compare them with the manifest (or, with
    --remote, the remote copies with what was shipped). --sample rotates: each
    run starts where the last one stopped."""
    ctx = ctx_for(config, json_out, wait)

    async def remote_copies() -> int:
        got = await ctx.archiver().verify_remote(sample, ctx.cancel)
        text = partial(report, "verify", got)
        ctx.emit("verify", not got.failed, got.to_dict(), text)
        return EXIT_FAILED if got.failed else EXIT_OK

    if remote:
        run_command(remote_copies(), ctx)

    async def go() -> int:
        result = await ctx.archiver().verify(sample, max_duration, ctx.cancel)
        done = {
            "checked": result.checked,
            "ok": result.ok,
            "bytes": result.bytes,
            "complete": result.complete,
            "resumed_from": result.resumed_from,
            "seconds": result.seconds,
            "problems": [vars(p) for p in result.problems],
        }
        ctx.emit("verify", not result.failed, done, partial(report, "verify", result))
        return EXIT_FAILED if result.failed else EXIT_OK

    run_command(go(), ctx)


@main.command()
@command(wait_opt=True)
def ship(config: Path | None, json_out: bool, wait: float) -> None:
    """Copy what is archived to the remote tier ([remote]), then drop local copies.

    Each archive file (a bundle or a gzip) is uploaded create-only, read back and
    recorded; closed event months follow as database snapshots, then a snapshot
    of the manifest. Local copies whose remote copy was verified more than
    remote.keep_local_days ago are dropped (recorded first, unlinked after).
    Run it again after a failure or a kill: it resumes."""
    ctx = ctx_for(config, json_out, wait)

    async def go() -> int:
        result = await ctx.archiver().ship(ctx.cancel)
        ctx.emit("ship", not result.failed, result.to_dict(), partial(report, "ship", result))
        return EXIT_FAILED if result.failed else EXIT_OK

    run_command(go(), ctx)


@main.command(name="rebuild-manifest")
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write here (default: archive_root/coldkeep.db, only if it does not exist).",
)
@click.option(
    "--from-remote",
    is_flag=True,
    help="From the remote tier: the newest manifest snapshot (else every archive file "
    "there), on a fresh host with only the bucket and credentials.",
)
@command(wait_opt=True)
def rebuild_manifest_cmd(
    out: Path | None, from_remote: bool, config: Path | None, json_out: bool, wait: float
) -> None:
    """Rebuild the manifest from the gzips alone (when coldkeep.db is lost), or
    with --from-remote from the remote tier (when the whole host is lost)."""
    ctx = ctx_for(config, json_out, wait)

    async def from_the_remote() -> int:
        got = await ctx.archiver().rebuild_from_remote(ctx.cancel)
        text = partial(report, "rebuild-manifest", got)
        ctx.emit("rebuild-manifest", not got.failed, got.to_dict(), text)
        return EXIT_FAILED if got.failed or got.never_shipped else EXIT_OK

    if from_remote:
        if out is not None:
            fail("--out and --from-remote: the remote rebuilds this site's own coldkeep.db", 2)
        run_command(from_the_remote(), ctx)

    async def go() -> int:
        result = await ctx.archiver().rebuild_manifest(out, ctx.cancel)
        done = {
            "out": str(result.out),
            "entries": result.entries,
            "bytes": result.bytes,
            "unreadable": result.unreadable,
            "refused": result.refused,
        }
        text = partial(report, "rebuild-manifest", result)
        bad = bool(result.unreadable or result.refused)
        ctx.emit("rebuild-manifest", not bad, done, text)
        return EXIT_FAILED if bad else EXIT_OK

    run_command(go(), ctx)


@main.command()
@command(wait_opt=True)
def checkpoint(config: Path | None, json_out: bool, wait: float) -> None:
    """Run one checkpoint of the live database's WAL now (PASSIVE by default)."""
    ctx = ctx_for(config, json_out, wait)

    async def go() -> int:
        r = await ctx.archiver().checkpoint()
        ctx.emit("checkpoint", r.error is None, vars(r), partial(report, "checkpoint", r))
        return EXIT_FAILED if r.error else EXIT_OK

    run_command(go(), ctx)


@main.command()
@command(json_opt=False)
@click.option("--log-json", is_flag=True, help="One JSON object per line on stderr.")
@click.option("--metrics-listen", metavar="ADDR:PORT", help="Serve Prometheus /metrics there.")
@click.option(
    "--metrics-textfile",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Keep this file (*.prom) written for node_exporter's textfile collector.",
)
def run(
    config: Path | None, log_json: bool, metrics_listen: str | None, metrics_textfile: Path | None
) -> None:
    """Run the scheduler in the foreground (for systemd or a tmux pane).

    Jobs and their schedules come from [jobs] in the config. One line per event on
    stderr. SIGTERM or SIGINT stops the running job at its next safe point; the
    process then exits 0.
    """
    ctx = ctx_for(config)
    try:
        settings = ctx.settings
    except ConfigError as err:
        fail(str(err), EXIT_USAGE)

    def log(record: dict[str, Any], text: str) -> None:
        stamp = datetime.now().isoformat(timespec="seconds")
        line = json.dumps({"at": stamp, **record}, default=str) if log_json else f"{stamp} {text}"
        print(line, file=sys.stderr, flush=True)

    exporter = Exporter(settings, metrics_listen, metrics_textfile, log)

    def on_job(e: JobEvent) -> None:
        exporter.job_event(e)
        record: dict[str, Any] = {"kind": f"job_{e.kind}", "job": e.job, "detail": e.detail}
        if e.run is not None:
            record |= {"run_id": e.run.id, "status": e.run.status, "error": e.run.error}
        text = f"job {e.job}: {e.kind.replace('_', ' ')} {e.detail}".rstrip()
        if e.run is not None and e.run.error:
            text += f" ({e.run.error})"
        log(record, text)

    def internal_error(_loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        # asyncio's own reports (an error nobody awaited) go through the same log:
        # with --log-json every line stays one JSON object, the traceback a field.
        exc = context.get("exception")
        trace = "".join(traceback.format_exception(exc)) if exc is not None else ""
        message = str(context.get("message", "unhandled error"))
        log(
            {"kind": "internal_error", "message": message, "error": repr(exc), "traceback": trace},
            f"internal error (please report it): {message}: {exc!r}",
        )

    async def go() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(internal_error)
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        archiver = Archiver(settings, stream=ctx.stream, origin="scheduler", step=kill_hook())
        scheduler = Scheduler(archiver, on_event=on_job)

        async def follow() -> None:
            with ctx.stream.subscribe() as sub:
                async for event in sub:
                    text = describe(event)
                    if text is not None or log_json:
                        log(as_dict(event), (text or event.kind).strip())

        follower = asyncio.create_task(follow())
        log(
            {"kind": "started", "pid": os.getpid()},
            f"coldkeep run: pid {os.getpid()}, {settings.config_path}",
        )
        try:
            await scheduler.open()  # the manifest made and migrated before metrics read it
            exporter.start()
            await scheduler.run_until(stop)
        finally:
            await asyncio.sleep(0)
            follower.cancel()
            await exporter.stop()
        log({"kind": "stopped"}, "coldkeep run: stopped")
        return EXIT_OK

    try:
        raise SystemExit(asyncio.run(go()))
    except ManifestError as err:
        fail(str(err), EXIT_FAILED)


@main.command()
@command()
@click.option("--limit", default=50, show_default=True, help="How many records.")
@click.option("--jobs", "jobs_", is_flag=True, help="The scheduler's job runs instead.")
def history(config: Path | None, json_out: bool, limit: int, jobs_: bool) -> None:
    """Who did what to the archive, and how it ended (or the scheduler's runs)."""
    ctx = ctx_for(config, json_out)

    async def go() -> int:
        path = ctx.settings.archive_root / "coldkeep.db"
        if not path.exists():
            ctx.emit("history", True, [], lambda: "no history yet (no manifest)")
            return EXIT_OK
        async with await Manifest.open(path, readonly=True) as manifest:
            if jobs_:
                runs = await job_history(manifest, limit)
                result: list[dict[str, Any]] = [vars(r) for r in runs]

                def text() -> str:
                    return (
                        "\n".join(
                            f"{datetime.fromtimestamp(r.started_at / 1000):%Y-%m-%d %H:%M} "
                            f"{r.job:<7} {r.trigger:<8} {r.describe()}"
                            for r in runs
                        )
                        or "no job runs yet"
                    )
            else:
                records = await audit_history(manifest, limit)
                result = [vars(r) for r in records]

                def text() -> str:
                    return (
                        "\n".join(
                            f"{datetime.fromtimestamp(r.at / 1000):%Y-%m-%d %H:%M} "
                            f"{r.user}@{r.host} pid {r.pid} {r.origin:<9} {r.action:<15} "
                            f"{r.outcome:<9} {r.describe_args()}".rstrip()
                            + (f"  ({r.detail[:80]})" if r.detail and r.outcome != "ok" else "")
                            for r in records
                        )
                        or "no actions recorded yet"
                    )

        ctx.emit("history", True, result, text)
        return EXIT_OK

    run_command(go(), ctx)


@main.command()
@click.argument("directory", type=click.Path(path_type=Path, file_okay=False))
@click.option("--seed", default=7, show_default=True, help="Same seed, same site.")
@click.option("--scale", default=1.0, show_default=True, help="Size factor (0.05: a quick one).")
@click.option("--no-console", is_flag=True, help="Only write the site.")
def demo(directory: Path, seed: int, scale: float, no_console: bool) -> None:
    """Write a realistic demo site into DIRECTORY and open the console on it.

    The site: a live tree of JSONL logs in a few hundred units, a state.db with
    ~500,000 events, an archive with planted crash leftovers, and a coldkeep.toml
    (mode = "on"). An existing demo in DIRECTORY is reused as it is.
    """
    config = directory / "coldkeep.toml"
    if config.exists():
        click.echo(f"Using the existing demo in {directory} (remove it for a fresh one).")
    else:
        click.echo(f"Writing a demo site into {directory} (seed {seed}, scale {scale}) ...")
        try:
            site = write_demo(directory, seed=seed, scale=scale)
        except FileExistsError as err:
            raise click.ClickException(str(err)) from err
        click.echo(
            f"  {site.files} live files ({human(site.bytes)}), {site.events:,} events in "
            f"{site.state_db.name}, crash leftovers planted in {site.archive.name}/"
        )
    click.echo(f"Config: {config}")
    if no_console:
        click.echo(
            f"Next: coldkeep plan --config {config}   then   coldkeep pass --config {config}"
        )
        return
    click.get_current_context().invoke(console, config=config)


main.add_command(doctor)
main.add_command(expire)
main.add_command(hold)
main.add_command(metrics)

if __name__ == "__main__":
    main()
