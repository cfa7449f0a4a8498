"""A real S3 server for the tests: moto's server mode on 127.0.0.1, in this process.

Owns the server's lifecycle (``start``/``stop``, ``reset`` to empty it between
tests), the dummy credentials a client needs (``env``), and the helpers a test uses
to act behind coldkeep's back (``make_bucket``, ``put_raw``, ``get_raw``,
``delete_raw``, ``list_keys``). Those helpers talk to moto directly, never through a
``FaultProxy``: they are not counted and no fault rule reaches them.

moto's state is global to the process: every ``S3Server`` (and any ``mock_aws`` in
the same process) shares one set of buckets, and ``reset`` empties them all; so
does its clock, which ``advance_clock`` moves ahead of this host's (the Date of
every answer and the moment Object Lock is checked against) and ``reset`` puts
back.
"""

from __future__ import annotations

import datetime
import http.client
import importlib.util
import os
import time
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from moto.server import ThreadedMotoServer  # type: ignore[import-not-found, unused-ignore]

#: The region and the dummy credentials every client of the test server uses.
REGION = "us-east-1"
ACCESS_KEY = "testing"
SECRET_KEY = "testing"


class _Clock:
    """How far the server's clock runs ahead of this host's, in seconds."""

    ahead = 0.0


def _skew_moto_clock() -> None:
    """moto's S3 reads the time through ``utcnow`` (an object's lock, its
    Last-Modified) and werkzeug writes the Date of every answer: both made to
    read ``_Clock.ahead`` seconds later. Once per process; nothing moves until a
    test advances the clock."""
    from http.server import BaseHTTPRequestHandler

    from werkzeug.serving import WSGIRequestHandler

    models = importlib.import_module("moto.s3.models")
    if getattr(models, "_coldkeep_skewed", False):
        return
    utcnow: Callable[[], datetime.datetime] = getattr(models, "utcnow")  # noqa: B009

    def skewed_utcnow() -> datetime.datetime:
        return utcnow() + datetime.timedelta(seconds=_Clock.ahead)

    def skewed_date(handler: BaseHTTPRequestHandler, timestamp: float | None = None) -> str:
        when = time.time() + _Clock.ahead if timestamp is None else timestamp
        return BaseHTTPRequestHandler.date_time_string(handler, when)

    setattr(models, "utcnow", skewed_utcnow)  # noqa: B010 - a module's global, replaced
    setattr(models, "_coldkeep_skewed", True)  # noqa: B010
    setattr(WSGIRequestHandler, "date_time_string", skewed_date)  # noqa: B010


def _remember_each_hosts_backend() -> None:
    """moto finds the backend of every request by matching its host against the
    URL patterns of each service it mocks, S3's among the last: a third of the
    server's time on a HEAD. The answer for a host never changes, so it is kept.
    Once per process."""
    from moto.moto_server.werkzeug_app import (  # type: ignore[import-not-found, unused-ignore]
        DomainDispatcherApplication,
    )

    find = DomainDispatcherApplication.get_backend_for_host
    if getattr(find, "_coldkeep_remembers", False):
        return
    found: dict[str | None, Any] = {}

    def remembered(dispatcher: Any, host: str | None) -> Any:
        if host not in found:
            found[host] = find(dispatcher, host)
        return found[host]

    setattr(remembered, "_coldkeep_remembers", True)  # noqa: B010
    setattr(DomainDispatcherApplication, "get_backend_for_host", remembered)  # noqa: B010


class S3Unavailable(RuntimeError):
    """moto's server mode is not installed (the tests skip, with this reason)."""


def unavailable_reason() -> str | None:
    """Why this machine cannot run the test server, or None if it can."""
    for module in ("moto", "flask", "boto3"):
        if importlib.util.find_spec(module) is None:
            return f"the Python package {module} is not installed (pip install 'moto[server]')"
    return None


