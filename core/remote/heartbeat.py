"""The site's heartbeat in the bucket: a small object, signed by the site key,
that says the host is alive and how it is, for the fleet view and ``fleet
status`` to read without any snapshot.

    heartbeat/h<ms, 13 digits>-<8 hex>.json      one per beat, create-only

Each beat is a new object (every write coldkeep makes to a bucket is create-
only, so nothing a host wrote can be overwritten by a later one); the ship
deletes all but the newest ``KEEP`` of them, so a site holds a handful however
long it runs. A beat is put by every ship and by the scheduler's ``heartbeat``
job in between (one PUT, nothing read).

A reader believes a beat only when its signature verifies with a key the site
trusts (the keys its snapshots are judged by) and names the site's id; its
time is the older of the one it signs and the bucket's Last-Modified, so
neither a host's clock running ahead nor a genuine old beat copied to a new
name makes a silent host look alive. Names order nothing but which few are read.

Beside each beat, once it is in place, an empty object names it in the
fleet's index of beats, one folder a site at the top of the prefix:

    .beats/<site>/h<ms>-<8 hex>.json             create-only, the newest KEEP kept

A fleet reader lists that folder once for every site (a thousand sites in a
few requests) and lists a site again only when its entries there differ from
those its last look saw (keptlisting.py). The index is a hint, never an authority:
what a site says is read from its own prefix and verified as ever, and a site
the index does not name (an older coldkeep's, or a host not allowed to write
there) is listed at every look. Written after the beat, so an entry never
names a beat not yet there; a host that cannot write it still beats (the
ship's notices and the heartbeat job's run say why it is not indexed).
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import secrets
from dataclasses import dataclass, field, fields
from typing import Any

from ..base.errors import RemoteError
from ..base.layout import Layout
from ..base.signing import SiteKey, fingerprint, verifies
from .objectstore import ObjectInfo, ObjectStore, RemoteMissing
from .smallreads import SmallReads, read_listed
from .snapshots import Trust

WHAT = "heartbeat"
PREFIX = "heartbeat/"
INDEX = ".beats/"  # the fleet's index of beats, a folder a site (a dot: no site's name)
NAME = re.compile(r"^h\d{13}-[0-9a-f]{8}\.json$")  # in its folder
KEEP = 3  # beats a ship leaves
READ = 3  # beats a reader reads, newest names first
MAX_BEAT = 64 << 10  # a beat is small; a bigger object under its name is not one


@dataclass(frozen=True)
class Beat:
    """What one beat says of its site (ms times by the host's clock)."""

    site: str
    site_id: str
    key: str  # the signing key's fingerprint
    at: int
    version: str  # coldkeep's
    host: str
    mode: str
    interval_s: int  # the next beat is due within this
    last_pass_at: int | None = None
    last_pass_status: str | None = None
    backlog_files: int = 0
    backlog_bytes: int = 0
    backlog_rows: int = 0
    backlog_since: int | None = None  # ms: the backlog has stood since then
    file_problems: int = 0
    verify_failed: int = 0  # archive files whose local verify failed
    remote_verify_failed: int = 0  # remote copies whose verify failed
    pending_files: int = 0  # archived, not yet shipped
    pending_bytes: int = 0
    locked: int = 0
    legal_held: int = 0
    job_failures: dict[str, str] = field(default_factory=dict)  # job: its last run's error

    def to_dict(self) -> dict[str, Any]:
        # Not asdict: it deep-copies, and a fleet view verifies a beat a site.
        out = {f.name: getattr(self, f.name) for f in _FIELDS}
        out["job_failures"] = dict(self.job_failures)
        return out

    @classmethod
    def parse(cls, data: Any) -> Beat:
        """Each field there and of its type, or ``ValueError``."""
        if not isinstance(data, dict) or set(data) != {f.name for f in fields(cls)}:
            raise ValueError("not a heartbeat")
        for f in fields(cls):
            value, kind = data[f.name], str(f.type)
            ok = {
                "str": isinstance(value, str),
                "int": type(value) is int,
                "int | None": value is None or type(value) is int,
                "str | None": value is None or isinstance(value, str),
                "dict[str, str]": isinstance(value, dict)
                and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()),
            }[kind]
            if not ok:
                raise ValueError(f"heartbeat field {f.name} is not a {kind}")
        return cls(**data)


_FIELDS = fields(Beat)


def beat_key(at: int) -> str:
    """A new beat's key under the site's prefix."""
    return f"{PREFIX}h{at:013d}-{secrets.token_hex(4)}.json"


def signed(key: SiteKey, beat: Beat) -> bytes:
    body = beat.to_dict()
    doc = {WHAT: body, "public_key": key.public_b64, "signature": key.sign(WHAT, body)}
    return json.dumps(doc, sort_keys=True, indent=1).encode() + b"\n"


