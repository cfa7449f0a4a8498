"""The scheduler's verify job: the local copies, then (``[jobs.verify] remote``,
on by default, and a [remote]) a rotating share of the remote copies, all in
``max_duration``: the local copies get at most half of it while the remote
ones are to be read too, the remote ones what is left. A site that keeps
nothing local (``keep_local_days = 0``) has most of its archive only in the
bucket; this is what reads it back, unattended.

Invariant: nothing is left out in silence. The summary's ``said`` (the line
``history --jobs`` shows) names what the run did not read: the entries only the
remote holds when the remote copies are not read, the part of a share the time
budget left for the next run.
"""

from __future__ import annotations

import time
from typing import Any

from ..archiver import Archiver
from ..base.cancel import CancelToken
from ..base.configjobs import JobSettings
from ..base.errors import RemoteError
from ..files.verify import VerifyReport
from ..remote.verify import RemoteVerifyReport
from .jobs import Outcome

# The most failures a run's error line names (the summary counts them all).
NAMED = 20


async def run_verify(archiver: Archiver, job: JobSettings, token: CancelToken) -> Outcome:
    """One scheduled verify: what it read, what it left, what failed."""
    remote = job.remote and archiver.settings.remote is not None
    budget = job.max_duration_s
    t0 = time.monotonic()
    local = await archiver.verify(
        max_duration=budget / 2 if budget and remote else budget, cancel=token
    )
    failed = [f"{p.gz_path}: {p.result}" for p in local.problems]
    summary: dict[str, Any] = {
        "checked": local.checked,
        "ok": local.ok,
        "complete": local.complete,
        "remote_only": local.remote_only,
    }
    said = [_local_line(local)]
    if remote:
        left = None if budget is None else max(1.0, budget - (time.monotonic() - t0))
        try:
            report = await archiver.verify_remote(job.remote_sample, token, max_duration=left)
        except RemoteError as err:
            failed.append(str(err))
            said.append(f"remote copies not read: {err}")
        else:
            failed += report.failed
            summary["remote"] = {
                k: v for k, v in report.to_dict().items() if k not in ("failed", "reshipped")
            } | {"failed": len(report.failed), "reshipped": len(report.reshipped)}
            said.append(_remote_line(report, job.remote_sample))
    elif local.remote_only:
        how = (
            "set [jobs.verify] remote = true"
            if archiver.settings.remote is not None
            else "no [remote] is configured to read them from"
        )
        said.append(f"{local.remote_only:,} entries only the remote holds not read ({how})")
    summary["said"] = "; ".join(said)
    error = "; ".join(failed[:NAMED]) or None
    if len(failed) > NAMED:
        error = f"{error}; {len(failed) - NAMED} more"
    return Outcome(not failed, summary, error)


def _local_line(r: VerifyReport) -> str:
    if r.nothing_archived:
        return "nothing archived yet"
    line = f"local: {r.checked:,} checked, {len(r.problems)} failed"
    return line if r.complete else f"{line}, the rest next run (max_duration)"


def _remote_line(r: RemoteVerifyReport, sample: float) -> str:
    if r.nothing_archived:
        return "remote: nothing archived yet"
    line = (
        f"remote: {r.checked:,} of {r.objects:,} objects read "
        f"(a {sample:.0%} share a run, rotating), {len(r.failed)} failed"
    )
    if r.reshipped:
        line += f", {len(r.reshipped)} shipped again"
    if r.left:
        line += f", {r.left:,} of this run's share left for the next (max_duration)"
    if r.cold:
        line += f", {r.cold:,} cold (not thawed: checked by size and S3's checksum only)"
    return line
