"""The event mover's checker: a second connection to live, on a thread of its
own, that counts the rows a DELETE would remove which are not identical to
their archived copy, on the DELETE's own snapshot (why that is sound:
movedelete.py). Only on a live DB in WAL mode.
"""

from __future__ import annotations

from concurrent import futures
from pathlib import Path
from typing import Any

from .eventschema import open_live
from .monthdbs import MMAP_BYTES


class Checker:
    """A second connection to live, and the thread it runs on: while the mover's
    DELETE runs, it counts the rows that are not identical to their archived
    copy, on the DELETE's snapshot (why that is sound: ``MoveDelete._delete_month``).
    Only on a live DB in WAL mode."""

    def __init__(self, db: Path, busy_timeout_s: float) -> None:
        self.conn = open_live(db, busy_timeout_s=busy_timeout_s, any_thread=True)
        self.conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
        self._thread = futures.ThreadPoolExecutor(1, thread_name_prefix="coldkeep-checker")

    def count(self, sql: str, args: list[Any]) -> futures.Future[int]:
        """Run ``SELECT count(*) …`` on the checker's thread, to completion (so
        that its read transaction is over when the result is in)."""
        return self._thread.submit(lambda: int(self.conn.execute(sql, args).fetchall()[0][0]))

    def close(self) -> None:
        self._thread.shutdown()
        self.conn.close()
