"""``coldkeep cat PATH[@VERSION]``: one archived file's bytes on stdout, read
where they lie and checked against the manifest's sha256 as they stream
(core/ops/cat.py). A plain command, not a registry entry: its output is the
file's bytes, not a result in words or JSON, and the console has no action for it.

Stdout is written in binary, flushed at each chunk. A reader that leaves early
(``| head``) ends it quietly, exit 0, as the Python docs recommend for a closed
pipe: stdout pointed at /dev/null so the interpreter's last flush says nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from coldkeep.core.base.errors import EXIT_FAILED, EXIT_OK

from ..operations.spec import IDENTITY_HELP
from ..text.fmt import plural, shown
from .kit import command, ctx_for, identities_for, reader_left, run_command

if TYPE_CHECKING:
    from coldkeep.core.ops.cat import CatResult


def _stats_line(result: CatResult) -> str:
    """Where the bytes were read and, from the remote tier, what it cost."""
    e = result.entry
    said = f"{e.relpath} (entry {e.id}): {plural(result.streamed.bytes, 'byte')}"
    remote = result.remote
    if remote is None:
        where = "its bundle member" if e.span is not None else "its gzip"
        return f"{said} from {where} in the archive"
    return (
        f"{said} from the remote tier: {plural(remote.gets, 'GET')}, "
        f"{plural(remote.bytes_fetched, 'byte')} fetched"
    )


def _said_after(result: CatResult, stats: bool) -> int:
    """The lines on stderr after the bytes (an expired version read from the copy
    the bucket kept, ``--stats``, bytes that were not the archived file), and
    the exit code."""
    if result.expired is not None:
        click.echo(f"coldkeep: cat: {shown(result.expired)}", err=True)
    if stats:
        click.echo(f"coldkeep: cat: {shown(_stats_line(result))}", err=True)
    if result.problem is None:
        return EXIT_OK
    said = f"{result.entry.relpath} (entry {result.entry.id}): {result.problem}"
    click.echo(
        f"coldkeep: cat: {shown(said)}: the bytes above are not the archived file "
        "(coldkeep verify checks every gzip)",
        err=True,
    )
    return EXIT_FAILED


@click.command()
@click.argument("path", metavar="PATH[@VERSION]")
@click.option(
    "--version",
    "version",
    metavar="ID|TIME",
    help="The version to read (PATH is then taken whole, '@' and all).",
)
@click.option(
    "--stats",
    is_flag=True,
    help="After the bytes, one line on stderr: where they were read, and for a "
    "remote-only copy the GETs sent and the bytes they fetched.",
)
@click.option(
    "--expired",
    is_flag=True,
    help="Read a version retention expired from the remote copy the bucket's lock still "
    "keeps (expiry could not delete it yet).",
)
@click.option("--identity", type=click.Path(path_type=Path), metavar="FILE", help=IDENTITY_HELP)
@command(json_opt=False)
def cat(
    path: str,
    version: str | None,
    stats: bool,
    expired: bool,
    identity: Path | None,
    config: Path | None,
) -> None:
    """Print an archived file's bytes, without restoring it.

    PATH is relative to live_root (or absolute, inside it). VERSION is an entry
    id (digits 0-9) or a time as `coldkeep versions` prints them (2026-03-01T12:00:00Z, UTC;
    without the Z local time; a date alone is its midnight): the newest version
    archived at or before that time.
    Without one, the newest version. The whole argument is tried as a path
    first, so a name with '@' in it reads as it is; --version never splits it.

    The bytes come from the file's gzip, its bundle member or the remote tier's
    copy, checked against the manifest's sha256 as they stream: if they do not
    match, one line on stderr after them says so, exit 1. Read-only: no lock,
    nothing written. Unknown path or version: exit 2; an expired version: exit 1,
    saying what the bucket still keeps of it, which --expired reads (one line on
    stderr says it expired), until an expiry after the bucket's lock deletes it.

    A copy only the remote tier holds is read by ranged GETs as it streams, its
    blocks kept in a folder of their own under [mount] cache_dir, removed after;
    --stats says what that cost. A copy sealed to age recipients ([remote]
    encrypt_to) needs --identity: its stream is read through the same cache and
    opened whole into a file there before its bytes stream. A copy in GLACIER or
    DEEP_ARCHIVE must be thawed first: exit 1, one line saying what the thaw
    takes and costs and the `coldkeep thaw` that asks for it.

    \b
      coldkeep cat tenant-42/2026/03/app.jsonl | grep ERROR
      coldkeep cat tenant-42/app.jsonl@1812 | jq .
      coldkeep cat tenant-42/app.jsonl@2026-03-01 | less
      coldkeep cat --stats tenant-42/2025/11/app.jsonl >/dev/null
    """
    ctx = ctx_for(config)
    out = sys.stdout.buffer

    async def go() -> int:
        identities = identities_for(identity)
        try:
            archiver = ctx.archiver()
            archiver.sessions.identities = identities
            result = await archiver.cat(path, version, out, ctx.cancel, expired)
        except BrokenPipeError:
            reader_left()
            return EXIT_OK
        return _said_after(result, stats)

    # No progress display: stderr is often the terminal a pager draws on.
    run_command(go(), ctx, progress=False)
