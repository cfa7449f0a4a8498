"""Doctor's checks of the site as the bucket and this host know it: whose the
``remote.site`` prefix is, the site key (its fingerprint, to write down), and
this host's clock against the bucket's (what locks and remote expiry follow).
"""

from __future__ import annotations

import sqlite3

from ..base.config import Settings
from ..base.errors import RemoteError
from ..base.layout import Layout
from ..base.times import now_ms
from ..remote.bucketclock import skew
from ..remote.connect import connected
from ..remote.identity import Claim, claimed_by_other, claims, refusal
from ..store.connection import ManifestError
from ..store.manifest import Manifest
from .doctorfinding import Finding
from .siteops import SiteIdentity, read_identity


async def check_identity(settings: Settings) -> list[Finding]:
    """The site as the bucket and this host know it: whose the prefix is, the
    site key (its fingerprint, to write down), and this host's clock against
    the bucket's (what locks and remote expiry are decided by)."""
    remote = settings.remote
    if remote is None:
        return []
    layout = Layout(settings.archive_root)
    site = None
    try:
        manifest = await Manifest.open_existing(layout.manifest)
    except (ManifestError, sqlite3.Error):
        manifest = None  # the manifest line says why
    if manifest is not None:
        async with manifest:
            site = await read_identity(manifest, layout)
    async with connected(remote) as store:
        try:
            found = await claims(store, remote.site)
            apart = await skew(store, now_ms())
        except RemoteError as err:
            return [Finding("site", "fail", str(err))]
        own_clock = store.own_clock
    return [
        _claim(remote.site, store.url, found, site),
        _site_key(site),
        _clock(apart, own_clock, remote.locks is not None),
    ]


def _claim(name: str, url: str, found: list[Claim], site: SiteIdentity | None) -> Finding:
    if site is None:
        if found:
            return Finding(
                "site_claim",
                "warn",
                f"remote.site {name!r} is already {found[0].describe()}'s, and this archive "
                "has no site id yet: its first ship will be refused",
                "give this site a remote.site of its own; if this host replaces that one, "
                "recover it instead (rebuild-manifest --from-remote)",
            )
        return Finding("site_claim", "ok", f"remote.site {name!r}: not claimed yet")
    other = claimed_by_other(found, site.site_id)
    if other is not None:
        return Finding("site_claim", "fail", refusal(name, url, other, site.site_id))
    state = "this site's" if found else "not claimed yet (the first ship claims it)"
    return Finding("site_claim", "ok", f"remote.site {name!r}: {state} (site id {site.site_id})")


def _site_key(site: SiteIdentity | None) -> Finding:
    if site is None or site.key is None:
        return Finding("site_key", "ok", "none yet: the first ship makes it")
    if site.key_problem is not None:
        return Finding("site_key", "fail", f"{site.key}: {site.key_problem}")
    return Finding(
        "site_key",
        "ok",
        f"{site.key}: write it down beside the identity file (on the day this host is gone, "
        "rebuild-manifest --from-remote --site-key takes only what it signed)",
    )


def _clock(apart: str | None, own_clock: bool, locks: bool) -> Finding:
    if not own_clock:
        return Finding("clock", "ok", "a folder remote: its clock is this host's")
    if apart is None:
        return Finding("clock", "ok", "this host's clock agrees with the bucket's")
    doing = "every ship stops (object_lock)" if locks else "remote expiry waits for the bucket's"
    return Finding(
        "clock",
        "fail" if locks else "warn",
        f"this host's clock is {apart} the bucket's: lock dates and remote expiry follow the "
        f"bucket's clock, so {doing}",
        "set this host's clock right (NTP: timedatectl set-ntp true)",
    )
