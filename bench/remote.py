"""The remote tier against moto's S3 server, in one run: what shipping costs in
time and requests, and what one file's restore from the remote transfers.

    python bench/remote.py [--quick]

moto's ``ThreadedMotoServer`` runs in a child process on a free port of
127.0.0.1; every request passes a counting proxy (tests/s3kit's ``FaultProxy``,
with no faults) that tallies requests per method and the bytes each answer sent.

Rows:
  ship vs a PUT loop     5,000 archived files of 4–64 KiB (in bundles):
                         ``coldkeep ship``, the whole command timed from spawn to
                         exit (hash, create-only PUT, read-back HEAD, record, the
                         manifest snapshot), against an in-process loop of one
                         ``put_object`` per gzip of the same files archived one
                         gzip each (aiobotocore, as many in flight as a ship
                         keeps, reading nothing back): time and requests
  one file's restore     a ~20 KiB file whose only copy is a member of a 64 MiB
                         bundle on the remote: ``coldkeep restore --to``, the
                         bytes the server sent; then ``coldkeep cat`` of it: the
                         GETs and the bytes they fetched

  cold classes           the demo site shipped (objects, bytes, requests), a month
                         of it in STANDARD / GLACIER_IR / DEEP_ARCHIVE, and the
                         thaw of one unit from DEEP_ARCHIVE (list prices)

Targets: ship >= 10x faster than the PUT loop with >= 50x fewer requests; the
restore transfers < 1 MiB; the cat is one ranged GET.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from files import COLDKEEP, DAY_MS, coldkeep, site, write_small_tree
from report import Row, met, print_table

from coldkeep.core.base.configprices import Prices
from coldkeep.core.base.configremote import COLD_CLASSES
from coldkeep.core.ops.demo import write_jsonl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from s3kit.proxy import FaultProxy  # noqa: E402 - the test kit's proxy, for its counts

BUCKET = "bench"
MIB = 1 << 20
IN_FLIGHT = 8  # what a ship keeps in flight (core/remote/ship.py)
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_moto(port: int) -> None:
    """The child: moto's server until stdin closes."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    print("ready", flush=True)
    sys.stdin.read()
    server.stop()


class Moto:
    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--moto-server", str(self.port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            raise SystemExit("moto's server did not start")

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def remote_table(proxy: FaultProxy, prefix: str, keep_local_days: int) -> str:
    return (
        f'\n[remote]\nurl = "s3://{BUCKET}/{prefix}"\nendpoint_url = "{proxy.endpoint}"\n'
        f'region = "us-east-1"\nsite = "bench"\nkeep_local_days = {keep_local_days}\n'
    )


async def make_bucket(endpoint: str) -> None:
    from aiobotocore.session import get_session

    async with get_session().create_client("s3", endpoint_url=endpoint) as s3:
        await s3.create_bucket(Bucket=BUCKET)


async def put_loop(endpoint: str, gzips: list[tuple[str, Path]]) -> float:
    """One put_object per gzip, IN_FLIGHT at a time; seconds."""
    from aiobotocore.session import get_session

    gate = asyncio.Semaphore(IN_FLIGHT)
    async with get_session().create_client("s3", endpoint_url=endpoint) as s3:

        async def one(key: str, path: Path) -> None:
            async with gate:
                data = await asyncio.to_thread(path.read_bytes)
                await s3.put_object(Bucket=BUCKET, Key=key, Body=data)

        t0 = time.perf_counter()
        await asyncio.gather(*(one(k, p) for k, p in gzips))
        return time.perf_counter() - t0


