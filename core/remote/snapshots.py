"""Manifest snapshots in the bucket: their names, the signed statement beside
each, and which of those under a site's prefix are the site's own.

    manifest/g<generation>-<8 hex>.db[.<set>.age]        a snapshot (sealed: .age)
    manifest/g<generation>-<8 hex>.db[.<set>.age].sig    its statement, signed

A statement says which site (its name and random id) took the snapshot, its
generation, when by the bucket's clock, which object it is (its key, size and
SHA-256 as stored) and which key signed it; the signature is the site key's
(base/signing.py). Names order nothing: whoever can write the bucket can plant
any name. Snapshots are ordered by the generation their statement signs.

A snapshot under a site's prefix is judged:

    own            its statement verifies, with the site's id and a key the site
                   trusts, and was not taken in the bucket's future
    other-site     signed for another site id (a second host shipping under the
                   same remote.site, or a copy)
    untrusted-key  the site's id, signed by a key the site does not trust
    future         taken after the bucket's now: ships date their statements by
                   the bucket's clock, so only a forgery, or a ship to a folder
                   (whose clock is the host's) while the host's clock ran ahead
    forged         a statement that does not verify, or names another object
    unsigned       no statement beside it (an older coldkeep's snapshot, or
                   anything else under manifest/)

Invariants:
- Only ``own`` snapshots are read as the site's, pruned as the site's, or
  counted towards the ones kept; every other one is named where it matters
  (disaster recovery lists them all), never deleted by a prune.
- A statement binds its object: its key, size and SHA-256 as stored. A
  snapshot is used only once its bytes hash to the signed SHA-256 and the
  manifest inside says the signed site id and generation.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import secrets
import socket
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from ..base.errors import RemoteError, UsageError
from ..base.signing import SiteKey, fingerprint, verifies
from ..store.sitestate import SiteState
from .bucketclock import SKEW_MS, apart
from .bucketlock import snapshot_taken_at
from .objectstore import ObjectInfo, ObjectStore, RemoteFatal, RemoteLocked, RemoteMissing
from .smallreads import SmallReads, read_listed

WHAT = "manifest snapshot"
SIG = ".sig"
# A statement is small; a bigger object under its name is not one.
MAX_STATEMENT = 64 << 10
# Statements read at once.
IN_FLIGHT = 8

NAME = re.compile(
    r"^manifest/g(?P<generation>\d{12})-(?P<nonce>[0-9a-f]{8})\.db"
    r"(?:\.(?P<set>[0-9a-f]{12})\.age)?$"
)

# "signed": its statement verifies, not yet judged against a site's trust.
Verdict = Literal["signed", "own", "other-site", "untrusted-key", "future", "forged", "unsigned"]


def snapshot_key(generation: int, sealed_to: str | None) -> str:
    """A new snapshot's key under the site's prefix."""
    name = f"manifest/g{generation:012d}-{secrets.token_hex(4)}.db"
    return name if sealed_to is None else f"{name}.{sealed_to}.age"


def generation_of(key: str) -> int | None:
    """The generation a snapshot's key names (None: not a signed snapshot's
    name). Only a verified statement's generation is believed."""
    found = NAME.match(key)
    return None if found is None else int(found["generation"])


@dataclass(frozen=True)
class Statement:
    """What a site says of one of its manifest snapshots."""

    site: str  # remote.site
    site_id: str
    generation: int
    taken_at: int  # ms, the bucket's clock
    object: str  # the snapshot's key under the site's prefix
    bytes: int  # as stored (sealed: the sealed bytes)
    sha256: str
    host: str  # the host name that shipped it: words for an operator
    key: str  # the signing key's fingerprint

    @classmethod
    def parse(cls, data: dict[str, Any]) -> Statement:
        """Each field of the right type, or ``ValueError``."""
        if set(data) != set(_KINDS) or any(type(data[f]) is not k for f, k in _KINDS.items()):
            raise ValueError("not a snapshot statement")
        return cls(**data)


_EXAMPLE = Statement("", "", 0, 0, "", 0, "", "", "")
_KINDS = {f: type(v) for f, v in asdict(_EXAMPLE).items()}


