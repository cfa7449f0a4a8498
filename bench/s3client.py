"""Which S3 client for the off-host tier: obstore (Rust object_store) against
aiobotocore (async botocore), side by side in one run, against moto's S3 server.

    python bench/s3client.py [--quick]

Needs PyPI ``obstore``, ``aiobotocore`` and ``moto[server]``. moto's
``ThreadedMotoServer`` runs on a free port of 127.0.0.1 in a child process (this
script started with ``--moto-server PORT``), so the server's CPU is not charged to
the client under test and the two do not share a GIL. Nothing leaves the loopback
interface: the instance-metadata endpoints of both libraries point at a closed
port of 127.0.0.1 (or at this script's fake IMDS), never at 169.254.169.254.

What it measures, for each library:
  PUT                 2,000 objects of 20 KiB at concurrency 16 (asyncio.gather and
                      a semaphore): wall time, objects/s, client CPU seconds (this
                      process, Rust threads included), server CPU seconds
  PUT, create-only    the same as conditional creates (``If-None-Match: *``), and
                      what a second create of an existing key raises
  PUT, SHA-256        the same with an ``x-amz-checksum-sha256`` sent; whether moto
                      rejects a wrong one, and whether a GET of the object it kept
                      notices; what HEAD reads back (size, checksum)
  ranged GET          1,000 GETs of 20 KiB at random offsets of a 64 MiB object,
                      timed against a plain keep-alive range server (moto spends
                      ~40 ms copying the whole object for each ranged GET, which
                      would time moto), then 100 of them from moto: time, ranges
                      compared byte for byte, bytes that crossed the loopback per GET
  stream              a 256 MiB file uploaded from disk (multipart and one PUT) and
                      downloaded to a file: time, peak RSS growth (VmHWM, reset
                      through /proc/self/clear_refs before each), SHA-256 checked
  start-up, size      import time (and import + client) in a fresh interpreter, best
                      of 3, less bare start-up; bytes on disk of the package and of
                      its dependency closure, and of the part coldkeep lacks today
  endpoint, creds     an ``http://`` endpoint with no further setting; credentials
                      from env (keys, keys + session token), the shared credentials
                      file, an instance role (a fake IMDS on 127.0.0.1) with moto's
                      IAM checks switched on; missing, unknown and wrong credentials
                      (error and time to fail)
  errors              not found, precondition failed, 503 SlowDown (a fake server
                      on 127.0.0.1 that answers every request with it: what is
                      raised, after how many attempts and how long)
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import importlib.metadata
import json
import os
import random
import re
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

KIB = 1024
MIB = 1024 * KIB
BUCKET = "coldkeep-bench"
REGION = "us-east-1"
DUMMY_KEY = "bench"
DUMMY_SECRET = "bench-secret"
CONCURRENCY = 16
OBJ_SIZE = 20 * KIB
RANGE_SIZE = 20 * KIB
RANGED_OBJECT = 64 * MIB
PART_SIZE = 8 * MIB
PART_CONCURRENCY = 4

Row = tuple[str, str, str]
S3Client = Any  # aiobotocore's client has no type stubs

# Every AWS_* variable that can steer either credential chain; the script starts
# from none of them and each check sets its own.
CHAIN_VARS = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    "AWS_EC2_METADATA_DISABLED",
    "AWS_EC2_METADATA_SERVICE_ENDPOINT",
    "AWS_METADATA_ENDPOINT",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
    "AWS_ENDPOINT",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ALLOW_HTTP",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
)


# --- measuring -------------------------------------------------------------------


def cpu_self() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def loopback_bytes() -> int:
    """Bytes sent on lo (each loopback byte is counted once in tx)."""
    return int(Path("/sys/class/net/lo/statistics/tx_bytes").read_text())


def status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def reset_peak_rss() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


@dataclass
class Meter:
    seconds: float = 0.0
    cpu: float = 0.0
    server_cpu: float = 0.0
    lo_bytes: int = 0
    rss_growth_mib: float = float("nan")


class Measure:
    """``async with Measure(server_pid) as m:`` fills ``m.meter`` on exit."""

    def __init__(self, server_pid: int) -> None:
        self.pid = server_pid
        self.meter = Meter()

    async def __aenter__(self) -> Measure:
        self.rss_ok = reset_peak_rss()
        self.rss0 = status_kib("VmRSS")
        self.lo0 = loopback_bytes()
        self.srv0 = cpu_of(self.pid)
        self.cpu0 = cpu_self()
        self.t0 = time.perf_counter()
        return self

    async def __aexit__(self, *exc: object) -> None:
        m = self.meter
        m.seconds = time.perf_counter() - self.t0
        m.cpu = cpu_self() - self.cpu0
        m.server_cpu = cpu_of(self.pid) - self.srv0
        m.lo_bytes = loopback_bytes() - self.lo0
        if self.rss_ok:
            m.rss_growth_mib = (status_kib("VmHWM") - self.rss0) / KIB


async def gather_limited(n: int, limit: int, fn: Callable[[int], Awaitable[object]]) -> None:
    sem = asyncio.Semaphore(limit)

    async def one(i: int) -> None:
        async with sem:
            await fn(i)

    await asyncio.gather(*(one(i) for i in range(n)))


# --- outcomes of probes ------------------------------------------------------------


@dataclass
class Outcome:
    ok: bool
    text: str
    seconds: float
    value: object = None

    def show(self, timed: bool = False) -> str:
        return f"{self.text} in {self.seconds:.2f} s" if timed else self.text


def describe(exc: BaseException) -> str:
    """The exception class and what the server said, in a few words."""
    name = type(exc).__name__
    response = getattr(exc, "response", None)
    if isinstance(response, dict):  # botocore's ClientError
        err = response.get("Error", {})
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return f"{name} {err.get('Code')} (HTTP {status})"
    msg = str(exc)
    status = re.search(r"status code: (\d{3})", msg)
    code = re.search(r"<Code>(\w+)</Code>", msg)
    if status:
        return f"{name} (HTTP {status.group(1)}{' ' + code.group(1) if code else ''})"
    # obstore: "Error performing PUT <url> in 1.2ms, after N retries, ... - HTTP error: ..."
    first = msg.strip().splitlines()[0] if msg.strip() else ""
    text = f"{name} '{first.rsplit(' - ', 1)[-1][:70]}'"
    if detail := re.search(r"\b(BadScheme|ConnectionRefused|TimedOut)\b", msg):
        text += f" [{detail.group(1)}]"
    if (call := re.search(r"performing (\w+) (\S+)", first)) and "/latest/" in call.group(2):
        text += f" on {call.group(1)} {urlsplit(call.group(2)).path}"
    return text


async def probe(aw: Awaitable[object], limit: float | None = None) -> Outcome:
    t0 = time.perf_counter()
    try:
        value = await asyncio.wait_for(aw, limit)
    except TimeoutError:
        return Outcome(False, f"still failing after {limit:.0f} s", time.perf_counter() - t0)
    except Exception as exc:  # noqa: BLE001 - a probe reports whatever was raised
        return Outcome(False, describe(exc), time.perf_counter() - t0)
    return Outcome(True, "ok", time.perf_counter() - t0, value)


# --- servers -------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def ranged_object() -> bytes:
    """The 64 MiB object of the ranged GETs, the same in every process."""
    return random.Random(7).randbytes(RANGED_OBJECT)


def range_handler(blob: bytes) -> type[BaseHTTPRequestHandler]:
    """GET (and HEAD) of one object, honouring ``Range: bytes=a-b``, with keep-alive;
    no signature check. The ranged GET timing runs against this, since moto copies
    the whole object (twice) for every ranged GET, ~40 ms of server time for 64 MiB,
    which would time moto rather than the clients."""
    stamp = "Tue, 01 Dec 2026 00:00:00 GMT"
    etag = '"' + hashlib.md5(blob, usedforsecurity=False).hexdigest() + '"'

    class Ranges(Quiet):
        def reply(self, head_only: bool) -> None:
            m = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range") or "")
            start, end = (int(m.group(1)), int(m.group(2))) if m else (0, len(blob) - 1)
            end = min(end, len(blob) - 1)
            self.send_response(206 if m else 200)
            self.send_header("Content-Length", str(end - start + 1))
            if m:
                self.send_header("Content-Range", f"bytes {start}-{end}/{len(blob)}")
            self.send_header("ETag", etag)
            self.send_header("Last-Modified", stamp)
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Content-Type", "application/octet-stream")
            self.end_headers()
            if not head_only:
                self.wfile.write(memoryview(blob)[start : end + 1])

        def do_GET(self) -> None:
            self.reply(head_only=False)

        def do_HEAD(self) -> None:
            self.reply(head_only=True)

    return Ranges


def run_moto_server(port: int) -> None:
    """The child: moto's threaded server, and the plain range server, until stdin
    closes; prints the range server's port."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    ranges = Background(range_handler(ranged_object()))
    print(f"ready {ranges.url}", flush=True)
    sys.stdin.read()
    ranges.stop()
    server.stop()


