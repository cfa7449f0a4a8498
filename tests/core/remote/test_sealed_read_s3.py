"""Sealed copies read back from S3 (moto behind the fault proxy), end to end
through the CLI: a site shipped with ``[remote] encrypt_to`` and every local
copy dropped restores bit-identical with ``--identity`` (a 500 and a
truncated GET on a member's ranged read retried), says the key it needs
without; one bundle member costs its own stream's bytes; the host lost, the
archive comes back from the bucket with ``rebuild-manifest --from-remote
--identity``; ``verify --remote --deep`` opens every sealed object and finds
one that is another sealed to the same key."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

from pyrage import x25519

from coldkeep.core.base.times import now_ms
from coldkeep.core.ops.demo import write_demo
from coldkeep.core.remote.sealing import MAGIC

from helpers import COLDKEEP, ck, ck_json
from remotecheck import set_remote
from s3kit import S3Site
from s3kit.proxy import INTERNAL_ERROR, Truncate

pytest_plugins = ["s3kit"]

PREFIX = "fleet"
SITE = "web-1"


def shipped(base: Path, s3: S3Site) -> tuple[Path, Path]:
    """(the site, its identity file): a demo site shipped sealed to a new key,
    every local copy dropped."""
    key = x25519.Identity.generate()
    identity = base / "key.txt"
    identity.write_text(f"{key}\n")
    site = write_demo(base / "demo", seed=21, scale=0.02, now_ms=now_ms()).config.parent
    set_remote(
        site,
        f'url = "s3://{s3.bucket}/{PREFIX}"\nendpoint_url = "{s3.endpoint}"\n'
        f'region = "us-east-1"\nsite = "{SITE}"\nkeep_local_days = 0\n'
        f'encrypt_to = ["{key.to_public()}"]\n',
    )
    ck(site, "pass")
    ck(site, "ship")
    gzips = [p for p in (site / "archive" / "files").rglob("*") if p.is_file()]
    assert not gzips, "every local copy dropped"
    keys = s3.server.list_keys(s3.bucket, f"{PREFIX}/{SITE}/files/")
    assert keys and all((s3.server.get_raw(s3.bucket, k) or b"").startswith(MAGIC) for k in keys)
    return site, identity


def archived(site: Path) -> dict[str, str]:
    """Each archived path's newest version's sha256."""
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        rows = db.execute("SELECT relpath, sha256 FROM entries ORDER BY id").fetchall()
    return {str(r): str(s) for r, s in rows}


def restored(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in folder.rglob("*")
        if p.is_file()
    }


def a_member(site: Path) -> tuple[int, str, int]:
    """(entry id, its bundle's key, its member's length) of the largest member."""
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        entry_id, gz_path, length = db.execute(
            "SELECT id, gz_path, member_length FROM entries WHERE member_offset IS NOT NULL "
            "ORDER BY member_length DESC LIMIT 1"
        ).fetchone()
        [stored] = db.execute(
            "SELECT stored_as FROM remote_objects WHERE path = ?", [gz_path]
        ).fetchone()
    return int(entry_id), str(stored), int(length)


def test_restore_with_and_without_the_identity(tmp_path: Path, s3: S3Site) -> None:
    site, identity = shipped(tmp_path, s3)
    out = tmp_path / "out"
    refused = ck(site, "restore", "--path", "**", "--to", str(out), check=1)
    lines = [line for line in refused.stdout.splitlines() if "give --identity" in line]
    assert lines and all(".age is sealed to " in line for line in lines), refused.stdout
    assert restored(out) == {}
    entry_id, stored, _ = a_member(site)
    # The member's ranged GET answered 500, then cut short: both retried.
    failed = s3.proxy.fail(INTERNAL_ERROR, method="GET", path=stored, times=1)
    cut = s3.proxy.fail(Truncate(keep_bytes=100), method="GET", path=stored, after=1, times=1)
    ck(site, "restore", "--path", "**", "--to", str(out), "--identity", str(identity))
    assert failed.hits == 1 and cut.hits == 1
    assert restored(out) == archived(site)
    wrong = tmp_path / "other.txt"
    wrong.write_text(f"{x25519.Identity.generate()}\n")
    said = ck(
        site,
        "restore",
        str(entry_id),
        "--to",
        str(tmp_path / "o2"),
        "--identity",
        str(wrong),
        check=1,
    )
    assert str(wrong) in said.stdout and "sealed to" in said.stdout


def test_one_member_costs_its_own_stream(tmp_path: Path, s3: S3Site) -> None:
    site, identity = shipped(tmp_path, s3)
    entry_id, stored, length = a_member(site)
    s3.proxy.reset_counts()
    ck(site, "restore", str(entry_id), "--to", str(tmp_path / "out"), "--identity", str(identity))
    gets = [x for x in s3.proxy.exchanges if x.method == "GET" and "/files/" in x.path]
    assert len(gets) == 1 and gets[0].path.endswith(stored)
    assert length < gets[0].body_sent <= length + (64 << 10)
    cat = subprocess.run(
        [
            *ck_prefix(site),
            "cat",
            "--identity",
            str(identity),
            str(entry_path(site, entry_id)) + f"@{entry_id}",
        ],
        capture_output=True,
        check=False,
    )
    assert cat.returncode == 0, cat.stderr
    assert hashlib.sha256(cat.stdout).hexdigest() == entry_sha(site, entry_id)


def ck_prefix(site: Path) -> list[str]:
    return [*COLDKEEP, "--config", str(site / "coldkeep.toml")]


def entry_path(site: Path, entry_id: int) -> str:
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        return str(db.execute("SELECT relpath FROM entries WHERE id = ?", [entry_id]).fetchone()[0])


def entry_sha(site: Path, entry_id: int) -> str:
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        return str(db.execute("SELECT sha256 FROM entries WHERE id = ?", [entry_id]).fetchone()[0])


def test_the_host_lost_comes_back_with_the_identity(tmp_path: Path, s3: S3Site) -> None:
    site, identity = shipped(tmp_path, s3)
    want = archived(site)
    shutil.rmtree(site / "archive")
    said = ck(site, "rebuild-manifest", "--from-remote", check=2)
    assert "give --identity FILE" in said.stderr and "/manifest/" in said.stderr
    assert len([x for x in said.stderr.splitlines() if x.startswith("coldkeep: ")]) == 1
    shutil.rmtree(site / "archive")
    report = ck_json(site, "rebuild-manifest", "--from-remote", "--identity", str(identity))
    assert report["result"]["snapshot"] and not report["result"]["problems"]
    assert report["result"]["months"] > 0, "the sealed month snapshots opened too"
    out = tmp_path / "out"
    ck(site, "restore", "--path", "**", "--to", str(out), "--identity", str(identity))
    assert restored(out) == want


def test_verify_deep_opens_every_sealed_object(tmp_path: Path, s3: S3Site) -> None:
    site, identity = shipped(tmp_path, s3)
    said = ck(site, "verify", "--remote", "--deep", check=2)
    assert "sealed: give --identity FILE" in said.stderr
    report = ck_json(site, "verify", "--remote", "--deep", "--identity", str(identity))
    assert report["result"]["ok"] == report["result"]["checked"] > 1
    # One object replaced by another sealed to the same key: its stored size and
    # sha256 recorded anew behind coldkeep's back, so only opening it tells.
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        a, b = db.execute(
            "SELECT path, stored_as FROM remote_objects WHERE path LIKE 'files/%' "
            "AND path NOT LIKE '%.tar' ORDER BY path LIMIT 2"
        ).fetchall()
        other = s3.server.get_raw(s3.bucket, f"{PREFIX}/{SITE}/{b[1]}")
        assert other is not None
        s3.server.put_raw(s3.bucket, f"{PREFIX}/{SITE}/{a[1]}", other)
        db.execute(
            "UPDATE remote_objects SET bytes = ?, sha256 = ? WHERE path = ?",
            [len(other), hashlib.sha256(other).hexdigest(), a[0]],
        )
    shallow = ck_json(site, "verify", "--remote")
    assert shallow["result"]["failed"] == []
    deep = ck_json(site, "verify", "--remote", "--deep", "--identity", str(identity), check=1)
    [line] = deep["result"]["failed"]
    assert a[1] in line and "not the local file's" in line


def test_one_member_of_a_64_mib_bundle_costs_its_own_stream(tmp_path: Path, s3: S3Site) -> None:
    """A bundle full to its 64 MiB cap: one file restored from it is one ranged
    GET of its own stream, at most its member's size and 64 KiB more."""
    key = x25519.Identity.generate()
    identity = tmp_path / "key.txt"
    identity.write_text(f"{key}\n")
    site = write_demo(tmp_path / "demo", seed=21, scale=0.02, now_ms=now_ms()).config.parent
    unit = site / "live" / "unit-full"
    unit.mkdir()
    old = now_ms() / 1000 - 60 * 86_400
    for i in range(700):  # 700 × 96 KiB that do not compress: past the 64 MiB cap
        path = unit / f"part-{i:03d}.log"
        path.write_bytes(os.urandom(96 << 10))
        os.utime(path, (old, old))
    (unit / ".closed").write_text("closed\n")
    set_remote(
        site,
        f'url = "s3://{s3.bucket}/{PREFIX}"\nendpoint_url = "{s3.endpoint}"\n'
        f'region = "us-east-1"\nsite = "{SITE}"\nkeep_local_days = 0\n'
        f'encrypt_to = ["{key.to_public()}"]\n',
    )
    ck(site, "pass")
    ck(site, "ship")
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        entry_id, gz_path, length = db.execute(
            "SELECT e.id, e.gz_path, e.member_length FROM entries AS e JOIN remote_objects AS r "
            "ON r.path = e.gz_path WHERE e.relpath LIKE 'unit-full/%' AND r.plain_bytes >= ? "
            "ORDER BY e.id LIMIT 1",
            [60 << 20],
        ).fetchone()
    s3.proxy.reset_counts()
    out = tmp_path / "out"
    ck(site, "restore", str(entry_id), "--to", str(out), "--identity", str(identity))
    gets = [x for x in s3.proxy.exchanges if x.method == "GET" and "/files/" in x.path]
    assert len(gets) == 1 and f"/{gz_path}." in gets[0].path, [x.path for x in gets]
    assert length < gets[0].body_sent <= length + (64 << 10)
    [got] = [p for p in out.rglob("*") if p.is_file()]
    assert hashlib.sha256(got.read_bytes()).hexdigest() == archived(site)[str(got.relative_to(out))]