def ship_rows(work: Path, proxy: FaultProxy, n: int) -> list[Row]:
    tree = work / "small-tree"
    write_small_tree(tree, n, seed=2)
    bundled = site(work / "bundled", tree)
    coldkeep(bundled, "pass")
    with (bundled / "coldkeep.toml").open("a") as f:
        f.write(remote_table(proxy, "ship", keep_local_days=-1))
    single = site(work / "single", tree)  # the same files, one gzip each
    config = single / "coldkeep.toml"
    config.write_text(config.read_text().replace("[files]\n", "[files]\nbundle_below = 0\n"))
    coldkeep(single, "pass")
    gzips = sorted((single / "archive" / "files").rglob("*.gz"))
    assert len(gzips) == n, len(gzips)

    proxy.reset_counts()
    t0 = time.perf_counter()
    result, _ = coldkeep(bundled, "ship")
    ship_s = time.perf_counter() - t0
    assert not result["problems"], result["problems"]
    ship_requests = sum(proxy.counts.values())

    proxy.reset_counts()
    keys = [(f"loop/{p.relative_to(single / 'archive').as_posix()}", p) for p in gzips]
    loop_s = asyncio.run(put_loop(proxy.endpoint, keys))
    loop_requests = sum(proxy.counts.values())
    speed, fewer = loop_s / ship_s, loop_requests / ship_requests
    return [
        (
            f"ship {n} small archived files (time vs a PUT per gzip, {IN_FLIGHT} in flight)",
            f"{ship_s:.1f} s",
            f"{loop_s:.1f} s",
            f"{speed:.1f}x",
            ">= 10x",
            met(speed >= 10),
        ),
        (
            "  requests",
            f"{ship_requests}",
            f"{loop_requests}",
            f"{fewer:.0f}x fewer",
            ">= 50x",
            met(fewer >= 50),
        ),
    ]


def restore_rows(work: Path, proxy: FaultProxy, quick: bool) -> list[Row]:
    """A ~20 KiB file out of a 64 MiB bundle whose only copy is remote: restored,
    then read with ``coldkeep cat``."""
    live = work / "bundle-tree"
    rnd = random.Random(5)
    old = int(time.time() * 1000) - 60 * DAY_MS
    count = 40 if quick else 3300  # ~20 KiB each: one full 64 MiB bundle
    for i in range(count):
        write_jsonl(live / "big" / f"f-{i:05d}.jsonl", rnd, "big", 20 << 10, old)
    (live / "big" / ".closed").write_text("closed\n")
    ck = site(work / "restore", live)
    coldkeep(ck, "pass")
    with (ck / "coldkeep.toml").open("a") as f:
        f.write(remote_table(proxy, "restore", keep_local_days=0))
    coldkeep(ck, "ship")
    bundles = sorted((ck / "archive" / "files").rglob("*.tar"))
    assert not bundles, "the local copies are dropped"
    proxy.reset_counts()
    before = len(proxy.exchanges)
    one = f"big/f-{count // 2:05d}.jsonl"
    result, _ = coldkeep(ck, "restore", "--path", one, "--to", str(work / "out"))
    assert [f["result"] for f in result] == ["restored"], result
    sent = sum(x.sent for x in proxy.exchanges[before:])
    mib = count * 20 // 1024
    before = len(proxy.exchanges)
    cat = subprocess.run(
        [str(COLDKEEP), "cat", one, "--config", str(ck / "coldkeep.toml")],
        capture_output=True,
        check=True,
    )
    assert len(cat.stdout) >= 16 << 10, len(cat.stdout)
    gets = [x for x in proxy.exchanges[before:] if x.method == "GET"]
    got = sum(x.sent for x in gets)
    return [
        (
            f"restore one 20 KiB file from a {mib} MiB bundle (bytes from the remote)",
            f"{sent / 1024:.0f} KiB",
            "",
            "",
            "< 1 MiB",
            met(sent < MIB),
        ),
        (
            "cat the same file (GETs, bytes from the remote)",
            f"{len(gets)} GET, {got / 1024:.0f} KiB",
            "",
            "",
            "1 ranged GET",
            met(len(gets) == 1 and got < MIB),
        ),
    ]


