"""``coldkeep rekey`` on a bucket with Object Lock and legal holds, killed with
SIGKILL at each step it announces (the upload, the row, an old copy's hold
lifted, its delete, its tracking while the lock keeps it). Right after the
kill every object of the site's files/ and events/ is a row's or a key
``remote_loose`` tracks; the rekey run again settles what the kill left and
finishes: every row's object locked until its expiry and held as the holds in
force say, no old copy held, each one deleted or tracked with the lock the
bucket says it has, and ``status`` counting what the bucket holds."""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

import pytest
from sealkit import new_identity

from bucketcheck import check_promise, data_keys, db, head, loose
from helpers import ck
from remotecheck import PREFIX, SITE, bucket_tier, demo_after_pass, remote_rows, set_remote
from s3kit import S3Site

pytestmark = pytest.mark.crash
KILL = "COLDKEEP_TEST_KILL_AT"
KEYS = "keep_local_days = 0\n"
LONG = "\n[retention]\nfiles_days = 400\nevents_days = 400\n"
# Unlocked old copies under legal holds: each is unheld, then deleted.
FIRST = ["object_uploaded", "object_recorded", "loose_unheld", "loose_deleted", "loose_deleted:6"]
# Old copies locked for 400 days under legal holds: unheld, then tracked.
SECOND = ["loose_unheld", "loose_kept", "loose_kept:6"]


@pytest.fixture(scope="module")
def passed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_after_pass(tmp_path_factory.mktemp("rekey-crash") / "demo")


def locked_site(passed: Path, worm: S3Site, tmp_path: Path) -> tuple[Path, Path, set[str]]:
    """A copy of the site shipped to the bucket unsealed and unlocked, every
    local copy dropped; then object_lock set and every event month held (its
    S3 legal holds placed), sealing to a first key. The site, that key's
    identity file, and the rows' paths the hold covers."""
    site = tmp_path / "site"
    shutil.copytree(passed, site)
    set_remote(site, bucket_tier(worm, PREFIX, SITE, KEYS + LONG).table)
    ck(site, "ship")
    first, to = new_identity(tmp_path, "first.txt")
    locked = f'{KEYS}object_lock = "compliance"\nencrypt_to = ["{to.keys[0]}"]\n'
    set_remote(site, bucket_tier(worm, PREFIX, SITE, locked + LONG).table)
    ck(site, "hold", "add", "--unit", "events", "--reason", "tax year")
    held = {p for p, r in remote_rows(site).items() if r["month"] is not None}
    assert held and all(head(worm, p)["held"] for p in held)
    return site, first, held


def killed(site: Path, step: str, *args: str) -> None:
    """``rekey --yes ARGS`` killed at ``step``; then nothing in the bucket that
    no row records and ``remote_loose`` does not track."""
    run = ck(site, "rekey", "--yes", *args, check=None, env={KILL: step})
    assert run.returncode == -signal.SIGKILL, f"not killed at {step}: {run.stdout}{run.stderr}"
    with db(site) as c:
        assert c.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def accounted(site: Path, worm: S3Site) -> None:
    rows = {r["stored_as"] or p for p, r in remote_rows(site).items()}
    unrecorded = data_keys(site, worm) - rows - set(loose(site))
    assert not unrecorded, f"in the bucket, no row's and not tracked: {sorted(unrecorded)}"


@pytest.mark.parametrize("step", FIRST)
def test_rekey_killed_at_each_step(passed: Path, worm: S3Site, tmp_path: Path, step: str) -> None:
    site, _, held = locked_site(passed, worm, tmp_path)
    killed(site, step)
    accounted(site, worm)
    ck(site, "rekey", "--yes")
    accounted(site, worm)
    assert all(r["sealed_to"] for r in remote_rows(site).values())
    check_promise(site, worm, held)


@pytest.mark.parametrize("step", SECOND)
def test_a_second_rekey_killed_at_each_step(
    passed: Path, worm: S3Site, tmp_path: Path, step: str
) -> None:
    site, first, held = locked_site(passed, worm, tmp_path)
    ck(site, "rekey", "--yes")
    _, to = new_identity(tmp_path, "second.txt")
    locked = f'{KEYS}object_lock = "compliance"\nencrypt_to = ["{to.keys[0]}"]\n'
    set_remote(site, bucket_tier(worm, PREFIX, SITE, locked + LONG).table)
    killed(site, step, "--identity", str(first))
    accounted(site, worm)
    ck(site, "rekey", "--yes", "--identity", str(first))
    accounted(site, worm)
    assert {r["sealed_to"] for r in remote_rows(site).values()} == {to.fingerprint}
    check_promise(site, worm, held)


def test_hold_release_after_a_cut_rekey_lifts_the_old_copies_holds_too(
    passed: Path, worm: S3Site, tmp_path: Path
) -> None:
    """Killed once an object is sealed again and recorded, before its old copy's
    hold was lifted: ``hold release`` lifts that one too (it is tracked), and
    no legal hold is left anywhere in the bucket."""
    site, _, _ = locked_site(passed, worm, tmp_path)
    killed(site, "object_recorded")
    [(old, (_, on))] = loose(site).items()
    assert on and head(worm, old)["held"], "the old copy still held, and tracked so"
    ck(site, "hold", "release", "1")
    assert not [k for k in data_keys(site, worm) if head(worm, k)["held"]]
    assert loose(site) == {old: (None, 0)}
    ck(site, "rekey", "--yes")
    accounted(site, worm)
    check_promise(site, worm, set())
