"""A file whose only copy is sealed on the remote, restored from the console's
restore browser and read in its pager: with the identity the console was opened
with (``coldkeep console --identity``) it comes back and reads whole, checked;
without it, the result row and the pager's end say which key it needs and
nothing is placed; a bad identity file stops the console before it opens, in
one line."""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import pytest
from sealkit import new_identity, seal_remote
from textual.pilot import Pilot
from textual.widgets import DataTable

from coldkeep.core.base.config import Settings, load_settings
from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.base.errors import EXIT_USAGE
from coldkeep.core.remote.sealing import Identities, load_identities
from coldkeep.tui.console.app import ColdkeepApp
from coldkeep.tui.console.screens import ConfirmScreen, PagerScreen, RestoreScreen

from consolekit import NOW_MS, PinnedApp, settle
from helpers import ck
from remotecheck import ship_site

SITE = "web-1"
SIZE = (120, 36)


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(a base holding the site and its remote folder, the identity file): every
    file shipped, its local copy dropped, every object sealed."""
    base = tmp_path_factory.mktemp("sealed")
    asyncio.run(ship_site(base, base / "remote", SITE, seed=5))
    key, recipients = new_identity(base)
    assert asyncio.run(seal_remote(base / SITE / "archive", base / "remote", SITE, recipients))
    return base, key


def site_copy(sealed: tuple[Path, Path], tmp_path: Path) -> tuple[Settings, str]:
    """A copy of the sealed site (each test restores into its own), and one
    archived file's relpath."""
    top = str(sealed[0])
    base = tmp_path / "base"
    shutil.copytree(sealed[0], base, symlinks=True, ignore=lambda d, _: ["remote"] * (d == top))
    # The remote's objects linked, not copied: a folder store's object is its
    # file (inode and mtime), so a copy is another object, and a read pinned to
    # the one shipped (the pager's, as cat's) would say it was replaced. Nothing
    # here writes to them.
    shutil.copytree(sealed[0] / "remote", base / "remote", copy_function=os.link)
    remote = RemoteSettings((base / "remote").as_uri(), site=SITE, keep_local_days=0)
    settings = replace(load_settings(base / SITE / "coldkeep.toml"), remote=remote)
    with sqlite3.connect(settings.archive_root / "coldkeep.db") as db:
        [(relpath,)] = db.execute(
            "SELECT relpath FROM entries WHERE status = 'archived' ORDER BY relpath LIMIT 1"
        ).fetchall()
    return settings, str(relpath)


@asynccontextmanager
async def browsing(
    settings: Settings, relpath: str, identities: Identities | None
) -> AsyncIterator[tuple[ColdkeepApp, Pilot[None]]]:
    """The console opened with ``identities``, its restore browser listing
    ``relpath``, the table focused."""
    app: ColdkeepApp = PinnedApp(
        settings, clock=lambda: NOW_MS, watch_live=False, identities=identities
    )
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("r")
        await settle(pilot)
        assert isinstance(app.screen, RestoreScreen)
        await pilot.press(*relpath, "enter")
        yield app, pilot


async def restore_one(
    settings: Settings, relpath: str, identities: Identities | None
) -> tuple[str, str]:
    """``relpath`` restored through the browser, confirmed: its result row's
    (result, detail)."""
    async with browsing(settings, relpath, identities) as (app, pilot):
        screen = app.screen
        await pilot.press("r")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await settle(pilot)
        row = screen.query_one("#restore-results", DataTable).get_row_at(0)
        return str(row[0]), " ".join(str(c) for c in row[1:])


async def test_the_identity_the_console_was_given_opens_the_sealed_copy(
    sealed: tuple[Path, Path], tmp_path: Path
) -> None:
    settings, relpath = site_copy(sealed, tmp_path)
    result, detail = await restore_one(settings, relpath, load_identities(sealed[1]))
    assert result == "restored", detail
    assert (settings.live_root / relpath).is_file()


async def test_without_an_identity_the_row_says_the_key_it_needs(
    sealed: tuple[Path, Path], tmp_path: Path
) -> None:
    settings, relpath = site_copy(sealed, tmp_path)
    result, detail = await restore_one(settings, relpath, None)
    assert result == "error"
    assert "--identity FILE" in detail and "sealed to" in detail, detail
    assert not (settings.live_root / relpath).exists()


async def read_one(settings: Settings, relpath: str, identities: Identities | None) -> str:
    """``relpath`` read in the pager from the browser (``v``): how its read
    ended, as the pager's last line says it."""
    async with browsing(settings, relpath, identities) as (app, pilot):
        await pilot.press("v")
        await settle(pilot)
        pager = app.screen
        assert isinstance(pager, PagerScreen)
        assert pager.ended is not None
        return str(pager.view.tail)


async def test_the_pager_opens_a_sealed_copy_with_the_consoles_identity(
    sealed: tuple[Path, Path], tmp_path: Path
) -> None:
    settings, relpath = site_copy(sealed, tmp_path)
    said = await read_one(settings, relpath, load_identities(sealed[1]))
    assert "sha256 verified" in said, said
    said = await read_one(settings, relpath, None)
    assert said.startswith("READ STOPPED") and "--identity FILE" in said, said


def test_a_bad_identity_file_stops_the_console_before_it_opens(
    sealed: tuple[Path, Path], tmp_path: Path
) -> None:
    config = sealed[0] / SITE / "coldkeep.toml"
    missing = tmp_path / "no-such-key.txt"
    out = ck(config.parent, "console", "--identity", str(missing), check=EXIT_USAGE)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and str(missing) in lines[0], out.stderr
