"""What the query (query.py) and its engines (duckquery.py, sqlitequery.py) share:
the names of the view over every event row, a SQL string literal, one line of an
error, and the errors a query refuses with.

It sits below the query and its engines so that each engine imports it without
importing the query that loads the engine.
"""

from __future__ import annotations

from ..base.errors import ColdkeepError, UsageError

VIEW = "events"
# The view's rows with where each came from ('live' or 'archive'), for counts
# of what a restore would put back; ``events`` leaves the column out.
SOURCED, FROM = "coldkeep_rows", "coldkeep_from"


class QueryError(ColdkeepError):
    """The query cannot be answered; the message says why and what to do."""


class BadQuery(UsageError):
    """The SQL given is not one read-only statement, or does not parse."""


class QueryRaced(QueryError):
    """Rows moved between the live table and the months while the query read
    them, past the wait a move gives a reader: the answer is not one."""

    def __init__(self) -> None:
        super().__init__(
            "event rows moved between the live table and the months while the query read "
            "them (a pass or restore-events waits for a query a few seconds, no longer): "
            "the answer could count rows twice or miss some; run the query again"
        )


def sql_text(value: str) -> str:
    """``value`` as a SQL string literal (for a statement that takes no
    parameters)."""
    return "'" + value.replace("'", "''") + "'"


def first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]
