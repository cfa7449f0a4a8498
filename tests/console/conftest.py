"""Console fixtures: a small demo site on a pinned clock, and a way to wait for
the app's workers (not sleeps) before asserting."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from textual.pilot import Pilot

from coldkeep.core.config import Settings, load_settings
from coldkeep.core.demo import write_demo
from coldkeep.tui.app import ColdkeepApp
from coldkeep.tui.pilot import settle

__all__ = ["settle"]

# 2026-11-01 12:00 UTC: the demo's files and rows are aged against this, and the
# console shows times in UTC.
NOW_MS = 1_793_534_400_000
os.environ["TZ"] = "UTC"
time.tzset()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    site = write_demo(tmp_path / "demo", seed=3, scale=0.02, now_ms=NOW_MS)
    # One file at a time: entry ids come out in the same order on every run.
    site.config.write_text(site.config.read_text() + "\n[io]\nworkers = 1\n")
    return load_settings(site.config)


def make_app(settings: Settings, **kw: object) -> ColdkeepApp:
    return ColdkeepApp(settings, clock=lambda: NOW_MS, watch_live=False, **kw)  # type: ignore[arg-type]


async def archive_all(app: ColdkeepApp, pilot: Pilot[None]) -> None:
    """A pass as the operator runs it: asked for, its plan confirmed, finished."""
    await settle(pilot)
    await app.run_action("run_pass")
    await settle(pilot)
    await pilot.press("y")
    await settle(pilot)
