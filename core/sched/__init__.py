"""Unattended mode: jobs on cron schedules or intervals, alerts, and the metrics.

    clock    time, injectable (tests step through days without waiting)
    jobs     the job runner: schedules, catch-up, timeouts, one turn at the lock
    alerts   what needs a human, recorded once and delivered until delivered
    daemon   coldkeep's jobs (pass, verify, ship, expire, stats, alerts) wired to
             the runner
    metrics  Prometheus metrics from a snapshot of the site, read on the loop

The top of the core: it drives the ``Archiver`` like any other client; its rows
in coldkeep.db are ``store``'s (jobruns, alertqueue, stats).
"""
