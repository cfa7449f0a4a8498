"""This process's identity as a record can keep it, and whether the process a
record names still runs: for rows that say "running" and must be settled once
their process is gone (a job run whose daemon was SIGKILLed).

Invariants:
- A pid alone is not an identity: pids are reused. The identity is the host,
  the boot (``/proc/sys/kernel/random/boot_id``), the pid and the process's start
  time in clock ticks since that boot; a process with the same pid but another
  start time is another process.
- ``gone`` says True only when it knows: a process of another host (shared
  storage) or an identity it cannot read is never declared dead.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
_PROC_STAT = Path("/proc/self/stat")  # without /proc, no process can be looked up


def _boot_id() -> str:
    try:
        return _BOOT_ID.read_text(encoding="ascii").strip()
    except OSError:  # not Linux, or /proc not mounted: the boot cannot be told apart
        return "-"


def _start_ticks(pid: int) -> int | None:
    """The process's start time (field 22 of /proc/PID/stat), None if it has
    ended (a zombie, killed and not yet reaped, has ended too)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces or ')'.
    fields = stat[stat.rindex(b")") + 2 :].split()
    return None if fields[0] in (b"Z", b"X") else int(fields[19])


def this_process() -> str:
    """``host boot_id pid start``: what ``gone`` checks."""
    pid = os.getpid()
    return f"{socket.gethostname()} {_boot_id()} {pid} {_start_ticks(pid) or 0}"


def gone(identity: str) -> bool:
    """True when the process ``identity`` names has certainly ended."""
    parts = identity.rsplit(" ", 3)
    if len(parts) != 4 or not parts[2].isdigit() or not parts[3].isdigit():
        return False
    host, boot, pid, start = parts[0], parts[1], int(parts[2]), int(parts[3])
    if host != socket.gethostname() or not _PROC_STAT.exists():
        return False
    now = _boot_id()
    if "-" not in (boot, now) and boot != now:
        return True  # the host rebooted since: every process of that boot ended
    ticks = _start_ticks(pid)
    return ticks is None or start not in (0, ticks)  # 0: its start was not known
