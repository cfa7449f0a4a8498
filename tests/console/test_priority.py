"""The console's frames win the CPU over its own background work."""

from __future__ import annotations

import asyncio
import os
import sys
import threading

import pytest

from coldkeep.core.base.config import Settings
from coldkeep.tui.console.kit.priority import BACKGROUND_NICE

from consolekit import make_app, settle


def nice_of_this_thread() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")
async def test_work_in_threads_runs_at_a_lower_priority_than_the_console(
    settings: Settings,
) -> None:
    app = make_app(settings)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        console = nice_of_this_thread()
        background = await asyncio.to_thread(nice_of_this_thread)
        assert background == min(19, console + BACKGROUND_NICE)
        assert nice_of_this_thread() == console, "the console's own thread is untouched"