def sign(key: SiteKey, statement: Statement) -> bytes:
    """The ``.sig`` object of ``statement``, signed with ``key``."""
    body = asdict(statement)
    signed = {"statement": body, "public_key": key.public_b64, "signature": key.sign(WHAT, body)}
    return json.dumps(signed, sort_keys=True, indent=1).encode() + b"\n"


def read_statement(data: bytes, key: str) -> Statement | str:
    """The statement of the ``.sig`` object at ``key`` (under the site's
    prefix) when its signature verifies with the key it names and it is the
    statement of the snapshot beside it; else why not."""
    try:
        signed = json.loads(data)
        statement = Statement.parse(signed["statement"])
        public, signature = signed["public_key"], signed["signature"]
    except (ValueError, KeyError, TypeError):
        return "its statement cannot be read"
    if not (isinstance(public, str) and isinstance(signature, str)):
        return "its statement cannot be read"
    if not verifies(public, signature, WHAT, asdict(statement)):
        return "its signature does not verify"
    named = fingerprint(base64.b64decode(public))  # verified above: it decodes
    if named != statement.key:
        return f"it is signed by {named}, not the key {statement.key} it names"
    if statement.object + SIG != key or generation_of(key[: -len(SIG)]) != statement.generation:
        return f"its statement is {statement.object}'s (generation {statement.generation})"
    return statement


@dataclass(frozen=True)
class Seen:
    """One snapshot under a site's prefix, as a survey judged it."""

    key: str  # under the site's prefix
    verdict: Verdict
    why: str  # the verdict in words (empty for own)
    statement: Statement | None = None  # what it signs, where it verifies
    info: ObjectInfo | None = None  # as listed

    @property
    def generation(self) -> int | None:
        return None if self.statement is None else self.statement.generation

    def describe(self) -> str:
        """One line: the key, and what it is."""
        if self.statement is None:
            return f"{self.key}: {self.why}"
        st = self.statement
        line = f"{self.key}: generation {st.generation}, site id {st.site_id[:8]}, host {st.host}"
        return f"{line}, key {st.key}" + (f": {self.why}" if self.why else "")


@dataclass(frozen=True)
class Trust:
    """Which site a judgement is for, and the keys it trusts (and why)."""

    site_id: str
    keys: frozenset[str]
    why: str  # in words: where the trusted keys come from


@dataclass
class Survey:
    """Every snapshot under one site's prefix, each with its statement where it
    verifies (judged against a ``Trust`` by ``judged``)."""

    site: str
    seen: list[Seen] = field(default_factory=list)

    def signed(self) -> list[Statement]:
        """Every statement that verifies, whatever site or key it names."""
        return [s.statement for s in self.seen if s.statement is not None]

    def judged(self, trust: Trust, now: int) -> list[Seen]:
        """Each snapshot with its verdict for ``trust`` at the bucket's ``now``,
        the newest generation first (unsigned ones last)."""
        out = [_judge(s, trust, now) for s in self.seen]
        return sorted(out, key=lambda s: (s.generation is None, -(s.generation or 0), s.key))


def _judge(seen: Seen, trust: Trust, now: int) -> Seen:
    st = seen.statement
    if st is None or seen.verdict != "signed":
        return seen
    if st.site_id != trust.site_id:
        return replace(seen, verdict="other-site", why=f"another site's (id {st.site_id})")
    if st.key not in trust.keys:
        return replace(seen, verdict="untrusted-key", why=f"signed by a key not trusted ({st.key})")
    if st.taken_at > now + SKEW_MS:
        return replace(
            seen, verdict="future", why=f"dated {apart(st.taken_at, now)} the bucket's now"
        )
    return replace(seen, verdict="own", why="")


