"""Unattended mode: jobs on cron schedules or intervals, and alerts.

    clock    time, injectable (tests step through days without waiting)
    jobs     the job runner: schedules, catch-up, timeouts, one turn at the lock
    alerts   what needs a human, recorded once and delivered until delivered
    daemon   coldkeep's jobs (pass, verify, stats, alerts) wired to the runner

The top of the core: it drives the ``Archiver`` like any other client.
"""
