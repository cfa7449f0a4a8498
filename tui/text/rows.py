"""A query's rows as lines of text: aligned columns (widths from the first
rows), JSON lines, or CSV with a header row. ``coldkeep query`` prints them,
the console's Events screen writes them to a file: one format for both.

Values JSON cannot hold (dates, decimals) are written as DuckDB prints them,
bytes as hex; names and text are shown with their control characters escaped in
the aligned form only (the others carry the value as it is).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from typing import Any, TextIO

from .fmt import shown

WIDEST = 40  # a text column's width at most, from the first rows


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.hex()
    return shown(str(value))


def _as_json(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, bytes):
        return value.hex()
    return str(value)  # dates, decimals: as DuckDB prints them


def _text(columns: list[str], batches: Iterator[list[tuple[Any, ...]]]) -> Iterator[str]:
    widths: list[int] | None = None
    for batch in batches:
        cells = [[_cell(v) for v in row] for row in batch]
        if widths is None:
            widths = [
                min(WIDEST, max([len(c), *(len(r[i]) for r in cells)]))
                for i, c in enumerate(columns)
            ]
            yield "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()
            yield "  ".join("-" * w for w in widths)
        for row in cells:
            yield "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
    if widths is None:
        yield "  ".join(columns)


def lines(fmt: str, columns: list[str], batches: Iterator[list[tuple[Any, ...]]]) -> Iterator[str]:
    if fmt == "text":
        yield from _text(columns, batches)
        return
    if fmt == "json":
        for batch in batches:
            for row in batch:
                yield json.dumps(
                    dict(zip(columns, map(_as_json, row), strict=True)), ensure_ascii=False
                )
        return
    out = _Line()
    writer = csv.writer(out, lineterminator="")
    writer.writerow(columns)
    yield out.take()
    for batch in batches:
        for row in batch:
            writer.writerow(["" if v is None else _as_json(v) for v in row])
            yield out.take()


class _Line:
    """What csv.writer wrote, a row at a time."""

    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> int:
        self.text += text
        return len(text)

    def take(self) -> str:
        text, self.text = self.text, ""
        return text


def write(
    out: TextIO, fmt: str, columns: list[str], batches: Iterator[list[tuple[Any, ...]]]
) -> int:
    """The rows of ``batches`` to ``out`` as lines of ``fmt``; how many rows."""
    count = 0

    def counted() -> Iterator[list[tuple[Any, ...]]]:
        nonlocal count
        for batch in batches:
            count += len(batch)
            yield batch

    for line in lines(fmt, columns, counted()):
        out.write(line + "\n")
    out.flush()
    return count
