"""The restores as the archiver runs them: files (files/restore.py) and event rows
(events/restore.py), each in a session of its own; and the thaw of the cold
remote objects a files restore would read (remote/thaw.py).

Invariants: a selection that cannot be used (none, an id no entry has, months or
kinds no archive holds) is refused before the lock is taken, so a usage error
writes nothing; on a site no pass has run on, a files restore says nothing is
archived and writes nothing either. Event months only the remote holds are
fetched back before their rows are restored.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..base.cancel import CancelToken
from ..base.errors import UsageError
from ..events.query import TimeRange
from ..events.restore import EventsRestoreReport, restore_events
from ..events.restore import check_selection as check_events_selection
from ..files.restore import (
    RestoreReport,
    Selection,
    SelectionError,
    check_restore_root,
    check_selection,
    nothing_matched_error,
    restore_files,
    select_entries,
    unknown_ids_error,
)
from ..remote.connect import connected
from ..remote.fetch import remote_reader
from ..remote.objectstore import ObjectStore
from ..remote.rebuild import fetch_lost_months
from ..remote.sealing import Identities, IdentityFileError, load_identities
from ..remote.thaw import THAWING, ThawPlan, ask_thaws, thaw_plan
from ..store import thaws
from ..store.entries import Entry
from ..store.manifest import Manifest
from .session import Sessions


@dataclass
class ThawedRestores:
    """What the scheduler's look at the waiting ``restore --thaw`` requests did."""

    waiting: int = 0  # still waiting for a thaw
    asked: int = 0  # objects asked for again
    restored: list[int] = field(default_factory=list)  # their ids
    failed: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


async def checked(sessions: Sessions, selection: Selection) -> None:
    """A selection that names something, every id of it an entry's (read-only):
    else a ``SelectionError``."""
    check_selection(selection)
    if not selection.ids:
        return
    manifest = await Manifest.open_existing(sessions.layout.manifest)
    if manifest is None:
        raise unknown_ids_error(list(selection.ids), ": nothing is archived yet")
    async with manifest:
        unknown = await manifest.unknown_ids(selection.ids)
    if unknown:
        raise unknown_ids_error(unknown)


async def select(sessions: Sessions, selection: Selection) -> list[Entry]:
    """The entries a restore of ``selection`` would take, tombstones included
    (read-only, no lock); one that matches nothing is refused."""
    await checked(sessions, selection)
    return await _matching(sessions, selection)


async def _matching(sessions: Sessions, selection: Selection) -> list[Entry]:
    """The entries ``selection`` (already checked) matches; none is refused."""
    manifest = await Manifest.open_existing(sessions.layout.manifest)
    if manifest is None:
        return []
    async with manifest:
        entries = await select_entries(manifest, selection)
    if not entries:
        raise nothing_matched_error(selection)
    return entries


async def files(
    sessions: Sessions,
    selection: Selection,
    to: Path | None,
    cancel: CancelToken | None,
    workers: int = 1,
    identities: Identities | None = None,
) -> RestoreReport:
    """Files back to their live paths (left alone by passes for hold_days, their
    restore grace), or under ``to``; ``workers`` files at a time; remote copies
    that are sealed opened with ``identities``, else the command's identity
    (``sessions.identities``)."""
    settings = sessions.settings
    root = check_restore_root(to, settings.archive_root, settings.live_root) if to else None
    await checked(sessions, selection)
    if await sessions.nothing_archived():
        return RestoreReport(nothing_archived=True)
    await _matching(sessions, selection)  # one that matches nothing is refused here
    args = {**asdict(selection), "to": str(root) if root else None}
    async with (
        sessions.open("restore", args, cancel) as current,
        remote_reader(
            settings.remote, current.manifest, sessions.layout, identities or sessions.identities
        ) as remote,
    ):
        entries = await select_entries(current.manifest, selection)
        current.start(f"{len(entries)} files")
        report = await restore_files(
            current.mover,
            entries,
            to=root,
            grace_days=settings.hold_days,
            stream=sessions.stream,
            cancel=cancel,
            remote=remote,
            workers=workers,
        )
        current.finish("failed" if report.failed else "ok", report.counts)
        return report


