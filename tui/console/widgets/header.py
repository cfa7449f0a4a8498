"""The console's top two lines. The status line: what needs the operator first
(verify failures, who holds the lock, an operation watched, read-only), then
what runs here or how the last pass ended, the mode and the two roots; at 80
columns its end is cut, so the order is the point. The action bar: a button per
action offered (from the registry, kit/actions.py), those that fit its width (as the
footer's keys: Quit and Stop always, footer.py); a press runs the action."""

from __future__ import annotations

import os
from pathlib import Path

from rich.cells import cell_len
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.events import Resize
from textual.widgets import Button, Static

from coldkeep.core.base.config import Settings
from coldkeep.core.base.lock import Holder
from coldkeep.core.ops.status import Status

from ...operations.spec import ConsoleAction
from ...text.fmt import age
from .footer import fit


def lock_words(holder: Holder | None, alive: bool) -> tuple[str, str | None]:
    """The lock as the status line says it, and who holds it when that is
    another live process (None: this console, or nobody)."""
    if holder is None or not alive:
        return "lock free", None
    if holder.pid == os.getpid():
        return "lock: this console", None
    return f"LOCKED by pid {holder.pid} ({holder.command})", holder.describe()


class StatusLine(Static):
    def show(
        self,
        settings: Settings,
        base: Path,
        *,
        status: Status | None,
        lock: str,
        watching: bool,
        read_only: bool,
        running: str | None,
        now_ms: int,
    ) -> None:
        """``base``: the folder the roots are shown relative to (the config's)."""

        def short(p: Path) -> str:
            return str(p.relative_to(base)) + "/" if p.is_relative_to(base) else str(p)

        parts = []
        if status and status.verify_failures:
            parts.append(f"VERIFY FAILED {status.verify_failures}")
        if status and status.remote and status.remote.totals.verify_failed:
            parts.append(f"REMOTE VERIFY FAILED {status.remote.totals.verify_failed}")
        parts.append(lock)
        if watching:
            parts.append("attached: x stops it")
        if read_only:
            parts.append("READ-ONLY")
        if running:
            parts.append(f"running: {running}")
        elif status and status.last_passes:
            p = status.last_passes[0]
            ago = age((now_ms - (p.finished_at or p.started_at)) / 1000)
            parts.append(f"last pass #{p.id} {p.status} {ago} ago")
        parts += [
            f"mode {settings.mode}",
            f"{short(settings.live_root)} → {short(settings.archive_root)}",
        ]
        self.update(" · ".join(parts))


class ActionBar(Horizontal):
    def __init__(self, actions: list[ConsoleAction], *, id: str) -> None:
        super().__init__(id=id)
        self.actions = actions

    def compose(self) -> ComposeResult:
        for a in self.actions:
            yield Button(a.label, id=f"do-{a.name}", classes="action")

    def on_resize(self, event: Resize) -> None:
        # A button is its label padded by a space each side, then a space.
        shown = fit([(a.name, cell_len(a.label) + 3) for a in self.actions], event.size.width)
        for a in self.actions:
            self.query_one(f"#do-{a.name}").display = a.name in shown

    @on(Button.Pressed, ".action")
    async def _pressed(self, event: Button.Pressed) -> None:
        await self.app.run_action((event.button.id or "").removeprefix("do-"))
