"""Alerts: what needs a human, found, recorded once, and delivered until delivered
(a fire queue: select the pending rows → deliver each → mark it sent).

Each poll (the ``alerts`` job) does two things:

  collect   turn conditions into alert rows, one per condition (a unique key):
            an entry whose gzip failed verify, an entry whose gzip is missing, a
            live file a pass quarantined (one alert per file and kind, from when
            it was first met), an action stopped by a full filesystem, a job
            run that ended in error or timeout (one alert per lock holder when
            another process kept jobs out) or whose process was killed
            (``job_killed``, once the next start settles it), an event row
            refused as a conflict, a `restore --thaw` finished or failed, a
            thaw S3 refused;
            each new alert gets one pending delivery per configured sink
  deliver   every pending delivery, oldest first: the ``command`` sink runs the
            command with the alert as JSON on stdin (exit 0 = delivered), the
            ``webhook`` sink POSTs it (2xx = delivered)

Invariants:
- A delivery is marked sent only after it succeeded; a failed one is counted and
  retried at the next poll, and never holds back the others behind it.
- Alerts are rows in coldkeep.db (store/alertqueue.py), so what came due while the
  process was down goes out at the first poll after it starts (the job runs on boot).
- A condition alerts once: its key is unique; the same failure seen by the next
  poll is not a new alert.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from ..base.configalerts import AlertsSettings
from ..store import alertqueue, audit, jobruns, passlog, problems, thaws
from ..store.alertqueue import Alert
from ..store.manifest import Manifest
from ..store.remoteobjects import RemoteObjects


@dataclass
class PollReport:
    raised: int = 0
    sent: int = 0
    failed: int = 0
    errors: list[str] | None = None


@dataclass(frozen=True)
class Condition:
    """Something that needs a human; ``key`` names it uniquely."""

    key: str
    kind: str
    message: str
    payload: dict[str, Any]


async def conditions(manifest: Manifest) -> list[Condition]:
    found: list[Condition] = []
    for e in await manifest.entries_failed_verify(limit=10_000):
        where = {"entry_id": e.id, "relpath": e.relpath, "gz_path": e.gz_path}
        message = f"{e.location} failed verify: {e.verify_error}"
        found.append(Condition(f"verify_failed:{e.id}", "verify_failed", message, where))
    for e in await manifest.entries_missing(limit=10_000):
        where = {"entry_id": e.id, "relpath": e.relpath, "gz_path": e.gz_path}
        message = f"the gzip of {e.relpath} is missing from the archive ({e.gz_path})"
        found.append(Condition(f"missing:{e.id}", "missing", message, where))
    for obj in await RemoteObjects(manifest).failed_verify():
        about = {"path": obj.path, "verified_at": obj.verified_at}
        message = f"the remote copy of {obj.path} failed verify: {obj.verify_error}"
        key = f"remote_verify_failed:{obj.path}:{obj.verified_at}"
        found.append(Condition(key, "remote_verify_failed", message, about))
    for run in reversed(await jobruns.failed_runs(manifest, 1000)):
        about = {"job": run.job, "run_id": run.id, "started_at": run.started_at}
        message = f"job {run.job} ended in {run.status}: {run.error}"
        holder = run.summary.get("locked_by")
        # Locked out by another process: one alert per holder, however many
        # ticks (of however many jobs) it turned away.
        key = (
            f"locked:{holder.get('host')}:{holder.get('pid')}:{holder.get('started_at')}"
            if isinstance(holder, dict)
            else f"job:{run.id}"
        )
        found.append(Condition(key, f"job_{run.status}", message, about))
    for q in await problems.listing(manifest):
        about = {"relpath": q.relpath, "problem": q.kind, "remedy": q.remedy}
        key = f"file_problem:{q.kind}:{q.first_seen}:{q.relpath}"
        found.append(Condition(key, "file_problem", q.line(), about))
    for r in await audit.out_of_space(manifest):
        about = {"audit_id": r.id, "action": r.action, "at": r.at, "origin": r.origin}
        found.append(Condition(f"space:{r.id}", "out_of_space", str(r.detail), about))
    found += await _thaw_conditions(manifest)
    for p in await passlog.recent(manifest, 20):
        for c in (p.summary.get("events") or {}).get("conflicts", []):
            about = {"row_id": c["row_id"], "month": c["month"], "pass_id": p.id}
            key = f"conflict:{c['row_id']}:{c['month']}"
            found.append(Condition(key, "event_conflict", c["detail"], about))
    return found


async def _thaw_conditions(manifest: Manifest) -> list[Condition]:
    """A ``restore --thaw`` the scheduler finished or could not; a thaw S3 refused."""
    found: list[Condition] = []
    for w in await thaws.restores(manifest, ("done", "failed")):
        about = {"restore": w.id, "target": w.target, "selection": w.selection}
        said = "finished" if w.state == "done" else "FAILED"
        message = f"restore --thaw #{w.id} {said}: {w.detail}"
        found.append(Condition(f"thaw_restore:{w.id}", f"thaw_restore_{w.state}", message, about))
    for t in await thaws.thaws(manifest, "failed"):
        about = {"key": t.key, "path": t.path, "asked_at": t.asked_at}
        key = f"thaw_failed:{t.key}:{t.asked_at}"
        message = f"the thaw of {t.path} was refused: {t.error}"
        found.append(Condition(key, "thaw_failed", message, about))
    return found


async def collect(manifest: Manifest, sinks: list[str], now: int) -> int:
    """Record an alert for every condition that has none yet; returns how many."""
    raised = 0
    for c in await conditions(manifest):
        raised += await alertqueue.raise_alert(
            manifest,
            key=c.key,
            kind=c.kind,
            message=c.message,
            payload=c.payload,
            at=now,
            sinks=sinks,
        )
    return raised


async def _send(sink: str, alert: Alert, settings: AlertsSettings) -> None:
    """Deliver one alert to one sink; raises on failure (with the reason)."""
    body = json.dumps(alert.document(), sort_keys=True).encode()
    if sink == "command":
        proc = await asyncio.create_subprocess_exec(
            *settings.command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            _, err = await asyncio.wait_for(proc.communicate(body), settings.timeout_s)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise RuntimeError(
                f"{settings.command[0]} did not finish in {settings.timeout_s:g} s"
            ) from None
        if proc.returncode != 0:
            tail = err.decode(errors="replace").strip().splitlines()[-1:] or [""]
            raise RuntimeError(f"{settings.command[0]} exited {proc.returncode} {tail[0]}".strip())
    elif sink == "webhook":
        assert settings.webhook is not None
        request = urllib.request.Request(
            settings.webhook, data=body, headers={"Content-Type": "application/json"}, method="POST"
        )

        def post() -> int:
            with urllib.request.urlopen(request, timeout=settings.timeout_s) as resp:
                return int(resp.status)

        try:
            status = await asyncio.to_thread(post)
        except (urllib.error.URLError, OSError) as err:
            raise RuntimeError(f"{settings.webhook}: {err}") from err
        if not 200 <= status < 300:
            raise RuntimeError(f"{settings.webhook} answered {status}")
    else:
        raise RuntimeError(f"unknown sink {sink!r}")


async def deliver(manifest: Manifest, settings: AlertsSettings, now: int) -> PollReport:
    """Every pending delivery, oldest first; each failure is recorded and skipped."""
    report = PollReport(errors=[])
    for alert, sink in await alertqueue.pending_deliveries(manifest):
        try:
            await _send(sink, alert, settings)
        except (RuntimeError, OSError) as err:
            report.failed += 1
            assert report.errors is not None
            report.errors.append(f"alert {alert.id} to {sink}: {err}")
            await alertqueue.delivery_failed(manifest, alert.id, sink, str(err))
            continue
        report.sent += 1
        await alertqueue.delivered(manifest, alert.id, sink, now)
    return report


async def poll(manifest: Manifest, settings: AlertsSettings, now: int) -> PollReport:
    raised = await collect(manifest, settings.sinks, now)
    report = await deliver(manifest, settings, now)
    report.raised = raised
    return report
