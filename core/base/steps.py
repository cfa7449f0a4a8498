"""The step hook: every step of the protocol announces itself, by name, once it is
done and durable.

The console's in-flight pane listens to it; the crash tests kill the process from
inside it, so "a kill at step X" means "X completed, nothing after it did".
A hook is an async callable; it may be slow (a test may block in it) and the
protocol waits for it before taking the next step. Steps taken on a worker thread
reach the hook through ``thread_step``: the thread waits for it on the event loop,
unless the hook only records (``Recorder``, the console's feed when no test
listens), which is posted to the loop and never waited for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any, Literal, get_args

StepName = Literal[
    # archiving one file (gzfile.archive_file, then filemove)
    "partial_written",  # <dest>.partial holds the gzip, fsynced
    "verified",  # the partial decompresses to exactly the bytes read
    "renamed",  # the gzip is in place and its directory fsynced
    "entry_committed",  # the manifest entry is committed
    "source_set_aside",  # the checked source is renamed aside in its directory
    "source_unlinked",  # the live source is gone (its identity checked first)
    # restoring one file (gzfile.restore_file, wrapped by a restore intent)
    "intent_recorded",  # the restore intent is committed
    "restore_partial_written",  # <target>.restore-partial holds the bytes, fsynced
    "restored",  # the file is at its target, directory fsynced
    "intent_cleared",  # the restore intent is gone
    # moving one batch of event rows (dbmove)
    "batch_archived",  # the batch is committed in its month DBs
    "batch_deleted",  # the batch is deleted from live (or left there: locked)
    # archiving a bundle of small files (files/bundlemove)
    "bundle_written",  # <bundle>.partial holds every member and the index, fsynced
    "bundle_verified",  # every member decompresses to exactly the bytes read
    "bundle_placed",  # the bundle is in place and its directory fsynced
    "bundle_committed",  # every member's entry is committed, in one transaction
    "bundle_sources_unlinked",  # the unchanged sources are gone, their directories fsynced
    # shipping one object to the remote tier (ship.py)
    "object_uploaded",  # the object is at its key (sent, or found there)
    "object_recorded",  # its size and sha256 read back matched; its row is committed
    "snapshot_uploaded",  # a manifest snapshot is at its key, its signed statement not yet
    "manifest_shipped",  # the snapshot and its statement read back whole, recorded as shipped
    "local_drop_recorded",  # a shipped file's local drop is committed
    "local_dropped",  # its local copy is unlinked, the directory fsynced, confirmed
    # expiring one archive file or event month past its retention (expire.py)
    "expire_recorded",  # its entries are tombstones ('expired'), its path in expiring
    "expire_remote_deleted",  # its remote copies are deleted and their rows gone
    "expire_local_deleted",  # its local file is unlinked, the directory fsynced, settled
    # settling a copy no row records (remote/place.py: one a rekey replaced, an
    # upload never read back), written down in remote_loose before
    "loose_unheld",  # its S3 legal hold is lifted, and remote_loose says so
    "loose_kept",  # the bucket's lock keeps it: remote_loose has the lock the bucket said
    "loose_deleted",  # every version of it is deleted, and its key gone from remote_loose
    # after a ship's manifest snapshot: event month snapshots that neither of the
    # site's two newest manifest snapshots names, then settled as above
    "months_superseded",  # their rows are gone and their keys in remote_loose (one transaction)
    # asking for a thaw of one cold object (remote/thaw.py)
    "thaw_recorded",  # its request is committed in thaws as asking, not yet sent
    "thaw_asked",  # S3 answered it, and thaws says how
    # an event month's Parquet in the fleet's lake (remote/shiplake.py)
    "lake_uploaded",  # the Parquet is at its new key, not yet recorded
    "lake_recorded",  # read back whole; its row committed, the month's older ones superseded
    "lake_deleted",  # a superseded one is deleted, its row forgotten
]
STEP_NAMES: tuple[StepName, ...] = get_args(StepName)
ARCHIVE_STEPS: tuple[StepName, ...] = STEP_NAMES[:6]
RESTORE_STEPS: tuple[StepName, ...] = STEP_NAMES[6:10]
BATCH_STEPS: tuple[StepName, ...] = STEP_NAMES[10:12]
BUNDLE_STEPS: tuple[StepName, ...] = STEP_NAMES[12:17]
SHIP_STEPS: tuple[StepName, ...] = STEP_NAMES[17:23]
EXPIRE_STEPS: tuple[StepName, ...] = STEP_NAMES[23:26]
LOOSE_STEPS: tuple[StepName, ...] = STEP_NAMES[26:30]
THAW_STEPS: tuple[StepName, ...] = STEP_NAMES[30:32]
LAKE_STEPS: tuple[StepName, ...] = STEP_NAMES[32:]

StepInfo = Mapping[str, Path | str | int | None]
StepHook = Callable[[StepName, StepInfo], Coroutine[Any, Any, None]]


async def no_step(name: StepName, info: StepInfo) -> None:
    """The default hook: nothing listens."""


class Recorder:
    """A hook that only records (an event for the stream): it never blocks, so a
    worker thread posts it to the loop and goes on without waiting."""

    def __init__(self, record: Callable[[StepName, StepInfo], None]) -> None:
        self.record = record

    async def __call__(self, name: StepName, info: StepInfo) -> None:
        self.record(name, info)


ThreadStep = Callable[[StepName, StepInfo], None]


def thread_step(step: StepHook, loop: asyncio.AbstractEventLoop) -> ThreadStep:
    """``step`` for a worker thread: each call returns once the hook is done on
    ``loop`` (a test's kill happens exactly there), except for ``no_step`` (not
    called) and a ``Recorder`` (posted in order, not waited for)."""
    if step is no_step:
        return lambda _name, _info: None
    if isinstance(step, Recorder):
        record = step.record

        def post(name: StepName, info: StepInfo) -> None:
            loop.call_soon_threadsafe(record, name, info)

        return post

    def announce(name: StepName, info: StepInfo) -> None:
        asyncio.run_coroutine_threadsafe(step(name, info), loop).result()

    return announce
