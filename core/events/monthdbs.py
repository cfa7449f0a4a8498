"""The month archive databases (``archive_root/events/<YYYY-MM>.db``) as the event
mover uses them: created (under a temporary name, renamed into place) and
checked (``quick_check``, the month schema's version) on first use, the next
one prepared ahead on a thread of its own, attached to each of the mover's
live connections under the same name, their WALs fsynced on a thread while
the mover goes on, detached when idle.

Invariants:
- At most MAX_ATTACHED attached at a time (SQLite's limit is 10), the least
  recently used detached first; detaching the last connection checkpoints a
  month's WAL.
- A month DB that cannot be opened or fails its check is refused for the run
  (its rows stay live); one this run created that holds nothing is removed.
"""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from collections.abc import Callable, Iterable
from concurrent import futures
from contextlib import suppress
from pathlib import Path

from ..base.durable import fsync
from ..base.fsutil import ensure_dir, fsync_dir, rename_noreplace, unlink_if_present
from ..base.ioerror import describe, naming
from ..base.layout import partial_of
from ..base.space import OutOfSpace, out_of_space
from .eventschema import EventSchema, check_month_version, next_month, q

# Month DBs attached to the live connection at once (SQLite's limit is 10).
MAX_ATTACHED = 8


# A month no batch has used for this many batches is detached (with a closer:
# its checkpoint then runs during the run, not all of them at its end). More
# than the one batch read ahead, so that a month is not detached between its
# copy and its delete.
IDLE_BATCHES = 4


# No memory-mapped I/O on live or the month DBs (set to 0 whatever SQLite's build
# default): a read error on a mapped page is a SIGBUS, which kills coldkeep (and a
# scheduler with it) without a word, where read() gives SQLITE_IOERR and the phase
# stops with an error naming the database (tests/faults/test_io_errors.py). A
# 1 GiB map bought nothing measurable: bench/events.py, 7 runs each, 137-160k
# rows/s mapped, 146-166k not, the writer's p99 alike.
MMAP_BYTES = 0


def uri_of(path: Path) -> str:
    return "file:" + urllib.parse.quote(str(path))


