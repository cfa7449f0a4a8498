"""The remote tier on a real S3 server (moto's server mode) behind a fault proxy:
each fault's outcome in one line, and zero bytes lost in every one of them."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyrage import x25519

from helpers import ck, ck_json, entries, report_line, sha
from remotecheck import check_remote_site, demo_after_pass, remote_rows, set_remote
from s3kit import S3Site
from s3kit.proxy import INTERNAL_ERROR, SLOW_DOWN, Delay, ResetRequest, StripHeader, Truncate
from s3kit.server import ACCESS_KEY, SECRET_KEY
from sitecheck import Tally

SITE = "web-1"
PREFIX = "fleet"


@pytest.fixture(scope="module")
def archived(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A demo site after a pass (its [remote] is written per test)."""
    return demo_after_pass(tmp_path_factory.mktemp("s3-template") / "site")


@pytest.fixture(scope="module")
def tally(request: pytest.FixtureRequest) -> Iterator[Tally]:
    t = Tally()
    yield t
    report_line(request.config, t.line("S3 fault matrix", "faults"))


def with_remote(
    archived: Path, tmp_path: Path, s3: S3Site, keep_local_days: int = 0, more: str = ""
) -> Path:
    site = tmp_path / "site"
    shutil.copytree(archived, site, symlinks=True)
    set_remote(
        site,
        f'url = "s3://{s3.bucket}/{PREFIX}"\nendpoint_url = "{s3.endpoint}"\n'
        f'region = "us-east-1"\nsite = "{SITE}"\nkeep_local_days = {keep_local_days}\n{more}',
    )
    return site


def check(
    site: Path,
    s3: S3Site,
    tally: Tally,
    identity: x25519.Identity | None = None,
    *,
    settled: bool = True,
) -> None:
    def fetch(key: str) -> bytes | None:
        return s3.server.get_raw(s3.bucket, f"{PREFIX}/{key}")

    tally.checks += check_remote_site(site, fetch, SITE, settled=settled, identity=identity)


def test_a_ship_to_s3_is_read_back_and_resumes_to_nothing(
    archived: Path, tmp_path: Path, s3: S3Site, tally: Tally
) -> None:
    site = with_remote(archived, tmp_path, s3, keep_local_days=-1)
    s3.proxy.reset_counts()
    doc = ck_json(site, "ship")
    result = doc["result"]
    assert doc["ok"] and result["uploaded"] > 0 and result["problems"] == []
    keys = s3.server.list_keys(s3.bucket, f"{PREFIX}/{SITE}/")
    assert any("/files/" in k for k in keys) and any("/events/" in k for k in keys)
    snapshot = f"{PREFIX}/{result['snapshot']}"
    assert [k for k in keys if "/manifest/" in k] == [snapshot, f"{snapshot}.sig"]
    assert not [k for k in s3.server.list_keys(s3.bucket) if ".coldkeep-probe" in k]
    check(site, s3, tally)
    # Read back as a group: the PUTs' answers gave the checksums, one listing the sizes.
    files = [x for x in s3.proxy.exchanges if "/files/" in x.path or "files" in x.query]
    assert [x.method for x in files if x.method != "PUT"] == ["GET"], "one listing, no HEAD"
    s3.proxy.reset_counts()
    again = ck_json(site, "ship")["result"]
    assert (again["uploaded"], again["snapshot"]) == (0, None)
    puts = [x.path for x in s3.proxy.exchanges if x.method == "PUT"]
    # Its heartbeat alone, then the beat's entry in the fleet's index.
    [beat, entry] = puts
    assert "/fleet/web-1/heartbeat/" in beat, puts
    assert entry.endswith(f"/fleet/.beats/web-1/{beat.rpartition('/')[2]}"), puts


@pytest.mark.parametrize(
    ("name", "action", "method"),
    [
        ("503 SlowDown on two PUTs", SLOW_DOWN, "PUT"),
        ("500 on two HEADs", INTERNAL_ERROR, "HEAD"),
        ("connection reset mid-upload", ResetRequest(after_bytes=2000), "PUT"),
    ],
)
def test_transient_faults_are_retried_and_the_ship_completes(
    archived: Path, tmp_path: Path, s3: S3Site, tally: Tally, name: str, action: object, method: str
) -> None:
    site = with_remote(archived, tmp_path, s3)
    rule = s3.proxy.fail(action, method=method, path=r"/files/", times=2)  # type: ignore[arg-type]
    result = ck_json(site, "ship")["result"]
    assert rule.hits == 2, name
    assert result["problems"] == [] and result["dropped"] > 0, name
    check(site, s3, tally)
    tally.faults += 2
    tally.by_kind[name] += 2


