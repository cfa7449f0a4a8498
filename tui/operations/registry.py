"""The operation registry: every entry of the family modules, by the console
action's name and by command name, and each result's words (``headline``,
``report``). Imported by the clients that list every operation (the console,
the CLI's ``operations`` commands); a command that runs one operation imports
its family module alone."""

from __future__ import annotations

from typing import Any

from . import archive, checks, find, jobs, remote, restore, retention, thaw
from .spec import Operation, Result, Words

OPERATIONS: tuple[Operation, ...] = (
    *archive.OPERATIONS,
    *restore.OPERATIONS,
    *thaw.OPERATIONS,
    *find.OPERATIONS,
    *checks.OPERATIONS,
    *remote.OPERATIONS,
    *retention.OPERATIONS,
)
# By the console action's name (``run_pass``, ``ship``…).
BY_ACTION = {op.console.action.name: op for op in OPERATIONS if op.console is not None}
# By command name, which is also the name of the scheduler's job that runs it.
BY_NAME = {op.name: op for op in OPERATIONS}

_WORDS: dict[type[Any], Words[Any]] = {
    **{w.kind: w for op in OPERATIONS for w in op.words},
    jobs.WORDS.kind: jobs.WORDS,  # a job run now from the console
}


def words_of(result: Result) -> Words[Any]:
    """The words of ``result``'s type (every operation's result has them)."""
    return _WORDS[type(result)]


def headline(result: Result) -> str:
    """``result`` in one line: the console's notification and in-flight line,
    and the last line of the CLI's text."""
    return words_of(result).headline(result)


def report(command: str, result: Result) -> str:
    """The CLI's whole text for ``command``'s result: what needs a look first,
    one line each, then the headline (a pass's says how it ended in its first
    line instead, as the runbook shows it)."""
    return words_of(result).report(command, result)
