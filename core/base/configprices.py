"""``[remote.prices]``: what S3 charges, as estimates. The defaults are the
provider's public list prices (AWS, us-east-1, USD) for storing a GB a month in
each class and for thawing by tier; a site with other prices (another region, a
contract, an S3-compatible provider) sets its own. Every cost coldkeep shows is
one of these, labelled as an estimate: a bill also depends on the minimum stays
and sizes each class bills.

    [remote.prices.storage]            # USD per GB-month, by class
    DEEP_ARCHIVE = 0.0018
    [remote.prices.thaw.DEEP_ARCHIVE]  # by tier: [USD per GB, USD per 1,000 requests]
    standard = [0.02, 0.10]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .configtable import ConfigError, Table

GB = 1024**3
#: Thaw tiers, cheapest first, as ``thaw --tier`` names them.
TIERS = ("bulk", "standard", "expedited")

STORAGE_USD_PER_GB_MONTH: Mapping[str, float] = {
    "STANDARD": 0.023,
    "STANDARD_IA": 0.0125,
    "ONEZONE_IA": 0.01,
    "INTELLIGENT_TIERING": 0.023,
    "GLACIER_IR": 0.004,
    "REDUCED_REDUNDANCY": 0.024,
    "GLACIER": 0.0036,
    "DEEP_ARCHIVE": 0.00099,
}

THAW_USD: Mapping[tuple[str, str], tuple[float, float]] = {
    ("GLACIER", "expedited"): (0.03, 10.0),
    ("GLACIER", "standard"): (0.01, 0.05),
    ("GLACIER", "bulk"): (0.0, 0.0),
    ("DEEP_ARCHIVE", "standard"): (0.02, 0.10),
    ("DEEP_ARCHIVE", "bulk"): (0.0025, 0.025),
}


@dataclass(frozen=True)
class Prices:
    """USD per GB-month by class; per GB thawed and per 1,000 thaw requests by
    class and tier."""

    storage: Mapping[str, float] = field(default_factory=lambda: dict(STORAGE_USD_PER_GB_MONTH))
    thaw: Mapping[tuple[str, str], tuple[float, float]] = field(
        default_factory=lambda: dict(THAW_USD)
    )

    def storage_usd(self, storage_class: str, size: int, months: float = 1.0) -> float:
        """Keeping ``size`` bytes in ``storage_class`` for ``months``."""
        return size / GB * self.storage.get(storage_class, 0.0) * months

    def thaw_usd(self, storage_class: str, tier: str, size: int, requests: int) -> float:
        """Thawing ``requests`` objects of ``size`` bytes in all from
        ``storage_class`` at ``tier`` (0 where no price is known)."""
        per_gb, per_thousand = self.thaw.get((storage_class, tier), (0.0, 0.0))
        return size / GB * per_gb + requests / 1000 * per_thousand


def usd(amount: float) -> str:
    """An estimated cost in USD, as a plan, status or error says it ("under
    0.01 USD" for less than a cent)."""
    return "under 0.01 USD" if amount < 0.01 else f"{amount:,.2f} USD"


def read_prices(t: Table, classes: tuple[str, ...]) -> Prices:
    """``[remote.prices]``, each price checked; the defaults where it says none."""
    storage = dict(STORAGE_USD_PER_GB_MONTH)
    for name, value in _table(t, "storage").items():
        storage[_class(t, "storage", name, classes)] = _price(t, f"storage.{name}", value)
    thaw = dict(THAW_USD)
    for name, tiers_of in _table(t, "thaw").items():
        cls = _class(t, "thaw", name, classes)
        if not isinstance(tiers_of, dict):
            raise ConfigError(t.file, t.key(f"thaw.{name}"), "expected a table of tiers",
                              "write standard = [0.02, 0.10]")  # fmt: skip
        for tier, pair in tiers_of.items():
            key = f"thaw.{name}.{tier}"
            if tier not in TIERS:
                raise ConfigError(t.file, t.key(key), f"{tier!r} is not a tier",
                                  "use " + ", ".join(TIERS))  # fmt: skip
            if not isinstance(pair, list) or len(pair) != 2:
                want = "expected [USD per GB, USD per 1,000 requests]"
                raise ConfigError(t.file, t.key(key), want, "write standard = [0.02, 0.10]")
            thaw[(cls, tier)] = (_price(t, key, pair[0]), _price(t, key, pair[1]))
    t.done()
    return Prices(storage, thaw)


def _table(t: Table, name: str) -> dict[str, object]:
    raw = t.take(name)
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(t.file, t.key(name), "expected a table", f"write [remote.prices.{name}]")
    return raw


def _class(t: Table, where: str, name: str, classes: tuple[str, ...]) -> str:
    if name not in classes:
        raise ConfigError(t.file, t.key(f"{where}.{name}"), f"{name!r} is not a storage class",
                          "use " + ", ".join(classes))  # fmt: skip
    return name


def _price(t: Table, key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e6:
        raise ConfigError(
            t.file, t.key(key), f"{value!r} is not a price", "a number of USD, 0 or more"
        )
    return float(value)
