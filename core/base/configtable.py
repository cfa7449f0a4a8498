"""One TOML table of ``coldkeep.toml`` read key by key (``Table``): each key taken
once and checked for its type and range, a key left over refused as unknown (with
the likely one it misspells); ``ConfigError``, the one-line error naming the file,
the key, what is wrong and the fix; the largest numbers a config may hold.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from .errors import UsageError
from .globs import GlobError, compile_globs

# The largest numbers a config may hold: day counts up to a century, seconds up
# to a year, integers up to 2**53 (exact as floats, far from SQLite's int64 after
# any arithmetic on them). Larger ones (and nan, inf) are typos or tests of the
# parser, and refused at load time: converted to milliseconds or dates later they
# overflow, after something was written.
MAX_DAYS = 36_500.0


MAX_SECONDS = 365 * 86_400.0


MAX_INTEGER = 2**53


class ConfigError(UsageError):
    """A config that cannot be used; ``str()`` is the one-line message for the operator."""

    def __init__(self, file: Path, key: str | None, problem: str, fix: str) -> None:
        where = f"{file}: {key}" if key else str(file)
        super().__init__(f"{where}: {problem} ({fix})")
        self.file = file
        self.key = key


def _plain(x: float) -> str:
    """A bound as an operator writes it: 36500, 0.1, 31536000."""
    return str(int(x)) if x == int(x) else f"{x:g}"


class Table:
    """One TOML table being read: each key taken once, leftovers are unknown keys."""

    def __init__(self, file: Path, prefix: str, data: Mapping[str, Any]) -> None:
        self.file = file
        self.prefix = prefix
        self.data = data
        self.taken: set[str] = set()

    def key(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def take(self, name: str) -> Any:
        self.taken.add(name)
        return self.data.get(name)

    def _wrong(self, name: str, value: Any, want: str) -> ConfigError:
        return ConfigError(
            self.file,
            self.key(name),
            f"expected {want}, got {type(value).__name__} {value!r}",
            f"write {want}",
        )

    def table(self, name: str) -> Table:
        value = self.take(name)
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise self._wrong(name, value, f"a [{self.key(name)}] table")
        return Table(self.file, f"{self.key(name)}.", value)

    def string(self, name: str, default: str | None) -> str | None:
        value = self.take(name)
        if value is None:
            return default
        if not isinstance(value, str) or not value:
            raise self._wrong(name, value, "a non-empty string")
        return value

    def identifier(self, name: str, default: str) -> str:
        value = self.string(name, default)
        assert value is not None
        if not value.replace("_", "a").isalnum() or value[0].isdigit():
            raise ConfigError(
                self.file,
                self.key(name),
                f"{value!r} is not a plain SQL identifier",
                "use letters, digits and _",
            )
        return value

    def choice(self, name: str, default: Any, options: tuple[Any, ...]) -> Any:
        value = self.take(name)
        if value is None:
            return default
        if value not in options:
            shown = ", ".join(repr(o) for o in options)
            raise ConfigError(
                self.file, self.key(name), f"{value!r} is not one of {shown}", "pick one of them"
            )
        return value

    def number(
        self, name: str, default: float, *, minimum: float, maximum: float = MAX_SECONDS
    ) -> float:
        value = self.take(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self._wrong(name, value, "a number")
        if not minimum <= value <= maximum:  # nan compares false: refused here too
            raise self._out_of_range(name, value, minimum, maximum)
        return float(value)

    def integer(self, name: str, default: int, *, minimum: int, maximum: int = MAX_INTEGER) -> int:
        value = self.take(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._wrong(name, value, "an integer")
        if not minimum <= value <= maximum:
            raise self._out_of_range(name, value, minimum, maximum)
        return value

    def _out_of_range(self, name: str, value: float, lo: float, hi: float) -> ConfigError:
        said = f"below {_plain(lo)}" if value < lo else "not a number"
        said = f"above {_plain(hi)}" if value > hi else said
        return ConfigError(
            self.file, self.key(name), f"{value} is {said}", f"use {_plain(lo)} to {_plain(hi)}"
        )

    def boolean(self, name: str, default: bool) -> bool:
        value = self.take(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self._wrong(name, value, "true or false")
        return value

    def strings(self, name: str, default: tuple[str, ...]) -> tuple[str, ...]:
        value = self.take(name)
        if value is None:
            return default
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self._wrong(name, value, "a list of non-empty strings")
        return tuple(value)

    def globs(self, name: str, default: tuple[str, ...]) -> tuple[str, ...]:
        patterns = self.strings(name, default)
        try:
            compile_globs(patterns)
        except GlobError as err:
            raise ConfigError(
                self.file, self.key(name), str(err), "write globs relative to live_root"
            ) from None
        return patterns

    def path(
        self,
        name: str,
        base: Path,
        *,
        required: bool = False,
        want: Literal["dir", "file", "creatable_dir"],
    ) -> Path | None:
        raw = self.string(name, None)
        if raw is None:
            if required:
                raise ConfigError(
                    self.file, self.key(name), "is required", f'add {self.key(name)} = "<path>"'
                )
            return None
        if "\0" in raw:  # the OS cannot take it; refused here, not by a stat deep inside
            raise ConfigError(
                self.file, self.key(name), f"{raw!r} contains a NUL byte", "write a plain path"
            )
        path = Path(raw).expanduser()
        path = path if path.is_absolute() else base / path
        path = Path(os.path.normpath(path))
        if want == "creatable_dir" and not path.exists():
            if path.parent.is_dir():
                return path  # created on first use
            want = "dir"
        ok = path.is_dir() if want in ("dir", "creatable_dir") else path.is_file()
        if not ok:
            what = "directory" if want != "file" else "file"
            problem = f"{path} is not a {what}" if path.exists() else f"{path} does not exist"
            fix = (
                f"create the {what}"
                if Path(raw).is_absolute()
                else f"create the {what}; relative paths are relative to {self.file.parent}"
            )
            raise ConfigError(self.file, self.key(name), problem, fix)
        return path

    def done(self) -> None:
        unknown = sorted(set(self.data) - self.taken)
        if unknown:
            name = unknown[0]
            close = difflib.get_close_matches(name, sorted(self.taken), n=1)
            fix = f"did you mean {self.key(close[0])}?" if close else "remove it"
            raise ConfigError(self.file, self.key(name), "unknown key", fix)
