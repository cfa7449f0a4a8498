"""Exit codes, command by command, through the real CLI: 0 done, 1 failed or
needs attention, 2 bad usage or config (a config lacking what the command
needs included; nothing written), 3 the archive lock is held by another process.

docs/operations.md, "Exit codes", is a table of every command and what gives
each code; every cell that is not "—" has a case here (or, for the two that
need a terminal or a signal, a test elsewhere that ``ELSEWHERE`` names), and
every command has a row."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from pyrage import x25519

from coldkeep.core.base.lock import ArchiveLock
from coldkeep.tui.cli.main import every_command

from helpers import DAY_NS, ck, cli, cli_ok, entries

DOCS = Path(__file__).parents[2] / "docs" / "operations.md"
Setup = Callable[[Path], None]


def _fresh(site: Path) -> None:
    """A site that never ran: one eligible file, no archive_root yet, no state_db."""
    path = site / "live" / "u1" / "a.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"a": 1}\n' * 100)
    old = path.stat().st_mtime_ns - 60 * DAY_NS
    os.utime(path, ns=(old, old))
    config = 'live_root = "live"\narchive_root = "archive"\nmode = "on"\n'
    (site / "coldkeep.toml").write_text(config)


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each kind of site once (a test gets its own copy): one that never ran, a
    demo before its first pass, after it, and after a ship that dropped every
    local copy it could."""
    base = tmp_path_factory.mktemp("templates")
    _fresh(base / "fresh")
    demo = base / "demo"
    cli_ok("demo", str(demo), "--scale", "0.02", "--no-console")
    archived = base / "archived"
    shutil.copytree(demo, archived)
    ck(archived, "pass")
    shipped = base / "shipped"
    shutil.copytree(archived, shipped)
    edit('site = "demo"', 'site = "demo"\nkeep_local_days = 0')(shipped)
    ck(shipped, "ship")
    return {"fresh": base / "fresh", "demo": demo, "archived": archived, "shipped": shipped}


# what a case does to its copy first ---------------------------------------------------


def edit(old: str, new: str) -> Setup:
    def change(site: Path) -> None:
        config = site / "coldkeep.toml"
        text = config.read_text()
        assert old in text, old
        config.write_text(text.replace(old, new, 1))

    return change


def lake_on(site: Path) -> None:
    with (site / "coldkeep.toml").open("a") as config:
        config.write("\n[lake]\nenabled = true\n")


def month_lost(site: Path) -> None:
    """The lake enabled, and a month gone from here and from the bucket."""
    lake_on(site)
    month = sorted((site / "archive" / "events").glob("*.db"))[0]
    month.unlink()
    for copy in (site / "remote" / "demo" / "events").glob(f"{month.stem}.*"):
        copy.unlink()


def bad_config(site: Path) -> None:
    config = site / "coldkeep.toml"
    config.write_text('moed = "on"\n' + config.read_text())  # a typo of mode


def without(key: str) -> Setup:
    """The site's config without the line that sets ``key``."""

    def edit(site: Path) -> None:
        config = site / "coldkeep.toml"
        lines = config.read_text().splitlines(keepends=True)
        config.write_text("".join(x for x in lines if not x.startswith(f"{key} =")))

    return edit


def without_remote(site: Path) -> None:
    config = site / "coldkeep.toml"
    config.write_text(config.read_text().split("# The remote tier")[0])


def a_file(name: str) -> Setup:
    def make(site: Path) -> None:
        (site / name).write_text("there\n")

    return make


def _a_gzip(site: Path) -> tuple[dict[str, object], Path]:
    entry = next(
        e for e in entries(site) if e["member_offset"] is None and e["status"] == "archived"
    )
    return entry, site / "archive" / str(entry["gz_path"])


def gzip_gone(site: Path) -> None:
    _a_gzip(site)[1].unlink()


