"""The fleet view (``coldkeep console --remote URL``), driven through the keyboard
with Textual's Pilot: two demo sites ship to one ``file://`` folder, both hosts
are deleted, and the view lists them, searches both at once and restores one's
files to a local folder, each checked against its entry's sha256. Also: a URL
the CLI refuses in one line, and a prefix nothing has shipped to.

(Named test_fleet_view, not test_fleet: tests/core/ops/test_fleet.py has that module name,
and the test folders are not packages.)"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import DataTable, Input, Static

from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.files.catalog import CatalogRow, close_all
from coldkeep.core.remote.keptlisting import Entry
from coldkeep.tui.console.fleet.app import FleetApp
from coldkeep.tui.console.fleet.restore import files
from coldkeep.tui.console.fleet.view import FleetScreen
from coldkeep.tui.console.screens import ConfirmScreen, FindScreen

from consolekit import notices, settle, the_one_quit
from remotecheck import ship_site

SIZE = (140, 40)


@pytest.fixture(scope="module")
def bucket(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """web-1 and web-2 shipped to one folder, then deleted; web-3 never shipped."""
    base = tmp_path_factory.mktemp("fleet")
    remote = base / "bucket"
    for name, seed in (("web-1", 1), ("web-2", 2)):
        asyncio.run(ship_site(base, remote, name, seed))
        shutil.rmtree(base / name)  # the host is gone: only the bucket is left
    (remote / "web-3").mkdir()
    return remote


def view(app: FleetApp) -> FleetScreen:
    return app.view


def text_of(app: FleetApp, selector: str) -> str:
    return str(app.view.query_one(selector, Static).render())


def cells(app: FleetApp, table_id: str) -> list[list[str]]:
    table = app.view.query_one(table_id, DataTable)
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


def focused(app: FleetApp) -> Widget | None:
    """The focused widget now (read through a call, so that a type checker does
    not carry an earlier comparison past the keys pressed since)."""
    return app.focused


def highlighted(app: FleetApp) -> tuple[str, CatalogRow]:
    current = app.view._current()
    assert current is not None
    return current


async def type_into(pilot: Pilot[None], text: str) -> None:
    await pilot.press(*text)
    await settle(pilot)


async def test_two_gone_hosts_searched_together_and_one_restored_to_a_folder(
    bucket: Path, tmp_path: Path
) -> None:
    app = FleetApp(RemoteSettings(bucket.as_uri()), tmp_path / "cache")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        rows = cells(app, "#fleet-sites")
        sites = {row[1]: row for row in rows}
        assert [row[1] for row in rows] == ["web-3", "web-1", "web-2"], "the sick site first"
        for name in ("web-1", "web-2"):
            health, _, beat, snapshot, entries, note = sites[name]
            assert health == "ok ok" and beat.endswith(" ago"), sites[name]
            assert snapshot.endswith(" UTC") and int(entries.replace(",", "")) > 0 and not note
        assert sites["web-3"][0] == "!! critical" and sites["web-3"][2] == "none"
        assert "no manifest snapshot" in sites["web-3"][5]
        assert text_of(app, "#status-line").startswith(
            "fleet: 3 sites (1 without a usable snapshot)"
        )

        # The filter has focus: typing searches both sites at once.
        await type_into(pilot, "unit-0001")
        matches = cells(app, "#fleet-table")
        assert {row[1] for row in matches} == {"web-1", "web-2"}
        assert all("unit-0001" in row[2] for row in matches)
        assert f"{len(matches)} of " in text_of(app, "#fleet-count")

        # Down leads to the table; space selects each of web-2's rows.
        await pilot.press("down")
        table = app.view.query_one("#fleet-table", DataTable)
        assert focused(app) is table
        wanted: list[CatalogRow] = []
        for _ in range(table.row_count):
            site, row = highlighted(app)
            if site == "web-2":
                wanted.append(row)
                await pilot.press("space")
            await pilot.press("down")
        await settle(pilot)
        assert wanted and f"{len(wanted)} selected" in text_of(app, "#fleet-count")

        # No target yet: refused, and the target field takes the keys.
        await pilot.press("r")
        await settle(pilot)
        assert not isinstance(app.screen, ConfirmScreen)
        assert focused(app) is app.view.query_one("#fleet-to", Input)
        out = tmp_path / "restored"
        await type_into(pilot, str(out))
        await pilot.press("escape", "r")
        await settle(pilot)

        # The dialog says exactly what is written where.
        dialog = app.screen
        assert isinstance(dialog, ConfirmScreen)
        assert dialog.title_text.startswith(f"Restore {files(len(wanted))} (")
        assert dialog.title_text.endswith(f") of web-2 to {out}")
        listed = [[str(c) for c in row] for row in dialog.rows]
        assert sorted(row[1] for row in listed) == sorted(r.relpath for r in wanted)
        assert all(row[3:] == ["free", str(out / row[1])] for row in listed)
        assert not out.exists(), "nothing is written before the operator says yes"

        await pilot.press("y")
        await settle(pilot)
        report = view(app).last
        assert report is not None
        assert {f.result for f in report.files} == {"restored"}
        by_id = {r.id: r for r in wanted}
        assert sorted(f.entry_id for f in report.files) == sorted(by_id)
        for f in report.files:
            assert Path(f.target) == out / by_id[f.entry_id].relpath
            digest = hashlib.sha256(Path(f.target).read_bytes()).hexdigest()
            assert digest == by_id[f.entry_id].sha256
        results = cells(app, "#fleet-results")
        assert {(row[0], row[1]) for row in results} == {("restored", "web-2")}
        assert "selected" not in text_of(app, "#fleet-count")
    assert {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()} == {
        r.relpath for r in wanted
    }


async def test_find_searches_every_site_and_enter_selects_the_row(
    bucket: Path, tmp_path: Path
) -> None:
    app = FleetApp(RemoteSettings(bucket.as_uri()), tmp_path / "cache")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        # From the table (in the filter g is a letter): the find box.
        await pilot.press("escape", "g")
        await type_into(pilot, "part-03.jsonl")
        await pilot.press("enter")
        await settle(pilot)
        find = app.screen
        assert isinstance(find, FindScreen)
        table = find.query_one("#find-table", DataTable)
        rows = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        assert {row[0] for row in rows} == {"web-1", "web-2"}
        assert all(row[1].endswith("part-03.jsonl") for row in rows)
        said = str(find.query_one("#find-count", Static).render())
        assert said.startswith(f"{len(rows)} versions of ") and "not searched: web-3" in said

        # Enter: the row listed and highlighted in the fleet table.
        await pilot.press("down")
        site, path, entry_id = rows[1][0], rows[1][1], int(rows[1][6])
        await pilot.press("enter")
        await settle(pilot)
        assert app.screen is app.view
        assert highlighted(app)[0] == site and highlighted(app)[1].id == entry_id
        assert app.view.query_one("#fleet-filter", Input).value == f"site:{site} {path}"


async def test_site_words_filter_and_several_sites_go_to_their_own_folders(
    bucket: Path, tmp_path: Path
) -> None:
    app = FleetApp(RemoteSettings(bucket.as_uri()), tmp_path / "cache")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await type_into(pilot, "site:nowhere")
        assert "site:nowhere: no such site; the sites are web-1, web-2" in text_of(
            app, "#fleet-count"
        )
        await pilot.press(*["backspace"] * len("nowhere"))
        await type_into(pilot, "web-1 unit-0001")
        assert {row[1] for row in cells(app, "#fleet-table")} == {"web-1"}

        # One file of each site: each goes under <target>/<site>/.
        await pilot.press("ctrl+u")
        await type_into(pilot, "unit-0001")
        picks = {}
        await pilot.press("down")
        for _ in range(len(cells(app, "#fleet-table"))):
            site, row = highlighted(app)
            if site not in picks:
                picks[site] = row
                await pilot.press("space")
            await pilot.press("down")
        assert sorted(picks) == ["web-1", "web-2"]
        out = tmp_path / "both"
        await pilot.press("t")
        await type_into(pilot, str(out))
        await pilot.press("enter", "r")
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, ConfirmScreen)
        assert dialog.title_text.endswith(f"of 2 sites (web-1, web-2) to {out}/<site>/")
        await pilot.press("y")
        await settle(pilot)
        report = view(app).last
        assert report is not None and {f.result for f in report.files} == {"restored"}
    for site, row in picks.items():
        restored = out / site / row.relpath
        assert hashlib.sha256(restored.read_bytes()).hexdigest() == row.sha256


async def test_a_prefix_nothing_shipped_to_says_so(tmp_path: Path) -> None:
    empty = tmp_path / "bucket"
    empty.mkdir()
    app = FleetApp(RemoteSettings(empty.as_uri()), tmp_path / "cache")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert text_of(app, "#status-line") == (
            f"no sites under {empty.as_uri()}: nothing has shipped there yet"
        )
        assert cells(app, "#fleet-sites") == []
        await pilot.press("escape", "r")
        await settle(pilot)
        assert not isinstance(app.screen, ConfirmScreen)
        await pilot.press("f")  # read the prefix again: still nothing
        await settle(pilot)
        assert text_of(app, "#status-line").startswith("no sites under ")


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("ftp://x", "--remote ftp://x is not an s3:// or file:// URL"),
        ("s3://AKIAEXAMPLE:s3cret@bucket/fleet", "--remote holds a credential"),
        ("s3://No_Such/fleet", "is not an S3 bucket name"),
        ("file:///no/such/folder", "/no/such/folder is not a directory"),
    ],
)
def test_a_bad_remote_url_is_refused_in_one_line(url: str, said: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "coldkeep.tui.cli.main", "console", "--remote", url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("coldkeep: ") and said in lines[0], lines
    assert "s3cret" not in done.stderr


async def test_the_filter_lists_the_first_matches_of_all_sites_not_of_each(
    bucket: Path, tmp_path: Path
) -> None:
    from coldkeep.core.files.catalog import parse_query
    from coldkeep.core.ops.fleet import Fleet
    from coldkeep.tui.console.fleet.matches import matching

    fleet = Fleet(RemoteSettings(bucket.as_uri()), tmp_path / "cache")
    try:
        await fleet.load()
        catalogs = await fleet.catalogs()
    finally:
        await fleet.close()
    try:
        found = matching(catalogs, "", lambda: False, limit=7)
        assert found is not None and found.total == sum(len(c) for c in catalogs.values())
        every = sorted(
            (row.relpath, site, row.id)
            for site, c in catalogs.items()
            for row in c.filter(parse_query(""), limit=100_000)[1]
        )
        assert [(row.relpath, site, row.id) for site, row in found.rows] == every[:7]
    finally:
        close_all(catalogs.values())


async def test_a_long_list_fills_the_table_a_few_rows_a_frame_selection_and_all(
    bucket: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The matches go into the table a few rows a frame (a table measures what
    is new before the next frame): all of them in the end, in path order, and
    a select-all pressed before the last are in marks those added after it.
    A reload closes the connections the last load's catalogs kept."""
    from coldkeep.tui.console.fleet import view as fleet_view

    monkeypatch.setattr(fleet_view, "ROWS_PER_FRAME", 4)
    app = FleetApp(RemoteSettings(bucket.as_uri()), tmp_path / "cache")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("u", "down", "a")  # at once: the table still filling
        await settle(pilot)
        listed = cells(app, "#fleet-table")
        assert len(listed) == len(app.view.rows) > 8
        assert [row[1:3] for row in listed] == sorted((r[1:3] for r in listed), key=lambda r: r[1])
        assert all(row[0] == "✓" for row in listed), "selected, those added after too"
        assert f"{len(listed)} selected" in text_of(app, "#fleet-count")

        before = list(app.view.catalogs.values())
        await pilot.press("escape", "f5")
        await settle(pilot)
        assert app.view.catalogs and all(c._kept is None for c in before)


