"""The fleet at a thousand sites: how long the health of every site takes to
read, cold and warm, what it holds in memory, and how long a filter over every
site's catalog takes.

    python bench/fleet.py [--quick] [--sites N]

One demo site is archived and shipped to a folder remote; its manifest
snapshots, heartbeats and their entries in the fleet's index of beats are then
linked under N site names (1,000; 30 with --quick), so the view has N sites
that each read as a real one does (the signed statements, the newest beat, the
snapshot fetched into the cache).

Rows:
  fleet status --json     the whole command, spawn to exit, with an empty cache
                          (every snapshot fetched) and again warm; its peak RSS
  the sites loaded        ``Fleet.load`` in process, warm: every site's snapshot
                          checked against its statement, its beat read, judged,
                          sorted (what the fleet view's table shows)
  first sites shown       the fleet view (Textual's run_test), warm: its start
                          to its first judged sites on screen
  a filter over every     one word over every site's catalog, capped once for
  site                    the table (what a keystroke in the fleet view runs),
                          after a first one opened the catalogs' connections
  a filter keystroke      the fleet view at 200 sites of about 700 entries (a
                          scale-1 demo site): a key that narrows the table to
                          nothing and the one that takes it back, to the table
                          on screen; a 5 ms ticker on its loop meanwhile; and
                          the find box's search (``g``) over the same sites

  over S3 (not --quick)   the same sites uploaded to moto's server behind the
                          test kit's proxy with 30 ms added to every request:
                          fleet status --json cold and warm, and its requests;
                          the warm look's anchor: aiobotocore alone making the
                          one listing a site a look made before the fleet's
                          index of beats, 32 sites at a time

Targets (issue: the fleet view for a thousand hosts): status warm <= 3 s and
the table full <= 3 s at 1,000 sites from a folder, <= 6 s warm over S3 with
30 ms a request; the first rows <= 1 s; RSS <= 300 MB; a keystroke at 200
sites: the table <= 500 ms, the loop's lag <= 100 ms. No anchor: no other
archiver has a fleet view.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from files import COLDKEEP
from report import Row, loop_lag, met, print_table

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.config import load_settings
from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.base.stream import EventStream
from coldkeep.core.files.catalog import close_all
from coldkeep.core.ops.demo import write_demo
from coldkeep.core.ops.fleet import Fleet
from coldkeep.tui.console.fleet.app import FleetApp
from coldkeep.tui.console.fleet.matches import matching
from coldkeep.tui.console.fleet.messages import SitesLoaded
from coldkeep.tui.console.fleet.view import FleetScreen
from coldkeep.tui.console.kit.pilot import settle
from coldkeep.tui.console.screens.browse import Listing

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the test kit's proxy, for its delay and counts
BUCKET = "fleet-bench"
LATENCY_S = 0.030


async def one_site(work: Path, remote: Path, scale: float = 0.02) -> None:
    config = write_demo(work / "host", seed=7, scale=scale).config
    settings = replace(load_settings(config), remote=RemoteSettings(remote.as_uri(), site="s"))
    archiver = Archiver(settings, stream=EventStream(), serve_events=False)
    await archiver.run_pass()
    report = await archiver.ship()
    assert report.heartbeat is not None and not report.problems, report


def linked_sites(remote: Path, n: int) -> None:
    """The shipped site's snapshots and beats linked under ``n`` site names
    (what the fleet reads of a site; its archive files are not)."""
    src, index = remote / "s", remote / ".beats"
    for i in range(n):
        name = f"host-{i:04d}"
        for part, dest in (
            (src / "manifest", remote / name / "manifest"),
            (src / "heartbeat", remote / name / "heartbeat"),
            (index / "s", index / name),  # its beats' entries in the fleet's index
        ):
            dest.mkdir(parents=True)
            for f in part.iterdir():
                os.link(f, dest / f.name)


def status_run(where: list[str], cache: Path) -> tuple[float, float]:
    """``fleet status --json`` of the fleet ``where`` names (``--remote URL``
    and its options): seconds, and the peak RSS (MiB) of it."""
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    out = subprocess.run(
        [str(COLDKEEP), "fleet", "status", "--remote", *where, "--json"],
        capture_output=True,
        env=env,
        check=False,
    )
    seconds = time.perf_counter() - t0
    assert out.returncode in (0, 1), out.stderr.decode()[-2000:]
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return seconds, max(peak, before) / 1024


async def loaded(remote: Path, cache: Path) -> tuple[float, float, int]:
    """The sites loaded and sorted, warm (seconds); one filter over every
    catalog (seconds); how many sites."""
    fleet = Fleet(RemoteSettings(remote.as_uri()), cache)
    try:
        await fleet.load()  # the cache filled
        t0 = time.perf_counter()
        # As the fleet view's table fills: the sites and their health, sorted.
        sites = sorted(await fleet.load(), key=lambda s: (s.health.sort_key(), s.site))
        load_s = time.perf_counter() - t0
        catalogs = await fleet.catalogs()
    finally:
        await fleet.close()
    try:
        # The first filter opens each catalog's connection; the next (the
        # keystroke after) finds them open.
        await asyncio.to_thread(matching, catalogs, "unit-000", lambda: False)
        t0 = time.perf_counter()
        found = await asyncio.to_thread(matching, catalogs, "unit-0003", lambda: False)
        filter_s = time.perf_counter() - t0
    finally:
        await asyncio.to_thread(close_all, list(catalogs.values()))
    assert found is not None and found.rows
    return load_s, filter_s, len(sites)


class TimedScreen(FleetScreen):
    """The fleet view, noting when its first judged rows were on screen (after
    the refresh that follows the screen's own handler, which Textual runs
    after this one); when each filter filled the table, its ``TimedListing``."""

    first_rows: float | None = None
    answered: dict[str, float]

    def on_sites_loaded(self, message: SitesLoaded) -> None:
        if self.first_rows is None and message.sites:
            self.call_after_refresh(self._first_rows)

    def _first_rows(self) -> None:
        self.first_rows = self.first_rows or time.perf_counter()


class TimedListing(Listing):
    """The table's listing, noting when each filter's answer filled it (the
    last of its rows added a frame at a time)."""

    def __init__(self, answered: dict[str, float]) -> None:
        super().__init__()
        self.answered = answered

    def listed(self, text: str) -> None:
        self.answered.setdefault(text, time.perf_counter())
        super().listed(text)


class TimedApp(FleetApp):
    def __init__(self, remote: RemoteSettings, cache: Path) -> None:
        super().__init__(remote, cache)
        self.view = TimedScreen(self.fleet)
        self.view.answered = {}
        self.view.listing = TimedListing(self.view.answered)


async def first_rows(remote: Path, cache: Path) -> float:
    """Seconds from the fleet view's start to its first judged sites shown
    (warm: ``cache`` filled before)."""
    app = TimedApp(RemoteSettings(remote.as_uri()), cache)
    t0 = time.perf_counter()
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        assert app.view.first_rows is not None
        return app.view.first_rows - t0


async def keystroke(remote: Path, cache: Path, keys: str) -> tuple[float, float]:
    """A filter keystroke in the fleet view, everything loaded: the ``keys``
    typed, then the one that narrows it to nothing and the one that takes
    that back. The slowest of those two to the table answering (ms), and
    the loop's greatest lag meanwhile (ms): a 5 ms ticker on the view's own
    loop, as bench/console.py measures the console's."""
    app = TimedApp(RemoteSettings(remote.as_uri()), cache)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await pilot.press(*keys)
        await settle(pilot)
        answers = []
        app.view.answered.clear()
        async with loop_lag() as lags:
            for key, text in (("q", keys + "q"), ("backspace", keys)):
                t0 = time.perf_counter()
                await pilot.press(key)
                while text not in app.view.answered:
                    assert time.perf_counter() - t0 < 60, (
                        f"the filter {text!r} never filled the table"
                    )
                    await pilot.pause()
                answers.append((app.view.answered[text] - t0) * 1000)
    return max(answers), max(lags)


