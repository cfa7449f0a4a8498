"""The fleet view's app: one screen (view.py), the main console's look (its
stylesheet: dialogs, help) with the fleet's own layout, and the fleet's registry
(actions.py) in the palette. It opens the fleet over the remote and closes it
on the way out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from textual.app import App, SystemCommand
from textual.screen import Screen
from textual.worker import Worker

from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.files.catalog import close_all
from coldkeep.core.ops.fleet import DEFAULT_RULES, Fleet
from coldkeep.core.ops.health import HealthRules
from coldkeep.core.remote.sealing import Identities

from ..kit.actions import palette
from ..kit.pilot import busy
from .actions import FLEET_ACTIONS
from .view import FleetScreen


class FleetApp(App[None]):
    """The fleet view's app: the main console's look (its stylesheet: dialogs,
    help), one screen, the fleet's registry in the palette."""

    CSS_PATH = Path(__file__).parents[1] / "app.tcss"  # the main console's
    CSS = """
    #fleet-sites { height: auto; max-height: 45%; min-height: 4; scrollbar-size-horizontal: 0; }
    #fleet-count, #fleet-preview { height: auto; padding: 0 1; }
    #fleet-table { height: 1fr; min-height: 4; }
    #fleet-controls { height: 3; }
    #fleet-to { width: 1fr; }
    #fleet-results { height: auto; max-height: 7; }
    """
    TITLE = "coldkeep fleet"

    def __init__(
        self,
        remote: RemoteSettings,
        cache: Path,
        identities: Identities | None = None,
        rules: HealthRules = DEFAULT_RULES,
    ) -> None:
        super().__init__()
        self.fleet = Fleet(remote, cache, identities, rules)
        self.view = FleetScreen(self.fleet)

    def get_default_screen(self) -> Screen[Any]:
        return self.view

    async def on_unmount(self) -> None:
        # Each catalog's connection (kept for the filters), in a thread: a
        # filter still running holds its catalog until it lets go.
        await asyncio.to_thread(close_all, list(self.view.catalogs.values()))
        await self.fleet.close()

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        return palette(super().get_system_commands(screen), FLEET_ACTIONS, self.view.run_action)

    def busy_workers(self) -> list[Worker[Any]]:
        return busy(self)

    def flush_panes(self) -> None:
        """Nothing waits for a frame here: every handler draws what it is told."""
