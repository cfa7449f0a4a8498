"""The remote tier's operations as the archiver runs them: each opens its store
for its own length (``remote.connect.connected``), inside a session of the
archiver's (``Sessions``), and says how it went. The archiver has checked that a
``[remote]`` is configured.

    plan     what a ship would send and drop now (read-only, no lock)
    ship     the archive to the remote tier, local copies dropped (remote/ship.py)
    verify   the remote copies read back; bad ones shipped again (remote/verify.py)
    rebuild  a lost host's archive back from its bucket (remote/rebuild.py): the
             lock alone, there is no manifest to open yet
    rekey    objects sealed to other recipients sealed again to encrypt_to's
             (remote/rekey.py), then the holds mirrored and a manifest
             snapshot shipped, as a ship ends; its plan read without the lock
"""

from __future__ import annotations

import asyncio

from ..base.cancel import CancelToken
from ..base.configremote import RemoteSettings
from ..base.errors import RemoteError
from ..remote import heartbeat
from ..remote.connect import connected
from ..remote.objectstore import ObjectStore, RemoteFatal
from ..remote.rebuild import (
    DrChoice,
    FromRemoteReport,
    SnapshotList,
    list_snapshots,
    rebuild_from_remote,
)
from ..remote.rekey import Rekeyer, RekeyPlan, RekeyReport, recipients_of
from ..remote.rekey import rekey_plan as plan_rekey
from ..remote.ship import Shipper
from ..remote.shipplan import ShipPlan, ship_plan
from ..remote.shiprun import ShipReport
from ..remote.verify import RemoteVerifier, RemoteVerifyReport
from ..store.manifest import Manifest
from ..store.remoteobjects import RemoteObjects
from . import beat
from .session import Sessions


async def plan(sessions: Sessions) -> ShipPlan:
    """What ``ship`` would send and drop now, read without the lock."""
    manifest = await Manifest.open_existing(sessions.layout.manifest)
    if manifest is None:
        return await ship_plan(sessions.settings, None, sessions.clock())
    async with manifest:
        return await ship_plan(sessions.settings, manifest, sessions.clock())


async def ship(
    sessions: Sessions, remote: RemoteSettings, cancel: CancelToken | None
) -> ShipReport:
    """What is archived and not yet remote, to ``remote``; then local copies past
    ``keep_local_days`` dropped."""
    async with sessions.open("ship", {"url": remote.url}, cancel) as current:
        current.start(f"to {remote.url}/{remote.site}")
        async with connected(remote) as store:
            report = await _shipper(sessions, current.manifest, store, cancel).run()
            await _beat(sessions, current.manifest, store, report)
        current.finish("failed" if report.failed else "ok", report.to_dict())
        return report


async def _beat(
    sessions: Sessions, manifest: Manifest, store: ObjectStore, report: ShipReport
) -> None:
    """The ship's heartbeat, and the site's older beats let go; one that cannot
    be sent is a notice (the ship itself went as its report says)."""
    settings = sessions.settings
    assert settings.remote is not None
    try:
        sent = await beat.send(settings, manifest, sessions.layout, store, sessions.clock())
        await heartbeat.prune(store, settings.remote.site)
    except RemoteFatal:
        raise
    except RemoteError as err:
        sent = beat.NotSent(str(err))
    if isinstance(sent, beat.NotSent):
        report.notices.append(str(sent))
        return
    report.heartbeat = sent.key
    if sent.unindexed is not None:
        report.notices.append(f"heartbeat sent, {sent.unindexed}")