class MonthDbs:
    """The month archive databases: created and checked on first use, attached to
    each of the mover's live connections under the same name (at most
    MAX_ATTACHED at a time, the least recently used detached first; detaching the
    last connection checkpoints a month's WAL)."""

    def __init__(
        self,
        conns: Iterable[sqlite3.Connection],
        events_dir: Path,
        schema: EventSchema,
        closer: futures.Executor | None = None,
        *,
        ahead: futures.Executor | None = None,
        last_month: str | None = None,
    ) -> None:
        self.conns = tuple(conns)
        # Where a detached month's last connection is closed (None: at once).
        self.closer = closer
        # Where the month after each one used is prepared, while the mover works
        # on that one (None: each month prepared when first used), up to
        # ``last_month``, the last that can hold eligible rows.
        self.ahead = ahead
        self.last_month = last_month
        self.prepared: dict[str, futures.Future[bool]] = {}  # ... and whether it is new
        self.followed: set[str] = set()  # months whose next month was looked at
        self.dir = events_dir
        self.schema = schema
        self.refused: dict[str, str] = {}
        self.checked: set[str] = set()
        self.attached: dict[str, str] = {}  # month -> schema name, least recently used first
        self.clock = 0  # the batch being read, set by the mover
        self.used: dict[str, int] = {}  # month -> the last batch it was attached for
        # Months attached since their WAL's name was last made durable: the
        # first attach (or one after a detach) may create the -wal file.
        self.new_wal: set[str] = set()

    def path(self, month: str) -> Path:
        return self.dir / f"{month}.db"

    def alias(self, month: str) -> str | None:
        """The schema name ``month`` is attached under; None if it is refused.
        Never inside a transaction (ATTACH and DETACH cannot run there)."""
        if month in self.refused:
            return None
        self.used[month] = self.clock
        if month in self.attached:
            self.attached[month] = self.attached.pop(month)
            # Not at its first use: that batch's fsyncs come first.
            self._prepare_next(month)
            return self.attached[month]
        name = "m_" + month.replace("-", "_")
        try:
            if month not in self.checked:
                self._prepared(month)
                self.checked.add(month)
            if len(self.attached) >= MAX_ATTACHED:
                self._detach(next(iter(self.attached)))
            for done, conn in enumerate(self.conns):
                try:
                    conn.execute(f"ATTACH DATABASE ? AS {name}", (uri_of(self.path(month)),))
                except sqlite3.DatabaseError:
                    for attached in self.conns[:done]:
                        attached.execute(f"DETACH DATABASE {name}")
                    raise
        except (sqlite3.DatabaseError, OSError) as err:
            if out_of_space(err):  # not this month's fault: every month would fail
                raise OutOfSpace(self.path(month), err, doing="preparing") from err
            why = describe(err) if isinstance(err, sqlite3.Error) else str(err)
            self.refused[month] = (
                f"{self.path(month)}: {why}; this month is refused, its rows stay live "
                "(check or restore that file)"
            )
            return None
        for conn in self.conns:
            # NORMAL: a commit writes its WAL frames without an fsync; step 2
            # makes them durable itself, off the mover's thread (``sync``).
            conn.execute(f"PRAGMA {name}.synchronous = NORMAL")
            conn.execute(f"PRAGMA {name}.mmap_size = {MMAP_BYTES}")
        self.attached[month] = name
        self.new_wal.add(month)
        return name

    def sync(self, months: list[str]) -> Callable[[], None]:
        """What makes the months' commits so far durable, to run on any thread:
        an fsync of each one's WAL (opened now, so that a later detach, which
        checkpoints and removes it, cannot swap the file), and of the events
        folder when a WAL may be new (what synchronous=FULL would have done at
        the commit)."""
        fds: list[tuple[Path, int]] = []
        try:
            for month in months:
                wal = self.path(month).with_name(f"{month}.db-wal")
                with naming(wal), suppress(FileNotFoundError):
                    # No WAL: nothing written since the last checkpoint (which
                    # synced the DB), or this batch wrote nothing there.
                    fds.append((wal, os.open(wal, os.O_RDONLY | os.O_CLOEXEC)))
        except BaseException:
            for _wal, fd in fds:
                os.close(fd)
            raise
        named = bool(self.new_wal.intersection(months))
        self.new_wal.difference_update(months)

        def run() -> None:
            try:
                for wal, fd in fds:
                    with naming(wal):
                        fsync(fd, "events.month_copied")
                if named:
                    fsync_dir(self.dir, root=self.dir.parent, site="events.month_wal_named")
            finally:
                for _wal, fd in fds:
                    os.close(fd)

        return run

    def _prepared(self, month: str) -> None:
        """``_prepare`` the month, unless it was prepared ahead. A preparation
        ahead that failed is tried again here, so that its error is the one
        the month is refused with."""
        ahead = self.prepared.get(month)
        if ahead is not None:
            futures.wait([ahead])
            if ahead.exception() is None:
                return
        self._prepare(self.path(month))

    def _prepare_next(self, month: str) -> None:
        """Prepare the month after ``month`` on the ahead thread: with rows in
        id order by time, the next month's first batch then finds it ready (a
        new month DB takes several fsyncs). One no batch used is removed at
        ``close`` if it was new."""
        if self.ahead is None or self.last_month is None or month in self.followed:
            return
        self.followed.add(month)
        after = next_month(month)
        if after > self.last_month or after in self.checked or after in self.prepared:
            return
        self.prepared[after] = self.ahead.submit(self._prepare, self.path(after))

    def _prepare(self, path: Path) -> bool:
        """Create or check one month DB; True when it is new."""
        # The events folder and the month DBs live in the archive: reached
        # beneath it, its name made durable when it is new.
        root = self.dir.parent
        ensure_dir(path.parent, root=root)
        if not path.exists() and self._create(path):
            return True
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            check_month_version(conn, path)
            conn.execute("PRAGMA journal_mode = WAL")
            quick_check(conn)
            check_month_version(conn, path, stamp=True)
            table = self.schema.table
            have = [r[1] for r in conn.execute(f"PRAGMA main.table_info({q(table)})")]
            if not have:
                conn.execute(self.schema.create_sql)
            else:
                # The live table grew a column since this month was created.
                for col in self.schema.columns:
                    if col not in have:
                        conn.execute(f"ALTER TABLE {q(table)} ADD COLUMN {q(col)}")
        finally:
            conn.close()
        return False

    def _create(self, path: Path) -> bool:
        """A new month DB, made whole under a temporary name and renamed into
        place, so that no month DB is ever found without its table (one is
        made on the ahead thread while steps are announced, where a crash can
        come). Closing it checkpoints it, with SQLite's fsyncs; its name is
        made durable with its WAL's, before any of its rows leaves live
        (``sync``). False when a month DB took the name meanwhile."""
        root = self.dir.parent
        tmp = partial_of(path)
        remove_month(tmp, root)  # what an interrupted run left
        try:
            conn = sqlite3.connect(tmp, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                check_month_version(conn, tmp, stamp=True)
                conn.execute(self.schema.create_sql)
            finally:
                conn.close()
            renamed = rename_noreplace(tmp, path, root=root) == "renamed"
        except BaseException:
            remove_month(tmp, root)
            raise
        if not renamed:
            remove_month(tmp, root)
        return renamed

    def _detach(self, month: str) -> None:
        """Detach a month. The last connection to a WAL database to close
        checkpoints it (copying every page written since it was attached, and
        fsyncs): with a closer, a connection of its own opened first stays, and
        is closed there, off the mover's thread."""
        name = self.attached.pop(month)
        keeper = self._keeper(month) if self.closer is not None else None
        for conn in self.conns:
            conn.execute(f"DETACH DATABASE {name}")
        if keeper is not None and self.closer is not None:
            self.closer.submit(keeper.close)

    def _keeper(self, month: str) -> sqlite3.Connection | None:
        """A connection to the month DB holding its WAL open (None: it could not
        be opened; the detach then checkpoints on this thread)."""
        try:
            keeper = sqlite3.connect(
                uri_of(self.path(month)), uri=True, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error:
            return None
        try:
            keeper.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
            keeper.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        except sqlite3.Error:
            keeper.close()
            return None
        return keeper

    def detach_idle(self) -> None:
        """Detach the months no batch has used for IDLE_BATCHES batches (only
        with a closer: without one the checkpoint would run here). Between
        batches only: no transaction may be open on any connection."""
        if self.closer is None:
            return
        for month in [m for m in self.attached if self.used[m] <= self.clock - IDLE_BATCHES]:
            self._detach(month)

    def close(self) -> None:
        for month in list(self.attached):
            self._detach(month)
        # Months prepared ahead that no batch used: those this run created hold
        # nothing, and go.
        for month, ahead in self.prepared.items():
            if month in self.used:
                continue
            futures.wait([ahead])
            if ahead.exception() is None and ahead.result():
                remove_month(self.path(month), self.dir.parent)


def remove_month(path: Path, root: Path) -> None:
    """Remove a month DB (or its temporary) this run created that holds
    nothing, with its WAL and wal-index."""
    for name in (path.name, f"{path.name}-wal", f"{path.name}-shm"):
        unlink_if_present(path.with_name(name), root=root)


def quick_check(conn: sqlite3.Connection) -> None:
    ok = conn.execute("PRAGMA quick_check").fetchone()[0]
    if ok != "ok":
        raise sqlite3.DatabaseError(f"quick_check says {ok}")
