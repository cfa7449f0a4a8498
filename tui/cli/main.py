"""The ``coldkeep`` command group: its own options, the console as the default
command, and every command family registered.

Every command takes ``--config`` (default ``$COLDKEEP_CONFIG`` or
``./coldkeep.toml``); the ones that report take ``--json`` (one document on
stdout, docs/json.md); the ones that change the archive take ``--wait SECONDS``.
Progress goes to stderr: bars on a terminal, plain lines otherwise.

Exit codes (tui/cli/kit.py): 0 done, 1 failed or something needs attention
(verify failures, missing gzips, conflicts…), 2 bad usage or config, 3 the
archive lock is held by another process (the message names it).
"""

from __future__ import annotations

import gc
from pathlib import Path

import click

from .cat import cat
from .console import console
from .demo import demo
from .doctor import doctor
from .fleet import fleet
from .holds import hold
from .inspect import history, plan, status
from .kit import whole_writes
from .metrics import metrics
from .mount import mount
from .operations import COMMANDS
from .query import query
from .rekey import rekey
from .run import run
from .site import site


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
    # What is imported by now lives until the process exits: frozen, the
    # collector never walks it again, and the interpreter's teardown at exit
    # skips it (~45 ms -> ~9 ms of every command's exit; docs/performance.md).
    gc.freeze()
    whole_writes()
    if click_ctx.invoked_subcommand is None:
        click_ctx.invoke(console, config=config, read_only=read_only)


_ALL = (
    console,
    status,
    plan,
    history,
    *COMMANDS,
    cat,
    mount,
    query,
    run,
    demo,
    doctor,
    hold,
    rekey,
    site,
    metrics,
    fleet,
)
for _command in _ALL:
    main.add_command(_command)

if __name__ == "__main__":
    main()
