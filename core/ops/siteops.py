"""The site's identity as an operator sees and changes it: ``status`` and
``coldkeep site`` show its id, its signing key's fingerprint (to write down
beside the identity file) and where its snapshots stand; ``coldkeep site
new-key`` gives it a new key when the old one is lost (or leaked).

Invariants:
- Reading it takes no lock and writes nothing; a key file this process may
  not read is said, not fatal.
- A new key is made under the archive lock, audited, and recorded as the
  site's before anything is signed with it; the old key is retired, never
  forgotten (the snapshots it signed stay the site's own).
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ..base.errors import UsageError
from ..base.layout import Layout
from ..base.signing import key_path, load_key
from ..store import sitestate
from ..store.manifest import Manifest

if TYPE_CHECKING:
    from .session import Sessions


@dataclass(frozen=True)
class SiteIdentity:
    site_id: str
    generation: int  # of the newest manifest snapshot taken
    snapshot: str | None  # the last one shipped from here
    key: str | None  # the current signing key's fingerprint (None: none yet)
    key_here: bool  # coldkeep.sitekey holds it
    key_problem: str | None = None  # why the key file cannot be used
    retired: list[str] = field(default_factory=list)  # keys the site signed with before

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


async def read_identity(manifest: Manifest, layout: Layout) -> SiteIdentity:
    state = await sitestate.read_state(manifest)
    keys = await sitestate.keys(manifest)
    current = [k.fingerprint for k in keys if k.retired_at is None]
    retired = [k.fingerprint for k in keys if k.retired_at is not None]
    want = current[-1] if current else None
    problem = None
    try:
        local = await asyncio.to_thread(load_key, layout.root)
    except UsageError as err:
        local, problem = None, str(err)
    here = local is not None and local.fingerprint == want
    if want is not None and not here and problem is None:
        problem = (
            f"{key_path(layout.root)} does not hold it: ships cannot sign snapshots (put it "
            "back, or coldkeep site new-key)"
        )
    return SiteIdentity(
        state.site_id, state.generation, state.snapshot, want, here, problem, retired
    )


@dataclass(frozen=True)
class NewKey:
    fingerprint: str
    moved_aside: str | None  # where the old key file went
    retired: list[str]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


async def make_new_key(sessions: Sessions) -> NewKey:
    """A new signing key for the site, under the lock, audited."""
    # Here, not at the top: ``status`` reads the identity, and would load the
    # remote tier's modules for it (docs/performance.md, "The CLI's start").
    from ..remote.identity import new_key  # noqa: PLC0415

    async with sessions.open("site new-key", {}) as current:
        current.start("a new signing key")
        key, aside = await new_key(current.manifest, sessions.layout.root, sessions.clock())
        retired = [
            k.fingerprint
            for k in await sitestate.keys(current.manifest)
            if k.retired_at is not None
        ]
        done = NewKey(key.fingerprint, aside, retired)
        current.finish("ok", done.to_dict())
        return done
