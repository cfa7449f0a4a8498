"""What the manifest knows of the site's identity: its random site id, the
generation of its manifest snapshots, the key of the last one shipped from this
host (``site_state``), and the public halves of its signing keys
(``site_keys``).

Invariants:
- The generation only grows: each manifest snapshot taken bumps it first, in
  its own transaction, so the snapshot holds its own generation and no two
  snapshots of one manifest share one.
- The site id is made once, by the migration that made the table; a manifest
  rebuilt from the gzips (a new one) takes the id ``coldkeep.site`` kept
  (``adopt_id``), never one of its own.
- A signing key is retired, never removed: a snapshot signed by it stays this
  site's own, and a disaster recovery that trusts it still finds it listed.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from .manifest import Manifest


@dataclass(frozen=True)
class SiteState:
    site_id: str
    generation: int  # of the newest manifest snapshot taken (0: none yet)
    snapshot: str | None  # the key of the last one shipped from this host

    @property
    def owed(self) -> bool:
        """A snapshot is to ship: none shipped from here yet, or the last one
        taken (its generation bumped) never shipped."""
        return self.snapshot is None or f"manifest/g{self.generation:012d}-" not in self.snapshot

    @property
    def fresh(self) -> bool:
        """No snapshot was ever taken of this manifest: a new one, or one
        rebuilt from the gzips."""
        return self.generation == 0 and self.snapshot is None


@dataclass(frozen=True)
class KeyRecord:
    fingerprint: str
    public_key: str  # base64 of the raw Ed25519 key
    added_at: int
    retired_at: int | None = None


_STATE = "SELECT site_id, generation, snapshot FROM site_state WHERE id = 1"
_KEYS = "SELECT fingerprint, public_key, added_at, retired_at FROM site_keys"


def read_state_of(db: sqlite3.Connection) -> SiteState | None:
    """``read_state`` on a plain connection (a snapshot being checked); None
    from a manifest older than site identities."""
    try:
        rows = db.execute(_STATE).fetchall()
    except sqlite3.OperationalError:
        return None
    return SiteState(str(rows[0][0]), int(rows[0][1]), rows[0][2]) if rows else None


def read_keys_of(db: sqlite3.Connection) -> list[KeyRecord]:
    """``keys`` on a plain connection (none from an older manifest)."""
    try:
        rows = db.execute(f"{_KEYS} ORDER BY added_at").fetchall()
    except sqlite3.OperationalError:
        return []
    return [KeyRecord(*r) for r in rows]


async def read_state(manifest: Manifest) -> SiteState:
    [row] = await manifest.rows(_STATE)
    return SiteState(str(row[0]), int(row[1]), row[2])


async def next_generation(manifest: Manifest) -> int:
    """The generation of a snapshot about to be taken (the counter bumped and
    committed first)."""
    [(generation,)] = await manifest.rows(
        "UPDATE site_state SET generation = generation + 1 WHERE id = 1 RETURNING generation"
    )
    return int(generation)


async def shipped(manifest: Manifest, key: str) -> None:
    """The snapshot at ``key`` shipped from here and read back, with its
    statement: the last one, and no longer loose (one transaction)."""
    await manifest.transaction(
        [
            ("UPDATE site_state SET snapshot = ? WHERE id = 1", [key]),
            ("DELETE FROM remote_loose WHERE key = ?", [key]),
        ]
    )


async def adopt_id(manifest: Manifest, site_id: str) -> None:
    """A fresh manifest takes the site's id (``coldkeep.site``'s)."""
    await manifest.run("UPDATE site_state SET site_id = ? WHERE id = 1", [site_id])


async def recovered(manifest: Manifest, generation: int, snapshot: str) -> None:
    """A manifest placed from the bucket goes on after ``generation``, the
    newest of the site's own snapshots there (``snapshot``'s)."""
    await manifest.run(
        "UPDATE site_state SET generation = max(generation, ?), snapshot = ? WHERE id = 1",
        [generation, snapshot],
    )


async def keys(manifest: Manifest) -> list[KeyRecord]:
    """Every signing key the site has had, the current one last."""
    return [KeyRecord(*r) for r in await manifest.rows(f"{_KEYS} ORDER BY added_at")]


async def add_key(manifest: Manifest, fingerprint: str, public_key: str, at: int) -> None:
    """A new signing key: the site's current one from now on, the others retired."""
    await manifest.transaction(
        [
            (
                "UPDATE site_keys SET retired_at = ? WHERE retired_at IS NULL AND fingerprint != ?",
                [at, fingerprint],
            ),
            (
                "INSERT INTO site_keys (fingerprint, public_key, added_at) VALUES (?, ?, ?) "
                "ON CONFLICT (fingerprint) DO UPDATE SET retired_at = NULL",
                [fingerprint, public_key, at],
            ),
        ]
    )
