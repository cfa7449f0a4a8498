"""Reading archived files from the restore browser without restoring them, driven
through the keyboard with Textual's Pilot on a real demo site: ``v`` opens the
pager (first lines, the last one after End, search, JSON pretty-printed, bytes
that are not text escaped, a sha256 mismatch said at the end), ``H`` lists a
path's versions (one read, one restored), and the find box finds a file the
browser's first page does not list."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import tempfile
import threading
from pathlib import Path
from typing import BinaryIO

import pytest
from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Static

from coldkeep.core.base.cancel import CancelToken
from coldkeep.core.base.config import Settings
from coldkeep.core.base.layout import Layout
from coldkeep.tui.console.app import ColdkeepApp
from coldkeep.tui.console.screens import (
    ConfirmScreen,
    FindScreen,
    PagerScreen,
    RestoreScreen,
    VersionsScreen,
)
from coldkeep.tui.console.screens.pager import PagerView, Source

from consolekit import archive_all, current_screen, make_app, press_to, settle, until

SIZE = (120, 36)
WANTED = "unit-0005/runs/part-03.jsonl"


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines()


def screen_text(app: ColdkeepApp) -> str:
    """What the pager draws now, row by row."""
    return "\n".join(row.plain for row in app.screen.query_one(PagerView).screen_rows())


def status(app: ColdkeepApp) -> str:
    return str(app.screen.query_one("#pager-status", Static).render())


async def browse(app: ColdkeepApp, pilot: Pilot[None], filter_text: str) -> RestoreScreen:
    """The restore browser, its filter ``filter_text``, its table focused."""
    await pilot.press("r")
    await settle(pilot)
    screen = await press_to(app, pilot, RestoreScreen, *filter_text, "down")
    return screen


async def keys(pilot: Pilot[None], *pressed: str) -> None:
    await pilot.press(*pressed)
    await settle(pilot)


async def test_v_reads_the_file_first_lines_last_line_search_and_json(settings: Settings) -> None:
    original = lines_of(settings.live_root / WANTED)
    assert len(original) > 1000
    app = make_app(settings)
    async with app.run_test(size=SIZE) as pilot:
        await archive_all(app, pilot)
        assert not (settings.live_root / WANTED).exists()
        await browse(app, pilot, "runs/part-03 ")
        await keys(pilot, "v")
        assert isinstance(current_screen(app), PagerScreen)

        # JSON lines are pretty-printed: the first record, indented, one key a row.
        first = json.loads(original[0])
        pretty = json.dumps(first, indent=2).splitlines()
        gutter = len(f"{len(original):,}") + 1  # the line numbers' column
        drawn = [row[gutter:].strip() for row in screen_text(app).splitlines()]
        assert drawn[: len(pretty)] == [p.strip() for p in pretty]
        assert f"of {len(original):,}" in status(app) and "sha256 verified" in status(app)

        # p: each line as stored, numbered.
        await keys(pilot, "p")
        rows = screen_text(app).splitlines()
        assert rows[0].startswith(f"{1:>{gutter - 1}} {original[0][:60]}")
        assert "as stored" in status(app)

        # End: the last line, then the verdict.
        await keys(pilot, "end")
        text = screen_text(app)
        assert f"{len(original):,} {original[-1][:60]}" in text
        assert text.splitlines()[-1].startswith("— end:") and "sha256 verified" in text

        # A search from the top finds a line far down; n and N move between hits.
        far = next(
            i
            for i in range(len(original) - 7, 0, -1)
            if sum(f'"ts":{json.loads(original[i])["ts"]},' in line for line in original) == 1
        )
        needle = f'"ts":{json.loads(original[far])["ts"]},'
        await keys(pilot, "home", "slash", *needle, "enter")
        view = app.screen.query_one(PagerView)
        assert view.hit == far and view.top == far
        assert needle in screen_text(app).splitlines()[0]
        kind = json.loads(original[len(original) // 2])["kind"]
        hits = [i for i, line in enumerate(original) if kind in line]
        await keys(pilot, "home", "slash", *kind, "enter")
        assert view.hit == hits[0]
        # Typed faster than a search finds: both n's pressed while the first
        # is held in its thread; each then moves one hit on (CI caught the
        # second searching from where the first began, once in a hundred).
        pager = current_screen(app)
        assert isinstance(pager, PagerScreen)
        held, find = threading.Event(), pager.spool.find

        def held_find(needle: bytes, line: int, *, forward: bool = True) -> int | None:
            assert held.wait(30), "the test never let the search go"
            return find(needle, line, forward=forward)

        pager.spool.find = held_find  # type: ignore[method-assign]
        await pilot.press("n", "n")
        held.set()
        await settle(pilot)
        assert view.hit == hits[2]
        await keys(pilot, "N", "n", "N")
        assert view.hit == hits[1]

        # Closed: back in the browser, nothing restored.
        await keys(pilot, "q")
        assert isinstance(current_screen(app), RestoreScreen)
        assert not (settings.live_root / WANTED).exists()


async def test_bytes_that_are_not_text_are_escaped_and_never_markup(settings: Settings) -> None:
    odd = settings.live_root / "unit-0005/runs/odd.log"
    odd.write_bytes(b"[bold red]not markup[/] \x1b[31m\n\xff\xfe caf\xc3\xa9\n")
    aged = (settings.live_root / WANTED).stat().st_mtime_ns
    os.utime(odd, ns=(aged, aged))
    app = make_app(settings)
    async with app.run_test(size=SIZE) as pilot:
        await archive_all(app, pilot)
        assert not odd.exists()
        await browse(app, pilot, "runs/odd.log")
        await keys(pilot, "v")
        rows = screen_text(app).splitlines()
        assert rows[0] == "1 [bold red]not markup[/] \\x1b[31m"
        assert rows[1] == "2 \\xff\\xfe café"
        assert "sha256 verified" in status(app)


async def test_a_copy_that_is_not_the_archived_file_ends_in_a_banner(settings: Settings) -> None:
    last_line = lines_of(settings.live_root / WANTED)[-1]
    app = make_app(settings)
    async with app.run_test(size=SIZE) as pilot:
        await archive_all(app, pilot)
        with sqlite3.connect(Layout(settings.archive_root).manifest) as db:
            db.execute("UPDATE entries SET sha256 = ? WHERE relpath = ?", ("0" * 64, WANTED))
        db.close()
        await browse(app, pilot, "runs/part-03 ")
        await keys(pilot, "v", "p", "end")
        text = " ".join(screen_text(app).split())  # the banner wraps
        assert text.index(last_line[:40]) < text.index("SHA256 MISMATCH:")
        assert text.endswith(
            "The bytes above are not the archived file (coldkeep verify finds the bad copy)."
        )
        assert "SHA256 MISMATCH" in status(app)


async def test_end_pressed_while_the_file_is_read_stays_at_the_end_as_it_grows(
    settings: Settings,
) -> None:
    """End typed before the file is all read (a big file, a slow remote) shows
    its last line once it is, as less's G does; Home meanwhile stays at the top."""
    gates = [asyncio.Event(), asyncio.Event()]

    def gated(gate: asyncio.Event) -> Source:
        async def source(out: BinaryIO, cancel: CancelToken) -> str | None:
            out.write(b"".join(b"line %d\n" % i for i in range(1, 201)))
            await gate.wait()
            out.write(b"".join(b"line %d\n" % i for i in range(201, 501)))
            return None

        return source

    app = make_app(settings)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for gate, key in zip(gates, ("end", "home"), strict=True):
            app.push_screen(PagerScreen(Text("a file still being read"), "big.log", gated(gate)))
            await until(
                pilot,
                lambda: isinstance(current_screen(app), PagerScreen) and "of 200" in status(app),
                "the first 200 lines shown, the rest still to come",
            )
            await pilot.press(key)
            gate.set()
            await settle(pilot)
            rows = screen_text(app).splitlines()
            if key == "end":
                assert rows[-2] == "500 line 500" and rows[-1].startswith("— end:")
            else:
                assert rows[0] == "  1 line 1" and "line 1 of 500" in status(app)
            await keys(pilot, "q")


