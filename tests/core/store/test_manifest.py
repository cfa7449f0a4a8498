"""coldkeep.db: migrations, durability settings, entries and restore intents."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from pathlib import Path
from typing import cast

import pytest

from coldkeep.core.base.ioerror import DatabaseFailed
from coldkeep.core.store import audit, passlog
from coldkeep.core.store.connection import ManifestError
from coldkeep.core.store.entries import NewEntry
from coldkeep.core.store.manifest import Manifest
from coldkeep.core.store.restoreintents import IntentChange
from coldkeep.core.store.schema import MIGRATIONS, SCHEMA_VERSION


def entry(n: int = 1, **kw: object) -> NewEntry:
    base: dict[str, object] = {
        "unit": "u",
        "relpath": f"u/f{n}.jsonl",
        "bytes": 10,
        "sha256": f"{n:064x}",
        "gz_path": f"files/u/f{n}.jsonl.gz",
        "gz_bytes": 5,
        "mtime_ns": 1,
        "dev": 2,
        "ino": 3,
        "mode": 0o100644,
        "archived_at": 1000,
    }
    base.update(kw)
    return NewEntry(**base)  # type: ignore[arg-type]


async def test_a_new_manifest_is_wal_full_sync_and_current(tmp_path: Path) -> None:
    async with await Manifest.open(tmp_path / "coldkeep.db") as m:
        assert await m.rows("PRAGMA journal_mode") == [("wal",)]
        assert await m.rows("PRAGMA synchronous") == [(2,)]  # FULL
        assert await m.rows("PRAGMA user_version") == [(SCHEMA_VERSION,)]


async def test_entries_are_committed_on_return(tmp_path: Path) -> None:
    path = tmp_path / "coldkeep.db"
    async with await Manifest.open(path) as m:
        e = await m.add_entry(entry(1))
        await m.add_entry(entry(2))
        # Another connection (another process, in life) sees it at once.
        with sqlite3.connect(path) as other:
            assert other.execute("SELECT count(*) FROM entries").fetchone() == (2,)
        assert await m.entry(e.id) == e
        assert (await m.entry_by_gz("files/u/f2.jsonl.gz")) is not None
        await m.set_status([e.id], "missing")
        got = await m.entry(e.id)
        assert got is not None and got.status == "missing"
        with pytest.raises(sqlite3.IntegrityError):
            await m.add_entry(entry(1))  # one entry per gzip


async def test_entries_finishing_together_share_one_commit(tmp_path: Path) -> None:
    path = tmp_path / "coldkeep.db"
    async with await Manifest.open(path) as m:
        commits: list[str] = []
        await m._db.set_trace_callback(  # what the connection sends SQLite
            lambda sql: commits.append(sql) if sql == "COMMIT" else None
        )
        added = await asyncio.gather(*(m.add_entry(entry(n)) for n in range(1, 21)))
        # Each caller got its own entry, durable: another connection sees all.
        assert [e.relpath for e in added] == [f"u/f{n}.jsonl" for n in range(1, 21)]
        assert len({e.id for e in added}) == 20
        with sqlite3.connect(path) as other:
            assert other.execute("SELECT count(*) FROM entries").fetchone() == (20,)
        # All twenty were queued before the first commit began: one transaction.
        assert commits == ["COMMIT"]


async def test_a_failed_group_commit_fails_every_caller_and_keeps_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "coldkeep.db"
    async with await Manifest.open(path) as m:
        await m.add_entry(entry(1))
        got = await asyncio.gather(
            m.add_entry(entry(2)),
            m.add_entry(entry(3)),
            m.add_entry(entry(1)),  # the same gzip twice: refused
            return_exceptions=True,
        )
        assert isinstance(got[0], Exception) or isinstance(got[1], Exception)
        assert isinstance(got[2], sqlite3.IntegrityError)
        # What the failed transaction held is not there; what committed is.
        kept = {e.relpath for e in await m.entries()}
        assert kept == {"u/f1.jsonl"} | {g.relpath for g in got if not isinstance(g, BaseException)}
        # The connection is usable after it.
        assert (await m.add_entry(entry(4))).relpath == "u/f4.jsonl"


async def test_a_group_commit_that_cannot_write_names_the_file_and_its_entries(
    tmp_path: Path,
) -> None:
    path = tmp_path / "coldkeep.db"
    async with await Manifest.open(path) as m:
        await m.run("PRAGMA query_only = 1")  # every write refused, as a read-only file's
        got = await asyncio.gather(
            m.add_entry(entry(1)), m.add_entry(entry(2)), return_exceptions=True
        )
        for err in got:
            assert isinstance(err, DatabaseFailed)
            text = str(err)
            assert text.startswith(f"{path}: "), text
            assert text.endswith("(while recording the entry of u/f1.jsonl and 1 more)"), text


async def test_sources_marked_gone_later_are_written_by_the_next_commit_or_close(
    tmp_path: Path,
) -> None:
    path = tmp_path / "coldkeep.db"
    async with await Manifest.open(path) as m:
        a, b = await m.add_entry(entry(1)), await m.add_entry(entry(2))
        m.sources_gone_later([a.id])
        await m.add_entry(entry(3))  # carries the mark in its transaction
        with sqlite3.connect(path) as other:
            rows = other.execute("SELECT id FROM entries WHERE source_present = 0").fetchall()
        assert rows == [(a.id,)]
        m.sources_gone_later([b.id])
        # Recovery asks which sources may still be live: the mark counts.
        assert {e.relpath for e in await m.entries_pending_unlink()} == {"u/f3.jsonl"}
        c = await m.add_entry(entry(4))
        m.sources_gone_later([c.id])
    with sqlite3.connect(path) as other:  # written on close
        gone = other.execute("SELECT count(*) FROM entries WHERE source_present = 0").fetchone()
    assert gone == (3,)


async def test_a_manifest_from_a_newer_coldkeep_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "coldkeep.db"
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    before = path.read_bytes()
    with pytest.raises(ManifestError, match="upgrade coldkeep"):
        await Manifest.open(path)
    assert path.read_bytes() == before


async def test_a_failed_migration_leaves_the_old_version(tmp_path: Path) -> None:
    path = tmp_path / "coldkeep.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE passes (x)")  # collides with migration 1
    with pytest.raises(ManifestError, match="migration 1 failed"):
        await Manifest.open(path)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (0,)
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert tables == {"passes"}


async def test_readonly_open_never_creates(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="does not exist yet"):
        await Manifest.open(tmp_path / "coldkeep.db", readonly=True)
    assert not (tmp_path / "coldkeep.db").exists()
    async with await Manifest.open(tmp_path / "coldkeep.db") as m:
        await m.add_entry(entry())
    async with await Manifest.open(tmp_path / "coldkeep.db", readonly=True) as ro:
        assert len(await ro.entries()) == 1
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            await ro.add_entry(entry(2))


async def test_restore_intents(tmp_path: Path) -> None:
    async with await Manifest.open(tmp_path / "coldkeep.db") as m:
        a = await m.add_restore_intent(7, tmp_path / "live" / "x")
        await m.add_restore_intent(None, tmp_path / "elsewhere" / "y")
        assert [i.target.name for i in await m.restore_intents()] == ["x", "y"]
        await m.clear_restore_intent(a.id)
        assert [i.target.name for i in await m.restore_intents()] == ["y"]


async def test_intents_sent_together_share_commits_and_each_gets_its_own_id(
    tmp_path: Path,
) -> None:
    """Restores in flight at once record and clear their intents in shared
    transactions; each caller gets its own row, and the grace rides along."""
    async with await Manifest.open(tmp_path / "coldkeep.db") as m:
        e = await m.add_entry(entry(1))
        intents = await asyncio.gather(
            *(m.add_restore_intent(None, tmp_path / f"t{n}") for n in range(6)),
            m.add_restore_intent(e.id, tmp_path / "held", grace=("restored", 9000)),
        )
        assert len({i.id for i in intents}) == 7
        recorded = {i.id: i.target.name for i in await m.restore_intents()}
        assert recorded == {i.id: i.target.name for i in intents}
        got = await m.entry(e.id)
        assert got is not None and (got.status, got.grace_until) == ("restored", 9000)
        await asyncio.gather(
            *(m.clear_restore_intent(i.id) for i in intents[:-1]),
            m.clear_restore_intent(intents[-1].id, entry_id=e.id, grace=("archived", None)),
        )
        assert await m.restore_intents() == []
        got = await m.entry(e.id)
        assert got is not None and (got.status, got.grace_until) == ("archived", None)


async def test_a_grouped_commit_that_fails_fails_every_caller_in_it(tmp_path: Path) -> None:
    async with await Manifest.open(tmp_path / "coldkeep.db") as m:
        done = await asyncio.gather(
            m.add_restore_intent(None, tmp_path / "a"),
            # NOT NULL refuses it: the whole transaction goes.
            m.change_intents(IntentChange(add=(None, cast("str", None), 0))),
            return_exceptions=True,
        )
        assert all(isinstance(d, sqlite3.IntegrityError) for d in done), done
        assert await m.restore_intents() == [], "the whole transaction was rolled back"
        await m.add_restore_intent(None, tmp_path / "b")  # the next commit goes on
        assert [i.target.name for i in await m.restore_intents()] == ["b"]


async def test_migrating_from_version_5_keeps_the_pass_log_and_the_job_runs(
    tmp_path: Path,
) -> None:
    """Version 6 widens two CHECKs by copying two tables: every row comes along."""
    path = tmp_path / "coldkeep.db"
    with sqlite3.connect(path) as db:
        for script in MIGRATIONS[:5]:
            db.executescript(script)
        db.execute("PRAGMA user_version = 5")
        db.execute("INSERT INTO passes (started_at, mode, origin) VALUES (1, 'on', 'cli')")
        db.execute(
            "INSERT INTO job_runs (job, trigger, started_at, status, summary) "
            "VALUES ('pass', 'boot', 2, 'ok', '{}')"
        )
    async with await Manifest.open(path) as m:
        [p] = await passlog.recent(m)
        assert (p.id, p.status, p.origin) == (1, "running", "cli")
        assert await m.rows("SELECT job, status FROM job_runs") == [("pass", "ok")]
        await passlog.finish(m, p.id, "interrupted", {}, 3)
        await m.run("UPDATE job_runs SET status = 'waiting'")
        assert [x.status for x in await passlog.recent(m)] == ["interrupted"]
        [(sql,)] = await m.rows("SELECT sql FROM sqlite_master WHERE name = 'job_runs_job'")
        assert "job_runs (job, started_at)" in sql


async def test_a_manifest_that_cannot_be_opened_leaves_no_thread_behind(tmp_path: Path) -> None:
    """The CLI closes its event loop right after the one-line error: a connection
    thread still running then posted to a closed loop and printed a traceback."""
    with pytest.raises(sqlite3.Error, match="no-such-dir"):
        await Manifest.open(tmp_path / "no-such-dir" / "coldkeep.db")
    workers = [t for t in threading.enumerate() if "_connection_worker_thread" in t.name]
    assert [t for t in workers if t.is_alive()] == []


async def test_the_restore_grace_is_the_column_hold_until(tmp_path: Path) -> None:
    path = tmp_path / "coldkeep.db"
    async with await Manifest.open(path) as m:
        e = await m.add_entry(entry(1, status="restored", grace_until=5000))
        assert await m.relpaths_in_grace(4999) == {e.relpath}
        await m.set_status_and_grace([e.id], "archived", None)
        assert await m.relpaths_in_grace(0) == set()
        await m.set_status_and_grace([e.id], "restored", 7000)
        with sqlite3.connect(path) as other:  # on disk, the column keeps its name
            assert other.execute("SELECT hold_until FROM entries").fetchone() == (7000,)
        got = await m.entry(e.id)
        assert got is not None and got.grace_until == 7000


async def test_a_name_that_is_not_utf8_is_kept_as_its_bytes_and_comes_back(
    tmp_path: Path,
) -> None:
    """Python gives such a name with lone surrogates, which SQLite refuses: it
    is stored as a BLOB of its bytes; a UTF-8 name stays TEXT, as before."""
    latin1 = "u/r\udce9sum\udce9.log"
    async with await Manifest.open(tmp_path / "m.db") as m:
        await m.add_entries([entry(1, relpath=latin1, gz_path="files/" + latin1 + ".gz")])
        await m.add_entries([entry(2, relpath="u/résumé.log")])
        back = {e.relpath: e for e in await m.entries()}
        assert set(back) == {latin1, "u/résumé.log"}
        assert [e.id for e in await m.entries_by_gz([back[latin1].gz_path])] == [back[latin1].id]
        assert await m.gz_statuses_of([back[latin1].gz_path]) == [
            (back[latin1].gz_path, "archived")
        ]
    with sqlite3.connect(tmp_path / "m.db") as db:
        stored = dict(db.execute("SELECT relpath, typeof(relpath) FROM entries").fetchall())
    assert stored == {b"u/r\xe9sum\xe9.log": "blob", "u/résumé.log": "text"}


async def test_an_older_manifest_gains_seek_points_and_keeps_its_entries(tmp_path: Path) -> None:
    """The migration that adds seek points: entries written before it read back
    unchanged with none (read through the checkpoint cache); new ones keep
    theirs, in the entry's own row."""
    path = tmp_path / "coldkeep.db"
    before = next(n for n, script in enumerate(MIGRATIONS) if "seek_points" in script)
    with sqlite3.connect(path) as db:
        for script in MIGRATIONS[:before]:
            db.executescript(script)
        db.execute(f"PRAGMA user_version = {before}")
        db.execute(
            "INSERT INTO entries (unit, relpath, bytes, sha256, gz_path, gz_bytes, mtime_ns, "
            "mode, archived_at) VALUES ('u', 'u/old.jsonl', 10, ?, 'files/u/old.jsonl.gz', "
            "5, 1, 33188, 1000)",
            ["a" * 64],
        )
    async with await Manifest.open(path) as m:
        [old] = await m.entries()
        assert (old.relpath, old.sha256, old.seek_points) == ("u/old.jsonl", "a" * 64, None)
        new = await m.add_entry(entry(2, seek_points="gIBAqUc="))
    async with await Manifest.open(path, readonly=True) as ro:
        assert await ro.entry(new.id) == new
        assert (await ro.entry(old.id)) == old
        assert await ro.rows("PRAGMA user_version") == [(SCHEMA_VERSION,)]


