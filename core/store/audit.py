"""The operator audit: every mutating action (from the console, the CLI or the
scheduler) recorded in coldkeep.db with when, who (user, host, pid), from where,
what (action and arguments) and how it ended. ``coldkeep history`` lists it.

A row is written when the action starts ("running") and settled when it ends, so
an action that died with its process shows as still running, which is itself
worth knowing. A refusal (the lock was held) is recorded too.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import os
import socket
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ..base.times import NS_PER_MS, NS_PER_S
from .connection import Statement
from .manifest import Manifest


@dataclass(frozen=True)
class AuditRecord:
    id: int
    at: int
    user: str
    host: str
    pid: int
    origin: str
    action: str
    args: dict[str, Any]
    outcome: str
    detail: str | None

    def describe_args(self) -> str:
        """The arguments as ``key=value`` words (what was asked left out when
        empty): ``months=["2026-01"] kinds=["click"]``; a time as a local time
        (``until=2027-06-30 00:00``), as the record's own is shown."""
        return " ".join(
            f"{k}={_shown_arg(k, v)}"
            for k, v in sorted(self.args.items())
            if v not in (None, [], {}, "", False)
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at": self.at,
            "user": self.user,
            "host": self.host,
            "pid": self.pid,
            "origin": self.origin,
            "action": self.action,
            "args": self.args,
            "outcome": self.outcome,
            "detail": self.detail,
        }


# The arguments that hold a time, by their unit in ns: a hold's ``until`` (ms),
# restore's ``after_ns``/``before_ns``, restore-events' ``span`` (s, either end
# open). Recorded as numbers (``--json`` gives them so); shown as times.
_TIME_ARGS = {"until": NS_PER_MS, "after_ns": 1, "before_ns": 1, "span": NS_PER_S}


def _shown_arg(key: str, value: Any) -> str:
    per = _TIME_ARGS.get(key)
    if per is not None and isinstance(value, list):  # a span: either end open (None)
        return "..".join("" if v is None else _shown_arg(key, v) for v in value)
    if per is not None and isinstance(value, int):
        with contextlib.suppress(ValueError, OverflowError, OSError):  # past what time shows
            return datetime.fromtimestamp(value * per / NS_PER_S).strftime("%Y-%m-%d %H:%M")
    return json.dumps(value, default=str)


def _user() -> str:
    try:
        return os.environ.get("SUDO_USER") or getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def who() -> tuple[str, str, int]:
    """The user (the one behind sudo, if any), the host and this process."""
    return _user(), socket.gethostname(), os.getpid()


def expired(*, at: int, origin: str, args: dict[str, Any], detail: str) -> Statement:
    """The row of one archive file or month expired: the statement, for the
    expiry's own transaction (the tombstone, the note and this row together)."""
    return (
        "INSERT INTO audit (at, user, host, pid, origin, action, args, outcome, "
        "detail) VALUES (?, ?, ?, ?, ?, 'expired', ?, 'ok', ?)",
        [at, *who(), origin, json.dumps(args, sort_keys=True), detail],
    )


async def begin(
    manifest: Manifest, *, at: int, origin: str, action: str, args: dict[str, Any]
) -> int:
    return await manifest.insert(
        "INSERT INTO audit (at, user, host, pid, origin, action, args) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            at,
            *who(),
            origin,
            action,
            json.dumps(args, sort_keys=True, default=str),
        ),
    )


async def end(manifest: Manifest, audit_id: int, outcome: str, detail: str | None = None) -> None:
    await manifest.run(
        "UPDATE audit SET outcome = ?, detail = ? WHERE id = ?", (outcome, detail, audit_id)
    )


async def record(
    manifest: Manifest,
    *,
    at: int,
    origin: str,
    action: str,
    args: dict[str, Any],
    outcome: str,
    detail: str | None = None,
) -> None:
    """An action that ended as soon as it began (a refusal)."""
    audit_id = await begin(manifest, at=at, origin=origin, action=action, args=args)
    await end(manifest, audit_id, outcome, detail)


async def record_refusal(
    path: Path, *, at: int, origin: str, action: str, args: dict[str, Any], why: str
) -> None:
    """A refused action (the lock was held), recorded in the manifest at ``path``
    when there is one (a refusal is no reason to create it)."""
    if not await asyncio.to_thread(path.exists):
        return
    async with await Manifest.open(path) as manifest:
        await record(
            manifest, at=at, origin=origin, action=action, args=args, outcome="refused", detail=why
        )


async def history(manifest: Manifest, limit: int = 50) -> list[AuditRecord]:
    return await _records(manifest, "1", limit)


async def out_of_space(manifest: Manifest, limit: int = 100) -> list[AuditRecord]:
    """Actions that stopped because a filesystem was full: their detail is the
    ``OutOfSpace`` line (space.py), first among a pass's problems."""
    return await _records(manifest, "detail LIKE 'out of space:%'", limit)


async def last_ok(manifest: Manifest) -> dict[str, int]:
    """Each action's latest start that ended ok (ms since the epoch), whoever ran
    it: the scheduler, the console, or the CLI from cron or a systemd timer."""
    rows = await manifest.rows(
        "SELECT action, max(at) FROM audit WHERE outcome = 'ok' GROUP BY action"
    )
    return {str(action): int(at) for action, at in rows}


async def next_after(manifest: Manifest, at: int) -> int | None:
    """When the first action after ``at`` began (None: none since)."""
    [(when,)] = await manifest.rows("SELECT min(at) FROM audit WHERE at > ?", (at,))
    return None if when is None else int(when)


async def last_of(manifest: Manifest, action: str) -> AuditRecord | None:
    """The latest record of ``action`` that has ended (not one in progress)."""
    rows = await manifest.rows(
        "SELECT id FROM audit WHERE action = ? AND outcome != 'running' ORDER BY id DESC LIMIT 1",
        (action,),
    )
    if not rows:
        return None
    return (await _records(manifest, f"id = {int(rows[0][0])}", 1))[0]


async def _records(manifest: Manifest, where: str, limit: int) -> list[AuditRecord]:
    rows = await manifest.rows(
        "SELECT id, at, user, host, pid, origin, action, args, outcome, detail "
        f"FROM audit WHERE {where} ORDER BY id DESC LIMIT ?",
        (limit,),
    )
    return [
        AuditRecord(r[0], r[1], r[2], r[3], r[4], r[5], r[6], json.loads(r[7]), r[8], r[9])
        for r in rows
    ]
