"""The console's own actions (actions.py's ``_OWN`` but ``run_job``, which runs
as an operation does): the screens they open over the main one (restore browser,
find, holds, Events, Trends, help), the recount, and stop, refresh and quit.

Each ``action_*`` here is a method of ``ColdkeepApp``, bound there by name
(``action_plan = own.action_plan``): Textual finds it on the App as it would a
method written there, and the bindings, the buttons and the palette reach it by
the same name. So each takes the app as its ``self`` would be, and uses the
app's helpers (``refuse``, ``shown_from``) as its own methods do. The two
workers (``open_holds``, ``confirm_quit``) run on the app under the names and
groups they had as its methods.

None of them changes the archive itself: what changes it from a screen they
open (a restore, a hold, restored rows) is refused there, for the reason handed
to the screen as it opens (``why_unchangeable``; the Holds screen's, read-only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import work

from coldkeep.core.store.manifest import ManifestError

from .kit.actions import ACTIONS, quit_question
from .kit.actions import BY_NAME as ACTION
from .panes import OrphansPane
from .screens import ConfirmScreen, HelpScreen, HoldsScreen, KeyedScreen, RestoreScreen

if TYPE_CHECKING:
    from .app import ColdkeepApp


def browser(app: ColdkeepApp) -> RestoreScreen | None:
    """The restore browser, while it is open."""
    return next((s for s in app.screen_stack if isinstance(s, RestoreScreen)), None)


def action_plan(app: ColdkeepApp) -> None:
    app.recount()
    app.query_one(OrphansPane).load(app.archiver)
    app.notify("recounting the backlog")


async def action_restore(app: ColdkeepApp) -> None:
    if app.refuse("restore"):
        return
    settings, blocked = app.archiver.settings, app.why_unchangeable()
    # Awaited (r is acted on as it is read): no key is routed until the browser
    # is mounted with its filter focused, so what is typed after r lands there.
    await app.push_screen(
        RestoreScreen(
            settings,
            base=app.shown_from(),
            read_only=app.read_only,
            blocked=blocked,
            identities=app.archiver.sessions.identities,
        )
    )


async def action_find(app: ColdkeepApp) -> None:
    """The find box, opened over the restore browser (its picks select a file
    there, or open its versions or the pager)."""
    if app.refuse("find"):
        return
    await action_restore(app)
    if (restore := browser(app)) is not None:
        await restore.action_find()


def action_holds(app: ColdkeepApp) -> None:
    open_holds(app)


@work(exclusive=True, group="holds", exit_on_error=False)
async def open_holds(app: ColdkeepApp) -> None:
    try:
        holds = await app.archiver.holds()
    except (ManifestError, OSError) as err:
        app.notify(str(err), title="holds", severity="error", markup=False)
        return
    blocked = "the console is read-only (--read-only)" if app.read_only else None
    app.push_screen(HoldsScreen(app.archiver, holds, blocked=blocked))


async def action_events(app: ColdkeepApp) -> None:
    if app.refuse("events"):
        return
    # Imported when first opened: the charts' plotext costs the console's
    # start half a second.
    from .screens.events import EventsScreen  # noqa: PLC0415

    now_s = app.clock() // 1000
    await app.push_screen(EventsScreen(app.archiver, now_s=now_s, blocked=app.why_unchangeable()))


async def action_trends(app: ColdkeepApp) -> None:
    from .screens.trends import TrendsScreen  # noqa: PLC0415 - as the Events screen

    await app.push_screen(TrendsScreen(app.archiver))


async def action_stop(app: ColdkeepApp) -> None:
    if app.attached is not None and app.running is None:
        await app.attached.request("stop")
        pid = app.attached.hello.get("pid")
        app.log_line("warning", f"asked pid {pid} to stop at its next safe point")
        app.notify(f"asked pid {pid} to stop at its next safe point")
        return
    if app.cancel_token is None or app.running is None:
        app.notify("nothing is running")
        return
    app.cancel_token.cancel("stopped from the console")
    app.log_line("warning", f"stopping {app.running} at its next safe point")


def action_refresh(app: ColdkeepApp) -> None:
    app.refresh_all()
    app.poll_holder()


def action_help(app: ColdkeepApp) -> None:
    """The keys of the screen on top: a screen over the main one lists its own
    (and help and quit, which still act there), the main screen every action."""
    if isinstance(screen := app.screen, KeyedScreen):
        app.push_screen(screen.help_screen(ACTION["help"], ACTION["quit"]))
        return
    app.push_screen(HelpScreen({a.name: w for a in ACTIONS if (w := app.unavailable(a.name))}))


async def action_quit(app: ColdkeepApp) -> None:
    if app.running is None:
        app.exit()
        return
    confirm_quit(app)


@work(exclusive=True, group="confirm", exit_on_error=False)
async def confirm_quit(app: ColdkeepApp) -> None:
    if not await app.push_screen_wait(ConfirmScreen.asking(quit_question(app.running))):
        return
    if app.cancel_token is not None:
        app.cancel_token.cancel("the console is quitting")
    for worker in app.workers:
        if worker.group == "operation":
            await worker.wait()
    app.exit()
