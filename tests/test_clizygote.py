"""The CLI forked warm (tests/clizygote.py) says and exits exactly as a new
interpreter running it does: the suite's ~1,400 CLI runs go through it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
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


def test_a_started_child_is_waited_for_or_killed_as_the_caller_picks(tmp_path: Path) -> None:
    """``spawn``: a daemon runs on past a wait's timeout and a kill ends it with
    SIGKILL; one that has ended says its code, and a kill then changes nothing."""
    site = tmp_path / "site"
    cli("demo", str(site), "--scale", "0.01", "--no-console")
    daemon = clizygote.spawn(["run", "--config", str(site / "coldkeep.toml")], env=os.environ)
    assert daemon is not None, "the warm server did not start"
    assert daemon.wait(0.5) is None, "a daemon runs until it is stopped"
    assert daemon.kill() == -signal.SIGKILL
    ended = clizygote.spawn(["--help"], env=os.environ)
    assert ended is not None
    assert ended.wait(60) == 0
    assert ended.kill() == 0


@pytest.mark.parametrize(
    "body",
    [
        "sys.exit(3)",
        "sys.exit('bye')",
        "raise ValueError('x')",
        "raise KeyboardInterrupt",
        "print('buffered', end='')",
        "atexit.register(print, 'atexit ran')",
        "threading.Thread(target=lambda: (go.wait(), print('joined'))).start(); go.set()",
    ],
)
def test_a_child_ends_as_the_interpreter_ends_a_program(body: str) -> None:
    # The child skips the teardown of the server's modules; all else of an exit
    # is the interpreter's: codes, tracebacks, buffers, atexit, threads.
    prelude = "import atexit, sys, threading\ngo = threading.Event()\n"
    plain = prelude + body
    forked = (
        prelude
        + "import clizygote\n"
        + f"clizygote._exit_as_the_interpreter_would(lambda: exec({body!r}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(clizygote.__file__).parent)}
    ends = [
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
        )
        for code in (plain, forked)
    ]
    assert ends[0].returncode == ends[1].returncode
    assert ends[0].stdout == ends[1].stdout
    assert ends[0].stderr.splitlines()[-1:] == ends[1].stderr.splitlines()[-1:]
