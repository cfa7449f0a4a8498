"""``[lake]``: the fleet's events as a data lake: each event month a ship sends
is also written as Parquet under the remote's ``lake/events/``, for engines
that read plain Parquet (DuckDB, Athena, Trino, Spark).

Invariant: a site whose objects are sealed (``[remote] encrypt_to``) writes a
plaintext lake only when ``plaintext = true`` says it means to: the config
refuses the mix otherwise, rather than guessing which the operator meant.
"""

from __future__ import annotations

from dataclasses import dataclass

from .configremote import RemoteSettings
from .configtable import ConfigError, Table


@dataclass(frozen=True)
class LakeSettings:
    enabled: bool = False
    plaintext: bool = False  # written plain beside objects sealed with encrypt_to


def read_lake(t: Table, remote: RemoteSettings | None) -> LakeSettings:
    lake = LakeSettings(t.boolean("enabled", False), t.boolean("plaintext", False))
    t.done()
    if lake.enabled and remote is None:
        raise ConfigError(
            t.file, t.key("enabled"), "writes Parquet to the remote tier, and there is no "
            "[remote]", "configure [remote], or leave [lake] out",
        )  # fmt: skip
    if lake.enabled and remote is not None and remote.encrypt_to and not lake.plaintext:
        raise ConfigError(
            t.file, t.key("enabled"), "would write every shipped event month as plain "
            "Parquet while [remote] encrypt_to seals the rest",
            "set [lake] plaintext = true if the lake may be read without a key, or "
            "leave the lake off (a bucket of its own: another config)",
        )  # fmt: skip
    return lake
