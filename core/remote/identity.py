"""The site's identity in the bucket: the claim of its prefix, and its signing
key kept sealed for the day the host is gone.

    <site>/site/id.<site id>.json             the claim: this site id ships here
    <site>/site/key.<fingerprint>.<set>.age   the signing key, sealed to the
                                              site's recipients ([remote] encrypt_to)

Invariants:
- A ship writes under a site's prefix only when the oldest claim there (by the
  bucket's Last-Modified, which no client sets) is its own site id's. A second
  host shipping with the same remote.site (a cloned VM, a new host given the old
  one's name) is refused in one line before it writes, reads back or drops
  anything (its claim is not written); a later claim that a race let in is
  named to the site that owns the prefix at its next ship.
- The first ship of a site (or the first of a coldkeep that makes claims, to a
  prefix an older one shipped to) writes its claim, create-only; coldkeep
  never deletes a claim.
- The private key is in the bucket only sealed to the site's own recipients:
  with no encrypt_to it is kept nowhere but ``coldkeep.sitekey`` (and the
  operator's own backup of it). A sealed copy for another key or another set
  of recipients is deleted once the current one is read back: a leaked old
  identity must not yield the key that signs the site's snapshots.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path

from ..base.cancel import CancelToken
from ..base.errors import ColdkeepError, RemoteError
from ..base.layout import Layout
from ..base.recipients import RecipientSet
from ..base.signing import KEY_NAME, SiteKey, SiteKeyError, key_path, load_key, save_key
from ..base.times import DAY_MS, day_name
from ..store import sitestate
from ..store.manifest import Manifest
from .objectstore import ObjectInfo, ObjectStore, RemoteFatal, RemoteLocked
from .sealing import Identities, open_sealed, seal_spans

_CLAIM = re.compile(r"^site/id\.(?P<site_id>[0-9a-f]{32})\.json$")
_KEPT = re.compile(r"^site/key\.(?P<fingerprint>[a-z2-7-]{29})\.(?P<set>[0-9a-f]{12})\.age$")
MAX_CLAIM = 16 << 10


class SiteClaimed(RemoteFatal):
    """The site's prefix belongs to another site id."""


def claim_key(site_id: str) -> str:
    return f"site/id.{site_id}.json"


def _kept_key(fingerprint: str, sealed_to: str) -> str:
    return f"site/key.{fingerprint.removeprefix('ck:')}.{sealed_to}.age"


