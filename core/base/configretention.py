"""``[retention]``: how long archived data is kept (files from their mtime, event
months from their end, and files per unit); a key left out keeps it for ever.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .configtable import MAX_DAYS, Table


@dataclass(frozen=True)
class RetentionSettings:
    """How long archived data is kept; None keeps it for ever."""

    files_days: float | None = None  # from each file's mtime
    events_days: float | None = None  # from the end of each event month
    units: Mapping[str, float] = field(default_factory=dict)  # files_days per unit

    @property
    def configured(self) -> bool:
        return self.files_days is not None or self.events_days is not None or bool(self.units)

    def files_days_for(self, unit: str) -> float | None:
        return self.units.get(unit, self.files_days)


def read_retention(t: Table) -> RetentionSettings:
    def days(table: Table, name: str) -> float | None:
        if name not in table.data:
            table.taken.add(name)
            return None
        return table.number(name, 0.0, minimum=1, maximum=MAX_DAYS)

    files_days = days(t, "files_days")
    events_days = days(t, "events_days")
    u = t.table("units")
    units = {}
    for unit in sorted(u.data):
        value = days(u, unit)
        assert value is not None
        units[unit] = value
    u.done()
    t.done()
    return RetentionSettings(files_days, events_days, units)
