"""A warm start for the CLI processes the tests run: ``coldkeep`` as a child
forked from a server that imported it once, instead of a new interpreter that
imports it all again (0.3 s of the 0.4 s each of the suite's ~1,400 CLI runs
took, a third of the suite's time on two cores).

The child is a real process, as ``python -m coldkeep.tui.cli.main`` makes
one: its own pid and exit code (a signal's as ``-N``, as subprocess says), the
caller's stdin, stdout and stderr (passed over the socket), working folder and
environment; it runs the module as ``-m`` does (runpy: ``__main__``, argv[0],
the program's name in usage lines) and ends as the interpreter's own exit ends
it (threads joined, atexit handlers run, garbage collected, buffers flushed, the
same exit code), but for the teardown of the modules the server imported: that
copied every page the child shared with the server, 30 ms of a child's 47.

``run`` and ``run_bytes`` wait for the child and give its output; ``spawn``
leaves it running for the caller to wait for or kill (by a pidfd the server
sends: the very process, even once its pid is free again). The faultfs
servers the fault tests mount start the same way (``spawn_module``, a server
of their own that has loaded libfuse): 0.02 s a start instead of 0.1 s.

What differs from a new interpreter: the modules were imported once, under the
server's environment (coldkeep reads its environment only when it runs, never
as it is imported), and the interpreter's own start-up settings (``PYTHON*``,
``LD_*``) are the server's. So a run whose environment changes those, or that
runs under a wrapper (``faketime``), starts a new interpreter (``warm_ok``).

Invariants:
- The server forks with one thread (checked before it serves: a lock held by
  another thread at fork is held for ever in the child).
- A server that cannot start costs nothing but speed: callers start a new
  interpreter, as without it.
- The server dies with the test process that started it (PR_SET_PDEATHSIG),
  and a child's status goes only to the connection that asked for it.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import gc
import json
import locale
import os
import runpy
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import NoReturn

MODULE = "coldkeep.tui.cli.main"
# Variables an interpreter reads as it starts, or a loader as it loads: a run
# that sets them other than the server's needs an interpreter of its own.
_AT_START = ("PYTHON", "LD_")
_MAX_REQUEST = 1 << 20


# The server ---------------------------------------------------------------------


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)


def _warm_s3() -> None:
    """What a command that reaches a bucket does first, done once: import the S3
    client (imported on first use: 0.3 s) and make one, so that botocore has
    parsed its models (55 ms). Nothing is sent anywhere."""
    import asyncio

    from coldkeep.core.remote.s3store import shared_session

    async def make() -> None:
        client = shared_session().create_client(
            "s3",
            region_name="us-east-1",
            endpoint_url="http://127.0.0.1:9",
            aws_access_key_id="warm",
            aws_secret_access_key="warm",
        )
        async with client:
            pass

    asyncio.run(make())


def _warm_cli() -> None:
    """The cost every CLI child is spared: the CLI and every command's module
    (the CLI imports a command's module only when it runs it)."""
    __import__(MODULE)
    sys.modules[MODULE].every_command()
    __import__("croniter")  # what a config with a cron schedule imports on first use
    _warm_s3()


def _warm_faultfs() -> None:
    """What a faultfs server imports and loads before it mounts (0.1 s of CPU
    a start; the power-loss matrix starts two or three a cut). libfuse 3 that
    cannot be loaded is the child's to say, as a new server's would."""
    from coldkeep.core.ops import libfuse

    __import__("faultfs.server")
    with contextlib.suppress(libfuse.NoLibfuse3):
        libfuse.mfusepy()
        __import__("faultfs.binding")
        __import__("faultfs.passthrough")


#: The modules a server can run, each with what its server imports first.
PRELOADS: dict[str, Callable[[], None]] = {MODULE: _warm_cli, "faultfs.server": _warm_faultfs}


def serve(path: str, module: str) -> dict[str, object]:
    """Accept requests at ``path`` for ever; returns only in a forked child,
    with its request, its stdio already in place."""
    PRELOADS[module]()
    assert threading.active_count() == 1, f"importing {module} started a thread"
    # What was imported is frozen, as a pre-fork server should: a child's
    # collections never walk it, nor write to its pages (each write copying a
    # page the child shares with this server). The CLI freezes it too, but not
    # before --version, --help or a usage error: those took 0.19 s, now 0.05 s.
    gc.freeze()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ)
    sel.register(wake_r, selectors.EVENT_READ)
    waiting: dict[int, socket.socket] = {}
    print("ready", flush=True)
    while True:
        for key, _ in sel.select():
            if key.fileobj is listener:
                conn, _addr = listener.accept()
                data, fds, _flags, _addr = socket.recv_fds(conn, _MAX_REQUEST, 3)
                pid = os.fork()
                if pid == 0:
                    sel.close()
                    listener.close()
                    conn.close()
                    for waiter in waiting.values():
                        waiter.close()
                    signal.set_wakeup_fd(-1)
                    os.close(wake_r)
                    os.close(wake_w)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    for target, fd in enumerate(fds):
                        os.dup2(fd, target)
                        os.close(fd)
                    request: dict[str, object] = json.loads(data)
                    return request
                for fd in fds:
                    os.close(fd)
                # With a pidfd: a caller that kills the child signals that very
                # process, even once it has ended and its pid is free again.
                pidfd = os.pidfd_open(pid)
                try:
                    socket.send_fds(conn, [str(pid).encode()], [pidfd])
                finally:
                    os.close(pidfd)
                waiting[pid] = conn
            else:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 4096)
                _reap(waiting)


