"""The daemon's native heap, kept from creeping over months of jobs.

A long-running ``coldkeep run`` does not grow in Python objects (its heap stays
flat); it grows in what glibc's malloc keeps. Each thread that finds the heap
busy gets an arena of its own (up to eight per core), and what a job's threads
freed there (aiosqlite's connection threads, the thread pool's reads, hashes
and gzip buffers, SQLite's page caches) stays with the arena, in pieces,
instead of going back to the system: tens of MB an hour. Two arenas, and a
trim after each job, hand it back.

Invariant: only glibc is asked (``mallopt``, ``malloc_trim``); on another C
library nothing is done and nothing fails.
"""

from __future__ import annotations

import asyncio
import ctypes
from typing import Any

from ..base.cancel import CancelToken
from .jobs import JobHandler, Outcome

M_ARENA_MAX = -8  # glibc's malloc.h
ARENAS = 2


def _glibc() -> Any | None:
    try:
        libc = ctypes.CDLL(None)  # this process's own symbols: its C library is loaded
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _glibc()


def limit_arenas() -> bool:
    """At most ``ARENAS`` malloc arenas from now on (before the daemon starts
    its threads); whether the C library took it."""
    return _LIBC is not None and bool(_LIBC.mallopt(M_ARENA_MAX, ARENAS))


def trim() -> bool:
    """The free pages of every arena handed back to the system; whether any
    were."""
    return _LIBC is not None and bool(_LIBC.malloc_trim(0))


def trimmed(job: JobHandler) -> JobHandler:
    """``job``, the heap trimmed after each run (in a thread: a trim walks
    every arena)."""

    async def run(token: CancelToken) -> Outcome:
        try:
            return await job(token)
        finally:
            await asyncio.to_thread(trim)

    return run
