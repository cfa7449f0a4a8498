"""Time as coldkeep records it: milliseconds since the epoch (``now_ms``), and the
constants that convert to and from it. Every stored time stamp (the manifest's,
the audit's, the job runs') is in these units unless its name says otherwise.
"""

from __future__ import annotations

import time

NS_PER_S = 1_000_000_000
NS_PER_MS = 1_000_000
DAY_S = 86_400
DAY_MS = DAY_S * 1000
DAY_NS = DAY_S * NS_PER_S


def now_ms() -> int:
    """Now, in ms since the epoch."""
    return time.time_ns() // NS_PER_MS
