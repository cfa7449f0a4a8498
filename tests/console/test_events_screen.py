"""The Events screen as an operator uses it, on the demo site after a pass moved
its old rows out: the counts and the chart cover live and archived rows of the
range, the table reads the next page as the cursor nears its end, the SQL box
answers, an export writes every row, and R restores exactly the archived rows
of the range and kinds chosen, asked first."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path

import pytest
from textual.app import App
from textual.widgets import DataTable, Input, Static

from coldkeep.core.base.config import Settings
from coldkeep.core.events.query import Rows
from coldkeep.tui.console.screens.confirm import ConfirmScreen
from coldkeep.tui.console.screens.events import EventsScreen
from coldkeep.tui.console.screens.eventsread import PAGE, write_rows
from coldkeep.tui.console.screens.export import ExportScreen
from coldkeep.tui.console.widgets.charts import NameBars

from consolekit import NOW_MS, current_screen, make_app, press_to, settle

DAY_MS = 86_400_000
START_MS = 1_785_715_200_000  # 2026-08-03, 90 days before the pinned clock's day


def _rows(settings: Settings, where: str = "1", params: tuple[object, ...] = ()) -> Counter[str]:
    """Kinds of the rows in live and every month DB matching ``where`` (rows
    restored into live are counted once, as the screen does)."""
    assert settings.state_db is not None
    seen: dict[int, str] = {}
    months = sorted((settings.archive_root / "events").glob("*.db"))
    for db in [*months, settings.state_db]:  # live last: its copy wins
        with sqlite3.connect(db) as conn:
            for id_, kind in conn.execute(f"SELECT id, kind FROM events WHERE {where}", params):
                seen[id_] = kind
    return Counter(seen.values())


def _table(app: object) -> DataTable[object]:
    screen = current_screen(app)  # type: ignore[arg-type]
    assert isinstance(screen, EventsScreen)
    return screen.query_one("#events-rows", DataTable)


async def test_counts_rows_and_the_next_page(archived: Settings) -> None:
    settings = archived
    app = make_app(settings)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        screen = await press_to(app, pilot, EventsScreen, "E")
        want = _rows(settings, "ts >= ?", (START_MS,))
        total = sum(want.values())
        assert total > PAGE, "the demo's range holds more than a page"
        summary = str(screen.query_one("#events-summary", Static).render())
        assert summary.startswith(f"{total:,} rows (")
        assert dict(screen.query_one("#events-kinds-bars", NameBars).counts) == dict(want)
        assert screen.counts is not None and sum(n for _, n in screen.counts.days) == total
        table = _table(app)
        assert table.row_count == PAGE
        table.move_cursor(row=PAGE - 1)
        await settle(pilot)
        assert table.row_count == min(total, 2 * PAGE)
        ids = [table.get_row_at(i)[1] for i in range(table.row_count)]  # after the time
        assert len(set(ids)) == len(ids), "a row is never on two pages"


async def test_sql_box_and_export(archived: Settings, tmp_path: Path) -> None:
    settings = archived
    app = make_app(settings)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await pilot.press("E")
        await settle(pilot)
        await pilot.press("s")
        field = current_screen(app).query_one("#events-sql", Input)
        field.value = "SELECT kind, count(*) AS n FROM events GROUP BY kind ORDER BY kind"
        await pilot.press("enter")
        await settle(pilot)
        table = _table(app)
        assert [c.label.plain for c in table.columns.values()] == ["kind", "n"]
        want = _rows(settings, "ts >= ?", (START_MS,))
        got = {str(table.get_row_at(i)[0]): table.get_row_at(i)[1] for i in range(table.row_count)}
        assert got == dict(want)

        # A SQL answer longer than a page is read on as the cursor goes down too.
        field.value = "SELECT id FROM events ORDER BY id"
        field.focus()
        await pilot.press("enter")
        await settle(pilot)
        table = _table(app)
        assert table.row_count == PAGE
        table.move_cursor(row=PAGE - 1)
        await settle(pilot)
        assert table.row_count == 2 * PAGE
        ids = [int(str(table.get_row_at(i)[0])) for i in range(table.row_count)]
        assert ids == sorted(set(ids)), "the next rows of the same answer, none twice"
        field.value = "SELECT kind, count(*) AS n FROM events GROUP BY kind ORDER BY kind"
        field.focus()
        await pilot.press("enter")
        await settle(pilot)

        out = tmp_path / "kinds.jsonl"
        table.focus()  # out of the SQL box: the screen's keys work
        await pilot.press("o")
        await settle(pilot)
        current_screen(app).query_one("#export-path", Input).value = str(out)
        await pilot.press("enter")
        await settle(pilot)
        lines = [json.loads(line) for line in out.read_text().splitlines()]
        assert {d["kind"]: d["n"] for d in lines} == dict(want)
        assert not list(tmp_path.glob(".*.partial"))


async def test_restore_these_rows(archived: Settings) -> None:
    settings = archived
    assert settings.state_db is not None
    app = make_app(settings)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        kind = "webhook_event"
        # Two days of one archived month: a range that is not whole months.
        start, end = "2026-08-10", "2026-08-11"
        lo, hi = START_MS + 7 * DAY_MS, START_MS + 9 * DAY_MS
        archived_before = _rows(settings, "kind = ? AND ts >= ? AND ts < ?", (kind, lo, hi))
        with sqlite3.connect(settings.state_db) as live:
            [(live_before,)] = live.execute("SELECT count(*) FROM events").fetchall()
        await pilot.press("E")
        await settle(pilot)
        screen = current_screen(app)
        screen.query_one("#events-from", Input).value = start
        screen.query_one("#events-to", Input).value = end
        screen.query_one("#events-kinds", Input).value = kind
        screen.query_one("#events-kinds", Input).focus()
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(screen, EventsScreen) and screen.counts is not None
        n = screen.counts.archived_rows
        assert n == archived_before[kind] > 0
        _table(app).focus()
        dialog = await press_to(app, pilot, ConfirmScreen, "R")
        assert dialog.title_text == f"Restore {n:,} event rows"
        await pilot.press("y")
        await settle(pilot)
        with sqlite3.connect(settings.state_db) as live:
            [(live_after,)] = live.execute("SELECT count(*) FROM events").fetchall()
            [(back,)] = live.execute(
                "SELECT count(*) FROM events WHERE kind = ? AND ts >= ? AND ts < ?", (kind, lo, hi)
            ).fetchall()
        assert live_after == live_before + n, "only the rows of the range and kind came back"
        assert back == n
    assert hi < NOW_MS


def _rows_of(*rows: tuple[object, ...]) -> Rows:
    left = list(rows)

    def fetch(n: int) -> list[tuple[object, ...]]:
        batch = left[:n]
        del left[:n]
        return batch

    return Rows(["id", "kind"], fetch)


def test_an_export_never_writes_through_what_is_at_its_temporary_name(tmp_path: Path) -> None:
    """The export's temporary name is predictable (``.NAME.partial``): a symlink
    planted there is not followed, a file there is not truncated; the export
    fails, names it, and leaves both as they were."""
    target = tmp_path / "precious.txt"
    target.write_text("not yours\n")
    out = tmp_path / "rows.jsonl"
    partial = tmp_path / ".rows.jsonl.partial"
    partial.symlink_to(target)
    with pytest.raises(FileExistsError, match="left as it is"):
        write_rows(_rows_of((1, "a")), out)
    assert target.read_text() == "not yours\n"
    assert partial.is_symlink() and not out.exists()

    partial.unlink()
    partial.write_text("someone's half-written file\n")
    with pytest.raises(FileExistsError, match="left as it is"):
        write_rows(_rows_of((1, "a")), out)
    assert partial.read_text() == "someone's half-written file\n"
    assert not out.exists()

    partial.unlink()
    assert write_rows(_rows_of((1, "a"), (2, "b")), out) == 2
    assert [json.loads(line) for line in out.read_text().splitlines()] == [
        {"id": 1, "kind": "a"},
        {"id": 2, "kind": "b"},
    ]
    assert not partial.exists()
    # A file at the name itself (here a link to one): never replaced.
    link = tmp_path / "taken.jsonl"
    link.symlink_to(target)
    with pytest.raises(FileExistsError, match="nothing was replaced"):
        write_rows(_rows_of((1, "a")), link)
    assert target.read_text() == "not yours\n"
    assert not (tmp_path / ".taken.jsonl.partial").exists()


class _ExportHost(App[None]):
    def __init__(self, suggested: Path) -> None:
        super().__init__()
        self.suggested = suggested

    def on_mount(self) -> None:
        self.push_screen(ExportScreen(self.suggested))


async def test_the_export_dialog_says_which_folder_is_missing(tmp_path: Path) -> None:
    """A folder that does not exist is said to be missing, one that is a file
    is said not to be a folder, a name taken is refused: nothing is dismissed."""
    (tmp_path / "a-file").write_text("x")
    app = _ExportHost(tmp_path / "rows.jsonl")
    async with app.run_test(size=(100, 24)) as pilot:
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, ExportScreen)
        field = dialog.query_one("#export-path", Input)
        error = dialog.query_one("#export-error", Static)
        for typed, said in (
            (tmp_path / "nowhere" / "rows.jsonl", f"{tmp_path / 'nowhere'} does not exist"),
            (tmp_path / "a-file" / "rows.jsonl", f"{tmp_path / 'a-file'} is not a folder"),
            (tmp_path / "a-file", f"{tmp_path / 'a-file'} is there"),
        ):
            field.value = str(typed)
            field.focus()
            await pilot.press("enter")
            await pilot.pause()
            assert str(error.render()).startswith(said), str(error.render())
            assert app.screen is dialog
