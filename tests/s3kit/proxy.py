"""FaultProxy: an HTTP/1.1 reverse proxy in front of the test S3 server that
misbehaves on demand.

Owns the fault rules (which request, what goes wrong), the request counts and the
per-exchange byte log. It runs in its own threads (one per client connection), so a
sync test and an asyncio test use it alike.

How a request travels: the head is read; ``Expect: 100-continue`` is answered at
once; the body is read whole (``Content-Length`` or chunked framing, which is
removed: upstream gets the same bytes with a ``Content-Length``, so an aws-chunked
body reaches moto byte for byte); the request goes upstream on a fresh connection
with the client's headers (``Host`` included: path-style addressing does not care
which port the client named); the whole response is read and sent back with a
``Content-Length``. Client connections are kept alive as long as the client likes.

Rules: each rule matches requests (``method``; ``path``, a regex searched in the
percent-decoded path ``/bucket/key``; ``query``, a regex searched in the raw query
string) and counts its matches; it fires on the matches after the first ``after``,
``times`` times (None: for ever). Every rule that fires on a request acts:
``Delay`` and ``StripHeader`` change the request and let it go on, and the first
(oldest) rule with any other action decides its fate.
"""

from __future__ import annotations

import contextlib
import http.client
import re
import socket
import struct
import threading
from collections import Counter
from dataclasses import dataclass
from types import TracebackType
from typing import BinaryIO
from urllib.parse import unquote, urlsplit

from .thaw import Thaw

#: S3's bodies for its two throttling and server-fault answers.
SLOWDOWN_BODY = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n'
    b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"
)
INTERNAL_ERROR_BODY = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n'
    b"<Error><Code>InternalError</Code>"
    b"<Message>We encountered an internal error. Please try again.</Message></Error>"
)

_MAX_HEAD = 64 * 1024
_UPSTREAM_TIMEOUT_S = 60.0
#: Hop-by-hop: they describe one connection, so the proxy never passes them on.
_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "expect"}
    | {"proxy-connection", "proxy-authenticate", "proxy-authorization"}
)


# -- actions -------------------------------------------------------------------------
@dataclass(frozen=True)
class Respond:
    """Answer with this status and body; the request never reaches the server."""

    status: int
    body: bytes = b""
    content_type: str = "application/xml"


@dataclass(frozen=True)
class ResetRequest:
    """Read ``after_bytes`` of the request body, then reset the connection (RST)."""

    after_bytes: int = 0


@dataclass(frozen=True)
class ResetResponse:
    """Forward; send the response head and ``after_bytes`` of its body, then RST."""

    after_bytes: int = 0


@dataclass(frozen=True)
class Truncate:
    """Forward; send the head with the true ``Content-Length`` but only
    ``keep_bytes`` of the body, then close the connection cleanly (FIN)."""

    keep_bytes: int = 0


@dataclass(frozen=True)
class Delay:
    """Wait ``seconds`` after reading the request, then go on."""

    seconds: float


@dataclass(frozen=True)
class StripHeader:
    """Remove a request header (any case) before forwarding, e.g. ``If-None-Match``
    to play a server without conditional writes."""

    name: str


Action = Respond | ResetRequest | ResetResponse | Truncate | Delay | StripHeader

SLOW_DOWN = Respond(503, SLOWDOWN_BODY)
INTERNAL_ERROR = Respond(500, INTERNAL_ERROR_BODY)


# -- requests, rules, the log -------------------------------------------------------
@dataclass
class Request:
    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes = b""

    @property
    def path(self) -> str:
        return unquote(urlsplit(self.target).path)

    @property
    def query(self) -> str:
        return urlsplit(self.target).query

    def header(self, name: str) -> str | None:
        low = name.lower()
        return next((v for k, v in self.headers if k.lower() == low), None)

    def without(self, name: str) -> None:
        low = name.lower()
        self.headers = [(k, v) for k, v in self.headers if k.lower() != low]


@dataclass
class Rule:
    id: int
    action: Action
    method: str | None = None
    path: str | None = None
    query: str | None = None
    after: int = 0
    times: int | None = None
    #: Requests that matched; of those, the ones the rule acted on.
    matched: int = 0
    hits: int = 0

    def fire(self, request: Request) -> bool:
        """Count a match and say whether the rule acts on it (callers hold the lock)."""
        if self.method is not None and request.method != self.method.upper():
            return False
        if self.path is not None and not re.search(self.path, request.path):
            return False
        if self.query is not None and not re.search(self.query, request.query):
            return False
        self.matched += 1
        if self.matched <= self.after or (self.times is not None and self.hits >= self.times):
            return False
        self.hits += 1
        return True


