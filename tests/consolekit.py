"""Driving the console in tests: the app on a pinned clock, a confirmed pass, and
waiting for the console to settle (not sleeps). Console tests import these; the
``settings`` fixture lives in tests/console/conftest.py."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

import textual._wait
from textual.app import App, SystemCommand
from textual.pilot import Pilot
from textual.screen import Screen

from coldkeep.core.base.config import Settings
from coldkeep.tui.console.app import ColdkeepApp
from coldkeep.tui.console.kit.pilot import settle

__all__ = [
    "NOW_MS",
    "archive_all",
    "current_screen",
    "make_app",
    "notices",
    "press_to",
    "settle",
    "until",
    "watching",
]

# 2026-11-01 12:00 UTC: the demo's files and rows are aged against this, and the
# console shows times in UTC.
NOW_MS = 1_793_534_400_000
os.environ["TZ"] = "UTC"
time.tzset()

# Textual's pilot waits for "idle" after every key and pause by sleeping 20 ms at
# a time until the process's CPU time stops advancing; the console's own threads
# (a pass's compression, aiosqlite) keep it advancing, and a pause took up to its
# 1 s cap. settle() waits on what the console says it is doing, not on the CPU:
# 2 ms slices cut the console tests' time nearly in half and leave their answers the
# same (the flake hunt runs them at both paces).
textual._wait.SLEEP_GRANULARITY = float(os.environ.get("COLDKEEP_TEST_IDLE_S", "0.002"))


class PinnedApp(ColdkeepApp):
    """The console with its toasts kept until dismissed: one shown for 5 s of wall
    time was in a snapshot or not as the machine was fast or loaded (the pager's
    and a file's versions' snapshots, after a pass)."""

    NOTIFICATION_TIMEOUT = 24 * 3600


def make_app(settings: Settings, *, read_only: bool = False) -> ColdkeepApp:
    return PinnedApp(settings, clock=lambda: NOW_MS, watch_live=False, read_only=read_only)


def current_screen(app: ColdkeepApp) -> Screen[Any]:
    """The screen on top now. Read through a call, so that a type checker does not
    carry an earlier ``isinstance`` of ``app.screen`` past the keys pressed since."""
    return app.screen


S = TypeVar("S", bound=Screen[Any])


async def press_to(app: ColdkeepApp, pilot: Pilot[None], kind: type[S], *keys: str) -> S:
    """Press ``keys``, let the console settle, and return the screen now on top,
    which must be a ``kind``."""
    await pilot.press(*keys)
    await settle(pilot)
    screen = current_screen(app)
    assert isinstance(screen, kind), f"{keys} opened {type(screen).__name__}, not {kind.__name__}"
    return screen


async def until(
    pilot: Pilot[Any], done: Callable[[], bool], what: str | Callable[[], str], timeout: float = 60
) -> None:
    """Pause until ``done()`` holds, failing with ``what`` (or what it returns
    then) once ``timeout`` s of wall time have gone by. Bounded by time, not by a
    count of pauses: a pause is 2 ms when the console idles, so 2,000 of them are
    a few seconds, less than a loaded machine may take to get there (and a loop
    that ran out went on as if it had)."""
    deadline = time.monotonic() + timeout
    await pilot.pause()  # what was just pushed or pressed, handled first
    while not done():
        if time.monotonic() > deadline:
            said = what if isinstance(what, str) else what()
            raise AssertionError(f"not within {timeout:.0f} s: {said}")
        await pilot.pause()


def watching(app: ColdkeepApp) -> bool:
    """Attached to another process's operation, now (read through a call for the
    same reason)."""
    return app.attached is not None


async def archive_all(app: ColdkeepApp, pilot: Pilot[None]) -> None:
    """A pass as the operator runs it: asked for, its plan confirmed, finished."""
    await settle(pilot)
    await app.run_action("run_pass")
    await settle(pilot)
    await pilot.press("y")
    await settle(pilot)


def notices(app: App[Any]) -> list[str]:
    """What ``app`` tells the operator in a notice from now on ("title: text"),
    kept (the toasts themselves time out)."""
    said: list[str] = []
    notify = app.notify

    def recording(message: str, *, title: str = "", **options: Any) -> None:
        said.append(f"{title}: {message}" if title else message)
        notify(message, title=title, **options)

    setattr(app, "notify", recording)  # noqa: B010 - an instance's method, wrapped
    return said


def the_one_quit(app: App[Any]) -> SystemCommand:
    """The palette's Quit, once every title is checked to be there once."""
    commands = list(app.get_system_commands(app.screen))
    titles = [c.title for c in commands]
    assert len(titles) == len(set(titles)), titles
    [found] = [c for c in commands if c.title == "Quit"]
    return found
