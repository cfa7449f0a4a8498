"""The day the host is gone, tried as an adversary and a new operator would,
through the CLI, on a folder remote and on moto's S3 server: disaster recovery
takes only the site's own signed snapshots, the newest generation of them,
whatever the names in the bucket, the host's clock or a second host with the
same remote.site; what it does not take it names, and where it cannot tell it
refuses in one line."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyrage
import pytest
from pyrage import x25519

from coldkeep.core.base.signing import SiteKey
from coldkeep.core.remote.snapshots import Statement, sign

from helpers import ck, ck_json, cli_ok, write_old
from remotecheck import set_remote
from s3kit import S3Site

pytest_plugins = ["s3kit"]

NAME = "web"  # both hosts' remote.site


def demo(path: Path, seed: int) -> Path:
    cli_ok("demo", str(path), "--scale", "0.02", "--seed", str(seed), "--no-console")
    ck(path, "pass")
    return path


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two demo sites after a pass: host a's and host b's (other files)."""
    base = tmp_path_factory.mktemp("hosts")
    return {"a": demo(base / "a", 3), "b": demo(base / "b", 4)}


@dataclass(frozen=True)
class Bucket:
    """A remote both hosts can be pointed at, reached behind coldkeep's back
    by key under its prefix."""

    table: Callable[[str], str]  # the [remote] table for a remote.site
    keys: Callable[[str], list[str]]  # every key under a prefix, sorted
    get: Callable[[str], bytes | None]
    put: Callable[[str, bytes], None]
    kind: str = "folder"


def folder_bucket(root: Path) -> Bucket:
    def keys(prefix: str) -> list[str]:
        return sorted(
            p.relative_to(root).as_posix()
            for p in root.rglob("*")
            if p.is_file() and p.relative_to(root).as_posix().startswith(prefix)
        )

    def get(key: str) -> bytes | None:
        path = root / key
        return path.read_bytes() if path.is_file() else None

    def put(key: str, data: bytes) -> None:
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(data)

    return Bucket(lambda site: f'url = "{root.as_uri()}"\nsite = "{site}"\n', keys, get, put)


def s3_bucket(s3: S3Site) -> Bucket:
    def table(site: str) -> str:
        return (
            f'url = "s3://{s3.bucket}/fleet"\nendpoint_url = "{s3.endpoint}"\n'
            f'region = "us-east-1"\nsite = "{site}"\n'
        )

    return Bucket(
        table,
        lambda prefix: sorted(
            k.removeprefix("fleet/") for k in s3.server.list_keys(s3.bucket, f"fleet/{prefix}")
        ),
        lambda key: s3.server.get_raw(s3.bucket, f"fleet/{key}"),
        lambda key, data: s3.server.put_raw(s3.bucket, f"fleet/{key}", data),
        "bucket",
    )


@pytest.fixture(params=["folder", "bucket"])
def bucket(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Bucket]:
    if request.param == "folder":
        yield folder_bucket(tmp_path / "bucket")
    else:
        yield s3_bucket(request.getfixturevalue("s3"))


def host(templates: dict[str, Path], tmp_path: Path, which: str, table: str) -> Path:
    site = tmp_path / which
    shutil.copytree(templates[which], site)
    set_remote(site, table)
    return site


def relpaths(site: Path) -> set[str]:
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        return {str(r[0]) for r in db.execute("SELECT relpath FROM entries")}


def lost(site: Path) -> set[str]:
    """The host's archive gone (the disk, the host): what it had archived."""
    had = relpaths(site)
    shutil.rmtree(site / "archive")
    return had


def recovered(site: Path, *args: str, check: int = 0) -> dict[str, Any]:
    return ck_json(site, "rebuild-manifest", "--from-remote", *args, check=check)


def one_line(run: subprocess.CompletedProcess[str]) -> str:
    """The one line the command said why it stopped (progress aside)."""
    lines = [line for line in run.stderr.splitlines() if line.startswith("coldkeep: ")]
    assert len(lines) == 1, run.stderr
    return lines[0]


def new_file(site: Path, n: int) -> str:
    """A file of a closed unit, old enough for the next pass to archive it."""
    unit = next(p for p in sorted((site / "live").iterdir()) if (p / ".closed").exists())
    rel = f"{unit.name}/late-{n}.jsonl"
    write_old(site, rel.encode(), f'{{"late": {n}}}\n'.encode() * 200)
    return rel


