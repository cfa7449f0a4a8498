"""The control channel: one JSON request per line over a Unix socket, one JSON
reply per line (``{"ok": true, "result": ...}`` or ``{"ok": false, "error": ...}``).

Owns the wire format on both sides: ``ControlServer`` (a thread per client in the
server process) and ``request`` (what the test side calls).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import socketserver
import threading
from collections.abc import Callable
from typing import Any

Dispatch = Callable[[dict[str, Any]], Any]


class ControlError(RuntimeError):
    """The server refused or failed a request."""


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def _answer(self, line: bytes) -> dict[str, Any]:
        try:
            req = json.loads(line)
            if not isinstance(req, dict):
                return {"ok": False, "error": "a request is a JSON object"}
            return {"ok": True, "result": self.server.dispatch(req)}
        except Exception as exc:  # noqa: BLE001  every failure goes back to the client
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}

    def handle(self) -> None:
        for line in self.rfile:
            reply = self._answer(line)
            self.wfile.write(json.dumps(reply).encode() + b"\n")
            self.wfile.flush()


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True

    def __init__(self, path: str, dispatch: Dispatch) -> None:
        self.dispatch = dispatch
        super().__init__(path, _Handler)


class ControlServer:
    """Serves ``dispatch`` on the socket ``path`` from a daemon thread."""

    def __init__(self, path: str, dispatch: Dispatch) -> None:
        if os.path.exists(path):
            os.unlink(path)
        self.path = path
        self._server = _Server(path, dispatch)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},  # how long close() waits for the thread
            name="faultfs-control",
            daemon=True,
        )

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


def request(socket_path: str, cmd: str, timeout: float = 120.0, **args: Any) -> Any:
    """Send one request, return its result; raises ``ControlError`` on refusal."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(socket_path)
        sock.sendall(json.dumps({"cmd": cmd, **args}).encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                raise ControlError(f"faultfs server closed the control socket during {cmd!r}")
            buf += chunk
    reply = json.loads(buf)
    if not reply.get("ok"):
        raise ControlError(f"{cmd}: {reply.get('error')}")
    return reply.get("result")
