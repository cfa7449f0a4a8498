"""The fsync switch: the one named site skipped only when a test sets both of its
variables; a typo is an error, not a mutant that survives."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from coldkeep.core.base import durable
from coldkeep.core.base.durable import MUTANT_ACK, MUTANT_ENV, SITES, SKIP_ENV, TRACE_ENV


def test_sites_are_unique_and_dotted() -> None:
    assert len(set(SITES)) == len(SITES)
    assert all(s.count(".") == 1 for s in SITES)


def test_nothing_is_skipped_unless_both_variables_are_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(SKIP_ENV, raising=False)
    monkeypatch.delenv(MUTANT_ENV, raising=False)
    assert durable.skipped() is None
    monkeypatch.setenv(SKIP_ENV, "gzip.placed")
    assert durable.skipped() is None, "the site alone skips nothing"
    monkeypatch.setenv(MUTANT_ENV, "1")
    assert durable.skipped() is None, "only the exact acknowledgement arms it"
    monkeypatch.setenv(MUTANT_ENV, MUTANT_ACK)
    assert durable.skipped() == "gzip.placed"
    monkeypatch.delenv(SKIP_ENV)
    assert durable.skipped() is None, "the acknowledgement alone skips nothing"


def test_an_unknown_site_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(SKIP_ENV, "gzip.plcaed")
    monkeypatch.setenv(MUTANT_ENV, MUTANT_ACK)
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(ValueError, match=r"gzip\.plcaed"):
            durable.fsync(fd, "gzip.placed")
    finally:
        os.close(fd)


def test_the_trace_names_each_site_reached(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    monkeypatch.setenv(TRACE_ENV, str(trace))
    monkeypatch.setenv(SKIP_ENV, "gzip.partial")
    monkeypatch.setenv(MUTANT_ENV, MUTANT_ACK)
    with (tmp_path / "f").open("wb") as f:
        durable.fsync(f.fileno(), "gzip.partial")
        durable.fsync(f.fileno(), "restore.partial")
    assert trace.read_text().splitlines() == ["gzip.partial", "restore.partial"]
