"""The real console in a real terminal (tmux), driven the way a person would: keys
in with send-keys, the screen read back with capture-pane."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.config import load_settings
from coldkeep.core.base.layout import Layout
from coldkeep.core.files.catalog import Catalog, load_catalog
from coldkeep.core.ops.demo import write_demo
from coldkeep.tui.console.screens.browse import search

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


class Terminal:
    def __init__(self, command: list[str], width: int = 100, height: int = 30) -> None:
        self.name = f"ck-{uuid.uuid4().hex[:8]}"
        subprocess.run(
            ["tmux", "new-session", "-d", "-s", self.name, "-x", str(width), "-y", str(height)],
            check=True,
        )
        subprocess.run(
            ["tmux", "send-keys", "-t", self.name, " ".join(command), "Enter"], check=True
        )

    def screen(self) -> str:
        return subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", self.name],
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    def wait_for(self, *texts: str, timeout: float = 30) -> str:
        """Poll the screen until every one of ``texts`` shows at once (what a
        person watching would do; a capture can land mid-redraw)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if all(text in screen for text in texts):
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{texts!r} never showed together; the screen:\n{self.screen()}")

    def wait_gone(self, text: str, timeout: float = 30) -> bool:
        """Poll the screen until ``text`` is off it; whether it went."""
        deadline = time.monotonic() + timeout
        while text in self.screen() and time.monotonic() < deadline:
            time.sleep(0.1)
        return text not in self.screen()

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, *keys], check=True)

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], check=False)


def test_pressing_p_in_a_real_terminal_shows_the_plan_then_runs_the_pass(tmp_path: Path) -> None:
    site = write_demo(tmp_path / "demo", seed=3, scale=0.02)
    term = Terminal([sys.executable, "-m", "coldkeep.tui.cli.main", "--config", str(site.config)])
    try:
        panes = ("Backlog", "In flight", "Orphans & stale", "Checkpoint", "Jobs", "Log")
        # 100 columns: the panes are tabs, every name on screen.
        term.wait_for("files ", "lock free", "mode on · live/ → archive/", *panes)
        term.keys("p")
        # The dialog says what will happen before anything does.
        term.wait_for(
            "Run a pass (mode on)",
            "will be archived",
            "Recovery will remove 1 leftover partial",
            "REMOVED",
        )
        term.keys("y")
        done = term.wait_for("last pass #1 ok", timeout=60)
        assert "pass: ok" in done or "0 files" in done
        term.keys("q")
        assert term.wait_gone("Backlog"), "q quits the console"
    finally:
        term.close()
    assert not list(site.archive.rglob("*.partial"))


def test_coldkeep_demo_opens_the_console_on_the_site_it_wrote(tmp_path: Path) -> None:
    site = tmp_path / "demo"
    term = Terminal(
        [sys.executable, "-m", "coldkeep.tui.cli.main", "demo", str(site), "--scale", "0.02"],
        width=120,
        height=36,
    )
    try:
        # Wide enough for every pane at once; each has something on first start.
        term.wait_for(
            "lock free", "files ", "1 partial", "unit-0000/interrupted", "Log", timeout=60
        )
        term.keys("q")
        assert term.wait_gone("lock free"), "q quits the console"
    finally:
        term.close()
    assert list(site.rglob("*.partial")), "the console changed nothing on its own"


def filter_field(screen: str) -> str:
    """The restore browser's filter as the screen shows it: its first field."""
    match = re.search(r"^▊ {2}(.*?) *▎$", screen, re.MULTILINE)
    assert match, screen
    return match.group(1)


def console_after_a_pass(tmp_path: Path, seed: int) -> tuple[Terminal, Catalog]:
    """A small demo site (``seed``) after a pass, and the console on it at
    120x36; the catalog it browses."""
    site = write_demo(tmp_path / "demo", seed=seed, scale=0.02)
    assert asyncio.run(Archiver(load_settings(site.config)).run_pass()).status == "ok"
    catalog = load_catalog(Layout(site.archive).manifest)
    term = Terminal(
        [sys.executable, "-m", "coldkeep.tui.cli.main", "--config", str(site.config)],
        width=120,
        height=36,
    )
    return term, catalog


