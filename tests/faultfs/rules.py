"""Fault rules and call counts: which operation on which path fails, how, and when.

Owns the run-time fault table of one faultfs server (thread-safe; the FUSE worker
threads consult it, the control channel changes it):

- a *rule* matches operations (``op``: one name, several, or ``"*"``) on paths
  (``path``: a glob over the path relative to the mount; ``**`` spans directories,
  ``*`` and ``?`` stay within one segment, the mount root itself is ``"."``). An
  operation with two paths (``rename``, ``link``) matches if either does.
- a matching rule injects an errno (``errno``), a delay (``delay`` seconds, the
  operation then runs normally), or both; ``after_calls`` lets that many matching
  calls through first, ``after_bytes`` (writes only) lets that many bytes through
  first (the write that crosses the limit is cut short, as a filling disk does),
  ``times`` bounds how often the rule injects (``None``: forever).
- *full* mode: the filesystem has ``free_bytes`` left; writes that grow files are
  charged (overwrites inside a file's size are free, deletes give nothing back),
  the write that crosses the budget is short and the next fails with ``ENOSPC``
  (or the errno given); ``statvfs`` reports the budget as the free space.
- every operation is counted per (op, path), whether or not anything was injected.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

#: Every operation name a rule or a count can name (FUSE's names; ``create`` is
#: an open with ``O_CREAT`` that may make the file, and ``open`` names it too;
#: ``fsyncdir`` is an fsync of a directory).
OPS = frozenset(
    {
        "getattr",
        "readlink",
        "mknod",
        "mkdir",
        "unlink",
        "rmdir",
        "symlink",
        "rename",
        "link",
        "chmod",
        "chown",
        "truncate",
        "open",
        "create",
        "read",
        "write",
        "statfs",
        "flush",
        "release",
        "fsync",
        "opendir",
        "readdir",
        "releasedir",
        "fsyncdir",
        "utimens",
        "fallocate",
    }
)


def compile_glob(pattern: str) -> re.Pattern[str]:
    """A glob over relative paths as a regex: ``**/`` is zero or more directories,
    ``**`` anything, ``*`` and ``?`` anything within one segment, ``[...]`` a class."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and "]" in pattern[i + 2 :]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def check_ops(ops: str | list[str] | tuple[str, ...]) -> frozenset[str] | None:
    """``"*"`` -> None (every op); else the set of names, each checked against OPS."""
    names = [ops] if isinstance(ops, str) else list(ops)
    if "*" in names:
        return None
    unknown = sorted(set(names) - OPS)
    if unknown or not names:
        raise ValueError(f"unknown op(s) {unknown or names}; known: {sorted(OPS)}")
    return frozenset(names)


def op_matches(ops: frozenset[str] | None, op: str) -> bool:
    """Whether a call of ``op`` is one of ``ops``; ``open`` also names ``create``
    (every open, whether it makes the file or not)."""
    return ops is None or op in ops or (op == "create" and "open" in ops)


@dataclass
class Rule:
    id: int
    ops: frozenset[str] | None
    glob: str
    errno: int | None
    delay: float
    after_calls: int
    after_bytes: int | None
    times: int | None
    pattern: re.Pattern[str] = field(init=False, repr=False)
    calls_seen: int = 0
    bytes_seen: int = 0
    hits: int = 0

    def __post_init__(self) -> None:
        self.pattern = compile_glob(self.glob)

    def matches(self, op: str, paths: tuple[str, ...]) -> bool:
        if not op_matches(self.ops, op):
            return False
        return any(self.pattern.match(p) for p in paths)

    @property
    def spent(self) -> bool:
        return self.times is not None and self.hits >= self.times

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "ops": sorted(self.ops) if self.ops is not None else "*",
            "path": self.glob,
            "errno": self.errno,
            "delay": self.delay,
            "after_calls": self.after_calls,
            "after_bytes": self.after_bytes,
            "times": self.times,
            "hits": self.hits,
            "calls_seen": self.calls_seen,
            "bytes_seen": self.bytes_seen,
        }


