"""coldkeep commands without an interpreter start-up each: every command run as
``coldkeep ARGS --config CONFIG`` runs it (its own click invocation, context and
event loop), in a process forked from one that has already imported coldkeep.

    python clirun.py CONFIG 'recover' 'pass' 'restore --path **'

runs those commands one after the other in this process, stopping at the first
that does not exit 0 (its exit code is this process's).

    python clirun.py --serve

is a fork server, for ``Forker``: each request (a JSON line on stdin: config,
commands, env, out) forks a child that sets the env, sends its output to the
file ``out`` and runs the commands as above; the server answers
``{"pid": N}`` at once and ``{"pid": N, "exit": CODE}`` when the child ends
(CODE negative for a signal, as ``subprocess`` says it). One child at a time.

The power-loss matrix runs three commands or more per cut; an interpreter
start-up and coldkeep's imports cost ~0.3 s each, about a third of a cut. The
server imports nothing but coldkeep and starts no thread, so forking it is safe.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TypedDict

from coldkeep.tui.cli.main import every_command, main


def run(config: str, commands: list[str]) -> int:
    for command in commands:
        args = [*shlex.split(command), "--config", config]
        print(f"== {command}", flush=True)
        print(f"== {command}", file=sys.stderr, flush=True)
        try:
            main.main(args, prog_name="coldkeep", standalone_mode=False)
            code = 0
        except SystemExit as done:  # how every coldkeep command ends
            code = done.code if isinstance(done.code, int) else 1
        sys.stdout.flush()
        sys.stderr.flush()
        if code != 0:
            print(f"== {command}: exit {code}", file=sys.stderr, flush=True)
            return code
    return 0


class Request(TypedDict):
    config: str
    commands: list[str]
    env: dict[str, str]
    out: str


def _child(request: Request) -> None:
    """In the forked child: never returns."""
    code = 70
    try:
        os.environ.update(request["env"])
        out = os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        code = run(request["config"], request["commands"])
    finally:
        os._exit(code)


def serve() -> None:
    # Every command's module imported once, here: the CLI imports a command's
    # module only when it runs it, and each forked child would pay for it.
    every_command()
    for line in sys.stdin:
        request: Request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request)
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"pid": pid, "exit": os.waitstatus_to_exitcode(status)}), flush=True)


class Forker:
    """The test side of ``--serve``: start one child, wait for it (or not)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert self.proc.stdout is not None
        self._fd = self.proc.stdout.fileno()  # read raw: select must see every byte
        self._buf = b""
        self.pid: int | None = None

    def _answer(self, timeout: float) -> dict[str, int] | None:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._fd], [], [], left)[0]:
                return None
            chunk = os.read(self._fd, 4096)
            if not chunk:
                raise RuntimeError(f"the fork server ended (exit {self.proc.wait()})")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        answer: dict[str, int] = json.loads(line)
        return answer

    def start(self, config: Path, commands: list[str], out: Path, env: dict[str, str]) -> int:
        assert self.pid is None, "one child at a time"
        assert self.proc.stdin is not None
        request = Request(config=str(config), commands=commands, env=env, out=str(out))
        self.proc.stdin.write(json.dumps(request).encode() + b"\n")
        self.proc.stdin.flush()
        started = self._answer(60)
        assert started is not None, "the fork server did not answer"
        self.pid = started["pid"]
        return self.pid

    def wait(self, timeout: float) -> int | None:
        """The child's exit code, or None if it is still running after ``timeout``."""
        assert self.pid is not None
        done = self._answer(timeout)
        if done is None:
            return None
        assert done["pid"] == self.pid
        self.pid = None
        return done["exit"]

    def kill(self) -> int:
        """SIGKILL the child; its exit code: -SIGKILL, or whatever it exited with
        when it ended on its own first (between a ``wait`` that timed out and this
        kill it may have ended and been reaped: its report is on its way)."""
        assert self.pid is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        code = self.wait(60)
        assert code is not None, "a killed child did not end"
        return code

    def run(self, config: Path, commands: list[str], out: Path, env: dict[str, str]) -> int:
        """Start a child and wait for it to end (killed after 300 s)."""
        self.start(config, commands, out, env)
        code = self.wait(300)
        return self.kill() if code is None else code

    def close(self) -> None:
        if self.pid is not None:
            self.kill()
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(30)


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        sys.exit(run(sys.argv[1], sys.argv[2:]))