async def test_a_key_typed_before_the_filter_answers_acts_on_its_rows(
    bucket: Path, tmp_path: Path
) -> None:
    """Space pressed before the filter's answer (held in its thread until
    then) selects the filter's first row, not the row highlighted in the list
    it replaces."""
    app = FleetApp(RemoteSettings(bucket.as_uri()), tmp_path / "cache")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        held = threading.Event()
        for catalog in app.view.catalogs.values():
            filter_rows = catalog.filter

            def held_filter(
                *args: Any, _rows: Any = filter_rows, **kwargs: Any
            ) -> tuple[int, list[CatalogRow], bool]:
                assert held.wait(30), "the test never let the filter go"
                return _rows(*args, **kwargs)  # type: ignore[no-any-return]

            catalog.filter = held_filter  # type: ignore[method-assign]
        await pilot.press(*"unit-0001", "down", "space")
        held.set()
        await settle(pilot)
        assert app.view.selected <= set(app.view.rows), "a row of the old list selected"
        [picked] = [app.view.rows[key] for key in app.view.selected]
        assert "unit-0001" in picked[1].relpath, picked


async def test_enter_on_a_site_says_why_it_is_in_its_state_and_f_lists_its_files(
    bucket: Path, tmp_path: Path
) -> None:
    from coldkeep.tui.console.fleet.site import SiteScreen

    app = FleetApp(RemoteSettings(bucket.as_uri()), tmp_path / "cache")
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        sites_table = app.view.query_one("#fleet-sites", DataTable)
        await pilot.press("escape", "s")  # from the filter to the table, then to the sites
        await settle(pilot)
        assert app.focused is sites_table
        sites_table.move_cursor(row=0)  # web-3, the sick one, on top
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, SiteScreen)
        said = str(app.screen.query_one("#site-detail", Static).render())
        assert "!! web-3: critical" in said and "no manifest snapshot" in said, said
        await pilot.press("escape")
        await settle(pilot)
        sites_table.move_cursor(row=sites_table.get_row_index("web-1"))
        await pilot.press("enter")
        await settle(pilot)
        said = str(app.screen.query_one("#site-detail", Static).render())
        assert "ok web-1: ok" in said and "heartbeat   " in said and "ago (due every" in said
        await pilot.press("f")
        await settle(pilot)
        assert app.view.query_one("#fleet-filter", Input).value == "site:web-1"
        assert {row[1] for row in cells(app, "#fleet-table")} == {"web-1"}


