"""Alerts, delivered for real: to a local HTTP server and to a command."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from coldkeep.core.base.configalerts import AlertsSettings
from coldkeep.core.sched import alerts
from coldkeep.core.store import alertqueue, problems
from coldkeep.core.store.entries import NewEntry
from coldkeep.core.store.manifest import Manifest

NOW = 1_790_000_000_000


class Hook(BaseHTTPRequestHandler):
    received: ClassVar[list[dict[str, object]]] = []
    fail_kinds: ClassVar[set[str]] = set()

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if body["kind"] in self.fail_kinds:
            self.send_response(500)
        else:
            type(self).received.append(body)
            self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def webhook() -> Iterator[tuple[str, type[Hook]]]:
    Hook.received, Hook.fail_kinds = [], set()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/alerts", Hook
    server.shutdown()


RECEIVER = """
import json, sys, pathlib
doc = json.load(sys.stdin)
out = pathlib.Path(sys.argv[1])
if (out.parent / f"fail-{doc['kind']}").exists():
    print("refusing", doc["kind"], file=sys.stderr)
    sys.exit(3)
with out.open("a") as f:
    f.write(json.dumps(doc) + "\\n")
"""


def entry(n: int, **kw: object) -> NewEntry:
    base: dict[str, object] = {
        "unit": "u", "relpath": f"u/f{n}.jsonl", "bytes": 1, "sha256": f"{n:064x}",
        "gz_path": f"files/u/f{n}.jsonl.gz", "gz_bytes": 1, "mtime_ns": 1, "dev": 1, "ino": n,
        "mode": 0o100644, "archived_at": 1,
    }  # fmt: skip
    base.update(kw)
    return NewEntry(**base)  # type: ignore[arg-type]


async def conditions(m: Manifest) -> None:
    bad = await m.add_entry(entry(1))
    await m.mark_verify_failed(bad.id, NOW, "decompressed to other bytes")
    await m.add_entry(entry(2, status="missing"))
    await m.run(
        "INSERT INTO job_runs (job, trigger, started_at, ended_at, status, error) "
        "VALUES ('pass', 'schedule', 1, 2, 'timeout', 'no result within 60 s')"
    )


async def test_each_alert_goes_out_once_to_each_sink(
    tmp_path: Path, webhook: tuple[str, type[Hook]]
) -> None:
    url, hook = webhook
    out = tmp_path / "received.jsonl"
    settings = AlertsSettings((sys.executable, "-c", RECEIVER, str(out)), url, 10)
    async with await Manifest.open(tmp_path / "coldkeep.db") as m:
        await conditions(m)
        report = await alerts.poll(m, settings, NOW)
        assert (report.raised, report.sent, report.failed) == (3, 6, 0)
        kinds = sorted(str(d["kind"]) for d in hook.received)
        assert kinds == ["job_timeout", "missing", "verify_failed"]
        assert sorted(json.loads(x)["kind"] for x in out.read_text().splitlines()) == kinds
        again = await alerts.poll(m, settings, NOW)
        assert (again.raised, again.sent) == (0, 0), "a condition alerts once"
        assert len(hook.received) == 3


async def test_a_failing_delivery_is_retried_and_never_holds_back_the_others(
    tmp_path: Path, webhook: tuple[str, type[Hook]]
) -> None:
    url, hook = webhook
    out = tmp_path / "received.jsonl"
    settings = AlertsSettings((sys.executable, "-c", RECEIVER, str(out)), url, 10)
    hook.fail_kinds = {"verify_failed"}  # the first alert, for the webhook
    (tmp_path / "fail-missing").write_text("")  # the second, for the command
    async with await Manifest.open(tmp_path / "coldkeep.db") as m:
        await conditions(m)
        first = await alerts.poll(m, settings, NOW)
        assert (first.sent, first.failed) == (4, 2)
        assert {d["kind"] for d in hook.received} == {"missing", "job_timeout"}
        pending = await alertqueue.pending_alerts(m)
        assert {(a.kind, sink) for a, sink, _, _ in pending} == {
            ("verify_failed", "webhook"),
            ("missing", "command"),
        }
        assert any("exited 3 refusing missing" in (err or "") for _, _, _, err in pending)

        hook.fail_kinds = set()
        (tmp_path / "fail-missing").unlink()
        second = await alerts.poll(m, settings, NOW + 60_000)
        assert (second.sent, second.failed) == (2, 0)
        assert await alertqueue.pending_alerts(m) == []
        assert sorted(str(d["kind"]) for d in hook.received) == [
            "job_timeout",
            "missing",
            "verify_failed",
        ]


async def test_an_unreachable_webhook_is_an_error_not_a_crash(tmp_path: Path) -> None:
    settings = AlertsSettings((), "http://127.0.0.1:9/nothing-listens", 2)
    async with await Manifest.open(tmp_path / "coldkeep.db") as m:
        await conditions(m)
        report = await alerts.poll(m, settings, NOW)
        assert report.failed == 3 and report.sent == 0
        assert report.errors and "127.0.0.1:9" in report.errors[0]


async def test_a_quarantined_file_alerts_once(
    tmp_path: Path, webhook: tuple[str, type[Hook]]
) -> None:
    url, hook = webhook
    settings = AlertsSettings((), url, 10)
    async with await Manifest.open(tmp_path / "coldkeep.db") as m:
        stuck = problems.NewProblem(
            "u/locked.log", "unlink_refused", "[Errno 1] Operation not permitted"
        )
        await problems.record(m, [stuck], at=NOW, pass_id=1)
        assert (await alerts.poll(m, settings, NOW)).raised == 1
        await problems.record(m, [stuck], at=NOW + 1, pass_id=2)  # met again
        assert (await alerts.poll(m, settings, NOW + 1)).raised == 0, "once per file"
        [sent] = hook.received
        assert sent["kind"] == "file_problem" and "u/locked.log" in str(sent["message"])
        assert "chattr" in str(sent["message"])
