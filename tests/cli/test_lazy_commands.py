"""The CLI imports a command's module only when that command runs: ``--version``
and ``--help`` import none (they start in a tenth of a second), a command
imports its own and not the console, the S3 client or the SQL engine. The
group's list of commands, written out for ``--help``, says of each what the
command says of itself. Run on a site, the commands an operator types all day
(``status``, ``find``, ``versions``, ``cat``) load neither Rich, nor the
mover, nor the other operations' modules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from coldkeep.tui.cli.main import COMMANDS, every_command

from helpers import ck, cli_ok

# Imports the one command line given, prints the modules imported by then.
IMPORTED = """
import sys
from coldkeep.tui.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(" ".join(sorted(sys.modules)), file=sys.stderr)
"""
# What a command that needs none of them must not pay for (pyrage, a compiled
# extension that imports in 1 ms, is not among them).
HEAVY = ("textual", "duckdb", "aiobotocore", "botocore", "apsw")


def imported(*args: str) -> set[str]:
    run = subprocess.run(
        [sys.executable, "-c", IMPORTED, *args], capture_output=True, text=True, check=True
    )
    return set(run.stderr.split())


def test_each_line_of_the_list_is_the_commands_own() -> None:
    commands = every_command()
    assert sorted(str(c.name) for c in commands) == sorted(COMMANDS)
    for command in commands:
        assert COMMANDS[str(command.name)][1] == command.get_short_help_str(10_000), command.name
    listed = cli_ok("--help").stdout
    for name in COMMANDS:
        assert f"\n  {name} " in listed, name


@pytest.mark.parametrize("args", [("--version",), ("--help",)])
def test_version_and_help_import_no_command(args: tuple[str, ...]) -> None:
    modules = imported(*args)
    ours = {m for m in modules if m.startswith("coldkeep")}
    assert ours == {"coldkeep", "coldkeep.tui", "coldkeep.tui.cli", "coldkeep.tui.cli.main"}
    assert not {m for m in modules if m.split(".")[0] in (*HEAVY, "pyrage", "rich")}


def test_a_command_imports_its_own_module_not_the_others() -> None:
    modules = imported("status", "--help")
    assert "coldkeep.tui.cli.inspect" in modules
    assert not {"coldkeep.tui.cli.console", "coldkeep.tui.cli.query"} & modules
    assert not {m for m in modules if m.split(".")[0] in HEAVY}


# What a read-only command at a terminal must not load: Rich (bars only for an
# operation with a phase to count), the file mover, the pass, the remote tier's
# ship, the SQL over events, the operations of the other families.
NOT_FOR_READS = (
    "rich",
    "coldkeep.core.files.filemove",
    "coldkeep.core.ops.passes",
    "coldkeep.core.remote.shiprun",
    "coldkeep.core.events.query",
    "coldkeep.tui.operations.registry",
    "coldkeep.tui.operations.archive",
)


def test_a_read_only_command_loads_only_what_it_runs(tmp_path: Path) -> None:
    site = tmp_path / "site"
    cli_ok("demo", str(site), "--scale", "0.01", "--no-console")
    ck(site, "pass")
    config = ("--config", str(site / "coldkeep.toml"))
    path = ck(site, "find", "**/*.jsonl").stdout.split()[-1]
    for args in (("status",), ("find", "**/*.jsonl"), ("versions", path), ("cat", path)):
        modules = imported(*args, *config)
        loaded = {
            m
            for m in modules
            for heavy in NOT_FOR_READS + HEAVY
            if m == heavy or m.startswith(f"{heavy}.")
        }
        assert not loaded, f"{args[0]} loaded {sorted(loaded)}"
    assert "coldkeep.tui.operations.find" in imported("find", "**/*.jsonl", *config)
    # status is no operation: it loads none of their declarations.
    assert not {m for m in imported("status", *config) if m.startswith("coldkeep.tui.operations")}
