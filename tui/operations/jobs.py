"""A scheduled job run now, from the console's Jobs pane (``j``): its call, and
its run's words. It is audited and never overlaps another run of the same job
(core/sched/jobs.py); a job whose operation asks first (a pass in mode on, a
ship, an expiry) asks the same question before it runs.
"""

from __future__ import annotations

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.cancel import CancelToken
from coldkeep.core.sched.clock import SystemClock
from coldkeep.core.sched.daemon import Scheduler
from coldkeep.core.store.jobruns import JobRun

from .spec import Run, Words

WORDS = Words(JobRun, JobRun.describe)


def run_job(name: str) -> Run:
    """The job ``name`` of the config's [jobs], run once now."""

    async def run(archiver: Archiver, cancel: CancelToken) -> JobRun:
        scheduler = Scheduler(archiver, clock=SystemClock())
        runner = await scheduler.open()
        try:
            return await runner.run_now(name, cancel)
        finally:
            await scheduler.close()

    return run
