"""A console opened while a CLI pass runs elsewhere: it attaches, shows that pass
live, and stops it gracefully on request."""

from __future__ import annotations

import signal
import subprocess
import sys

from textual.widgets import ProgressBar

from coldkeep.core.base.config import Settings, load_settings
from coldkeep.tui.console.panes import InFlightPane, LogPane, OrphansPane

from consolekit import make_app, settle, until, watching


async def test_the_console_watches_a_running_pass_and_stops_it(settings: Settings) -> None:
    assert settings.config_path is not None
    text = settings.config_path.read_text()
    settings.config_path.write_text(
        text.replace("workers = 1", "workers = 1\nbytes_per_s = 300000")
    )
    slow = load_settings(settings.config_path)
    other = subprocess.Popen(
        [sys.executable, "-m", "coldkeep.tui.cli.main", "pass", "--config", str(slow.config_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert other.stderr is not None
        for line in other.stderr:  # it holds the lock and serves once its files start
            if line.startswith("files:"):
                break
        app = make_app(slow)
        async with app.run_test(size=(120, 36)) as pilot:
            await settle(pilot)
            pane = app.query_one(InFlightPane)
            await until(
                pilot,
                lambda: app.attached is not None and bool(pane.files),
                lambda: (
                    "attached, the other process's files shown here; log:\n"
                    + "\n".join(line for _, line in app.query_one(LogPane).lines)
                ),
            )
            assert f"LOCKED by pid {other.pid}" in str(app.query_one("#status-line").render())
            assert pane.files, "its files in flight, live"
            assert app.unavailable("run_pass"), "this console does not act meanwhile"
            # Attached mid-phase: the phase and its progress so far came first.
            assert (pane.phase, pane.phase_total > 0) == ("files", True)
            bar = app.query_one("#inflight-bar", ProgressBar)
            for _ in range(600):  # until a file finishes there and the bar moves here
                await pilot.pause(0.05)
                if (bar.percentage or 0) > 0:
                    break
            assert 0 < (bar.percentage or 0) < 1, bar.percentage
            # Its partials are its work in progress, not leftovers.
            for worker in [w for w in app.workers if w.group == "findings"]:
                await worker.wait()
            await pilot.pause()
            findings = app.query_one(OrphansPane).findings.values()
            assert app.recovery is not None and app.recovery.busy
            assert not [f for f in findings if f.kind in ("partial", "restore-partial")]

            await pilot.press("x")  # stop gracefully: the other process stops
            await until(pilot, lambda: not watching(app), "the stopped pass let go")
            log = "\n".join(line for _, line in app.query_one(LogPane).lines)
            assert f"asked pid {other.pid} to stop" in log
        rest, _ = other.communicate(timeout=60)
        assert other.returncode == 0 and "cancelled" in rest
    finally:
        if other.poll() is None:
            other.send_signal(signal.SIGKILL)
            other.wait()
