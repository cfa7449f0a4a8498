"""Thaws asked of cold objects (``thaws``): one row per object, by its key under
the site, written as ``asking`` before the restore request is sent and set to
``asked`` (or ``failed``, with the error) once S3 answered; and the restores
waiting for their objects (``thaw_restores``, from ``restore --thaw``), each
until the scheduler has restored it (``done``) or could not (``failed``).

Invariant: no request is sent without its row committed first, so a kill
between the two loses nothing: a row left ``asking`` is a request that may or
may not have reached S3, and only S3's answer to a HEAD (``x-amz-restore``)
says which; it is never taken for a thaw under way on its word alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..base.times import DAY_MS
from .manifest import Manifest


@dataclass(frozen=True)
class ThawAsked:
    key: str  # under the site
    path: str  # the remote object's archive path
    tier: str
    days: int
    asked_at: int  # ms, this host's clock
    state: str  # asking | asked | failed
    error: str | None = None


async def record_asking(manifest: Manifest, key: str, path: str, tier: str, days: int,
                        at: int) -> None:  # fmt: skip
    """The request about to be sent for ``key``, committed first."""
    await manifest.run(
        "INSERT INTO thaws (key, path, tier, days, asked_at, state, error) "
        "VALUES (?, ?, ?, ?, ?, 'asking', NULL) ON CONFLICT (key) DO UPDATE SET "
        "path = excluded.path, tier = excluded.tier, days = excluded.days, "
        "asked_at = excluded.asked_at, state = 'asking', error = NULL",
        (key, path, tier, days, at),
    )


async def record_answer(manifest: Manifest, key: str, error: str | None) -> None:
    """S3's answer to the request for ``key``: taken (``error`` None) or refused."""
    state = "asked" if error is None else "failed"
    await manifest.run("UPDATE thaws SET state = ?, error = ? WHERE key = ?", (state, error, key))


# A thaw is current until its copy's days have passed since the longest wait
# S3 states (Deep Archive's bulk tier, 48 hours): after that its row says
# nothing of what S3 holds.
_LONGEST_WAIT_MS = 2 * DAY_MS


async def current(manifest: Manifest, now: int) -> list[ThawAsked]:
    """The thaws asked whose copy may be on its way or readable now, oldest first."""
    return [
        t for t in await thaws(manifest, "asked")
        if t.asked_at + _LONGEST_WAIT_MS + t.days * DAY_MS > now
    ]  # fmt: skip


async def thaws(manifest: Manifest, state: str | None = None) -> list[ThawAsked]:
    """The thaws recorded (in ``state``, or all), oldest first."""
    where, params = (" WHERE state = ?", [state]) if state else ("", [])
    rows = await manifest.rows(
        "SELECT key, path, tier, days, asked_at, state, error FROM thaws"
        f"{where} ORDER BY asked_at, key",
        params,
    )
    return [
        ThawAsked(str(k), str(p), str(t), int(d), int(a), str(s), e) for k, p, t, d, a, s, e in rows
    ]


@dataclass(frozen=True)
class WaitingRestore:
    """A ``restore --thaw`` waiting for its objects (``thaw_restores``)."""

    id: int
    selection: dict[str, Any]  # the Selection's fields
    target: str | None  # --to, or None: the live paths
    tier: str
    days: int
    asked_at: int
    state: str = "waiting"  # waiting | done | failed
    ended_at: int | None = None
    detail: str | None = None
    identity: str | None = None  # the identity file its sealed copies are opened with


async def add_waiting(
    manifest: Manifest, selection: dict[str, object], target: str | None, tier: str, days: int,
    at: int, identity: str | None = None,
) -> int:  # fmt: skip
    """A restore to finish once its objects are thawed; its id."""
    return await manifest.insert(
        "INSERT INTO thaw_restores (selection, target, tier, days, asked_at, state, identity) "
        "VALUES (?, ?, ?, ?, ?, 'waiting', ?)",
        (json.dumps(selection), target, tier, days, at, identity),
    )


async def restores(
    manifest: Manifest, states: tuple[str, ...] | None = None
) -> list[WaitingRestore]:
    """The ``restore --thaw`` requests (in one of ``states``, or all), oldest first."""
    where = f" WHERE state IN ({', '.join('?' * len(states))})" if states else ""
    rows = await manifest.rows(
        "SELECT id, selection, target, tier, days, asked_at, state, ended_at, detail, identity "
        f"FROM thaw_restores{where} ORDER BY id",
        list(states or ()),
    )
    return [
        WaitingRestore(int(i), json.loads(sel), t, str(tier), int(d), int(a), str(st), e, det, key)
        for i, sel, t, tier, d, a, st, e, det, key in rows
    ]


async def end_restore(manifest: Manifest, restore_id: int, ok: bool, at: int, detail: str) -> None:
    """A waiting restore done (``ok``) or failed, with what came of it."""
    await manifest.run(
        "UPDATE thaw_restores SET state = ?, ended_at = ?, detail = ? WHERE id = ?",
        ("done" if ok else "failed", at, detail, restore_id),
    )
