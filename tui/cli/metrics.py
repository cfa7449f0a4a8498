"""``coldkeep metrics`` and the metrics of ``coldkeep run`` (``--metrics-listen``,
``--metrics-textfile``): the Prometheus text format, from ``core.metrics``.

``Exporter`` is ``run``'s part: its HTTP listener is bound before any job starts,
so a bad ``ADDR:PORT`` (or one in use) fails the start in one line, exit 2. The
listener's thread only serves the last snapshot; the snapshots are read on the
event loop (``core.metrics.Publisher``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIServer

import click
from prometheus_client import generate_latest, start_http_server

from coldkeep.core.base.config import Settings
from coldkeep.core.base.errors import EXIT_OK, EXIT_USAGE
from coldkeep.core.sched.jobs import JobEvent
from coldkeep.core.sched.metrics import Publisher, SnapshotCollector, read_site, registry_for

from .kit import command, ctx_for, fail, run_command


@click.command()
@command(json_opt=False)
def metrics(config: Path | None) -> None:
    """Print the site's Prometheus metrics (the text exposition format).

    Read-only, without the lock: jobs, backlog, archive, remote tier, verify
    failures, the live WAL (docs/operations.md, "Metrics"). For node_exporter's
    textfile collector from cron, write to a temporary name and rename it; or let
    `coldkeep run --metrics-textfile PATH` keep the file written."""
    ctx = ctx_for(config)

    async def go() -> int:
        collector = SnapshotCollector(ctx.settings)
        collector.publish(await read_site(ctx.settings))
        click.echo(generate_latest(registry_for(collector)).decode(), nl=False)
        return EXIT_OK

    run_command(go(), ctx)


def parse_listen(value: str) -> tuple[str, int]:
    """``ADDR:PORT`` (``[::1]:9108`` for IPv6; an empty ADDR: every interface)."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        fail(f"--metrics-listen {value!r}: give ADDR:PORT, e.g. 127.0.0.1:9108", EXIT_USAGE)
    return host.removeprefix("[").removesuffix("]") or "0.0.0.0", int(port)


class Exporter:
    """The metrics of one ``coldkeep run``; does nothing when neither option is given."""

    def __init__(
        self,
        settings: Settings,
        listen: str | None,
        textfile: Path | None,
        log: Callable[[dict[str, Any], str], None],
    ) -> None:
        self.publisher: Publisher | None = None
        self.server: WSGIServer | None = None
        self.task: asyncio.Task[None] | None = None
        self.log = log
        where = [f"http://{listen}/metrics"] if listen is not None else []
        self.where = ", ".join([*where, str(textfile)] if textfile is not None else where)
        if listen is None and textfile is None:
            return
        if textfile is not None and not textfile.parent.is_dir():
            fail(f"--metrics-textfile {textfile}: no such directory", EXIT_USAGE)
        collector = SnapshotCollector(settings)

        def on_error(text: str) -> None:
            log({"kind": "metrics_error", "error": text}, text)

        self.publisher = Publisher(settings, collector, textfile=textfile, on_error=on_error)
        if listen is not None:
            host, port = parse_listen(listen)
            try:
                self.server, _thread = start_http_server(port, host, registry_for(collector))
            except OSError as err:
                fail(f"--metrics-listen {listen}: cannot listen there: {err}", EXIT_USAGE)

    def start(self) -> None:
        if self.publisher is not None:
            self.task = asyncio.create_task(self.publisher.run(), name="coldkeep-metrics")
            self.log({"kind": "metrics", "serving": self.where}, f"metrics: {self.where}")

    def job_event(self, e: JobEvent) -> None:
        # A job's end changes what the metrics say; only a pass changes the backlog.
        if self.publisher is not None and e.kind == "run_finished":
            self.publisher.kick(recount=e.job == "pass")

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        if self.server is not None:
            # shutdown() waits for the serving thread's next poll (half a second).
            await asyncio.to_thread(self.server.shutdown)
            self.server.server_close()
