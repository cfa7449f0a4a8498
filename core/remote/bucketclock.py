"""The bucket's clock: what lock dates, remote expiry and the dates of signed
snapshots are decided against, and how far this host's clock is from it.

A host's clock can be wrong by a year (a dead RTC battery, a VM restored from an
old image, a hand); the bucket's is the one that enforces Object Lock. An S3
server's clock is the ``Date`` of its answers (objectstore.py ``server_now``);
a folder has none of its own: its clock is this host's.

Invariants:
- A ship that would lock what it uploads stops, before it writes anything, when
  this host's clock is more than ``SKEW_MS`` from the bucket's, saying by how
  much: a lock date from a wrong clock is either too short (the bucket lets the
  object go early) or never asked for (a retention "already over").
- Remote expiry is decided by the bucket's clock: an archived item with remote
  copies is expired only once the bucket's clock too says it is due.
"""

from __future__ import annotations

from ..base.times import DAY_MS
from .objectstore import ObjectStore, RemoteFatal

# The bucket's clock and this host's agree to within this (ms).
SKEW_MS = 5 * 60 * 1000


class ClockSkew(RemoteFatal):
    """This host's clock is too far from the bucket's to decide a lock by."""


async def bucket_now(store: ObjectStore, host_now: int) -> int:
    """The bucket's time now (ms): its server's, or this host's (``host_now``)
    for a store without a clock of its own."""
    return await store.server_now() if store.own_clock else host_now


def apart(host_now: int, bucket: int) -> str:
    """How far this host's clock is from the bucket's, in words."""
    ms = host_now - bucket
    size = abs(ms)
    for unit, span in (("days", DAY_MS), ("hours", 3_600_000), ("minutes", 60_000)):
        if size >= 2 * span:
            amount = f"{round(size / span)} {unit}"
            break
    else:
        amount = f"{size // 1000} seconds"
    return f"{amount} {'ahead of' if ms > 0 else 'behind'}"


async def skew(store: ObjectStore, host_now: int) -> str | None:
    """How far this host's clock is from the bucket's, in words, when more
    than ``SKEW_MS``; None when they agree (or the store's clock is this host's)."""
    bucket = await bucket_now(store, host_now)
    return None if abs(host_now - bucket) <= SKEW_MS else apart(host_now, bucket)


async def check_clock(store: ObjectStore, host_now: int, doing: str) -> None:
    """Raise ``ClockSkew`` when this host's clock is too far from the bucket's
    for ``doing``."""
    said = await skew(store, host_now)
    if said is not None:
        raise ClockSkew(
            f"{store.url}: this host's clock is {said} the bucket's (the Date of its answers): "
            f"{doing} stopped before writing anything, since lock dates follow the bucket's "
            "clock; set this host's clock right (NTP) and run it again"
        )