async def survey(
    store: ObjectStore,
    site: str,
    *,
    only: Callable[[str], bool] | None = None,
    newest: int | None = None,
    reads: SmallReads | None = None,
    listed: list[ObjectInfo] | None = None,
) -> Survey:
    """The snapshots under ``site``'s prefix (those whose key ``only`` takes,
    where given; of the signed ones' names, only the ``newest`` by the
    generation they name, where given), the statement of each read (through
    ``reads``, where given: those read before are not read again), from
    ``listed`` (its ``manifest/`` as listed) where given, else a listing. A
    statement that cannot be read at all (not there, too big) makes its
    snapshot unsigned or forged; a remote that cannot be used raises."""
    prefix = f"{site}/"
    if listed is None:
        listed = [i async for i in store.list_objects(f"{prefix}manifest/")]
    by_key = {i.key[len(prefix) :]: i for i in listed}
    found = Survey(site)
    gate = asyncio.Semaphore(IN_FLIGHT)

    async def one(key: str, info: ObjectInfo) -> Seen:
        sig = by_key.get(key + SIG)
        if generation_of(key) is None or sig is None:
            legacy = snapshot_taken_at(key) is not None
            why = "an older coldkeep's snapshot, not signed" if legacy else "no statement beside it"
            return Seen(key, "unsigned", why, info=info)
        if sig.size > MAX_STATEMENT:
            return Seen(key, "forged", "its statement is too big to be one", info=info)
        try:
            async with gate:
                data = await read_listed(store, sig, reads)
        except RemoteMissing:  # deleted since the listing: as if never there
            return Seen(key, "unsigned", "no statement beside it", info=info)
        read = await asyncio.to_thread(read_statement, data, key + SIG)  # as heartbeat.py
        if isinstance(read, str):
            return Seen(key, "forged", read, info=info)
        if read.bytes != info.size:
            return Seen(key, "forged", "its size is not the one signed", info=info)
        return Seen(key, "signed", "", read, info)

    keys = [(k, i) for k, i in by_key.items() if not k.endswith(SIG) and (only is None or only(k))]
    if newest is not None:
        named = sorted((k for k, _ in keys if generation_of(k) is not None), reverse=True)
        keep = set(named[:newest])
        keys = [(k, i) for k, i in keys if generation_of(k) is None or k in keep]
    found.seen = list(await asyncio.gather(*(one(k, i) for k, i in keys)))
    return found


def statement_for(
    site: str,
    site_id: str,
    generation: int,
    taken_at: int,
    obj: str,
    size: int,
    sha256: str,
    key: str,
) -> Statement:
    """The statement a ship signs for the snapshot it just stored."""
    return Statement(
        site, site_id, generation, taken_at, obj, size, sha256, socket.gethostname(), key
    )


class SiteForked(RemoteFatal):
    """Another host ships as this very site: its id and its key (a cloned VM)."""


async def check_lineage(
    store: ObjectStore, site: str, state: SiteState, trust: Trust, now: int
) -> Seen | None:
    """The newest snapshot of this site, signed with its key, that this host
    did not ship (of a later generation than its manifest's, or of the same
    one under another name): for a fresh manifest (rebuilt from the gzips) the
    lineage it goes on from; for any other, ``SiteForked``. Only those names
    are read (a verified statement decides; a name alone proves nothing)."""

    def after_mine(key: str) -> bool:
        generation = generation_of(key)
        if generation is None:
            return False
        return generation > state.generation or (
            generation == state.generation and key != state.snapshot
        )

    found = await survey(store, site, only=after_mine)
    for seen in found.judged(trust, now):
        if seen.verdict == "own" and seen.statement is not None:
            if state.fresh:
                return seen
            st = seen.statement
            raise SiteForked(
                f"{store.where(f'{site}/{seen.key}')}: generation {st.generation} of this site "
                f"(id {st.site_id}), signed with its key {st.key}, was shipped by host {st.host}, "
                f"and this host's manifest is at generation {state.generation}: another host "
                "ships as this site (a cloned VM?). Nothing was shipped. On the host that is "
                "not this site, give [remote] site a name of its own and run coldkeep site "
                "new-key there"
            )
    return None


@dataclass
class Pruned:
    deleted: int = 0
    kept: int = 0  # old own snapshots the bucket's lock keeps
    foreign: list[str] = field(default_factory=list)  # not the site's own: left, named
    problems: list[str] = field(default_factory=list)  # deletes that failed: tried again


