"""Shared fixtures: real temporary trees, never a mocked filesystem."""

from __future__ import annotations

from pathlib import Path

import pytest

from coldkeep.core.codec import Codec

from helpers import Roots


@pytest.fixture
def roots(tmp_path: Path) -> Roots:
    live = tmp_path / "live"
    archive = tmp_path / "archive"
    live.mkdir()
    archive.mkdir()
    return Roots(tmp_path, live, archive)


@pytest.fixture(params=["isal", "zlib-ng", "zlib"])
def codec(request: pytest.FixtureRequest) -> Codec:
    engine = request.param
    return Codec(engine, 1 if engine == "isal" else 6)


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    for line in getattr(config, "coldkeep_summary", []):
        terminalreporter.write_line(line)