def faketime(ahead: str) -> list[str]:
    if shutil.which("faketime") is None:
        pytest.skip("faketime is not installed (make pytest installs it as root)")
    return ["faketime", "-f", ahead]


# 1. two hosts, one remote.site --------------------------------------------------------------


def test_a_second_host_with_the_same_site_name_is_refused_before_it_writes(
    templates: dict[str, Path], tmp_path: Path, bucket: Bucket
) -> None:
    a = host(templates, tmp_path, "a", bucket.table(NAME))
    b = host(templates, tmp_path, "b", bucket.table(NAME))
    ck(a, "ship")
    before = {k: bucket.get(k) for k in bucket.keys(f"{NAME}/")}
    doctor = ck(b, "doctor", check=1)
    assert "FAIL  site_claim" in doctor.stdout and "belongs to site id" in doctor.stdout
    refused = one_line(ck(b, "ship", check=1))
    assert f"remote.site '{NAME}' belongs to site id" in refused
    assert "nothing was shipped" in refused and "remote.site of its own" in refused
    assert {k: bucket.get(k) for k in bucket.keys(f"{NAME}/")} == before, "b wrote nothing"

    had = lost(a)
    done = recovered(a)
    assert done["ok"] and done["result"]["generation"] == 1
    assert relpaths(a) == had, "a's files, and only a's"
    listed = recovered(a, "--list")["result"]
    assert [s["verdict"] for s in listed["snapshots"]] == ["own"]


# 2. snapshots ordered by generation, never by names or a host's clock -------------------------


def test_a_ship_made_while_the_clock_ran_a_year_ahead_pins_nothing(
    templates: dict[str, Path], tmp_path: Path, bucket: Bucket
) -> None:
    a = host(templates, tmp_path, "a", bucket.table(NAME))
    ck(a, "ship")
    late = [new_file(a, 1)]
    ck(a, "pass")
    ck(a, "ship", under=faketime("+365d"))  # generation 2, from a clock a year ahead
    late.append(new_file(a, 2))
    ck(a, "pass")
    ck(a, "ship")  # generation 3, the clock right again
    had = lost(a)
    assert set(late) <= had
    done = recovered(a)["result"]
    assert done["generation"] == 3 and relpaths(a) == had


def test_planted_snapshots_that_sort_later_are_never_taken_nor_prune_the_site_s_own(
    templates: dict[str, Path], tmp_path: Path, bucket: Bucket
) -> None:
    a = host(templates, tmp_path, "a", bucket.table(NAME))
    ck(a, "ship")
    with sqlite3.connect(tmp_path / "junk.db") as db:
        db.execute("CREATE TABLE entries (relpath TEXT)")
    junk = (tmp_path / "junk.db").read_bytes()
    planted = [f"{NAME}/manifest/g99999999999{n}-0000000{n}.db" for n in range(9)]
    planted.append(f"{NAME}/manifest/99991231T235959.999Z.db")  # an older coldkeep's name
    for key in planted:
        bucket.put(key, junk)
    bucket.put(planted[0] + ".sig", b'{"statement": {}, "signature": "", "public_key": ""}')
    # On a folder, more ships than snapshots kept (ten): the prune runs.
    ships = 10 if bucket.kind == "folder" else 1
    for n in range(ships):
        new_file(a, n)
        ck(a, "pass")
        shipped = ck_json(a, "ship")["result"]
        assert not shipped["problems"]
    assert any("are not this site's own snapshots" in n for n in shipped["notices"])
    own = [k for k in bucket.keys(f"{NAME}/manifest/g0") if k.endswith(".db")]
    # The newest ten of the site's own, whatever sorts after them.
    assert len(own) == min(10, ships + 1), own
    if bucket.kind == "folder":
        # The planted names are left (the timestamped one an older coldkeep's
        # snapshot would have, unsigned, goes with the prune, as those do).
        assert set(planted[:-1]) <= set(bucket.keys(f"{NAME}/manifest/")), "left, not deleted"

    had = lost(a)
    done = recovered(a)["result"]
    assert done["generation"] == ships + 1 and relpaths(a) == had
    verdicts = {s["key"]: s["verdict"] for s in recovered(a, "--list")["result"]["snapshots"]}
    assert {verdicts[k.removeprefix(f"{NAME}/")] for k in planted[:-1]} == {"forged", "unsigned"}