async def test_the_local_copies_paths_are_read_whole_in_chunks(tmp_path: Path) -> None:
    # Bundles (members sharing a path), a name that is not UTF-8 (a BLOB, sorted
    # after every TEXT), a copy dropped after shipping, a missing and an expired
    # entry: read 2 rows at a time, the set is what one scan says.
    odd = os.fsdecode(b"files/u/caf\xe9.jsonl.gz")
    paths = ["files/u/a.tar"] * 3 + ["files/u/b.gz", odd, "files/u/c.tar", "files/u/c.tar"]
    paths += ["files/u/gone.gz", "files/u/missing.gz", "files/u/expired.gz"]
    async with await Manifest.open(tmp_path / "coldkeep.db") as m:
        added = await m.add_entries(
            [entry(i, gz_path=p, member_offset=i) for i, p in enumerate(paths)]
        )
        await m.set_status([added[-2].id], "missing")
        await m.set_status([added[-1].id], "expired")
        await m.run(
            "INSERT INTO remote_objects (path, bytes, sha256, shipped_at, local_gone_at) "
            "VALUES ('files/u/gone.gz', 1, 'x', 0, 1), ('files/u/b.gz', 1, 'x', 0, NULL)"
        )
        here = {"files/u/a.tar", "files/u/b.gz", odd, "files/u/c.tar"}
        assert await m.local_gz_paths(chunk=2) == here
        assert await m.local_gz_paths() == here