def test_a_server_that_keeps_failing_costs_nothing_local(
    archived: Path, tmp_path: Path, s3: S3Site, tally: Tally
) -> None:
    site = with_remote(archived, tmp_path, s3)
    # Both ways of reading back: HEAD per object, and the listing of a group.
    s3.proxy.fail(INTERNAL_ERROR, method="HEAD", path=r"/files/")
    s3.proxy.fail(INTERNAL_ERROR, method="GET", query=r"list-type=2.*files")
    # Each request fails once, not after botocore's retries and their backoff
    # (8 s): the retries are not what this tests.
    run = ck(site, "ship", check=1, env={"AWS_MAX_ATTEMPTS": "1"})
    assert "500 while reading its size and checksum" in run.stdout, run.stdout
    rows = remote_rows(site)
    assert not [p for p in rows if p.startswith("files/")], "nothing recorded unread"
    assert [p for p in (site / "archive" / "files").rglob("*") if p.is_file()], "nothing dropped"
    check(site, s3, tally)
    s3.proxy.clear()
    assert ck_json(site, "ship")["result"]["already"] > 0, "uploaded then, recorded now"
    check(site, s3, tally)
    tally.faults += 1
    tally.by_kind["500 on every read-back"] += 1


def test_a_truncated_range_is_read_again_and_restores_whole(
    archived: Path, tmp_path: Path, s3: S3Site, tally: Tally
) -> None:
    site = with_remote(archived, tmp_path, s3)
    ck(site, "ship")
    s3.proxy.fail(Truncate(keep_bytes=100), method="GET", path=r"/files/", times=1)
    out = tmp_path / "out"
    doc = ck_json(site, "restore", "--unit", "unit-0000", "--to", str(out))
    assert doc["ok"], doc
    check(site, s3, tally)
    tally.faults += 1
    tally.by_kind["truncated GET"] += 1


def test_a_bucket_that_ignores_conditional_writes_is_said_and_never_overwritten(
    archived: Path, tmp_path: Path, s3: S3Site, tally: Tally
) -> None:
    site = with_remote(archived, tmp_path, s3)
    s3.proxy.fail(StripHeader("If-None-Match"), method="PUT")
    key = f"{PREFIX}/{SITE}/files/bulk-0/firehose.jsonl.gz"
    s3.server.put_raw(s3.bucket, key, b"another host's bytes")
    run = ck(site, "ship", check=1)
    assert "does not refuse an existing key" in run.stderr
    assert "bulk-0/firehose.jsonl.gz was already there with 20 bytes" in run.stdout, run.stdout
    assert s3.server.get_raw(s3.bucket, key) == b"another host's bytes"
    assert (site / "archive" / "files" / "bulk-0" / "firehose.jsonl.gz").is_file()
    check(site, s3, tally)
    tally.faults += 1
    tally.by_kind["no conditional writes"] += 1


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""}, "no AWS credentials found"),
    ],
)
def test_missing_credentials_are_one_clear_line(
    archived: Path,
    tmp_path: Path,
    s3: S3Site,
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    says: str,
) -> None:
    site = with_remote(archived, tmp_path, s3)
    for name in env:
        monkeypatch.delenv(name)
    run = ck(site, "ship", check=1)
    [line] = run.stderr.strip().splitlines()[-1:]
    assert says in line and "AWS_ACCESS_KEY_ID" in line, run.stderr
    assert [p for p in (site / "archive" / "files").rglob("*") if p.is_file()], "nothing dropped"


def test_disaster_recovery_from_the_bucket_alone(
    archived: Path, tmp_path: Path, s3: S3Site, tally: Tally
) -> None:
    """Archive and ship, lose the whole archive_root, rebuild from the bucket,
    restore everything to a new folder: every byte identical."""
    site = with_remote(archived, tmp_path, s3, keep_local_days=-1)
    ck(site, "ship")
    expected = {e["relpath"]: e["sha256"] for e in entries(site)}  # newest version of each
    months = {p.name: event_rows_of(p) for p in (site / "archive" / "events").glob("*.db")}
    shutil.rmtree(site / "archive")

    doc = ck_json(site, "rebuild-manifest", "--from-remote")
    assert doc["ok"] and doc["result"]["never_shipped"] == [], doc
    assert doc["result"]["remote_only"] > 0 and doc["result"]["snapshot"].startswith(
        f"{SITE}/manifest/"
    )
    out = tmp_path / "restored"
    restored = ck_json(site, "restore", "--path", "**", "--to", str(out))
    assert restored["ok"], restored
    back = {
        p.relative_to(out).as_posix(): sha(p.read_bytes()) for p in out.rglob("*") if p.is_file()
    }
    assert back == expected
    # Every month comes back, the one passes were still adding to as well.
    fetched = {p.name: event_rows_of(p) for p in (site / "archive" / "events").glob("*.db")}
    assert fetched == months and doc["result"]["events_never_shipped"] == []
    events = ck_json(site, "restore-events")
    assert events["ok"] and events["result"]["restored"] == sum(map(len, months.values())) > 0
    check(site, s3, tally)
    tally.faults += 1
    tally.by_kind["whole archive_root lost"] += 1