def _reap(waiting: dict[int, socket.socket]) -> None:
    while waiting:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            return
        conn = waiting.pop(pid, None)
        if conn is not None:
            with contextlib.suppress(OSError):  # the caller gave up on it
                conn.send(str(os.waitstatus_to_exitcode(status)).encode())
            conn.close()


def child(request: dict[str, object], module: str) -> None:
    """Become ``python -m MODULE ARGS`` as the caller asked."""
    env = request["env"]
    argv = request["argv"]
    assert isinstance(env, dict) and isinstance(argv, list)
    os.environ.clear()
    os.environ.update(env)
    time.tzset()
    os.chdir(str(request["cwd"]))
    sys.argv = [module, *argv]
    # As -m runs it: the module itself not imported, only what it imports.
    package, _, name = module.rpartition(".")
    del sys.modules[module]
    delattr(sys.modules[package], name)
    runpy.run_module(module, run_name="__main__", alter_sys=True)


# The client ---------------------------------------------------------------------


class Server:
    """The server of one test process for one module, started on first use,
    stopped and its socket's folder removed as the process exits."""

    def __init__(self, module: str) -> None:
        self.module = module
        self._path: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._folder: str | None = None
        self._failed = False
        self._lock = threading.Lock()  # a test may run the CLI from threads

    def path(self) -> str | None:
        with self._lock:
            return self._start()

    def _start(self) -> str | None:
        if self._path is None and not self._failed:
            self._folder = tempfile.mkdtemp(prefix="clizygote-")
            atexit.register(self._stop)
            path = os.path.join(self._folder, "sock")
            self._proc = subprocess.Popen(
                [sys.executable, __file__, path, self.module],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
            )
            assert self._proc.stdout is not None
            ready = self._proc.stdout.readline() == b"ready\n"
            self._proc.stdout.close()
            if not ready:
                self._failed = True
                return None
            self._path = path
        return self._path

    def _stop(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)


_SERVERS = {module: Server(module) for module in PRELOADS}


def warm_ok(env: Mapping[str, str], under: Sequence[str] = ()) -> bool:
    """Whether a run with this environment can be a warm child."""
    if under:
        return False
    for name in env.keys() | os.environ.keys():
        if name.startswith(_AT_START) and env.get(name) != os.environ.get(name):
            return False
    return True


def run(
    args: Sequence[str], *, env: Mapping[str, str], timeout: float
) -> subprocess.CompletedProcess[str] | None:
    """``python -m coldkeep.tui.cli.main ARGS`` forked warm, its output
    captured as ``subprocess.run(..., capture_output=True, text=True)`` does;
    None where no server could start."""
    done = run_bytes(args, env=env, timeout=timeout)
    if done is None:
        return None
    return subprocess.CompletedProcess(
        done.args, done.returncode, _text(done.stdout), _text(done.stderr)
    )


def run_bytes(
    args: Sequence[str], *, env: Mapping[str, str], timeout: float
) -> subprocess.CompletedProcess[bytes] | None:
    """``run``, its output the bytes the child wrote (``capture_output=True``
    without ``text``)."""
    path = _SERVERS[MODULE].path()
    if path is None:
        return None
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    conn, pid, pidfd = _start(path, args, env, [os.open(os.devnull, os.O_RDONLY), out_w, err_w])
    with conn:
        os.close(pidfd)
        out, err = _drain(out_r, err_r, pid, timeout, args)
        code = int(conn.recv(64))
    return subprocess.CompletedProcess([sys.executable, "-m", MODULE, *args], code, out, err)


