"""Prometheus metrics: what a demo site says before and after a pass, the
textfile, and ``coldkeep metrics`` / ``coldkeep run --metrics-listen`` as real
processes."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest
from metricscheck import Samples, parse, scrape, value

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.config import load_settings
from coldkeep.core.base.configretention import RetentionSettings
from coldkeep.core.base.layout import Layout
from coldkeep.core.base.stream import EventStream
from coldkeep.core.ops.demo import write_demo
from coldkeep.core.ops.status import read_status
from coldkeep.core.sched.daemon import Scheduler
from coldkeep.core.sched.metrics import Publisher, SnapshotCollector
from coldkeep.core.store import problems
from coldkeep.core.store.manifest import Manifest

from helpers import COLDKEEP, ck


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_demo(tmp_path / "demo", seed=5, scale=0.02).config


async def test_holds_and_expired_data_show_in_the_metrics(config: Path) -> None:
    settings = replace(
        load_settings(config), retention=RetentionSettings(files_days=1, events_days=1)
    )
    archiver = Archiver(settings, stream=EventStream(), serve_events=False)
    await archiver.run_pass()
    hold = (await archiver.place_hold("unit", "unit-0001", "case 114")).hold
    held = await scrape(settings)
    # A pass run by hand (the CLI from a systemd timer) is a pass's success too.
    assert value(held, "coldkeep_job_last_success_timestamp_seconds", job="pass") > 0
    assert value(held, "coldkeep_holds_active") == 1
    assert ("coldkeep_archive_files", frozenset({("status", "expired")})) not in held
    report = await archiver.expire()
    assert report.expired and report.held
    await archiver.release_hold(hold.id)
    after = await scrape(settings)
    assert value(after, "coldkeep_holds_active") == 0
    assert value(after, "coldkeep_archive_files", status="expired") == report.files
    assert value(after, "coldkeep_expired_event_months") == report.months > 0


async def test_a_pass_run_as_a_job_shows_in_the_metrics(config: Path) -> None:
    settings = load_settings(config)
    before = await scrape(settings)
    assert value(before, "coldkeep_up") == 1
    assert value(before, "coldkeep_job_last_success_timestamp_seconds", job="pass") == 0
    assert value(before, "coldkeep_backlog_files") > 0
    assert value(before, "coldkeep_backlog_event_rows") > 0
    assert value(before, "coldkeep_live_wal_bytes") >= 0

    started = time.time()
    scheduler = Scheduler(Archiver(settings, stream=EventStream(), serve_events=False))
    runner = await scheduler.open()
    try:
        run = await runner.run_now("pass")
    finally:
        await scheduler.close()
    assert run.status == "ok", run.error

    after = await scrape(settings)
    assert value(after, "coldkeep_up") == 1
    assert value(after, "coldkeep_job_last_success_timestamp_seconds", job="pass") >= started - 1
    assert value(after, "coldkeep_job_last_duration_seconds", job="pass") > 0
    assert value(after, "coldkeep_job_runs_total", job="pass", outcome="ok") == 1
    assert value(after, "coldkeep_archive_files", status="archived") > 0
    assert value(after, "coldkeep_archive_bytes", status="archived") > 0
    assert value(after, "coldkeep_backlog_files") < value(before, "coldkeep_backlog_files")
    assert value(after, "coldkeep_backlog_event_rows") < value(
        before, "coldkeep_backlog_event_rows"
    )
    # Every entry was archived just now: the pass's, and those its recovery adopted.
    statuses = [k[1] for k in after if k[0] == "coldkeep_archive_bytes"]
    for unit in ("files", "bytes", "gz_bytes"):
        total = sum(after[(f"coldkeep_archive_{unit}", labels)] for labels in statuses)
        assert value(after, f"coldkeep_archived_24h_{unit}") == total > 0
    assert value(before, "coldkeep_archived_24h_files") == 0
    # The pass log has the pass too, as the job runs do.
    assert value(after, "coldkeep_pass_last_duration_seconds") > 0
    assert value(after, "coldkeep_pass_last_end_timestamp_seconds") >= started - 1
    # The demo's [remote] (a folder): nothing shipped yet, everything pending.
    assert value(after, "coldkeep_remote_files") == 0
    assert value(after, "coldkeep_remote_pending_files") > 0
    assert value(after, "coldkeep_remote_pending_bytes") == value(
        after, "coldkeep_archive_gz_bytes", status="archived"
    ) + value(after, "coldkeep_archive_gz_bytes", status="stale")
    assert value(after, "coldkeep_remote_pending_oldest_timestamp_seconds") >= started - 1
    # The rows the pass moved into month databases are not remote yet either.
    assert value(after, "coldkeep_remote_pending_event_months") > 0
    assert value(after, "coldkeep_remote_pending_event_rows") > 0
    # No Object Lock asked for, nothing locked or held on the bucket.
    assert value(after, "coldkeep_remote_locked_objects") == 0
    assert value(after, "coldkeep_remote_legal_held_objects") == 0
    assert value(after, "coldkeep_remote_encrypted_objects") == 0
    assert value(after, "coldkeep_verify_failures", tier="local") == 0
    assert value(after, "coldkeep_verify_failures", tier="remote") == 0


async def test_the_publisher_writes_the_textfile_and_keeps_the_last_snapshot_on_failure(
    config: Path,
) -> None:
    settings = load_settings(config)
    textfile = config.parent / "coldkeep.prom"
    errors: list[str] = []
    collector = SnapshotCollector(settings)
    publisher = Publisher(settings, collector, textfile=textfile, on_error=errors.append)
    await Archiver(settings, stream=EventStream(), serve_events=False).run_pass()

    await publisher.refresh()
    first = parse(textfile.read_text())
    assert value(first, "coldkeep_up") == 1
    assert value(first, "coldkeep_archive_files", status="archived") > 0
    counted = value(first, "coldkeep_backlog_timestamp_seconds")
    assert not errors
    assert [p.name for p in textfile.parent.iterdir() if "prom" in p.name] == [textfile.name]

    await publisher.refresh()  # not due: the backlog count is reused
    assert value(parse(textfile.read_text()), "coldkeep_backlog_timestamp_seconds") == counted
    publisher.kick(recount=True)
    await publisher.refresh()
    assert value(parse(textfile.read_text()), "coldkeep_backlog_timestamp_seconds") > counted

    (config.parent / "archive" / "coldkeep.db").write_bytes(b"not a database" * 100)
    await publisher.refresh()
    failed = parse(textfile.read_text())
    assert value(failed, "coldkeep_up") == 0
    assert value(failed, "coldkeep_archive_files", status="archived") > 0  # the last good read
    assert len(errors) == 1 and "could not be read" in errors[0]


def _connection_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if "_connection_worker_thread" in t.name}


async def test_a_status_read_stopped_at_its_start_closes_the_manifest(config: Path) -> None:
    """A daemon told to stop while its metrics read the status (the read
    cancelled at its first await): the manifest is closed all the same. Left
    open, its connection's thread (not a daemon thread) kept ``coldkeep run``
    from exiting after SIGTERM."""
    settings = load_settings(config)
    await Archiver(settings, stream=EventStream(), serve_events=False).run_pass()
    before = _connection_threads()
    manifest = await Manifest.open_existing(Layout(settings.archive_root).manifest)
    assert manifest is not None
    opened = _connection_threads() - before
    read = asyncio.create_task(read_status(settings, Layout(settings.archive_root), manifest))
    await asyncio.sleep(0)  # the read runs to its first await
    read.cancel()
    with pytest.raises(asyncio.CancelledError):
        await read
    for thread in opened:
        await asyncio.to_thread(thread.join, 10)
    assert not [t for t in opened if t.is_alive()], "the manifest's connection is still open"


def test_coldkeep_metrics_prints_the_text_format(config: Path) -> None:
    out = ck(config.parent, "metrics").stdout
    samples = parse(out)
    assert value(samples, "coldkeep_up") == 1
    assert value(samples, "coldkeep_backlog_files") > 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_run_serves_metrics_over_http_and_keeps_the_textfile_written(config: Path) -> None:
    config.write_text(  # nothing due for a long while: the daemon only serves
        config.read_text()
        + "\n[jobs.stats]\nenabled = false\n\n[jobs.alerts]\nenabled = false\n"
        + '\n[jobs.pass]\ncron = "0 0 1 1 *"\n\n[jobs.verify]\ncron = "0 0 1 1 *"\n'
        + '\n[jobs.ship]\ncron = "0 0 1 1 *"\n'
    )
    port = free_port()
    textfile = config.parent / "coldkeep.prom"
    args = ["--metrics-listen", f"127.0.0.1:{port}", "--metrics-textfile", str(textfile)]
    proc = subprocess.Popen(
        [*COLDKEEP, "run", "--config", str(config), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        samples: Samples = {}
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    samples = parse(r.read().decode())
            except (urllib.error.URLError, ConnectionError):
                samples = {}
            if samples.get(("coldkeep_up", frozenset())) == 1 and textfile.exists():
                break
            time.sleep(0.05)
        assert value(samples, "coldkeep_up") == 1
        assert value(samples, "coldkeep_backlog_files") > 0
        assert value(samples, "coldkeep_job_last_success_timestamp_seconds", job="pass") == 0
        assert value(parse(textfile.read_text()), "coldkeep_up") == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err


@pytest.mark.parametrize("listen", ["9108", "127.0.0.1:port", "127.0.0.1:70000"])
def test_run_refuses_a_bad_listen_address_in_one_line(config: Path, listen: str) -> None:
    run = ck(config.parent, "run", "--metrics-listen", listen, check=2)
    assert run.stderr.count("\n") == 1 and "ADDR:PORT" in run.stderr


EPERM = "[Errno 1] Operation not permitted"


async def test_quarantined_files_show_in_the_metrics_by_kind(config: Path) -> None:
    settings = load_settings(config)
    archiver = Archiver(settings, stream=EventStream(), serve_events=False)
    await archiver.run_pass()
    assert not [k for k in await scrape(settings) if k[0] == "coldkeep_file_problems"]
    async with await Manifest.open(archiver.layout.manifest) as manifest:
        await problems.record(
            manifest,
            [
                problems.NewProblem(
                    "u/a.log", "unlink_refused", "[Errno 1] Operation not permitted"
                ),
                problems.NewProblem(
                    "u/b.log", "unlink_refused", "[Errno 1] Operation not permitted"
                ),
                problems.NewProblem("u/c.log", "io_error", "[Errno 5] Input/output error"),
            ],
            at=1,
            pass_id=None,
        )
    samples = await scrape(settings)
    assert value(samples, "coldkeep_file_problems", kind="unlink_refused") == 2
    assert value(samples, "coldkeep_file_problems", kind="io_error") == 1
