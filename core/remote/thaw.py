"""Thawing: which remote objects hold what a selection of entries names, what S3
says of each (its class, its thaw), what asking for the cold ones would cost,
and the asking: one restore request per object, a bundle once however many of
its members were selected.

Invariants:
- An object is asked for only when a HEAD says it is cold and neither thawing
  nor thawed: never twice for one already asked, whatever the manifest says.
- Each request is recorded before it is sent (store/thaws.py): a kill loses
  none, and a request sent again after one is answered "under way", not
  doubled.
- An entry with a local copy to rely on is read from here: nothing is thawed
  for it.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..base.configprices import Prices
from ..base.configremote import RemoteSettings
from ..base.errors import RemoteError, UsageError
from ..base.steps import StepHook, no_step
from ..store import thaws
from ..store.entries import Entry
from ..store.manifest import Manifest
from ..store.remoteobjects import RemoteObject, RemoteObjects
from .cold import is_cold, wait_of
from .objectstore import ObjectInfo, ObjectStore, RemoteFatal

HEADS_AT_ONCE = 16

# What a HEAD says of an object, as the plan shows it.
TO_ASK, THAWING, THAWED, READABLE, MISSING = "to ask", "thawing", "thawed", "readable", "missing"


@dataclass(frozen=True)
class ThawObject:
    path: str  # the remote object's archive path (a gzip, or a bundle)
    key: str  # under the site's prefix
    bytes: int
    storage_class: str | None  # as the HEAD said (None: STANDARD)
    state: str  # TO_ASK | THAWING | THAWED | READABLE | MISSING
    entries: int  # of the selection, how many it holds
    until: int | None = None  # thawed: its copy's end (ms)
    sealed: bool = False  # sealed to age recipients: its restore needs an identity


@dataclass
class ThawPlan:
    """The objects a selection needs from the remote, and (once asked) what
    came of asking for the cold ones."""

    tier: str
    days: int
    selected: int  # entries the selection matched
    local: int  # of them, read from a local copy: nothing to thaw
    objects: list[ThawObject] = field(default_factory=list)
    acted: bool = False
    asked: list[str] = field(default_factory=list)  # keys: a new thaw, or one extended
    under_way: list[str] = field(default_factory=list)  # S3 said one already ran
    failed: list[str] = field(default_factory=list)  # one line each
    # restore --thaw: the restore left to the scheduler until they are thawed
    waiting_restore: int | None = None
    prices: Prices = field(default_factory=Prices, repr=False)

    @property
    def to_ask(self) -> list[ThawObject]:
        return [o for o in self.objects if o.state == TO_ASK]

    @property
    def bytes_to_ask(self) -> int:
        return sum(o.bytes for o in self.to_ask)

    def count(self, state: str) -> int:
        return sum(1 for o in self.objects if o.state == state)

    def waits(self) -> dict[str, str]:
        """Each class to thaw's usual wait at this tier."""
        classes = sorted({o.storage_class or "" for o in self.to_ask})
        return {c: wait_of(c, self.tier) or "?" for c in classes}

    def cost_usd(self) -> float:
        """The retrieval's estimated cost (the price table's, not a bill)."""
        by_class: Counter[str] = Counter()
        requests: Counter[str] = Counter()
        for o in self.to_ask:
            by_class[o.storage_class or ""] += o.bytes
            requests[o.storage_class or ""] += 1
        return sum(self.prices.thaw_usd(c, self.tier, by_class[c], requests[c]) for c in by_class)

    def to_dict(self) -> dict[str, Any]:
        return {
            "tier": self.tier,
            "days": self.days,
            "selected": self.selected,
            "local": self.local,
            "objects": [asdict(o) for o in self.objects],
            "to_ask": len(self.to_ask),
            "bytes_to_ask": self.bytes_to_ask,
            "estimated_usd": round(self.cost_usd(), 4),
            "waits": self.waits(),
            "acted": self.acted,
            "asked": self.asked,
            "under_way": self.under_way,
            "failed": self.failed,
            "waiting_restore": self.waiting_restore,
        }


def _state(info: ObjectInfo | None) -> str:
    if info is None:
        return MISSING
    if not is_cold(info.storage_class):
        return READABLE
    if info.thaw is None:
        return TO_ASK
    return THAWING if info.thaw.ongoing else THAWED


async def thaw_plan(
    manifest: Manifest,
    store: ObjectStore,
    remote: RemoteSettings,
    entries: Sequence[Entry],
    tier: str,
    days: int,
) -> ThawPlan:
    """The objects ``entries`` are read from remotely, each as a HEAD says it
    now; a tier the class does not offer is refused (nothing asked)."""
    on_remote = await RemoteObjects(manifest).of_paths(e.gz_path for e in entries)
    held: Counter[str] = Counter()
    local = 0
    for e in entries:
        obj = on_remote.get(e.gz_path)
        # As a restore decides: the remote copy once the local one is dropped,
        # or missing (a local file gone without a drop is not stat'ed here).
        if obj is None or (obj.local and e.status != "missing"):
            local += 1  # read from here (or from nowhere: restore says which)
        else:
            held[e.gz_path] += 1

    async def look(obj: RemoteObject) -> ThawObject:
        info = await store.head(f"{remote.site}/{obj.key}")
        state = _state(info)
        cls = info.storage_class if info is not None else None
        until = info.thaw.until if info is not None and info.thaw is not None else None
        sealed = obj.sealed_to is not None
        return ThawObject(obj.path, obj.key, obj.bytes, cls, state, held[obj.path], until, sealed)

    paths = sorted(held)
    objects: list[ThawObject] = []
    for at in range(0, len(paths), HEADS_AT_ONCE):  # a few HEADs in flight, never all
        chunk = paths[at : at + HEADS_AT_ONCE]
        objects += await asyncio.gather(*(look(on_remote[p]) for p in chunk))
    plan = ThawPlan(tier, days, len(entries), local, objects, prices=remote.prices)
    offered = [c for c in plan.waits() if wait_of(c, tier) is None]
    if offered:
        raise UsageError(f"{', '.join(offered)} offers no {tier} thaw: use --tier standard or bulk")
    return plan


async def ask_thaws(
    plan: ThawPlan,
    manifest: Manifest,
    store: ObjectStore,
    remote: RemoteSettings,
    clock: Callable[[], int],
    step: StepHook = no_step,
) -> ThawPlan:
    """One restore request for each object the plan found cold and not asked
    for, each recorded before it is sent; what S3 answered, in ``plan``."""
    plan.acted = True
    for obj in plan.to_ask:
        await thaws.record_asking(manifest, obj.key, obj.path, plan.tier, plan.days, clock())
        await step("thaw_recorded", {"label": obj.path})
        try:
            said = await store.thaw(f"{remote.site}/{obj.key}", plan.days, plan.tier)
        except RemoteFatal:
            raise
        except RemoteError as err:
            await thaws.record_answer(manifest, obj.key, str(err))
            plan.failed.append(str(err))
            continue
        await thaws.record_answer(manifest, obj.key, None)
        await step("thaw_asked", {"label": obj.path})
        (plan.under_way if said == "under way" else plan.asked).append(obj.key)
    return plan
