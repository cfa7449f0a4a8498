"""Calls that arrive while a commit is in flight go into the next commit together:
one transaction and one fsync for whatever finished at the same time (the files a
pass's workers archive, the restore intents its workers record and clear).

Invariants: each caller returns once its own item is committed (durable), with
that item's result, or raises the commit's error; a caller cancelled while
waiting leaves the others' commit alone; a commit holds every item sent before
it began and none sent after, and they are committed in the order sent. If the
committing task is cancelled (the loop closing), everyone still waiting is
cancelled too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Grouped(Generic[T, R]):
    """``submit`` an item, wait until ``commit`` (given every item waiting, in
    order, and answering with one result each) has made it durable."""

    def __init__(self, commit: Callable[[list[T]], Awaitable[Sequence[R]]]) -> None:
        self._commit = commit
        self._waiting: list[tuple[T, asyncio.Future[R]]] = []
        self._task: asyncio.Task[None] | None = None

    async def submit(self, item: T) -> R:
        waiter: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, waiter))
        if self._task is None:
            self._task = asyncio.create_task(self._run())
        return await waiter

    async def _run(self) -> None:
        batch: list[tuple[T, asyncio.Future[R]]] = []
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                try:
                    results = await self._commit([item for item, _ in batch])
                except Exception as err:  # noqa: BLE001 - relayed to every caller, who handle it
                    for _, waiter in batch:
                        if not waiter.done():
                            waiter.set_exception(err)
                    continue
                for (_, waiter), result in zip(batch, results, strict=True):
                    if not waiter.done():  # its caller may have been cancelled
                        waiter.set_result(result)
        finally:
            # Cancelled (the loop is closing): nobody is left waiting.
            for _, waiter in batch + self._waiting:
                waiter.cancel()
            self._waiting = []
            self._task = None