def event_rows_of(db: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        return sorted(conn.execute("SELECT * FROM events"))


def test_without_a_manifest_snapshot_the_archive_files_rebuild_it(
    archived: Path, tmp_path: Path, s3: S3Site, tally: Tally
) -> None:
    site = with_remote(archived, tmp_path, s3, keep_local_days=0)
    ck(site, "ship")
    # A rebuilt manifest knows no stale versions: every version comes back.
    expected = sorted(e["sha256"] for e in entries(site))
    for key in s3.server.list_keys(s3.bucket, f"{PREFIX}/{SITE}/manifest/"):
        s3.server.delete_raw(s3.bucket, key)
    shutil.rmtree(site / "archive")
    doc = ck_json(site, "rebuild-manifest", "--from-remote")
    assert doc["ok"] and doc["result"]["snapshot"] is None and doc["result"]["fetched"] > 0
    out = tmp_path / "restored"
    assert ck_json(site, "restore", "--path", "**", "--all-versions", "--to", str(out))["ok"]
    assert sorted(sha(p.read_bytes()) for p in out.rglob("*") if p.is_file()) == expected
    tally.faults += 1
    tally.by_kind["archive_root and every snapshot lost"] += 1


def test_refused_credentials_are_one_clear_line_and_cost_nothing(
    archived: Path, tmp_path: Path, s3: S3Site, tally: Tally
) -> None:
    site = with_remote(archived, tmp_path, s3)
    s3.server.set_auth(True)  # moto checks keys from now on: the test's are unknown to it
    try:
        run = ck(site, "ship", check=1)
    finally:
        s3.server.set_auth(False)
    [line] = run.stderr.strip().splitlines()[-1:]
    assert "the credentials were refused" in line and "AWS_ACCESS_KEY_ID" in line, run.stderr
    assert ACCESS_KEY not in run.stderr + run.stdout and SECRET_KEY not in run.stderr + run.stdout
    assert [p for p in (site / "archive" / "files").rglob("*") if p.is_file()], "nothing dropped"
    assert remote_rows(site) == {}
    tally.faults += 1
    tally.by_kind["credentials refused"] += 1


def test_a_slow_server_only_makes_the_ship_slower(
    archived: Path, tmp_path: Path, s3: S3Site, tally: Tally
) -> None:
    site = with_remote(archived, tmp_path, s3)
    rule = s3.proxy.fail(Delay(0.2), path=r"/files/", times=10)
    result = ck_json(site, "ship")["result"]
    assert rule.hits == 10 and result["problems"] == [] and result["dropped"] > 0
    check(site, s3, tally)
    tally.faults += 10
    tally.by_kind["0.2 s of latency"] += 10


def test_copies_changed_or_deleted_behind_coldkeeps_back_are_shipped_again(
    archived: Path, tmp_path: Path, s3: S3Site, tally: Tally
) -> None:
    site = with_remote(archived, tmp_path, s3, keep_local_days=-1)
    ck(site, "ship")
    keys = sorted(k for k in s3.server.list_keys(s3.bucket, f"{PREFIX}/{SITE}/files/"))
    s3.server.put_raw(s3.bucket, keys[0], b"bit rot")
    s3.server.delete_raw(s3.bucket, keys[1])
    doc = ck_json(site, "verify", "--remote")
    assert doc["ok"] and len(doc["result"]["reshipped"]) == 2, doc
    check(site, s3, tally)
    tally.faults += 2
    tally.by_kind["remote copy changed or deleted"] += 2


@pytest.mark.parametrize("sealed", [False, True], ids=["plain", "sealed"])
@pytest.mark.parametrize("step", ["object_uploaded", "object_recorded", "local_drop_recorded"])
def test_a_ship_to_s3_killed_at_a_step_resumes_without_loss(
    archived: Path, tmp_path: Path, s3: S3Site, tally: Tally, step: str, sealed: bool
) -> None:
    key = x25519.Identity.generate() if sealed else None
    more = f'encrypt_to = ["{key.to_public()}"]\n' if key is not None else ""
    site = with_remote(archived, tmp_path, s3, more=more)
    run = ck(site, "ship", check=None, env={"COLDKEEP_TEST_KILL_AT": f"{step}:3"})
    assert run.returncode == -signal.SIGKILL, run.stderr
    # Sealing writes each object to a scratch file first: the uploads in flight
    # when it was killed left theirs, which the next ship removes.
    check(site, s3, tally, key, settled=not sealed)
    result = ck_json(site, "ship")["result"]
    assert result["problems"] == [] and result["pending"] == 0
    check(site, s3, tally, key)
    tally.faults += 1
    tally.by_kind[f"SIGKILL at {step}{' (sealed)' if sealed else ''}"] += 1


def test_a_month_that_never_shipped_is_said_by_status_and_by_the_rebuild(
    archived: Path, tmp_path: Path, s3: S3Site, tally: Tally
) -> None:
    """A month whose snapshot the server refused: status counts its rows, and
    once the host is lost the rebuild names it, from what the manifest snapshot
    recorded, and exits 1."""
    site = with_remote(archived, tmp_path, s3, keep_local_days=-1)
    months = {p.stem: event_rows_of(p) for p in (site / "archive" / "events").glob("*.db")}
    lost = max(months)
    s3.proxy.fail(INTERNAL_ERROR, method="PUT", path=rf"/events/{lost}\.")
    shipped = ck_json(site, "ship", check=1)["result"]
    assert len(shipped["problems"]) == 1 and lost in shipped["problems"][0]
    assert shipped["snapshot"] is not None, "the manifest snapshot went, knowing the month"
    remote = ck_json(site, "status")["result"]["remote"]
    assert remote["pending_event_months"] == 1
    assert remote["pending_event_rows"] == len(months[lost])
    text = ck(site, "status").stdout
    assert f"{len(months[lost])} event rows in 1 month" in text, text
    s3.proxy.clear()
    shutil.rmtree(site / "archive")

    run = ck(site, "rebuild-manifest", "--from-remote", check=1)
    line = f"event month {lost}: {len(months[lost])} archived rows were NEVER SHIPPED"
    assert line in run.stdout, run.stdout
    doc = ck_json(site, "rebuild-manifest", "--from-remote", check=1)
    assert doc["result"]["events_never_shipped"] == [
        {"month": lost, "rows": len(months[lost]), "shipped_rows": 0}
    ]
    events = ck_json(site, "restore-events")["result"]
    assert events["restored"] == sum(len(r) for m, r in months.items() if m != lost)
    tally.faults += 1
    tally.by_kind["an event month's snapshot refused"] += 1


def test_an_unreachable_endpoint_stops_the_ship_at_once_in_one_line(
    archived: Path, tmp_path: Path, s3: S3Site, tally: Tally
) -> None:
    site = with_remote(archived, tmp_path, s3)
    with socket.socket() as closed:  # bound, never listening: every connect is refused
        closed.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{closed.getsockname()[1]}"
        text = (site / "coldkeep.toml").read_text().replace(s3.endpoint, dead)
        (site / "coldkeep.toml").write_text(text)
        pending = ck_json(site, "status")["result"]["remote"]["pending_files"]
        assert pending > 1
        run = ck(site, "ship", check=1, env={"AWS_MAX_ATTEMPTS": "1"})
    said = [ln for ln in (run.stdout + run.stderr).splitlines() if "cannot reach" in ln]
    assert len(said) == 1, run.stdout + run.stderr
    assert said[0].startswith("coldkeep: ") and dead in said[0]
    assert remote_rows(site) == {}, "nothing recorded"
    after = ck_json(site, "status")["result"]["remote"]
    assert after["pending_files"] == pending and after["last_ship"]["outcome"] == "error"
    assert [p for p in (site / "archive" / "files").rglob("*") if p.is_file()], "nothing dropped"
    tally.faults += 1
    tally.by_kind["endpoint unreachable"] += 1


def test_the_probe_is_named_at_its_one_key(archived: Path, tmp_path: Path, s3: S3Site) -> None:
    site = with_remote(archived, tmp_path, s3)
    s3.proxy.fail(INTERNAL_ERROR, method="PUT", path=r"\.coldkeep-probe/")
    where = f"s3://{s3.bucket}/{PREFIX}/.coldkeep-probe/"
    env = {"AWS_MAX_ATTEMPTS": "1"}
    doctor = json.loads(ck(site, "doctor", "--json", check=1, env=env).stdout)
    [finding] = [f for f in doctor["result"]["findings"] if f["check"] == "remote"]
    assert finding["level"] == "fail" and where in finding["found"], finding
    shipped = ck(site, "ship", check=1, env=env)
    # The first write of a first ship is the remote marker's: the ship stops there.
    said = shipped.stdout + shipped.stderr
    assert where in said and f"{PREFIX}/{PREFIX}/" not in said, said


def test_a_prefix_emptied_behind_coldkeeps_back_stops_the_ship_and_drops_nothing(
    archived: Path, tmp_path: Path, s3: S3Site
) -> None:
    """The marker and every object of the site gone (a lifecycle rule, a wrong
    prefix, another bucket behind the same name): nothing is shipped into it
    and nothing local is dropped on its strength."""
    site = with_remote(archived, tmp_path, s3, keep_local_days=-1)
    assert ck_json(site, "ship")["ok"]
    assert s3.server.get_raw(s3.bucket, f"{PREFIX}/.coldkeep-remote") is not None
    for key in s3.server.list_keys(s3.bucket, f"{PREFIX}/"):
        s3.server.delete_raw(s3.bucket, key)
    set_remote(
        site,
        f'url = "s3://{s3.bucket}/{PREFIX}"\nendpoint_url = "{s3.endpoint}"\n'
        f'region = "us-east-1"\nsite = "{SITE}"\nkeep_local_days = 0\n',
    )
    local = sorted(p for p in (site / "archive" / "files").rglob("*") if p.is_file())
    run = ck(site, "ship", check=1)
    [line] = [x for x in run.stderr.splitlines() if x.startswith("coldkeep: ")]
    said = f"the remote s3://{s3.bucket}/{PREFIX} has no marker: was the bucket or its prefix "
    assert said + "emptied, or is remote.url or remote.site wrong?" in line, run.stderr
    assert "disk" not in line, "a bucket has no disk to mount"
    assert s3.server.list_keys(s3.bucket, f"{PREFIX}/") == []
    assert sorted(p for p in (site / "archive" / "files").rglob("*") if p.is_file()) == local


def _encryption_of(s3: S3Site, key: str) -> tuple[str | None, str | None]:
    got = s3.server.client.head_object(Bucket=s3.bucket, Key=key)
    return got.get("ServerSideEncryption"), got.get("SSEKMSKeyId")


def test_every_object_is_stored_with_the_server_side_encryption_asked(
    archived: Path, tmp_path: Path, s3: S3Site, tally: Tally
) -> None:
    asked = 'sse = "aws:kms"\nkms_key_id = "coldkeep-test"\n'
    site = with_remote(archived, tmp_path, s3, keep_local_days=-1, more=asked)
    doc = ck_json(site, "ship")
    assert doc["ok"] and doc["result"]["problems"] == [] and doc["result"]["uploaded"] > 0
    keys = s3.server.list_keys(s3.bucket, f"{PREFIX}/{SITE}/")
    assert keys and {k.rsplit("/", 2)[-2] for k in keys} >= {"manifest"}
    for key in keys:
        sse, kms = _encryption_of(s3, key)
        assert sse == "aws:kms" and (kms or "").endswith("coldkeep-test"), key
    check(site, s3, tally)


def test_an_object_stored_without_the_encryption_asked_is_not_recorded(
    archived: Path, tmp_path: Path, s3: S3Site, tally: Tally
) -> None:
    """A proxy (or policy) that drops the encryption header: the answer says
    what the server applied, each such object is a problem, nothing is
    recorded or dropped, and the next ship, through an honest path, says the
    same of what is already there until it is replaced."""
    site = with_remote(archived, tmp_path, s3, more='sse = "aws:kms"\n')
    rule = s3.proxy.fail(StripHeader("x-amz-server-side-encryption"), method="PUT", path="/files/")
    result = ck_json(site, "ship", check=1)["result"]
    assert rule.hits > 0
    problems = [p for p in result["problems"] if "/files/" in p]
    assert len(problems) == rule.hits, problems
    assert all("not the server-side encryption aws:kms [remote] asks for" in p for p in problems)
    assert not [p for p in remote_rows(site) if p.startswith("files/")], "nothing recorded"
    assert [p for p in (site / "archive" / "files").rglob("*.gz")], "nothing dropped"
    s3.proxy.clear()
    again = ck_json(site, "ship", check=1)["result"]
    assert [p for p in again["problems"] if "was already there with" in p] != []
    check(site, s3, tally)
