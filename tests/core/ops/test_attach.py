"""The attach socket: a console watches (and can stop) another process's work."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
from pathlib import Path

import pytest

from coldkeep.core.base.stream import BatchMoved, EventStream, FileStep, Notice
from coldkeep.core.ops.attach import AttachClient, AttachServer, NotAttachable


@pytest.fixture
def sock_path(tmp_path: Path) -> Path:
    return tmp_path / ".coldkeep.sock"


async def serve(path: Path) -> tuple[AttachServer, EventStream, list[str]]:
    stream = EventStream()
    stops: list[str] = []
    server = AttachServer(path, stream, {"pid": os.getpid(), "operation": "pass"}, stops.append)
    await server.start()
    return server, stream, stops


async def test_events_flow_to_the_client_and_stop_reaches_the_server(sock_path: Path) -> None:
    old = os.umask(0)  # no umask narrows it: the socket sets its mode itself
    try:
        server, stream, stops = await serve(sock_path)
    finally:
        os.umask(old)
    try:
        assert stat.S_IMODE(sock_path.stat().st_mode) == 0o600
        client = await AttachClient.connect(sock_path)
        assert client.hello["operation"] == "pass"
        received = client.events()
        for _ in range(100):  # the server subscribes once the hello is out
            stream.emit(FileStep("archive", "u/a.jsonl", "verified", 10, 20))
            stream.emit(BatchMoved(1, 1, 9, 5, 0, ("2026-01",), 4096, False))
            first = await asyncio.wait_for(anext(received), 5)
            if isinstance(first, FileStep):
                break
        assert first == FileStep("archive", "u/a.jsonl", "verified", 10, 20)
        second = await asyncio.wait_for(anext(received), 5)
        assert second == BatchMoved(1, 1, 9, 5, 0, ("2026-01",), 4096, False)

        await client.request("stop")
        for _ in range(50):  # replies arrive beside the events; events move the reader
            stream.emit(Notice("info", "nudge"))
            await asyncio.wait_for(anext(received), 5)
            if not client.replies.empty():
                break
        assert await client.replies.get() == {"ok": True}
        assert stops == ["asked to stop by an attached console"]
        await client.close()
    finally:
        await server.close()
    assert not sock_path.exists(), "the socket goes with its server"


async def test_a_malformed_message_gets_an_error_and_breaks_nothing(sock_path: Path) -> None:
    server, _, stops = await serve(sock_path)
    try:
        reader, writer = await asyncio.open_unix_connection(str(sock_path))
        assert "hello" in json.loads(await reader.readline())
        for junk, says in (
            (b"this is not json\n", "not JSON"),
            (b"[1, 2]\n", "expected a JSON object"),
            (b'{"op": "format-disk"}\n', "unknown op"),
            (b"\xff\xfe\n", "not JSON"),
        ):
            writer.write(junk)
            await writer.drain()
            reply = json.loads(await asyncio.wait_for(reader.readline(), 5))
            assert says in reply["error"]
        writer.write(b"x" * 100_000 + b"\n")  # past the line limit: closed, server lives
        await writer.drain()
        while await asyncio.wait_for(reader.readline(), 5):
            pass
        writer.close()
        client = await AttachClient.connect(sock_path)  # still serving
        assert client.hello["pid"] == os.getpid() and stops == []
        await client.close()
    finally:
        await server.close()


async def test_a_stale_socket_is_not_attachable_and_the_next_holder_replaces_it(
    sock_path: Path,
) -> None:
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(str(sock_path))
    dead.close()  # a socket file with no one behind it: a process that died
    with pytest.raises(NotAttachable, match="nothing serves"):
        await AttachClient.connect(sock_path)
    server, _, _ = await serve(sock_path)
    try:
        client = await AttachClient.connect(sock_path)
        await client.close()
    finally:
        await server.close()
    with pytest.raises(NotAttachable):
        await AttachClient.connect(sock_path)


async def test_another_user_cannot_connect(sock_path: Path) -> None:
    server, _, _ = await serve(sock_path)
    sock_path.parent.chmod(0o755)
    try:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child, as nobody
            os.close(r)
            try:
                os.setgid(65534)
                os.setuid(65534)
                s = socket.socket(socket.AF_UNIX)
                try:
                    s.connect(str(sock_path))
                    os.write(w, b"connected")
                except PermissionError:
                    os.write(w, b"refused")
            finally:
                os._exit(0)
        os.close(w)
        said = await asyncio.to_thread(lambda: os.read(r, 100))
        os.close(r)
        await asyncio.to_thread(os.waitpid, pid, 0)
        assert said == b"refused"
    finally:
        await server.close()


async def test_closing_with_a_console_attached_reports_no_error(sock_path: Path) -> None:
    """The process being watched ends (or is stopped) while a console is attached:
    nothing may be reported as an unhandled error (Python 3.11's stream callback
    printed a CancelledError traceback for the client's cancelled task)."""
    reported: list[dict[str, object]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: reported.append(ctx))
    server, _stream, _stops = await serve(sock_path)
    client = await AttachClient.connect(sock_path)
    await server.close()
    await client.close()
    for _ in range(3):  # the transports' callbacks run on the next turns of the loop
        await asyncio.sleep(0)
    assert reported == []


async def test_an_archive_root_deeper_than_a_socket_path_can_be_is_still_attachable(
    tmp_path: Path,
) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    path = deep / ".coldkeep.sock"
    assert len(os.fsencode(path)) > 108
    server, _, _ = await serve(path)
    try:
        assert stat.S_ISSOCK(path.stat().st_mode)
        client = await AttachClient.connect(path)
        assert client.hello["operation"] == "pass"
        await client.close()
    finally:
        await server.close()
    assert not path.exists()