class Moto:
    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        # moto keeps objects up to this size in memory (else in a temporary file); it
        # reads the whole object, under the key's lock, for every ranged GET
        env = dict(os.environ, MOTO_S3_DEFAULT_KEY_BUFFER_SIZE=str(512 * MIB))
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--moto-server", str(self.port)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.proc.stdout is not None
        ready = self.proc.stdout.readline().split()
        if not ready or ready[0] != "ready":
            raise SystemExit("moto's server did not start")
        self.range_endpoint = ready[1]

    def auth(self, on: bool) -> None:
        """moto checks signatures and IAM policies from now on (or stops)."""
        import urllib.request

        req = urllib.request.Request(
            self.endpoint + "/moto-api/reset-auth",
            data=b"0" if on else b"inf",
            method="POST",
            headers={"Content-Type": "application/octet-stream"},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            resp.read()

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Quiet(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in separate writes

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def answer(self, status: int, body: bytes, ctype: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def drain(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)


class Server(ThreadingHTTPServer):
    request_queue_size = 128  # the default backlog of 5 drops a burst of 16 connects


class Background:
    """A ThreadingHTTPServer on 127.0.0.1 in a daemon thread, counting requests."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.httpd = Server(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.httpd.hits = 0  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def hits(self) -> int:
        return int(self.httpd.hits)  # type: ignore[attr-defined]

    def reset(self) -> None:
        self.httpd.hits = 0  # type: ignore[attr-defined]

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)


class SlowDown(Quiet):
    """Every request: 503 SlowDown, as S3 throttles."""

    def do_any(self) -> None:
        self.server.hits += 1  # type: ignore[attr-defined]
        self.drain()
        self.answer(503, b"" if self.command == "HEAD" else SLOW_DOWN, "application/xml")

    do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = do_any


def imds_handler(creds: dict[str, str]) -> type[BaseHTTPRequestHandler]:
    """EC2's instance metadata service (IMDSv2), serving one role's credentials."""

    class Imds(Quiet):
        def do_PUT(self) -> None:
            self.server.hits += 1  # type: ignore[attr-defined]
            self.drain()
            if self.path == "/latest/api/token":
                self.answer(200, b"bench-imds-token")
            else:
                self.answer(404, b"")

        def do_GET(self) -> None:
            self.server.hits += 1  # type: ignore[attr-defined]
            base = "/latest/meta-data/iam/security-credentials/"
            if self.path == base:
                self.answer(200, b"coldkeep-role")
            elif self.path == base + "coldkeep-role":
                now = datetime.now(UTC)
                doc = {
                    "Code": "Success",
                    "LastUpdated": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "Type": "AWS-HMAC",
                    "AccessKeyId": creds["AccessKeyId"],
                    "SecretAccessKey": creds["SecretAccessKey"],
                    "Token": creds["SessionToken"],
                    "Expiration": (now + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                }
                self.answer(200, json.dumps(doc).encode(), "application/json")
            else:
                self.answer(404, b"")

    return Imds


# --- the two clients -------------------------------------------------------------------


def obstore_store(endpoint: str, **config: Any) -> Any:
    from obstore.store import S3Store

    kw: dict[str, Any] = {
        "endpoint": endpoint,
        "region": REGION,
        "access_key_id": DUMMY_KEY,
        "secret_access_key": DUMMY_SECRET,
        "client_options": {"allow_http": True},
    }
    kw.update(config)
    return S3Store(BUCKET, **kw)


@contextlib.asynccontextmanager
async def boto_client(endpoint: str, **kw: Any) -> Any:
    import aiobotocore.session
    from aiobotocore.config import AioConfig

    args: dict[str, Any] = {
        "endpoint_url": endpoint,
        "region_name": REGION,
        "aws_access_key_id": DUMMY_KEY,
        "aws_secret_access_key": DUMMY_SECRET,
        # the default pool is 10 connections: fewer than the 16 requests in flight
        "config": AioConfig(max_pool_connections=CONCURRENCY),
    }
    args.update(kw)
    session = aiobotocore.session.get_session()
    async with session.create_client("s3", **args) as client:
        yield client


def b64sha(data: bytes | memoryview) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode()


# --- the benchmark ---------------------------------------------------------------------


@dataclass
class Sizes:
    puts: int
    ranges: int
    stream: int


class Bench:
    def __init__(self, moto: Moto, sizes: Sizes, tmp: Path) -> None:
        self.moto = moto
        self.ep = moto.endpoint
        self.sizes = sizes
        self.tmp = tmp
        self.rows: list[Row] = []
        self.notes: list[str] = []

    def row(self, what: str, obstore: str, boto: str) -> None:
        self.rows.append((what, obstore, boto))
        print(f"  {what}: obstore {obstore} | aiobotocore {boto}", file=sys.stderr, flush=True)

    def measure(self) -> Measure:
        return Measure(self.moto.proc.pid)

    def rate_row(self, what: str, n: int, a: Meter, b: Meter) -> None:
        def cell(m: Meter) -> str:
            return f"{m.seconds:.2f} s, {n / m.seconds:,.0f}/s"

        self.row(what, cell(a), cell(b))
        self.row(
            "  client CPU / server CPU",
            f"{a.cpu:.2f} s / {a.server_cpu:.2f} s",
            f"{b.cpu:.2f} s / {b.server_cpu:.2f} s",
        )

    # -- PUTs --

    async def puts(self, store: Any, sha_store: Any, s3: S3Client) -> None:
        import obstore as obs

        n = self.sizes.puts
        base = os.urandom(OBJ_SIZE)
        bodies = [i.to_bytes(8, "big") + base[8:] for i in range(n)]

        async def o_plain(i: int) -> None:
            await obs.put_async(store, f"o/plain/{i:05d}", bodies[i])

        async def b_plain(i: int) -> None:
            await s3.put_object(Bucket=BUCKET, Key=f"b/plain/{i:05d}", Body=bodies[i])

        async def o_create(i: int) -> None:
            await obs.put_async(store, f"o/create/{i:05d}", bodies[i], mode="create")

        async def b_create(i: int) -> None:
            await s3.put_object(
                Bucket=BUCKET, Key=f"b/create/{i:05d}", Body=bodies[i], IfNoneMatch="*"
            )

        async def o_sha(i: int) -> None:
            # obstore hashes the body itself (checksum_algorithm="SHA256" on the store)
            await obs.put_async(sha_store, f"o/sha/{i:05d}", bodies[i], mode="create")

        async def b_sha(i: int) -> None:
            # the caller's own SHA-256 (coldkeep knows it), hashed here as part of the cost
            await s3.put_object(
                Bucket=BUCKET,
                Key=f"b/sha/{i:05d}",
                Body=bodies[i],
                IfNoneMatch="*",
                ChecksumAlgorithm="SHA256",
                ChecksumSHA256=b64sha(bodies[i]),
            )

        for what, fo, fb in [
            (f"PUT {n:,} x 20 KiB, c={CONCURRENCY}", o_plain, b_plain),
            ("PUT, conditional create (If-None-Match: *)", o_create, b_create),
            ("PUT, create + SHA-256 checksum", o_sha, b_sha),
        ]:
            async with self.measure() as mo:
                await gather_limited(n, CONCURRENCY, fo)
            async with self.measure() as mb:
                await gather_limited(n, CONCURRENCY, fb)
            self.rate_row(what, n, mo.meter, mb.meter)

        # a second create of a key that exists
        again_o = await probe(obs.put_async(store, "o/create/00000", b"x", mode="create"))
        again_b = await probe(
            s3.put_object(Bucket=BUCKET, Key="b/create/00000", Body=b"x", IfNoneMatch="*")
        )
        self.row("create of an existing key", again_o.text, again_b.text)
        kept_o = bytes(await (await obs.get_async(store, "o/create/00000")).bytes_async())
        got = await s3.get_object(Bucket=BUCKET, Key="b/create/00000")
        async with got["Body"] as body:
            kept_b = await body.read()
        self.row(
            "  object after the refused create",
            "unchanged" if kept_o == bodies[0] else "OVERWRITTEN",
            "unchanged" if kept_b == bodies[0] else "OVERWRITTEN",
        )
        pre_o = await probe(obs.put_async(store, "o/create/00001", b"x", mode={"e_tag": '"0"'}))
        pre_b = await probe(
            s3.put_object(Bucket=BUCKET, Key="b/create/00001", Body=b"x", IfMatch='"0"')
        )
        self.row("PUT If-Match a wrong ETag", pre_o.text, pre_b.text)
        nf_o = await probe(obs.head_async(store, "o/missing"))
        nf_b = await probe(s3.head_object(Bucket=BUCKET, Key="b/missing"))
        self.row("HEAD of a missing key", nf_o.text, nf_b.text)
        nfg_o = await probe(obs.get_async(store, "o/missing"))
        nfg_b = await probe(s3.get_object(Bucket=BUCKET, Key="b/missing"))
        self.row("GET of a missing key", nfg_o.text, nfg_b.text)

        await self.checksums(store, s3, bodies[0])

    async def checksums(self, store: Any, s3: S3Client, body0: bytes) -> None:
        import obstore as obs

        want = b64sha(body0)
        zeros = base64.b64encode(bytes(32)).decode()
        # a wrong checksum: aiobotocore takes any value; obstore computes its own and
        # has no per-request header, so the wrong value goes in as a store-wide header
        wrong_store = obstore_store(
            self.ep,
            client_options={
                "allow_http": True,
                "default_headers": {
                    "x-amz-checksum-sha256": zeros,
                    "x-amz-sdk-checksum-algorithm": "SHA256",
                },
            },
        )
        wo = await probe(obs.put_async(wrong_store, "o/wrongsha", b"not zeros"))
        wb = await probe(
            s3.put_object(
                Bucket=BUCKET,
                Key="b/wrongsha",
                Body=b"not zeros",
                ChecksumAlgorithm="SHA256",
                ChecksumSHA256=zeros,
            )
        )
        self.row(
            "wrong SHA-256 sent: moto says",
            f"{'accepted (200)' if wo.ok else wo.text} [via default_headers]",
            "accepted (200)" if wb.ok else wb.text,
        )

        # moto kept the wrong checksums: does a whole-object GET check what it reads?
        async def o_read(key: str) -> bytes:
            return bytes(await (await obs.get_async(store, key)).bytes_async())

        async def b_read(key: str) -> bytes:
            got = await s3.get_object(Bucket=BUCKET, Key=key)
            async with got["Body"] as body:
                data: bytes = await body.read()
            return data

        go, gb = await probe(o_read("o/wrongsha")), await probe(b_read("b/wrongsha"))
        self.row(
            "  GET of that object (stored SHA-256 wrong)",
            "returned the bytes, no check" if go.ok else go.text,
            "returned the bytes, no check" if gb.ok else gb.text,
        )

        # HEAD: what each reads back of its own checksummed object
        ho = await obs.head_async(store, "o/sha/00000")
        hb = await s3.head_object(Bucket=BUCKET, Key="b/sha/00000", ChecksumMode="ENABLED")
        self.row(
            "HEAD: size",
            f"{ho['size']} ({'ok' if ho['size'] == len(body0) else 'WRONG'})",
            f"{hb['ContentLength']} ({'ok' if hb['ContentLength'] == len(body0) else 'WRONG'})",
        )
        sha_b = hb.get("ChecksumSHA256")
        self.row(
            "HEAD: SHA-256 read back",
            f"no checksum field; keys: {', '.join(sorted(ho))}",
            f"ChecksumSHA256 {'matches' if sha_b == want else repr(sha_b)}",
        )
        # the same obstore object seen through aiobotocore: did moto keep obstore's checksum?
        hx = await s3.head_object(Bucket=BUCKET, Key="o/sha/00000", ChecksumMode="ENABLED")
        got_o = await obs.get_async(store, "o/sha/00000", options={"head": True})
        self.row(
            "  obstore's object, HEAD via boto / GET head=True",
            f"ChecksumSHA256={hx.get('ChecksumSHA256')}; attributes {dict(got_o.attributes)}",
            "-",
        )

    # -- ranged GETs --

    async def ranged(self, store: Any, s3: S3Client) -> None:

        big = ranged_object()
        await s3.put_object(Bucket=BUCKET, Key="ranged", Body=big)
        rnd = random.Random(7)
        offsets = [rnd.randrange(0, RANGED_OBJECT - RANGE_SIZE) for _ in range(self.sizes.ranges)]
        # the timing: a plain keep-alive range server (see range_handler); then moto,
        # a tenth as many, for what a real S3 server answers and the bytes it sends
        plain = obstore_store(self.moto.range_endpoint)
        async with boto_client(self.moto.range_endpoint) as plain_s3:
            await self.ranged_run("ranged GET %s x 20 KiB of 64 MiB", plain, plain_s3, offsets, big)
        await self.ranged_run(
            "  the same, %s from moto", store, s3, offsets[: len(offsets) // 10], big
        )

    async def ranged_run(
        self, what: str, store: Any, s3: S3Client, offsets: list[int], big: bytes
    ) -> None:
        import obstore as obs

        n = len(offsets)
        got_o: list[bytes] = [b""] * n
        got_b: list[bytes] = [b""] * n

        async def o_get(i: int) -> None:
            off = offsets[i]
            got_o[i] = bytes(
                await obs.get_range_async(store, "ranged", start=off, length=RANGE_SIZE)
            )

        async def b_get(i: int) -> None:
            off = offsets[i]
            r = await s3.get_object(
                Bucket=BUCKET, Key="ranged", Range=f"bytes={off}-{off + RANGE_SIZE - 1}"
            )
            async with r["Body"] as body:
                got_b[i] = await body.read()

        async with self.measure() as mo:
            await gather_limited(n, CONCURRENCY, o_get)
        async with self.measure() as mb:
            await gather_limited(n, CONCURRENCY, b_get)
        self.rate_row(what % f"{n:,}", n, mo.meter, mb.meter)

        def check(got: list[bytes], m: Meter) -> str:
            right = sum(g == big[o : o + RANGE_SIZE] for g, o in zip(got, offsets, strict=True))
            return f"{right}/{n} exact; {m.lo_bytes / n / KIB:.1f} KiB on the wire per GET"

        self.row(
            "  ranges right; loopback bytes per GET (both ways)",
            check(got_o, mo.meter),
            check(got_b, mb.meter),
        )

    # -- streaming --

    async def stream(self, sha_store: Any, s3: S3Client) -> None:
        import obstore as obs

        size = self.sizes.stream
        src = self.tmp / "stream.bin"
        digest = hashlib.sha256()
        with src.open("wb") as f:
            for _ in range(size // (8 * MIB)):
                chunk = os.urandom(8 * MIB)
                digest.update(chunk)
                f.write(chunk)
        want_hex = digest.hexdigest()
        want_b64 = base64.b64encode(digest.digest()).decode()
        label = f"{size // MIB} MiB"

        def cell(m: Meter) -> str:
            rate, rss = size / MIB / m.seconds, max(0.0, m.rss_growth_mib)
            return f"{m.seconds:.2f} s, {rate:,.0f} MiB/s, +{rss:.0f} MiB RSS"

        # multipart: obstore's own (chunk_size/max_concurrency set to match), and the
        # hand-written one coldkeep would need with aiobotocore
        async with self.measure() as mo:
            await obs.put_async(
                sha_store,
                "o/stream-mp",
                src,
                chunk_size=PART_SIZE,
                max_concurrency=PART_CONCURRENCY,
            )
        async with self.measure() as mb:
            await boto_multipart(s3, "b/stream-mp", src, size)
        self.row(
            f"upload {label} from a file, multipart {PART_SIZE // MIB} MiB x {PART_CONCURRENCY}",
            cell(mo.meter),
            cell(mb.meter) + " (hand-written)",
        )
        # one PUT
        async with self.measure() as mo:
            await obs.put_async(sha_store, "o/stream-1", src, use_multipart=False)
        async with self.measure() as mb:
            with src.open("rb") as fh:
                await s3.put_object(
                    Bucket=BUCKET,
                    Key="b/stream-1",
                    Body=fh,
                    ContentLength=size,
                    ChecksumAlgorithm="SHA256",
                    ChecksumSHA256=want_b64,
                )
        self.row(f"upload {label} from a file, one PUT", cell(mo.meter), cell(mb.meter))
        # create-only: obstore turns any mode other than "overwrite" into one PUT of the
        # file read into memory; S3 takes If-None-Match on CompleteMultipartUpload
        async with self.measure() as mo:
            await obs.put_async(
                sha_store, "o/stream-create", src, mode="create", chunk_size=PART_SIZE
            )
        async with self.measure() as mb:
            await boto_multipart(s3, "b/stream-create", src, size, create=True)
        self.row(
            f"upload {label}, create-only",
            cell(mo.meter) + " (mode='create')",
            cell(mb.meter) + " (multipart, If-None-Match on complete)",
        )
        again = await probe(boto_multipart(s3, "b/stream-create", src, size, create=True))
        self.row("  multipart create of an existing key", "-", again.text + ", upload aborted")
        sizes = [
            (await obs.head_async(sha_store, k))["size"]
            for k in ("o/stream-mp", "o/stream-1", "b/stream-mp", "b/stream-1")
        ]
        self.row(
            "  size stored (multipart, one PUT)",
            " / ".join("ok" if n == size else str(n) for n in sizes[:2]),
            " / ".join("ok" if n == size else str(n) for n in sizes[2:]),
        )
        mp = await s3.head_object(Bucket=BUCKET, Key="b/stream-mp", ChecksumMode="ENABLED")
        one = await s3.head_object(Bucket=BUCKET, Key="b/stream-1", ChecksumMode="ENABLED")
        self.row(
            "  HEAD ChecksumSHA256 (multipart, one PUT)",
            "- (head has no checksum)",
            f"{mp.get('ChecksumSHA256')} (type {mp.get('ChecksumType')}, "
            f"{'=' if mp.get('ChecksumSHA256') == want_b64 else 'not'} the file's) / "
            f"{'= the file' if one.get('ChecksumSHA256') == want_b64 else one}",
        )

        # download the same object (aiobotocore's single PUT) to a file
        dst_o, dst_b = self.tmp / "down-o.bin", self.tmp / "down-b.bin"
        async with self.measure() as mo:
            resp = await obs.get_async(sha_store, "b/stream-1")
            with dst_o.open("wb") as f:
                async for chunk in resp.stream(min_chunk_size=1 * MIB):
                    f.write(chunk)
        async with self.measure() as mb:
            r = await s3.get_object(Bucket=BUCKET, Key="b/stream-1")
            with dst_b.open("wb") as f:
                async with r["Body"] as body:
                    async for chunk in body.iter_chunks(1 * MIB):
                        f.write(chunk)

        def same(p: Path) -> str:
            h = hashlib.sha256()
            with p.open("rb") as f:
                while chunk := f.read(8 * MIB):
                    h.update(chunk)
            return "SHA-256 ok" if h.hexdigest() == want_hex else "SHA-256 WRONG"

        self.row(
            f"download {label} to a file (1 MiB chunks)",
            f"{cell(mo.meter)}, {same(dst_o)}",
            f"{cell(mb.meter)}, {same(dst_b)}",
        )
        for p in (src, dst_o, dst_b):
            p.unlink()

    # -- endpoint --

    async def endpoint(self) -> None:
        import obstore as obs
        from obstore.store import S3Store

        plain = S3Store(
            BUCKET,
            endpoint=self.ep,
            region=REGION,
            access_key_id=DUMMY_KEY,
            secret_access_key=DUMMY_SECRET,
        )
        o = await probe(obs.head_async(plain, "o/plain/00000"))
        async with boto_client(self.ep) as s3:
            b = await probe(s3.head_object(Bucket=BUCKET, Key="o/plain/00000"))
        self.row(
            "http:// endpoint, nothing else set",
            o.text if not o.ok else "ok",
            b.text if not b.ok else "ok",
        )
        # no region anywhere
        noregion = S3Store(
            BUCKET,
            endpoint=self.ep,
            access_key_id=DUMMY_KEY,
            secret_access_key=DUMMY_SECRET,
            client_options={"allow_http": True},
        )
        o = await probe(obs.head_async(noregion, "o/plain/00000"))
        async with boto_client(self.ep, region_name=None) as s3:
            b = await probe(s3.head_object(Bucket=BUCKET, Key="o/plain/00000"))
        self.row("no region set anywhere", o.text, b.text)

    # -- credentials --

    async def credentials(self, closed_port: int) -> None:
        import obstore as obs
        from obstore.store import S3Store

        policy = json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
            }
        )
        trust = json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}
                ],
            }
        )
        import aiobotocore.session

        session = aiobotocore.session.get_session()
        kw = {
            "endpoint_url": self.ep,
            "region_name": REGION,
            "aws_access_key_id": DUMMY_KEY,
            "aws_secret_access_key": DUMMY_SECRET,
        }
        async with (
            session.create_client("iam", **kw) as iam,
            session.create_client("sts", **kw) as sts,
        ):
            await iam.create_user(UserName="coldkeep")
            await iam.put_user_policy(UserName="coldkeep", PolicyName="all", PolicyDocument=policy)
            user = (await iam.create_access_key(UserName="coldkeep"))["AccessKey"]
            await iam.create_role(RoleName="coldkeep-role", AssumeRolePolicyDocument=trust)
            await iam.put_role_policy(
                RoleName="coldkeep-role", PolicyName="all", PolicyDocument=policy
            )
            role = (
                await sts.assume_role(
                    RoleArn="arn:aws:iam::123456789012:role/coldkeep-role",
                    RoleSessionName="coldkeep",
                )
            )["Credentials"]
        imds = Background(imds_handler(role))
        cred_file = self.tmp / "credentials"
        cred_file.write_text(
            "[default]\n"
            f"aws_access_key_id = {user['AccessKeyId']}\n"
            f"aws_secret_access_key = {user['SecretAccessKey']}\n"
        )
        closed = f"http://127.0.0.1:{closed_port}"

        async def o_head(retry: dict[str, Any] | None = None) -> object:
            kw: dict[str, Any] = {"endpoint": self.ep, "client_options": {"allow_http": True}}
            if retry:
                kw["retry_config"] = retry
            store = S3Store(BUCKET, **kw)
            return await obs.head_async(store, "o/plain/00000")

        async def b_head() -> object:
            s = aiobotocore.session.get_session()
            async with s.create_client("s3", endpoint_url=self.ep, region_name=REGION) as c:
                return await c.head_object(Bucket=BUCKET, Key="o/plain/00000")

        cases: list[tuple[str, dict[str, str]]] = [
            (
                "env: key + secret",
                {
                    "AWS_ACCESS_KEY_ID": user["AccessKeyId"],
                    "AWS_SECRET_ACCESS_KEY": user["SecretAccessKey"],
                },
            ),
            (
                "env: key + secret + session token",
                {
                    "AWS_ACCESS_KEY_ID": role["AccessKeyId"],
                    "AWS_SECRET_ACCESS_KEY": role["SecretAccessKey"],
                    "AWS_SESSION_TOKEN": role["SessionToken"],
                },
            ),
            ("shared credentials file only", {"AWS_SHARED_CREDENTIALS_FILE": str(cred_file)}),
            (
                "instance role (IMDSv2 on 127.0.0.1)",
                {
                    "AWS_EC2_METADATA_DISABLED": "false",
                    "AWS_EC2_METADATA_SERVICE_ENDPOINT": imds.url + "/",
                    "AWS_METADATA_ENDPOINT": imds.url,
                },
            ),
            (
                "unknown access key (env)",
                {"AWS_ACCESS_KEY_ID": "AKIAUNKNOWNUNKNOWN00", "AWS_SECRET_ACCESS_KEY": "x"},
            ),
            (
                "wrong secret (env)",
                {"AWS_ACCESS_KEY_ID": user["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": "wrong"},
            ),
        ]
        self.moto.auth(True)
        try:
            for what, extra in cases:
                with chain_env(self.tmp, closed, extra):
                    imds.reset()
                    o = await probe(o_head(), limit=20)
                    o_hits = imds.hits
                    imds.reset()
                    b = await probe(b_head(), limit=20)
                    b_hits = imds.hits
                suffix_o = f" [IMDS hits {o_hits}]" if "IMDS" in what else ""
                suffix_b = f" [IMDS hits {b_hits}]" if "IMDS" in what else ""
                self.row(
                    f"creds: {what}",
                    o.show(timed=not o.ok) + suffix_o,
                    b.show(timed=not b.ok) + suffix_b,
                )
            # nothing at all: empty env and files; botocore's IMDS switched off;
            # obstore has no such switch and tries IMDS (here: a closed loopback port)
            with chain_env(self.tmp, closed, {}):
                o = await probe(o_head(), limit=15)
                o2 = await probe(
                    o_head({"max_retries": 1, "retry_timeout": timedelta(seconds=2)}),
                    limit=15,
                )
                b = await probe(b_head(), limit=15)
            self.row("creds: none (IMDS unreachable)", o.show(timed=True), b.show(timed=True))
            self.row("  obstore with max_retries=1", o2.show(timed=True), "-")
            # obstore and the shared file: a credential_provider of a few lines
            with chain_env(self.tmp, closed, {"AWS_SHARED_CREDENTIALS_FILE": str(cred_file)}):
                store = S3Store(
                    BUCKET,
                    endpoint=self.ep,
                    client_options={"allow_http": True},
                    credential_provider=SharedFile(cred_file),
                )
                o = await probe(obs.head_async(store, "o/plain/00000"), limit=20)
            self.row("creds: shared file via credential_provider", o.show(timed=not o.ok), "-")
        finally:
            self.moto.auth(False)
            imds.stop()

    # -- throttling --

    async def throttling(self) -> None:
        import obstore as obs

        fake = Background(SlowDown)
        try:
            store = obstore_store(fake.url)
            o = await probe(obs.put_async(store, "k", b"x"), limit=8)
            o_hits = fake.hits
            fake.reset()
            store = obstore_store(
                fake.url,
                retry_config={
                    "max_retries": 3,
                    "backoff": {"init_backoff": timedelta(milliseconds=100)},
                },
            )
            o3 = await probe(obs.put_async(store, "k", b"x"), limit=30)
            o3_hits = fake.hits
            fake.reset()
            async with boto_client(fake.url) as s3:
                b = await probe(s3.put_object(Bucket=BUCKET, Key="k", Body=b"x"), limit=30)
            b_hits = fake.hits
            fake.reset()
            from aiobotocore.config import AioConfig

            # botocore's max_attempts counts retries; total_max_attempts counts all
            std = AioConfig(retries={"mode": "standard", "total_max_attempts": 4})
            async with boto_client(fake.url, config=std) as s3:
                b3 = await probe(s3.put_object(Bucket=BUCKET, Key="k", Body=b"x"), limit=30)
            b3_hits = fake.hits
        finally:
            fake.stop()
        self.row(
            "503 SlowDown, default retries",
            f"{o.show(timed=True)}, {o_hits} requests",
            f"{b.show(timed=True)}, {b_hits} requests",
        )
        self.row(
            "503 SlowDown, 3 retries (4 attempts)",
            f"{o3.show(timed=True)}, {o3_hits} requests",
            f"{b3.show(timed=True)}, {b3_hits} requests [standard mode]",
        )


class SharedFile:
    """An obstore credential_provider reading one profile of an AWS credentials file."""

    def __init__(self, path: Path, profile: str = "default") -> None:
        self.path, self.profile = path, profile

    def __call__(self) -> dict[str, Any]:
        import configparser

        ini = configparser.ConfigParser()
        ini.read(self.path)
        sec = ini[self.profile]
        return {
            "access_key_id": sec["aws_access_key_id"],
            "secret_access_key": sec["aws_secret_access_key"],
            "token": sec.get("aws_session_token"),
            "expires_at": None,
        }


@contextlib.contextmanager
def chain_env(tmp: Path, closed: str, extra: dict[str, str]) -> Iterator[None]:
    """os.environ with no credentials anywhere (empty shared files, IMDS off or at a
    closed loopback port), then ``extra``; restored afterwards."""
    saved = {k: os.environ.get(k) for k in CHAIN_VARS}
    empty = tmp / "empty"
    empty.write_text("")
    for k in CHAIN_VARS:
        os.environ.pop(k, None)
    os.environ.update(
        {
            "AWS_SHARED_CREDENTIALS_FILE": str(empty),
            "AWS_CONFIG_FILE": str(empty),
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_EC2_METADATA_SERVICE_ENDPOINT": closed + "/",
            "AWS_METADATA_ENDPOINT": closed,
        }
    )
    os.environ.update(extra)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


async def boto_multipart(
    s3: S3Client, key: str, src: Path, size: int, create: bool = False
) -> None:
    """What coldkeep would write around aiobotocore: parts read from the file,
    ``PART_CONCURRENCY`` in flight, each with its SHA-256; aborted on failure. With
    ``create``, the completion is conditional (``If-None-Match: *``)."""
    up = await s3.create_multipart_upload(Bucket=BUCKET, Key=key, ChecksumAlgorithm="SHA256")
    upload_id = up["UploadId"]
    count = (size + PART_SIZE - 1) // PART_SIZE
    parts: list[dict[str, Any]] = [{} for _ in range(count)]
    fd = os.open(src, os.O_RDONLY)
    try:

        async def one(i: int) -> None:
            data = await asyncio.to_thread(os.pread, fd, PART_SIZE, i * PART_SIZE)
            sha = b64sha(data)
            r = await s3.upload_part(
                Bucket=BUCKET,
                Key=key,
                UploadId=upload_id,
                PartNumber=i + 1,
                Body=data,
                ChecksumSHA256=sha,
            )
            parts[i] = {"PartNumber": i + 1, "ETag": r["ETag"], "ChecksumSHA256": sha}

        await gather_limited(count, PART_CONCURRENCY, one)
        await s3.complete_multipart_upload(
            Bucket=BUCKET,
            Key=key,
            UploadId=upload_id,
            MultipartUpload={"Parts": parts},
            **({"IfNoneMatch": "*"} if create else {}),
        )
    except BaseException:
        await s3.abort_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload_id)
        raise
    finally:
        os.close(fd)


# --- start-up and size ------------------------------------------------------------------


def best_of(code: str, env: dict[str, str], runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, env=env)
        times.append(time.perf_counter() - t0)
    return min(times)


def closure(names: list[str]) -> set[str]:
    """The distributions ``names`` need, themselves included (no extras)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        seen.add(name)
        for spec in dist.requires or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen


def dist_bytes(name: str) -> int:
    dist = importlib.metadata.distribution(name)
    total = 0
    for f in dist.files or []:
        p = Path(str(f.locate()))
        if p.is_file():
            total += p.stat().st_size
    return total


def startup_rows(bench: Bench) -> None:
    env = dict(os.environ)
    bare = best_of("pass", env)
    ep = "http://127.0.0.1:9"
    o_imp = best_of("import obstore, obstore.store", env) - bare
    b_imp = best_of("import aiobotocore.session", env) - bare
    o_cli = (
        best_of(
            "from obstore.store import S3Store\n"
            f"S3Store('b', endpoint='{ep}', region='{REGION}', access_key_id='a',"
            " secret_access_key='b', client_options={'allow_http': True})",
            env,
        )
        - bare
    )
    b_cli = (
        best_of(
            "import asyncio, aiobotocore.session as s\n"
            "async def main():\n"
            f"    async with s.get_session().create_client('s3', endpoint_url='{ep}',"
            f" region_name='{REGION}', aws_access_key_id='a', aws_secret_access_key='b'):\n"
            "        pass\n"
            "asyncio.run(main())",
            env,
        )
        - bare
    )
    bench.row("import time (fresh interpreter, best of 3)", f"{o_imp:.3f} s", f"{b_imp:.3f} s")
    bench.row("import + create an S3 client", f"{o_cli:.3f} s", f"{b_cli:.3f} s")

    have = closure(["coldkeep"])
    for_o, for_b = closure(["obstore"]), closure(["aiobotocore"])

    def size(names: set[str]) -> str:
        return f"{sum(dist_bytes(n) for n in names) / MIB:.1f} MiB ({len(names)} dists)"

    bench.row("installed size, the package alone", size({"obstore"}), size({"aiobotocore"}))
    bench.row("installed size with dependencies", size(for_o), size(for_b))
    bench.row("  what coldkeep's env lacks today", size(for_o - have), size(for_b - have))
    bench.notes.append("obstore closure: " + ", ".join(sorted(for_o)))
    bench.notes.append("aiobotocore closure: " + ", ".join(sorted(for_b)))
    bench.notes.append("aiobotocore closure new to coldkeep: " + ", ".join(sorted(for_b - have)))


# --- main ------------------------------------------------------------------------------


def versions() -> list[str]:
    out = [f"python {sys.version.split()[0]}"]
    for name in ("obstore", "aiobotocore", "botocore", "aiohttp", "moto"):
        try:
            out.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            out.append(f"{name} (not installed)")
    return out


def print_table(rows: list[Row]) -> None:
    head: Row = ("what", "obstore", "aiobotocore")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(3)]
    for r in [head, ("-" * widths[0], "-" * widths[1], "-" * widths[2]), *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


async def run(sizes: Sizes) -> None:
    # A closed port of 127.0.0.1: bound, never listening, so a connection is refused.
    # Both instance-metadata endpoints point there unless a check says otherwise.
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    moto = Moto()
    t_start = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="s3client-") as tmpdir:
            tmp = Path(tmpdir)
            with chain_env(tmp, f"http://127.0.0.1:{closed_port}", {}):
                bench = Bench(moto, sizes, tmp)
                print(f"moto at {moto.endpoint} (pid {moto.proc.pid})", file=sys.stderr)
                store = obstore_store(moto.endpoint)
                sha_store = obstore_store(moto.endpoint, checksum_algorithm="SHA256")
                async with boto_client(moto.endpoint) as s3:
                    await s3.create_bucket(Bucket=BUCKET)
                    await bench.puts(store, sha_store, s3)
                    await bench.ranged(store, s3)
                    await bench.stream(sha_store, s3)
                await bench.endpoint()
                await bench.throttling()
                await bench.credentials(closed_port)
                startup_rows(bench)
    finally:
        moto.stop()
        closed.close()
    print()
    print_table(bench.rows)
    print()
    for note in bench.notes:
        print(note)
    print("versions: " + ", ".join(versions()))
    print(f"cores: {os.cpu_count()}; whole run {time.perf_counter() - t_start:.0f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a tenth of the counts and sizes")
    ap.add_argument("--moto-server", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.moto_server:
        run_moto_server(args.moto_server)
        return
    sizes = Sizes(puts=2000, ranges=1000, stream=256 * MIB)
    if args.quick:
        sizes = Sizes(puts=200, ranges=100, stream=32 * MIB)
    asyncio.run(run(sizes))


if __name__ == "__main__":
    main()
