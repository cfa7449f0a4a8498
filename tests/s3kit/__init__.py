"""s3kit: a real S3 server for coldkeep's off-host tests, with faults on demand.

* ``S3Server`` (``s3kit.server``): moto's server mode in this process, on a free
  port of 127.0.0.1; path-style addressing (``http://127.0.0.1:PORT/bucket/key``);
  ``env`` holds the dummy credentials and region a client needs.
* ``FaultProxy`` (``s3kit.proxy``): an HTTP/1.1 reverse proxy in front of it that
  answers with S3 errors, resets connections mid-request or mid-response, truncates
  responses, delays, strips request headers; and counts requests per method and the
  bytes of every exchange.

Using it
--------
Needs PyPI ``moto[server]`` (it brings boto3); without it the fixtures skip, with
the reason. In a test module::

    from s3kit import S3Site
    from s3kit.proxy import SLOW_DOWN, ResetResponse

    pytest_plugins = ["s3kit"]        # the fixtures s3 (per test), worm, s3_server, s3_proxy

    def test_upload_retries(s3: S3Site) -> None:
        rule = s3.proxy.fail(SLOW_DOWN, method="PUT", path=r"/files/", times=2)
        ...                            # run coldkeep against s3.endpoint, s3.bucket
        assert rule.hits == 2
        assert s3.proxy.counts["PUT"] == 3
        assert s3.server.get_raw(s3.bucket, "files/a.gz") == expected

``s3`` gives each test an empty server with one bucket (``s3.bucket``), a proxy
with no rules and zeroed counts, and ``os.environ`` set from ``S3Server.env`` (and
without ``AWS_PROFILE``, ``AWS_SESSION_TOKEN``, ``AWS_ENDPOINT_URL*``), undone at
teardown. ``worm`` adds a bucket created with Object Lock (``WORM``: versioned, no
default retention; moto enforces each object's retention and legal hold) to the
same server. The server and the proxy are started once per session; each test's
reset costs a few milliseconds. Clients must use ``s3.endpoint`` (the proxy) to see faults; the
``S3Server`` helpers ``put_raw``, ``get_raw``, ``delete_raw``, ``list_keys``,
``make_bucket`` go straight to moto, uncounted, to act behind coldkeep's back;
``advance_clock(seconds)`` moves the server's clock ahead (the Date of its answers
and the moment a lock ends by) until the next test's reset.

The proxy API: ``fail(action, *, method=None, path=None, query=None, after=0,
times=None) -> Rule`` (``path`` and ``query`` are regexes searched in the decoded
path ``/bucket/key`` and the raw query; ``after=N`` lets N matching requests through
first; ``rule.hits`` counts the requests it acted on), ``remove(rule)``,
``clear()``, ``counts`` ({"PUT": 3, ...}), ``exchanges`` (one ``Exchange`` per
request: method, path, query, status, ``sent``/``body_sent`` bytes to the client,
``received`` body bytes, the rules that fired), ``reset_counts()``, ``endpoint``.
Actions: ``Respond(status, body)`` (``SLOW_DOWN``, ``INTERNAL_ERROR``),
``ResetRequest(after_bytes)``, ``ResetResponse(after_bytes)``,
``Truncate(keep_bytes)``, ``Delay(seconds)``, ``StripHeader(name)``.

Cold objects: moto refuses a GET of a GLACIER or DEEP_ARCHIVE object until it is
restored, and restores it at once. ``s3.proxy.thaw = Thaw(s3.server.now)``
(``s3kit.thaw``) makes a restore take its tier's time on the server's clock
(``advance_clock`` moves it), answers a second request while one runs with 409,
and ends the restored copy after its days; ``thaw.refused`` counts the GETs it
refused meanwhile. Each test starts without it.

What moto (5.2) does and does not do, pinned by tests/s3kit/test_s3kit.py:

* ``If-None-Match: *`` on PutObject is honoured: 412 PreconditionFailed if the key
  exists (``StripHeader("If-None-Match")`` plays a server that ignores it).
* A checksum is stored and returned (HeadObject/GetObject with ChecksumMode=ENABLED)
  only when the request names its algorithm (``x-amz-sdk-checksum-algorithm``, which
  botocore sends for ``ChecksumAlgorithm="SHA256"``); a bare ``ChecksumSHA256`` is
  silently dropped.
* moto never verifies a checksum: a wrong ``x-amz-checksum-sha256`` is stored and
  returned as given, where S3 answers 400 BadDigest. botocore (1.36 on) checks it on
  every full GetObject by default and raises FlexibleChecksumError.

PYTEST_DONT_REWRITE: test modules import this package before their
``pytest_plugins`` names it, too late for assert rewriting (it needs none).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from .proxy import FaultProxy
from .server import S3Server, S3Unavailable

#: The bucket the ``s3`` fixture makes for each test.
BUCKET = "coldkeep-test"
#: The bucket with Object Lock the ``worm`` fixture makes beside it.
WORM = "coldkeep-worm"

#: Variables that would steer a client away from the test server or its credentials.
_FOREIGN_ENV = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3")


@dataclass(frozen=True)
class S3Site:
    """What the ``s3`` fixture gives a test."""

    server: S3Server
    proxy: FaultProxy
    bucket: str

    @property
    def endpoint(self) -> str:
        """The proxy's endpoint: the one coldkeep should be given."""
        return self.proxy.endpoint


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    server = S3Server()
    try:
        server.start()
    except S3Unavailable as exc:
        pytest.skip(f"no S3 test server: {exc}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def s3_proxy(s3_server: S3Server) -> Iterator[FaultProxy]:
    with FaultProxy(s3_server.endpoint) as proxy:
        yield proxy


@pytest.fixture
def s3(
    s3_server: S3Server, s3_proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch
) -> Iterator[S3Site]:
    s3_proxy.clear()
    s3_proxy.reset_counts()
    s3_proxy.thaw = None
    s3_server.reset()
    s3_server.make_bucket(BUCKET)
    for name in _FOREIGN_ENV:
        monkeypatch.delenv(name, raising=False)
    for name, value in s3_server.env.items():
        monkeypatch.setenv(name, value)
    try:
        yield S3Site(s3_server, s3_proxy, BUCKET)
    finally:
        s3_proxy.clear()
        s3_proxy.thaw = None


__all__ = [
    "BUCKET",
    "FaultProxy",
    "S3Server",
    "S3Site",
    "S3Unavailable",
    "s3",
    "s3_proxy",
    "s3_server",
]


@pytest.fixture
def worm(s3: S3Site) -> S3Site:
    """A bucket created with Object Lock (versioned, no default retention)."""
    s3.server.client.create_bucket(Bucket=WORM, ObjectLockEnabledForBucket=True)
    return S3Site(s3.server, s3.proxy, WORM)
