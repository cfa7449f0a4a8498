"""A stand-in for the application: a separate process writing to the live events
table at a steady rate while coldkeep works, the way a busy service would.

    python tests/appwriter.py DB RATE MAX_ID SEED [tick]

Inserts fill every column of the table (ts, kind and payload by name, the rest by
declared type), so it works on the tests' schema and the demo's. Each write is its
own short transaction (busy_timeout 5 s, synchronous NORMAL, WAL):
inserts of every kind (half of them old enough to be archivable at once) and
updates of random existing rows. It runs until stdin closes, then prints one JSON
document: every write that took effect, every error, and each commit's latency
measured from when it was due (open loop), with that time on the system-wide
monotonic clock.
Used by the tests (no write may fail or vanish) and by bench/events.py (latency).
"""

from __future__ import annotations

import json
import random
import sqlite3
import sys
import threading
import time

KINDS = ("webhook_event", "ci_completed", "recheck_noop", "pr_closed", "anomaly")
DAY_MS = 86_400_000


def main() -> None:
    db_path, rate, max_id, seed = (
        sys.argv[1],
        float(sys.argv[2]),
        int(sys.argv[3]),
        int(sys.argv[4]),
    )
    tick = sys.argv[5:] == ["tick"]  # a line per committed write, for tests to pace on
    rnd = random.Random(seed)
    db = sqlite3.connect(db_path, timeout=5.0, isolation_level=None)
    db.execute("PRAGMA synchronous = NORMAL")
    columns = [(r[1], str(r[2]).upper()) for r in db.execute("PRAGMA table_info(events)")][1:]
    names = ", ".join(c for c, _ in columns)
    marks = ", ".join("?" * len(columns))

    def fill(name: str, decl: str, n: int, ts: int) -> object:
        known = {"ts": ts, "kind": rnd.choice(KINDS), "payload": f"app-{n}"}
        if name in known:
            return known[name]
        return n / 3 if "REAL" in decl else n if "INT" in decl else f"app-{n}"

    stop = threading.Event()

    def stop_at_eof() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=stop_at_eof, daemon=True).start()
    writes: list[list[object]] = []
    errors: list[str] = []
    latencies: list[list[float]] = []  # [when (CLOCK_MONOTONIC, system-wide), ms]
    print("started", flush=True)
    now_ms = time.time_ns() // 1_000_000
    next_at = time.monotonic()
    n = 0
    while not stop.is_set():
        n += 1
        scheduled = next_at
        try:
            db.execute("BEGIN IMMEDIATE")
            if n % 2:
                ts = now_ms - (rnd.randint(40, 100) * DAY_MS if n % 4 == 1 else 0)
                row = tuple(fill(name, decl, n, ts) for name, decl in columns)
                cur = db.execute(f"INSERT INTO events ({names}) VALUES ({marks})", row)
                db.execute("COMMIT")
                writes.append(["ins", cur.lastrowid, *row])
                if tick:
                    print("w", flush=True)
            else:
                target = rnd.randint(1, max_id)
                payload = f"upd-{n}"
                cur = db.execute("UPDATE events SET payload = ? WHERE id = ?", (payload, target))
                db.execute("COMMIT")
                if cur.rowcount == 1:
                    writes.append(["upd", target, payload])
                if tick:
                    print("w", flush=True)
        except sqlite3.Error as err:
            errors.append(f"{type(err).__name__}: {err}")
            if db.in_transaction:
                db.execute("ROLLBACK")
        # Open loop: latency counts from when the write was due, so writes that
        # queued behind a blocked one count their wait too.
        latencies.append([scheduled, (time.monotonic() - scheduled) * 1000])
        next_at += 1 / rate
        stop.wait(max(0.0, next_at - time.monotonic()))
    print(json.dumps({"writes": writes, "errors": errors, "latencies_ms": latencies}), flush=True)


if __name__ == "__main__":
    main()
