"""SQL over archived events without restoring: ``coldkeep query`` beside what an
operator would build by hand, the ``sqlite3`` CLI on one database holding the
same rows.

    python bench/query.py [--quick] [--rows N]

The data: 12 month databases of ``--rows`` rows each (1,000,000; 5,000 with
--quick), shaped as coldkeep writes them (WAL, the live table's schema), and a
live table of a tenth as many newer rows; the anchor's copy is every row in one
database. Each timing is the best of three (one with --quick), each a fresh
process (the CLI's start-up counted on both sides).

Rows:
  GROUP BY kind over the year  ``coldkeep query`` against ``sqlite3 merged.db``
  a lookup by id in one month  ``coldkeep query --from M --to M`` (each
                               engine) against ``sqlite3`` on that month's
                               database; and the engines alone, in this
                               process (open, run, close: what the console's
                               Events screen pays, without the CLI's start-up)
  a lookup in a remote-only    that month's snapshot packed on moto's S3 server
  month                        (as ship leaves it), read through the SQLite
                               engine's remote VFS: bytes fetched against the
                               pages SQLite read and the object's size
  the Events screen            the console headless on the same site: E to its
                               first chart (the last 90 days: three months and
                               the live table), and the next page of rows read
                               and shown as the cursor reaches the end
  the writer during queries    tests/appwriter.py at 200 writes/s on the live
                               database while the GROUP BY runs three times: its
                               commit p99, and whether the queries left the live
                               database's WAL as the writer alone would
  a pass beside queries        a pass moving the live table's rows into a month,
                               alone (on a copy), then on the site while the
                               GROUP BY runs back to back through the CLI: how
                               much longer the pass took (it waits for a query
                               reading), each query's time against alone (it
                               waits for one batch's commit), and how many
                               answers were wrong or raced
"""

from __future__ import annotations

import argparse
import asyncio
import calendar
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from events import Writer
from files import COLDKEEP
from remote import CREDENTIALS, Moto
from report import Row, met, pct, print_table
from textual.widgets import DataTable

from coldkeep.core.base.cancel import CancelToken
from coldkeep.core.base.config import load_settings
from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.events.query import ENGINES, Engine, EventsQuery, RemoteMonth, parse_range
from coldkeep.core.remote import monthgz
from coldkeep.core.remote.monthvfs import PAGE, RemoteMonths
from coldkeep.tui.console.app import ColdkeepApp
from coldkeep.tui.console.kit.pilot import settle
from coldkeep.tui.console.screens.events import EventsScreen
from coldkeep.tui.console.screens.eventsread import PAGE as PAGE_ROWS
from coldkeep.tui.console.screens.eventsread import Read

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("webhook_event", "ci_completed", "recheck_noop", "pr_closed", "anomaly", "login")
SCHEMA = (
    "CREATE TABLE events (id INTEGER PRIMARY KEY, ts INTEGER, kind TEXT NOT NULL, payload TEXT)"
)
GROUP = "SELECT kind, count(*) FROM events GROUP BY kind ORDER BY kind"


def _fill(db: sqlite3.Connection, first_id: int, n: int, start_ms: int, step_ms: int) -> None:
    kinds = " ".join(f"WHEN {i} THEN '{k}'" for i, k in enumerate(KINDS))
    db.execute(
        f"INSERT INTO events WITH RECURSIVE s(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM s "
        f"WHERE n + 1 < {n}) SELECT {first_id} + n, {start_ms} + n * {step_ms}, "
        f"CASE (n * 7919) % {len(KINDS)} {kinds} END, "
        f'printf(\'{{"req":"%x","ms":%d,"user":%d}}\', n * 2654435761 % 4294967296, '
        f"n % 997, n % 100000) FROM s"
    )


