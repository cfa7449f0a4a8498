"""Thawing as S3 does it, slowly: the proxy's model of restore requests for the
GLACIER and DEEP_ARCHIVE classes, on the test server's clock.

moto refuses a GET of a cold object (403 ``InvalidObjectState``) until it is
restored, as S3 does, but restores it the moment it is asked. With a ``Thaw``
set on the ``FaultProxy`` (``proxy.thaw = Thaw(clock)``), a restore takes as
long as its tier says, measured on ``clock`` (the server's: a test moves it
with ``S3Server.advance_clock`` instead of waiting), and the restored copy ends
``Days`` after it is ready:

* ``POST ?restore`` goes to moto (which checks the object and its class); what
  it accepted is then answered as S3 would: 202 for a new request, 409
  ``RestoreAlreadyInProgress`` while one runs, 200 once the copy is ready (its
  days counted again from now), 202 again once it has ended.
* ``HEAD`` carries ``x-amz-restore: ongoing-request="true"`` while the restore
  runs, ``ongoing-request="false", expiry-date="…"`` while the copy is there, and
  no such header once it has ended.
* ``GET`` of an object asked for and not readable now (still thawing, or its
  copy ended) is refused with 403 ``InvalidObjectState`` naming the class,
  without reaching moto; ``refused`` counts those.

Only what went through the proxy is modelled: a key no restore was asked for
through it is moto's alone.
"""

from __future__ import annotations

import threading
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import formatdate

HOUR_S = 3600.0
DAY_S = 86_400.0
#: How long a restore takes by tier: DEEP_ARCHIVE's usual waits as AWS states
#: them (Standard within 12 hours, Bulk within 48), Expedited GLACIER's (1-5 min).
WAITS_S = {"Expedited": 5 * 60.0, "Standard": 12 * HOUR_S, "Bulk": 48 * HOUR_S}


def s3_error(code: str, message: str, **extra: str) -> bytes:
    fields = "".join(f"<{k}>{v}</{k}>" for k, v in extra.items())
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{code}</Code><Message>{message}</Message>{fields}</Error>"
    ).encode()


@dataclass
class Restore:
    """One key's restore: asked at ``asked``, readable from ``ready`` until ``ends``."""

    storage_class: str
    tier: str
    asked: float
    ready: float
    ends: float


@dataclass
class Thaw:
    """The restores asked for through the proxy, by ``/bucket/key``."""

    clock: Callable[[], float]
    waits_s: dict[str, float] = field(default_factory=lambda: dict(WAITS_S))
    restores: dict[str, Restore] = field(default_factory=dict)
    #: GETs refused because the object was not thawed (a client that reads a
    #: cold object before its restore is done shows here).
    refused: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def ask(self, path: str, body: bytes, storage_class: str) -> tuple[int, bytes]:
        """A restore request moto accepted for the object at ``path``: S3's
        answer, as of now."""
        days, tier = _parse(body)
        now = self.clock()
        with self._lock:
            known = self.restores.get(path)
            if known is not None and now < known.ready:
                return 409, s3_error(
                    "RestoreAlreadyInProgress", "Object restore is already in progress"
                )
            if known is not None and now < known.ends:
                known.ends = now + days * DAY_S
                return 200, b""
            ready = now + self.waits_s[tier]
            self.restores[path] = Restore(storage_class, tier, now, ready, ready + days * DAY_S)
            return 202, b""

    def header(self, path: str) -> str | None:
        """``x-amz-restore`` for the object at ``path`` now (None: leave moto's);
        the empty string: none (its copy ended)."""
        with self._lock:
            known = self.restores.get(path)
        if known is None:
            return None
        now = self.clock()
        if now < known.ready:
            return 'ongoing-request="true"'
        if now < known.ends:
            return f'ongoing-request="false", expiry-date="{formatdate(known.ends, usegmt=True)}"'
        return ""

    def refusal(self, path: str) -> bytes | None:
        """The 403 a GET of the object at ``path`` gets now (None: let it through)."""
        with self._lock:
            known = self.restores.get(path)
            if known is None or known.ready <= self.clock() < known.ends:
                return None
            self.refused += 1
        return s3_error(
            "InvalidObjectState",
            "The operation is not valid for the object's storage class",
            StorageClass=known.storage_class,
        )


def _parse(body: bytes) -> tuple[int, str]:
    """``Days`` and the tier of a ``RestoreRequest`` (S3's default tier: Standard)."""
    root = ET.fromstring(body)
    found = {el.tag.rpartition("}")[2]: (el.text or "").strip() for el in root.iter()}
    return int(found.get("Days") or 1), found.get("Tier") or "Standard"


__all__ = ["DAY_S", "HOUR_S", "WAITS_S", "Restore", "Thaw", "s3_error"]
