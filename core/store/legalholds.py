"""Legal holds: what must not be deleted while a hold covers it, whatever its
retention says: neither expired nor, once shipped, its local copy dropped.

A hold covers a unit (every file archived under it; the unit ``events`` is
every event month), a path glob (matched against an archived file's path under
live_root, or ``events/YYYY-MM`` for an event month) or one entry (by id). It
lasts until released, or until its ``until`` time.

Invariants:
- A hold is never deleted: a released one keeps who released it and when.
- Matching errs towards keeping: a bundle is held when any one of its members
  is, and a hold's glob that does not compile is refused when it is placed.
- A hold that covers nothing archived now (a unit or a glob that matches no
  entry and no event month: most often a typo) is refused unless it is placed
  ahead, on purpose, for what will be archived; an entry must exist. Both
  clients place holds through ``place``: the check is here once.
- Placing and releasing are audited (an ``audit`` row each, as soon as the
  hold's row is written), like every other action that changes what coldkeep
  may delete.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, Literal, cast, get_args

from ..base.errors import UsageError
from ..base.given import parse_id
from ..base.globs import GlobError, compile_glob
from . import audit
from .manifest import Manifest

Scope = Literal["unit", "path", "entry"]
SCOPES: tuple[Scope, ...] = get_args(Scope)
EVENTS_UNIT = "events"  # the unit name that holds every event month
_COLUMNS = "id, scope, target, reason, until, placed_at, placed_by, released_at, released_by"


def compiled(glob: str) -> re.Pattern[str]:
    """A hold's glob, compiled once by the one glob engine (it is matched against
    every entry it may cover)."""
    return compile_glob(glob)


class HoldError(UsageError, ValueError):
    """A hold that cannot be placed or released; the message says why."""


@dataclass(frozen=True)
class Hold:
    id: int
    scope: Scope
    target: str
    reason: str
    until: int | None  # ms since the epoch; None: until released
    placed_at: int
    placed_by: str
    released_at: int | None = None
    released_by: str | None = None

    def active(self, now: int) -> bool:
        return self.released_at is None and (self.until is None or now < self.until)

    def covers(self, unit: str, relpath: str, entry_id: int) -> bool:
        if self.scope == "unit":
            return unit == self.target
        if self.scope == "entry":
            return str(entry_id) == self.target
        return compiled(self.target).fullmatch(relpath) is not None

    def covers_month(self, month: str) -> bool:
        if self.scope == "unit":
            return self.target == EVENTS_UNIT
        if self.scope == "path":
            return compiled(self.target).fullmatch(f"events/{month}") is not None
        return False

    def describe(self) -> str:
        """``hold 3 (unit web: litigation 2026-114)``."""
        return f"hold {self.id} ({self.scope} {self.target}: {self.reason})"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class ActiveHolds:
    """The holds in force at one moment, for matching."""

    def __init__(self, holds: list[Hold]) -> None:
        self.holds = holds

    def __bool__(self) -> bool:
        return bool(self.holds)

    def for_entry(self, unit: str, relpath: str, entry_id: int) -> Hold | None:
        return next((h for h in self.holds if h.covers(unit, relpath, entry_id)), None)

    def for_month(self, month: str) -> Hold | None:
        return next((h for h in self.holds if h.covers_month(month)), None)


def _hold(row: Any) -> Hold:
    return Hold(*row)


async def covers_now(manifest: Manifest, scope: Scope, target: str, months: Iterable[str]) -> bool:
    """Whether a unit or path hold would cover anything archived now: an entry
    that is not a tombstone, or one of the event ``months`` (``YYYY-MM``)."""
    live = "status != 'expired'"
    if scope == "unit":
        if target == EVENTS_UNIT:
            return any(True for _ in months)
        return bool(
            await manifest.rows(
                f"SELECT 1 FROM entries WHERE unit = ? AND {live} LIMIT 1", [target]
            )
        )
    match = compiled(target).fullmatch
    if any(match(f"events/{m}") for m in months):
        return True
    rows = await manifest.rows(f"SELECT DISTINCT relpath FROM entries WHERE {live}")
    return any(match(relpath) for (relpath,) in rows)


def _covers_nothing(scope: Scope, target: str) -> HoldError:
    what = (
        f"--unit {target}: no archived file is in this unit"
        if scope == "unit"
        else f"--path {target!r}: it matches no archived file or event month"
    )
    return HoldError(
        f"{what} now (restore --list shows what is archived); to hold what will be "
        "archived under it, place it with --ahead"
    )


async def _check_new(
    manifest: Manifest, scope: str, target: str, reason: str, *, until: int | None, at: int
) -> None:
    """A hold as given is one that can be placed, or a ``HoldError`` says why."""
    if scope not in SCOPES:
        raise HoldError(f"{scope!r} is not a hold scope: use one of {', '.join(SCOPES)}")
    if not reason.strip():
        raise HoldError("a hold needs a reason (--reason TEXT): it is what the next operator sees")
    if scope == "entry":
        entry_id = parse_id(target)
        if entry_id is None:
            raise HoldError(f"--entry {target!r}: an entry is held by its id (digits 0-9)")
        if await manifest.entry(entry_id) is None:
            raise HoldError(f"--entry {target}: there is no such entry (restore --list shows ids)")
    if scope == "path":
        try:
            compile_glob(target)
        except GlobError as err:
            raise HoldError(f"--path {target!r}: {err}") from None
    if until is not None and until <= at:
        raise HoldError("--until is in the past: a hold must end after it is placed")


async def place(
    manifest: Manifest,
    scope: str,
    target: str,
    reason: str,
    *,
    until: int | None,
    at: int,
    origin: str,
    months: Iterable[str] = (),
    ahead: bool = False,
) -> Hold:
    """A hold placed by whoever runs this (``audit.who``), and audited. A unit or
    path hold must cover something archived now (an entry, or one of the event
    ``months``) unless it is placed ``ahead``."""
    await _check_new(manifest, scope, target, reason, until=until, at=at)
    if scope == "entry":  # "007" holds entry 7: kept as the id that ``covers`` compares
        target = str(int(target))
    in_scope = cast(Scope, scope)
    if (
        in_scope in ("unit", "path")
        and not ahead
        and not await covers_now(manifest, in_scope, target, months)
    ):
        raise _covers_nothing(in_scope, target)
    hold_id = await manifest.insert(
        "INSERT INTO legal_holds (scope, target, reason, until, placed_at, placed_by) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (scope, target, reason.strip(), until, at, audit.who()[0]),
    )
    hold = await get(manifest, hold_id)
    await _audited(manifest, "hold", hold, at, origin)
    return hold


async def get(manifest: Manifest, hold_id: int) -> Hold:
    rows = await manifest.rows(f"SELECT {_COLUMNS} FROM legal_holds WHERE id = ?", [hold_id])
    if not rows:
        raise HoldError(f"there is no hold {hold_id} (coldkeep hold list shows them)")
    return _hold(rows[0])


async def release(manifest: Manifest, hold_id: int, *, at: int, origin: str) -> Hold:
    """A hold released by whoever runs this (``audit.who``), and audited."""
    hold = await get(manifest, hold_id)
    if hold.released_at is not None:
        raise HoldError(f"hold {hold_id} was released already, by {hold.released_by}")
    await manifest.run(
        "UPDATE legal_holds SET released_at = ?, released_by = ? WHERE id = ?",
        [at, audit.who()[0], hold_id],
    )
    hold = await get(manifest, hold_id)
    await _audited(manifest, "hold-release", hold, at, origin)
    return hold


async def _audited(manifest: Manifest, action: str, hold: Hold, at: int, origin: str) -> None:
    args = {"id": hold.id, "scope": hold.scope, "target": hold.target, "until": hold.until}
    await audit.record(
        manifest,
        at=at,
        origin=origin,
        action=action,
        args=args,
        outcome="ok",
        detail=hold.describe(),
    )


async def listing(manifest: Manifest, now: int, *, all_holds: bool = False) -> list[Hold]:
    """The holds in force (``all_holds``: every hold ever placed), oldest first."""
    rows = await manifest.rows(f"SELECT {_COLUMNS} FROM legal_holds ORDER BY id")
    holds = [_hold(r) for r in rows]
    return holds if all_holds else [h for h in holds if h.active(now)]


async def active(manifest: Manifest, now: int) -> ActiveHolds:
    return ActiveHolds(await listing(manifest, now))


def read_active(db: sqlite3.Connection, now: int) -> ActiveHolds:
    """The holds in force, read on a plain connection (the restore browser's
    catalog loads in a thread); none from a manifest older than holds."""
    try:
        rows = db.execute(f"SELECT {_COLUMNS} FROM legal_holds ORDER BY id").fetchall()
    except sqlite3.OperationalError:
        return ActiveHolds([])
    return ActiveHolds([h for h in map(_hold, rows) if h.active(now)])


async def held_paths(manifest: Manifest, holds: ActiveHolds, paths: list[str]) -> dict[str, Hold]:
    """Which of the archive files ``paths`` (gzips or bundles) a hold covers
    through any of their entries, and by which hold."""
    if not holds or not paths:
        return {}
    out: dict[str, Hold] = {}
    for gz_path, entry_id, unit, relpath in await manifest.members_of(paths):
        if gz_path not in out and (hold := holds.for_entry(unit, relpath, entry_id)):
            out[gz_path] = hold
    return out
