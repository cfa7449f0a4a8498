"""The site's heartbeat as this host writes it (remote/heartbeat.py owns the
object): what its manifest says of it now, read without the lock, signed with
the site key and put in the bucket, by the scheduler's ``heartbeat`` job and at
the end of every ship.

Invariants: a beat only reads. Without a recorded site key (a site that never
shipped) there is nothing to sign with: no beat is sent, the job says so and
is not a failure (the first ship makes the key and sends the first beat); a
key recorded and not found here is a failure, said as the ship says it. A
beat is not sealed: it holds counts, times, names of jobs and the host's, and
on a sealed site not the words of a job's error.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

from ..base.config import Settings
from ..base.layout import Layout
from ..base.version import version
from ..remote import heartbeat
from ..remote.heartbeat import Beat, Published
from ..remote.identity import NO_KEY_YET, site_key
from ..remote.objectstore import ObjectStore
from ..store import jobruns, passlog, problems, sitestate, stats
from ..store.manifest import Manifest
from ..store.remoteobjects import RemoteObjects

FAILED = ("error", "timeout", "killed")


@dataclass(frozen=True)
class NotSent:
    """Why no beat was sent; ``first_ship``: the site has no key yet, which
    its first ship makes (not a failure)."""

    why: str
    first_ship: bool = False

    def __str__(self) -> str:
        return f"no heartbeat sent: {self.why}"


async def beat_of(settings: Settings, manifest: Manifest, fingerprint: str, now: int) -> Beat:
    """This site as its manifest says it now."""
    assert settings.remote is not None
    state = await sitestate.read_state(manifest)
    recent = await passlog.recent(manifest, 1)
    last = recent[0] if recent else None
    files, size, rows, since = await stats.backlog(manifest)
    objects = RemoteObjects(manifest)
    totals = await objects.totals()
    locks = await objects.lock_counts(now)
    # Sealed sites ([remote] encrypt_to) say how a job ended, never its
    # error's words: those can name a file, and a beat is not sealed.
    sealed = settings.remote.encrypt_to is not None
    failed = {
        job: run.status if sealed or not run.error else run.error
        for job, run in (await jobruns.latest_finished(manifest)).items()
        if run.status in FAILED
    }
    return Beat(
        site=settings.remote.site,
        site_id=state.site_id,
        key=fingerprint,
        at=now,
        version=version(),
        host=socket.gethostname(),
        mode=settings.mode,
        interval_s=beat_interval(settings),
        last_pass_at=(last.finished_at or last.started_at) if last else None,
        last_pass_status=last.status if last else None,
        backlog_files=files,
        backlog_bytes=size,
        backlog_rows=rows,
        backlog_since=since,
        file_problems=await problems.count(manifest),
        verify_failed=await manifest.verify_failure_count(),
        remote_verify_failed=totals.verify_failed,
        pending_files=totals.pending_files,
        pending_bytes=totals.pending_bytes,
        locked=locks.locked,
        legal_held=locks.held,
        job_failures=failed,
    )


def beat_interval(settings: Settings) -> int:
    """How long until this site's next beat at the latest: the heartbeat job's
    interval, or a day (a ship's usual schedule) with that job off."""
    job = settings.jobs.jobs.get("heartbeat")
    if job is None or not job.enabled or not job.interval_s:
        return 86_400
    return int(job.interval_s)


async def send(
    settings: Settings, manifest: Manifest, layout: Layout, store: ObjectStore, now: int
) -> Published | NotSent:
    """A beat put in the bucket (its key under the site), or why none was sent."""
    assert settings.remote is not None
    key = await site_key(manifest, layout.root, now, create=False)
    if isinstance(key, str):
        return NotSent(key, first_ship=key == NO_KEY_YET)
    beat = await beat_of(settings, manifest, key.fingerprint, now)
    return await heartbeat.publish(store, settings.remote.site, key, beat, layout)
