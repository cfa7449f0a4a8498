"""Snapshots of the fleet view as a health monitor: five hosts, four of them
sick in the ways its health tells apart (tests/sickfleet.py), the sick on top
with their state marked and their reason in words, at 80x24 (an SSH window)
and 120x36. The hosts' clocks, the bucket's, the demo data and the remote's
URL are pinned; after a deliberate change, review the diff and refresh with
--snapshot-update."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.remote.filestore import FileStore
from coldkeep.tui.console.fleet.app import FleetApp

from consolekit import NOW_MS, settle
from sickfleet import sick_fleet

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((120, 36), id="120x36")]
# The bucket's clock as the view reads it: ten minutes after the ships.
LOOKED_AT = NOW_MS + 600_000


@pytest.fixture(scope="module")
def bucket(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sick_fleet(tmp_path_factory.mktemp("sick"), now=NOW_MS)


async def steady(pilot: Pilot[Any]) -> None:
    await settle(pilot)
    for field in pilot.app.screen.query(Input):
        field.cursor_blink = False
    await pilot.pause()


@pytest.mark.parametrize("size", SIZES)
def test_the_sick_hosts_on_top(
    snap_compare: Any,
    bucket: Path,
    tmp_path: Path,
    size: tuple[int, int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def looked_at(_: FileStore) -> int:
        return LOOKED_AT

    monkeypatch.setattr(FileStore, "server_now", looked_at)
    app = FleetApp(RemoteSettings(bucket.as_uri()), tmp_path / "cache")
    app.view.where = "file:///srv/bucket"  # the URL the status line shows, pinned
    assert snap_compare(app, terminal_size=size, run_before=steady)
