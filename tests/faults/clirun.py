"""Several coldkeep commands in one interpreter, one after the other, each run as
``coldkeep ARGS --config CONFIG`` runs it (its own click invocation, context and
event loop), stopping at the first that does not exit 0:

    python clirun.py CONFIG 'recover' 'pass' 'restore --path **'

The power-loss matrix runs recovery, a pass and a restore after every cut; one
interpreter for them all saves an interpreter start-up and coldkeep's imports
(~0.3 s) per command, which is what lets the matrix make all its cuts in its time
budget. Each command's output goes to this process's stdout and stderr, after a
``== ARGS`` line; the exit code is the failing command's (or 0).
"""

from __future__ import annotations

import shlex
import sys

from coldkeep.tui.cli import main


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


if __name__ == "__main__":
    sys.exit(run(sys.argv[1], sys.argv[2:]))
