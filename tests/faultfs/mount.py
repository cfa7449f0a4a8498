"""The test side: ``FaultFS`` starts a faultfs server process on a backing
directory and a mountpoint, waits until the mount is live, drives the fault rules
and the volatile journal over the control socket, and unmounts and stops the
process however the test ends.

Owns the server's lifecycle (start, stop, cut, remount), the decision whether this
machine can mount at all (``unavailable_reason``), and the client API.
"""

from __future__ import annotations

import errno as E
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import clizygote

from coldkeep.core.ops import libfuse

from . import control
from .server import NO_LIBFUSE3

_PKG_PARENT = str(Path(__file__).resolve().parent.parent)
_START_DEADLINE_S = 20.0
_STOP_DEADLINE_S = 10.0
#: What libfuse or fusermount3 print when the machine (not faultfs) refuses a mount
#: (and the server's own line when libfuse 3 cannot be loaded: ``NO_LIBFUSE3``).
_REFUSALS = ("operation not permitted", "permission denied", "device not found", "not found")


def _refusal(log_text: str) -> str | None:
    """The line of a failed server's log that says the machine refused the mount."""
    for line in log_text.splitlines():
        if line.startswith(NO_LIBFUSE3):
            return line.strip()
        low = line.strip().lower()
        if low.startswith(("fuse:", "fusermount3:", "fusermount:")) and any(
            r in low for r in _REFUSALS
        ):
            return line.strip()
    return None


class MountUnavailable(RuntimeError):
    """This machine cannot mount a FUSE filesystem (the tests skip, with this reason)."""


class MountError(RuntimeError):
    """The faultfs server failed (a bug: the tests fail, with the server's log)."""


def unavailable_reason() -> str | None:
    """Why this machine cannot mount faultfs, or None if it should be able to."""
    if not sys.platform.startswith("linux"):
        return f"faultfs needs Linux FUSE (this is {sys.platform})"
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse does not exist (no FUSE in this kernel or container)"
    try:
        os.close(os.open("/dev/fuse", os.O_RDWR))
    except OSError as exc:
        return f"cannot open /dev/fuse: {exc.strerror}"
    if shutil.which("fusermount3") is None:
        return "fusermount3 is not installed (apt-get install fuse3)"
    missing = libfuse.problem()
    if missing is not None:
        return missing
    if importlib.util.find_spec("mfusepy") is None:
        return "the Python package mfusepy is not installed (pip install mfusepy)"
    return None


def is_mounted(path: Path) -> bool:
    """Whether ``path`` is a mountpoint per the kernel's table (never stats it, so a
    dead or frozen server cannot hang the question)."""
    target = os.path.realpath(path)
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            mp = fields[4].encode().decode("unicode_escape")
            if mp == target:
                return True
    return False


def _unmount(mount: Path) -> bool:
    """``fusermount3 -u``, lazily if the mount is busy. True if it was not busy."""
    for lazy in (False, True):
        if not is_mounted(mount):
            return not lazy
        args = ["-u", "-z"] if lazy else ["-u"]
        subprocess.run(
            ["fusermount3", *args, str(mount)], capture_output=True, check=False, timeout=30
        )
    return False


