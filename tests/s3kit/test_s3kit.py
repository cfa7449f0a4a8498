"""s3kit, the S3 test server and its fault proxy (tests/s3kit): requests pass through
intact, each fault does what a client would see from a misbehaving S3, the counts
add up; and what moto itself does with conditional writes and checksums, which the
off-host tests rely on.

The client is botocore (through boto3), as a real user of S3 would have it. Without
moto[server] every test here is skipped, with the reason.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import time
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any

import pytest
from botocore.exceptions import ClientError

from s3kit import S3Site
from s3kit.proxy import (
    INTERNAL_ERROR,
    SLOW_DOWN,
    Delay,
    ResetRequest,
    ResetResponse,
    StripHeader,
    Truncate,
)
from s3kit.thaw import Thaw

boto3 = pytest.importorskip("boto3", reason="the S3 tests need moto[server] (it brings boto3)")
botocore_config = pytest.importorskip("botocore.config")
botocore_exceptions = pytest.importorskip("botocore.exceptions")


MiB = 1 << 20


def client(endpoint: str, *, retry: bool = False) -> Any:
    """A botocore S3 client on ``endpoint``: one attempt per call, or botocore's
    default retries. (``max_attempts`` counts retries in botocore's default mode:
    ``total_max_attempts`` is the one that includes the first try.)"""
    retries = {} if retry else {"total_max_attempts": 1}
    config = botocore_config.Config(
        s3={"addressing_style": "path"}, retries=retries, connect_timeout=5, read_timeout=10
    )
    return boto3.session.Session().client("s3", endpoint_url=endpoint, config=config)


def fetch(s3c: Any, bucket: str, key: str, **kw: Any) -> bytes:
    data = s3c.get_object(Bucket=bucket, Key=key, **kw)["Body"].read()
    assert isinstance(data, bytes)
    return data


def sha256_b64(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode()


def status_of(exc: Any) -> int:
    return int(exc.response["ResponseMetadata"]["HTTPStatusCode"])


# -- the proxy passes requests through ---------------------------------------------
def test_round_trip_through_the_proxy_on_one_kept_alive_connection(s3: S3Site) -> None:
    s3c = client(s3.endpoint)
    data = bytes(range(256)) * 4096  # 1 MiB, every byte value
    s3c.put_object(Bucket=s3.bucket, Key="files/a.gz", Body=data)
    assert fetch(s3c, s3.bucket, "files/a.gz") == data
    assert s3.server.get_raw(s3.bucket, "files/a.gz") == data
    assert s3.server.list_keys(s3.bucket, "files/") == ["files/a.gz"]

    exchanges = s3.proxy.exchanges
    assert [(e.method, e.path, e.status) for e in exchanges] == [
        ("PUT", f"/{s3.bucket}/files/a.gz", 200),
        ("GET", f"/{s3.bucket}/files/a.gz", 200),
    ]
    assert exchanges[0].received == len(data)  # the PUT sent Expect: 100-continue
    assert exchanges[1].body_sent == len(data)
    assert len({e.conn for e in exchanges}) == 1


def test_raw_helpers_act_behind_the_proxys_back(s3: S3Site) -> None:
    s3.server.put_raw(s3.bucket, "x/1", b"one")
    s3.server.put_raw(s3.bucket, "x/2", b"two")
    s3.server.put_raw(s3.bucket, "y/3", b"three")
    s3.server.delete_raw(s3.bucket, "x/2")
    assert s3.server.list_keys(s3.bucket, "x/") == ["x/1"]
    assert s3.server.get_raw(s3.bucket, "x/2") is None
    assert fetch(client(s3.endpoint), s3.bucket, "x/1") == b"one"
    assert s3.proxy.counts == {"GET": 1}


async def test_chunked_upload_from_an_asyncio_client(s3: S3Site) -> None:
    """A chunked body (as aiohttp sends a stream) reaches the server whole, and an
    asyncio test talks to the proxy without any help from its loop."""
    port = int(s3.endpoint.rsplit(":", 1)[1])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    # moto routes on the Authorization's credential scope and never checks the signature.
    auth = "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/s3/aws4_request, Signature=0"
    chunks = [b"alpha-" * 1000, b"beta-" * 10, b"gamma"]
    head = (
        f"PUT /{s3.bucket}/chunked HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: {auth}\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    writer.write(head.encode())
    for chunk in chunks:
        writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
    writer.write(b"0\r\n\r\n")
    await writer.drain()
    status_line = await reader.readline()
    writer.close()
    await writer.wait_closed()
    assert status_line.startswith(b"HTTP/1.1 200 ")
    assert s3.server.get_raw(s3.bucket, "chunked") == b"".join(chunks)


# -- faults ----------------------------------------------------------------------------
def test_slow_down_fails_a_put_without_retries(s3: S3Site) -> None:
    rule = s3.proxy.fail(SLOW_DOWN, method="PUT", path=r"/files/", times=2)
    with pytest.raises(botocore_exceptions.ClientError) as caught:
        client(s3.endpoint).put_object(Bucket=s3.bucket, Key="files/a", Body=b"data")
    assert status_of(caught.value) == 503
    assert caught.value.response["Error"]["Code"] == "SlowDown"
    assert rule.hits == 1
    assert s3.server.get_raw(s3.bucket, "files/a") is None  # never reached the server


def test_slow_down_is_retried_by_botocores_default_retries(s3: S3Site) -> None:
    rule = s3.proxy.fail(SLOW_DOWN, method="PUT", times=1)
    client(s3.endpoint, retry=True).put_object(Bucket=s3.bucket, Key="k", Body=b"data")
    assert rule.hits == 1
    assert s3.proxy.counts == {"PUT": 2}
    assert [e.status for e in s3.proxy.exchanges] == [503, 200]
    assert s3.server.get_raw(s3.bucket, "k") == b"data"


def test_a_rule_acts_on_the_nth_matching_request_only(s3: S3Site) -> None:
    s3c = client(s3.endpoint)
    rule = s3.proxy.fail(INTERNAL_ERROR, method="PUT", path=r"^/[^/]+/files/", after=1, times=1)
    s3c.put_object(Bucket=s3.bucket, Key="other/files/x", Body=b"0")  # no match
    s3c.put_object(Bucket=s3.bucket, Key="files/1", Body=b"1")
    with pytest.raises(botocore_exceptions.ClientError) as caught:
        s3c.put_object(Bucket=s3.bucket, Key="files/2", Body=b"2")
    assert status_of(caught.value) == 500
    assert caught.value.response["Error"]["Code"] == "InternalError"
    s3c.put_object(Bucket=s3.bucket, Key="files/3", Body=b"3")
    assert (rule.matched, rule.hits) == (3, 1)
    assert s3.server.list_keys(s3.bucket, "files/") == ["files/1", "files/3"]


def test_an_error_answer_to_head_leaves_the_connection_usable(s3: S3Site) -> None:
    s3.server.put_raw(s3.bucket, "k", b"12345")
    s3c = client(s3.endpoint)
    s3.proxy.fail(SLOW_DOWN, method="HEAD", times=1)
    with pytest.raises(botocore_exceptions.ClientError) as caught:
        s3c.head_object(Bucket=s3.bucket, Key="k")
    assert status_of(caught.value) == 503
    assert s3c.head_object(Bucket=s3.bucket, Key="k")["ContentLength"] == 5
    assert fetch(s3c, s3.bucket, "k") == b"12345"
    assert len({e.conn for e in s3.proxy.exchanges}) == 1


def test_a_reset_mid_upload_fails_the_put_and_a_retry_completes_it(s3: S3Site) -> None:
    data = b"u" * (256 * 1024)
    rule = s3.proxy.fail(ResetRequest(after_bytes=64 * 1024), method="PUT", times=1)
    with pytest.raises(botocore_exceptions.ConnectionClosedError):
        client(s3.endpoint).put_object(Bucket=s3.bucket, Key="k", Body=data)
    assert rule.hits == 1
    assert s3.proxy.exchanges[0].received == 64 * 1024
    assert s3.server.get_raw(s3.bucket, "k") is None

    s3.proxy.fail(ResetRequest(after_bytes=1000), method="PUT", times=1)
    client(s3.endpoint, retry=True).put_object(Bucket=s3.bucket, Key="k", Body=data)
    assert s3.server.get_raw(s3.bucket, "k") == data


def test_a_reset_mid_response_fails_the_get(s3: S3Site) -> None:
    s3.server.put_raw(s3.bucket, "k", b"r" * (256 * 1024))
    s3.proxy.fail(ResetResponse(after_bytes=4096), method="GET", times=1)
    with pytest.raises(botocore_exceptions.ResponseStreamingError, match="reset"):
        fetch(client(s3.endpoint), s3.bucket, "k")


def test_a_truncated_response_fails_the_get(s3: S3Site) -> None:
    s3.server.put_raw(s3.bucket, "k", b"t" * (256 * 1024))
    s3.proxy.fail(Truncate(keep_bytes=1000), method="GET", times=1)
    with pytest.raises(botocore_exceptions.ResponseStreamingError, match="IncompleteRead"):
        fetch(client(s3.endpoint), s3.bucket, "k")
    assert s3.proxy.exchanges[0].body_sent == 1000
    assert fetch(client(s3.endpoint), s3.bucket, "k") == b"t" * (256 * 1024)


def test_latency_delays_only_the_matching_request(s3: S3Site) -> None:
    s3.server.put_raw(s3.bucket, "k", b"v")
    s3c = client(s3.endpoint)
    rule = s3.proxy.fail(Delay(0.5), method="GET", path=r"/k$", times=1)
    s3c.head_object(Bucket=s3.bucket, Key="k")  # not a GET: no delay, no hit
    started = time.monotonic()
    assert fetch(s3c, s3.bucket, "k") == b"v"
    assert time.monotonic() - started >= 0.5
    assert rule.hits == 1


# -- counts --------------------------------------------------------------------------
def test_counts_per_method_add_up(s3: S3Site) -> None:
    s3c = client(s3.endpoint)
    for i in range(3):
        s3c.put_object(Bucket=s3.bucket, Key=f"files/{i}", Body=b"x" * i)
    for i in range(2):
        s3c.head_object(Bucket=s3.bucket, Key=f"files/{i}")
    fetch(s3c, s3.bucket, "files/2")
    s3c.list_objects_v2(Bucket=s3.bucket, Prefix="files/")
    s3c.delete_object(Bucket=s3.bucket, Key="files/0")
    assert s3.proxy.counts == {"PUT": 3, "HEAD": 2, "GET": 2, "DELETE": 1}
    assert sum(s3.proxy.counts.values()) == len(s3.proxy.exchanges)
    assert sum(e.received for e in s3.proxy.exchanges) == 0 + 1 + 2
    s3.proxy.reset_counts()
    assert s3.proxy.counts == {}
    assert s3.proxy.exchanges == []


def test_a_ranged_get_transfers_only_its_range(s3: S3Site) -> None:
    data = hashlib.sha256(b"seed").digest() * (4 * MiB // 32)
    s3.server.put_raw(s3.bucket, "big", data)
    s3c = client(s3.endpoint)
    assert fetch(s3c, s3.bucket, "big", Range="bytes=1048576-1052671") == data[MiB : MiB + 4096]
    assert fetch(s3c, s3.bucket, "big") == data
    ranged, whole = s3.proxy.exchanges
    assert (ranged.status, ranged.body_sent) == (206, 4096)
    assert ranged.sent < MiB
    assert whole.sent > 4 * MiB


# -- what moto does ----------------------------------------------------------------
def test_conditional_create_is_refused_when_the_key_exists(s3: S3Site) -> None:
    s3c = client(s3.endpoint)
    s3c.put_object(Bucket=s3.bucket, Key="k", Body=b"first", IfNoneMatch="*")
    with pytest.raises(botocore_exceptions.ClientError) as caught:
        s3c.put_object(Bucket=s3.bucket, Key="k", Body=b"second", IfNoneMatch="*")
    assert status_of(caught.value) == 412
    assert caught.value.response["Error"]["Code"] == "PreconditionFailed"
    assert s3.server.get_raw(s3.bucket, "k") == b"first"


def test_strip_if_none_match_plays_a_server_without_conditional_writes(s3: S3Site) -> None:
    s3c = client(s3.endpoint)
    rule = s3.proxy.fail(StripHeader("If-None-Match"), method="PUT")
    s3c.put_object(Bucket=s3.bucket, Key="k", Body=b"first", IfNoneMatch="*")
    s3c.put_object(Bucket=s3.bucket, Key="k", Body=b"second", IfNoneMatch="*")
    assert rule.hits == 2
    assert s3.server.get_raw(s3.bucket, "k") == b"second"


def test_a_sha256_checksum_is_stored_and_returned(s3: S3Site) -> None:
    data = b"checksummed " * 1000
    s3c = client(s3.endpoint)
    # The algorithm must be named: moto keeps a checksum only with x-amz-sdk-checksum-algorithm.
    put = s3c.put_object(
        Bucket=s3.bucket,
        Key="k",
        Body=data,
        ChecksumAlgorithm="SHA256",
        ChecksumSHA256=sha256_b64(data),
    )
    assert put["ChecksumSHA256"] == sha256_b64(data)
    head = s3c.head_object(Bucket=s3.bucket, Key="k", ChecksumMode="ENABLED")
    assert head["ChecksumSHA256"] == sha256_b64(data)
    get = s3c.get_object(Bucket=s3.bucket, Key="k", ChecksumMode="ENABLED")
    assert get["ChecksumSHA256"] == sha256_b64(data)
    assert get["Body"].read() == data


def test_moto_drops_a_checksum_sent_without_its_algorithm(s3: S3Site) -> None:
    """S3 would keep it; a test that needs the checksum back must name the algorithm."""
    data = b"data"
    s3c = client(s3.endpoint)
    s3c.put_object(Bucket=s3.bucket, Key="k", Body=data, ChecksumSHA256=sha256_b64(data))
    head = s3c.head_object(Bucket=s3.bucket, Key="k", ChecksumMode="ENABLED")
    assert "ChecksumSHA256" not in head


def test_moto_does_not_verify_a_checksum(s3: S3Site) -> None:
    """S3 answers 400 BadDigest; moto stores the wrong checksum as given (a test of
    coldkeep's reaction to a rejected upload must get the 400 from the proxy), and
    botocore's default GET then refuses the object."""
    data, wrong = b"data", sha256_b64(b"other data")
    s3c = client(s3.endpoint)
    s3c.put_object(
        Bucket=s3.bucket, Key="k", Body=data, ChecksumAlgorithm="SHA256", ChecksumSHA256=wrong
    )
    head = s3c.head_object(Bucket=s3.bucket, Key="k", ChecksumMode="ENABLED")
    assert head["ChecksumSHA256"] == wrong
    assert s3.server.get_raw(s3.bucket, "k") == data
    with pytest.raises(botocore_exceptions.FlexibleChecksumError):
        fetch(s3c, s3.bucket, "k")


def test_the_bucket_s_clock_moves_ahead_its_dates_and_its_locks_with_it(worm: S3Site) -> None:
    """``advance_clock``: the Date of every answer and the moment a lock ends by
    move together; the next test's server keeps this host's time again."""
    client = worm.server.client
    until = datetime.now(UTC) + timedelta(seconds=60)
    put = client.put_object(
        Bucket=worm.bucket,
        Key="k",
        Body=b"x",
        ObjectLockMode="COMPLIANCE",
        ObjectLockRetainUntilDate=until,
        ChecksumAlgorithm="SHA256",
    )

    def date() -> datetime:
        answer = client.list_buckets()
        return parsedate_to_datetime(answer["ResponseMetadata"]["HTTPHeaders"]["date"])

    def delete() -> None:
        client.delete_object(Bucket=worm.bucket, Key="k", VersionId=put["VersionId"])

    before = date()
    with pytest.raises(ClientError, match="AccessDenied"):
        delete()
    worm.server.advance_clock(61)
    assert date() - before >= timedelta(seconds=61)
    delete()
    worm.server.reset()
    assert date() < until - timedelta(seconds=30)


def test_moto_refuses_a_cold_object_until_it_is_restored_and_restores_it_at_once(
    s3: S3Site,
) -> None:
    """What the thaw model builds on: moto answers a GET of a GLACIER or
    DEEP_ARCHIVE object 403 InvalidObjectState, and a restore request 202, the
    copy readable at once; GLACIER_IR is read like STANDARD."""
    s3c = client(s3.endpoint)
    for cls in ("GLACIER", "DEEP_ARCHIVE", "GLACIER_IR"):
        s3c.put_object(Bucket=s3.bucket, Key=cls, Body=b"cold", StorageClass=cls)
    assert fetch(s3c, s3.bucket, "GLACIER_IR") == b"cold"
    for cold in ("GLACIER", "DEEP_ARCHIVE"):
        with pytest.raises(ClientError, match="InvalidObjectState"):
            fetch(s3c, s3.bucket, cold)
    asked = s3c.restore_object(Bucket=s3.bucket, Key="DEEP_ARCHIVE", RestoreRequest={"Days": 1})
    assert asked["ResponseMetadata"]["HTTPStatusCode"] == 202
    assert fetch(s3c, s3.bucket, "DEEP_ARCHIVE") == b"cold"


def test_a_thaw_takes_its_tiers_time_and_its_copy_ends_after_its_days(s3: S3Site) -> None:
    """With the proxy's thaw model, on the server's clock: refused while it
    thaws (and a second request told it runs), readable once ready, refused
    again once the copy's days are over, and thawed again on a new request."""
    s3.proxy.thaw = thaw = Thaw(s3.server.now)
    s3c = client(s3.endpoint)
    s3c.put_object(Bucket=s3.bucket, Key="k", Body=b"deep", StorageClass="DEEP_ARCHIVE")

    def restore() -> str | None:
        got: str | None = s3c.head_object(Bucket=s3.bucket, Key="k").get("Restore")
        return got

    def ask(tier: str = "Bulk") -> int:
        request = {"Days": 2, "GlacierJobParameters": {"Tier": tier}}
        answer = s3c.restore_object(Bucket=s3.bucket, Key="k", RestoreRequest=request)
        status: int = answer["ResponseMetadata"]["HTTPStatusCode"]
        return status

    assert (restore(), ask()) == (None, 202)
    assert restore() == 'ongoing-request="true"'
    with pytest.raises(ClientError, match="RestoreAlreadyInProgress"):
        ask()
    with pytest.raises(ClientError, match="InvalidObjectState") as refused:
        fetch(s3c, s3.bucket, "k", Range="bytes=0-1")
    assert refused.value.response["Error"]["StorageClass"] == "DEEP_ARCHIVE"
    s3.server.advance_clock(47 * 3600)
    with pytest.raises(ClientError, match="InvalidObjectState"):
        fetch(s3c, s3.bucket, "k")
    s3.server.advance_clock(3600)
    assert fetch(s3c, s3.bucket, "k") == b"deep"
    ready = restore()
    assert ready is not None and ready.startswith('ongoing-request="false", expiry-date="')
    s3.server.advance_clock(2 * 86_400)
    assert restore() is None
    with pytest.raises(ClientError, match="InvalidObjectState"):
        fetch(s3c, s3.bucket, "k")
    assert thaw.refused == 3
    assert ask("Standard") == 202
    s3.server.advance_clock(12 * 3600)
    assert ask() == 200, "asked again once ready: its days counted again"
    assert fetch(s3c, s3.bucket, "k") == b"deep"


def test_a_restore_of_an_object_that_is_not_cold_is_refused_by_moto(s3: S3Site) -> None:
    s3.proxy.thaw = Thaw(s3.server.now)
    s3c = client(s3.endpoint)
    s3c.put_object(Bucket=s3.bucket, Key="warm", Body=b"x")
    with pytest.raises(ClientError, match="InvalidObjectState"):
        s3c.restore_object(Bucket=s3.bucket, Key="warm", RestoreRequest={"Days": 1})
    assert fetch(s3c, s3.bucket, "warm") == b"x"