def gzip_damaged(site: Path) -> None:
    gz = _a_gzip(site)[1]
    data = bytearray(gz.read_bytes())
    data[len(data) // 2] ^= 0x55
    gz.write_bytes(bytes(data))


def marked_missing(site: Path) -> None:
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        db.execute("UPDATE entries SET status = 'missing' WHERE id = 1")


def on_live_db(sql: str) -> Setup:
    def run(site: Path) -> None:
        with sqlite3.connect(site / "state.db") as db:
            db.execute(sql)

    return run


def a_conflict(site: Path) -> None:
    """Rows of a month restored, then one changed in live: restoring the month
    again meets a live row with other content."""
    month = sorted(p.stem for p in (site / "archive" / "events").glob("*.db"))[0]
    ck(site, "restore-events", "--month", month)
    with sqlite3.connect(site / "archive" / "events" / f"{month}.db") as db:
        (row,) = db.execute("SELECT min(id) FROM events").fetchone()
    with sqlite3.connect(site / "state.db") as db:
        db.execute("UPDATE events SET payload = 'changed' WHERE id = ?", (row,))


def remote_copy_damaged(site: Path) -> None:
    """A remote copy whose local copy a ship dropped, one byte changed."""
    remote = site / "remote" / "demo"
    for obj in sorted((remote / "files").rglob("*")):
        local = site / "archive" / obj.relative_to(remote)
        if obj.is_file() and not local.exists():
            data = bytearray(obj.read_bytes())
            data[len(data) // 2] ^= 0x55
            obj.write_bytes(bytes(data))
            return
    raise AssertionError("no local copy was dropped")


def a_hold(site: Path) -> None:
    ck(site, "hold", "add", "--unit", "events", "--reason", "tax year")


def sealing(site: Path) -> None:
    """The site's [remote] seals to a new age recipient (the demo's config ends
    with its [remote])."""
    config = site / "coldkeep.toml"
    public = x25519.Identity.generate().to_public()
    config.write_text(config.read_text().rstrip("\n") + f'\nencrypt_to = ["{public}"]\n')


def rotated(site: Path) -> None:
    """Every object sealed to one recipient, which is then replaced by another:
    the event months' snapshots only the remote holds need the first's key."""
    sealing(site)
    ck(site, "rekey", "--yes")
    config = site / "coldkeep.toml"
    head = config.read_text().rsplit("\nencrypt_to = ", 1)[0]
    public = x25519.Identity.generate().to_public()
    config.write_text(f'{head}\nencrypt_to = ["{public}"]\n')


def key_lost(site: Path) -> None:
    """The site's signing key gone from the host (a lost disk, a careless hand)."""
    (site / "archive" / "coldkeep.sitekey").unlink()


def newer_manifest(site: Path) -> None:
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        db.execute("PRAGMA user_version = 9999")


def month_damaged(site: Path) -> None:
    month = sorted((site / "archive" / "events").glob("*.db"))[0]
    month.write_bytes(b"not a database" * 500)


def expired_all(site: Path) -> None:
    ck(site, "expire", "--yes")


def a_dir(name: str) -> Setup:
    def make(site: Path) -> None:
        (site / name).mkdir()

    return make


def then(*steps: Setup) -> Setup:
    def run(site: Path) -> None:
        for step in steps:
            step(site)

    return run


RETENTION = "\n[retention]\nfiles_days = 1\n"


# the cases ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    command: str  # its row in the table
    code: int
    args: tuple[str, ...]  # "{site}" in one: the site's folder
    site: str = "archived"  # fresh | demo | archived | shipped
    setup: Setup | None = None
    says: str = ""  # on stdout or stderr
    locked: bool = False  # another process holds the archive lock meanwhile
    config: bool = True  # --config SITE/coldkeep.toml after the args
    reads: bool = False  # writes nothing, as a usage error writes nothing

    @property
    def id(self) -> str:
        return f"{self.command}-{self.code}-{'_'.join(self.args)[:40]}"


# What the table says but a case here cannot show (a terminal, a signal).
ELSEWHERE = {
    ("hold add", 1): "tests/core/remote/test_object_lock.py: a bucket that refuses the legal hold",
    ("hold release", 1): "tests/core/remote/test_object_lock.py: the same bucket, on release",
    ("run", 0): "tests/cli/test_run.py: SIGTERM stops it at a safe point, exit 0",
    ("console", 0): "tests/console/test_tmux.py: the real console quits with q",
    ("thaw", 1): "tests/core/remote/test_thaw_s3.py: a request S3 refuses",
    ("mount", 0): "tests/cli/test_cli_mount.py: SIGTERM, Ctrl-C or fusermount3 -u, exit 0",
}

CASES = [
    # read-only commands, on a site that never ran: nothing written
    Case("status", 0, ("status",), site="fresh", says="no pass has run", reads=True),
    Case("status", 1, ("status",), setup=marked_missing),
    Case("status", 2, ("status",), setup=bad_config, says="did you mean mode?"),
    Case("plan", 0, ("plan",), site="fresh", says="1 eligible", reads=True),
    Case("plan", 2, ("plan",), setup=bad_config),
    Case("history", 0, ("history",), site="fresh", says="no history yet", reads=True),
    Case("history", 2, ("history", "--limit", "0"), says="--limit"),
    Case("history", 2, ("history", "--limit", "-5"), says="--limit"),
    Case("doctor", 0, ("doctor",), site="demo", says="ready for a pass"),
    Case("doctor", 1, ("doctor",), site="demo", setup=on_live_db("DROP INDEX events_kind_ts"),
         says="FAIL  events_index"),
    Case("doctor", 2, ("doctor",), setup=bad_config, says="did you mean mode?"),
    Case("pass", 0, ("pass",), site="demo", says="pass 1 (on): ok"),
    Case("pass", 1, ("pass",), setup=gzip_gone, says="ATTENTION"),
    Case("pass", 2, ("pass",), setup=edit('mode = "on"', 'mode = "off"'), says='mode = "off"'),
    Case("pass", 3, ("pass",), locked=True, says="locked by"),
    Case("recover", 0, ("recover",), says="nothing to do"),
    Case("recover", 1, ("recover",), setup=gzip_gone, says="MISSING"),
    Case("recover", 2, ("recover",), setup=bad_config),
    Case("recover", 3, ("recover",), locked=True, says="locked by"),
    Case("adopt", 0, ("adopt", "--all"), site="demo", says="1 adopted"),
    Case("adopt", 1, ("adopt", "files/no/such.gz"), site="demo"),
    Case("adopt", 2, ("adopt",), site="demo", says="name orphan gzips, or pass --all"),
    Case("adopt", 3, ("adopt", "--all"), site="demo", locked=True, says="locked by"),
    Case("sweep", 0, ("sweep",), site="demo", says="1 removed"),
    Case("sweep", 2, ("sweep",), site="demo", setup=bad_config),
    Case("sweep", 3, ("sweep",), site="demo", locked=True, says="locked by"),
    Case("restore", 0, ("restore", "--path", "**", "--to", "{site}/out"), says="restored"),
    Case("restore", 0, ("restore", "--unit", "u1", "--to", "{site}/../out"), site="fresh",
         says="nothing archived yet", reads=True),
    Case("restore", 1, ("restore", "--path", "**", "--to", "{site}/out"), setup=gzip_gone,
         says="missing"),
    Case("restore", 2, ("restore",), says="select something"),
    Case("restore", 2, ("restore", "987654"), says="no entry 987654"),
    Case("restore", 2, ("restore", "--unit", "nosuch"), says="nothing archived matches --unit"),
    Case("restore", 2, ("restore", "--path", "nosuch/**", "--json"),
         says='"ok": false'),
    Case("restore", 2, ("restore", "--sha", "ffffffff"), says="nothing archived matches --sha"),
    Case("restore", 2, ("restore", "1"), site="fresh", says="nothing is archived yet"),
    Case("restore", 2, ("restore", "--path", "**", "--to", "{site}/live/back"),
         says="is inside live_root"),
    Case("restore", 2, ("restore", "--path", "**", "--to", "{site}/archive/back"),
         says="is inside the archive"),
    Case("restore", 2, ("restore", "--list", "--thaw", "--path", "**"),
         says="does not go with --list"),
    Case("restore", 3, ("restore", "--path", "**", "--to", "{site}/out"), locked=True,
         says="locked by"),
    Case("thaw", 0, ("thaw", "--path", "**"), site="shipped", says="none to ask", reads=True),
    Case("thaw", 0, ("thaw", "--path", "**", "--yes"), site="shipped", says="none to ask"),
    Case("thaw", 2, ("thaw",), site="shipped", says="select something"),
    Case("thaw", 2, ("thaw", "--path", "**"), setup=without_remote, says="no [remote]"),
    Case("thaw", 3, ("thaw", "--path", "**", "--yes"), site="shipped", locked=True,
         says="locked by"),
    Case("restore --list", 0, ("restore", "--list", "--unit", "u1"), site="fresh", reads=True),
    Case("restore --list", 0, ("restore", "--list", "--path", "**"), says="entries"),
    Case("restore --list", 2, ("restore", "--list"), says="select something"),
    Case("restore --list", 2, ("restore", "--list", "987654"), says="no entry 987654"),
    Case("restore --list", 2, ("restore", "--list", "\u0661"), says="is not an id (digits 0-9)"),
    Case("restore --list", 2, ("restore", "--list", "--unit", "nosuch"),
         says="nothing archived matches --unit nosuch"),
    Case("restore --list", 2, ("restore", "--list", "--path", "zz/*"),
         says="nothing archived matches --path zz/*"),
    Case("find", 0, ("find", "**/*.jsonl"), says="versions of", reads=True),
    Case("find", 2, ("find", "nosuch"), says="no archived file's path contains 'nosuch'"),
    Case("find", 2, ("find", "**"), site="fresh", says="no pass has run"),
    Case("find", 2, ("find", "u[1"), says="unclosed ["),
    Case("find", 2, ("find", "/elsewhere/x"), says="not inside live_root"),
    Case("find", 2, ("find", "--fleet", "**"), setup=without_remote, says="no [remote]"),
    Case("versions", 0, ("versions", "unit-0001/part-01.jsonl"), says="of unit-0001/part-01.jsonl",
         reads=True),
    Case("versions", 2, ("versions", "nosuch.log"), says="no archived version of 'nosuch.log'"),
    Case("versions", 2, ("versions", "u1/a.jsonl"), site="fresh", says="no pass has run"),
    Case("versions", 2, ("versions", "/elsewhere/x"), says="not inside live_root"),
    Case("cat", 0, ("cat", "unit-0001/part-05.jsonl"), says='"kind"', reads=True),
    Case("cat", 1, ("cat", "unit-0001/part-05.jsonl"), setup=then(
         edit("[files]", RETENTION + "[files]"), expired_all), says="expired on"),
    Case("cat", 2, ("cat", "unit-0001/no-such.jsonl"), says="nothing is archived at",
         reads=True),
    Case("cat", 2, ("cat", "unit-0001/part-05.jsonl@2001-01-01"), says="no version of"),
    Case("cat", 2, ("cat", "unit-0001/part-05.jsonl@0001-01-01"), says="neither an entry id"),
    Case("cat", 2, ("cat", "unit-0001/part-05.jsonl@\u00b2"), says="neither an entry id"),
    Case("cat", 2, ("cat", "a.jsonl"), site="fresh", says="nothing is archived yet"),
    Case("query", 0, ("query", "SELECT count(*) AS n FROM events"), says="n", reads=True),
    Case("query", 1, ("query", "SELECT 1"), setup=month_damaged, says="cannot be read"),
    Case("query", 2, ("query", "DELETE FROM events"), says="only SELECT is run", reads=True),
    Case(
        "query",
        2,
        ("query", "--engine", "sqlite", "SELECT 1; ATTACH 'x.db' AS x"),
        says="only reading is allowed",
        reads=True,
    ),
    Case("query", 2, ("query", "--from", "2026-13", "SELECT 1"), says="month must be in"),
    Case("query", 1, ("query", "--fleet", "SELECT 1"), site="shipped",
         says="no site has a lake under file://", reads=True),
    Case("query", 2, ("query", "--fleet", "--partial", "SELECT 1"),
         says="--fleet does not take --partial", reads=True),
    Case("query", 2, ("query", "SELECT 1"), site="fresh", says="no state_db is configured",
         reads=True),
    Case("mount", 1, ("mount", "{site}/mnt"), setup=then(newer_manifest, a_dir("mnt")),
         says="upgrade coldkeep"),
    Case("mount", 2, ("mount", "{site}/nosuch"), says="nosuch does not exist"),
    Case("mount", 2, ("mount", "{site}/coldkeep.toml"), says="is not a folder"),
    Case("mount", 2, ("mount", "{site}/live"), says="is not empty"),
    Case("mount", 2, ("mount", "{site}/mnt"), site="fresh", setup=a_dir("mnt"),
         says="nothing is archived yet"),
    Case("mount", 2, ("mount", "{site}/mnt"), setup=then(bad_config, a_dir("mnt")),
         says="did you mean mode?"),
    Case("restore-events", 0, ("restore-events", "--kind", "ci_completed"), says="restored"),
    Case("restore-events", 1, ("restore-events",), setup=a_conflict, says="conflict"),
    Case("restore-events", 2, ("restore-events",), setup=without("state_db"),
         says="no state_db"),
    Case("restore-events", 2, ("restore-events", "--kind", "nosuch"),
         says="no archived row of kind nosuch"),
    Case("restore-events", 2, ("restore-events", "--month", "1999-01"),
         says="no archived events for 1999-01"),
    Case("restore-events", 3, ("restore-events",), locked=True, says="locked by"),
    Case("verify", 0, ("verify",), says="ok"),
    Case("verify", 0, ("verify",), site="fresh", says="nothing archived yet", reads=True),
    Case("verify", 1, ("verify",), setup=gzip_damaged, says="FAILED"),
    Case("verify", 2, ("verify",), setup=bad_config),
    Case("verify", 3, ("verify",), locked=True, says="locked by"),
    Case("verify --remote", 0, ("verify", "--remote"), site="shipped",
         says="remote copies ok"),
    Case("verify --remote", 1, ("verify", "--remote"), site="shipped",
         setup=remote_copy_damaged, says="FAILED"),
    Case("verify --remote", 2, ("verify", "--remote"), setup=without_remote,
         says="no [remote]"),
    Case("verify --remote", 3, ("verify", "--remote"), site="shipped", locked=True,
         says="locked by"),
    Case("rebuild-manifest", 0, ("rebuild-manifest", "--out", "{site}/new.db"),
         says="written to"),
    Case("rebuild-manifest", 1, ("rebuild-manifest", "--out", "{site}/new.db"), site="demo",
         says="unreadable"),
    Case("rebuild-manifest", 2, ("rebuild-manifest", "--out", "{site}/there.db"),
         setup=a_file("there.db"), says="there.db exists"),
    Case("rebuild-manifest", 2, ("rebuild-manifest",), says="coldkeep.db exists"),
    Case("rebuild-manifest", 3, ("rebuild-manifest", "--out", "{site}/new.db"), locked=True,
         says="locked by"),
    Case("checkpoint", 0, ("checkpoint",), says="checkpointed="),
    Case("checkpoint", 1, ("checkpoint",), setup=on_live_db("PRAGMA journal_mode = DELETE"),
         says="not in WAL mode"),
    Case("checkpoint", 2, ("checkpoint",), setup=without("state_db"), says="no state_db"),
    Case("checkpoint", 3, ("checkpoint",), locked=True, says="locked by"),
    Case("ship", 0, ("ship",), says="shipped"),
    Case("ship", 1, ("ship",), setup=a_file("remote"),  # the remote folder is a file
         says="Not a directory (check the remote folder)"),
    Case("ship", 2, ("ship",), setup=without_remote, says="no [remote]"),
    Case("ship", 3, ("ship",), locked=True, says="locked by"),
    Case("expire", 0, ("expire",), site="fresh", says="no [retention]", reads=True),
    Case("expire", 0, ("expire", "--yes"), setup=edit("[files]", RETENTION + "[files]"),
         says="deleted"),
    Case("expire", 1, ("expire", "--yes"), site="shipped",
         setup=then(without_remote, edit("[files]", RETENTION + "[files]")),
         says="its remote copies stay"),
    Case("expire", 2, ("expire",), setup=bad_config),
    Case("expire", 3, ("expire", "--yes"), locked=True, says="locked by"),
    Case("hold add", 0, ("hold", "add", "--unit", "events", "--reason", "tax"), says="placed"),
    Case("hold add", 2, ("hold", "add", "--unit", "nosuch", "--reason", "typo"),
         says="--ahead"),
    Case("hold add", 0, ("hold", "add", "--unit", "u1", "--reason", "next", "--ahead"),
         site="fresh", says="placed"),
    Case("hold add", 2, ("hold", "add", "--unit", "u1", "--reason", "typo"), site="fresh",
         says="--ahead"),
    Case("hold add", 2, ("hold", "add", "--reason", "what?"), says="exactly one of"),
    Case("hold add", 2, ("hold", "add", "--entry", "987654", "--reason", "x"),
         says="no such entry"),
    Case("hold list", 0, ("hold", "list"), site="fresh", says="no holds", reads=True),
    Case("hold list", 2, ("hold", "list"), setup=bad_config),
    Case("hold release", 0, ("hold", "release", "1"), setup=a_hold, says="released"),
    Case("hold release", 2, ("hold", "release", "7"), says="there is no hold 7"),
    Case("hold release", 2, ("hold", "release", "\u0661"), setup=a_hold, says="is not an id"),
    Case("hold release", 2, ("hold", "release", "7"), site="fresh", says="no hold 7"),
    Case("fleet metrics", 0, ("fleet", "metrics", "--remote", "file://{site}/remote"),
         site="shipped", config=False, reads=True,
         says='coldkeep_fleet_site_state{site="demo",state="ok"} 1.0'),
    Case("fleet metrics", 2, ("fleet", "metrics", "--remote", "s3://"), site="shipped",
         config=False, says="--remote"),
    Case("fleet status", 0, ("fleet", "status", "--remote", "file://{site}/remote"),
         site="shipped", config=False, reads=True, says="1 site under file://"),
    Case("fleet status", 1, ("fleet", "status", "--remote", "file://{site}/remote"),
         site="shipped", config=False, setup=lambda s: shutil.rmtree(s / "remote/demo/heartbeat"),
         says="?? silent   demo  (no beat): no heartbeat"),
    Case("fleet status", 2, ("fleet", "status", "--remote", "{site}/remote"), site="shipped",
         config=False, says="is not a URL: for a folder, write file://"),
    Case("lake ddl", 0, ("lake", "ddl", "--engine", "athena"), site="shipped",
         says="CREATE EXTERNAL TABLE IF NOT EXISTS coldkeep.events_all (", reads=True),
    Case("lake ddl", 1, ("lake", "ddl", "--engine", "duckdb", "--remote", "file://{site}/remote"),
         site="shipped", config=False, says="no site has a lake under file://", reads=True),
    Case("lake ddl", 2, ("lake", "ddl", "--engine", "spark", "--schema", "a;b"),
         says="give a plain name", reads=True),
    Case("lake ddl", 2, ("lake", "ddl", "--engine", "trino"), site="fresh",
         says="has no [remote]: give --remote URL", reads=True),
    Case("lake export", 0, ("lake", "export"), site="shipped", setup=lake_on,
         says="to write to the lake: ", reads=True),
    Case("lake export", 0, ("lake", "export", "--yes"), site="shipped", setup=lake_on,
         says="written to the lake"),
    Case("lake export", 1, ("lake", "export", "--yes"), site="shipped", setup=month_lost,
         says="its snapshot cannot be read"),
    Case("lake export", 2, ("lake", "export"), site="shipped", says="[lake] enabled is not set"),
    Case("lake export", 2, ("lake", "export", "--from", "2026-13"), site="shipped", setup=lake_on,
         says="--from '2026-13'"),
    Case("lake export", 3, ("lake", "export", "--yes"), site="shipped", setup=lake_on, locked=True),
    Case("site show", 0, ("site", "show"), site="shipped", says="site key    ck:", reads=True),
    Case("site show", 1, ("site", "show"), site="shipped", setup=key_lost, says="does not hold"),
    Case("site show", 2, ("site", "show"), setup=bad_config),
    Case("site new-key", 0, ("site", "new-key"), site="shipped", says="WRITE IT DOWN"),
    Case("site new-key", 2, ("site", "new-key"), setup=bad_config),
    Case("site new-key", 3, ("site", "new-key"), site="shipped", locked=True),
    Case("rekey", 0, ("rekey",), setup=sealing, says="to seal again", site="shipped", reads=True),
    Case("rekey", 1, ("rekey", "--yes"), setup=rotated, site="shipped", says="--identity"),
    Case("rekey", 2, ("rekey",), says="encrypt_to is not set", reads=True),
    Case("rekey", 2, ("rekey", "--yes", "--identity", "{site}/no.key"), setup=sealing,
         says="no such file", reads=True),
    Case("rekey", 2, ("rekey",), setup=bad_config),
    Case("rekey", 3, ("rekey", "--yes"), setup=sealing, site="shipped", locked=True),
    Case("metrics", 0, ("metrics",), site="fresh", says="coldkeep_up 1.0", reads=True),
    Case("metrics", 2, ("metrics",), setup=bad_config),
    Case("run", 1, ("run",), setup=newer_manifest, says="upgrade coldkeep"),
    Case("run", 2, ("run",), setup=bad_config),
    Case("run", 2, ("run", "--metrics-listen", "nowhere"), says="--metrics-listen"),
    Case("demo", 0, ("demo", "{site}/new", "--scale", "0.01", "--no-console"), config=False,
         says="Writing a demo site"),
    Case("demo", 2, ("demo", "{site}/live", "--no-console"), site="fresh", config=False,
         says="is not empty"),
    Case("console", 2, ("console",), setup=bad_config, says="did you mean mode?"),
    Case("console", 2, ("console", "--remote", "file:///nowhere"), says="drop --config"),
]  # fmt: skip


def _tree(site: Path) -> list[tuple[str, int, int]]:
    """Every file with its size and mtime, every folder (a database opened to
    read makes and removes its -wal and -shm beside it: not a write)."""
    return sorted(
        (
            p.relative_to(site).as_posix(),
            *((p.stat().st_size, p.stat().st_mtime_ns) if p.is_file() else (0, 0)),
        )
        for p in site.rglob("*")
        if not p.name.endswith(("-wal", "-shm"))
    )


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_exit_code(case: Case, templates: dict[str, Path], tmp_path: Path) -> None:
    site = tmp_path / "site"
    shutil.copytree(templates[case.site], site)
    if case.setup is not None:
        case.setup(site)
    before = _tree(site)
    args = [a.format(site=site) for a in case.args]
    if case.config:
        args += ["--config", str(site / "coldkeep.toml")]
    if case.locked:
        with ArchiveLock.try_acquire(site / "archive", command="another coldkeep"):
            run = _run(args)
    else:
        run = _run(args)
    said = run.stdout + run.stderr
    assert run.returncode == case.code, f"exit {run.returncode}\n{said}"
    assert case.says in said, said
    assert "Traceback" not in said
    if case.code == 2 or case.reads:
        assert _tree(site) == before, "nothing written"


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return cli(*args)


# the table in docs/operations.md ---------------------------------------------------------


def documented() -> dict[str, set[int]]:
    """Each command's row of the table: the codes whose cell is not "—"."""
    text = DOCS.read_text()
    table = text.split("| command | 0 | 1 | 2 | 3 |\n|---|---|---|---|---|\n", 1)[1]
    rows: dict[str, set[int]] = {}
    for line in table.splitlines():
        if not line.startswith("| `"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        name = re.fullmatch(r"`([^`]+)`", cells[0])
        assert name is not None, line
        rows[name[1]] = {code for code, cell in enumerate(cells[1:]) if cell != "—"}
    return rows


def commands() -> set[str]:
    """Every command of the CLI (a group's as ``group sub``), and the two modes
    the table has rows of their own for."""
    names = set()
    for command in every_command():
        name = str(command.name)
        if isinstance(command, click.Group):
            names |= {f"{name} {sub}" for sub in command.commands}
        else:
            names.add(name)
    return names | {"restore --list", "verify --remote"}


def test_every_command_has_a_row_and_every_documented_code_a_case() -> None:
    rows = documented()
    assert set(rows) == commands()
    tested: dict[str, set[int]] = {}
    for case in CASES:
        tested.setdefault(case.command, set()).add(case.code)
    for command, code in ELSEWHERE:
        tested.setdefault(command, set()).add(code)
    assert tested == rows


def test_demo_into_a_folder_that_is_not_empty_exits_2_before_writing(tmp_path: Path) -> None:
    (tmp_path / "precious.txt").write_text("keep me")
    run = cli("demo", str(tmp_path), "--no-console")
    assert run.returncode == 2 and "is not empty" in run.stderr
    assert "Writing" not in run.stdout, "nothing said of a site that is not written"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["precious.txt"]
