"""Sealed objects live at keys of their own, new each time: one uploaded and
never recorded (the ship stopped before its read-back) is at a key no later ship
would look at, and an object sealed again leaves its old key to delete. Each is
written down first; the next ship (or rekey) deletes what no row records, so
the bucket holds exactly what the manifest says after a stop, after a SIGKILL
at the upload, and after a rekey whose deletes of the old copies failed."""

from __future__ import annotations

import signal
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest
from pyrage import x25519

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.cancel import Cancelled, CancelToken
from coldkeep.core.base.config import load_settings
from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.base.recipients import RecipientSet, parse_recipients
from coldkeep.core.base.steps import StepHook, StepInfo, StepName, no_step
from coldkeep.core.base.stream import EventStream
from coldkeep.core.base.times import now_ms
from coldkeep.core.ops.demo import write_demo

from helpers import ck, ck_json
from remotecheck import demo_after_pass, set_remote
from s3kit import S3Site
from s3kit.proxy import INTERNAL_ERROR

SITE = "web-1"


def recipients_of(*keys: x25519.Identity) -> RecipientSet:
    return parse_recipients([str(k.to_public()) for k in keys])


def stored(remote: Path) -> set[str]:
    """The keys under the site's files/ that a folder remote holds (an upload
    the stop or the kill cut short too: ``<key>.<random>.partial``, which the
    next ship removes as it does any store's incomplete uploads)."""
    files = remote / SITE / "files"
    return {str(p.relative_to(files.parent)) for p in files.rglob("*") if p.is_file()}


def left_behind(remote: Path, archive: Path) -> set[str]:
    """Whole objects the bucket holds that no row records."""
    return {k for k in stored(remote) - recorded(archive) if not k.endswith(".partial")}


def recorded(archive: Path) -> set[str]:
    """The keys under files/ that the manifest records."""
    with sqlite3.connect(archive / "coldkeep.db") as db:
        rows = db.execute(
            "SELECT coalesce(stored_as, path) FROM remote_objects WHERE path LIKE 'files/%'"
        ).fetchall()
    return {str(r[0]) for r in rows}


def archiver(config: Path, remote: RemoteSettings, step: StepHook = no_step) -> Archiver:
    settings = replace(load_settings(config), remote=remote)
    return Archiver(settings, stream=EventStream(), serve_events=False, step=step)


async def test_a_ship_stopped_before_its_read_back_leaves_nothing_behind(
    tmp_path: Path,
) -> None:
    config = write_demo(tmp_path / "demo", seed=5, scale=0.02, now_ms=now_ms()).config
    folder = tmp_path / "remote"
    folder.mkdir()
    remote = RemoteSettings(
        folder.as_uri(),
        site=SITE,
        keep_local_days=-1,
        encrypt_to=recipients_of(x25519.Identity.generate()),
    )
    token = CancelToken()
    uploaded: list[str] = []

    async def stop_after_three(name: StepName, info: StepInfo) -> None:
        if name == "object_uploaded":
            uploaded.append(str(info["label"]))
            if len(uploaded) == 3:
                token.cancel("stopped by the operator")

    first = archiver(config, remote, stop_after_three)
    await first.run_pass()
    with pytest.raises(Cancelled):
        await first.ship(token)
    archive = config.parent / "archive"
    left = left_behind(folder, archive)
    assert left, "the stop came before a read-back: its uploads are in the bucket, unrecorded"

    report = await archiver(config, remote).ship()
    assert not report.problems and report.loose_deleted == len(left)
    assert stored(folder) == recorded(archive)
    assert not stored(folder) & left


@pytest.mark.crash
def test_a_ship_killed_at_its_first_upload_is_settled_by_the_next(tmp_path: Path) -> None:
    site = demo_after_pass(tmp_path / "site")
    key = str(x25519.Identity.generate().to_public())
    set_remote(
        site,
        f'url = "file:remote"\nsite = "{SITE}"\nkeep_local_days = -1\nencrypt_to = ["{key}"]\n',
    )
    killed = ck(site, "ship", check=None, env={"COLDKEEP_TEST_KILL_AT": "object_uploaded"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    left = left_behind(site / "remote", site / "archive")
    assert left  # the first upload, and any other in flight that finished

    shipped = ck_json(site, "ship")["result"]
    assert shipped["loose_deleted"] == len(left) and not shipped["problems"]
    assert stored(site / "remote") == recorded(site / "archive")


async def test_a_rekey_whose_deletes_failed_leaves_the_old_copies_to_the_next_ship(
    tmp_path: Path, s3: S3Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each failed DELETE fails at once: botocore's retries (3 attempts, a
    # second or two of backoff each) made this test a minute long.
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    config = write_demo(tmp_path / "demo", seed=5, scale=0.02, now_ms=now_ms()).config
    old, new = x25519.Identity.generate(), x25519.Identity.generate()
    remote = RemoteSettings(
        f"s3://{s3.bucket}/fleet",
        endpoint_url=s3.endpoint,
        region="us-east-1",
        site=SITE,
        keep_local_days=-1,
        encrypt_to=recipients_of(old),
    )
    first = archiver(config, remote)
    await first.run_pass()
    assert not (await first.ship()).problems
    archive = config.parent / "archive"
    before = set(s3.server.list_keys(s3.bucket, "fleet/web-1/files/"))
    assert before == {f"fleet/web-1/{k}" for k in recorded(archive)}

    failing = s3.proxy.fail(INTERNAL_ERROR, method="DELETE", times=10_000)
    rekeyed = await archiver(config, replace(remote, encrypt_to=recipients_of(new))).rekey()
    s3.proxy.clear()
    assert failing.hits and rekeyed.resealed and rekeyed.problems  # an old copy's delete failed
    assert set(s3.server.list_keys(s3.bucket, "fleet/web-1/files/")) > before

    left = set(s3.server.list_keys(s3.bucket, "fleet/web-1/files/")) - {
        f"fleet/web-1/{k}" for k in recorded(archive)
    }
    # The next ship cannot delete them either: each is named, and kept for the one after.
    s3.proxy.fail(INTERNAL_ERROR, method="DELETE", times=10_000)
    failed = await archiver(config, replace(remote, encrypt_to=recipients_of(new))).ship()
    s3.proxy.clear()
    assert failed.loose_deleted == 0
    assert len([p for p in failed.problems if "a copy no row records" in p]) == len(left)

    shipped = await archiver(config, replace(remote, encrypt_to=recipients_of(new))).ship()
    assert shipped.loose_deleted == len(left) and not shipped.problems
    now = set(s3.server.list_keys(s3.bucket, "fleet/web-1/files/"))
    assert now == {f"fleet/web-1/{k}" for k in recorded(archive)}