@dataclass(frozen=True)
class Claim:
    site_id: str
    modified: int  # ms, by the bucket's clock
    host: str  # as the claim says it: words, not proof
    key: str  # the site key's fingerprint, as the claim says it

    def describe(self) -> str:
        since = day_name(self.modified // DAY_MS)
        return f"site id {self.site_id} (host {self.host}, since {since})"


async def claims(store: ObjectStore, site: str) -> list[Claim]:
    """Every claim of ``site``'s prefix, the oldest first."""
    found = []
    async for info in store.list_objects(f"{site}/site/id."):
        rel = info.key[len(site) + 1 :]
        match = _CLAIM.match(rel)
        if match is None:
            continue
        host, key = await _said(store, info)
        found.append(Claim(match["site_id"], info.modified or 0, host, key))
    return sorted(found, key=lambda c: (c.modified, c.site_id))


async def _said(store: ObjectStore, info: ObjectInfo) -> tuple[str, str]:
    """The host and key a claim says (unverified: words for a message)."""
    if info.size > MAX_CLAIM:
        return "?", "?"
    try:
        said = json.loads(await store.read_range(info.key, 0, info.size))
        return str(said.get("host", "?")), str(said.get("key", "?"))
    except (ValueError, AttributeError, RemoteError):
        return "?", "?"


def claimed_by_other(found: list[Claim], site_id: str) -> Claim | None:
    """The claim that keeps ``site_id`` out of the prefix: the oldest, where it
    is another's (None: the prefix is free, or this site's)."""
    return found[0] if found and found[0].site_id != site_id else None


def refusal(site: str, url: str, other: Claim, site_id: str) -> str:
    """The one line that refuses a ship into a prefix another site claims."""
    return (
        f"{url}/{site}: remote.site {site!r} belongs to {other.describe()}, and this host is "
        f"site id {site_id}: nothing was shipped. Give this host a remote.site of its own; "
        "if it replaces that host, recover it from the bucket instead (coldkeep "
        "rebuild-manifest --from-remote on an empty archive_root)"
    )


async def check_claim(
    store: ObjectStore, site: str, site_id: str, key: SiteKey | None, layout: Layout
) -> list[str]:
    """Raise ``SiteClaimed`` when ``site``'s prefix belongs to another site id;
    write this site's claim where there is none. What the site should hear of
    (another host that tried to claim its prefix) is returned."""
    found = await claims(store, site)
    other = claimed_by_other(found, site_id)
    if other is not None:
        raise SiteClaimed(refusal(site, store.url, other, site_id))
    if not found:
        body = {
            "coldkeep": "site",
            "site": site,
            "site_id": site_id,
            "host": socket.gethostname(),
            "key": key.fingerprint if key is not None else None,
        }
        data = json.dumps(body, sort_keys=True).encode() + b"\n"
        await store.put_bytes(
            f"{site}/{claim_key(site_id)}", data, scratch=layout.scratch("claim"), root=layout.root
        )
    return [
        f"another host tried to ship here as remote.site {site!r} ({c.describe()}): it was "
        "refused; give it a remote.site of its own"
        for c in found[1:]
        if c.site_id != site_id
    ]


# the signing key, kept sealed ---------------------------------------------------------


async def keep_key(
    store: ObjectStore, site: str, key: SiteKey, recipients: RecipientSet, layout: Layout
) -> list[str]:
    """The key sealed to ``recipients`` at its place under ``site``'s prefix
    (where it is not yet), then every other sealed key there deleted; the
    problems met, one line each."""
    want = _kept_key(key.fingerprint, recipients.fingerprint)
    there = [i.key[len(site) + 1 :] async for i in store.list_objects(f"{site}/site/key.")]
    problems: list[str] = []
    if want not in there:
        sealed = await asyncio.to_thread(_seal, key.pem(), recipients)
        full = f"{site}/{want}"
        await store.put_bytes(full, sealed, scratch=layout.scratch("sitekey"), root=layout.root)
        info = await store.head(full)
        if info is None or info.size != len(sealed):
            return [f"{store.where(full)}: the sealed site key did not read back whole"]
    for old in there:
        if old != want and _KEPT.match(old):
            try:
                await store.delete(f"{site}/{old}")
            except RemoteLocked as err:
                problems.append(f"{err}: an older sealed site key stays until the lock ends")
            except RemoteFatal:
                raise
            except RemoteError as err:  # the next ship tries again
                problems.append(f"{err}: an older sealed site key is not deleted yet")
    return problems


def _seal(data: bytes, recipients: RecipientSet) -> bytes:
    out = io.BytesIO()
    seal_spans(io.BytesIO(data), out, recipients, None, what="the site key", cancel=CancelToken())
    return out.getvalue()


async def recover_key(
    store: ObjectStore, site: str, fingerprint: str, identities: Identities | None
) -> SiteKey | str:
    """The site key ``fingerprint`` opened from its sealed copy in the bucket
    with ``identities``; else why it cannot be."""
    short = fingerprint.removeprefix("ck:")
    kept = [
        i
        async for i in store.list_objects(f"{site}/site/key.{short}.")
        if _KEPT.match(i.key[len(site) + 1 :])
    ]
    if not kept:
        return (
            f"no sealed copy of the site key {fingerprint} is in the bucket (it is kept there "
            "only with [remote] encrypt_to)"
        )
    if identities is None:
        return f"the site key {fingerprint} is in the bucket sealed: give --identity to recover it"
    why = ""
    for info in kept:
        data = await store.read_range(info.key, 0, info.size)
        try:
            plain = await asyncio.to_thread(_open, data, identities, store.where(info.key))
            key = SiteKey.from_pem(plain, store.where(info.key))
        except ColdkeepError as err:  # a wrong identity, a damaged copy: the next tried
            why = str(err)
            continue
        if key.fingerprint == fingerprint:
            return key
        why = f"{store.where(info.key)} holds the key {key.fingerprint}, not {fingerprint}"
    return why


def _open(data: bytes, identities: Identities, what: str) -> bytes:
    out = io.BytesIO()
    open_sealed(
        io.BytesIO(data), out, identities, length=len(data), what=what, sealed_to=None,
        cancel=CancelToken(),
    )  # fmt: skip
    return out.getvalue()


# the signing key on this host ----------------------------------------------------------


def _lost(fingerprint: str, root: Path) -> str:
    return (
        f"the site's signing key {fingerprint} is not in {key_path(root)}: put your copy of it "
        "back, or recover it from the bucket (rebuild-manifest --from-remote --identity FILE "
        "recovers a sealed copy); if it is lost, run coldkeep site new-key and write down the "
        "fingerprint it prints"
    )


NO_KEY_YET = "the site has no signing key yet (its first ship makes one)"


async def site_key(
    manifest: Manifest, root: Path, now: int, *, create: bool = True
) -> SiteKey | str:
    """The key this site signs its snapshots with: made and recorded on a site
    that never had one (with ``create``: a ship's, under the lock); else the
    one ``coldkeep.sitekey`` holds when it is the site's current key; else why
    there is none to sign with."""
    recorded = [k for k in await sitestate.keys(manifest) if k.retired_at is None]
    key = await asyncio.to_thread(load_key, root)
    if not recorded and not create:
        return NO_KEY_YET
    if not recorded:
        if key is None:
            await asyncio.to_thread(save_key, root, SiteKey.new())
            key = await asyncio.to_thread(load_key, root)  # ours, or one placed first
            assert key is not None
        await sitestate.add_key(manifest, key.fingerprint, key.public_b64, now)
        return key
    current = recorded[-1].fingerprint
    if key is None:
        return _lost(current, root)
    if key.fingerprint != current:
        return (
            f"{key_path(root)} holds the key {key.fingerprint}, not this site's {current}: put "
            "the site's key back; if that one is lost, move this file away and run coldkeep "
            "site new-key"
        )
    return key


async def new_key(manifest: Manifest, root: Path, now: int) -> tuple[SiteKey, str | None]:
    """A new signing key for the site: the old one (when its file is here) moved
    aside as ``coldkeep.sitekey.retired-<fingerprint>``, the new one kept and
    recorded as the site's, the others retired. The new key, and where the old
    file went."""
    old = await asyncio.to_thread(load_key, root)
    aside = None
    if old is not None:
        moved = key_path(root).with_name(f"{KEY_NAME}.retired-{old.fingerprint[3:]}")
        await asyncio.to_thread(os.replace, key_path(root), moved)
        aside = str(moved)
    key = SiteKey.new()
    if not await asyncio.to_thread(save_key, root, key):
        raise SiteKeyError(f"{key_path(root)} appeared meanwhile: left as it is, run again")
    await sitestate.add_key(manifest, key.fingerprint, key.public_b64, now)
    return key, aside
