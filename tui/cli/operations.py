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

import importlib
from functools import partial
from pathlib import Path
from typing import Any

import click

from coldkeep.core.base.errors import UsageError

from ..operations.spec import Operation, Result, Words
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
            words = _words(op, result)
            text = partial(words.report, op.name, result)
            ctx.emit(op.name, not words.failed(result), result.to_dict(), text)
            return words.exit_code(result)

        run_command(go(), ctx)

    params = [*op.params, *shared_options(wait_opt=op.locks)]
    return click.Command(op.name, callback=callback, params=params, help=op.help)


def _words(op: Operation, result: Result) -> Words[Any]:
    """The words of ``result``: its operation's own, or (a result another family
    declares: ``restore --thaw``'s plan is the thaw's) the registry's."""
    own = next((w for w in op.words if type(result) is w.kind), None)
    if own is not None:
        return own
    from ..operations.registry import words_of  # noqa: PLC0415 - every family, only then

    return words_of(result)


def command(name: str, family: str) -> click.Command:
    """The command ``name``, made from its entry in tui/operations/``family``.py
    (that family imported alone: a command loads its own operation's modules)."""
    module = importlib.import_module(f"coldkeep.tui.operations.{family}")
    return command_for(next(op for op in module.OPERATIONS if op.name == name))