def cold_rows(work: Path, proxy: FaultProxy, quick: bool) -> list[Row]:
    """The demo site shipped with every local copy dropped: its objects, bytes
    and requests, what a month of them costs in three classes (the same objects:
    archive files in the class, what is read without asking in STANDARD when it
    is cold), and what thawing one unit from DEEP_ARCHIVE costs, all at the list
    prices of ``[remote.prices]``'s defaults."""
    demo = work / "cold-demo"
    subprocess.run(
        [str(COLDKEEP), "demo", str(demo), "--scale", "0.05" if quick else "1", "--no-console"],
        capture_output=True,
        check=True,
    )
    coldkeep(demo, "pass")
    config = demo / "coldkeep.toml"
    head = config.read_text().split("\n[remote]\n")[0]
    table = remote_table(proxy, "cold", keep_local_days=0)
    config.write_text(head + table + 'storage_class = "DEEP_ARCHIVE"\n')
    proxy.reset_counts()
    coldkeep(demo, "ship")
    requests = sum(proxy.counts.values())
    sizes = asyncio.run(list_sizes(proxy.endpoint, "cold/"))
    data = sum(n for k, n in sizes.items() if "/files/" in k)
    rest = sum(sizes.values()) - data
    prices = Prices()
    costs = []
    for cls in ("STANDARD", "GLACIER_IR", "DEEP_ARCHIVE"):
        meta = "STANDARD" if cls in COLD_CLASSES else cls
        costs.append(prices.storage_usd(cls, data) + prices.storage_usd(meta, rest))
    with sqlite3.connect(demo / "archive" / "coldkeep.db") as db:
        [(unit,)] = db.execute(
            "SELECT unit FROM entries WHERE status = 'archived' GROUP BY unit "
            "ORDER BY count(DISTINCT gz_path) DESC, unit LIMIT 1"
        ).fetchall()
    thaws = [coldkeep(demo, "thaw", "--unit", unit, "--tier", t)[0] for t in ("standard", "bulk")]
    standard, glacier_ir, deep = costs
    shipped = f"{len(sizes)} objects, {sum(sizes.values()) / MIB:.1f} MiB, {requests} requests"

    def ratio(a: float, b: float) -> str:
        return f"{a / b:.2f}x" if b else "-"

    return [
        (
            f"a month of the demo ({shipped}) in DEEP_ARCHIVE vs STANDARD "
            "(USD, list prices; months and snapshots in STANDARD)",
            f"{deep:.6f}", f"{standard:.6f}", ratio(deep, standard), "", "",
        ),
        (
            "  the same in GLACIER_IR vs STANDARD",
            f"{glacier_ir:.6f}", f"{standard:.6f}", ratio(glacier_ir, standard), "", "",
        ),
        (
            f"thaw one unit ({thaws[0]['to_ask']} of its objects) from DEEP_ARCHIVE, "
            "standard tier vs bulk (USD)",
            f"{thaws[0]['estimated_usd']:.6f}", f"{thaws[1]['estimated_usd']:.6f}",
            ratio(thaws[0]["estimated_usd"], thaws[1]["estimated_usd"]), "", "",
        ),
    ]  # fmt: skip


async def list_sizes(endpoint: str, prefix: str) -> dict[str, int]:
    from aiobotocore.session import get_session

    sizes: dict[str, int] = {}
    async with get_session().create_client("s3", endpoint_url=endpoint) as s3:
        async for page in s3.get_paginator("list_objects_v2").paginate(
            Bucket=BUCKET, Prefix=prefix
        ):
            sizes.update((o["Key"], int(o["Size"])) for o in page.get("Contents", []))
    return sizes


def measure(work: Path, quick: bool) -> list[Row]:
    os.environ.update(CREDENTIALS)
    moto = Moto()
    try:
        with FaultProxy(moto.endpoint) as proxy:
            asyncio.run(make_bucket(moto.endpoint))
            rows = ship_rows(work, proxy, 60 if quick else 5000)
            rows += restore_rows(work, proxy, quick)
            rows += cold_rows(work, proxy, quick)
    finally:
        moto.stop()
    return rows


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--moto-server":
        serve_moto(int(sys.argv[2]))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small data, under a minute")
    args = ap.parse_args()
    print(f"coldkeep: {COLDKEEP}", flush=True)
    (ROOT / "bench" / ".data").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=ROOT / "bench" / ".data") as tmp:
        print_table(measure(Path(tmp), args.quick))


if __name__ == "__main__":
    main()
