"""Time, injectable: the scheduler asks a ``Clock`` what time it is and to sleep,
so its tests move time by hand instead of waiting for it.

``SystemClock`` is the real one. ``ManualClock`` stands still until ``advance``
moves it; sleepers wake in deadline order (those due at the same instant
together), each instant given its turn on the loop, so a test can step a
scheduler through a day in milliseconds.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class ManualClock:
    def __init__(self, start: float) -> None:
        self._now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._seq), fut))
        await fut

    async def advance(self, seconds: float) -> None:
        """Move time forward, waking every sleeper whose deadline passes, in order,
        and letting the loop run what each one starts."""
        end = self._now + seconds
        await _settle()
        while self._sleepers and self._sleepers[0][0] <= end:
            deadline = self._sleepers[0][0]
            self._now = max(self._now, deadline)
            # Everyone due at this instant wakes in the same instant.
            while self._sleepers and self._sleepers[0][0] == deadline:
                fut = heapq.heappop(self._sleepers)[2]
                if not fut.done():
                    fut.set_result(None)
            await _settle()
        self._now = end
        await _settle()


async def _settle(rounds: int = 20) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)
