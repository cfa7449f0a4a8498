"""``in_thread``: a cancelled await trips the token, waits for the thread, and
takes the thread's way out (``Cancelled``, or an error it stopped on, such as the
closed output a pager left) as the expected end it is: asyncio never reports it
as an exception nobody retrieved."""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Callable
from typing import Any

import pytest

from coldkeep.core.base.cancel import CancelToken, in_thread


def _sleeps(token: CancelToken, started: threading.Event) -> None:
    started.set()
    token.sleep(30)  # raises Cancelled once the token trips


def _output_closed(token: CancelToken, started: threading.Event) -> None:
    started.set()
    while not token.cancelled:
        threading.Event().wait(0.01)
    raise BrokenPipeError("the reader left")


@pytest.mark.parametrize("fn", [_sleeps, _output_closed])
async def test_a_cancelled_await_leaves_no_unretrieved_thread_error(
    fn: Callable[[CancelToken, threading.Event], None],
) -> None:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    token, started = CancelToken(), threading.Event()
    task = asyncio.ensure_future(in_thread(token, fn, token, started))
    await asyncio.to_thread(started.wait)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert token.cancelled
    del task
    gc.collect()
    await asyncio.sleep(0)
    assert [c.get("message") for c in reported] == []