async def test_h_lists_every_version_reads_one_and_restores_one(settings: Settings) -> None:
    live = settings.live_root / WANTED
    mtime = live.stat().st_mtime_ns
    app = make_app(settings)
    async with app.run_test(size=SIZE) as pilot:
        await archive_all(app, pilot)
        # A second version of the same path, archived by a second pass.
        live.write_bytes(b'{"ts":1,"kind":"the second version"}\n')
        os.utime(live, ns=(mtime + 10**9, mtime + 10**9))
        await archive_all(app, pilot)
        assert not live.exists()

        screen = await browse(app, pilot, "runs/part-03 ")
        await keys(pilot, "H")
        versions = current_screen(app)
        assert isinstance(versions, VersionsScreen)
        table = versions.query_one("#versions-table", DataTable)
        ids = [int(table.get_row_at(i)[4]) for i in range(table.row_count)]
        assert len(ids) == 2 and set(ids) == {r.id for r in screen.rows.values()}

        # The newest first: v reads it.
        await keys(pilot, "v")
        assert '"the second version"' in screen_text(app)
        await keys(pilot, "escape", "down", "r")
        assert isinstance(current_screen(app), ConfirmScreen)
        await keys(pilot, "y")
        # The older version, back at its live path.
        assert live.read_bytes().startswith(b'{"ts":17')


