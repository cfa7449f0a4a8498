"""A small fleet lake for the lake's tests, written as the export lays it out
(lakelayout.lake_key): two sites, two months each, one month in two
generations (the older of 500 rows: a count of 12 proves it was not read),
one file written by pyarrow without the ``tenant`` column another site's
table has (read by name: NULL there). Site ``2024`` looks like a number.

``build(put, scratch)`` writes every file through ``put(key, bytes)``: into a
folder remote (``folder_put``) or an S3 bucket (``S3Server.put_raw``).
"""

from __future__ import annotations

import calendar
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb

from coldkeep.core.remote.lakelayout import RAW, lake_key

GEN = 1_775_000_000_000  # a generation (ms) of the bucket's clock
SITES = ("2024", "web-1")
MONTHS = ("2026-02", "2026-03")


@dataclass(frozen=True)
class Month:
    site: str
    month: str
    generation: int
    rows: int
    pyarrow: bool = False  # written by pyarrow, without the tenant column

    @property
    def key(self) -> str:
        sha = hashlib.sha256(f"{self.site}/{self.month}/{self.generation}".encode()).hexdigest()
        return lake_key(self.site, self.month, self.generation, sha)


LAKE = (
    Month("2024", "2026-02", GEN, 30),
    Month("2024", "2026-03", GEN, 500),  # replaced: never read
    Month("2024", "2026-03", GEN + 60_000, 12),
    Month("web-1", "2026-02", GEN, 20),
    Month("web-1", "2026-03", GEN + 1, 9, pyarrow=True),
)
OLD = LAKE[1]
# Rows per (site, month) as a reader of the newest files counts them.
COUNTS = {
    ("2024", "2026-02"): 30,
    ("2024", "2026-03"): 12,
    ("web-1", "2026-02"): 20,
    ("web-1", "2026-03"): 9,
}


def webhooks(rows: int) -> int:
    """The rows of kind webhook_event in a month of ``rows`` (every third)."""
    return (rows + 2) // 3


def month_ms(month: str) -> int:
    return calendar.timegm((int(month[:4]), int(month[5:]), 1, 0, 0, 0)) * 1000


def _duckdb_file(m: Month, path: Path) -> None:
    """The export's columns: the events table's and ``coldkeep_raw`` (one row
    holding a value its column could not)."""
    raw = json.dumps({"payload": {"type": "text", "value": "\\xff"}})
    con = duckdb.connect()
    try:
        con.execute(
            f"""COPY (
                SELECT i::BIGINT AS id, ({month_ms(m.month)} + i * 1000)::BIGINT AS ts,
                    CASE WHEN i % 3 = 0 THEN 'webhook_event' ELSE 'login' END AS kind,
                    't' || (i % 4) AS tenant,
                    CASE WHEN i = 1 THEN NULL ELSE encode('p' || i) END AS payload,
                    CASE WHEN i = 1 THEN '{raw}' END AS {RAW}
                FROM range({m.rows}) r(i)
            ) TO '{path}' (FORMAT parquet, COMPRESSION zstd)"""
        )
    finally:
        con.close()


def _pyarrow_file(m: Month, path: Path) -> None:
    import pyarrow as pa  # type: ignore[import-untyped, import-not-found, unused-ignore]
    import pyarrow.parquet as pq  # type: ignore[import-untyped, import-not-found, unused-ignore]

    n = range(m.rows)
    table = pa.table(
        {
            "id": pa.array(list(n), pa.int64()),
            "ts": pa.array([month_ms(m.month) + i * 1000 for i in n], pa.int64()),
            "kind": pa.array(["webhook_event" if i % 3 == 0 else "login" for i in n]),
            "payload": pa.array([f"p{i}".encode() for i in n], pa.binary()),
            RAW: pa.array([None for _ in n], pa.string()),
        }
    )
    pq.write_table(table, path, compression="zstd")


def build(put: Callable[[str, bytes], None], scratch: Path) -> None:
    """Every file of ``LAKE`` written, then handed to ``put`` at its key."""
    for i, m in enumerate(LAKE):
        path = scratch / f"lake-{i}.parquet"
        (_pyarrow_file if m.pyarrow else _duckdb_file)(m, path)
        put(m.key, path.read_bytes())


def folder_put(root: Path) -> Callable[[str, bytes], None]:
    def put(key: str, data: bytes) -> None:
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(data)

    return put
