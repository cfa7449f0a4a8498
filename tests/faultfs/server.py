"""The faultfs server process: ``python -m faultfs.server BACKING MOUNT --control SOCKET
[--volatile] [--allow-other]``.

Owns the process: it builds the fault table, the (optional) volatile journal and
the passthrough, serves the control socket, mounts and serves FUSE until
unmounted, and on a clean end (no cut) commits the volatile state. Run it with
``tests/`` on ``PYTHONPATH``; ``faultfs.mount.FaultFS`` does all of that for a test.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import shutil
import signal
import subprocess
import sys
from typing import Any

from coldkeep.core.ops import libfuse

from .control import ControlServer
from .rules import Faults
from .volatile import HIDDEN, Volatile

#: How the server's log says libfuse 3 cannot be loaded (the client skips on it).
NO_LIBFUSE3 = "faultfs: cannot load libfuse 3: "


def _dispatcher(faults: Faults, ops: Any, vol: Volatile | None) -> Any:
    def dispatch(req: dict[str, Any]) -> Any:
        cmd = req.pop("cmd", None)
        if cmd == "ping":
            return {"pid": os.getpid(), "volatile": vol is not None}
        if cmd == "add_rule":
            return faults.add(**req)
        if cmd == "remove_rule":
            faults.remove(int(req["id"]))
            return None
        if cmd == "rule":
            return faults.rule(int(req["id"]))
        if cmd == "rules":
            return faults.rules()
        if cmd == "clear":
            faults.clear()
            return None
        if cmd == "full":
            faults.set_full(req.get("free_bytes"), int(req.get("errno", 28)))
            return None
        if cmd == "calls":
            return faults.calls(req["op"], req.get("path", "**"))
        if cmd == "call_log":
            return faults.call_log()
        if cmd == "reset_calls":
            faults.reset_calls()
            return None
        if cmd in ("pending", "sync"):
            if vol is None:
                raise ValueError(f"{cmd} needs a volatile mount")
            if cmd == "sync":
                vol.sync_all()
            return vol.pending()
        if cmd == "cut":
            return ops.cut()
        raise ValueError(f"unknown command {cmd!r}")

    return dispatch


def _unmount_when_dead(mount: str) -> None:
    """Fork a watcher that unmounts ``mount`` once this server has died and left it
    dead. libfuse's ``auto_unmount`` does the same through fusermount3, but
    fusermount3 3.14 opens the mountpoint to check it is dead and gives up when the
    open fails with ECONNABORTED (the open raced the connection's teardown): under
    load, about one SIGKILLed server in twenty left its mount behind. The watcher
    holds no descriptor of the mount, only a pipe's read end: it gets EOF when
    the server's last descriptor goes, and unmounts only a mountpoint whose
    connection answers ENOTCONN or ECONNABORTED: a live server mounted there
    since keeps its mount."""
    read_end, write_end = os.pipe()
    if os.fork() != 0:
        os.close(read_end)  # the server keeps the write end until it dies
        return
    status = 1
    try:
        os.close(write_end)
        os.setsid()  # a signal to the server's process group spares the watcher
        while os.read(read_end, 1):
            pass
        try:
            os.close(os.open(mount, os.O_RDONLY))  # an open asks the server, if mounted
        except OSError as exc:  # only a dead FUSE connection answers these
            if exc.errno in (errno.ENOTCONN, errno.ECONNABORTED):
                subprocess.run(["fusermount3", "-u", "-z", mount], check=False)
        status = 0
    except OSError as exc:
        print(f"faultfs: the unmount watcher of {mount} failed: {exc}", file=sys.stderr)
    finally:
        os._exit(status)  # a forked child never returns into the server's code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m faultfs.server", description=__doc__)
    parser.add_argument("backing", help="the real directory served")
    parser.add_argument("mount", help="the (empty) mountpoint")
    parser.add_argument("--control", required=True, help="the control socket's path")
    parser.add_argument("--volatile", action="store_true", help="keep the power-cut journal")
    parser.add_argument("--allow-other", action="store_true", help="let other users in")
    parser.add_argument(
        "--attr-timeout", type=float, default=0.0, help="seconds the kernel caches attributes"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="faultfs %(levelname)s %(message)s"
    )
    os.umask(0)  # the kernel already applied the caller's umask to every mode
    backing = os.path.abspath(args.backing)
    vol = Volatile(backing) if args.volatile else None
    if vol is None:
        shutil.rmtree(os.path.join(backing, HIDDEN), ignore_errors=True)

    try:
        libfuse.mfusepy()  # before binding imports it: mfusepy loads libfuse at import
    except libfuse.NoLibfuse3 as exc:
        print(f"{NO_LIBFUSE3}{exc}", file=sys.stderr)
        return 1
    from .binding import serve
    from .passthrough import Passthrough

    mount = os.path.abspath(args.mount)
    _unmount_when_dead(mount)  # forked before any thread or descriptor it must not hold
    faults = Faults()
    ops = Passthrough(backing, faults, vol)
    control = ControlServer(args.control, _dispatcher(faults, ops, vol))
    control.start()
    status = 0
    try:
        serve(
            ops,
            mount,
            allow_other=args.allow_other,
            attr_timeout=args.attr_timeout,
        )
    except RuntimeError as exc:  # mfusepy: libfuse returned non-zero (refused, or a signal)
        status = int(exc.args[0]) if exc.args and isinstance(exc.args[0], int) else 1
        print(f"faultfs: libfuse ended with status {status}", file=sys.stderr)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # let the cleanup below finish
        control.close()
        if vol is not None and not ops.gate.frozen:
            vol.finish()  # a clean end: what is there now is what stays
    return status


if __name__ == "__main__":
    sys.exit(main())
