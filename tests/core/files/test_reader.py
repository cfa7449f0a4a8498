"""files/reader.py: an entry's bytes streamed from its gzip, or from its span in
a larger file (a bundle member), checked against the recorded sha256 as they go."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import io
import random
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coldkeep.core.base.cancel import CancelToken
from coldkeep.core.base.codec import CHUNK, Digest, Span
from coldkeep.core.base.layout import Layout
from coldkeep.core.files.reader import GzipAt, Streamed, entry_gzip, stream_entry
from coldkeep.core.store.entries import Entry


class Chunks(io.BytesIO):
    """An output that records the size of every write: the bytes go out piece
    by piece, never as one."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[int] = []

    def write(self, b: bytes) -> int:  # type: ignore[override]
        n = super().write(b)
        self.writes.append(n)
        return n


def _stream(path: Path, span: Span | None, expect: Digest) -> tuple[Streamed, Chunks]:
    out = Chunks()
    got = asyncio.run(stream_entry(GzipAt(path, span, "local"), expect, out))
    return got, out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=3000), before=st.binary(max_size=600), after=st.binary(max_size=600))
def test_a_member_is_read_from_its_span_alone_and_checked(
    data: bytes, before: bytes, after: bytes
) -> None:
    gz = gzip.compress(data)
    expect = Digest(len(data), hashlib.sha256(data).hexdigest())
    with tempfile.TemporaryDirectory() as tmp:
        bundle = Path(tmp) / "b.tar"
        bundle.write_bytes(before + gz + after)  # what lies around the member is never read
        got, out = _stream(bundle, Span(len(before), len(gz)), expect)
        assert got == Streamed(len(data)) and out.getvalue() == data
        wrong = Digest(len(data), "0" * 64)
        got, out = _stream(bundle, Span(len(before), len(gz)), wrong)
        assert got.problem is not None and "the manifest records" in got.problem
        assert out.getvalue() == data, "every byte, then the verdict"


def test_a_large_file_goes_out_in_chunks(tmp_path: Path) -> None:
    data = bytes(range(256)) * (3 * CHUNK // 256 + 7)
    path = tmp_path / "x.gz"
    path.write_bytes(gzip.compress(data, compresslevel=1))
    got, out = _stream(path, None, Digest(len(data), hashlib.sha256(data).hexdigest()))
    assert got.problem is None and out.getvalue() == data
    assert len(out.writes) >= 3 and max(out.writes) <= CHUNK


def test_a_corrupt_gzip_is_a_problem_after_what_it_gave(tmp_path: Path) -> None:
    data = random.Random(3).randbytes(3 * CHUNK)  # compressed, more than one chunk read
    raw = bytearray(gzip.compress(data, compresslevel=1))
    raw[-6] ^= 0xFF  # the CRC: the bytes inflate, the trailer says no
    path = tmp_path / "x.gz"
    path.write_bytes(bytes(raw))
    got, out = _stream(path, None, Digest(len(data), hashlib.sha256(data).hexdigest()))
    assert got.problem is not None and str(path) in got.problem
    sent = out.getvalue()
    assert sent and data.startswith(sent) and got.bytes == len(sent)


def test_no_copy_is_none(tmp_path: Path) -> None:
    entry = Entry(
        "u", "u/a.log", 1, "0" * 64, "files/u/a.log.gz", 20, 0, None, None, 0o644, 0,
        status="missing", id=7,
    )  # fmt: skip

    async def where() -> GzipAt | None:
        async with entry_gzip(entry, Layout(tmp_path), None, CancelToken()) as at:
            return at

    assert asyncio.run(where()) is None
