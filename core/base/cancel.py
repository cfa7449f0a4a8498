"""Graceful cancellation: one token, checked at safe points on the loop and in threads.

A long step (compressing a 2 GiB file) runs in a thread the loop cannot interrupt;
it checks the token between chunks and stops by raising ``Cancelled`` after
cleaning up what it wrote. ``in_thread`` ties the two worlds together: when the
awaiting task is cancelled it trips the token and still waits for the thread to
finish, so no thread keeps writing behind the caller's back.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from .errors import ColdkeepError

P = ParamSpec("P")
T = TypeVar("T")


class Cancelled(ColdkeepError):
    """Work stopped at a safe point because it was asked to."""


class CancelToken:
    """Set once, seen everywhere: thread-safe."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._guard = threading.Lock()
        self._waiters: list[Callable[[], None]] = []
        self.reason = ""

    def cancel(self, reason: str = "cancelled") -> None:
        with self._guard:
            if self._event.is_set():
                return
            self.reason = reason
            self._event.set()
            waiters, self._waiters = self._waiters, []
        for wake in waiters:
            wake()

    async def wait(self) -> None:
        """Return once cancellation is asked for (from any thread)."""
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()

        def settle() -> None:
            if not woken.done():
                woken.set_result(None)

        def wake() -> None:
            loop.call_soon_threadsafe(settle)

        with self._guard:
            if self._event.is_set():
                return
            self._waiters.append(wake)
        try:
            await woken
        finally:
            with self._guard:
                if wake in self._waiters:
                    self._waiters.remove(wake)

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        """Raise ``Cancelled`` if cancellation was asked for."""
        if self._event.is_set():
            raise Cancelled(self.reason)

    def sleep(self, seconds: float) -> None:
        """Block this (worker) thread, waking early on cancellation."""
        if self._event.wait(seconds):
            raise Cancelled(self.reason)


async def in_thread(
    token: CancelToken, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
) -> T:
    """Run ``fn`` in the default executor; a cancelled await trips ``token`` and
    waits for the thread to stop before re-raising (what the thread raised on
    its way out is dropped: the caller was cancelled)."""
    loop = asyncio.get_running_loop()
    fut = loop.run_in_executor(None, functools.partial(fn, *args, **kwargs))
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        token.cancel("the caller was cancelled")
        await asyncio.wait([fut])
        if not fut.cancelled():
            # The thread's way out (Cancelled, or an error it stopped on: an
            # output its reader closed) is the expected end of a cancelled call:
            # read here, or asyncio logs it as an exception nobody retrieved.
            fut.exception()
        raise
