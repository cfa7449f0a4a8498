"""``coldkeep doctor``: every check ok on a good site; each problem of a broken one
named in its own line, with exit 1 (2 for a config that does not load).

Most cases call ``core.ops.doctor.diagnose`` in process; the CLI runs three times: a
good site, a bad config, and a site whose archive, live tree and remote folder
are read-only bind mounts (in a private mount namespace, since root writes
through any mode bits and ``os.access`` says yes to root on a writable mount)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyrage import x25519

from coldkeep.core.base.space import RESERVE_BYTES
from coldkeep.core.ops import doctorfs, doctorspace
from coldkeep.core.ops.demo import write_demo
from coldkeep.core.ops.doctor import diagnose
from coldkeep.core.ops.doctorfinding import Finding
from coldkeep.core.ops.doctorfs import filesystem_of
from coldkeep.core.store.schema import SCHEMA_VERSION
from coldkeep.tui.cli.doctor import exit_code

from helpers import COLDKEEP, ck
from s3kit import S3Site
from s3kit.proxy import Respond, StripHeader

CHECKS = [
    "config",
    "live_root",
    "archive_root",
    "archive_write",
    "manifest",
    "live_write",
    "open_files",
    "space",
    "live_db",
    "events_index",
    "events_kinds",
    "events_triggers",
    "events_foreign_keys",
    "remote",
    "site_claim",
    "site_key",
    "clock",
    "tools",
]


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """pigz and gzip on PATH (this machine may lack pigz: the tools check is
    about PATH, not about what they do)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("pigz", "gzip"):
        tool = bin_dir / name
        tool.write_text("#!/bin/sh\nexec true\n")
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir


@pytest.fixture
def site(disk_path: Path, tools: Path) -> Path:
    """A demo site with its remote folder in place (a first ship would make it),
    on the disk: on the tests' tmpfs its archive would be a warning."""
    config = write_demo(disk_path / "demo", seed=5, scale=0.02).config
    (config.parent / "remote").mkdir()
    return config


def by_check(findings: list[Finding]) -> dict[str, Finding]:
    return {f.check: f for f in findings}


def with_remote(config: Path, table: str) -> None:
    text = config.read_text()
    old = '[remote]\nurl = "file:remote"\nsite = "demo"\n'
    assert old in text
    config.write_text(text.replace(old, f"[remote]\n{table}"))


def problems(findings: list[Finding]) -> dict[str, Finding]:
    return {f.check: f for f in findings if f.level != "ok"}


# a good site ---------------------------------------------------------------------


def test_a_good_site_is_all_ok_through_the_cli(site: Path) -> None:
    run = ck(site.parent, "doctor", "--json")
    doc = json.loads(run.stdout)
    assert doc["command"] == "doctor" and doc["ok"] is True
    found = doc["result"]["findings"]
    assert [f["check"] for f in found] == CHECKS
    assert [f for f in found if f["level"] != "ok"] == []
    text = ck(site.parent, "doctor").stdout
    assert text.splitlines()[-1] == "ready for a pass"
    assert re.search(r"^ok +events_index +index events_kind_ts on events \(kind, ts\)$", text, re.M)
    # Nothing left behind, no lock taken: its probes are gone again.
    archive, remote = site.parent / "archive", site.parent / "remote"
    assert sorted(p.name for p in archive.iterdir()) == ["files"]
    assert list(remote.iterdir()) == []


async def test_what_the_good_site_lines_say(site: Path) -> None:
    f = by_check(await diagnose(site))
    assert "same filesystem as live_root" in f["archive_root"].found
    assert "created, fsynced and removed" in f["archive_write"].found
    assert "folders below it holding eligible files" in f["live_write"].found
    assert "write lease" in f["open_files"].found
    assert "it fits" in f["space"].found and "event rows" in f["space"].found
    assert "WAL mode" in f["live_db"].found
    assert "refuses to overwrite" in f["remote"].found
    assert "pigz at" in f["tools"].found and "gzip at" in f["tools"].found


