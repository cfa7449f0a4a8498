"""``coldkeep run``: the scheduler in the foreground (for systemd or a tmux pane).

Its log is stderr, one line per job event and per core event worth a line
(``tui.text.events.describe``), or with ``--log-json`` one JSON object per
line, every event included; asyncio's own reports of an error nobody awaited
go through the same log. SIGTERM or SIGINT stops the running job at its next
safe point; the process then exits 0.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import traceback
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.config import Settings
from coldkeep.core.base.configtable import ConfigError
from coldkeep.core.base.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from coldkeep.core.base.stream import EventStream, as_dict
from coldkeep.core.sched import heap
from coldkeep.core.sched.daemon import Scheduler
from coldkeep.core.sched.jobs import JobEvent
from coldkeep.core.store.connection import ManifestError

from ..text.events import describe
from ..text.fmt import shown
from .kit import command, ctx_for, fail, kill_hook
from .metrics import Exporter


@click.command()
@command(json_opt=False)
@click.option("--log-json", is_flag=True, help="One JSON object per line on stderr.")
@click.option("--metrics-listen", metavar="ADDR:PORT", help="Serve Prometheus /metrics there.")
@click.option(
    "--metrics-textfile",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Keep this file (*.prom) written for node_exporter's textfile collector.",
)
def run(
    config: Path | None, log_json: bool, metrics_listen: str | None, metrics_textfile: Path | None
) -> None:
    """Run the scheduler in the foreground (for systemd or a tmux pane).

    Jobs and their schedules come from [jobs] in the config. One line per event on
    stderr. SIGTERM or SIGINT stops the running job at its next safe point; the
    process then exits 0.
    """
    ctx = ctx_for(config)
    try:
        settings = ctx.settings
    except ConfigError as err:
        fail(str(err), EXIT_USAGE)
    log = Log(log_json)
    heap.limit_arenas()  # before any thread: months of jobs must not grow its memory
    exporter = Exporter(settings, metrics_listen, metrics_textfile, log)
    try:
        raise SystemExit(asyncio.run(_serve(settings, ctx.stream, log, exporter)))
    except ManifestError as err:
        fail(str(err), EXIT_FAILED)


class Log:
    """The scheduler's log on stderr: a stamped line per record, or with
    ``as_json`` the record itself as one JSON object."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json

    def __call__(self, record: dict[str, Any], text: str) -> None:
        stamp = datetime.now().isoformat(timespec="seconds")
        line = (
            json.dumps({"at": stamp, **record}, default=str)
            if self.as_json
            else f"{stamp} {shown(text)}"  # a journal line: names never split or steer it
        )
        print(line, file=sys.stderr, flush=True)

    def job(self, e: JobEvent) -> None:
        record: dict[str, Any] = {"kind": f"job_{e.kind}", "job": e.job, "detail": e.detail}
        if e.run is not None:
            record |= {"run_id": e.run.id, "status": e.run.status, "error": e.run.error}
        text = f"job {e.job}: {e.kind.replace('_', ' ')} {e.detail}".rstrip()
        if e.run is not None and e.run.error:
            text += f" ({e.run.error})"
        self(record, text)

    def internal_error(self, _loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        # asyncio's own reports (an error nobody awaited) go through the same log:
        # with --log-json every line stays one JSON object, the traceback a field.
        exc = context.get("exception")
        trace = "".join(traceback.format_exception(exc)) if exc is not None else ""
        message = str(context.get("message", "unhandled error"))
        self(
            {"kind": "internal_error", "message": message, "error": repr(exc), "traceback": trace},
            f"internal error (please report it): {message}: {exc!r}",
        )

    async def follow(self, stream: EventStream) -> None:
        """Every core event worth a line (with --log-json, every event)."""
        with stream.subscribe() as sub:
            async for event in sub:
                text = describe(event)
                if text is not None or self.as_json:
                    self(as_dict(event), (text or event.kind).strip())


async def _serve(settings: Settings, stream: EventStream, log: Log, exporter: Exporter) -> int:
    """The scheduler until SIGINT or SIGTERM, its metrics beside it."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(log.internal_error)
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    archiver = Archiver(settings, stream=stream, origin="scheduler", step=kill_hook())

    def on_job(e: JobEvent) -> None:
        exporter.job_event(e)
        log.job(e)

    scheduler = Scheduler(archiver, on_event=on_job)
    follower = asyncio.create_task(log.follow(stream))
    log(
        {"kind": "started", "pid": os.getpid()},
        f"coldkeep run: pid {os.getpid()}, {settings.config_path}",
    )
    try:
        await scheduler.open()  # the manifest made and migrated before metrics read it
        exporter.start()
        await scheduler.run_until(stop)
    finally:
        await asyncio.sleep(0)
        follower.cancel()
        await exporter.stop()
    log({"kind": "stopped"}, "coldkeep run: stopped")
    return EXIT_OK
