"""Unattended mode: jobs on cron schedules or intervals, alerts, the daemon that
wires coldkeep's jobs to the runner, and the Prometheus metrics.

The top of the core: it drives the ``Archiver`` like any other client; its rows
in coldkeep.db are ``store``'s. Its modules, one line each, are in the module
map of docs/architecture.md.
"""
