"""Attach: the process holding the archive lock (a CLI pass, the daemon) serves its
event stream on a Unix socket, ``archive_root/.coldkeep.sock``, so a console
opened later from another SSH session can watch that pass live and ask it to stop
at its next safe point.

Protocol: one JSON object per line, both ways.

    server -> client   {"hello": {"pid":…, "host":…, "command":…, "started_at":…}}
                       then, mid-phase, the phase and its progress so far
                       then every event as ``stream.as_dict`` gives it
    client -> server   {"op": "stop"}   stop gracefully   -> {"ok": true}
                       {"op": "ping"}                      -> {"ok": true}
                       anything else                       -> {"error": "…"}

Invariants:
- Only the owner gets in: the socket is created under a temporary name, made
  0600, then renamed into place (never a moment with a wider mode), and each
  client's uid is checked again with SO_PEERCRED.
- A malformed or oversized message gets an error reply (or, past 64 KiB, the
  connection closed); it never takes the server, or the pass it serves, down.
- A socket left by a dead process is stale: the next holder of the lock (only one
  process can hold it) replaces it. A client that finds no server, or a stale
  socket, is told there is nothing to attach to.
- A slow client never slows the pass: it reads from its own bounded subscription.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import struct
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

from ..base.errors import ColdkeepError
from ..base.layout import Layout
from ..base.stream import Event, EventStream, as_dict, from_dict

MAX_LINE = 64 * 1024
UNIX_PATH_MAX = 107  # bytes of a socket's path (sun_path holds 108 with its NUL)


class NotAttachable(ColdkeepError):
    """Nothing serves events at the socket (no holder, or a stale socket)."""


@contextlib.contextmanager
def unix_address(path: Path) -> Iterator[str]:
    """``path`` as a socket address: a socket's path holds at most 107 bytes, and
    an archive_root deep in a tree is longer; then the same file is named through
    its open directory (``/proc/self/fd/N/name``), for as long as the bind or
    connect takes."""
    if len(os.fsencode(path)) <= UNIX_PATH_MAX:
        yield str(path)
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def _peer_uid(writer: asyncio.StreamWriter) -> int | None:
    sock = writer.get_extra_info("socket")
    if sock is None:
        return None
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


def _line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, sort_keys=True, default=str).encode() + b"\n"


class AttachServer:
    def __init__(
        self,
        path: Path,
        stream: EventStream,
        hello: dict[str, Any],
        on_stop: Callable[[str], None],
    ) -> None:
        self.path = path
        self.stream = stream
        self.hello = hello
        self.on_stop = on_stop
        self._server: asyncio.AbstractServer | None = None
        self._ino: int | None = None
        self._clients: set[asyncio.Task[None]] = set()

    @classmethod
    async def serve(
        cls,
        archive_root: Path,
        stream: EventStream,
        hello: dict[str, Any],
        on_stop: Callable[[str], None],
    ) -> AttachServer | None:
        """A started server for the lock holder's operation; None, with a warning on
        the stream, when the socket cannot be served: attach is a convenience, and
        its failure never stops the work."""
        server = cls(Layout(archive_root).socket, stream, hello, on_stop)
        try:
            await server.start()
        except OSError as err:
            stream.notice("warning", f"cannot serve events for attaching consoles: {err}")
            return None
        return server

    async def start(self) -> None:
        await asyncio.to_thread(self._clear_stale)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        with unix_address(tmp) as address:
            self._server = await asyncio.start_unix_server(
                self._serve, path=address, limit=MAX_LINE
            )
        os.chmod(tmp, 0o600)
        os.rename(tmp, self.path)
        self._ino = os.lstat(self.path).st_ino

    def _clear_stale(self) -> None:
        """We hold the lock: any socket here belongs to a process that no longer
        does (dead, or about to exit)."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._clients):
                task.cancel()
            await asyncio.gather(*self._clients, return_exceptions=True)
            await self._server.wait_closed()
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            if os.lstat(self.path).st_ino == self._ino:  # still ours, not a successor's
                self.path.unlink()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._clients.add(task)
        try:
            uid = _peer_uid(writer)
            if uid is not None and uid != os.getuid():
                writer.write(_line({"error": "refused: not the archive's owner"}))
                await writer.drain()
                return
            writer.write(_line({"hello": self.hello}))
            with self.stream.subscribe(maxsize=2000) as sub:
                # Taken in the same loop step as the subscription: nothing falls
                # between the catch-up and the first event forwarded.
                for event in self.stream.catch_up():
                    writer.write(_line(as_dict(event)))
                await writer.drain()
                forward = asyncio.create_task(self._forward(sub, writer))
                try:
                    await self._commands(reader, writer)
                finally:
                    forward.cancel()
                    await asyncio.gather(forward, return_exceptions=True)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away: nothing to do
        except asyncio.CancelledError:
            # Only close() cancels a client's task, and this one ends here. Ending
            # cancelled would make Python 3.11's stream callback call exception()
            # on it, which raises, and the watched process print a traceback.
            pass
        finally:
            self._clients.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _forward(self, sub: Any, writer: asyncio.StreamWriter) -> None:
        async for event in sub:
            writer.write(_line(as_dict(event)))
            await writer.drain()

    async def _commands(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                raw = await reader.readline()
            except ValueError:  # a line past MAX_LINE: this client is not speaking the protocol
                writer.write(_line({"error": f"message longer than {MAX_LINE} bytes; closing"}))
                await writer.drain()
                return
            if not raw:
                return
            reply = self._answer(raw)
            writer.write(_line(reply))
            await writer.drain()

    def _answer(self, raw: bytes) -> dict[str, Any]:
        try:
            message = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return {"error": "not JSON"}
        if not isinstance(message, dict):
            return {"error": "expected a JSON object"}
        op = message.get("op")
        if op == "ping":
            return {"ok": True}
        if op == "stop":
            self.on_stop("asked to stop by an attached console")
            return {"ok": True}
        return {"error": f"unknown op {op!r}"}


class AttachClient:
    """A connection to the lock holder's event stream."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, hello: dict[str, Any]
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.hello = hello
        self.replies: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    @classmethod
    async def connect(cls, path: Path) -> AttachClient:
        try:
            with unix_address(path) as address:
                reader, writer = await asyncio.open_unix_connection(address, limit=MAX_LINE)
        except (FileNotFoundError, ConnectionRefusedError) as err:
            raise NotAttachable(f"nothing serves events at {path}") from err
        except PermissionError as err:
            raise NotAttachable(f"{path} belongs to another user") from err
        first = json.loads(await reader.readline() or b"{}")
        if "hello" not in first:
            writer.close()
            raise NotAttachable(str(first.get("error") or f"{path} did not say hello"))
        return cls(reader, writer, dict(first["hello"]))

    async def events(self) -> AsyncIterator[Event]:
        """Events until the server goes away; replies to commands go to ``replies``."""
        while raw := await self.reader.readline():
            message = json.loads(raw)
            if "kind" in message:
                event = from_dict(message)
                if event is not None:
                    yield event
            else:
                await self.replies.put(message)

    async def request(self, op: str) -> None:
        self.writer.write(_line({"op": op}))
        await self.writer.drain()

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError):
            await self.writer.wait_closed()