# the config --------------------------------------------------------------------


def test_a_bad_config_is_a_finding_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "coldkeep.toml").write_text('live_root = "nowhere"\narchive_root = "a"\n')
    run = ck(tmp_path, "doctor", "--json", check=2)
    doc = json.loads(run.stdout)
    [finding] = doc["result"]["findings"]
    assert doc["ok"] is False and finding["check"] == "config" and finding["level"] == "fail"
    assert "live_root" in finding["found"] and "does not exist" in finding["found"]


# the roots and their filesystems ---------------------------------------------------


async def test_a_missing_archive_root_is_a_warning_naming_where_it_would_go(site: Path) -> None:
    shutil.rmtree(site.parent / "archive")
    findings = await diagnose(site)
    f = problems(findings)
    assert set(f) == {"archive_root"}
    assert f["archive_root"].level == "warn"
    assert "does not exist yet: the first pass creates it on" in f["archive_root"].found
    assert "mount" in f["archive_root"].fix
    assert exit_code(findings) == 0
    assert not (site.parent / "archive").exists()  # said, not made


async def test_an_archive_on_tmpfs_is_a_warning(site: Path) -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or filesystem_of(shm).fstype != "tmpfs":
        pytest.skip("no tmpfs at /dev/shm")
    archive = shm / f"coldkeep-doctor-test-{os.getpid()}"
    archive.mkdir()
    try:
        site.write_text(
            site.read_text().replace('archive_root = "archive"', f'archive_root = "{archive}"')
        )
        f = by_check(await diagnose(site))
    finally:
        shutil.rmtree(archive)
    assert f["archive_root"].level == "warn"
    assert "tmpfs" in f["archive_root"].found and "lost on reboot" in f["archive_root"].found
    assert "not live_root's filesystem" in f["archive_root"].found


def test_mountinfo_names_and_escapes_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = os.path.realpath(tmp_path)
    dev = os.stat(tmp_path).st_dev
    devname = f"{os.major(dev)}:{os.minor(dev)}"
    fake = tmp_path / "mountinfo"
    fake.write_text(
        f"1 0 {devname} / / rw - ext4 /dev/root rw\n"
        f"2 1 9:9 / {real} rw - nfs server:/x rw\n"  # another device over the path
        f"3 1 {devname} / {real.replace(' ', chr(92) + '040')} rw - xfs /dev/my\\040disk rw\n"
    )
    monkeypatch.setattr(doctorfs, "MOUNTINFO", fake)
    fs = filesystem_of(tmp_path / "not-yet" / "made")
    assert (fs.fstype, fs.source, str(fs.mount)) == ("xfs", "/dev/my disk", real)


# free space ----------------------------------------------------------------------


async def test_too_little_room_warns_and_none_fails(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(doctorspace, "free_bytes", lambda path: RESERVE_BYTES + 100_000)
    f = by_check(await diagnose(site))["space"]
    assert f.level == "warn" and "fits only if it compresses to" in f.found
    monkeypatch.setattr(doctorspace, "free_bytes", lambda path: 4096)
    findings = await diagnose(site)
    f = by_check(findings)["space"]
    assert f.level == "fail" and "the filesystem is full" in f.found
    assert exit_code(findings) == 1


# the manifest ---------------------------------------------------------------------


def _manifest_at_version(site: Path, version: int) -> Path:
    db = site.parent / "archive" / "coldkeep.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (x)")
        conn.execute(f"PRAGMA user_version = {version}")
    conn.close()
    return db


def test_a_manifest_from_a_newer_coldkeep_is_not_ready_for_a_pass(site: Path) -> None:
    db = _manifest_at_version(site, SCHEMA_VERSION + 1)
    run = ck(site.parent, "doctor", check=1)
    assert "ready for a pass" not in run.stdout
    line = next(x for x in run.stdout.splitlines() if " manifest " in x)
    assert line.startswith("FAIL") and str(db) in line and "upgrade coldkeep" in line