class S3Server:
    """moto's ``ThreadedMotoServer`` on a free port of 127.0.0.1, path-style addressing.

    ``with S3Server() as s3: s3.make_bucket("b"); client(endpoint_url=s3.endpoint)``.
    """

    def __init__(self) -> None:
        self._moto: ThreadedMotoServer | None = None
        self._client: Any = None
        self._port = 0
        #: What a client process or ``os.environ`` needs: the dummy credentials, the
        #: region, no instance metadata lookups (each would stall a client for
        #: seconds) and no developer's ~/.aws files (a profile could change addressing
        #: or checksums under the test).
        self.env: dict[str, str] = {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        }

    # -- lifecycle ------------------------------------------------------------------
    def start(self) -> S3Server:
        reason = unavailable_reason()
        if reason is not None:
            raise S3Unavailable(reason)
        # Imported here: moto and Flask take a third of a second to import, which a
        # test session that never starts the server should not pay.
        import boto3  # type: ignore[import-untyped, import-not-found, unused-ignore]
        import botocore.config  # type: ignore[import-untyped, import-not-found, unused-ignore]
        from moto.server import ThreadedMotoServer  # type: ignore[import-not-found, unused-ignore]

        _skew_moto_clock()
        _remember_each_hosts_backend()
        moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        moto.start()
        self._moto = moto
        self._port = moto.get_host_and_port()[1]
        self._client = boto3.session.Session(
            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY, region_name=REGION
        ).client(
            "s3",
            endpoint_url=self.endpoint,
            # No checksums added or checked: raw means the bytes as they are, even
            # under a stored checksum that does not match them.
            config=botocore.config.Config(
                s3={"addressing_style": "path"},
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
            ),
        )
        return self

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._moto is not None:
            self._moto.stop()
            self._moto = None

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._moto is None:
            raise RuntimeError("the S3 server is not running: call start() first")
        return self._port

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:PORT``: moto itself (a ``FaultProxy`` has its own)."""
        return f"http://127.0.0.1:{self.port}"

    def reset(self) -> None:
        """Empty the server: every bucket and object of every moto backend is gone,
        and its clock is this host's again."""
        self._moto_api("reset", b"")
        _Clock.ahead = 0.0

    def now(self) -> float:
        """The server's clock, in seconds since the epoch."""
        return time.time() + _Clock.ahead

    def advance_clock(self, seconds: float) -> None:
        """The server's clock ``seconds`` further ahead: the Date of its answers
        and the moment an object's Object Lock ends by. A test waiting for a
        lock to end moves it instead of waiting."""
        _Clock.ahead += seconds

    def set_auth(self, on: bool) -> None:
        """moto checks signatures and IAM from the next request on (the test
        credentials are unknown to its IAM: every request is refused), or stops."""
        self._moto_api("reset-auth", b"0" if on else b"inf")

    def _moto_api(self, name: str, body: bytes) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request("POST", f"/moto-api/{name}", body=body)
            response = conn.getresponse()
            response.read()
        finally:
            conn.close()
        if response.status != 200:
            raise RuntimeError(f"moto {name} answered {response.status} {response.reason}")

    # -- behind coldkeep's back -----------------------------------------------------
    @property
    def client(self) -> Any:
        """A boto3 S3 client straight to moto (no proxy, no faults)."""
        if self._client is None:
            raise RuntimeError("the S3 server is not running: call start() first")
        return self._client

    def make_bucket(self, name: str) -> None:
        self.client.create_bucket(Bucket=name)

    def put_raw(self, bucket: str, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=bucket, Key=key, Body=data)

    def get_raw(self, bucket: str, key: str) -> bytes | None:
        """The object's bytes, or None if there is no such key."""
        try:
            response = self.client.get_object(Bucket=bucket, Key=key)
        except self.client.exceptions.NoSuchKey:
            return None
        data = response["Body"].read()
        assert isinstance(data, bytes)
        return data

    def delete_raw(self, bucket: str, key: str) -> None:
        """Delete ``key`` (a missing key is no error, as in S3)."""
        self.client.delete_object(Bucket=bucket, Key=key)

    def list_keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every key under ``prefix``, sorted (all pages)."""
        keys: list[str] = []
        for page in self.client.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=prefix
        ):
            keys.extend(str(item["Key"]) for item in page.get("Contents", []))
        return sorted(keys)
