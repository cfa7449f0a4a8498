"""The registry's operations as commands (tui/operations): ``pass``, ``recover``,
``adopt``, ``sweep``, ``restore``, ``restore-events``, ``verify``, ``ship``,
``rebuild-manifest``, ``checkpoint`` and ``expire``, each made from its entry
alone.

A command's options are its entry's, then ``--wait`` (where it takes the
archive lock), ``--json`` and ``--config``. Its options are bound to its call
before anything is read (a usage error is one line, exit 2); the call runs with
progress on stderr; the result is its words or one JSON document
(``to_dict()``), and the exit code is 1 when the words say it failed.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import click

from coldkeep.core.base.errors import UsageError

from ..operations import OPERATIONS, words_of
from ..operations.spec import Operation
from .kit import ctx_for, fail, identities_for, run_command, shared_options


def command_for(op: Operation) -> click.Command:
    def callback(config: Path | None, json_out: bool, wait: float = 0.0, **options: Any) -> None:
        try:
            if "identity" in options:  # identity_option(): bind takes the keys, loaded
                options["identity"] = identities_for(options["identity"])
            run = op.bind(options)
        except UsageError as err:
            fail(str(err), err.exit_code)
        ctx = ctx_for(config, json_out, wait)

        async def go() -> int:
            result = await run(ctx.archiver(), ctx.cancel)
            words = words_of(result)
            text = partial(words.report, op.name, result)
            ctx.emit(op.name, not words.failed(result), result.to_dict(), text)
            return words.exit_code(result)

        run_command(go(), ctx)

    params = [*op.params, *shared_options(wait_opt=op.locks)]
    return click.Command(op.name, callback=callback, params=params, help=op.help)


COMMANDS = [command_for(op) for op in OPERATIONS]
BY_NAME = {command.name: command for command in COMMANDS}