# 2c. another site's snapshot; a forgery sealed to the site's public recipient ----------------


def test_another_site_s_snapshot_and_a_forgery_sealed_to_the_public_recipient_are_not_taken(
    templates: dict[str, Path], tmp_path: Path, bucket: Bucket
) -> None:
    store = bucket
    identity = x25519.Identity.generate()
    (tmp_path / "key.txt").write_text(f"{identity}\n")
    (tmp_path / "key.txt").chmod(0o600)  # its owner's alone: no warning among the lines
    sealed = f'encrypt_to = ["{identity.to_public()}"]\n'
    a = host(templates, tmp_path, "a", store.table(NAME) + sealed)
    # b seals to a key of its own: its snapshot is one a's identity cannot open
    # (on the old code such a snapshot, newest by name, stopped recovery for good).
    theirs = f'encrypt_to = ["{x25519.Identity.generate().to_public()}"]\n'
    b = host(templates, tmp_path, "b", store.table("elsewhere") + theirs)
    ck(a, "ship")
    ck(b, "ship")
    site_id = ck_json(a, "site", "show")["result"]["site_id"]
    fingerprint = ck_json(a, "site", "show")["result"]["key"]

    # b's genuine snapshot and statement, copied under a's prefix as they are.
    for key in store.keys("elsewhere/manifest/"):
        data = store.get(key)
        assert data is not None
        store.put(f"{NAME}/{key.removeprefix('elsewhere/')}", data)
    # A forgery: b's manifest as a's generation 99, sealed to a's public recipient
    # and signed by a key of the forger's own for a's site id.
    forged_db = tmp_path / "forged.db"
    shutil.copy(b / "archive" / "coldkeep.db", forged_db)
    forger = SiteKey.new()
    with sqlite3.connect(forged_db) as db:
        db.execute("UPDATE site_state SET site_id = ?, generation = 99", [site_id])
        db.execute(
            "INSERT INTO site_keys (fingerprint, public_key, added_at) VALUES (?, ?, 0)",
            [forger.fingerprint, forger.public_b64],
        )
    body = pyrage.encrypt(forged_db.read_bytes(), [identity.to_public()])
    name = f"manifest/g000000000099-deadbeef.db.{_set_of(a)}.age"
    store.put(f"{NAME}/{name}", body)
    statement = Statement(
        NAME, site_id, 99, 0, name, len(body), _sha(body), "forger", forger.fingerprint
    )
    store.put(f"{NAME}/{name}.sig", sign(forger, statement))

    had = lost(a)
    identity_args = ("--identity", str(tmp_path / "key.txt"))
    # Two site ids, and two keys signing a's: which is a's, only the operator knows.
    refused = ck(a, "rebuild-manifest", "--from-remote", *identity_args, check=2)
    assert "snapshots of 2 sites are there" in one_line(refused)
    refused = ck(a, "rebuild-manifest", "--from-remote", "--site-id", site_id, check=2)
    line = one_line(refused)
    assert "signed by 2 keys" in line and "--site-key" in line
    assert not (a / "archive" / "coldkeep.db").exists()
    done = recovered(a, *identity_args, "--site-key", fingerprint)["result"]
    assert done["generation"] == 1 and relpaths(a) == had
    assert done["site_key"].endswith("was recovered from the bucket")
    said = " ".join(done["others"])
    assert "another site's" in said and "signed by a key not trusted" in said


def _set_of(site: Path) -> str:
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        return str(db.execute("SELECT sealed_to FROM remote_objects LIMIT 1").fetchone()[0])


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# the key lost: a documented path, never a dead end ----------------------------------------


