"""One ``coldkeep doctor`` check's result (``Finding``: ok, warn or fail, what was
found, what to do), the one type every family of checks returns.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

Level = Literal["ok", "warn", "fail"]


@dataclass(frozen=True)
class Finding:
    """One check's result. ``check`` is a stable name (the JSON key an operator's
    script matches on); ``fix`` is empty when there is nothing to do."""

    check: str
    level: Level
    found: str
    fix: str = ""

    def to_dict(self) -> dict[str, str]:
        return asdict(self)
