"""A packed month (core/remote/monthgz.py): any database packs into a gzip that
``gzip -d`` gives back byte for byte, and its pieces, each inflated alone, are
the database's bytes in order; a piece that is not what its points say is
refused, never handed on."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coldkeep.core.base.cancel import CancelToken
from coldkeep.core.base.codec import CorruptGzip
from coldkeep.core.remote.monthgz import SEEK_EVERY, Pieces, inflate_piece, pack

# Lengths around the piece boundaries, and a few pieces' worth of bytes that
# repeat (as a month's pages do) or do not.
LENGTHS = st.one_of(
    st.integers(0, 3 * SEEK_EVERY + 17),
    st.sampled_from([1, SEEK_EVERY - 1, SEEK_EVERY, SEEK_EVERY + 1, 2 * SEEK_EVERY]),
)


@st.composite
def databases(draw: st.DrawFn) -> bytes:
    n = draw(LENGTHS)
    seed = draw(st.binary(min_size=1, max_size=64))
    if draw(st.booleans()):
        return (seed * (n // len(seed) + 1))[:n]
    return draw(st.randoms()).randbytes(n)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=databases())
def test_a_packed_month_gunzips_whole_and_piece_by_piece(tmp_path: Path, data: bytes) -> None:
    db, gz = tmp_path / "month.db", tmp_path / "month.db.gz"
    db.write_bytes(data)
    packed = pack(db, gz, root=tmp_path, cancel=CancelToken())
    blob = gz.read_bytes()
    assert packed.packed.bytes == len(blob) and packed.plain.bytes == len(data)
    assert subprocess.run(["gzip", "-dc", str(gz)], capture_output=True, check=True).stdout == data
    pieces = Pieces(packed.points, len(data), len(blob))
    assert len(pieces) == max(1, -(-len(data) // SEEK_EVERY))
    got = b""
    for i in range(len(pieces)):
        piece = pieces[i]
        assert piece.start == len(got) and pieces.index(piece.start) == i
        got += inflate_piece(piece, blob[piece.at : piece.until], "month.db.gz")
    assert got == data


def test_a_piece_that_is_not_what_its_points_say_is_refused(tmp_path: Path) -> None:
    db, gz = tmp_path / "month.db", tmp_path / "month.db.gz"
    db.write_bytes(b"".join(b"row %d of the month\n" % i for i in range(20_000)))
    packed = pack(db, gz, root=tmp_path, cancel=CancelToken())
    blob = gz.read_bytes()
    pieces = Pieces(packed.points, db.stat().st_size, len(blob))
    first, second = pieces[0], pieces[1]
    with pytest.raises(CorruptGzip, match=r"month\.db\.gz: the piece at byte \d+ inflates to"):
        inflate_piece(first, blob[first.at : second.until], "month.db.gz")  # two pieces' bytes
    with pytest.raises(CorruptGzip, match=r"month\.db\.gz: at byte \d+: "):
        inflate_piece(first, b"\xff" * (first.until - first.at), "month.db.gz")
