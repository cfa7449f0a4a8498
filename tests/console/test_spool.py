"""The pager's spool: whatever bytes come, in whatever pieces, its lines are the
file's lines, a line is read back whole (or cut at the cap, saying how much
more), and a search lands on the line that holds the text, forwards and back."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coldkeep.tui.console.screens.spool import LINE_CAP, Spool

pieces = st.lists(st.binary(max_size=64).map(lambda b: b.replace(b"\r", b"")), max_size=20)


def lines_of(data: bytes) -> list[bytes]:
    """The lines a reader (``less``, ``wc -l`` plus an unended last one) sees."""
    lines = data.split(b"\n")
    return lines[:-1] if lines[-1] == b"" else lines


@given(pieces)
@settings(max_examples=200, deadline=None)
def test_lines_are_the_files_lines_whatever_the_pieces(parts: list[bytes]) -> None:
    spool = Spool()
    try:
        for part in parts:
            spool.write(part)
        data = b"".join(parts)
        assert spool.size == len(data)
        assert [spool.line(i)[0] for i in range(spool.lines)] == lines_of(data)
    finally:
        spool.close()


@given(
    st.lists(st.sampled_from([b"alpha", b"beta", b"GAMMA", b"delta", b""]), max_size=30),
    st.sampled_from(["alpha", "gamma", "GAMMA", "ta"]),
    st.data(),
)
@settings(max_examples=200, deadline=None)
def test_search_finds_the_next_and_the_previous_line_holding_it(
    words: list[bytes], needle: str, data: st.DataObject
) -> None:
    spool = Spool()
    try:
        spool.write(b"\n".join(words))
        fold = needle == needle.lower()
        holds = [
            i
            for i, line in enumerate(lines_of(b"\n".join(words)))
            if needle.encode() in (line.lower() if fold else line)
        ]
        start = data.draw(st.integers(-1, max(spool.lines, 0)))
        after = [i for i in holds if i > start]
        before = [i for i in holds if i < start]
        assert spool.find(needle.encode(), start) == (after[0] if after else None)
        assert spool.find(needle.encode(), start, forward=False) == (before[-1] if before else None)
    finally:
        spool.close()


def test_a_search_finds_text_across_scan_chunks_and_far_lines() -> None:
    spool = Spool()
    try:
        for i in range(200_000):
            spool.write(b"line %d of the log\n" % i)
        assert spool.find(b"line 199999 ", 0) == 199_999
        assert spool.find(b"line 7 of", 199_999, forward=False) == 7
    finally:
        spool.close()


def test_a_huge_line_is_read_cut_and_says_how_much_more() -> None:
    spool = Spool()
    try:
        spool.write(b"x" * (LINE_CAP + 10) + b"\nend\r\n")
        assert spool.line(0) == (b"x" * LINE_CAP, 10)
        assert spool.line(1) == (b"end", 0)
    finally:
        spool.close()


def test_nothing_is_written_after_close() -> None:
    spool = Spool()
    spool.write(b"a\n")
    spool.close()
    with pytest.raises(BrokenPipeError):
        spool.write(b"b\n")
    with pytest.raises(BrokenPipeError):
        spool.find(b"a", -1)
