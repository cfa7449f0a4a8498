"""Console fixtures: a small demo site on a pinned clock, and a way to wait for
the app's workers (not sleeps) before asserting."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.screen import ModalScreen
from textual.worker import Worker

from coldkeep.core.config import Settings, load_settings
from coldkeep.core.demo import write_demo
from coldkeep.tui.app import ColdkeepApp

# 2026-11-01 12:00 UTC: the demo's files and rows are aged against this, and the
# console shows times in UTC.
NOW_MS = 1_793_534_400_000
os.environ["TZ"] = "UTC"
time.tzset()
LONG_LIVED = {"stream", "watch"}


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    site = write_demo(tmp_path / "demo", seed=3, scale=0.02, now_ms=NOW_MS)
    # One file at a time: entry ids come out in the same order on every run.
    site.config.write_text(site.config.read_text() + "\n[io]\nworkers = 1\n")
    return load_settings(site.config)


def make_app(settings: Settings, **kw: object) -> ColdkeepApp:
    return ColdkeepApp(settings, clock=lambda: NOW_MS, watch_live=False, **kw)  # type: ignore[arg-type]


def _busy(pilot: Pilot[None]) -> list[Worker[object]]:
    app = pilot.app
    asking = isinstance(app.screen, ModalScreen)  # a confirm worker waits for the operator
    return [
        w
        for w in app.workers
        if w.group not in LONG_LIVED and not (asking and w.group == "confirm") and not w.is_finished
    ]


async def settle(pilot: Pilot[None]) -> None:
    """Wait until every short-lived worker has finished and its messages are handled
    (a confirmation waiting for a key counts as settled)."""
    quiet = 0
    for _ in range(500):
        await pilot.pause()
        busy = _busy(pilot)
        if busy:
            quiet = 0
            waits = [asyncio.ensure_future(w.wait()) for w in busy]
            done, _ = await asyncio.wait(waits, timeout=1)
            for task in done:
                task.exception()  # a worker's failure is the test's to see, not asyncio's
        else:
            quiet += 1
            if quiet >= 3:
                return
    raise AssertionError(f"the console's workers did not settle: {_busy(pilot)}")
