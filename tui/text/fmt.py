"""Numbers and times as an operator reads them, in as few columns as possible;
how long a list of text runs before it is cut (``LIST_MAX``); the remote tier's
where and what waits for it; names made safe to show (``shown``).

Invariant: every name and line the CLI and the console show passes through
``shown`` (one line) or ``terminal_text`` (lines): a file's name is the
operator's data, never a terminal's instruction.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from coldkeep.core.base.configprices import usd
from coldkeep.core.base.given import parse_time
from coldkeep.core.base.space import human_bytes

if TYPE_CHECKING:
    from coldkeep.core.base.configremote import RemoteSettings
    from coldkeep.core.ops.status import ClassShare, ColdState
    from coldkeep.core.remote.months import PendingEvents

human = human_bytes  # ``512 B``, ``1.5 KiB``, ``3.2 GiB``: said the same in the core
# Lists longer than this are cut in the text (--json has them all).
LIST_MAX = 20


def cut(lines: list[str], indent: str = "  ") -> list[str]:
    """The first ``LIST_MAX`` of ``lines``, and a line saying how many more
    there are (``indent`` before it, as before each of them)."""
    if len(lines) <= LIST_MAX:
        return lines
    more = f"{indent}… and {len(lines) - LIST_MAX} more (--json lists them all)"
    return [*lines[:LIST_MAX], more]


# What a terminal takes for an instruction or a line's end, or cannot encode:
# C0 controls, DEL, C1 controls, the undecodable bytes of a name (lone
# surrogates, from os.fsdecode), line and paragraph separators, and the
# direction marks that reorder what follows them.
_MARKS = "\u2028\u2029\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069"
_UNSAFE = re.compile(f"[\x00-\x1f\x7f-\x9f\ud800-\udfff{_MARKS}]")
_UNSAFE_KEEPING_LINES = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff{_MARKS}]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match[0]
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8, as os.fsdecode gives it
        return f"\\x{code - 0xDC00:02x}"
    if char in _NAMED:
        return _NAMED[char]
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def shown(name: str) -> str:
    """``name`` on one line of a terminal: every control character (ESC, tab,
    newline, DEL, C1), every byte that is not UTF-8 and every direction mark
    written as an escape (``\\x1b``, ``\\xe9``, ``\\u202e``); ordinary text,
    any script's, left alone. Rich markup is not read from it either: give the
    result to Rich as ``Text``, never as markup."""
    return _UNSAFE.sub(_escape, name)


def terminal_text(text: str) -> str:
    """Lines for a terminal: ``shown`` on each, its newlines and tabs kept."""
    return _UNSAFE_KEEPING_LINES.sub(_escape, text)


def plural(n: int, word: str, words: str | None = None) -> str:
    """``n`` and its noun, singular for one: ``1 file``, ``2 files``, ``0 files``
    (``words``: a plural that is not ``word`` + s, e.g. ``entry``/``entries``)."""
    return f"{n} {word if n == 1 else words or word + 's'}"


def age(seconds: float) -> str:
    """A duration: ``45s``, ``12m``, ``5h``, ``3d``."""
    for size, unit in ((86_400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            return f"{seconds // size:.0f}{unit}"
    return f"{max(seconds, 0):.0f}s"


def short_path(path: Path, base: Path) -> str:
    """``path`` relative to ``base`` (the config's folder) when it is inside it."""
    return str(path.relative_to(base)) if path.is_relative_to(base) else str(path)


def clock_time(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ms / 1000))


def day(ms: int) -> str:
    """The local date of ``ms`` since the epoch: ``2026-12-01``."""
    return time.strftime("%Y-%m-%d", time.localtime(ms / 1000))


def remote_where(remote: RemoteSettings, base: Path) -> str:
    """Where this site's objects go: a folder (``file://``) as a path, relative
    to ``base`` when inside it, like the header's roots; else the URL."""
    folder = remote.folder
    if folder is not None:
        return short_path(folder / remote.site, base) + "/"
    return f"{remote.url}/{remote.site}"


def event_rows(pending: PendingEvents, width: int = 0) -> str:
    """Archived event rows no month snapshot holds: ``1234 event rows in 2 months``
    (the count right-aligned in ``width`` columns)."""
    rows = "event row" if pending.rows == 1 else "event rows"
    return f"{pending.rows:>{width}} {rows} in {plural(len(pending.months), 'month')}"


def parse_day(text: str) -> int:
    """A local ``YYYY-MM-DD[THH:MM]`` as ms since the epoch; a ValueError says
    what to write."""
    at = parse_time(text)
    if at is None:
        raise ValueError(f"{text!r}: use YYYY-MM-DD or YYYY-MM-DDTHH:MM")
    return at


def classes_said(classes: Sequence[ClassShare]) -> str:
    """What each S3 storage class holds and costs a month: ``DEEP_ARCHIVE 1.2
    GiB ~0.01 USD, STANDARD 3.0 MiB ~under 0.01 USD``."""
    return ", ".join(f"{c.storage_class} {human(c.bytes)} ~{usd(c.usd_a_month)}" for c in classes)


def thaws_said(cold: ColdState, now_ms: int) -> str:
    """The thaws asked and the restores waiting for them, with the oldest's age
    and its tier's usual wait: ``3 thaws asked (the oldest 2h ago; usually up to
    12 hours), 1 restore waiting``; empty when there are none."""
    if not cold.thaws_asked and not cold.restores_waiting:
        return ""
    said = plural(cold.thaws_asked, "thaw") + " asked"
    if cold.oldest_asked_at is not None:
        usually = f"; usually {cold.oldest_wait}" if cold.oldest_wait else ""
        said += f" (the oldest {age((now_ms - cold.oldest_asked_at) / 1000)} ago{usually})"
    return f"{said}, {plural(cold.restores_waiting, 'restore')} waiting"


def adopted(recovery: dict[str, int]) -> str:
    """What recovery entered besides the files the pass archived: a planted or
    crashed-out gzip whose live source it matched (its source is one of the
    files ``plan`` counted eligible, so a pass archives that many fewer)."""
    n = recovery.get("orphans_adopted", 0)
    return f" (+{n} adopted by recovery)" if n else ""