def build(work: Path, rows: int) -> Path:
    """The site (its config's path); its month databases, live table and, beside
    them, ``merged.db`` holding every row."""
    events = work / "archive" / "events"
    events.mkdir(parents=True)
    (work / "live").mkdir()
    for m in range(1, 13):
        with sqlite3.connect(events / f"2025-{m:02d}.db") as db:
            db.execute("PRAGMA journal_mode = WAL")
            db.execute(SCHEMA)
            db.execute("PRAGMA user_version = 1")
            start = calendar.timegm((2025, m, 1, 0, 0, 0)) * 1000
            _fill(db, (m - 1) * rows + 1, rows, start, 28 * 86_400_000 // rows)
    with sqlite3.connect(work / "state.db") as db:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute(SCHEMA)
        _fill(db, 12 * rows + 1, rows // 10, calendar.timegm((2026, 1, 1, 0, 0, 0)) * 1000, 1000)
    with sqlite3.connect(work / "merged.db") as db:
        db.execute(SCHEMA)
        for src in [*sorted(events.glob("*.db")), work / "state.db"]:
            db.execute(f"ATTACH '{src}' AS src")
            db.execute("INSERT INTO events SELECT * FROM src.events")
            db.commit()
            db.execute("DETACH src")
    config = work / "coldkeep.toml"
    config.write_text('live_root = "live"\narchive_root = "archive"\nstate_db = "state.db"\n')
    return config


def _best(cmd: list[str], rounds: int) -> tuple[float, str]:
    best, out = float("inf"), ""
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        best = min(best, time.perf_counter() - t0)
    return best, out


def _in_process(
    config: Path, engine: Engine, month: str, sql: str, rounds: int
) -> tuple[float, str]:
    """The engine alone, best of ``rounds``: open (the months attached), run, close."""
    settings = load_settings(config)
    best, out = float("inf"), ""
    for _ in range(rounds):
        t0 = time.perf_counter()
        run = EventsQuery(settings, parse_range(month, month), engine=engine)
        try:
            run.open()
            out = repr([r for b in run.run(sql).batches() for r in b])
        finally:
            run.close()
        best = min(best, time.perf_counter() - t0)
    return best, out


def _remote_lookup(db: Path, sql: str) -> tuple[int, int, int]:
    """``db``'s snapshot packed on moto's S3 server, as ship leaves it, ``sql``
    run on it through the remote VFS: bytes fetched, pages SQLite read, the
    object's size."""
    os.environ.update(CREDENTIALS)
    snap = db.with_name("snapshot.db")
    with sqlite3.connect(db) as src, sqlite3.connect(snap) as dst:
        src.backup(dst)  # as ship takes a month's snapshot
    gz = snap.with_name("snapshot.db.gz")
    packed = monthgz.pack(snap, gz, root=snap.parent, cancel=CancelToken())
    moto = Moto()
    try:
        import apsw
        import boto3

        client = boto3.client("s3", endpoint_url=moto.endpoint, region_name="us-east-1")
        client.create_bucket(Bucket="bench")
        path = "events/2025-06.000000000000.db.gz"
        client.upload_file(str(gz), "bench", f"p/site/{path}")
        etag = client.head_object(Bucket="bench", Key=f"p/site/{path}")["ETag"]
        remote = RemoteSettings(url="s3://bench/p", endpoint_url=moto.endpoint, site="site")
        reader = RemoteMonths(remote)
        size = packed.packed.bytes
        try:
            con = apsw.Connection(
                ":memory:", flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_URI
            )
            # As ship records it: its sha256, and the version its HEAD said.
            shipped = RemoteMonth(
                path, size, packed.packed.sha256, etag, plain_bytes=packed.plain.bytes,
                plain_sha256=packed.plain.sha256, seek_points=packed.points,
            )  # fmt: skip
            uri = reader.attach_uri("2025-06", shipped)
            con.execute("ATTACH ? AS m", (uri,))
            assert con.execute(sql.replace("FROM events", "FROM m.events")).fetchall()
            con.close()
            return reader.fetched_bytes, reader.pages_read, size
        finally:
            reader.close()
    finally:
        moto.stop()
        snap.unlink()
        gz.unlink()


def _counts(text: str, sep: str | None) -> list[tuple[str, int]]:
    got = []
    for line in text.splitlines():
        parts = line.split(sep)
        if len(parts) == 2 and parts[1].strip().isdigit():
            got.append((parts[0].strip(), int(parts[1])))
    return got


def _writer_during(work: Path, config: Path, rows: int) -> tuple[float, bool, int]:
    """The writer's commit p99 (ms) while the GROUP BY runs three times, whether
    the WAL was no larger than before the queries plus what the writer wrote,
    and the writer's errors."""
    state = work / "state.db"
    writer = Writer(state, 200.0, 12 * rows + rows // 10)
    time.sleep(1.0)  # the writer's steady state before the queries
    t0 = time.monotonic()
    for _ in range(3):
        subprocess.run(
            [str(COLDKEEP), "query", GROUP, "--config", str(config)],
            capture_output=True,
            check=True,
        )
    t1 = time.monotonic()
    during, errors = writer.stop(t0, t1)
    with sqlite3.connect(state) as db:
        ok = db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    return pct(during, 99), ok, errors


def measure(work: Path, quick: bool, rows: int | None = None) -> list[Row]:
    n = rows or (5_000 if quick else 1_000_000)
    rounds = 1 if quick else 3
    print(f"building 12 months x {n:,} rows ...", flush=True)
    config = build(work, n)
    out: list[Row] = []
    ck = [str(COLDKEEP), "query", "--config", str(config)]
    ck_s, ck_out = _best([*ck, GROUP], rounds)
    group_s = ck_s
    cli_s, cli_out = _best(["sqlite3", str(work / "merged.db"), GROUP], rounds)
    assert _counts(ck_out, None) == _counts(cli_out, "|"), (ck_out, cli_out)
    out.append(
        (
            f"GROUP BY kind over 12 months x {n:,} rows (vs sqlite3 on one merged DB)",
            f"{ck_s:.2f} s",
            f"{cli_s:.2f} s",
            f"{ck_s / cli_s:.2f}x",
            "<= 1.0x",
            met(ck_s <= cli_s),
        )
    )
    target = 5 * n + n // 2
    one = f"SELECT * FROM events WHERE id = {target}"
    month_db = work / "archive" / "events" / "2025-06.db"
    cli_s, _ = _best(["sqlite3", str(month_db), one], rounds)
    for engine in ENGINES:
        ck_s, ck_out = _best(
            [*ck, "--engine", engine, "--from", "2025-06", "--to", "2025-06", one], rounds
        )
        assert str(target) in ck_out, ck_out
        out.append(_lookup_row(f"a lookup by id in one month, --engine {engine}", ck_s, cli_s))
    for engine in ENGINES:
        alone_s, alone_out = _in_process(config, engine, "2025-06", one, rounds)
        assert str(target) in alone_out, alone_out
        out.append(
            _lookup_row(f"a lookup by id in one month, {engine} engine alone", alone_s, cli_s)
        )
    fetched, pages, size = _remote_lookup(month_db, one)
    out.append(
        (
            "a lookup by id in a remote-only month: bytes fetched (vs pages read, object)",
            f"{fetched:,} B",
            f"{pages * PAGE:,} B of {size:,}",
            f"{fetched / (pages * PAGE):.2f}x",
            "<= 2.0x",
            met(fetched <= 2 * pages * PAGE),
        )
    )
    out += _events_screen(config)
    p99, ok, errors = _writer_during(work, config, n)
    out.append(
        (
            "the app's writer (200/s) during 3 GROUP BYs: commit p99",
            f"{p99:.1f} ms",
            "",
            "",
            "<= 25 ms",
            met(p99 <= 25 and ok and errors == 0),
        )
    )
    return out + _pass_beside_queries(work, config, group_s)


def _passed(config: Path) -> float:
    """A pass's time, through the CLI."""
    t0 = time.perf_counter()
    cmd = [str(COLDKEEP), "pass", "--config", str(config)]
    subprocess.run(cmd, capture_output=True, check=True)
    return time.perf_counter() - t0


def _said_wrong(what: str, passing: subprocess.Popen[bytes]) -> None:
    """A wrong answer is a defect to chase: what it was goes to stderr."""
    when = "during the pass" if passing.poll() is None else "after the pass ended"
    print(f"query.py: a GROUP BY {when} was wrong: {what}", file=sys.stderr, flush=True)


def _pass_beside_queries(work: Path, config: Path, query_s: float) -> list[Row]:
    """A pass moving the live table's rows (every kind, all of them older than
    30 days, into 2026-01) alone on a copy of the live database, then on the
    site while the GROUP BY runs back to back: the pass's time against alone,
    and the queries' (each answer's total checked: the rows do not change in
    number as they move)."""
    counts = {}
    for db_path in [work / "state.db", *sorted((work / "archive" / "events").glob("*.db"))]:
        with sqlite3.connect(db_path) as db:
            [(counts[db_path],)] = db.execute("SELECT count(*) FROM events").fetchall()
    live, total = counts[work / "state.db"], sum(counts.values())  # the writer's rows too
    moving = '\nmode = "on"\n[events]\nmin_age_days = 30\n'
    alone = work / "alone"
    (alone / "live").mkdir(parents=True)
    with sqlite3.connect(work / "state.db") as src, sqlite3.connect(alone / "state.db") as dst:
        src.backup(dst)
    (alone / "coldkeep.toml").write_text(config.read_text() + moving)
    alone_s = _passed(alone / "coldkeep.toml")
    config.write_text(config.read_text() + moving)
    # The months were made by hand: a manifest over them first, as after a move.
    rebuild = [str(COLDKEEP), "rebuild-manifest", "--config", str(config)]
    subprocess.run(rebuild, capture_output=True, check=True)
    cmd = [str(COLDKEEP), "query", "--config", str(config), GROUP]
    times: list[float] = []
    wrong = raced = 0
    t0 = time.perf_counter()
    passing = subprocess.Popen(
        [str(COLDKEEP), "pass", "--config", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pass_s = None
    while pass_s is None:
        q0 = time.perf_counter()
        run = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if passing.poll() is None:
            times.append(time.perf_counter() - q0)  # it ended during the pass
        if run.returncode:
            raced += "run the query again" in run.stderr
            if "run the query again" not in run.stderr:
                wrong += 1
                _said_wrong(f"exit {run.returncode}: {run.stderr.strip()}", passing)
        elif (got := sum(n for _, n in _counts(run.stdout, None))) != total:
            wrong += 1
            _said_wrong(f"{got:,} rows counted of {total:,}: {run.stdout.strip()!r}", passing)
        if pass_s is None and passing.poll() is not None:
            pass_s = time.perf_counter() - t0
    assert passing.wait() == 0
    return [
        (f"a pass moving {live:,} live rows beside GROUP BYs back to back (vs alone)",
         f"{pass_s:.2f} s", f"{alone_s:.2f} s", f"{pass_s / alone_s:.2f}x",
         "<= 2x alone + 5 s", met(pass_s <= 2 * alone_s + 5)),
        (f"GROUP BY during that pass: slowest of {len(times)} ended in it, {raced} raced, "
         f"{wrong} wrong (vs alone)", f"{max(times, default=0):.2f} s", f"{query_s:.2f} s",
         f"{max(times, default=0) / query_s:.2f}x", "0 wrong", met(wrong == 0)),
    ]  # fmt: skip


def _events_screen(config: Path) -> list[Row]:
    """The console's Events screen opened on the site, headless, its clock at
    the end of the live rows' month: from ``E`` to its chart drawn (the default
    range: the last 90 days, three of the twelve months and the live table),
    and the next 500 rows as the cursor reaches the end of those read."""
    now_ms = calendar.timegm((2026, 1, 31, 0, 0, 0)) * 1000
    drawn = asyncio.Event()
    shown = EventsScreen.show_counts

    def counted(self: EventsScreen, got: Read) -> None:
        shown(self, got)
        drawn.set()

    async def run() -> tuple[float, float]:
        app = ColdkeepApp(load_settings(config), clock=lambda: now_ms, watch_live=False)
        async with app.run_test(size=(120, 36)) as pilot:
            await settle(pilot)
            t0 = time.perf_counter()
            await pilot.press("E")
            await drawn.wait()
            chart = time.perf_counter() - t0
            await settle(pilot)
            table = app.screen.query_one("#events-rows", DataTable)
            t0 = time.perf_counter()
            table.move_cursor(row=table.row_count - 1)
            await settle(pilot)
            assert table.row_count > PAGE_ROWS, table.row_count
            return chart, time.perf_counter() - t0

    EventsScreen.show_counts = counted  # type: ignore[method-assign]
    try:
        chart, more = asyncio.run(run())
    finally:
        EventsScreen.show_counts = shown  # type: ignore[method-assign]
    return [
        ("Events screen: E to its first chart (the last 90 days)", f"{chart:.2f} s", "", "",
         "<= 1 s", met(chart <= 1.0)),
        ("Events screen: the next 500 rows, read and shown", f"{more * 1000:.0f} ms", "", "",
         "< 0.5 s (scrolling keeps up)", met(more < 0.5)),
    ]  # fmt: skip


def _lookup_row(what: str, ck_s: float, cli_s: float) -> Row:
    return (
        f"{what} (vs sqlite3 on that month's DB)",
        f"{ck_s * 1000:.0f} ms",
        f"{cli_s * 1000:.0f} ms",
        f"{ck_s / cli_s:.1f}x",
        "<= 50 ms",
        met(ck_s <= 0.05),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="5,000 rows a month, seconds")
    ap.add_argument("--rows", type=int, help="rows a month")
    args = ap.parse_args()
    (ROOT / "bench" / ".data").mkdir(exist_ok=True)
    if shutil.which("sqlite3") is None:
        sys.exit("bench/query.py needs the sqlite3 CLI (apt-get install sqlite3)")
    with tempfile.TemporaryDirectory(dir=ROOT / "bench" / ".data") as tmp:
        print_table(measure(Path(tmp), args.quick, args.rows))


if __name__ == "__main__":
    main()