@dataclass
class Exchange:
    """One request as the proxy saw it. ``status`` is None when no response was sent
    (a reset before the head); ``conn`` numbers the client connection it came on (a
    kept-alive connection carries several); ``sent`` counts the bytes of the response written to
    the client (status line, headers, body; not a ``100 Continue``), ``body_sent``
    the body alone; ``received`` the request body bytes read."""

    method: str
    path: str
    query: str
    conn: int
    status: int | None = None
    sent: int = 0
    body_sent: int = 0
    received: int = 0
    rules: tuple[int, ...] = ()


class _Closed(Exception):
    """The client closed its connection between requests."""


# -- the proxy ---------------------------------------------------------------------
class FaultProxy:
    """``with FaultProxy(server.endpoint) as proxy:`` then clients use ``proxy.endpoint``."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "http" or parts.hostname is None or parts.port is None:
            raise ValueError(f"upstream must be http://HOST:PORT, not {upstream!r}")
        self._upstream = (parts.hostname, parts.port)
        self._lock = threading.Lock()
        self._rules: list[Rule] = []
        self._next_id = 1
        self._counts: Counter[str] = Counter()
        self._log: list[Exchange] = []
        self._stopping = threading.Event()
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None
        self._conns: dict[socket.socket, threading.Thread] = {}
        self._conn_serial = 0
        #: Restores that take their time (s3kit.thaw); None: moto's, at once.
        self.thaw: Thaw | None = None

    # -- lifecycle --------------------------------------------------------------------
    def start(self) -> FaultProxy:
        listener = socket.create_server(("127.0.0.1", 0))
        self._listener = listener
        self._acceptor = threading.Thread(target=self._accept, name="faultproxy", daemon=True)
        self._acceptor.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._listener is not None:
            # shutdown, not just close, wakes the thread blocked in accept() (Linux).
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
        if self._acceptor is not None:
            self._acceptor.join()
        with self._lock:
            conns = list(self._conns.items())
        for sock, _ in conns:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for _, thread in conns:
            thread.join(timeout=_UPSTREAM_TIMEOUT_S)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def endpoint(self) -> str:
        if self._listener is None:
            raise RuntimeError("the proxy is not running: call start() first")
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    # -- rules ------------------------------------------------------------------------
    def fail(
        self,
        action: Action,
        *,
        method: str | None = None,
        path: str | None = None,
        query: str | None = None,
        after: int = 0,
        times: int | None = None,
    ) -> Rule:
        """Add a rule; ``after=2, times=1`` acts on the third matching request only.
        The returned rule's ``hits`` and ``matched`` are live counts."""
        for pattern in (path, query):
            if pattern is not None:
                re.compile(pattern)  # a bad regex fails here, not in the proxy thread
        with self._lock:
            rule = Rule(self._next_id, action, method, path, query, after, times)
            self._next_id += 1
            self._rules.append(rule)
            return rule

    def remove(self, rule: Rule) -> None:
        with self._lock:
            self._rules = [r for r in self._rules if r.id != rule.id]

    def clear(self) -> None:
        """Remove every rule (the counts and the log stay)."""
        with self._lock:
            self._rules = []

    # -- counts -----------------------------------------------------------------------
    @property
    def counts(self) -> dict[str, int]:
        """Requests received per method, faulted ones included."""
        with self._lock:
            return dict(self._counts)

    @property
    def exchanges(self) -> list[Exchange]:
        """Every request since the last ``reset_counts``, oldest first (one still in
        flight has no status yet)."""
        with self._lock:
            return list(self._log)

    def reset_counts(self) -> None:
        with self._lock:
            self._counts.clear()
            self._log.clear()

    # -- serving ----------------------------------------------------------------------
    def _accept(self) -> None:
        assert self._listener is not None
        while not self._stopping.is_set():
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self._conn_serial += 1
                thread = threading.Thread(
                    target=self._serve, args=(sock, self._conn_serial), daemon=True
                )
                self._conns[sock] = thread
            thread.start()

    def _serve(self, sock: socket.socket, conn: int) -> None:
        rfile = sock.makefile("rb")
        try:
            while not self._stopping.is_set() and self._exchange(sock, rfile, conn):
                pass
        except (_Closed, OSError, ValueError, http.client.HTTPException):
            pass  # the client went away, or sent what is not HTTP: drop the connection
        finally:
            rfile.close()
            sock.close()
            with self._lock:
                self._conns.pop(sock, None)

    def _exchange(self, sock: socket.socket, rfile: BinaryIO, conn: int) -> bool:
        """Serve one request; whether the connection may carry another."""
        request = _read_head(rfile)
        with self._lock:
            self._counts[request.method] += 1
            fired = [rule for rule in self._rules if rule.fire(request)]
            rules = tuple(r.id for r in fired)
            entry = Exchange(request.method, request.path, request.query, conn, rules=rules)
            self._log.append(entry)
        # Answered before any fault so that every client sends its body, whatever comes.
        if (request.header("Expect") or "").lower() == "100-continue":
            sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        verdict: Action | None = None
        for rule in fired:
            if isinstance(rule.action, StripHeader):
                request.without(rule.action.name)
            elif not isinstance(rule.action, Delay) and verdict is None:
                verdict = rule.action
        if isinstance(verdict, ResetRequest):
            entry.received = len(_read_body(rfile, request, limit=verdict.after_bytes))
            _reset(sock, rfile)
            return False
        request.body = _read_body(rfile, request)
        entry.received = len(request.body)
        for rule in fired:
            if isinstance(rule.action, Delay) and self._stopping.wait(rule.action.seconds):
                return False
        keep_alive = (request.header("Connection") or "").lower() != "close"
        if verdict is None and self.thaw is not None and request.method == "GET":
            refusal = self.thaw.refusal(request.path)
            if refusal is not None:
                verdict = Respond(403, refusal)
        if isinstance(verdict, Respond):
            head = [("Content-Type", verdict.content_type)]
            self._respond(sock, entry, verdict.status, "", head, verdict.body, keep_alive)
            return keep_alive
        status, reason, headers, body = self._forward(request)
        if verdict is None and self.thaw is not None:
            status, headers, body = self._thawing(request, status, headers, body)
        if isinstance(verdict, ResetResponse | Truncate):
            keep = verdict.after_bytes if isinstance(verdict, ResetResponse) else verdict.keep_bytes
            self._respond(sock, entry, status, reason, headers, body, keep_alive, cut=keep)
            if isinstance(verdict, ResetResponse):
                _reset(sock, rfile)
            return False
        self._respond(sock, entry, status, reason, headers, body, keep_alive)
        return keep_alive

    def _thawing(
        self, request: Request, status: int, headers: list[tuple[str, str]], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        """moto's answer to a restore request or a HEAD, as S3's slower thaw
        would have it (s3kit.thaw)."""
        assert self.thaw is not None
        if request.method == "POST" and "restore" in request.query.split("&"):
            if status not in (200, 202):
                return status, headers, body  # moto refused it (no such key, not cold)
            cold = self._storage_class(request)
            status, body = self.thaw.ask(request.path, request.body, cold)
            headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
            return status, [*headers, ("Content-Length", str(len(body)))], body
        if request.method == "HEAD" and status == 200:
            restore = self.thaw.header(request.path)
            if restore is not None:
                headers = [(k, v) for k, v in headers if k.lower() != "x-amz-restore"]
                if restore:
                    headers.append(("x-amz-restore", restore))
        return status, headers, body

    def _storage_class(self, request: Request) -> str:
        """The class moto holds the object in (asked with a HEAD of its own)."""
        head = Request("HEAD", urlsplit(request.target).path, list(request.headers))
        for name in ("Content-Length", "Content-MD5", "Content-Type"):
            head.without(name)
        _, _, headers, _ = self._forward(head)
        return next((v for k, v in headers if k.lower() == "x-amz-storage-class"), "STANDARD")

    def _forward(self, request: Request) -> tuple[int, str, list[tuple[str, str]], bytes]:
        conn = http.client.HTTPConnection(*self._upstream, timeout=_UPSTREAM_TIMEOUT_S)
        try:
            conn.putrequest(
                request.method, request.target, skip_host=True, skip_accept_encoding=True
            )
            for name, value in request.headers:
                if name.lower() not in _HOP and name.lower() != "content-length":
                    conn.putheader(name, value)
            if request.body or request.header("Content-Length") or _chunked(request):
                conn.putheader("Content-Length", str(len(request.body)))
            conn.endheaders(request.body or None)
            response = conn.getresponse()
            body = response.read()
            headers = [(k, v) for k, v in response.getheaders() if k.lower() not in _HOP]
            bodiless = request.method == "HEAD" or response.status in (204, 304)
            if not bodiless:
                # The body was read whole (de-chunked): its length is now known.
                headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
                headers.append(("Content-Length", str(len(body))))
            return response.status, response.reason, headers, body
        except (OSError, http.client.HTTPException) as exc:
            message = f"faultproxy: upstream failed: {exc!r}".encode()
            return 502, "Bad Gateway", [("Content-Length", str(len(message)))], message
        finally:
            conn.close()

    def _respond(
        self,
        sock: socket.socket,
        entry: Exchange,
        status: int,
        reason: str,
        headers: list[tuple[str, str]],
        body: bytes,
        keep_alive: bool,
        cut: int | None = None,
    ) -> None:
        """Send a response; with ``cut``, only that many bytes of the body."""
        if not any(k.lower() == "content-length" for k, _ in headers):
            headers = [*headers, ("Content-Length", str(len(body)))]
        if not keep_alive or cut is not None:
            headers = [*headers, ("Connection", "close")]
        lines = [f"HTTP/1.1 {status} {reason or http.client.responses.get(status, '')}"]
        lines += [f"{k}: {v}" for k, v in headers]
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        # A HEAD response describes a body it never carries.
        payload = b"" if entry.method == "HEAD" else body if cut is None else body[:cut]
        # Counted before they go: a client that has read them must find them
        # counted (a test reads the counts as soon as its request returns).
        entry.status = status
        entry.sent = len(head) + len(payload)
        entry.body_sent = len(payload)
        try:
            sock.sendall(head + payload)
        except OSError:
            entry.sent = entry.body_sent = 0  # how much went is unknown: none is claimed
            raise


# -- HTTP/1.1 framing ----------------------------------------------------------------
def _read_line(rfile: BinaryIO) -> bytes:
    line = rfile.readline(_MAX_HEAD + 1)
    if len(line) > _MAX_HEAD:
        raise ValueError("header line too long")
    return line


def _read_head(rfile: BinaryIO) -> Request:
    line = _read_line(rfile)
    while line in (b"\r\n", b"\n"):  # RFC 9112: ignore empty lines before a request
        line = _read_line(rfile)
    if not line:
        raise _Closed
    method, target, _version = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
    headers: list[tuple[str, str]] = []
    while (line := _read_line(rfile)) not in (b"\r\n", b"\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        headers.append((name.strip(), value.strip()))
    return Request(method.upper(), target, headers)


def _chunked(request: Request) -> bool:
    return "chunked" in (request.header("Transfer-Encoding") or "").lower()


def _read_exact(rfile: BinaryIO, n: int) -> bytes:
    data = rfile.read(n)
    if len(data) < n:
        raise _Closed
    return data


def _read_body(rfile: BinaryIO, request: Request, limit: int | None = None) -> bytes:
    """The body, de-chunked; with ``limit``, stop once that many bytes are in."""
    if not _chunked(request):
        size = int(request.header("Content-Length") or 0)
        return _read_exact(rfile, size if limit is None else min(size, limit))
    parts: list[bytes] = []
    got = 0
    while limit is None or got < limit:
        size = int(_read_line(rfile).split(b";")[0].strip(), 16)
        if size == 0:
            while _read_line(rfile) not in (b"\r\n", b"\n", b""):
                pass  # trailers: not passed on (upstream gets a Content-Length body)
            break
        parts.append(_read_exact(rfile, size))
        got += size
        _read_line(rfile)  # the CRLF after the chunk
    body = b"".join(parts)
    return body if limit is None else body[:limit]


def _reset(sock: socket.socket, rfile: BinaryIO) -> None:
    """Close with an RST: SO_LINGER with a zero timeout makes close() abort."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    rfile.close()
    sock.close()


__all__ = [
    "INTERNAL_ERROR",
    "INTERNAL_ERROR_BODY",
    "SLOWDOWN_BODY",
    "SLOW_DOWN",
    "Action",
    "Delay",
    "Exchange",
    "FaultProxy",
    "Request",
    "ResetRequest",
    "ResetResponse",
    "Respond",
    "Rule",
    "StripHeader",
    "Truncate",
]