def read_beat(data: bytes, trust: Trust) -> Beat | str:
    """The beat ``data`` holds when it verifies and is the trusted site's; else why not."""
    try:
        doc = json.loads(data)
        beat = Beat.parse(doc[WHAT])
        public, signature = doc["public_key"], doc["signature"]
    except (ValueError, KeyError, TypeError):
        return "its heartbeat cannot be read"
    if not isinstance(public, str) or not isinstance(signature, str):
        return "its heartbeat cannot be read"
    if not verifies(public, signature, WHAT, beat.to_dict()):
        return "its heartbeat's signature does not verify"
    if fingerprint(base64.b64decode(public)) != beat.key or beat.key not in trust.keys:
        return f"its heartbeat is signed by a key the site does not trust ({beat.key})"
    if beat.site_id != trust.site_id:
        return f"its heartbeat is another site's (id {beat.site_id})"
    return beat


@dataclass(frozen=True)
class Published:
    """A beat put: its key under the site, and why the fleet's index does not
    name it (None: it does)."""

    key: str
    unindexed: str | None = None


async def publish(
    store: ObjectStore, site: str, key: SiteKey, beat: Beat, layout: Layout
) -> Published:
    """``beat`` signed and put under ``site``'s prefix, then named in the
    fleet's index (its older entries but the newest ``KEEP`` let go)."""
    name = beat_key(beat.at)
    await store.put_bytes(
        f"{site}/{name}", signed(key, beat), scratch=layout.scratch("heartbeat"),
        root=layout.root, random_key=True,
    )  # fmt: skip
    folder = f"{INDEX}{site}/"
    try:
        await store.put_bytes(
            folder + name.removeprefix(PREFIX), b"", scratch=layout.scratch("beatindex"),
            root=layout.root, random_key=True,
        )  # fmt: skip
        await _prune(store, folder, KEEP)
    except RemoteError as err:
        # Even a refusal: the beat went with these credentials, and a host let
        # write only under its own prefix is a fleet's choice. Its readers
        # list this site whole at each look; the ship and the job say why.
        return Published(name, f"not in the fleet's index of beats ({folder}): {err}")
    return Published(name)


async def _beats(
    store: ObjectStore, folder: str, listed: list[ObjectInfo] | None = None
) -> list[ObjectInfo]:
    """The beats in ``folder`` (a site's ``heartbeat/``, or its folder of the
    index) as listed (``listed``: the folder as listed, where given; anything
    else there left out), the newest name first."""
    if listed is None:
        listed = [i async for i in store.list_objects(folder)]
    named = (i for i in listed if NAME.match(i.key[len(folder) :]))
    return sorted(named, key=lambda i: i.key, reverse=True)


async def prune(store: ObjectStore, site: str, keep: int = KEEP) -> int:
    """The site's beats but the newest ``keep`` (by name) deleted; how many."""
    return await _prune(store, f"{site}/{PREFIX}", keep)


async def _prune(store: ObjectStore, folder: str, keep: int) -> int:
    """The beats in ``folder`` but the newest ``keep`` deleted; how many."""
    gone = (await _beats(store, folder))[keep:]
    for info in gone:
        await store.delete(info.key)
    return len(gone)


@dataclass(frozen=True)
class Heard:
    """The newest beat of a site a reader believes, and when it was (the older
    of its own time and the bucket's); or why none is believed."""

    beat: Beat | None
    at: int | None = None
    problem: str | None = None


async def newest(
    store: ObjectStore,
    site: str,
    trust: Trust,
    reads: SmallReads | None = None,
    listed: list[ObjectInfo] | None = None,
) -> Heard:
    """The site's newest believable beat: the first, newest name first, of the
    ``READ`` newest names that the site's key signs (names order nothing a
    forger cannot plant: one that does not verify is passed over, and said
    when none does). Read through ``reads``, from ``listed`` (its
    ``heartbeat/`` as listed), where given."""
    problems: list[str] = []
    for info in (await _beats(store, f"{site}/{PREFIX}", listed))[:READ]:
        if info.size > MAX_BEAT:
            problems.append("a heartbeat too big to be one")
            continue
        try:
            data = await read_listed(store, info, reads)
        except RemoteMissing:  # pruned since the listing
            continue
        # In a thread: an Ed25519 check lets go of the GIL, and a thousand
        # sites' checks on the event loop were a third of the fleet's load.
        read = await asyncio.to_thread(read_beat, data, trust)
        if isinstance(read, str):
            problems.append(read)
            continue
        return Heard(read, read.at if info.modified is None else min(read.at, info.modified))
    if problems:
        return Heard(None, problem="; ".join(dict.fromkeys(problems)))
    return Heard(None, problem="no heartbeat (it has not shipped or run since it would)")


__all__ = [
    "INDEX",
    "KEEP",
    "Beat",
    "Heard",
    "Published",
    "newest",
    "prune",
    "publish",
    "read_beat",
    "signed",
]
