"""``coldkeep mount DIR [--with-live]``: the archive as a read-only filesystem
at DIR (core/ops/mount.py), in the foreground until Ctrl-C, SIGTERM or
``fusermount3 -u DIR``. A plain command, not a registry entry: it serves until
stopped and has no result to print.

libfuse owns the main thread (its loop, and its SIGINT/SIGTERM handlers, which
unmount on the way out); the mount's asyncio loop runs on a thread of its own.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from coldkeep.core.base.errors import EXIT_FAILED, EXIT_OK

from ..operations.spec import IDENTITY_HELP
from ..text.fmt import shown
from .kit import command, ctx_for, fail, fail_explained, identities_for


@click.command()
@click.argument("folder", metavar="DIR", type=click.Path(path_type=Path))
@click.option(
    "--with-live", is_flag=True, help="Merge the live tree in: a live file wins over its archive."
)
@click.option("--identity", type=click.Path(path_type=Path), metavar="FILE", help=IDENTITY_HELP)
@command(json_opt=False)
def mount(folder: Path, with_live: bool, identity: Path | None, config: Path | None) -> None:
    """Mount the archive read-only at DIR, in the foreground until Ctrl-C.

    Every archived path is at its original place, its newest version, with its
    original size, mtime and mode; DIR/.versions/PATH/ holds every version of
    PATH, named by its archive time as `coldkeep versions` prints it. Bytes are
    inflated as they are read and checked against the manifest's sha256 (a
    mismatch is EIO); a read at random inside a file over 1 MiB starts at the
    nearest seek point and cannot be checked (read it whole, or `coldkeep
    cat` it, where that matters). A pass may run meanwhile: what it archives or expires
    shows within about two seconds. No lock, nothing written; writes are EROFS.

    A version only the remote tier holds ([remote], its local copy dropped) is
    read by ranged GETs into a block cache under [mount] cache_dir (at most
    [mount] cache_bytes, removed at unmount, its GETs and bytes logged then).
    A remote that cannot be read when the mount starts: local copies are
    served, remote-only ones are EIO with a line saying why. A copy sealed to
    age recipients needs --identity: it is opened whole into the cache at its
    first read (without one it is EIO, the line naming the key it needs).

    DIR must be an empty folder. Stop with Ctrl-C, SIGTERM or
    `fusermount3 -u DIR` (exit 0). Needs /dev/fuse and libfuse3 (apt-get
    install fuse3); run as a user, fusermount3 makes the mount.

    \b
      coldkeep mount /mnt/cold &
      grep -r ERROR /mnt/cold/tenant-42/2026/03/
      ls /mnt/cold/.versions/tenant-42/app.jsonl/
      coldkeep mount --with-live /mnt/whole     # the live tree merged in
    """
    ctx = ctx_for(config)
    from coldkeep.core.ops.mount import serve  # noqa: PLC0415 - the CLI's start-up stays light

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("coldkeep: %(message)s"))
    logging.getLogger("coldkeep").addHandler(handler)
    # The mount's own lines (what the remote reads cost, when it ends) too.
    logging.getLogger("coldkeep.core.ops.mount").setLevel(logging.INFO)

    def ready() -> None:
        click.echo(
            f"coldkeep: mounted {shown(str(ctx.settings.archive_root))} at {shown(str(folder))} "
            f"(read-only{', live tree merged' if with_live else ''}); "
            f"Ctrl-C or fusermount3 -u {shown(str(folder))} to unmount",
            err=True,
        )

    try:
        identities = identities_for(identity)
        serve(
            ctx.settings, folder.absolute(), with_live=with_live, ready=ready, identities=identities
        )
    except RuntimeError as err:
        # libfuse printed why above (the mountpoint, permissions, fuse.conf).
        fail(f"libfuse refused to mount {folder} (status {err})", EXIT_FAILED)
    except Exception as err:  # noqa: BLE001 - one line and its code, or a bug's traceback
        fail_explained(err)
    raise SystemExit(EXIT_OK)
