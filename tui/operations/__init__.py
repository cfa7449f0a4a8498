"""The operations, each declared once: its ``coldkeep`` command (name, help,
options, the archiver call they make), when its result counts as failed, its
console action and the question the console asks first, and its result in
words (the JSON is the result's own ``to_dict()``, docs/json.md).

The CLI makes a command of every entry (tui/cli/operations.py); the console
makes every entry's action a key, a button, a help line and a palette entry
(tui/console/kit/actions.py) and runs it through one path (ask, then start);
both say any result in words through ``headline`` and ``report`` here.

Adding an operation touches three files: its core module, its ``Archiver``
method and its entry in a family module here (an ``Operation`` in that
module's ``OPERATIONS``).

Its modules, one line each, are in the module map of docs/architecture.md.
"""

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