@pytest.mark.parametrize("turns", range(6))
async def test_a_transaction_cancelled_anywhere_leaves_none_open(
    tmp_path: Path, turns: int
) -> None:
    """A transaction's caller cancelled at any of its awaits (a stopped ship
    cancels its uploads in flight) leaves the one connection with no transaction
    open: what the next caller writes is committed. Cancelled while its BEGIN
    was on the connection's thread, the BEGIN still ran and nothing rolled it
    back: the ship's audit end joined it and was lost when the manifest closed
    (the console said "last ship never" after a stopped ship)."""
    path = tmp_path / "coldkeep.db"
    async with await Manifest.open(path) as m:
        inserts = [
            (
                "INSERT INTO audit (at, user, host, pid, origin, action, args, outcome) "
                "VALUES (1, 'u', 'h', 1, 'cli', ?, '{}', 'ok')",
                (f"t{n}",),
            )
            for n in range(3)
        ]
        moving = asyncio.ensure_future(m.transaction(inserts))
        for _ in range(turns):
            await asyncio.sleep(0)
        moving.cancel()
        await asyncio.gather(moving, return_exceptions=True)
        await audit.begin(m, at=2, origin="cli", action="after", args={})
    with sqlite3.connect(path) as db:
        actions = [a for (a,) in db.execute("SELECT action FROM audit ORDER BY id")]
    assert actions[-1] == "after", actions
    assert actions[:-1] in ([], ["t0", "t1", "t2"]), "all of the transaction or none of it"
