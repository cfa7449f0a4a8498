"""What the bucket promised, checked behind coldkeep's back: every object of a
site's files/ and events/ a row's or a loose key ``remote_loose`` tracks; each
row's object locked until at least its expiry and under a legal hold where a
hold in force covers it, as its HEAD says; rows and ``remote_loose`` saying
what the HEADs say; ``status`` counting what the bucket holds. On a ``file://``
folder, where no lock applies: nothing locked, nothing tracked."""

from __future__ import annotations

import calendar
import sqlite3
import time
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from coldkeep.core.base.times import DAY_MS

from helpers import ck_json
from remotecheck import PREFIX, SITE, remote_rows
from s3kit import S3Site

TOP = f"{PREFIX}/{SITE}/"


def db(site: Path) -> sqlite3.Connection:
    return sqlite3.connect(site / "archive" / "coldkeep.db")


def loose(site: Path) -> dict[str, tuple[int | None, int]]:
    """remote_loose: key -> (retain_until, legal_hold)."""
    with db(site) as c:
        rows = c.execute("SELECT key, retain_until, legal_hold FROM remote_loose").fetchall()
    return {k: (until, held) for k, until, held in rows}


def data_keys(site: Path, bucket: S3Site | None) -> set[str]:
    """Every key under the site's files/ and events/ that holds any version of
    an object (a folder: every file but an upload's partial)."""
    if bucket is None:
        root = site / "remote" / SITE
        return {
            p.relative_to(root).as_posix()
            for top in ("files", "events")
            for p in (root / top).rglob("*")
            if p.is_file() and not p.name.endswith(".partial")
        }
    found = set()
    for top in ("files/", "events/"):
        pages = bucket.server.client.get_paginator("list_object_versions").paginate(
            Bucket=bucket.bucket, Prefix=TOP + top
        )
        for page in pages:
            for v in [*page.get("Versions", []), *page.get("DeleteMarkers", [])]:
                found.add(str(v["Key"]).removeprefix(TOP))
    return found


def head(bucket: S3Site, key: str) -> dict[str, Any]:
    """The object at ``key`` (under the site) as its HEAD says it, its legal
    hold as GetObjectLegalHold says it (and the HEAD agrees)."""
    client = bucket.server.client
    said: dict[str, Any] = client.head_object(Bucket=bucket.bucket, Key=TOP + key)
    try:
        answer = client.get_object_legal_hold(Bucket=bucket.bucket, Key=TOP + key)
        status = answer["LegalHold"].get("Status", "OFF")  # moto: {} for never held
    except ClientError as err:  # S3, for never held: no such configuration
        assert err.response["Error"]["Code"] == "NoSuchObjectLockConfiguration", err
        status = "OFF"
    assert (said.get("ObjectLockLegalHoldStatus") == "ON") == (status == "ON"), key
    said["held"] = status == "ON"
    return said


def until_ms(said: dict[str, Any]) -> int | None:
    when = said.get("ObjectLockRetainUntilDate")
    return None if when is None else int(when.timestamp() * 1000)


def month_end_ms(month: str) -> int:
    year, mon = int(month[:4]), int(month[5:7])
    nxt = (year + mon // 12, mon % 12 + 1)
    return calendar.timegm((*nxt, 1, 0, 0, 0)) * 1000


def expiry_of(site: Path, files_days: float, events_days: float) -> dict[str, int]:
    """When expiry would delete each row's object (ms), read independently:
    an archive file's newest entry mtime plus files_days (none where every
    entry expired), a month's end plus events_days."""
    with db(site) as c:
        newest = dict(
            c.execute(
                "SELECT gz_path, max(mtime_ns) FROM entries WHERE status != 'expired' "
                "GROUP BY gz_path"
            ).fetchall()
        )
    out = {}
    for path, row in remote_rows(site).items():
        if row["month"] is not None:
            out[path] = month_end_ms(row["month"]) + int(events_days * DAY_MS)
        elif path in newest:  # else every entry of it expired
            out[path] = int(newest[path]) // 1_000_000 + int(files_days * DAY_MS)
    return out


def check_promise(
    site: Path, bucket: S3Site | None, held: set[str], days: tuple[float, float] = (400, 400)
) -> None:
    """Every row's object locked until at least its expiry and held where a hold
    in force covers it, as its HEAD says; the row says what the HEAD said;
    every data object in the bucket a row's or a tracked loose key; status
    counts what the bucket holds."""
    rows = remote_rows(site)
    tracked = loose(site)
    # status counts what the rows say is locked at this host's clock (it asks the
    # bucket nothing), which a test may have left behind the bucket's.
    host_now = time.time() * 1000
    remote = ck_json(site, "status")["result"]["remote"]
    assert data_keys(site, bucket) == {r["stored_as"] or p for p, r in rows.items()} | set(tracked)
    if bucket is None:
        assert not tracked, "a folder deletes every old copy at once"
        assert all((r["retain_until"], r["legal_hold"]) == (None, 0) for r in rows.values())
        assert (remote["locked_objects"], remote["legal_held_objects"]) == (0, 0)
        return
    expiry = expiry_of(site, *days)
    now = bucket_now(bucket)
    for path, row in rows.items():
        said = head(bucket, row["stored_as"] or path)
        until = until_ms(said)
        if expiry[path] > now:  # past it, nothing is left to keep it for
            assert said["ObjectLockMode"] == "COMPLIANCE", path
            assert until is not None and until >= expiry[path], path
        assert said["held"] == (path in held), path
        assert (row["retain_until"], bool(row["legal_hold"])) == (until, said["held"]), path
    heads = {key: head(bucket, key) for key in tracked}
    for key, (until, held_on) in tracked.items():
        assert (until, bool(held_on)) == (until_ms(heads[key]), heads[key]["held"]), key
        assert not heads[key]["held"], f"{key}: an old copy keeps no legal hold"
    every = [head(bucket, r["stored_as"] or p) for p, r in rows.items()] + list(heads.values())
    locked = sum((until_ms(h) or 0) > host_now for h in every)
    assert remote["locked_objects"] == locked
    assert remote["legal_held_objects"] == sum(h["held"] for h in every)


def bucket_now(bucket: S3Site) -> int:
    """The bucket's clock (ms): the Date of its answer."""
    answer = bucket.server.client.head_bucket(Bucket=bucket.bucket)
    date = answer["ResponseMetadata"]["HTTPHeaders"]["date"]
    return int(parsedate_to_datetime(date).timestamp() * 1000)


def deletes(bucket: S3Site) -> list[str]:
    """The keys (under the site) the proxy saw a DELETE of, since its counts
    were reset."""
    top = f"/{bucket.bucket}/{TOP}"
    return [x.path.removeprefix(top) for x in bucket.proxy.exchanges if x.method == "DELETE"]