async def test_a_manifest_that_is_not_sqlite_or_is_damaged_fails(site: Path) -> None:
    db = site.parent / "archive" / "coldkeep.db"
    db.write_bytes(b"this is not a database" * 300)
    f = problems(await diagnose(site))
    assert f["manifest"].level == "fail" and str(db) in f["manifest"].found
    assert "cannot be read as a SQLite database" in f["manifest"].found
    assert "rebuild-manifest" in f["manifest"].fix
    db.unlink()
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA page_size = 1024")
        conn.execute("CREATE TABLE t (x TEXT)")
        conn.execute("CREATE INDEX t_x ON t (x)")
        conn.executemany("INSERT INTO t VALUES (?)", [(f"row {i:05d}" * 4,) for i in range(4000)])
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 't_x'").fetchone()[0]
    conn.close()
    with db.open("r+b") as out:  # the index's root page overwritten
        out.seek((root - 1) * 1024)
        out.write(b"\xff" * 1024)
    findings = await diagnose(site)
    f = problems(findings)
    assert f["manifest"].level == "fail" and "quick_check" in f["manifest"].found
    assert exit_code(findings) == 1


async def test_a_lost_manifest_and_another_trees_archive_fail(site: Path) -> None:
    archive, live = site.parent / "archive", (site.parent / "live").resolve()
    record = archive / "coldkeep.site"
    record.write_text(json.dumps({"live_root": str(live), "dev": 0, "ino": 0}))
    f = problems(await diagnose(site))
    assert f["manifest"].level == "fail"
    assert "is missing" in f["manifest"].found and "rebuild-manifest" in f["manifest"].found
    record.write_text('{"live_root": "/x", "dev": 0, "ino": 0}\n')
    f = problems(await diagnose(site))
    assert f["manifest"].level == "fail"
    assert "belongs to the live tree /x" in f["manifest"].found


# the live database ----------------------------------------------------------------


async def test_a_live_db_not_in_wal_mode_and_without_the_index_fails_on_both(
    site: Path,
) -> None:
    db = site.parent / "state.db"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA journal_mode = DELETE")
        conn.execute("DROP INDEX events_kind_ts")
        conn.execute("CREATE INDEX events_ts_kind ON events (ts, kind)")  # the wrong order
        conn.execute("CREATE INDEX events_kind ON events (kind, ts) WHERE kind = 'x'")  # partial
    conn.close()
    findings = await diagnose(site)
    f = problems(findings)
    assert set(f) == {"live_db", "events_index"}
    assert f["live_db"].level == "fail"
    assert f"{db} is not in WAL mode (delete)" in f["live_db"].found
    assert "journal_mode=WAL" in f["live_db"].fix
    assert f["events_index"].level == "fail"
    assert "no index on events (kind, ts)" in f["events_index"].found
    assert "CREATE INDEX" in f["events_index"].fix
    assert exit_code(findings) == 1


async def test_an_index_led_by_kind_and_ts_is_enough(site: Path) -> None:
    db = site.parent / "state.db"
    with sqlite3.connect(db) as conn:
        conn.execute("DROP INDEX events_kind_ts")
        conn.execute("CREATE INDEX longer ON events (kind, ts, id)")
    conn.close()
    f = by_check(await diagnose(site))["events_index"]
    assert f.level == "ok" and "longer" in f.found


