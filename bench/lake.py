"""The fleet's lake: a month written as Parquet beside the ``sqlite3`` CLI writing
it as CSV, its size beside the SQLite month's, and ``coldkeep query --fleet``
over a fleet's months beside what an operator would do without the lake:
fetch every site's SQLite months and query them.

    python bench/lake.py [--quick] [--rows N] [--sites N]

The data: 12 month databases of ``--rows`` rows each (1,000,000; 5,000 with
--quick), the demo's event mix (its kinds, units and payloads), written as a
pass writes them. Each month is written as Parquet once (what a ship does) and
packed once (as a ship keeps a month); every one of ``--sites`` sites (10; 3
with --quick) gets both in moto's S3 server, the packed months where ship
puts them and the Parquet in the lake. Requests to the fleet pass a counting
proxy (tests/s3kit's ``FaultProxy``).

Rows:
  a month as Parquet     lakeexport.write_parquet on one month, in this process
                         (rows/s), against ``sqlite3 -csv`` writing the same
                         rows to a file (best of three each; one with --quick)
  its size               the Parquet's bytes against the SQLite month's, and the
                         month packed as ship keeps it
  GROUP BY kind, fleet   ``coldkeep query --fleet`` (the whole command) against
                         every site's month snapshots fetched (GET), inflated
                         and queried by DuckDB's SQLite reader, in one process;
                         both answers compared
  a lookup in one site's ``query --fleet --sites S --from M --to M`` by id: the
  month                  lake objects the server was asked for

Targets: >= 1,000,000 rows/s; Parquet <= 25 % of the month; the fleet's GROUP
BY >= 5x faster than fetching the months; the lookup reads <= 2 objects.
"""

from __future__ import annotations

import argparse
import asyncio
import calendar
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb
from files import COLDKEEP
from remote import BUCKET, CREDENTIALS, Moto, make_bucket
from report import Row, met, print_table

from coldkeep.core.base.cancel import CancelToken
from coldkeep.core.events.duckquery import CONFIG, extension
from coldkeep.core.events.lakeexport import write_parquet
from coldkeep.core.ops.demo import ARCHIVED_KINDS, LIVE_KINDS
from coldkeep.core.remote import monthgz
from coldkeep.core.remote.lakelayout import lake_key

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from s3kit.proxy import FaultProxy  # noqa: E402 - the test kit's proxy, for its counts

PREFIX = "fleet"
MONTHS = [f"2026-{m:02d}" for m in range(1, 13)]
GROUP = "SELECT kind, count(*) AS n FROM events GROUP BY kind ORDER BY kind"
SCHEMA = (
    "CREATE TABLE events (id INTEGER PRIMARY KEY, ts INTEGER NOT NULL, "
    "kind TEXT NOT NULL, unit TEXT NOT NULL, payload TEXT NOT NULL)"
)