async def verify(
    sessions: Sessions,
    remote: RemoteSettings,
    sample: float | None,
    cancel: CancelToken | None,
    deep: bool = False,
    max_duration: float | None = None,
) -> RemoteVerifyReport:
    """The copies at ``remote`` read back (all, or ``sample`` of them, rotating);
    a bad one shipped again from its local copy where there is one. ``deep``:
    sealed ones opened with ``sessions.identities`` too; ``max_duration``
    (seconds): stopped between objects once spent, the rest left for the next
    run."""
    args = {"sample": sample, "remote": True, "deep": deep, "max_duration": max_duration}
    async with sessions.open("verify", args, cancel) as current:
        current.start(f"remote copies at {remote.url}/{remote.site}")
        async with connected(remote) as store:
            token = cancel or CancelToken()
            shipper = Shipper(
                sessions.settings,
                current.manifest,
                store,
                stream=sessions.stream,
                clock=sessions.clock,
                reads=sessions.limiter,
                cancel=token,
            )
            verifier = RemoteVerifier(
                current.manifest,
                store,
                shipper,
                stream=sessions.stream,
                cancel=token,
                deep=deep,
                identities=sessions.identities,
            )
            report = await verifier.run(sample, max_duration)
        current.finish("failed" if report.failed else "ok", report.to_dict())
        return report


def _shipper(
    sessions: Sessions, manifest: Manifest, store: ObjectStore, cancel: CancelToken | None
) -> Shipper:
    return Shipper(
        sessions.settings,
        manifest,
        store,
        stream=sessions.stream,
        step=sessions.steps.hook(),
        clock=sessions.clock,
        reads=sessions.limiter,
        cancel=cancel,
    )


async def rekey_plan(sessions: Sessions, remote: RemoteSettings) -> RekeyPlan:
    """What ``rekey`` would seal again, read without the lock."""
    recipients = recipients_of(remote)
    manifest = await Manifest.open_existing(sessions.layout.manifest)
    if manifest is None:
        return RekeyPlan(recipients.describe())
    async with manifest:
        return await plan_rekey(RemoteObjects(manifest), recipients)


async def rekey(
    sessions: Sessions, remote: RemoteSettings, cancel: CancelToken | None
) -> RekeyReport:
    """Every object not sealed to ``encrypt_to``'s recipients sealed again to
    them: from its local copy, else from the remote one opened with the
    session's identities (``--identity``)."""
    async with sessions.open("rekey", {"url": remote.url}, cancel) as current:
        current.start(f"objects at {remote.url}/{remote.site}")
        async with connected(remote) as store:
            shipper = _shipper(sessions, current.manifest, store, cancel)
            report = await Rekeyer(shipper.placer, sessions.identities, shipper.cancel).run()
            if report.resealed:
                # A hold placed while it ran is on the bucket's copies too, and
                # the newest snapshot opens with the new identity.
                await shipper.mirror_holds()
                await shipper.ship_manifest()
                report.snapshot = shipper.report.snapshot
                report.problems += shipper.report.problems
        current.finish("failed" if report.failed else "ok", report.to_dict())
        return report


async def rebuild(
    sessions: Sessions,
    remote: RemoteSettings,
    cancel: CancelToken | None,
    choice: DrChoice,
) -> FromRemoteReport:
    """This site's manifest, event months and the knowledge of what is remote,
    back from ``remote``: for a fresh host after the old one was lost (the
    site and snapshot as ``choice`` says); sealed objects opened with
    ``sessions.identities``."""
    await asyncio.to_thread(sessions.layout.root.mkdir, parents=True, exist_ok=True)
    async with sessions.lock_only("rebuild-manifest", "rebuild-manifest --from-remote") as op:
        op.start(f"from {remote.url}/{remote.site}")
        report = await rebuild_from_remote(
            sessions.layout,
            remote,
            stream=sessions.stream,
            reads=sessions.limiter,
            cancel=cancel,
            identities=sessions.identities,
            choice=choice,
        )
        op.finish("failed" if report.failed else "ok", report.to_dict())
        return report


async def snapshots(sessions: Sessions, remote: RemoteSettings, choice: DrChoice) -> SnapshotList:
    """Every manifest snapshot under ``remote``'s site prefix, judged (no lock:
    nothing is written)."""
    return await list_snapshots(sessions.layout, remote, choice)