async def test_the_find_box_finds_a_file_the_first_page_does_not_list(
    settings: Settings,
) -> None:
    many = settings.live_root / "unit-0005" / "many"
    many.mkdir()
    aged = (settings.live_root / WANTED).stat().st_mtime_ns
    for i in range(520):
        (many / f"f-{i:04d}.log").write_text(f"file {i}\n")
        os.utime(many / f"f-{i:04d}.log", ns=(aged, aged))
    app = make_app(settings)
    async with app.run_test(size=SIZE) as pilot:
        await archive_all(app, pilot)
        await keys(pilot, "r")
        browser = current_screen(app)
        assert isinstance(browser, RestoreScreen)
        assert len(browser.rows) == 500  # the first page: the count says more match
        listed = {r.relpath for r in browser.rows.values()}
        target = next(
            f"unit-0005/many/f-{i:04d}.log"
            for i in range(520)
            if f"unit-0005/many/f-{i:04d}.log" not in listed
        )
        await keys(pilot, "escape")

        # g on the main screen: the find box, over the browser.
        await keys(pilot, "g", *target.rsplit("/", 1)[1], "enter")
        find = current_screen(app)
        assert isinstance(find, FindScreen)
        table = find.query_one("#find-table", DataTable)
        assert [str(table.get_row_at(i)[0]) for i in range(table.row_count)] == [target]

        # enter: selected in the browser.
        await keys(pilot, "enter")
        browser = current_screen(app)
        assert isinstance(browser, RestoreScreen)
        current = browser._current()
        assert current is not None and current.relpath == target
        assert browser.query_one("#restore-filter", Input).value == target


def tree(root: Path) -> set[str]:
    """What is under ``root``, but the restore browser's index of paths (a
    cache it keeps beside the manifest, not the pager's)."""
    return {p.relative_to(root).as_posix() for p in root.rglob("*")} - {"coldkeep.paths"}


async def test_the_pager_writes_nothing_in_the_trees_and_says_when_a_copy_is_gone(
    archived: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = archived
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    app = make_app(settings)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        live, archive = tree(settings.live_root), tree(settings.archive_root)
        await browse(app, pilot, "bulk-0/firehose ")
        await keys(pilot, "v")
        assert "sha256 verified" in status(app)
        # The spool is unlinked from the start: nothing in TMPDIR, the live tree
        # or the archive.
        assert list(scratch.iterdir()) == []
        assert tree(settings.live_root) == live and tree(settings.archive_root) == archive
        await keys(pilot, "escape")

        # Its gzip gone (and no remote copy): the pager says so where the bytes end.
        (settings.archive_root / "files/bulk-0/firehose.jsonl.gz").unlink()
        await keys(pilot, "v")
        text = " ".join(screen_text(app).split())
        assert text.startswith("READ STOPPED after 0 B:") and "firehose.jsonl.gz" in text
        assert "READ STOPPED" in status(app)
