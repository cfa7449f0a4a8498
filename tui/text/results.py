"""Each operation's result in words, for the CLI and the console alike. The words
are declared with the operation (tui/operations); here a client asks for them by
the result alone. (The JSON is the result's own ``to_dict()``, docs/json.md.)

``headline(result)`` is one line: the console's notification and in-flight line,
and the last line of the CLI's text. ``report(command, result)`` is the CLI's
whole text: what needs a look first, one line each, then the headline (a pass's
says how it ended in its first line instead, as the runbook shows it).
"""

from __future__ import annotations

from ..operations import words_of
from ..operations.spec import Result


def headline(result: Result) -> str:
    return words_of(result).headline(result)


def report(command: str, result: Result) -> str:
    """The CLI's text for ``command``'s result."""
    return words_of(result).report(command, result)