def test_a_lost_site_key_is_replaced_and_recovery_goes_on_with_the_fingerprint_written_down(
    templates: dict[str, Path], tmp_path: Path
) -> None:
    store = folder_bucket(tmp_path / "bucket")
    a = host(templates, tmp_path, "a", store.table(NAME))
    ck(a, "ship")
    old = ck_json(a, "site", "show")["result"]["key"]
    had = lost(a)  # the key with it: no encrypt_to, so the bucket holds no copy
    done = recovered(a)["result"]
    assert "no sealed copy of the site key" in done["site_key"]
    assert "does not hold it" in ck(a, "site", "show", check=1).stdout
    new_file(a, 1)
    ck(a, "pass")
    shipped = ck_json(a, "ship", check=1)["result"]
    assert shipped["uploaded"] > 0, "the files ship all the same"
    assert any("no manifest snapshot shipped" in p for p in shipped["problems"])
    made = ck_json(a, "site", "new-key")["result"]
    assert made["fingerprint"] != old and made["retired"] == [old]
    assert not ck_json(a, "ship")["result"]["problems"]

    had |= lost(a)
    line = one_line(ck(a, "rebuild-manifest", "--from-remote", check=2))
    assert "signed by 2 keys" in line
    done = recovered(a, "--site-key", made["fingerprint"])["result"]
    # Generation 2 was taken by the ship that had no key to sign it with.
    assert done["generation"] == 3 and relpaths(a) == had
    shutil.rmtree(a / "archive")
    old_only = recovered(a, "--site-key", old)["result"]
    assert old_only["generation"] == 1
    assert any("signed by a key not trusted" in o for o in old_only["others"])


# 4. the bucket's clock ------------------------------------------------------------------------


def test_a_host_clock_a_year_ahead_locks_nothing_wrong_and_expires_nothing_early(
    templates: dict[str, Path], tmp_path: Path, worm: S3Site
) -> None:
    table = (
        f'url = "s3://{worm.bucket}/fleet"\nendpoint_url = "{worm.endpoint}"\n'
        f'region = "us-east-1"\nsite = "{NAME}"\nobject_lock = "compliance"\n'
        "\n[retention]\nfiles_days = 400\nevents_days = 400\n"
    )
    a = host(templates, tmp_path, "a", table)
    ahead = faketime("+400d")
    doctor = ck(a, "doctor", check=1, under=ahead)
    assert "FAIL  clock" in doctor.stdout and "days ahead of the bucket's" in doctor.stdout
    line = one_line(ck(a, "ship", check=1, under=ahead))
    assert "this host's clock is 400 days ahead of the bucket's" in line
    assert worm.server.list_keys(worm.bucket, "fleet/") == [], "nothing written"

    ck(a, "ship")
    keys = worm.server.list_keys(worm.bucket, f"fleet/{NAME}/")
    archive = sorted(p for p in (a / "archive").rglob("*") if p.is_file())
    expired = ck(a, "expire", "--yes", "--json", check=1, under=ahead)
    result = json.loads(expired.stdout)["result"]
    assert result["expired"] == [] and result["not_due"]
    assert all("ahead of the bucket's" in line for line in result["not_due"])
    assert worm.server.list_keys(worm.bucket, f"fleet/{NAME}/") == keys
    assert sorted(p for p in (a / "archive").rglob("*") if p.is_file()) == archive


def test_a_newest_snapshot_dated_in_the_future_is_named_not_taken_in_silence(
    templates: dict[str, Path], tmp_path: Path
) -> None:
    store = folder_bucket(tmp_path / "bucket")  # a folder's clock is the host's
    a = host(templates, tmp_path, "a", store.table(NAME))
    ck(a, "ship")
    new_file(a, 1)
    ck(a, "pass")
    ck(a, "ship", under=faketime("+365d"))  # generation 2, dated a year ahead
    lost(a)
    done = recovered(a, check=1)["result"]
    assert done["generation"] == 1
    [line] = [p for p in done["problems"] if "newer than the one taken" in p]
    assert "generation 2" in line and "ahead of the bucket's now" in line and "--snapshot" in line


def test_a_manifest_rebuilt_from_the_gzips_goes_on_after_the_bucket_s_generations(
    templates: dict[str, Path], tmp_path: Path
) -> None:
    store = folder_bucket(tmp_path / "bucket")
    a = host(templates, tmp_path, "a", store.table(NAME))
    ck(a, "ship")
    new_file(a, 1)
    ck(a, "pass")
    ck(a, "ship")
    (a / "archive" / "coldkeep.db").rename(tmp_path / "lost.db")
    for side in (a / "archive").glob("coldkeep.db-*"):
        side.unlink()
    ck(a, "rebuild-manifest")  # from the gzips kept here: the site's id from coldkeep.site
    shipped = ck_json(a, "ship")["result"]
    assert not shipped["problems"]
    assert any("go on after generation 2" in n for n in shipped["notices"])
    assert ck_json(a, "site", "show")["result"]["generation"] == 3