def view_rows(work: Path, quick: bool) -> list[Row]:
    """The fleet view at 200 sites of about 700 entries each: a keystroke."""
    n = 20 if quick else 200
    remote = work / "bucket-view"
    remote.mkdir()
    asyncio.run(one_site(work / "view", remote, scale=0.05 if quick else 1.0))
    linked_sites(remote, n)
    cache = work / "cache-view"
    asyncio.run(first_rows(remote, cache))  # the cache filled
    with sqlite3.connect(work / "view" / "host" / "archive" / "coldkeep.db") as db:
        [(entries,)] = db.execute("SELECT count(*) FROM entries")
    answer_ms, lag_ms = asyncio.run(keystroke(remote, cache, "unit-00"))
    find_s = asyncio.run(found_across(remote, cache, "unit-0003"))
    return [
        row(f"a filter keystroke, {n} sites x {entries} entries: the table", f"{answer_ms:.0f} ms",
            "<= 500 ms", answer_ms <= 500),
        row("  the loop's greatest lag meanwhile", f"{lag_ms:.0f} ms", "<= 100 ms", lag_ms <= 100),
        (f"  g (find) over the {n} sites", f"{find_s:.2f} s", "", "", "(no target)", ""),
    ]  # fmt: skip


async def found_across(remote: Path, cache: Path, pattern: str) -> float:
    """Seconds ``Fleet.find`` takes over the sites loaded (the find box, ``g``)."""
    fleet = Fleet(RemoteSettings(remote.as_uri()), cache)
    try:
        await fleet.load()
    finally:
        await fleet.close()
    t0 = time.perf_counter()
    await fleet.find(pattern)
    return time.perf_counter() - t0


async def upload(endpoint: str, objects: dict[str, bytes]) -> None:
    """``objects`` (key: bytes) put in a new bench bucket."""
    from aiobotocore.session import get_session

    gate = asyncio.Semaphore(16)
    async with get_session().create_client("s3", endpoint_url=endpoint) as s3:
        await s3.create_bucket(Bucket=BUCKET)

        async def one(key: str, body: bytes) -> None:
            async with gate:
                await s3.put_object(Bucket=BUCKET, Key=key, Body=body)

        await asyncio.gather(*(one(k, b) for k, b in objects.items()))


