"""An id and a time as an operator types them (``cat PATH@VERSION``, restore's
IDS and ``--after``/``--before``, a hold's entry and ``--until``, the console's
filters): the one reading of each, so that every command takes the same text
the same way.

Invariants:
- An id is ASCII digits and nothing else. Python's own readings take more:
  ``str.isdigit`` is true of ``²`` (which ``int`` then refuses) and ``int``
  reads ``١`` (an Arabic-Indic digit) as 1, and `` 1``, ``+1`` and ``1_0``.
- A time is ASCII ISO 8601 (``datetime.fromisoformat``'s), local time without
  an offset; one the platform cannot convert (``0001-01-01`` local is before
  year 1 in UTC) is no time, never an exception.
- Neither raises: what is not one is None, and the caller says what to write.
"""

from __future__ import annotations

from datetime import datetime


def parse_id(text: str) -> int | None:
    """``text`` as an id (an entry's, a hold's); None when it is not ASCII digits."""
    return int(text) if text.isascii() and text.isdigit() else None


def parse_time(text: str) -> int | None:
    """``text`` as a time (``YYYY-MM-DD[THH:MM[:SS[.fff]]]``, ``Z`` or ``±HH:MM``
    for an offset, else local time) in ms since the epoch; None when it is not one."""
    if not text.isascii():
        return None
    try:
        return int(datetime.fromisoformat(text).timestamp() * 1000)
    except (ValueError, OverflowError):
        return None
