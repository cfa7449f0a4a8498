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
import importlib
from pathlib import Path

import click

# Every command: the module of tui/cli that makes it (``operations:FAMILY``: made
# by operations.py from its entry in tui/operations/FAMILY.py), and its one line
# for ``--help``. A command's module is imported when it is run (or its own help
# asked for), not before: all of them took 0.43 s to import, and ``--version``
# or a ``status`` paid for the console, the S3 client and the SQL engine.
# tests/cli/test_lazy_commands.py keeps each line equal to its command's own.
COMMANDS: dict[str, tuple[str, str]] = {
    "console": (
        "console",
        "Open the console (the default command), or with --remote the fleet view.",
    ),
    "status": ("inspect", "What is archived, who holds the lock, the last passes."),
    "plan": ("inspect", "The backlog and what recovery would do."),
    "history": (
        "inspect",
        "Who did what to the archive, and how it ended (or the scheduler's runs).",
    ),
    "pass": (
        "operations:archive",
        "Run one pass: recovery, then eligible files, then eligible event rows.",
    ),
    "recover": (
        "operations:archive",
        "Settle what a crash left: partials, orphans, unfinished restores.",
    ),
    "adopt": (
        "operations:archive",
        "Settle orphan gzips (GZ: paths relative to archive_root, as plan lists them).",
    ),
    "sweep": (
        "operations:archive",
        "Remove leftover .partial files and unfinished restores' partials.",
    ),
    "restore": (
        "operations:restore",
        "Restore archived files: by entry IDS, --unit, --path, --sha or time range.",
    ),
    "restore-events": (
        "operations:restore",
        "Put archived event rows back into the live table (held for hold_days).",
    ),
    "thaw": (
        "operations:thaw",
        "Ask for the remote copies in GLACIER or DEEP_ARCHIVE that a restore of the "
        "selection needs: by entry IDS, --unit, --path, --sha or time range.",
    ),
    "find": (
        "operations:find",
        "Find archived files: every version of every path PATTERN matches.",
    ),
    "versions": (
        "operations:find",
        "Every archived version of one file, newest first (expired ones too).",
    ),
    "verify": (
        "operations:checks",
        "Re-read archived gzips and compare them with the manifest (or, with --remote, "
        "the remote copies with what was shipped).",
    ),
    "rebuild-manifest": (
        "operations:checks",
        "Rebuild the manifest from the gzips alone (when coldkeep.db is lost), or with "
        "--from-remote from the remote tier (when the whole host is lost).",
    ),
    "checkpoint": (
        "operations:checks",
        "Run one checkpoint of the live database's WAL now (PASSIVE by default).",
    ),
    "ship": (
        "operations:remote",
        "Copy what is archived to the remote tier ([remote]), then drop local copies.",
    ),
    "expire": (
        "operations:retention",
        "Delete archived data past its retention ([retention]), locally and remotely.",
    ),
    "cat": ("cat", "Print an archived file's bytes, without restoring it."),
    "mount": ("mount", "Mount the archive read-only at DIR, in the foreground until Ctrl-C."),
    "query": (
        "query",
        "Run read-only SQL over every event row, archived or live, without restoring anything.",
    ),
    "run": ("run", "Run the scheduler in the foreground (for systemd or a tmux pane)."),
    "demo": ("demo", "Write a realistic demo site into DIRECTORY and open the console on it."),
    "doctor": ("doctor", "Check a config and its environment before the first pass."),
    "hold": (
        "holds",
        "Legal holds: what neither expiry nor a ship's drop of local copies may delete.",
    ),
    "rekey": ("rekey", "Seal the remote objects again to [remote] encrypt_to's recipients."),
    "site": ("site", "The site's identity: its id and the key that signs its snapshots."),
    "metrics": ("metrics", "Print the site's Prometheus metrics (the text exposition format)."),
    "fleet": ("fleet", "Every site that ships to one remote prefix, seen from the bucket alone."),
    "lake": (
        "lake",
        "The fleet's event months as a data lake: Parquet by site and month in the bucket.",
    ),
}


def load_command(name: str) -> click.Command:
    """The command ``name`` (a key of ``COMMANDS``), its module imported."""
    module_name, _, family = COMMANDS[name][0].partition(":")
    module = importlib.import_module(f"{__package__}.{module_name}")
    found = module.command(name, family) if family else getattr(module, name)
    assert isinstance(found, click.Command)
    return found


def every_command() -> list[click.Command]:
    """Every command, each module imported (tests, docs, a warm fork server)."""
    return [load_command(name) for name in COMMANDS]


class Commands(click.Group):
    """The command group whose commands are imported when one is run."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return load_command(cmd_name) if cmd_name in COMMANDS else None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The list ``--help`` shows, from ``COMMANDS`` alone (as Click would
        shorten each command's own help)."""
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        # A stand-in of each command, shortened by Click's own rule.
        rows = [
            (name, click.Command(name, help=line).get_short_help_str(limit))
            for name, (_, line) in sorted(COMMANDS.items())
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(
    cls=Commands,
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
    from .kit import whole_writes  # noqa: PLC0415 - not for --version or --help

    # What is imported by now lives until the process exits: frozen, the
    # collector never walks it again, and the interpreter's teardown at exit
    # skips it (~45 ms -> ~9 ms of every command's exit; docs/performance.md).
    gc.freeze()
    whole_writes()
    if click_ctx.invoked_subcommand is None:
        click_ctx.invoke(load_command("console"), config=config, read_only=read_only)


if __name__ == "__main__":
    main()
