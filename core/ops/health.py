"""A fleet site's health: ok, warn, critical or silent, with the reasons in
words, judged from its newest believable heartbeat (remote/heartbeat.py) and
its manifest snapshot, by the bucket's clock.

    critical  no usable snapshot; a heartbeat that is not its own; archive
              files or remote copies that failed verify; a job whose last run
              failed
    silent    no heartbeat for twice its interval (26 hours at most), or none
    warn      a backlog standing for ``backlog_days``; files quarantined; a
              heartbeat dated in the bucket's future (its host's clock)
    ok        none of these

Sites sort worst first (critical, silent, warn, ok), then the longest quiet
first: the sick hosts are at the top of a thousand. The two numbers are the
operator's (``[health]`` in ``~/.config/coldkeep/fleet.toml``: ``load_rules``).
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..base.errors import UsageError
from ..base.userdirs import user_dir
from ..remote.bucketclock import SKEW_MS
from ..remote.heartbeat import Beat, Heard

State = Literal["critical", "silent", "warn", "ok"]
STATES: tuple[State, ...] = ("critical", "silent", "warn", "ok")
#: Marks that say a state without colour (NO_COLOR, a log, a pager).
MARKS: dict[State, str] = {"critical": "!!", "silent": "??", "warn": "! ", "ok": "ok"}
NO_BEAT = "no heartbeat"
HOUR_MS = 3_600_000


@dataclass(frozen=True)
class HealthRules:
    silent_cap_h: float = 26.0  # silent after twice the interval, or this, the shorter
    backlog_days: float = 3.0


# The rules file's keys ([health]) and the fields they set, each with its least.
RULE_KEYS = {"silent_after_hours": ("silent_cap_h", 0.1), "backlog_days": ("backlog_days", 0.0)}


def rules_path() -> Path:
    """Where the operator's fleet rules are read from when no file is named:
    ``$XDG_CONFIG_HOME/coldkeep/fleet.toml`` (~/.config by default)."""
    return user_dir("config") / "fleet.toml"


def load_rules(path: Path | None = None) -> HealthRules:
    """The health rules a fleet file's ``[health]`` table sets (``path``, or
    ``rules_path()`` where that exists; the defaults for what it leaves out).
    A file named that cannot be read, a key it does not know or a value out
    of range is refused in one line naming the file and the key."""
    named = path is not None
    path = path or rules_path()
    try:
        doc = tomllib.loads(path.read_text())
    except FileNotFoundError:
        if named:
            raise UsageError(f"{path}: no such file (the fleet's health rules)") from None
        return HealthRules()
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise UsageError(f"{path}: cannot read the fleet's health rules: {err}") from None
    table = doc.get("health", {})
    if not isinstance(table, dict):
        raise UsageError(f"{path}: health = {table!r}: write the rules as a [health] table")
    unknown = sorted(set(doc) - {"health"}) + [f"health.{k}" for k in table if k not in RULE_KEYS]
    if unknown:
        known = ", ".join(f"health.{k}" for k in RULE_KEYS)
        raise UsageError(f"{path}: {', '.join(unknown)}: not a rule (the rules: {known})")
    rules: dict[str, float] = {}
    for key, value in table.items():
        field, least = RULE_KEYS[key]
        if isinstance(value, bool) or not isinstance(value, int | float) or value < least:
            raise UsageError(f"{path}: health.{key} = {value!r}: give a number, at least {least}")
        rules[field] = float(value)
    return HealthRules(**rules)


@dataclass(frozen=True)
class Health:
    state: State
    reasons: tuple[str, ...]
    quiet_ms: int | None  # since its newest believable beat (None: none)

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons) or "ok"

    def sort_key(self) -> tuple[int, int]:
        """Worst first, then the longest quiet (by the minute: sites beating
        alike keep their order, by name, from one look to the next)."""
        quiet = self.quiet_ms // 60_000 if self.quiet_ms is not None else 1 << 62
        return STATES.index(self.state), -quiet


def tally(healths: Iterable[Health]) -> dict[State, int]:
    """How many are in each state, worst first (every state, 0 for none)."""
    states = [h.state for h in healths]
    return {state: states.count(state) for state in STATES}


def span(ms: int) -> str:
    """A duration in words: ``3d 4h``, ``5h 12m``, ``40m``."""
    minutes = max(ms, 0) // 60_000
    days, hours, mins = minutes // 1440, minutes // 60 % 24, minutes % 60
    if days:
        return f"{days}d {hours}h" if hours else f"{days}d"
    return f"{hours}h {mins}m" if hours else f"{mins}m"


def judge(
    problem: str | None, heard: Heard | None, now: int, rules: HealthRules = HealthRules()
) -> Health:
    """The health of a site whose snapshot is unusable for ``problem`` (None:
    usable) and whose newest beat is ``heard``, at the bucket's ``now``."""
    found: dict[State, list[str]] = {s: [] for s in STATES}
    if problem is not None:
        found["critical"].append(f"no usable snapshot: {problem}")
    beat = heard.beat if heard is not None else None
    quiet = None
    if beat is None or heard is None or heard.at is None:
        why = heard.problem if heard is not None and heard.problem else NO_BEAT
        found["silent" if why.startswith(NO_BEAT) else "critical"].append(why)
    else:
        quiet = now - heard.at
        limit = min(2 * beat.interval_s * 1000, int(rules.silent_cap_h * HOUR_MS))
        if quiet > limit:
            found["silent"].append(
                f"no heartbeat for {span(quiet)} (due every {span(beat.interval_s * 1000)})"
            )
        if beat.at > now + SKEW_MS:
            found["warn"].append(
                f"its heartbeat is dated {span(beat.at - now)} ahead of the bucket"
            )
        _said(beat, now, rules, found)
    state: State = next((s for s in STATES[:-1] if found[s]), "ok")
    return Health(state, tuple(r for s in STATES for r in found[s]), quiet)


def _said(beat: Beat, now: int, rules: HealthRules, found: dict[State, list[str]]) -> None:
    """What the beat itself says is wrong, by how bad it is."""
    if beat.verify_failed:
        found["critical"].append(f"{beat.verify_failed} archive files failed verify")
    if beat.remote_verify_failed:
        found["critical"].append(f"{beat.remote_verify_failed} remote copies failed verify")
    for job, error in sorted(beat.job_failures.items()):
        found["critical"].append(f"{job} failed: {error}")
    standing = now - beat.backlog_since if beat.backlog_since is not None else 0
    if standing > rules.backlog_days * 86_400_000:
        parts = [f"{beat.backlog_files:,} files"] if beat.backlog_files else []
        parts += [f"{beat.backlog_rows:,} rows"] if beat.backlog_rows else []
        backlog = " and ".join(parts) or "a backlog"
        found["warn"].append(f"{backlog} waiting for {span(standing)}")
    if beat.file_problems:
        found["warn"].append(f"{beat.file_problems} files quarantined")
