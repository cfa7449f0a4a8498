"""Driving the console headless (tests, screenshots, benchmarks): wait until it has
settled, rather than sleeping and hoping."""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import Any, Protocol, runtime_checkable

from textual.app import App
from textual.pilot import Pilot
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable
from textual.worker import Worker


@runtime_checkable
class Settling(Protocol):
    """A console app that says what it is still doing (the main console, the
    fleet view)."""

    def busy_workers(self) -> list[Worker[Any]]:
        """Workers still doing something (not one waiting for the operator)."""
        ...

    def flush_panes(self) -> None:
        """Draw now whatever waits for the next frame."""
        ...


def busy(app: App[Any], long_lived: Collection[str] = ()) -> list[Worker[Any]]:
    """``app``'s workers still doing something: not those of the ``long_lived``
    groups (they last as long as the app), nor a confirmation (group
    ``confirm``) waiting for the operator's answer."""
    asking = isinstance(app.screen, ModalScreen)
    return [
        w
        for w in app.workers
        if w.group not in long_lived and not (asking and w.group == "confirm") and not w.is_finished
    ]


async def settle(pilot: Pilot[Any], *, rounds: int = 500) -> None:
    """Return once every short-lived worker has finished, its messages are
    handled and the panes have drawn them (a confirmation waiting for a key
    counts as settled)."""
    app = pilot.app
    assert isinstance(app, Settling)
    quiet = 0
    for _ in range(rounds):
        await pilot.pause()
        busy = app.busy_workers()
        if busy:
            quiet = 0
            waits = [asyncio.ensure_future(w.wait()) for w in busy]
            done, _ = await asyncio.wait(waits, timeout=1)
            for task in done:
                task.exception()  # a worker's failure shows in the app, not in asyncio's log
        else:
            quiet += 1
            if quiet >= 3:
                # Panes draw what they were told on a frame timer: a frame not
                # yet due is drawn now, or a snapshot taken on a busy machine
                # (the timer late) showed a pane one frame behind.
                app.flush_panes()
                # And every screen that shows laid out and drawn again from what
                # it holds now: a screen behind a dialog keeps what it drew
                # before until its own timer says otherwise (CI caught the help
                # dialog's background with its backlog table half drawn).
                for screen in app.screen_stack:
                    if screen.is_current:
                        screen.refresh(layout=True)
                await _tables_measured(pilot)
                return
    raise TimeoutError(f"the console did not settle: {app.busy_workers()}")


def _measuring(app: App[Any]) -> list[DataTable[Any]]:
    """Tables whose new rows or cells are not measured yet: a DataTable sizes its
    columns when its own message queue next runs empty (its Idle handler), and a
    busy machine took a snapshot before that, columns cut at their headers'
    widths (the flake hunt's main-screen snapshot). Every screen on the stack:
    the main screen's tables show, dimmed, behind a dialog or help, and a frame
    flushed after the dialog opened left them cut at 120x36 (CI's help and ship
    confirmation snapshots)."""
    return [
        t
        for screen in app.screen_stack
        for t in screen.query(DataTable)
        # Textual's own pending-work flags: it offers no public "measured" state.
        if t._require_update_dimensions or t._updated_cells
    ]


def _due(app: App[Any]) -> list[Screen[Any]]:
    """Screens behind the top one with a repaint scheduled. A table measured under
    a dialog marks its screen for layout, and the screen lays out on its own update
    timer, a frame later, before the dialog's screen redraws what shows through: a
    snapshot taken in between showed the table behind the ship confirmation with
    its old, cut column (CI, 1 run in 6). ``Pilot.pause`` runs that update for the
    top screen only."""
    # Textual's own pending-work state, as in _measuring: the timer is resumed
    # when a repaint is due and paused by the update itself.
    return [s for s in app._background_screens if s._update_timer._active.is_set()]


async def _tables_measured(pilot: Pilot[Any], rounds: int = 200) -> None:
    app = pilot.app
    for _ in range(rounds):
        await pilot.pause()
        due = _due(app)
        for screen in due:
            screen._on_timer_update()  # what its timer does on its next frame
        if not due and not _measuring(app):
            return
    raise TimeoutError(f"tables never measured or drawn: {_measuring(app)} {_due(app)}")


async def press(pilot: Pilot[Any], *keys: str) -> None:
    """Press each key and let the console settle after it."""
    for key in keys:
        await pilot.press(key)
        await settle(pilot)