class FaultFS:
    """One faultfs mount: ``backing`` served at ``mount``. Use as a context manager
    (or ``start``/``stop``); ``volatile=True`` keeps the power-cut journal.
    ``attr_timeout`` > 0 lets the kernel cache attributes that long: fewer calls
    (a metadata-heavy SQLite run goes ~1.5x faster), but a change made beside the
    mount (in ``backing``, or through another hard link) shows late."""

    def __init__(
        self, backing: Path, mount: Path, *, volatile: bool = False, attr_timeout: float = 0.0
    ) -> None:
        self.backing = Path(backing)
        self.mount = Path(mount)
        self.volatile = volatile
        self.attr_timeout = attr_timeout
        self._proc: clizygote.Started | _Cold | None = None
        self._dir: str | None = None
        self._log_path: str | None = None
        self._socket = ""
        self.last_log = ""

    # -- lifecycle ---------------------------------------------------------------------
    def __enter__(self) -> FaultFS:
        if self._proc is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._proc is not None

    @property
    def pid(self) -> int | None:
        """The server process's id (None when not running)."""
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        """Start the server and return once the mount answers (or raise)."""
        if self._proc is not None:
            raise RuntimeError("already mounted")
        reason = unavailable_reason()
        if reason is not None:
            raise MountUnavailable(reason)
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mount.mkdir(parents=True, exist_ok=True)
        if is_mounted(self.mount):  # a leftover would look live before the server is
            _unmount(self.mount)
            if is_mounted(self.mount):
                raise MountError(f"{self.mount} is already a mountpoint")
        self._dir = tempfile.mkdtemp(prefix="faultfs-")  # short: AF_UNIX paths are short
        self._socket = os.path.join(self._dir, "control")
        self._log_path = os.path.join(self._dir, "server.log")
        args = [str(self.backing), str(self.mount), "--control", self._socket]
        if self.volatile:
            args.append("--volatile")
        if self.attr_timeout:
            args += ["--attr-timeout", str(self.attr_timeout)]
        self._proc = self._launch(args, self._log_path)
        deadline = time.monotonic() + _START_DEADLINE_S
        while not (os.path.ismount(self.mount) and os.path.exists(self._socket)):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                log_text = self.log()
                self._cleanup()
                refused = _refusal(log_text)
                if refused is not None:
                    raise MountUnavailable(f"the mount was refused: {refused}")
                raise MountError(f"faultfs did not come up at {self.mount}:\n{log_text}")
            time.sleep(0.005)  # polling the mount with a deadline, not waiting blind

    @staticmethod
    def _launch(args: list[str], log_path: str) -> clizygote.Started | _Cold:
        """``python -m faultfs.server ARGS``, its output to ``log_path``: forked
        from a warm server where it can be (tests/clizygote.py), else a new
        interpreter (an environment that changes how one starts: a test that
        puts libfuse 2 first on the loader's path)."""
        if clizygote.warm_ok(os.environ):
            null = os.open(os.devnull, os.O_RDONLY)
            log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            warm = clizygote.spawn_module("faultfs.server", args, env=os.environ, stdio=[null, log])
            if warm is not None:
                return warm
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PKG_PARENT, env.get("PYTHONPATH")) if p)
        with open(log_path, "wb") as log_file:
            return _Cold(
                subprocess.Popen(
                    [sys.executable, "-m", "faultfs.server", *args],
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    env=env,
                )
            )

    def stop(self) -> None:
        """Unmount (lazily if busy) and end the server; safe to call twice. A server
        whose mount was busy (a descriptor still open on it) is told to stop at once
        rather than waited for: whoever holds the descriptor gets ENOTCONN."""
        if self._proc is None:
            return
        try:
            if not _unmount(self.mount):
                self._proc.send_signal(signal.SIGTERM)
            if self._proc.wait(_STOP_DEADLINE_S) is None:
                self._proc.kill()
        finally:
            self._cleanup()

    def _cleanup(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
        if is_mounted(self.mount):
            _unmount(self.mount)
        if self._dir is not None:
            self.last_log = self.log()
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def log(self) -> str:
        """The server's output so far (warnings, tracebacks of failed operations)."""
        if self._log_path is None or not os.path.exists(self._log_path):
            return self.last_log
        with open(self._log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def remount(self, *, volatile: bool | None = None) -> None:
        """Stop (if running) and start again on the same directories."""
        self.stop()
        if volatile is not None:
            self.volatile = volatile
        self.start()

    def _req(self, cmd: str, **args: Any) -> Any:
        if self._proc is None:
            raise RuntimeError("faultfs is not mounted")
        return control.request(self._socket, cmd, **args)

    # -- faults ------------------------------------------------------------------------------
    def fail(
        self,
        op: str | Sequence[str],
        path: str = "**",
        errno: int = E.EIO,
        *,
        after_calls: int = 0,
        after_bytes: int | None = None,
        times: int | None = None,
        delay: float = 0.0,
    ) -> int:
        """Make ``op`` (a name, several, or "*") on paths matching ``path`` fail with
        ``errno``; returns the rule's id (for ``hits`` and ``remove``)."""
        ops = op if isinstance(op, str) else list(op)
        return int(
            self._req(
                "add_rule",
                ops=ops,
                path=path,
                errno=errno,
                delay=delay,
                after_calls=after_calls,
                after_bytes=after_bytes,
                times=times,
            )
        )

    def slow(
        self, op: str | Sequence[str], seconds: float, path: str = "**", *, times: int | None = None
    ) -> int:
        """Make ``op`` on matching paths take at least ``seconds`` longer."""
        ops = op if isinstance(op, str) else list(op)
        return int(self._req("add_rule", ops=ops, path=path, delay=seconds, times=times))

    def full(self, free_bytes: int | None, errno: int = E.ENOSPC) -> None:
        """The disk has ``free_bytes`` left from now on (None: as the backing says)."""
        self._req("full", free_bytes=free_bytes, errno=errno)

    def remove(self, rule_id: int) -> None:
        self._req("remove_rule", id=rule_id)

    def clear(self) -> None:
        """Every rule gone, full mode off (counts stay: ``reset_calls``)."""
        self._req("clear")

    def hits(self, rule_id: int) -> int:
        """How many times the rule has injected (failed or delayed a call)."""
        return int(self._req("rule", id=rule_id)["hits"])

    def rules(self) -> list[dict[str, Any]]:
        return list(self._req("rules"))

    # -- counts -------------------------------------------------------------------------------
    def calls(self, op: str, path: str = "**") -> int:
        """How many ``op`` calls reached the filesystem on paths matching ``path``
        (the mount root is "."; rename and link count under their first path)."""
        return int(self._req("calls", op=op, path=path))

    def call_log(self) -> dict[str, dict[str, int]]:
        """Every count: op -> path -> calls."""
        return dict(self._req("call_log"))

    def reset_calls(self) -> None:
        self._req("reset_calls")

    # -- volatile mode ---------------------------------------------------------------------
    def pending(self) -> dict[str, int]:
        """What a cut would roll back now: dirty files, dirty directories, trash."""
        return dict(self._req("pending"))

    def sync(self) -> None:
        """Make everything durable now (``sync(2)`` never reaches FUSE)."""
        self._req("sync")

    def cut(self) -> dict[str, Any]:
        """Power loss: stop serving (every call on the mount fails from now), roll the
        backing directory back to its durable state, unmount and end the server.
        Returns what was rolled back. ``remount()`` (or read ``backing``) after."""
        try:
            report = dict(self._req("cut"))
        finally:
            self.stop()
        return report

    def path(self, *parts: str) -> Path:
        """A path under the mountpoint."""
        return self.mount.joinpath(*parts)


class _Cold:
    """A server started as a new interpreter, answering as a warm one's
    ``clizygote.Started`` does."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self._proc = proc
        self.pid = proc.pid

    def poll(self) -> int | None:
        return self._proc.poll()

    def wait(self, timeout: float | None = None) -> int | None:
        try:
            return self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def send_signal(self, sig: int) -> None:
        self._proc.send_signal(sig)

    def kill(self) -> int:
        self._proc.kill()
        return self._proc.wait()


@contextmanager
def mounted(backing: Path, mount: Path, *, volatile: bool = False) -> Iterator[FaultFS]:
    """``with mounted(backing, mount) as fs: ...`` (same as ``with FaultFS(...)``)."""
    with FaultFS(backing, mount, volatile=volatile) as fs:
        yield fs
