"""``[jobs]``: the scheduler's jobs (pass, verify, ship, expire, stats, alerts,
checkpoint),
each on a cron schedule or an interval, with its timeout; the time zone, and how
long the job runs are kept.

Invariant: a cron expression is accepted only if it ever fires (croniter reads
"0 0 31 2 *" and fails only when asked for the time).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .configtable import MAX_DAYS, ConfigError, Table

if TYPE_CHECKING:
    from croniter import croniter

JOB_NAMES = (
    "pass", "verify", "ship", "expire", "stats", "alerts", "checkpoint", "thaws", "heartbeat",
)  # fmt: skip
# The smallest share of the remote copies a scheduled verify reads (one in a
# million: some object every run, whatever the bucket's size).
MIN_SAMPLE = 1e-6


@dataclass(frozen=True)
class JobSettings:
    """One scheduled job: on a cron schedule or every ``interval_s`` seconds."""

    name: str
    enabled: bool = True
    cron: str | None = None
    interval_s: float | None = None
    timeout_s: float = 0.0  # 0: none
    run_on_boot: bool = False
    max_duration_s: float | None = None  # verify: stop and resume next time
    # verify: the remote copies too (with a [remote]), this share of them a run,
    # rotating, in what is left of max_duration after the local copies
    remote: bool = False
    remote_sample: float = 0.1


DEFAULT_JOBS: Mapping[str, JobSettings] = {
    "pass": JobSettings("pass", cron="17 3 * * *", timeout_s=6 * 3600),
    "verify": JobSettings(
        "verify", cron="41 4 * * 0", timeout_s=6 * 3600, max_duration_s=4 * 3600, remote=True
    ),
    "ship": JobSettings("ship", cron="47 3 * * *", timeout_s=6 * 3600),
    "expire": JobSettings("expire", cron="23 5 * * *", timeout_s=6 * 3600),
    "stats": JobSettings("stats", interval_s=3600, timeout_s=300, run_on_boot=True),
    "alerts": JobSettings("alerts", interval_s=60, timeout_s=300, run_on_boot=True),
    # The live WAL between passes: a pass checkpoints it only while it moves rows.
    "checkpoint": JobSettings("checkpoint", interval_s=900, timeout_s=300),
    # restore --thaw: each waiting restore finished once S3 has thawed its objects
    # (a thaw takes minutes to hours: a look every 15 minutes, and one at start).
    "thaws": JobSettings("thaws", interval_s=900, timeout_s=6 * 3600, run_on_boot=True),
    # A signed beat in the bucket: the fleet view tells a quiet host from a dead one.
    "heartbeat": JobSettings("heartbeat", interval_s=900, timeout_s=300, run_on_boot=True),
}


@dataclass(frozen=True)
class JobsSettings:
    timezone: str | None = None  # None: the machine's local time
    retention_days: float = 90.0
    retention_rows: int = 500
    jobs: Mapping[str, JobSettings] = field(default_factory=lambda: dict(DEFAULT_JOBS))


def read_jobs(t: Table) -> JobsSettings:
    timezone = t.string("timezone", None)
    if timezone is not None:
        try:
            ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigError(
                t.file, t.key("timezone"), f"{timezone!r} is not a time zone", 'use e.g. "UTC"'
            ) from None
    jobs: dict[str, JobSettings] = {}
    for name in JOB_NAMES:
        default = DEFAULT_JOBS[name]
        j = t.table(name)
        cron = j.string("cron", None)
        interval = j.number("interval", -1.0, minimum=1) if "interval" in j.data else None
        if cron is not None:
            if interval is not None:
                raise ConfigError(
                    t.file, j.key("cron"), "cron and interval are both set", "keep one of them"
                )
            _check_cron(t, j, cron)
        elif interval is None:  # the default's (its cron is known to fire)
            cron, interval = default.cron, default.interval_s
        max_duration = (
            j.number("max_duration", 0, minimum=1)
            if "max_duration" in j.data
            else default.max_duration_s
        )
        remote, sample = default.remote, default.remote_sample
        if name == "verify":  # the other jobs refuse these keys as unknown
            remote = j.boolean("remote", remote)
            sample = j.number("remote_sample", sample, minimum=MIN_SAMPLE, maximum=1)
        jobs[name] = JobSettings(
            name,
            enabled=j.boolean("enabled", default.enabled),
            cron=cron,
            interval_s=interval,
            timeout_s=j.number("timeout", default.timeout_s, minimum=0),
            run_on_boot=j.boolean("run_on_boot", default.run_on_boot),
            max_duration_s=max_duration,
            remote=remote,
            remote_sample=sample,
        )
        j.done()
    settings = JobsSettings(
        timezone=timezone,
        retention_days=t.number("retention_days", 90.0, minimum=0, maximum=MAX_DAYS),
        retention_rows=t.integer("retention_rows", 500, minimum=0),
        jobs=jobs,
    )
    t.done()
    return settings


def schedule(cron: str, start: datetime | None = None) -> croniter:
    """The times ``cron`` fires, from ``start`` on. croniter is imported here, by
    the configs and commands that have a cron schedule: at its import it runs
    ``file`` on the Python binary (to learn whether it is 32-bit), a process
    every command would otherwise start."""
    from croniter import croniter  # noqa: PLC0415 - see above

    return croniter(cron, start)


def _check_cron(t: Table, j: Table, cron: str) -> None:
    """Five fields (or an @alias) that croniter reads AND that ever fire: it
    accepts "0 0 31 2 *" (February 31st) and fails only when asked for the time."""
    from croniter import CroniterBadDateError, croniter  # noqa: PLC0415 - see schedule()

    five = cron.startswith("@") or len(cron.split()) == 5
    if not five or not croniter.is_valid(cron):
        raise ConfigError(
            t.file,
            j.key("cron"),
            f"{cron!r} is not a cron expression",
            'use five fields, e.g. "17 3 * * *"',
        )
    try:
        schedule(cron).get_next(float)
    except CroniterBadDateError:
        raise ConfigError(
            t.file, j.key("cron"), f"{cron!r} never fires", "check the day and the month"
        ) from None
