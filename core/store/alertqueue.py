"""The alert fire queue: ``alerts`` (one row per condition, its key unique) and
``alert_deliveries`` (one per alert and sink, pending until sent). sched/alerts.py
fills it from what needs a human and drains it to the sinks.

Invariants:
- A condition alerts once: raising an alert whose key exists does nothing.
- A new alert's deliveries are queued with it; a delivery is marked sent only
  after it succeeded, and a failed one keeps its attempts and last error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .manifest import Manifest

_ALERT_COLUMNS = "a.id, a.key, a.kind, a.message, a.payload, a.created_at"


@dataclass(frozen=True)
class Alert:
    id: int
    key: str
    kind: str
    message: str
    payload: dict[str, Any]
    created_at: int

    def document(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "message": self.message,
            "created_at": self.created_at,
            **self.payload,
        }


def _alert(r: Any) -> Alert:
    return Alert(r[0], r[1], r[2], r[3], json.loads(r[4]), r[5])


async def raise_alert(
    manifest: Manifest,
    *,
    key: str,
    kind: str,
    message: str,
    payload: dict[str, Any],
    at: int,
    sinks: list[str],
) -> bool:
    """An alert for the condition ``key`` and a pending delivery to each sink;
    False (and nothing written) when that condition has its alert already."""
    alert_id = await manifest.insert_if_new(
        "INSERT INTO alerts (key, kind, message, payload, created_at) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (key) DO NOTHING",
        (key, kind, message, json.dumps(payload, sort_keys=True, default=str), at),
    )
    if alert_id is None:
        return False
    await manifest.run_many(
        "INSERT INTO alert_deliveries (alert_id, sink) VALUES (?, ?)",
        [(alert_id, sink) for sink in sinks],
    )
    return True


async def pending_deliveries(manifest: Manifest) -> list[tuple[Alert, str]]:
    """(alert, sink) of every delivery not yet made, oldest alert first."""
    rows = await manifest.rows(
        f"SELECT {_ALERT_COLUMNS}, d.sink "
        "FROM alert_deliveries d JOIN alerts a ON a.id = d.alert_id "
        "WHERE d.sent_at IS NULL ORDER BY a.id, d.sink"
    )
    return [(_alert(r), r[6]) for r in rows]


async def delivery_failed(manifest: Manifest, alert_id: int, sink: str, error: str) -> None:
    await manifest.run(
        "UPDATE alert_deliveries SET attempts = attempts + 1, last_error = ? "
        "WHERE alert_id = ? AND sink = ?",
        (error, alert_id, sink),
    )


async def delivered(manifest: Manifest, alert_id: int, sink: str, at: int) -> None:
    await manifest.run(
        "UPDATE alert_deliveries SET sent_at = ?, attempts = attempts + 1, last_error = NULL "
        "WHERE alert_id = ? AND sink = ?",
        (at, alert_id, sink),
    )


async def pending_alerts(manifest: Manifest) -> list[tuple[Alert, str, int, str | None]]:
    """(alert, sink, attempts, last error) for every delivery not yet made."""
    rows = await manifest.rows(
        f"SELECT {_ALERT_COLUMNS}, d.sink, d.attempts, "
        "d.last_error FROM alert_deliveries d JOIN alerts a ON a.id = d.alert_id "
        "WHERE d.sent_at IS NULL ORDER BY a.id"
    )
    return [(_alert(r), r[6], r[7], r[8]) for r in rows]