async def events(
    sessions: Sessions,
    kinds: set[str] | None,
    months: list[str] | None,
    span: TimeRange | None,
    cancel: CancelToken | None,
) -> EventsRestoreReport:
    """Event rows back into live (of ``kinds``, in ``months``, their time stamps
    in ``span``), left alone by passes for hold_days; month snapshots only the
    remote holds fetched first (sealed ones opened with ``sessions.identities``)."""
    settings, layout = sessions.settings, sessions.layout
    sessions.state_db("there is no live table to restore event rows into")
    existing = await Manifest.open_existing(layout.manifest)
    async with contextlib.AsyncExitStack() as stack:
        if existing is not None:
            await stack.enter_async_context(existing)
        await check_events_selection(settings, layout.events, existing, kinds=kinds, months=months)
    args: dict[str, object] = {"kinds": sorted(kinds or []), "months": months}
    if span is not None:
        args["span"] = [span.start, span.end]
    async with sessions.open("restore-events", args, cancel) as current:
        current.start()
        await fetch_lost_months(
            layout,
            settings.remote,
            current.manifest,
            stream=sessions.stream,
            cancel=cancel,
            identities=sessions.identities,
        )
        report = await restore_events(
            settings,
            layout.events,
            current.manifest,
            kinds=kinds,
            months=months,
            grace_days=settings.hold_days,
            span=span,
            cancel=cancel,
        )
        summary = {
            "restored": report.restored,
            "already_live": report.already_live,
            "refused": report.refused,
        }
        current.finish("failed" if report.conflicts or report.refused else "ok", summary)
        return report


async def thaw(
    sessions: Sessions,
    selection: Selection,
    tier: str,
    days: int,
    ask: bool,
    cancel: CancelToken | None,
) -> ThawPlan:
    """The remote objects a restore of ``selection`` would read, as S3 says each
    now (read-only, no lock); with ``ask``, under the lock, one thaw asked for
    each cold one not yet thawing or thawed, each recorded before it is sent."""
    remote = sessions.remote()
    await checked(sessions, selection)
    entries = await _matching(sessions, selection)
    if not ask:
        manifest = await Manifest.open_existing(sessions.layout.manifest)
        if manifest is None:
            return ThawPlan(tier, days, 0, 0)
        async with manifest, connected(remote) as store:
            return await thaw_plan(manifest, store, remote, entries, tier, days)
    args = {**asdict(selection), "tier": tier, "days": days}
    async with sessions.open("thaw", args, cancel) as current, connected(remote) as store:
        current.start(f"{len(entries)} files")
        plan = await thaw_plan(current.manifest, store, remote, entries, tier, days)
        await _ask(sessions, current.manifest, store, plan)
        current.finish("failed" if plan.failed else "ok", _asked(plan))
        return plan


async def _ask(sessions: Sessions, manifest: Manifest, store: ObjectStore, plan: ThawPlan) -> None:
    """``plan``'s cold objects asked for, each recorded in ``manifest`` first
    and its steps announced."""
    remote = sessions.remote()
    await ask_thaws(plan, manifest, store, remote, sessions.clock, sessions.steps.hook())


def _asked(plan: ThawPlan) -> dict[str, object]:
    """A session's summary of asking for ``plan``'s thaws."""
    return {
        "asked": len(plan.asked),
        "under_way": len(plan.under_way),
        "failed": len(plan.failed),
        "waiting": plan.waiting_restore,
    }


