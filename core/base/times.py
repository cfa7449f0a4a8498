"""Time as coldkeep records it: milliseconds since the epoch (``now_ms``), and the
constants that convert to and from it. Every stored time stamp (the manifest's,
the audit's, the job runs') is in these units unless its name says otherwise.
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime

from .errors import UsageError

NS_PER_S = 1_000_000_000
NS_PER_MS = 1_000_000
DAY_S = 86_400
DAY_MS = DAY_S * 1000
DAY_NS = DAY_S * NS_PER_S


def now_ms() -> int:
    """Now, in ms since the epoch."""
    return time.time_ns() // NS_PER_MS


def day_name(day: int) -> str:
    """UTC day number ``day`` (days since the epoch) as "YYYY-MM-DD"."""
    return datetime.fromtimestamp(day * DAY_S, UTC).strftime("%Y-%m-%d")


def day_of(ms: int) -> str:
    """The UTC day of ``ms`` (since the epoch) as "YYYY-MM-DD"."""
    return day_name(ms // DAY_MS)


# A file's mtime read back from the archive (a copied one, maybe) is kept when it
# is within ±2**62 ns of the epoch (1824 to 2116): before 1970 is a time too, and
# is kept exactly; beyond that it is not a clock's.
MTIME_LIMIT_NS = 1 << 62


def is_mtime(ns: int) -> bool:
    """Whether ``ns`` (since the epoch) can be a file's mtime, before 1970 included."""
    return -MTIME_LIMIT_NS < ns < MTIME_LIMIT_NS


# The latest time stamp coldkeep records: 9999-12-31, well inside SQLite's
# int64 and Python's datetime.
LATEST_MS = 253_402_300_799_000


def days_after(at_ms: int, days: float, what: str) -> int:
    """``days`` after ``at_ms``, in ms; a ``UsageError`` naming ``what`` (the
    config key) for a count that is not finite or ends past ``LATEST_MS``, so
    that a caller computes it before it writes anything (a grace recorded
    after its intent, then failing to convert, left the intent behind)."""
    if not math.isfinite(days) or at_ms + days * DAY_MS > LATEST_MS:
        raise UsageError(f"{what} = {days}: that many days cannot be recorded (use 0 to 36500)")
    return at_ms + int(days * DAY_MS)