async def test_the_palette_has_one_quit_and_it_is_the_one_that_asks(
    bucket: Path, tmp_path: Path
) -> None:
    app = FleetApp(RemoteSettings(bucket.as_uri()), tmp_path / "cache")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "asks first while a restore runs" in the_one_quit(app).help


async def test_the_sites_are_shown_as_they_load_not_all_at_the_end(
    bucket: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """web-2's load is held until the sites loaded so far (web-1, web-3) have
    been posted: they are, without waiting for it."""
    from textual.message import Message

    from coldkeep.core.ops.fleet import Fleet, FleetSite
    from coldkeep.tui.console.fleet import sites as gathering
    from coldkeep.tui.console.fleet.messages import SitesLoaded

    monkeypatch.setattr(gathering, "SHOWN_EVERY_S", 0.01)
    shown_early = asyncio.Event()
    real_site = Fleet._site

    async def held(self: Fleet, name: str, indexed: list[Entry] | None) -> FleetSite:
        if name == "web-2":
            await shown_early.wait()
        return await real_site(self, name, indexed)

    monkeypatch.setattr(Fleet, "_site", held)
    posted: list[Message] = []

    def post(message: Message) -> None:
        posted.append(message)
        if not isinstance(message, SitesLoaded) or message.done:
            return
        if {s.site for s in message.sites} == {"web-1", "web-3"}:
            shown_early.set()

    fleet = Fleet(RemoteSettings(bucket.as_uri()), tmp_path / "cache")
    try:
        await asyncio.wait_for(gathering.gather(fleet, post), timeout=60)
    finally:
        await fleet.close()
    loaded = [m for m in posted if isinstance(m, SitesLoaded)]
    assert not loaded[0].done, "the first sites shown before the last one loaded"
    whole = [m for m in loaded if m.done]
    assert whole and {s.site for s in whole[0].sites} == {"web-1", "web-2", "web-3"}


async def test_a_restore_stopped_before_its_first_file_says_so(
    bucket: Path, tmp_path: Path
) -> None:
    from coldkeep.core.files.restore import RestoreReport
    from coldkeep.tui.console.fleet.messages import RestoreEnded

    app = FleetApp(RemoteSettings(bucket.as_uri()), tmp_path / "cache")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        said = notices(app)
        app.view.post_message(RestoreEnded(tmp_path / "to", RestoreReport(), [], "stopped"))
        await settle(pilot)
        assert said == ["restore to " + str(tmp_path / "to") + ": stopped: no file restored yet"]


async def test_a_selects_every_match_listed_and_again_none(bucket: Path, tmp_path: Path) -> None:
    app = FleetApp(RemoteSettings(bucket.as_uri()), tmp_path / "cache")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await type_into(pilot, "unit-0001")
        await pilot.press("down", "a")  # to the table, then every match
        await settle(pilot)
        rows = cells(app, "#fleet-table")
        assert rows and all(row[0] == "✓" for row in rows)
        assert f"{len(rows)} selected" in text_of(app, "#fleet-count")
        await pilot.press("a")
        await settle(pilot)
        assert all(row[0] == "" for row in cells(app, "#fleet-table"))
        assert "selected" not in text_of(app, "#fleet-count")
