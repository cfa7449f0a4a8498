"""The daemon's native heap, kept from creeping over months of jobs.

A long-running ``coldkeep run`` does not grow in Python objects (its heap stays
flat); it grows in what glibc's malloc keeps. Each thread that finds the heap
busy gets an arena of its own (up to eight per core), and what a job's threads
freed there (aiosqlite's connection threads, the thread pool's reads, hashes
and gzip buffers, SQLite's page caches) stays with the arena, in pieces,
instead of going back to the system: tens of MB an hour. Two arenas, large
blocks always mapped on their own, and a trim after each job, hand it back.

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
M_MMAP_THRESHOLD = -3
ARENAS = 2
# glibc's own starting value, fixed: left to itself glibc raises it to the
# largest block freed so far (up to 32 MiB), after which every 1 MiB read or
# gzip buffer is carved out of an arena and, freed, leaves a hole there that
# only a later block of the same size can use (the soak's daemon grew ~15 MB an
# hour so). Fixed, each block this large is mapped on its own and unmapped the
# moment it is freed.
MMAP_THRESHOLD = 128 * 1024


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
    its threads), and every block of ``MMAP_THRESHOLD`` or more mapped on its
    own; whether the C library took both."""
    if _LIBC is None:
        return False
    return bool(_LIBC.mallopt(M_ARENA_MAX, ARENAS)) and bool(
        _LIBC.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    )


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