async def prune(
    store: ObjectStore,
    site: str,
    trust: Trust,
    now: int,
    *,
    keep: int,
    written: str,
    locked: Callable[[Statement], bool],
) -> Pruned:
    """All but the newest ``keep`` own snapshots deleted (never ``written``, the
    one just shipped), each before its statement; older coldkeeps' unsigned
    snapshots too once ``keep`` own ones are there. One the bucket's lock keeps
    (``locked`` says so from its statement, so none is asked for in vain; or
    the bucket refuses) is counted kept. Every other object is left, named."""
    found = await survey(store, site)
    judged = found.judged(trust, now)
    own = [s for s in judged if s.verdict == "own"]
    done = Pruned()
    doomed = [s for s in own[keep:] if s.key != written]
    if len(own) >= keep:
        doomed += [s for s in judged if s.verdict == "unsigned" and snapshot_taken_at(s.key)]
    done.foreign = [s.describe() for s in judged if s.verdict != "own" and s not in doomed]
    for seen in doomed:
        if seen.statement is not None and locked(seen.statement):
            done.kept += 1
            continue
        try:
            await store.delete(f"{site}/{seen.key}")
            if seen.statement is not None:
                await store.delete(f"{site}/{seen.key}{SIG}")
        except RemoteLocked:
            done.kept += 1
            continue
        except RemoteFatal:
            raise
        except RemoteError as err:  # the next ship's prune tries again
            done.problems.append(str(err))
            continue
        done.deleted += 1
    return done


class NoTrust(UsageError):
    """No snapshot under a prefix can be told to be the site's own without the
    operator's word; the message says what was found and what to give."""


def _sites_found(signed: list[Statement]) -> str:
    newest: dict[str, Statement] = {}
    for st in signed:
        if st.site_id not in newest or st.generation > newest[st.site_id].generation:
            newest[st.site_id] = st
    return "; ".join(
        f"site id {i} (host {st.host}, generation {st.generation}, key {st.key})"
        for i, st in sorted(newest.items())
    )


def resolve_trust(
    found: Survey,
    where: str,
    *,
    site_key: str | None = None,
    site_id: str | None = None,
    local_key: str | None = None,
) -> Trust:
    """Which site's snapshots under ``where`` (the prefix, for messages) are
    taken, and signed by which keys: the site id given (or the only one
    found), and the key given (``--site-key``: the fingerprint the operator
    wrote down), else this host's own (``local_key``), else the only one that
    signs that site's snapshots. Anything less certain is ``NoTrust``."""
    signed = found.signed()
    if site_id is None:
        ids = {st.site_id for st in signed if site_key is None or st.key == site_key}
        if len(ids) != 1:
            signer = f" signed by {site_key}" if site_key else ""
            if not ids:
                raise NoTrust(
                    f"{where}: no signed manifest snapshot{signer} is there "
                    "(rebuild-manifest --from-remote --list shows what is)"
                )
            raise NoTrust(
                f"{where}: snapshots of {len(ids)} sites are there: "
                f"{_sites_found([s for s in signed if s.site_id in ids])}; give --site-id ID "
                "(coldkeep status printed this site's)"
            )
        [site_id] = ids
    if site_key is not None:
        return Trust(site_id, frozenset({site_key}), f"the key given ({site_key})")
    if local_key is not None:
        return Trust(site_id, frozenset({local_key}), f"this host's site key ({local_key})")
    keys = sorted({st.key for st in signed if st.site_id == site_id})
    if len(keys) == 1:
        return Trust(
            site_id,
            frozenset(keys),
            f"the only key that signs site {site_id}'s snapshots here ({keys[0]}): check it "
            "against the fingerprint you wrote down, or give --site-key",
        )
    if not keys:
        raise NoTrust(f"{where}: no signed manifest snapshot of site id {site_id} is there")
    raise NoTrust(
        f"{where}: site id {site_id}'s snapshots are signed by {len(keys)} keys "
        f"({', '.join(keys)}): give --site-key with the fingerprint you wrote down"
    )
