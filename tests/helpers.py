"""Test helpers: real temporary trees and realistic data."""

from __future__ import annotations

import hashlib
import json
import os
import random
import select
import signal
import sqlite3
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import clizygote
import pytest

from coldkeep.core.base.codec import gzip_header, read_gzip_header
from coldkeep.core.base.fsutil import take_lease
from coldkeep.core.base.layout import Layout
from coldkeep.core.files.gzfile import Roots as FileRoots

DAY_NS = 86_400 * 1_000_000_000


@dataclass
class Roots:
    """A live tree and an archive root side by side in a temp dir."""

    base: Path
    live: Path
    archive: Path

    @property
    def layout(self) -> Layout:
        return Layout(self.archive)

    @property
    def pair(self) -> FileRoots:
        """Where sources and gzips live, as the protocol's functions take them."""
        return FileRoots(self.live, self.archive)

    def write(self, relpath: str, data: bytes, *, age_days: float = 30.0) -> Path:
        path = self.live / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        mtime = time.time_ns() - int(age_days * DAY_NS)
        os.utime(path, ns=(mtime, mtime))
        return path


def write_raw(live: Path, raw: bytes, data: bytes, mtime_ns: int) -> None:
    """A file under ``live`` by its raw relpath bytes (any byte but ``/`` and NUL in
    a name), its folders made, its mtime set."""
    path = os.fsencode(live) + b"/" + raw
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    os.utime(path, ns=(mtime_ns, mtime_ns))


# A site that archives JSONL files two weeks old, small ones bundled as by
# default: a test appends the lines of [files] it changes, then its own tables.
JSONL_SITE = """live_root = "live"
archive_root = "archive"
mode = "on"

[files]
include = ["**/*.jsonl"]
min_age_days = 14
"""

# A site that archives every file a day old (a test adds the tables it needs).
EVERY_FILE = """live_root = "live"
archive_root = "archive"
mode = "on"
[files]
include = ["**"]
min_age_days = 1
"""


def write_old(site: Path, raw: bytes, data: bytes, mode: int | None = None) -> None:
    """A file of ``site``'s live tree by its raw relpath, 30 days old (the next
    pass archives it), with ``mode`` when given."""
    write_raw(site / "live", raw, data, time.time_ns() - 30 * DAY_NS)
    if mode is not None:
        os.chmod(os.fsencode(site / "live") + b"/" + raw, mode)


def jsonl(n_lines: int, seed: int = 0) -> bytes:
    """Realistic-looking event lines: compressible, not trivially so."""
    rnd = random.Random(seed)
    kinds = ["webhook_event", "ci_completed", "recheck_noop", "pr_closed"]
    return "".join(
        f'{{"id":{i},"ts":{1_700_000_000_000 + i * 977},"kind":"{rnd.choice(kinds)}",'
        f'"repo":"org/r{rnd.randint(1, 40)}","sha":"{rnd.getrandbits(160):040x}"}}\n'
        for i in range(n_lines)
    ).encode()


def gunzip(path: Path) -> bytes:
    """The system's gunzip, as an operator would check."""
    return subprocess.run(["gunzip", "-c", str(path)], check=True, capture_output=True).stdout


def gunzip_entry(archive: Path, entry: dict[str, Any]) -> bytes:
    """An entry's bytes through the system's gunzip: its gzip, or its member of a
    bundle (the bytes at its offset, as ``dd`` would cut them)."""
    path = archive / str(entry["gz_path"])
    offset, length = entry["member_offset"], entry["member_length"]
    if offset is None:
        return gunzip(path)
    with path.open("rb") as f:
        f.seek(int(offset))
        member = f.read(int(length))
    return subprocess.run(["gunzip", "-c"], input=member, check=True, capture_output=True).stdout


def per_file(config: Path) -> None:
    """A demo site's config with bundles off: every file takes the per-file
    protocol (the tests that count its steps file by file)."""
    text = config.read_text()
    assert "[files]\n" in text, config
    config.write_text(text.replace("[files]\n", "[files]\nbundle_below = 0\n", 1))


DAY_MS = 86_400_000
ARCHIVABLE = ("webhook_event", "ci_completed", "recheck_noop")
LIVE_ONLY = ("pr_closed", "anomaly")


def make_events_db(
    path: Path,
    n: int,
    *,
    now_ms: int,
    wal: bool = True,
    index: bool = True,
    seed: int = 1,
    days: int = 120,
) -> None:
    """A live state DB with ``n`` events spread over ``days`` days, ids in time order."""
    rnd = random.Random(seed)
    db = sqlite3.connect(path)
    if wal:
        db.execute("PRAGMA journal_mode = WAL")
    db.execute(
        "CREATE TABLE events (id INTEGER PRIMARY KEY, ts INTEGER, kind TEXT NOT NULL, "
        "payload TEXT, n REAL)"
    )
    if index:
        db.execute("CREATE INDEX events_kind_ts ON events (kind, ts)")
    start = now_ms - days * DAY_MS
    step = days * DAY_MS // max(n, 1)
    kinds = ARCHIVABLE + LIVE_ONLY
    with db:
        db.executemany(
            "INSERT INTO events (ts, kind, payload, n) VALUES (?, ?, ?, ?)",
            (
                (start + i * step, kinds[i % len(kinds)], f"p{rnd.getrandbits(40):x}", i / 7)
                for i in range(n)
            ),
        )
    db.close()