async def test_triggers_and_foreign_keys_on_the_events_table_are_reported(site: Path) -> None:
    db = site.parent / "state.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE deliveries (event_id INTEGER REFERENCES events (id))")
        conn.execute(
            "CREATE TRIGGER events_cleanup AFTER DELETE ON events "
            "BEGIN DELETE FROM deliveries WHERE event_id = old.id; END"
        )
        conn.execute("CREATE TRIGGER events_count AFTER INSERT ON events BEGIN SELECT 1; END")
    conn.close()
    findings = await diagnose(site)
    f = problems(findings)
    assert set(f) == {"events_triggers", "events_foreign_keys"}
    assert f["events_triggers"].level == f["events_foreign_keys"].level == "fail"
    assert f["events_triggers"].found == (
        "on table events, events_cleanup (AFTER DELETE) fire on the move's DELETE; "
        "events_count (AFTER INSERT) on a restore's INSERT: the event phase and "
        "restore-events refused"
    )
    assert "deliveries.event_id (ON DELETE NO ACTION)" in f["events_foreign_keys"].found
    assert exit_code(findings) == 1

    text = site.read_text()
    site.write_text(text.replace("[events]\n", '[events]\ntriggers = "fire"\n', 1))
    f = problems(await diagnose(site))
    assert f["events_triggers"].level == "warn" and "events.triggers" in f["events_triggers"].found


# the remote ----------------------------------------------------------------------


async def test_a_file_remote_that_cannot_be_made_fails(site: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with_remote(site, f'url = "file://{blocker}/remote"\nsite = "demo"\n')
    findings = await diagnose(site)
    f = problems(findings)
    assert set(f) == {"remote"} and f["remote"].level == "fail"
    assert f"{blocker} is not a writable directory" in f["remote"].found
    assert exit_code(findings) == 1


async def test_a_missing_remote_folder_is_said_not_made(site: Path) -> None:
    (site.parent / "remote").rmdir()
    f = by_check(await diagnose(site))["remote"]
    assert f.level == "warn" and "does not exist yet" in f.found
    assert not (site.parent / "remote").exists()


def test_a_remote_that_has_shipped_and_lost_its_marker_fails(site: Path) -> None:
    """After a ship, the remote's disk unmounted: gone, or an empty mount point."""
    remote = site.parent / "remote"
    ck(site.parent, "pass")
    ck(site.parent, "ship")
    remote.rename(site.parent / "remote-disk")
    for empty_mount_point in (False, True):
        if empty_mount_point:
            remote.mkdir()
        run = ck(site.parent, "doctor", "--json", check=1)
        f = {x["check"]: x for x in json.loads(run.stdout)["result"]["findings"]}["remote"]
        assert f["level"] == "fail", f
        assert "has no marker: is its disk mounted?" in f["found"]
        assert remote.exists() == empty_mount_point
    remote.rmdir()
    (site.parent / "remote-disk").rename(remote)
    run = ck(site.parent, "doctor", "--json", check=None)
    f = {x["check"]: x for x in json.loads(run.stdout)["result"]["findings"]}["remote"]
    assert f["level"] == "ok", f


@pytest.fixture
def s3_site(site: Path, s3: S3Site) -> Iterator[Path]:
    with_remote(
        site,
        f'url = "s3://{s3.bucket}/pre"\nendpoint_url = "{s3.endpoint}"\n'
        f'region = "us-east-1"\nsite = "demo"\n',
    )
    yield site
    assert s3.server.list_keys(s3.bucket) == []  # every probe deleted again


async def test_an_s3_remote_answers_and_refuses_overwrites(s3_site: Path) -> None:
    f = by_check(await diagnose(s3_site))["remote"]
    assert f.level == "ok" and "refuses to overwrite" in f.found


async def test_an_s3_remote_without_conditional_writes_is_a_warning(
    s3_site: Path, s3: S3Site
) -> None:
    s3.proxy.fail(StripHeader("If-None-Match"))
    findings = await diagnose(s3_site)
    f = by_check(findings)["remote"]
    assert f.level == "warn" and "does not refuse to overwrite" in f.found
    assert "HEAD first" in f.fix
    assert exit_code(findings) == 0


async def test_refused_s3_credentials_fail_in_one_line(s3_site: Path, s3: S3Site) -> None:
    denied = b"<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
    s3.proxy.fail(Respond(403, denied), method="PUT")
    f = by_check(await diagnose(s3_site))["remote"]
    assert f.level == "fail" and "the credentials were refused" in f.found
    assert "\n" not in f.found


# tools ---------------------------------------------------------------------------


async def test_missing_tools_only_warn(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    findings = await diagnose(site)
    f = by_check(findings)["tools"]
    assert f.level == "warn" and "not on PATH: pigz, gzip" in f.found
    assert exit_code(findings) == 0


# write access, for real ---------------------------------------------------------


def _can_bind_mount() -> str | None:
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return "unshare or mount is not installed"
    probe = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "true"], capture_output=True, check=False
    )
    return None if probe.returncode == 0 else "no private mount namespace here (needs root)"


