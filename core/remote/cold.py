"""Cold objects: S3's GLACIER and DEEP_ARCHIVE classes keep an object where no
GET reaches it until a restore request (a *thaw*) has made a temporary copy,
hours later. Owns what is known of them (each tier's usual wait, the shortest
stay S3 bills), the state of one object's thaw as a HEAD says it, and the error
a read of a cold object raises.

Invariant: a read refused because the object is cold is said as such, with the
class and what to do: never a raw ``InvalidObjectState``, never taken for a
credential problem (a fatal error) nor a missing object (which a verify would
ship again).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

from ..base.configprices import TIERS
from ..base.configremote import COLD_CLASSES
from ..base.errors import RemoteError

#: How long a thaw usually takes, as AWS states it, by class and tier (Deep
#: Archive offers no expedited tier).
WAITS = {
    ("GLACIER", "expedited"): "1-5 minutes",
    ("GLACIER", "standard"): "3-5 hours",
    ("GLACIER", "bulk"): "5-12 hours",
    ("DEEP_ARCHIVE", "standard"): "up to 12 hours",
    ("DEEP_ARCHIVE", "bulk"): "up to 48 hours",
}
#: The shortest stay S3 bills for, in days: an object deleted sooner is
#: charged for the rest.
MIN_DAYS = {"GLACIER": 90, "DEEP_ARCHIVE": 180}


__all__ = [
    "MIN_DAYS",
    "TIERS",
    "WAITS",
    "RemoteCold",
    "ThawState",
    "is_cold",
    "parse_thaw",
    "readable",
    "wait_of",
]


def is_cold(storage_class: str | None) -> bool:
    return storage_class in COLD_CLASSES


def wait_of(storage_class: str, tier: str) -> str | None:
    """The tier's usual wait for the class; None where the class has no such tier."""
    return WAITS.get((storage_class, tier))


@dataclass(frozen=True)
class ThawState:
    """An object's thaw as S3 says it (``x-amz-restore``): under way, or done
    and its copy readable until ``until`` (ms since the epoch)."""

    ongoing: bool
    until: int | None = None


_ONGOING = re.compile(r'ongoing-request\s*=\s*"(true|false)"')
_EXPIRY = re.compile(r'expiry-date\s*=\s*"([^"]+)"')


def parse_thaw(header: str | None) -> ThawState | None:
    """``x-amz-restore``'s value; None where it says nothing (no thaw asked, or
    its copy ended)."""
    if not header:
        return None
    ongoing = _ONGOING.search(header)
    if ongoing is None:
        return None
    if ongoing.group(1) == "true":
        return ThawState(ongoing=True)
    expiry = _EXPIRY.search(header)
    try:
        until = int(parsedate_to_datetime(expiry.group(1)).timestamp() * 1000) if expiry else None
    except (TypeError, ValueError):
        until = None
    return ThawState(ongoing=False, until=until)


def readable(storage_class: str | None, thaw: ThawState | None) -> bool:
    """Whether a GET of the object can succeed now."""
    return not is_cold(storage_class) or (thaw is not None and not thaw.ongoing)


class RemoteCold(RemoteError):
    """A read of an object in a cold class that is not thawed now: what it
    takes to read it, in one line: the class, the standard tier's usual wait
    and estimated cost, and the command that asks (``ask``; a caller that knows
    the entry read names it with ``for_entry``)."""

    def __init__(
        self,
        where: str,
        storage_class: str | None,
        thaw: ThawState | None,
        cost: str | None = None,
        ask: str = "coldkeep thaw (the same selection as restore)",
    ) -> None:
        cls = storage_class or "a cold"
        wait = wait_of(storage_class or "", "standard")
        usual = [f"usually takes {wait}"] if wait else []
        usual += [f"costs {'' if cost.startswith('under') else 'about '}{cost}"] if cost else []
        said = f"; a standard thaw {' and '.join(usual)}" if usual else ""
        if thaw is not None and thaw.ongoing:
            said = f"in {cls} storage, its thaw asked and not done yet{said}: read it again then"
        else:
            said = f"in {cls} storage, not thawed: ask for it with {ask}{said}"
        super().__init__(f"{where}: {said}")
        self.where = where
        self.storage_class = storage_class
        self.thaw = thaw
        self.cost = cost

    def for_entry(self, entry_id: int, relpath: str | None = None) -> RemoteCold:
        """The same refusal for the entry that was read: named first, and the
        command that thaws it."""
        named = f"entry {entry_id}" if relpath is None else f"{relpath} (entry {entry_id})"
        where = f"{named}, in {self.where}"
        ask = f"coldkeep thaw {entry_id} --yes"
        return RemoteCold(where, self.storage_class, self.thaw, self.cost, ask)