@dataclass(frozen=True)
class Verdict:
    """What to do with one call: sleep ``delay``, then fail with ``errno`` or run;
    a write runs with at most ``allow`` bytes (None: all of them)."""

    delay: float = 0.0
    errno: int | None = None
    allow: int | None = None


PASS = Verdict()


class Faults:
    """The rule table, the full-disk budget and the call counts of one server."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[Rule] = []
        self._next_id = 1
        self._counts: Counter[tuple[str, str]] = Counter()
        self.full_left: int | None = None
        self.full_errno = 28  # ENOSPC

    # -- the control side -------------------------------------------------------
    def add(
        self,
        ops: str | list[str],
        path: str = "**",
        *,
        errno: int | None = None,
        delay: float = 0.0,
        after_calls: int = 0,
        after_bytes: int | None = None,
        times: int | None = None,
    ) -> int:
        opset = check_ops(ops)
        if errno is None and delay <= 0:
            raise ValueError("a rule needs an errno, a delay, or both")
        if after_bytes is not None and (opset is None or opset != {"write"}):
            raise ValueError("after_bytes applies to op='write' only")
        with self._lock:
            rule = Rule(self._next_id, opset, path, errno, delay, after_calls, after_bytes, times)
            self._next_id += 1
            self._rules.append(rule)
            return rule.id

    def remove(self, rule_id: int) -> None:
        with self._lock:
            self._rules = [r for r in self._rules if r.id != rule_id]

    def clear(self) -> None:
        with self._lock:
            self._rules = []
            self.full_left = None

    def rules(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r.describe() for r in self._rules]

    def rule(self, rule_id: int) -> dict[str, Any]:
        with self._lock:
            for r in self._rules:
                if r.id == rule_id:
                    return r.describe()
        raise KeyError(f"no rule {rule_id}")

    def set_full(self, free_bytes: int | None, errno: int = 28) -> None:
        with self._lock:
            self.full_left = free_bytes
            self.full_errno = errno

    def calls(self, op: str, path: str = "**") -> int:
        ops = check_ops(op)
        pattern = compile_glob(path)
        with self._lock:
            return sum(
                n for (o, p), n in self._counts.items() if op_matches(ops, o) and pattern.match(p)
            )

    def call_log(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        with self._lock:
            for (o, p), n in sorted(self._counts.items()):
                out.setdefault(o, {})[p] = n
        return out

    def reset_calls(self) -> None:
        with self._lock:
            self._counts.clear()

    # -- the serving side ------------------------------------------------------------
    def count(self, op: str, path: str) -> None:
        """Count a call no rule may touch (``release``: the kernel ignores its result)."""
        with self._lock:
            self._counts[(op, path)] += 1

    def check(self, op: str, paths: tuple[str, ...], nbytes: int = 0) -> Verdict:
        """Count the call and decide its fate. ``nbytes``: a write's length."""
        with self._lock:
            for p in paths[:1]:
                self._counts[(op, p)] += 1
            if not self._rules:
                return PASS
            delay = 0.0
            allow: int | None = None
            for rule in self._rules:
                if rule.spent or not rule.matches(op, paths):
                    continue
                rule.calls_seen += 1
                if rule.calls_seen <= rule.after_calls:
                    continue
                if rule.after_bytes is not None:
                    room = rule.after_bytes - rule.bytes_seen
                    if nbytes <= room:
                        rule.bytes_seen += nbytes
                        continue
                    if room > 0:  # the crossing write is cut short; the next one fails
                        rule.bytes_seen += room
                        allow = room if allow is None else min(allow, room)
                        continue
                rule.hits += 1
                delay += rule.delay
                if rule.errno is not None:
                    return Verdict(delay, rule.errno)
            if delay or allow is not None:
                return Verdict(delay, None, allow)
            return PASS

    def charge_growth(self, growth: int) -> int | None:
        """Full mode: charge ``growth`` new bytes; the growth granted (None: not full)."""
        with self._lock:
            left = self.full_left
            if left is None:
                return None
            granted = min(growth, left)
            self.full_left = left - granted
            return granted
