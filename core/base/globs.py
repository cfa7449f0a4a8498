"""The one glob engine: include/exclude, legal holds' path globs and restore's
``--path`` all match relative paths through it.

``*`` and ``?`` never cross a ``/``; a ``**`` segment matches zero or more whole
segments (``**/*.jsonl`` matches ``a.jsonl`` and ``u/x/a.jsonl``); ``[abc]`` and
``[!abc]`` are character classes (never matching ``/``). A pattern is anchored at
``live_root``: ``*.log`` matches only files directly in it. Patterns are compiled
once into one regex.

Invariants:
- Names are bytes: every character but ``/`` is matched like any other,
  newline, control characters and a name's undecodable bytes (the lone
  surrogates ``os.fsdecode`` gives them) included. The regexes are compiled
  with DOTALL and their classes exclude only ``/``.
- Nothing else in coldkeep compiles a glob: ``compile_glob`` and
  ``compile_globs`` are the only ways in.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from .errors import UsageError

# Without DOTALL a trailing ``**`` (``.*``) stops at a newline: a name with one
# would escape every glob.
_FLAGS = re.DOTALL


class GlobError(UsageError, ValueError):
    """A pattern that cannot be compiled; the message names it."""


def _char_class(body: str) -> str:
    """A glob's ``[...]`` body as a regex class: every character literal but a
    range's ``-`` and a leading ``!``; never matching ``/``."""
    negate = body.startswith("!")
    if negate:
        body = body[1:]
    out: list[str] = []
    for i, c in enumerate(body):
        is_range = c == "-" and 0 < i < len(body) - 1
        out.append("-" if is_range else re.escape(c))
    inner = "".join(out)
    return f"(?!/)[^{inner}]" if negate else f"(?!/)[{inner}]"


def _segment(seg: str, pattern: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(seg):
        c = seg[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = seg.find("]", i + 2 if seg[i + 1 : i + 2] in ("!", "]") else i + 1)
            if end < 0:
                raise GlobError(f"unclosed [ in glob {pattern!r}")
            out.append(_char_class(seg[i + 1 : end]))
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def glob_to_regex(pattern: str) -> str:
    """The regex (without anchors) for one glob; compile it with ``compile_glob``."""
    if not pattern or pattern.startswith("/"):
        raise GlobError(f"glob {pattern!r} must be a non-empty path relative to live_root")
    segs = pattern.split("/")
    if ".." in segs:
        raise GlobError(f"glob {pattern!r} must not contain '..'")
    out = ""
    for n, seg in enumerate(segs):
        last = n == len(segs) - 1
        if seg == "**":
            out += ".*" if last else "(?:[^/]+/)*"
        elif seg == "":
            raise GlobError(f"glob {pattern!r} has an empty segment")
        else:
            out += _segment(seg, pattern) + ("" if last else "/")
    return out


@functools.lru_cache(maxsize=256)
def compile_glob(pattern: str) -> re.Pattern[str]:
    """One glob, compiled once (use ``fullmatch``)."""
    return re.compile(glob_to_regex(pattern), _FLAGS)


def compile_globs(patterns: Iterable[str]) -> re.Pattern[str]:
    """One regex matching a relative path when any pattern does (never, if none)."""
    parts = [glob_to_regex(p) for p in patterns]
    if not parts:
        return re.compile(r"(?!)")
    return re.compile("|".join(f"(?:{p})" for p in parts), _FLAGS)


class PathFilter:
    """``include`` minus ``exclude``, on ``/``-separated relative paths."""

    def __init__(self, include: Iterable[str], exclude: Iterable[str]) -> None:
        self._include = compile_globs(include)
        self._exclude = compile_globs(exclude)

    def __call__(self, relpath: str) -> bool:
        return bool(self._include.fullmatch(relpath)) and not self._exclude.fullmatch(relpath)