def test_read_only_archive_live_tree_and_remote_each_fail(site: Path) -> None:
    """Root writes through mode bits; a read-only mount it cannot. The mounts live
    in the child's own namespace and end with it."""
    why = _can_bind_mount()
    if why:
        pytest.skip(why)
    root = site.parent
    mounts = " && ".join(
        f"mount --bind {d} {d} && mount -o remount,ro,bind {d} {d}"
        for d in (root / "archive", root / "live", root / "remote")
    )
    argv = shlex.join([*COLDKEEP, "doctor", "--json", "--config", str(site)])
    run = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", f"{mounts} && exec {argv}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    f = {x["check"]: x for x in json.loads(run.stdout)["result"]["findings"]}
    fails = {check for check, x in f.items() if x["level"] == "fail"}
    assert fails == {"archive_write", "live_write", "remote"}, f
    assert "Read-only file system" in f["archive_write"]["found"]
    assert "are not writable" in f["live_write"]["found"]
    assert "Read-only file system" in f["remote"]["found"]


async def test_a_plain_bucket_says_its_settings_and_that_its_objects_are_unencrypted(
    s3_site: Path,
) -> None:
    f = by_check(await diagnose(s3_site))
    assert (
        f["bucket_versioning"].level == "ok" and "never turned on" in f["bucket_versioning"].found
    )
    assert f["bucket_lock"] == Finding("bucket_lock", "ok", "no Object Lock")
    enc = f["bucket_encryption"]
    assert enc.level == "warn" and "stored unencrypted" in enc.found and "sse" in enc.fix
    assert "bucket" not in f  # every setting read


def test_a_plain_bucket_under_client_side_encryption_is_not_said_to_store_plaintext(
    site: Path, s3: S3Site
) -> None:
    """With [remote] encrypt_to, what is shipped is sealed before it leaves: a
    bucket without encryption of its own stores ciphertext, not "unencrypted"."""
    public = x25519.Identity.generate().to_public()
    with_remote(
        site,
        f'url = "s3://{s3.bucket}/pre"\nendpoint_url = "{s3.endpoint}"\n'
        f'region = "us-east-1"\nsite = "demo"\nencrypt_to = ["{public}"]\n',
    )
    text = ck(site.parent, "doctor").stdout
    [line] = [x for x in text.splitlines() if " bucket_encryption " in x]
    assert line.startswith("ok "), line
    assert "[remote] sse is not set; what coldkeep ships is sealed to [remote] encrypt_to" in line
    assert "unencrypted" not in line


async def test_a_versioned_bucket_with_a_default_encryption_is_said_one_line_each(
    s3_site: Path, s3: S3Site
) -> None:
    client = s3.server.client
    client.put_bucket_versioning(Bucket=s3.bucket, VersioningConfiguration={"Status": "Enabled"})
    client.put_bucket_encryption(
        Bucket=s3.bucket,
        ServerSideEncryptionConfiguration={
            "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
        },
    )
    f = by_check(await diagnose(s3_site))
    v = f["bucket_versioning"]
    assert v.level == "warn" and "noncurrent version" in v.found and "lifecycle" in v.fix
    assert f["bucket_encryption"] == Finding(
        "bucket_encryption",
        "ok",
        "the bucket's default is server-side encryption AES256; [remote] sse is not set",
    )


