"""Shared fixtures: real temporary trees, never a mocked filesystem."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

from coldkeep.core.codec import Codec

from helpers import Roots

# The S3 test server and its fault proxy (s3kit): fixtures s3, s3_server, s3_proxy.
pytest_plugins = ["s3kit"]


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


# Generated inputs: bounded in the suite, long with HYPOTHESIS_PROFILE=long (make fuzz).
settings.register_profile("ci", max_examples=150, deadline=None, derandomize=True)
settings.register_profile("long", max_examples=20_000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