def s3_rows(work: Path, remote: Path, n: int) -> list[Row]:
    """``fleet status`` over moto with ``LATENCY_S`` added to each request."""
    from remote import CREDENTIALS, Moto

    from s3kit.proxy import Delay, FaultProxy

    os.environ.update(CREDENTIALS)
    moto = Moto()
    try:
        with FaultProxy(moto.endpoint) as proxy:
            # What the fleet reads of every site: its snapshots, their
            # statements, its beats (the site "s" of the folder only, not).
            objects = {
                f"fleet/{p.relative_to(remote).as_posix()}": p.read_bytes()
                for p in [*remote.glob("host-*/*/*"), *remote.glob(".beats/host-*/*")]
            }
            asyncio.run(upload(moto.endpoint, objects))
            proxy.fail(Delay(LATENCY_S))
            url = [f"s3://{BUCKET}/fleet", "--endpoint-url", proxy.endpoint]
            proxy.reset_counts()
            cold_s, _ = status_run(url, work / "s3cache")
            cold_n = sum(proxy.counts.values())
            proxy.reset_counts()
            warm_s, _ = status_run(url, work / "s3cache")
            warm_n = sum(proxy.counts.values())
            bare_s = bare_lists(proxy.endpoint, n)
    finally:
        moto.stop()
    ms = f"{LATENCY_S * 1000:.0f} ms"
    return [
        (f"  over S3 ({ms} a request), cold", f"{cold_s:.2f} s, {cold_n} requests", "", "",
         "(no target)", ""),
        (f"  over S3 ({ms} a request), warm", f"{warm_s:.2f} s, {warm_n} requests",
         f"{bare_s:.2f} s", f"{warm_s / bare_s:.2f}x", "<= 6 s", met(warm_s <= 6)),
    ]  # fmt: skip


# The anchor of the warm look over S3: aiobotocore alone, in a process of its
# own, listing each site's beats and statements in one request (what a warm
# look needed of every site before the fleet's index of beats told it which
# beat since) 32 sites at a time, as the fleet did.
BARE_LISTS = """
import asyncio, sys
from aiobotocore.session import get_session
from botocore.config import Config

async def main(endpoint, n):
    config = Config(max_pool_connections=32, s3={"addressing_style": "path"})
    async with get_session().create_client("s3", endpoint_url=endpoint, config=config) as s3:
        gate = asyncio.Semaphore(32)

        async def site(i):
            async with gate:
                site = f"fleet/host-{i:04d}/"
                await s3.list_objects_v2(
                    Bucket=sys.argv[3], Prefix=site, StartAfter=site + "heartbeat/"
                )

        await asyncio.gather(*(site(i) for i in range(n)))

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


def bare_lists(endpoint: str, n: int) -> float:
    """Seconds ``BARE_LISTS`` takes over ``n`` sites, spawn to exit."""
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", BARE_LISTS, endpoint, str(n), BUCKET], check=True, env=os.environ
    )
    return time.perf_counter() - t0


def measure(work: Path, quick: bool, sites: int | None = None) -> list[Row]:
    n = sites or (30 if quick else 1000)
    remote = work / "bucket"
    remote.mkdir()
    asyncio.run(one_site(work, remote))
    linked_sites(remote, n)
    cache = work / "cache"
    cold_s, _ = status_run([remote.as_uri()], cache)
    warm_s, rss = status_run([remote.as_uri()], cache)
    load_s, filter_s, listed = asyncio.run(loaded(remote, work / "cache2"))
    assert listed == n + 1
    first_s = asyncio.run(first_rows(remote, work / "cache2"))  # warm: loaded filled it
    over_s3 = [] if quick else s3_rows(work, remote, n)
    return [
        (f"fleet status --json, {n} sites, cold", f"{cold_s:.2f} s", "", "", "(no target)", ""),
        row(f"fleet status --json, {n} sites, warm", f"{warm_s:.2f} s", "<= 3 s", warm_s <= 3),
        row("  its peak RSS", f"{rss:.0f} MiB", "<= 300 MiB", rss <= 300),
        row(f"the table's sites, judged, sorted, warm ({n})", f"{load_s:.2f} s", "<= 3 s",
            load_s <= 3),
        row(f"the fleet view's first sites shown, warm ({n})", f"{first_s:.2f} s", "<= 1 s",
            first_s <= 1),
        (f"a filter over {n} sites' catalogs, the next key", f"{filter_s * 1000:.0f} ms", "", "",
         "(no target)", ""),
        *view_rows(work, quick),
        *over_s3,
    ]  # fmt: skip


def row(what: str, got: str, target: str, ok: bool) -> Row:
    return (what, got, "", "", target, met(ok))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="30 sites, seconds")
    ap.add_argument("--sites", type=int, help="how many sites (default 1,000)")
    args = ap.parse_args()
    (ROOT / "bench" / ".data").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=ROOT / "bench" / ".data") as tmp:
        print_table(measure(Path(tmp), args.quick, args.sites))


if __name__ == "__main__":
    main()