async def test_a_bucket_with_object_lock_says_its_default_retention(site: Path, s3: S3Site) -> None:
    client = s3.server.client
    client.create_bucket(Bucket="locked", ObjectLockEnabledForBucket=True)
    client.put_object_lock_configuration(
        Bucket="locked",
        ObjectLockConfiguration={
            "ObjectLockEnabled": "Enabled",
            "Rule": {"DefaultRetention": {"Mode": "COMPLIANCE", "Days": 30}},
        },
    )
    with_remote(
        site,
        f'url = "s3://locked/pre"\nendpoint_url = "{s3.endpoint}"\n'
        'region = "us-east-1"\nsite = "demo"\nsse = "AES256"\n',
    )
    f = by_check(await diagnose(site))
    lock = f["bucket_lock"]
    assert lock.level == "warn" and "on, COMPLIANCE for 30 days by default" in lock.found
    assert f["bucket_versioning"].level == "ok"  # the lock's line says what it means
    assert "every upload asks for AES256" in f["bucket_encryption"].found


@pytest.mark.parametrize(("bucket_lock", "level"), [(False, "fail"), (True, "ok")])
async def test_object_lock_asked_for_is_held_against_the_bucket(
    site: Path, s3: S3Site, bucket_lock: bool, level: str
) -> None:
    s3.server.client.create_bucket(Bucket="worm", ObjectLockEnabledForBucket=bucket_lock)
    with_remote(
        site,
        f'url = "s3://worm/pre"\nendpoint_url = "{s3.endpoint}"\nregion = "us-east-1"\n'
        'site = "demo"\nobject_lock = "compliance"\n',
    )
    site.write_text(site.read_text() + "\n[retention]\nfiles_days = 400\nevents_days = 400\n")
    lock = by_check(await diagnose(site))["bucket_lock"]
    assert lock.level == level, lock
    if bucket_lock:
        assert "each object is locked compliance until its expiry" in lock.found
    else:
        assert "the bucket has no Object Lock: every ship stops" in lock.found
        assert 'object_lock = "off"' in lock.fix


async def test_settings_this_host_may_not_read_are_said_not_fatal(
    s3_site: Path, s3: S3Site
) -> None:
    denied = b"<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
    s3.proxy.fail(Respond(403, denied), method="GET", query=r"^versioning")
    f = by_check(await diagnose(s3_site))
    assert f["bucket_versioning"].found == "not read (below)"
    assert f["bucket"].level == "warn" and "its versioning (AccessDenied)" in f["bucket"].found
    assert "s3:GetBucketVersioning" in f["bucket"].fix
    assert f["remote"].level == "ok"


@pytest.mark.parametrize(
    ("files", "retention", "said"),
    [
        (
            "bundle_below = 1048576\n",
            "files_days = 30\n",
            ["expire after 30 days", "180 days at least", "bundle_below"],
        ),
        ("", "files_days = 400\n", []),  # a cold class bundles all it can by default
    ],
)
async def test_a_cold_class_is_warned_of_what_it_would_cost(
    site: Path, s3: S3Site, files: str, retention: str, said: list[str]
) -> None:
    config = site
    text = config.read_text().replace("[files]\n", f"[files]\n{files}")
    config.write_text(text.replace("[remote]\n", f"[retention]\n{retention}\n[remote]\n"))
    with_remote(
        config,
        f'url = "s3://{s3.bucket}/pre"\nendpoint_url = "{s3.endpoint}"\n'
        'region = "us-east-1"\nsite = "demo"\nstorage_class = "DEEP_ARCHIVE"\n',
    )
    f = by_check(await diagnose(config))["cold_class"]
    assert f.level == ("warn" if said else "ok"), f
    assert all(s in f.found + f.fix for s in said), f
    assert s3.server.list_keys(s3.bucket) == [], "the probe is deleted (and was STANDARD)"
