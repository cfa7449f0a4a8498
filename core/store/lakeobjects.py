"""What the manifest knows of the site's files in the fleet's lake: one row per
Parquet object a ship put (``lake_objects``), by its key under the remote's
prefix, with the event month and the month database it was made from.

Invariants:
- A row exists only for an object whose size and SHA-256 the bucket gave back
  equal to the file written: the row is the proof the object is there.
- A month's current object is its newest row not superseded; every other row
  of it is superseded and waits for the bucket's lock to let it be deleted,
  its row forgotten only once it is gone.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from .connection import Statement
from .manifest import Manifest


@dataclass(frozen=True)
class LakeObject:
    key: str  # under the remote's prefix
    month: str
    source_sha256: str  # the month database's it was made from
    rows: int
    bytes: int
    sha256: str
    shipped_at: int  # ms, this host's clock
    retain_until: int | None = None  # ms: the bucket's Object Lock keeps it until then
    legal_hold: bool = False
    version: str | None = None  # as the HEAD that confirmed it said
    superseded_at: int | None = None  # a newer one recorded, or the month expired

    @property
    def current(self) -> bool:
        return self.superseded_at is None


_COLUMNS = ", ".join(f.name for f in fields(LakeObject))


@dataclass(frozen=True)
class LakeTotals:
    """The site's part of the lake: months with a current file, their bytes,
    and the superseded files still waiting for the bucket to let them go."""

    months: int
    bytes: int
    superseded: int


def behind(current: dict[str, LakeObject], month: str, source_sha256: str) -> bool:
    """Whether ``month``, whose newest snapshot's database has that sha256, has
    no current lake object made from it (``current``: ``LakeObjects.current``)."""
    obj = current.get(month)
    return obj is None or obj.source_sha256 != source_sha256


def _row(r: tuple[object, ...]) -> LakeObject:
    obj = LakeObject(*r)  # type: ignore[arg-type]
    return replace(obj, legal_hold=bool(obj.legal_hold))


def _insert(obj: LakeObject, verb: str) -> Statement:
    values = [getattr(obj, f.name) for f in fields(LakeObject)]
    return (
        f"{verb} INTO lake_objects ({_COLUMNS}) VALUES ({', '.join('?' * len(values))})",
        values,
    )


class LakeObjects:
    """The ``lake_objects`` table."""

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest

    async def current(self) -> dict[str, LakeObject]:
        """Each month's current object."""
        rows = await self.manifest.rows(
            f"SELECT {_COLUMNS} FROM lake_objects WHERE superseded_at IS NULL "
            "ORDER BY month, shipped_at, key"
        )
        return {o.month: o for o in map(_row, rows)}

    async def of_month(self, month: str) -> list[LakeObject]:
        rows = await self.manifest.rows(
            f"SELECT {_COLUMNS} FROM lake_objects WHERE month = ? ORDER BY key", [month]
        )
        return [_row(r) for r in rows]

    async def all(self) -> list[LakeObject]:
        rows = await self.manifest.rows(f"SELECT {_COLUMNS} FROM lake_objects ORDER BY key")
        return [_row(r) for r in rows]

    async def totals(self) -> LakeTotals:
        [(months, size, superseded)] = await self.manifest.rows(
            "SELECT count(*) FILTER (WHERE superseded_at IS NULL), "
            "coalesce(sum(bytes) FILTER (WHERE superseded_at IS NULL), 0), "
            "count(*) FILTER (WHERE superseded_at IS NOT NULL) FROM lake_objects"
        )
        return LakeTotals(int(months), int(size), int(superseded))

    async def keys(self) -> set[str]:
        return {str(k) for (k,) in await self.manifest.rows("SELECT key FROM lake_objects")}

    async def superseded(self) -> list[LakeObject]:
        rows = await self.manifest.rows(
            f"SELECT {_COLUMNS} FROM lake_objects WHERE superseded_at IS NOT NULL ORDER BY key"
        )
        return [_row(r) for r in rows]

    async def record(self, obj: LakeObject) -> None:
        """``obj`` recorded as its month's current object, every other object of
        the month superseded, in one transaction."""
        await self.manifest.transaction(
            [
                (
                    "UPDATE lake_objects SET superseded_at = ? "
                    "WHERE month = ? AND superseded_at IS NULL AND key != ?",
                    [obj.shipped_at, obj.month, obj.key],
                ),
                _insert(obj, "INSERT OR REPLACE"),
            ]
        )

    async def adopt(self, obj: LakeObject, *, superseded_at: int) -> None:
        """An object found in the site's lake folder that no row records (a
        kill before its record, a manifest rebuilt from an older snapshot),
        recorded as superseded: deleted as the others are."""
        await self.manifest.run(
            *_insert(replace(obj, superseded_at=superseded_at), "INSERT OR IGNORE")
        )

    async def supersede(self, key: str, at: int) -> None:
        """The object at ``key`` to be deleted (the bucket no longer holds it as
        recorded): its month has no current object until one is written."""
        await self.manifest.run(
            "UPDATE lake_objects SET superseded_at = ? WHERE key = ? AND superseded_at IS NULL",
            [at, key],
        )

    async def supersede_month(self, month: str, at: int) -> None:
        """Every object of ``month`` to be deleted (the month expired)."""
        await self.manifest.run(
            "UPDATE lake_objects SET superseded_at = ? WHERE month = ? AND superseded_at IS NULL",
            [at, month],
        )

    async def set_legal_hold(self, key: str, on: bool) -> None:
        await self.manifest.run(
            "UPDATE lake_objects SET legal_hold = ? WHERE key = ?", [int(on), key]
        )

    async def forget(self, key: str) -> None:
        await self.manifest.run("DELETE FROM lake_objects WHERE key = ?", [key])
