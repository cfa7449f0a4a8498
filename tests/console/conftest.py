"""Console fixtures: a small demo site, aged against the console tests' pinned
clock (tests/consolekit.py)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.config import Settings, load_settings
from coldkeep.core.base.stream import EventStream
from coldkeep.core.ops.demo import write_demo

from consolekit import NOW_MS


def _site(tmp_path: Path, history_days: int) -> Settings:
    site = write_demo(
        tmp_path / "demo", seed=3, scale=0.02, now_ms=NOW_MS, history_days=history_days
    )
    # One file at a time: entry ids come out in the same order on every run.
    site.config.write_text(site.config.read_text() + "\n[io]\nworkers = 1\n")
    return load_settings(site.config)


def _template(factory: pytest.TempPathFactory, name: str, history_days: int) -> Path:
    """A demo site written once a worker (its files aged against the pinned
    clock, so every copy is the same), to be copied: its folder."""
    settings = _site(factory.mktemp(name), history_days)
    assert settings.config_path is not None
    return settings.config_path.parent


@pytest.fixture(scope="session")
def fresh_demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo site: for ``settings``."""
    return _template(tmp_path_factory, "fresh", 0)


@pytest.fixture(scope="session")
def recorded_demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo as ``coldkeep demo`` writes it for a newcomer: with six weeks
    of nightly passes and backlog samples, for the Trends screen (``recorded``)."""
    return _template(tmp_path_factory, "recorded", 42)


def _copy(template: Path, tmp_path: Path) -> Settings:
    """A copy of a demo site (its paths are relative to its config; a copy keeps
    every mtime the demo aged): a tenth of what writing it again takes."""
    copy = tmp_path / "demo"
    shutil.copytree(template, copy, symlinks=True)
    return load_settings(copy / "coldkeep.toml")


@pytest.fixture
def settings(fresh_demo: Path, tmp_path: Path) -> Settings:
    return _copy(fresh_demo, tmp_path)


@pytest.fixture
def recorded(recorded_demo: Path, tmp_path: Path) -> Settings:
    return _copy(recorded_demo, tmp_path)


@pytest.fixture(scope="session")
def passed_demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo site after one pass as the console runs it (its origin, the
    pinned clock, a file at a time): built once a worker, for ``archived``."""
    settings = _site(tmp_path_factory.mktemp("passed"), 0)
    archiver = Archiver(
        settings, stream=EventStream(), origin="console", clock=lambda: NOW_MS, workers_per_core=1
    )
    asyncio.run(archiver.run_pass())
    assert settings.config_path is not None
    return settings.config_path.parent


@pytest.fixture
def archived(passed_demo: Path, tmp_path: Path) -> Settings:
    """A copy of the demo archived before the console opens on it: for the tests
    of what the console does with an archive, where the pass is not what they
    test."""
    return _copy(passed_demo, tmp_path)