def all_event_rows(live: Path, events_dir: Path) -> list[tuple[object, ...]]:
    """Every row in live and in every month DB (a multiset, as a sorted list)."""
    rows: list[tuple[object, ...]] = []
    for db_path in [live, *sorted(events_dir.glob("*.db"))]:
        with sqlite3.connect(db_path) as db:
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",), db_path
            rows.extend(db.execute("SELECT id, ts, kind, payload, n FROM events"))
    return sorted(rows, key=repr)


def report_line(config: object, line: str) -> None:
    """A line for the end of the test run's output (conftest prints them)."""
    lines: list[str] = getattr(config, "coldkeep_summary", [])
    lines.append(line)
    config.coldkeep_summary = lines  # type: ignore[attr-defined]


# the real CLI ------------------------------------------------------------------

COLDKEEP = [sys.executable, "-m", "coldkeep.tui.cli.main"]


def cli(
    *args: str,
    env: dict[str, str] | None = None,
    under: Sequence[str] = (),
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """``coldkeep ARGS`` in a process of its own, run by ``under`` (such as
    ``faketime -f +1y``) where given, its output captured as text. Forked from
    a warm server where it can be (clizygote.py), else a new interpreter."""
    environ = {**os.environ, **(env or {})}
    if clizygote.warm_ok(environ, under):
        run = clizygote.run(args, env=environ, timeout=timeout)
        if run is not None:
            return run
    return subprocess.run(
        [*under, *COLDKEEP, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environ,
        check=False,
    )


class Running(Protocol):
    """A ``coldkeep`` process ``start`` left running."""

    def wait(self, timeout: float | None = None) -> int | None: ...
    def kill(self) -> int: ...


class _Cold:
    """``Running`` over a new interpreter (where no warm server could start)."""

    def __init__(self, args: Sequence[str]) -> None:
        self._proc = subprocess.Popen(
            [*COLDKEEP, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def wait(self, timeout: float | None = None) -> int | None:
        try:
            return self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> int:
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGKILL)
        return self._proc.wait()


def start(*args: str) -> Running:
    """``coldkeep ARGS`` started and left running, its output discarded, to be
    waited for or killed at a moment the caller picks. Forked warm where it can
    be, like ``cli``: a moment drawn from a warm run's time then falls inside the
    command, not in a new interpreter's imports."""
    warm = clizygote.spawn(args, env=os.environ)
    return warm if warm is not None else _Cold(args)


class RandomKills:
    """SIGKILL at a random moment of a command, timed by how long it takes. A run
    that ends before its moment shows the command has got quicker (a warm cache, a
    quieter machine): that run's own time becomes the measure and the caller tries
    again, so the moments keep falling inside the command rather than after it."""

    def __init__(self, seed: int, seconds: float) -> None:
        self.rnd = random.Random(seed)
        self.seconds = seconds

    def run(self, args: list[str]) -> bool:
        """Whether the command was killed before it ended."""
        delay = self.rnd.uniform(0.2, 1.0) * self.seconds
        t0 = time.monotonic()
        running = start(*args)
        if running.wait(delay) is None:
            return running.kill() == -signal.SIGKILL
        self.seconds = min(self.seconds, time.monotonic() - t0)
        return False


def cli_ok(*args: str) -> subprocess.CompletedProcess[str]:
    """``cli``, which must exit 0."""
    run = cli(*args)
    assert run.returncode == 0, f"coldkeep {' '.join(args)}: exit {run.returncode}\n{run.stderr}"
    return run


def ck(
    site: Path,
    *args: str,
    check: int | None = 0,
    env: dict[str, str] | None = None,
    under: Sequence[str] = (),
) -> subprocess.CompletedProcess[str]:
    """``coldkeep ARGS --config SITE/coldkeep.toml`` (``cli``); asserts the
    exit code."""
    run = cli(*args, "--config", str(site / "coldkeep.toml"), env=env, under=under)
    if check is not None:
        assert run.returncode == check, f"exit {run.returncode}\n{run.stdout}\n{run.stderr}"
    return run


def ck_json(site: Path, *args: str, check: int | None = 0) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(ck(site, *args, "--json", check=check).stdout)
    return out


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def live_files(site: Path) -> dict[str, str]:
    """relpath -> sha256 of every data file in the live tree."""
    live = site / "live"
    return {
        p.relative_to(live).as_posix(): sha(p.read_bytes())
        for p in live.rglob("*")
        if p.is_file() and p.name != ".closed"
    }


def entries(site: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute("SELECT * FROM entries ORDER BY id")]


def legacy_gzip_header(name: bytes, mtime_ns: int, mode: int) -> bytes:
    """The header coldkeep wrote before its gzips carried their mode and exact
    mtime in the comment: in a FEXTRA subfield ``CK`` (mode u32, mtime ns u64)."""
    extra = b"CK" + struct.pack("<H", 12) + struct.pack("<IQ", mode, mtime_ns)
    mtime = mtime_ns // 1_000_000_000
    return (
        struct.pack("<BBBBIBB", 0x1F, 0x8B, 8, 0x08 | 0x04, mtime, 0, 3)
        + struct.pack("<H", len(extra))
        + extra
        + name
        + b"\0"
    )


def as_legacy_gzip(gz: Path, offset: int = 0) -> int:
    """Rewrites the coldkeep gzip at ``gz`` (the whole file) with the header an
    older coldkeep wrote, the same deflate stream and trailer; its new size."""
    data = gz.read_bytes()[offset:]
    assert data[3] == 0x08 | 0x10, "a gzip with a name and a comment"
    name_end = data.index(b"\0", 10)
    comment_end = data.index(b"\0", name_end + 1)
    header = read_gzip_header(gz)
    assert header.mtime_ns is not None and header.mode is not None
    legacy = legacy_gzip_header(data[10:name_end], header.mtime_ns, header.mode)
    rewritten = legacy + data[comment_end + 1 :]
    gz.write_bytes(rewritten)
    return len(rewritten)


def planted(layout: Layout, rel: str, name: bytes, data: bytes, mode: int, mtime_ns: int) -> Path:
    """A gzip written by hand under ``layout.files/rel`` with the header coldkeep
    writes (name, mode, mtime): hostile headers for the untrusted-archive tests."""
    gz = layout.files / rel
    gz.parent.mkdir(parents=True, exist_ok=True)
    deflate = zlib.compressobj(6, zlib.DEFLATED, -15)
    body = deflate.compress(data) + deflate.flush()
    trailer = zlib.crc32(data).to_bytes(4, "little") + len(data).to_bytes(4, "little")
    gz.write_bytes(gzip_header(name, mtime_ns, mode) + body + trailer)
    return gz


def leases_or_skip(folder: Path) -> None:
    """Skip unless a write lease can be taken on a file in ``folder`` (not the
    owner without CAP_LEASE, or a filesystem without leases): what guards an
    open file there is the identity check alone."""
    probe = folder / ".lease-probe"
    probe.write_bytes(b"")
    fd = os.open(probe, os.O_RDONLY)
    try:
        if take_lease(fd) != "held":
            pytest.skip(f"no write lease on {folder}'s filesystem")
    finally:
        os.close(fd)
        probe.unlink()


@contextmanager
def mounting(site: Path, mnt: Path, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    """``coldkeep mount MNT ARGS --config SITE/coldkeep.toml``, the real CLI, from
    when the mount is made (polled, with a deadline) until the block ends
    (then unmounted, and the process waited for). Skips, with the reason, where
    this machine cannot mount."""
    from faultfs.mount import _unmount, unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"no FUSE mount here: {reason}")
    log = mnt.parent / f"{mnt.name}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*COLDKEEP, "mount", str(mnt), *args, "--config", str(site / "coldkeep.toml")],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 30
    try:
        while not os.path.ismount(mnt):
            assert proc.poll() is None, log.read_text(errors="replace")
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.005)  # polling the mount with a deadline, not waiting blind
        yield proc
    finally:
        _unmount(mnt)
        proc.wait(timeout=30)


def preads_match(fd: int, data: bytes, rnd: random.Random, reads: int) -> None:
    """``reads`` reads of 1 byte, 4 KiB or 70,000 bytes at random offsets of the
    open file ``fd``, each equal to the same range of ``data``."""
    for _ in range(reads):
        offset = rnd.randrange(len(data))
        size = rnd.choice([1, 4096, 70_000])
        assert os.pread(fd, size, offset) == data[offset : offset + size], (offset, size)


def eventually(check: Any, within: float = 15.0) -> None:
    """Polls ``check()`` until it is true, failing after ``within`` seconds (a
    change the mount shows within a bounded time)."""
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "not within the time allowed"
        time.sleep(0.02)


def still_running(pids: Iterable[int], within_s: float) -> list[int]:
    """Those of ``pids`` that have not ended ``within_s`` from now (waited on
    through pidfds, not polled)."""
    left, deadline = [], time.monotonic() + within_s
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                left.append(pid)
        finally:
            os.close(fd)
    return left
