"""Console fixtures: a small demo site, aged against the console tests' pinned
clock (tests/consolekit.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from coldkeep.core.base.config import Settings, load_settings
from coldkeep.core.ops.demo import write_demo

from consolekit import NOW_MS


def _site(tmp_path: Path, history_days: int) -> Settings:
    site = write_demo(
        tmp_path / "demo", seed=3, scale=0.02, now_ms=NOW_MS, history_days=history_days
    )
    # One file at a time: entry ids come out in the same order on every run.
    site.config.write_text(site.config.read_text() + "\n[io]\nworkers = 1\n")
    return load_settings(site.config)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return _site(tmp_path, 0)


@pytest.fixture
def recorded(tmp_path: Path) -> Settings:
    """The demo as ``coldkeep demo`` writes it for a newcomer: with six weeks
    of nightly passes and backlog samples, for the Trends screen."""
    return _site(tmp_path, 42)