def test_what_is_typed_fast_lands_whole_in_the_restore_browser_filter(tmp_path: Path) -> None:
    """Keys sent in one burst (a paste, tmux send-keys, an operator typing ahead):
    r opens the browser and every key after it is the filter; from the table, /
    goes back to the filter and every key after it is the new filter."""
    term, catalog = console_after_a_pass(tmp_path, seed=3)
    try:
        term.wait_for("lock free", "last pass #1 ok")
        for keys, text in (("r", "unit:unit-0005"), ("/", "unit:unit-0004 logs/")):
            term.keys("-l", keys + text)
            total, rows, _ = search({"": catalog}, text)
            assert 0 < total < len(catalog)
            # The count and the rows together: a capture can land between the
            # count's repaint and the table's (it measures its new rows first).
            want = sorted(row.relpath for _, row in rows)
            screen = term.wait_for(f"{total} of {len(catalog)} entries match", *want)
            assert filter_field(screen) == text
            listed = re.findall(r"^ {4}(\S+) +(?:archived|stale) ", screen, re.MULTILINE)
            assert sorted(listed) == want
            term.keys("Down")  # to the table: / goes back to the filter
            term.wait_for("/ Filter")
        # /, Down and q in one burst: to the filter, back to the table, and q lands
        # in the table (and quits), never in the filter as text
        term.keys("/", "Down", "q")
        assert term.wait_gone("entries match"), "q quits from the browser's table"
    finally:
        term.close()


def test_keys_typed_in_a_burst_take_effect_in_the_order_typed(tmp_path: Path) -> None:
    """Editing keys (backspace, home, end, enter) sent in the same burst as the
    characters around them, as tmux send-keys sends them: each field ends with
    exactly what was typed, never a character lost or moved past a backspace.
    The restore browser's filter, twice, then the Events screen's SQL box."""
    term, catalog = console_after_a_pass(tmp_path, seed=1)  # unit-0003 has archived files

    def listed(text: str) -> None:
        """The filter shows ``text``, and the table what it matches."""
        total, rows, _ = search({"": catalog}, text)
        assert 0 < total < len(catalog)
        want = sorted(row.relpath for _, row in rows)
        screen = term.wait_for(f"{total} of {len(catalog)} entries match", *want)
        assert filter_field(screen) == text.rstrip()
        listed = re.findall(r"^ {4}(\S+) +(?:archived|stale) ", screen, re.MULTILINE)
        assert sorted(listed) == want

    try:
        term.wait_for("lock free", "last pass #1 ok")
        term.keys("r")
        term.wait_for("entries match")
        # The operator's report, key for key.
        term.keys("-l", "zzzzunit-0003")
        term.keys(*["BSpace"] * 20)
        term.keys("-l", "unit:unit-0003")
        listed("unit:unit-0003")
        # From the table, / selects the filter: typing replaces it; home and end
        # move between characters still arriving.
        term.keys("Down")
        term.wait_for("/ Filter")
        term.keys("-l", "/logs/zzz")
        term.keys("Home")
        term.keys("-l", "unit:unit-0004 ")
        term.keys("End", "BSpace", "BSpace", "BSpace")
        listed("unit:unit-0004 logs/")
        term.keys("Escape")
        term.wait_gone("entries match")
        # The Events screen's SQL box: a typo taken back, then enter, in one burst.
        term.keys("E")
        term.wait_for("rows (")
        term.keys("s")
        term.keys("-l", "SELECT count(*) AS kinds_n FROM eventz")
        term.keys("BSpace")
        term.keys("-l", "s WHERE kind = 'zz'")
        term.keys(*["BSpace"] * 4)
        term.keys("-l", "'ci_completed'")
        term.keys("Enter")
        term.wait_for("SQL: SELECT count(*) AS kinds_n FROM events WHERE kind = 'ci_completed'")
        term.keys("Escape")
        term.keys("q")
        assert term.wait_gone("lock free"), "q quits the console"
    finally:
        term.close()
