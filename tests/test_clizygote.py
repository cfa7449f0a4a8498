"""The CLI forked warm (tests/clizygote.py) says and exits exactly as a new
interpreter running it does: the suite's ~1,400 CLI runs go through it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import clizygote
import pytest

from helpers import COLDKEEP, cli


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["no-such-command"],
        ["status", "--config", "/no/such/coldkeep.toml"],
        ["demo", "{tmp}", "--scale", "0.01", "--no-console"],
    ],
)
def test_a_warm_run_is_a_new_interpreter_s_run(args: list[str], tmp_path: Path) -> None:
    runs = []
    for way in ("warm", "cold"):
        site = str(tmp_path / way)
        argv = [a.replace("{tmp}", site) for a in args]
        if way == "warm":
            run = clizygote.run(argv, env={**os.environ, "COLUMNS": "100"}, timeout=60)
            assert run is not None, "the warm server did not start"
        else:
            run = subprocess.run(
                [*COLDKEEP, *argv],
                capture_output=True,
                text=True,
                env={**os.environ, "COLUMNS": "100"},
                timeout=60,
                check=False,
            )
        runs.append((run.returncode, run.stdout.replace(site, "SITE"), run.stderr))
    assert runs[0] == runs[1]
    assert (runs[0][0] == 0) == (args[0] in ("--help", "demo"))


def test_a_run_that_sets_what_an_interpreter_reads_at_start_is_cold() -> None:
    assert clizygote.warm_ok(dict(os.environ))
    assert not clizygote.warm_ok({**os.environ, "PYTHONWARNINGS": "error"})
    assert not clizygote.warm_ok(dict(os.environ), under=["faketime", "+1y"])
    assert cli("--version").stdout.startswith("python -m coldkeep.tui.cli.main, version ")
