"""An event month's snapshot as the bucket keeps it: one standard gzip of the
database (``events/<YYYY-MM>.<sha12>.db.gz``), the deflate stream fully flushed
every ``SEEK_EVERY`` bytes of the database, so that a reader fetches and
inflates only the pieces holding the pages it reads, and ``gunzip`` gives the
database back byte for byte. A month database of event rows packs to about a
quarter of its size: the two newest snapshots the bucket keeps of a month then
cost less than the database once.

Invariants:
- ``pack`` checks what it wrote before anyone ships it: the gzip inflates to
  the snapshot's exact bytes (size and sha256), as every archived file is.
- The points (``codec.encode_points``: the database's offset, the gzip's; ""
  for none) and the header's end (the same for every packed month) bound the
  pieces: each (from one to the next; the last to the gzip's 8-byte trailer)
  inflates alone with a raw inflater into exactly the bytes between the two
  database offsets. A row whose ``seek_points`` is NULL is no packed month.
- A piece that inflates to anything else is ``CorruptGzip`` naming the object:
  never pages handed to SQLite. A sealed month is never packed (its age stream
  is opened whole, the database inside it).
"""

from __future__ import annotations

import bisect
import io
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, cast

from ..base.cancel import CancelToken
from ..base.codec import (
    Codec,
    CorruptGzip,
    Digest,
    compress_fd,
    decode_points,
    digest_path,
    gzip_header,
    inflate,
)
from ..base.fsutil import open_file
from ..base.ratelimit import UNLIMITED, RateLimiter

# Four pages a piece: a point lookup fetches about what it would of the
# database's own pages. ISA-L's level 1 keeps no history across 8 KiB anyway:
# the month packs to the same 25 % with pieces of 8 KiB or of 1 MiB
# (docs/performance.md); smaller ones would cost the manifest more points.
SEEK_EVERY = 16 << 10
SUFFIX = ".gz"  # after the month's .db: the object's key
_TRAILER = 8  # the gzip's CRC-32 and length
_NAME = b"month.db"
_HEADER = len(gzip_header(_NAME, 0))  # every packed month's: its deflate data starts there


@dataclass(frozen=True)
class MonthGzip:
    """A month snapshot packed: the database's size and sha256, the gzip's
    (what is shipped), and the gzip's points."""

    plain: Digest
    packed: Digest
    points: str  # encode_points of its points; "": none (a database of one piece)


def pack(
    db: Path, out: Path, *, root: Path, cancel: CancelToken, limiter: RateLimiter = UNLIMITED
) -> MonthGzip:
    """The snapshot ``db`` packed into a new gzip at ``out`` (fsynced), read
    through ``limiter``, its inflation checked against ``db``'s bytes."""
    fd = open_file(db, os.O_RDONLY, root=root)
    try:
        packed = compress_fd(
            fd, out, name=_NAME, mtime_ns=0, codec=Codec(seek_every=SEEK_EVERY),
            limiter=limiter, cancel=cancel, src_path=db,
        )  # fmt: skip
    finally:
        os.close(fd)
    plain = Digest(packed.bytes, packed.sha256)
    back = inflate(out, cancel=cancel)
    if back != plain:
        raise CorruptGzip(f"{out}: inflates to {back.bytes} bytes, not the {plain.bytes} packed")
    gz = digest_path(out, root=root, cancel=cancel)
    return MonthGzip(plain, gz, packed.seek_points or "")


@dataclass(frozen=True)
class Piece:
    """Database bytes ``[start, end)``, deflated at gzip bytes ``[at, until)``."""

    start: int
    end: int
    at: int
    until: int


class Pieces:
    """A packed month's pieces, from its points, the database's size and the
    gzip's."""

    def __init__(self, points: str, plain_bytes: int, gz_bytes: int) -> None:
        self.points = [(0, _HEADER), *(decode_points(points) if points else [])]
        self.plain_bytes = plain_bytes
        self.gz_bytes = gz_bytes
        self._starts = [p[0] for p in self.points]

    def __len__(self) -> int:
        return len(self.points)

    def index(self, offset: int) -> int:
        """The piece holding database byte ``offset``."""
        return max(0, bisect.bisect_right(self._starts, offset) - 1)

    def __getitem__(self, i: int) -> Piece:
        start, at = self.points[i]
        if i + 1 < len(self.points):
            end, until = self.points[i + 1]
        else:
            end, until = self.plain_bytes, self.gz_bytes - _TRAILER
        return Piece(start, end, at, until)


def inflate_piece(piece: Piece, data: bytes, where: str) -> bytes:
    """``piece``'s database bytes from its deflated ``data``; ``CorruptGzip``
    naming ``where`` unless they are exactly its length."""
    try:
        # One byte past its length at most: a piece that says more is refused
        # without inflating all it says.
        out = zlib.decompressobj(-15).decompress(data, piece.end - piece.start + 1)
    except zlib.error as err:
        raise CorruptGzip(f"{where}: at byte {piece.at}: {err}") from err
    if len(out) != piece.end - piece.start:
        raise CorruptGzip(
            f"{where}: the piece at byte {piece.at} inflates to {len(out)} bytes, not "
            f"{piece.end - piece.start}"
        )
    return out


def unpack(data: bytes, out: BinaryIO, cancel: CancelToken) -> Digest:
    """The database a packed month's whole gzip ``data`` holds, written to
    ``out`` (its CRC and length checked): its size and sha256; ``CorruptGzip``
    if it is not one."""
    return inflate(cast(io.RawIOBase, io.BytesIO(data)), out=out, cancel=cancel)