async def restore_thawing(
    sessions: Sessions,
    selection: Selection,
    to: Path | None,
    tier: str,
    days: int,
    cancel: CancelToken | None,
    workers: int = 1,
) -> RestoreReport | ThawPlan:
    """``restore --thaw``: the cold objects ``selection`` needs asked for (as
    ``thaw --yes``); the restore now when none is to be waited for, else
    recorded for the scheduler to finish once they are thawed (the plan, with
    the waiting restore's id, returned)."""
    settings = sessions.settings
    remote = sessions.remote()
    root = check_restore_root(to, settings.archive_root, settings.live_root) if to else None
    await checked(sessions, selection)
    entries = await _matching(sessions, selection)
    args = {**asdict(selection), "to": str(root) if root else None, "tier": tier, "days": days}
    async with sessions.open("thaw", args, cancel) as current, connected(remote) as store:
        current.start(f"{len(entries)} files")
        plan = await thaw_plan(current.manifest, store, remote, entries, tier, days)
        identity = _identity_for(sessions.identities, plan)
        await _ask(sessions, current.manifest, store, plan)
        if not plan.failed and (plan.to_ask or plan.count(THAWING)):
            plan.waiting_restore = await thaws.add_waiting(
                current.manifest, asdict(selection), str(root) if root else None, tier, days,
                sessions.clock(), identity,
            )  # fmt: skip
        current.finish("failed" if plan.failed else "ok", _asked(plan))
    if plan.failed or plan.waiting_restore is not None:
        return plan
    return await files(sessions, selection, to, cancel, workers)


def _identity_for(identities: Identities | None, plan: ThawPlan) -> str | None:
    """The identity file a waiting restore records (its path: the scheduler
    reads it when it finishes); refused, before anything is asked, when some
    object is sealed and no identity was given, as the restore would then fail
    hours later."""
    if identities is not None:
        return str(identities.file.resolve())
    sealed = sum(o.sealed for o in plan.objects)
    if sealed:
        raise UsageError(
            f"{sealed} of the objects this restore needs {'is' if sealed == 1 else 'are'} "
            "sealed to age recipients "
            "([remote] encrypt_to): give --identity FILE (coldkeep run reads it when it "
            "finishes the restore; keep it there until then), or thaw them and restore "
            "with --identity yourself"
        )
    return None


async def finish_thawed(
    sessions: Sessions, manifest: Manifest, cancel: CancelToken | None, workers: int = 1
) -> ThawedRestores:
    """Each waiting ``restore --thaw`` whose objects are all readable now,
    restored and marked done (or failed) in ``manifest``; a cold object whose
    thaw never reached S3 or whose copy ended first is asked for again."""
    remote = sessions.remote()
    report = ThawedRestores()
    waiting_restores = await thaws.restores(manifest, ("waiting",))
    if not waiting_restores:
        return report
    async with connected(remote) as store:
        for waiting in waiting_restores:
            await _finish_one(sessions, manifest, store, waiting, cancel, workers, report)
    return report


async def _identities_of(waiting: thaws.WaitingRestore) -> Identities | None:
    """The keys of the identity file ``restore --thaw`` was given, read now."""
    if waiting.identity is None:
        return None
    return await asyncio.to_thread(load_identities, Path(waiting.identity))


async def _finish_one(
    sessions: Sessions,
    manifest: Manifest,
    store: ObjectStore,
    waiting: thaws.WaitingRestore,
    cancel: CancelToken | None,
    workers: int,
    report: ThawedRestores,
) -> None:
    """One waiting ``restore --thaw``: its lost thaws asked again, or, with
    nothing left to wait for, the restore run and its row ended."""
    selection = Selection(**{**waiting.selection, "ids": tuple(waiting.selection["ids"])})
    entries = await select_entries(manifest, selection)
    plan = await thaw_plan(manifest, store, sessions.remote(), entries, waiting.tier, waiting.days)
    if plan.to_ask:
        async with sessions.open("thaw", {"restore": waiting.id}, cancel) as current:
            await _ask(sessions, current.manifest, store, plan)
            current.finish("failed" if plan.failed else "ok", _asked(plan))
        report.asked += len(plan.asked)
    if plan.to_ask or plan.count(THAWING):
        report.waiting += 1
        return
    to = Path(waiting.target) if waiting.target else None
    try:
        identities = await _identities_of(waiting)
        done = await files(sessions, selection, to, cancel, workers, identities)
    except (SelectionError, IdentityFileError) as err:  # its files expired since, say
        await thaws.end_restore(manifest, waiting.id, False, sessions.clock(), str(err))
        report.failed.append(waiting.id)
        return
    await thaws.end_restore(manifest, waiting.id, not done.failed, sessions.clock(), done.said)
    (report.failed if done.failed else report.restored).append(waiting.id)