def write_month(path: Path, month: str, rows: int, first_id: int, rnd: random.Random) -> None:
    """A month database as a pass writes one (WAL; the live table's schema), of
    the demo's mix."""
    year, mon = int(month[:4]), int(month[5:])
    start = calendar.timegm((year, mon, 1, 0, 0, 0)) * 1000
    span = (calendar.timegm((year + mon // 12, mon % 12 + 1, 1, 0, 0, 0)) * 1000) - start
    kinds = list(ARCHIVED_KINDS + LIVE_KINDS)
    pool = [
        json.dumps({"run": rnd.randint(1, 99999), "ok": rnd.random() < 0.9}) for _ in range(997)
    ]
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute(SCHEMA)
        db.executemany(
            "INSERT INTO events VALUES (?, ?, ?, ?, ?)",
            (
                (
                    first_id + i,
                    start + i * span // rows,
                    rnd.choice(kinds),
                    f"unit-{rnd.randrange(240):04d}",
                    rnd.choice(pool),
                )
                for i in range(rows)
            ),
        )
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def best(runs: int, fn: object) -> float:
    assert callable(fn)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def export_rows(work: Path, months: dict[str, Path], rows: int, rounds: int) -> list[Row]:
    db = months[MONTHS[0]]
    out, scratch, csv = work / "one.parquet", work / "one.scratch", work / "one.csv"

    def ours() -> None:
        out.unlink(missing_ok=True)
        scratch.unlink(missing_ok=True)
        write_parquet(db, "events", out, scratch)

    def theirs() -> None:
        with csv.open("wb") as f:
            subprocess.run(
                ["sqlite3", "-csv", str(db), "SELECT * FROM events"], stdout=f, check=True
            )

    ck, anchor = best(rounds, ours), best(rounds, theirs)
    rate = rows / ck
    packed = work / "one.db.gz"
    monthgz.pack(db, packed, root=work, cancel=CancelToken())
    size, db_size = out.stat().st_size, db.stat().st_size
    return [
        (
            f"a month as Parquet ({rows:,} rows), rows/s",
            f"{rate:,.0f}",
            f"sqlite3 -csv {rows / anchor:,.0f}",
            f"{anchor / ck:.1f}x",
            ">= 1,000,000",
            met(rate >= 1_000_000),
        ),
        (
            "  its size vs the SQLite month (the demo's mix)",
            f"{size / db_size:.1%}",
            f"packed (ship) {packed.stat().st_size / db_size:.1%}",
            f"{size / packed.stat().st_size:.2f}x",
            "<= 25 %",
            met(size <= 0.25 * db_size),
        ),
    ]


def fill_bucket(endpoint: str, work: Path, months: dict[str, Path], sites: int) -> int:
    """Every site's months in the bucket, packed where ship puts them and as
    Parquet in the lake; the rows of one site."""
    import boto3

    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    rows = 0
    for n, (month, db) in enumerate(sorted(months.items())):
        pq, gz = work / f"{month}.parquet", work / f"{month}.db.gz"
        rows += write_parquet(db, "events", pq, work / f"{month}.scratch")
        got = monthgz.pack(db, gz, root=work, cancel=CancelToken())
        sha = got.plain.sha256
        for s in range(sites):
            site = f"site-{s:02d}"
            body = pq.read_bytes()
            s3.put_object(
                Bucket=BUCKET, Key=f"{PREFIX}/{lake_key(site, month, 10**12 + n, sha)}", Body=body
            )
            key = f"{PREFIX}/{site}/events/{month}.{sha[:12]}.db.gz"
            s3.put_object(Bucket=BUCKET, Key=key, Body=gz.read_bytes())
        pq.unlink()
        gz.unlink()
    return rows


def fleet_query(proxy: FaultProxy, sql: str, *args: str) -> tuple[float, list[dict[str, object]]]:
    cmd = [
        str(COLDKEEP), "query", "--fleet", sql, "--json", "--remote", f"s3://{BUCKET}/{PREFIX}",
        "--endpoint-url", proxy.endpoint, "--region", "us-east-1", *args,
    ]  # fmt: skip
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    took = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"coldkeep query --fleet failed: {out.stderr.strip()}")
    return took, [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def fetched_and_queried(
    endpoint: str, work: Path, sites: int
) -> tuple[float, list[tuple[str, int]]]:
    """Without the lake: every site's month snapshots fetched, inflated and
    queried together by DuckDB's SQLite reader."""
    import boto3

    t0 = time.perf_counter()
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    folder = Path(tempfile.mkdtemp(dir=work))
    dbs = []
    for s in range(sites):
        listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{PREFIX}/site-{s:02d}/events/")
        for obj in listed.get("Contents", []):
            gz = folder / "m.db.gz"
            s3.download_file(BUCKET, obj["Key"], str(gz))
            db = folder / f"{len(dbs)}.db"
            with db.open("wb") as f:
                monthgz.unpack(gz.read_bytes(), f, CancelToken())
            dbs.append(db)
    # coldkeep's own settings: DuckDB 1.5.5 answers every month from the first
    # without them (duckquery.CONFIG).
    con = duckdb.connect(config=CONFIG)
    con.execute(f"LOAD '{extension()}'")
    for i, db in enumerate(dbs):
        con.execute(f"ATTACH '{db}' AS m{i} (TYPE sqlite, READ_ONLY)")
    union = " UNION ALL ".join(f"SELECT kind FROM m{i}.events" for i in range(len(dbs)))
    got = con.execute(
        f"SELECT kind, count(*) FROM ({union}) GROUP BY kind ORDER BY kind"
    ).fetchall()
    took = time.perf_counter() - t0
    con.close()
    for p in folder.iterdir():
        p.unlink()
    folder.rmdir()
    return took, [(str(k), int(n)) for k, n in got]


def fleet_rows(work: Path, months: dict[str, Path], sites: int, rounds: int) -> list[Row]:
    os.environ.update(CREDENTIALS)
    moto = Moto()
    try:
        asyncio.run(make_bucket(moto.endpoint))
        per_site = fill_bucket(moto.endpoint, work, months, sites)
        with FaultProxy(moto.endpoint) as proxy:
            ours = [fleet_query(proxy, GROUP) for _ in range(rounds)]
            took = min(t for t, _ in ours)
            answer = [(str(r["kind"]), int(str(r["n"]))) for r in ours[0][1]]
            base, want = min(
                (fetched_and_queried(moto.endpoint, work, sites) for _ in range(rounds)),
                key=lambda r: r[0],
            )
            if answer != want:
                raise SystemExit(f"the answers differ: {answer} vs {want}")
            proxy.reset_counts()
            month = MONTHS[5]
            _, found = fleet_query(
                proxy, "SELECT count(*) AS n FROM events WHERE id = 17", "--sites", "site-01",
                "--from", month, "--to", month,
            )  # fmt: skip
            lake = {
                x.path
                for x in proxy.exchanges
                if "/lake/" in x.path and x.method in ("GET", "HEAD")
            }
    finally:
        moto.stop()
    total = per_site * sites
    return [
        (
            f"GROUP BY kind, {sites} sites x 12 months x {total // sites // 12:,} rows",
            f"{took:.2f} s",
            f"months fetched + queried {base:.2f} s",
            f"{base / took:.1f}x",
            ">= 5x",
            met(base / took >= 5),
        ),
        (
            "a lookup by id, one site's month: lake objects read",
            f"{len(lake)} ({len(found)} row)",
            "-",
            "-",
            "<= 2",
            met(len(lake) <= 2),
        ),
    ]


def measure(
    work: Path, quick: bool, rows: int | None = None, sites: int | None = None
) -> list[Row]:
    rows = rows or (5_000 if quick else 1_000_000)
    sites = sites or (3 if quick else 10)
    rounds = 1 if quick else 3
    rnd = random.Random(47)
    months = {}
    for n, month in enumerate(MONTHS):
        months[month] = work / f"{month}.db"
        write_month(months[month], month, rows, 1 + n * rows, rnd)
    out = export_rows(work, months, rows, rounds)
    out += fleet_rows(work, months, sites, rounds)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rows", type=int, help="rows a month (default 1,000,000; 5,000 quick)")
    ap.add_argument("--sites", type=int, help="sites (default 10; 3 quick)")
    args = ap.parse_args()
    (ROOT / "bench" / ".data").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=ROOT / "bench" / ".data") as tmp:
        print_table(measure(Path(tmp), args.quick, args.rows, args.sites))


if __name__ == "__main__":
    main()
