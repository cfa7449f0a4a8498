"""The CLI imports a command's module only when that command runs: ``--version``
and ``--help`` import none (they start in a tenth of a second), a command
imports its own and not the console, the S3 client or the SQL engine. The
group's list of commands, written out for ``--help``, says of each what the
command says of itself."""

from __future__ import annotations

import subprocess
import sys

import pytest

from coldkeep.tui.cli.main import COMMANDS, every_command

from helpers import cli_ok

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
