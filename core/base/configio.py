"""``[gzip]`` and ``[io]``: how archiving writes and reads (the gzip engine and
its level, checked against the engine's range; the byte rate and the number of
files archived at once).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, get_args

from .configtable import ConfigError, Table

Engine = Literal["isal", "zlib-ng", "zlib"]


# Measured on the 2-core reference machine (docs/performance.md): ISA-L level 1
# compresses JSONL ~4x faster than zlib -6 at a ratio within 4 % of gzip -6's.
DEFAULT_ENGINE: Engine = "isal"


DEFAULT_LEVEL = 1


LEVEL_RANGE: Mapping[Engine, tuple[int, int]] = {"isal": (0, 3), "zlib-ng": (1, 9), "zlib": (1, 9)}


@dataclass(frozen=True)
class GzipSettings:
    engine: Engine = DEFAULT_ENGINE
    level: int = DEFAULT_LEVEL


@dataclass(frozen=True)
class IoSettings:
    bytes_per_s: int = 0
    workers: int = 0  # files archived at once; 0 = two per core
    # Processes that pack bundles of small files: 1 = this one alone, N = N
    # workers beside it, 0 = one worker per core for a pass with many of them.
    processes: int = 0


def read_gzip(t: Table) -> GzipSettings:
    engine = t.choice("engine", DEFAULT_ENGINE, get_args(Engine))
    lo, hi = LEVEL_RANGE[engine]
    level = t.integer("level", DEFAULT_LEVEL if engine == DEFAULT_ENGINE else 6, minimum=lo)
    if level > hi:
        raise ConfigError(
            t.file, "gzip.level", f"{level} is out of range for engine {engine!r}", f"use {lo}–{hi}"
        )
    t.done()
    return GzipSettings(engine=engine, level=level)


def read_io(t: Table) -> IoSettings:
    io = IoSettings(
        bytes_per_s=t.integer("bytes_per_s", 0, minimum=0),
        workers=t.integer("workers", 0, minimum=0),
        processes=t.integer("processes", 0, minimum=0, maximum=64),
    )
    t.done()
    return io
