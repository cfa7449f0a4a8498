"""The console's own actions (kit/actions.py's ``_OWN`` but ``run_job``, which
runs as an operation does): the screens they open over the main one (restore
browser, find, holds, Events, Trends, help), the recount, and stop, refresh and
quit.

``OwnActions`` holds them as methods over the console's state (state.py), all
they use; the app (app.py) is an ``OwnActions``, where Textual finds each
``action_*`` by name for the bindings, the buttons and the palette alike. The
two workers (``open_holds``, ``confirm_quit``) run on the app under the names
and groups they always had.

None of them changes the archive itself: what changes it from a screen they
open (a restore, a hold, restored rows) is refused there, for the reason handed
to the screen as it opens (``why_unchangeable``; the Holds screen's, read-only).
"""

from __future__ import annotations

from textual import work

from coldkeep.core.store.connection import ManifestError

from .kit.actions import ACTIONS, quit_question
from .kit.actions import BY_NAME as ACTION
from .panes import OrphansPane
from .screens import ConfirmScreen, HelpScreen, HoldsScreen, KeyedScreen, RestoreScreen
from .state import ConsoleState


class OwnActions(ConsoleState):
    """The console's own actions, over its state."""

    def action_plan(self) -> None:
        self.recount()
        self.query_one(OrphansPane).load(self.archiver)
        self.notify("recounting the backlog")

    async def action_restore(self) -> None:
        if self.refuse("restore"):
            return
        settings, blocked = self.archiver.settings, self.why_unchangeable()
        # Awaited (r is acted on as it is read): no key is routed until the browser
        # is mounted with its filter focused, so what is typed after r lands there.
        await self.push_screen(
            RestoreScreen(
                settings,
                base=self.shown_from(),
                read_only=self.read_only,
                blocked=blocked,
                identities=self.archiver.sessions.identities,
            )
        )

    async def action_find(self) -> None:
        """The find box, opened over the restore browser (its picks select a file
        there, or open its versions or the pager)."""
        if self.refuse("find"):
            return
        await self.action_restore()
        if (restore := self.browser()) is not None:
            await restore.action_find()

    def action_holds(self) -> None:
        self.open_holds()

    @work(exclusive=True, group="holds", exit_on_error=False)
    async def open_holds(self) -> None:
        try:
            holds = await self.archiver.holds()
        except (ManifestError, OSError) as err:
            self.notify(str(err), title="holds", severity="error", markup=False)
            return
        blocked = "the console is read-only (--read-only)" if self.read_only else None
        self.push_screen(HoldsScreen(self.archiver, holds, blocked=blocked))

    async def action_events(self) -> None:
        if self.refuse("events"):
            return
        # Imported when first opened: the charts' plotext costs the console's
        # start half a second.
        from .screens.events import EventsScreen  # noqa: PLC0415

        now_s = self.clock() // 1000
        await self.push_screen(
            EventsScreen(self.archiver, now_s=now_s, blocked=self.why_unchangeable())
        )

    async def action_trends(self) -> None:
        from .screens.trends import TrendsScreen  # noqa: PLC0415 - as the Events screen

        await self.push_screen(TrendsScreen(self.archiver))

    async def action_stop(self) -> None:
        if self.attached is not None and self.running is None:
            await self.attached.request("stop")
            pid = self.attached.hello.get("pid")
            self.log_line("warning", f"asked pid {pid} to stop at its next safe point")
            self.notify(f"asked pid {pid} to stop at its next safe point")
            return
        if self.cancel_token is None or self.running is None:
            self.notify("nothing is running")
            return
        self.cancel_token.cancel("stopped from the console")
        self.log_line("warning", f"stopping {self.running} at its next safe point")

    def action_refresh(self) -> None:
        self.refresh_all()
        self.poll_holder()

    def action_help(self) -> None:
        """The keys of the screen on top: a screen over the main one lists its own
        (and help and quit, which still act there), the main screen every action."""
        if isinstance(screen := self.screen, KeyedScreen):
            self.push_screen(screen.help_screen(ACTION["help"], ACTION["quit"]))
            return
        self.push_screen(
            HelpScreen({a.name: w for a in ACTIONS if (w := self.unavailable(a.name))})
        )

    async def action_quit(self) -> None:
        if self.running is None:
            self.exit()
            return
        self.confirm_quit()

    @work(exclusive=True, group="confirm", exit_on_error=False)
    async def confirm_quit(self) -> None:
        if not await self.push_screen_wait(ConfirmScreen.asking(quit_question(self.running))):
            return
        if self.cancel_token is not None:
            self.cancel_token.cancel("the console is quitting")
        for worker in self.workers:
            if worker.group == "operation":
                await worker.wait()
        self.exit()