def _start(
    path: str, args: Sequence[str], env: Mapping[str, str], stdio: list[int]
) -> tuple[socket.socket, int, int]:
    """Ask the server at ``path`` to start ``ARGS`` with ``stdio`` as its
    stdin, stdout and stderr (closed here once sent): the connection its exit
    code will come on, its pid and a pidfd of it."""
    request = json.dumps({"argv": list(args), "env": dict(env), "cwd": os.getcwd()})
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        try:
            conn.connect(path)
            socket.send_fds(conn, [request.encode()], stdio)
        finally:
            for fd in set(stdio):
                os.close(fd)
        data, fds, _flags, _addr = socket.recv_fds(conn, 64, 1)
    except BaseException:
        conn.close()
        raise
    [pidfd] = fds
    return conn, int(data), pidfd


class Started:
    """A child ``spawn`` started: waited for, or killed at a moment of the
    caller's choosing (a crash test's random moment)."""

    def __init__(self, conn: socket.socket, pid: int, pidfd: int) -> None:
        self._conn = conn
        self.pid = pid
        self._pidfd = pidfd
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """Its exit code, or None while it runs."""
        return self.wait(0)

    def wait(self, timeout: float | None = None) -> int | None:
        """Its exit code (a signal's as ``-N``), or None while it runs on after
        ``timeout`` seconds."""
        if self.returncode is None:
            self._conn.settimeout(timeout)
            try:
                data = self._conn.recv(64)
            except (TimeoutError, BlockingIOError):  # a timeout of 0: BlockingIOError
                return None
            self.returncode = int(data)
            self._conn.close()
            os.close(self._pidfd)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        """``sig`` to that very process, unless it has ended."""
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):  # it has just ended
                signal.pidfd_send_signal(self._pidfd, sig)

    def kill(self) -> int:
        """SIGKILL, then its exit code (0 or another if it had ended first)."""
        self.send_signal(signal.SIGKILL)
        code = self.wait()
        assert code is not None
        return code


def spawn(args: Sequence[str], *, env: Mapping[str, str]) -> Started | None:
    """``python -m coldkeep.tui.cli.main ARGS`` forked warm, its output
    discarded, left running; None where no server could start."""
    null_w = os.open(os.devnull, os.O_WRONLY)
    return spawn_module(MODULE, args, env=env, stdio=[os.open(os.devnull, os.O_RDONLY), null_w])


def spawn_module(
    module: str, args: Sequence[str], *, env: Mapping[str, str], stdio: Sequence[int]
) -> Started | None:
    """``python -m MODULE ARGS`` (a module of ``PRELOADS``) forked warm with
    ``stdio`` as its stdin and its stdout (stderr too), left running; the
    descriptors closed here. None where no server could start."""
    path = _SERVERS[module].path()
    if path is None:
        for fd in set(stdio):
            os.close(fd)
        return None
    conn, pid, pidfd = _start(path, args, env, [stdio[0], stdio[1], stdio[1]])
    return Started(conn, pid, pidfd)


def _text(data: bytes) -> str:
    """As ``text=True`` decodes: the locale's encoding, newlines translated."""
    text = data.decode(locale.getpreferredencoding(False))
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _drain(
    out_r: int, err_r: int, pid: int, timeout: float, args: Sequence[str]
) -> tuple[bytes, bytes]:
    """Both pipes read to their ends (as communicate does), or the child killed
    at the timeout."""
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        for fd in chunks:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                # Only the pipes still open: one that ended is closed already,
                # and its number may belong to another file by now.
                for key in list(sel.get_map().values()):
                    os.close(key.fd)
                raise subprocess.TimeoutExpired([MODULE, *args], timeout)
            for key, _ in sel.select(left):
                fd = key.fd
                data = os.read(fd, 65536)
                if data:
                    chunks[fd].append(data)
                else:
                    sel.unregister(fd)
                    os.close(fd)
    return b"".join(chunks[out_r]), b"".join(chunks[err_r])


def _exit_as_the_interpreter_would(run: Callable[[], None]) -> NoReturn:
    """Run the child and end it as Python's own exit does, but for the teardown
    of the modules: non-daemon threads joined, atexit handlers run, what the run
    left as garbage collected (its finalizers run), stdout and stderr flushed,
    the exit code from SystemExit (an uncaught exception: its traceback, 1; an
    uncaught KeyboardInterrupt: killed by SIGINT). The teardown would drop every
    module the server imported, writing to each object's page and so copying
    every page the child shares with the server: 30 ms of each child's 47."""
    code = 0
    try:
        run()
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        code = -signal.SIGINT
    except Exception:  # noqa: BLE001 - uncaught: printed as the interpreter would, exit 1
        sys.excepthook(*sys.exc_info())
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    gc.collect()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed, or a reader gone
            stream.flush()
    if code == -signal.SIGINT:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code)


def _exit_code(code: object) -> int:
    """What the interpreter exits with for ``SystemExit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


if __name__ == "__main__":
    _die_with_parent()
    request = serve(sys.argv[1], sys.argv[2])
    _exit_as_the_interpreter_would(lambda: child(request, sys.argv[2]))
