"""Bundles of small files packed, checked and their sources unlinked in worker
processes, so that a pass over many small files runs Python on every core. In
one process, each member's few dozen short system calls hand the GIL from
thread to thread, and such (dense) bundles go one at a time, in the pass's walk
lane (docs/performance.md, "Dense bundles" and "Against restic and borg").

Invariants:
- A worker runs the steps this process would run (``bundle.pack``,
  ``check_packed``, ``unlink_members``) on the same paths with the same checks;
  only the process differs. Which step comes next, the step events and the
  manifest's commits stay in this process.
- A worker dies with coldkeep. It is forked by multiprocessing's fork server
  (no thread of this process is copied into it), and a thread of its own waits
  on coldkeep's process (a pidfd) and kills the worker the moment coldkeep
  ends, by exit or by SIGKILL: nothing is left writing a partial or unlinking a
  source after a kill, as with one process. (The fork server and the workers
  keep each other's pipes open, so neither would notice on its own; once the
  workers are gone the server ends too.)
- Never under a rate cap (``io.bytes_per_s``: its bucket is this process's);
  not for a pass with fewer than ``FROM_MEMBERS`` small files unless
  ``io.processes`` asks (starting the workers costs a few tenths of a second).
- Cancelling is checked between a bundle's steps, in this process; a step in a
  worker runs to its end (a dense bundle's: a fraction of a second).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import select
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TypeVar

from ..base.cancel import CancelToken
from ..base.codec import Codec
from ..base.configio import IoSettings
from ..base.errors import ColdkeepError
from ..base.fsutil import Closer, FileIdentity, SourceOutcome
from ..base.lock import pid_alive
from ..base.ratelimit import UNLIMITED
from .bundle import PackedBundle, check_packed, pack, unlink_members
from .gzfile import Roots

# Dense members in a pass from which workers pay for their start (~0.3 s): a
# dense member costs ~0.5 ms in the lane, and two cores halve that.
FROM_MEMBERS = 2_000

T = TypeVar("T")


def worker_count(io: IoSettings, dense_members: int) -> int:
    """How many worker processes a pass with ``dense_members`` small files to
    bundle starts (0: none, its bundles go through the walk lane here)."""
    if io.bytes_per_s or io.processes == 1 or not dense_members:
        return 0
    if io.processes:
        return io.processes
    cores = os.cpu_count() or 1
    return cores if cores > 1 and dense_members >= FROM_MEMBERS else 0


class WorkerDied(ColdkeepError):
    """A worker process ended in the middle of a step (killed, out of memory),
    or none could be started."""


_DIED = (
    "a worker process packing bundles of small files ended in the middle of a step "
    "(killed, or out of memory?); the pass stopped with nothing lost: run it again, or "
    "set [io] processes = 1 to pack them in this process"
)


class Workers:
    """``count`` worker processes for dense bundles, for one pass."""

    def __init__(self, count: int) -> None:
        context = multiprocessing.get_context("forkserver")
        # The server imports the steps once; every worker forked from it has them.
        context.set_forkserver_preload([__name__])
        self._pool = ProcessPoolExecutor(
            count, mp_context=context, initializer=_die_with, initargs=(os.getpid(),)
        )

    async def _run(self, fn: Callable[..., T], *args: object) -> T:
        try:  # a worker is started here, the first time
            future = asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)
        except BrokenProcessPool as err:
            raise WorkerDied(_DIED) from err
        except OSError as err:  # not an error of the step: of the machine (no fork)
            raise WorkerDied(
                f"no worker process could be started to pack bundles of small files ({err}); "
                "set [io] processes = 1 to pack them in this process"
            ) from err
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            # A step in a worker runs to its end: the caller is told only once
            # nothing of it is left half-way (as a thread's step, in_thread).
            await asyncio.wait([future])
            raise
        except BrokenProcessPool as err:
            raise WorkerDied(_DIED) from err

    async def pack(
        self, partial: Path, sources: list[tuple[str, Path]], roots: Roots, codec: Codec
    ) -> PackedBundle:
        return await self._run(_pack, partial, sources, roots, codec)

    async def check(self, partial: Path, packed: PackedBundle) -> str | None:
        return await self._run(_check, partial, packed)

    async def unlink(
        self, members: list[tuple[Path, FileIdentity]], root: Path
    ) -> tuple[list[SourceOutcome], dict[Path, OSError]]:
        return await self._run(_unlink, members, root)

    async def close(self) -> None:
        """Every worker ended (a step still queued is dropped: none is, once the
        pass has awaited its bundles)."""
        await asyncio.to_thread(self._pool.shutdown, wait=True, cancel_futures=True)


def _die_with(pid: int) -> None:
    """In a worker: a thread that kills it the moment the process ``pid``
    (coldkeep's) ends."""
    threading.Thread(target=_watch, args=(pid,), name="coldkeep-watch", daemon=True).start()


def _watch(pid: int) -> None:
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:  # already gone
        fd = None
    except OSError:  # no pidfds (Linux before 5.3): asked once a second instead
        while pid_alive(pid):
            time.sleep(1)
        fd = None
    if fd is not None:
        select.select([fd], [], [])
    os.kill(os.getpid(), signal.SIGKILL)


# The steps as a worker runs them: a token and a cap of its own, never set (the
# pass checks its own token between steps; a capped pass has no workers).


def _pack(
    partial: Path, sources: list[tuple[str, Path]], roots: Roots, codec: Codec
) -> PackedBundle:
    return pack(partial, sources, roots, codec, UNLIMITED, CancelToken())


def _check(partial: Path, packed: PackedBundle) -> str | None:
    return check_packed(partial, packed, UNLIMITED, CancelToken())


def _unlink(
    members: list[tuple[Path, FileIdentity]], root: Path
) -> tuple[list[SourceOutcome], dict[Path, OSError]]:
    closer = Closer()
    try:
        return unlink_members(members, root, closer)
    finally:
        closer.finish()
