"""Streaming gzip, hashed in the same read. Synchronous: run in worker threads.

Three deflate engines behind one small interface (``Codec``): ISA-L (``isal``),
``zlib-ng`` and the standard library's ``zlib``. Whatever the engine, the output
is one standard gzip member whose header carries the source's file name (FNAME)
and mtime, so ``gzip -l`` shows the name and ``gunzip -N`` restores both; its
comment (FCOMMENT, which every gzip reader skips in silence) adds the exact mtime
and the mode, so the archive can be rebuilt from its gzips alone. Inflating
always uses the fastest inflater available (ISA-L), whatever engine wrote the
file.

New gzips carry seek points: the deflate stream is fully flushed
(``Z_FULL_FLUSH``: byte-aligned, no back-reference across it) before each
``Codec.seek_every`` bytes of input, still one standard gzip member. Each point
is (uncompressed offset, compressed offset from the member's first byte); raw
inflate started at the compressed offset gives the bytes from the uncompressed
one. ``encode_points`` makes them the manifest's compact text.

Invariants:
- Each source byte is read once: the same 1 MiB chunk feeds sha256, CRC-32 and the
  compressor. Every read goes through the rate cap first.
- Output is bounded: inflating never produces more than ``CHUNK`` bytes per call,
  whatever the compression ratio, so a 2 GiB file costs a few MiB of memory.
- Only the codec saying the bytes are not valid gzip (bad header, bad data, CRC or
  length mismatch, truncation, trailing garbage) is ``CorruptGzip``. A failed read
  (EACCES, EIO) is an ``OSError`` and proves nothing about the file; it names the
  file it happened on (the source, the gzip, or the file being written).
- Every step checks the cancel token between chunks.
"""

from __future__ import annotations

import base64
import ctypes
import hashlib
import io
import os
import re
import struct
import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol, cast

from isal import isal_zlib
from zlib_ng import zlib_ng

from .cancel import CancelToken
from .configio import Engine
from .durable import fsync
from .errors import ColdkeepError
from .fsutil import open_file
from .ioerror import naming
from .ratelimit import UNLIMITED, RateLimiter
from .times import NS_PER_S

CHUNK = 1 << 20
_FEXTRA = 0x04
_FNAME = 0x08
_FCOMMENT = 0x10
_OS_UNIX = 3
_FULL_FLUSH = zlib.Z_FULL_FLUSH  # the same value in isal_zlib and zlib_ng

Progress = Callable[[int], None]


class CorruptGzip(ColdkeepError):
    """The bytes are not a valid gzip stream; the message says where and why."""


class _Compressor(Protocol):
    def compress(self, data: bytes | memoryview, /) -> bytes: ...
    def flush(self, mode: int = ..., /) -> bytes: ...


class _Decompressor(Protocol):
    @property
    def eof(self) -> bool: ...
    @property
    def unused_data(self) -> bytes: ...
    @property
    def unconsumed_tail(self) -> bytes: ...
    def decompress(self, data: bytes | memoryview, /, max_length: int = ...) -> bytes: ...


_ENGINES = {"isal": isal_zlib, "zlib-ng": zlib_ng, "zlib": zlib}
# Every engine's "these bytes are not deflate" error: the only proof of corruption.
_CODEC_ERRORS = cast("tuple[type[Exception], ...]", (zlib.error, isal_zlib.error, zlib_ng.error))


# A full flush every MiB of input: measured at 0.3 % in size on JSONL and logs,
# and a random 4 KiB read then inflates at most 1 MiB (docs/performance.md).
SEEK_EVERY = 1 << 20


@dataclass(frozen=True)
class Codec:
    engine: Engine = "isal"
    level: int = 1
    seek_every: int = SEEK_EVERY  # input bytes between seek points; 0: none

    def compressobj(self) -> _Compressor:
        mod = _ENGINES[self.engine]
        c: _Compressor = mod.compressobj(self.level, mod.DEFLATED, -15)
        return c


def _inflater() -> _Decompressor:
    d: _Decompressor = isal_zlib.decompressobj(31)
    return d


@dataclass(frozen=True)
class Span:
    """Where one gzip lies inside a larger file (a bundle member): ``length``
    bytes from ``offset``."""

    offset: int
    length: int


@dataclass(frozen=True)
class Digest:
    """What a stream of bytes was: its length and sha256 (hex)."""

    bytes: int
    sha256: str


@dataclass(frozen=True)
class Packed(Digest):
    """A source read once through the hashes and the compressor."""

    gz_bytes: int
    prefix_sha256: str | None
    seek_points: str | None = None  # encode_points of the gzip's points; None: none


@dataclass(frozen=True)
class GzipHeader:
    """What a coldkeep gzip says about its source: the file name (FNAME), the
    mtime in seconds (MTIME), and from coldkeep's comment (or, in a gzip an older
    coldkeep wrote, its extra field) the exact mtime in ns and the mode (None in
    a gzip that coldkeep did not write)."""

    name: str | None
    mtime: int
    mtime_ns: int | None = None
    mode: int | None = None


# What makes the archive rebuildable without losing mode or mtime precision: the
# source's mode (octal) and mtime in ns, in the gzip's comment (FCOMMENT, after
# the name: ``coldkeep mode=100644 mtime_ns=1700000000123456789``). Every reader
# skips a comment in silence; GNU gzip -v warns of every extra field it skips
# ("extra field of 16 bytes ignored"), so coldkeep no longer writes one.
_COMMENT = re.compile(rb"coldkeep mode=([0-7]{1,7}) mtime_ns=(-?[0-9]{1,20})")
# Read only, from the gzips an older coldkeep wrote: a FEXTRA subfield SI1 'C',
# SI2 'K', then the mode (u32) and the mtime in ns (u64), little-endian.
_EXTRA_ID = b"CK"
_EXTRA = struct.Struct("<IQ")
_FIELD_MAX = 4096  # a name or a comment longer than this is not coldkeep's


def gzip_header(name: bytes, mtime_ns: int, mode: int = 0) -> bytes:
    mtime = mtime_ns // NS_PER_S
    if not 0 <= mtime < 2**32:
        mtime = 0  # the field cannot hold it; 0 means "no time stamp"
    # Before 1970 too: the comment keeps a negative mtime exactly (MTIME cannot).
    comment = b"coldkeep mode=%o mtime_ns=%d" % (mode & 0o7777777, mtime_ns)
    return (
        struct.pack("<BBBBIBB", 0x1F, 0x8B, 8, _FNAME | _FCOMMENT, mtime, 0, _OS_UNIX)
        + name.replace(b"\0", b"")
        + b"\0"
        + comment
        + b"\0"
    )


class _Hashes:
    """sha256 of everything, and of the first ``prefix`` bytes when asked."""

    def __init__(self, prefix: int | None) -> None:
        self.sha = hashlib.sha256()
        self.n = 0
        self.prefix = prefix
        self.prefix_sha = hashlib.sha256() if prefix else None

    def update(self, chunk: memoryview) -> None:
        if self.prefix_sha is not None and self.prefix is not None and self.n < self.prefix:
            self.prefix_sha.update(chunk[: self.prefix - self.n])
        self.sha.update(chunk)
        self.n += len(chunk)

    def prefix_hex(self) -> str | None:
        if self.prefix_sha is None or self.prefix is None or self.n < self.prefix:
            return None
        return self.prefix_sha.hexdigest()


_spare = threading.local()

# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_KEEP_FREED = 64 << 20
_HEAP_UP_TO = 32 << 20  # glibc's most for M_MMAP_THRESHOLD on 64-bit


def keep_freed_buffers() -> None:
    """Ask the C allocator (glibc's; any other is left as it is) to keep what
    the codec frees for the next file, process-wide. The compressor's and the
    inflater's outputs are new ``bytes`` of up to 1 MiB per call: by default
    glibc maps each from the kernel and unmaps it when freed, or trims the heap
    it came from, so every file faulted in (and the kernel zeroed) its output
    pages again, each fault and unmap under the process's memory-map lock.
    Kept, they are reused: two thirds fewer page faults per pass
    (docs/performance.md). What is kept is at most the most the threads had in
    use at once, a few MiB each."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt(_M_TRIM_THRESHOLD, _KEEP_FREED)
    mallopt(_M_MMAP_THRESHOLD, _HEAP_UP_TO)


@contextmanager
def _chunk_buffer() -> Iterator[bytearray]:
    """This thread's 1 MiB read buffer, lent for one stream. A fresh bytearray
    for every file cost more than reading a small one: the kernel faults in and
    zeroes its pages each time (measured in docs/performance.md). A nested
    stream on the same thread gets a buffer of its own."""
    buf: bytearray | None = _spare.__dict__.pop("buf", None)
    if buf is None:
        buf = bytearray(CHUNK)
    try:
        yield buf
    finally:
        _spare.buf = buf


def _read_chunks(
    src: io.RawIOBase,
    limiter: RateLimiter,
    cancel: CancelToken,
    buf: bytearray,
    path: Path | str | None = None,
    limit: int | None = None,
) -> Callable[[], memoryview | None]:
    """The next chunk of ``src`` (a read error names ``path``, the file read), up
    to ``limit`` bytes in all when given."""
    view = memoryview(buf)
    name = path if path is not None else "<source>"
    left = [limit]

    def next_chunk() -> memoryview | None:
        cancel.check()
        want = view if left[0] is None else view[: min(len(buf), left[0])]
        if not len(want):
            return None
        with naming(name):
            k = src.readinto(want)
        if not k:
            return None
        if left[0] is not None:
            left[0] -= k
        limiter.take(k, cancel)
        return view[:k]

    return next_chunk


def _compress_into(
    out: BinaryIO,
    src_fd: int,
    *,
    name: bytes,
    mtime_ns: int,
    mode: int,
    codec: Codec,
    limiter: RateLimiter,
    cancel: CancelToken,
    prefix_bytes: int | None,
    progress: Progress | None,
    src_path: Path | None,
) -> tuple[_Hashes, int, list[tuple[int, int]]]:
    """One standard gzip of the open file ``src_fd`` (from its current offset)
    written to ``out``: its hashes and the gzip's length. Its seek points too
    (``Codec.seek_every``)."""
    hashes = _Hashes(prefix_bytes)
    points: list[tuple[int, int]] = []
    crc = 0
    comp = codec.compressobj()
    n = out.write(gzip_header(name, mtime_ns, mode))
    with os.fdopen(os.dup(src_fd), "rb", buffering=0) as src, _chunk_buffer() as buf:
        next_chunk = _read_chunks(src, limiter, cancel, buf, src_path)
        while (chunk := next_chunk()) is not None:
            crc = isal_zlib.crc32(chunk, crc)
            n = _deflate(out, comp, chunk, hashes.n, n, codec.seek_every, points)
            hashes.update(chunk)
            if progress is not None:
                progress(hashes.n)
    n += out.write(comp.flush())
    n += out.write(struct.pack("<II", crc, hashes.n & 0xFFFFFFFF))
    return hashes, n, points


def _deflate(
    out: BinaryIO,
    comp: _Compressor,
    chunk: memoryview,
    at: int,
    n: int,
    every: int,
    points: list[tuple[int, int]],
) -> int:
    """``chunk`` (the source's bytes from ``at``) compressed to ``out``, the
    stream fully flushed before each multiple of ``every`` that more input
    follows (none after the last byte: a point there would serve no read), its
    place added to ``points``. Returns the gzip's length so far (``n`` was)."""
    if every <= 0:
        return n + out.write(comp.compress(chunk))
    start = 0
    while start < len(chunk):
        pos = at + start
        if pos and pos % every == 0:
            n += out.write(comp.flush(_FULL_FLUSH))
            points.append((pos, n))
        end = min(len(chunk), start + every - pos % every)
        n += out.write(comp.compress(chunk[start:end]))
        start = end
    return n


def compress_fd(
    src_fd: int,
    dst: Path,
    *,
    name: bytes,
    mtime_ns: int,
    mode: int = 0,
    codec: Codec,
    limiter: RateLimiter = UNLIMITED,
    cancel: CancelToken,
    prefix_bytes: int | None = None,
    progress: Progress | None = None,
    src_path: Path | None = None,
    dst_fd: int | None = None,
) -> Packed:
    """Stream the open file ``src_fd`` (read from its current offset; not closed)
    into a new gzip at ``dst``, fsynced. ``dst`` is created 0600, replacing any
    leftover of the same name, unless the caller opened it already (``dst_fd``,
    then closed here; ``dst`` only names it in errors). A read error names
    ``src_path``; a write or fsync error names ``dst``.

    A failed fsync raises and is never retried: after one, the kernel may have
    dropped the dirty pages it could not write (and cleared the error), so a
    second fsync could succeed on bytes that never reached the disk (PostgreSQL's
    "fsyncgate"). The caller discards ``dst`` and keeps the source."""
    with naming(dst):
        fd = (
            dst_fd
            if dst_fd is not None
            else os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        )
        with os.fdopen(fd, "wb") as out:
            hashes, gz_bytes, points = _compress_into(
                out, src_fd, name=name, mtime_ns=mtime_ns, mode=mode, codec=codec,
                limiter=limiter, cancel=cancel, prefix_bytes=prefix_bytes,
                progress=progress, src_path=src_path,
            )  # fmt: skip
            out.flush()
            fsync(out.fileno(), "gzip.partial")
    return Packed(
        hashes.n, hashes.sha.hexdigest(), gz_bytes, hashes.prefix_hex(), encode_points(points)
    )


def compress_to_bytes(
    src_fd: int,
    *,
    name: bytes,
    mtime_ns: int,
    mode: int,
    codec: Codec,
    limiter: RateLimiter = UNLIMITED,
    cancel: CancelToken,
    src_path: Path | None = None,
) -> tuple[bytes, Packed]:
    """One small file's standard gzip, in memory (a bundle member), and what
    was read."""
    out = io.BytesIO()
    hashes, gz_bytes, points = _compress_into(
        out, src_fd, name=name, mtime_ns=mtime_ns, mode=mode, codec=codec, limiter=limiter,
        cancel=cancel, prefix_bytes=None, progress=None, src_path=src_path,
    )  # fmt: skip
    packed = Packed(hashes.n, hashes.sha.hexdigest(), gz_bytes, None, encode_points(points))
    return out.getvalue(), packed


def digest_fd(
    src_fd: int,
    *,
    limiter: RateLimiter = UNLIMITED,
    cancel: CancelToken,
    prefix_bytes: int | None = None,
    path: Path | None = None,
) -> tuple[Digest, str | None]:
    """sha256 of an open file from its current offset (and of its first
    ``prefix_bytes``), through the rate cap; a read error names ``path``."""
    hashes = _Hashes(prefix_bytes)
    with os.fdopen(os.dup(src_fd), "rb", buffering=0) as src, _chunk_buffer() as buf:
        next_chunk = _read_chunks(src, limiter, cancel, buf, path)
        while (chunk := next_chunk()) is not None:
            hashes.update(chunk)
    return Digest(hashes.n, hashes.sha.hexdigest()), hashes.prefix_hex()


def digest_path(
    path: Path, *, root: Path, cancel: CancelToken, limiter: RateLimiter = UNLIMITED
) -> Digest:
    """sha256 and length of the file at ``path``, reached beneath ``root``
    (never through a link), through the rate cap."""
    fd = open_file(path, os.O_RDONLY, root=root)
    try:
        return digest_fd(fd, limiter=limiter, cancel=cancel, path=path)[0]
    finally:
        os.close(fd)


def inflate(
    gz: Path | io.RawIOBase,
    *,
    span: Span | None = None,
    out: BinaryIO | None = None,
    limiter: RateLimiter = UNLIMITED,
    cancel: CancelToken,
    progress: Progress | None = None,
) -> Digest:
    """Decompress the gzip at ``gz`` (all members; only the ``span`` of it when
    given: a bundle member), hashing the output and writing it to ``out`` if
    given. ``gz`` may be a file already open for reading (a remote copy read
    through the block cache), read from its start and left open; messages name
    it by its ``name``. Raises ``CorruptGzip`` when the bytes are not valid
    gzip; an ``OSError`` when they cannot be read."""
    if isinstance(gz, Path):
        with gz.open("rb", buffering=0) as src:
            return _inflate_from(src, gz, span, out, limiter, cancel, progress)
    name = getattr(gz, "name", "<gzip>")
    with naming(name):
        gz.seek(0)
    return _inflate_from(gz, name, span, out, limiter, cancel, progress)


def _inflate_from(
    src: io.RawIOBase,
    gz: Path | str,
    span: Span | None,
    out: BinaryIO | None,
    limiter: RateLimiter,
    cancel: CancelToken,
    progress: Progress | None,
) -> Digest:
    """``inflate`` of the open file ``src`` (named ``gz`` in messages)."""
    sha = hashlib.sha256()
    total = 0
    d = _inflater()
    in_member = False
    read_any = False
    where = gz if span is None else f"{gz} (the member at byte {span.offset})"
    if span is not None:
        with naming(gz):
            src.seek(span.offset)
    limit = None if span is None else span.length
    with _chunk_buffer() as buf:
        next_chunk = _read_chunks(src, limiter, cancel, buf, gz, limit)
        while (chunk := next_chunk()) is not None:
            read_any = True
            data: bytes | memoryview = chunk
            while data:
                if not in_member and data[0] == 0 and not bytes(data).strip(b"\0"):
                    raise CorruptGzip(f"{where}: trailing zero bytes after the last gzip member")
                in_member = True
                try:
                    piece = d.decompress(data, CHUNK)
                except _CODEC_ERRORS as err:
                    raise CorruptGzip(f"{where}: {err}") from err
                if piece:
                    sha.update(piece)
                    total += len(piece)
                    if out is not None:
                        out.write(piece)
                if d.eof:
                    data = d.unused_data
                    d = _inflater()
                    in_member = False
                else:
                    data = d.unconsumed_tail
            if progress is not None:
                progress(total)
    if not read_any:
        raise CorruptGzip(f"{where}: empty file, not a gzip")
    if in_member:
        raise CorruptGzip(f"{where}: truncated (the stream ends inside a gzip member)")
    return Digest(total, sha.hexdigest())


def read_gzip_header(gz: Path, offset: int = 0) -> GzipHeader:
    """The header of the gzip at ``offset`` in ``gz`` (its first member; a bundle
    member's: its data offset), ``CorruptGzip`` if it is not a gzip."""
    with gz.open("rb") as f:
        f.seek(offset)
        head = f.read(10)
        if len(head) < 10 or head[:3] != b"\x1f\x8b\x08":
            raise CorruptGzip(f"{gz}: not a gzip file")
        flags, mtime = head[3], struct.unpack("<I", head[4:8])[0]
        mode = mtime_ns = None
        if flags & _FEXTRA:  # an older coldkeep's
            size = f.read(2)
            if len(size) < 2:
                raise CorruptGzip(f"{gz}: truncated in the gzip header's extra field")
            (xlen,) = struct.unpack("<H", size)
            found = _extra(f.read(xlen))
            if found is not None:
                mode, mtime_ns = found
        name: str | None = None
        if flags & _FNAME:
            name = os.fsdecode(_zero_ended(f, gz, "file name"))
        if flags & _FCOMMENT:
            said = _COMMENT.fullmatch(_zero_ended(f, gz, "comment"))
            if said is not None:
                mode, mtime_ns = int(said[1], 8), int(said[2])
    return GzipHeader(name, mtime, mtime_ns, mode)


def _extra(extra: bytes) -> tuple[int, int] | None:
    """coldkeep's subfield of a gzip's extra field: (mode, mtime in ns)."""
    at, found = 0, None
    while at + 4 <= len(extra):
        sub_id, (sub_len,) = extra[at : at + 2], struct.unpack("<H", extra[at + 2 : at + 4])
        data = extra[at + 4 : at + 4 + sub_len]
        if sub_id == _EXTRA_ID and len(data) == _EXTRA.size:
            found = _EXTRA.unpack(data)
        at += 4 + sub_len
    return found


def _zero_ended(f: BinaryIO, gz: Path, field: str) -> bytes:
    """A zero-terminated header field (FNAME, FCOMMENT), read to its end."""
    raw = bytearray()
    while (b := f.read(1)) not in (b"", b"\0"):
        raw += b
        if len(raw) > _FIELD_MAX:
            raise CorruptGzip(f"{gz}: gzip {field} field does not end")
    return bytes(raw)


class DamagedSeekPoints(ColdkeepError):
    """An entry's recorded seek points cannot be read back."""


def encode_points(points: list[tuple[int, int]]) -> str | None:
    """Seek points as the manifest keeps them (None for none): base64 of
    LEB128 varints, each point's (uncompressed, compressed) offset as the
    difference from the one before (from (0, 0)): about 8 characters a point.
    Text, not a BLOB: every BLOB in the manifest is a name (names.py)."""
    if not points:
        return None
    raw = bytearray()
    last_u = last_c = 0
    for u, c in points:
        _varint(raw, u - last_u)
        _varint(raw, c - last_c)
        last_u, last_c = u, c
    return base64.b64encode(bytes(raw)).decode("ascii")


def _varint(raw: bytearray, value: int) -> None:
    while value >= 0x80:
        raw.append(value & 0x7F | 0x80)
        value >>= 7
    raw.append(value)


def decode_points(text: str) -> list[tuple[int, int]]:
    """``encode_points`` undone; ``DamagedSeekPoints`` when ``text`` is not such
    (both offsets must rise from one point to the next)."""
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError) as err:
        raise DamagedSeekPoints(f"seek points {text[:40]!r}: not base64 ({err})") from err
    values: list[int] = []
    value = shift = 0
    for byte in raw:
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            values.append(value)
            value = shift = 0
    if shift or len(values) % 2 or not values:  # none is NULL, never ""
        raise DamagedSeekPoints(f"seek points {text[:40]!r}: truncated")
    points: list[tuple[int, int]] = []
    u = c = 0
    for du, dc in zip(values[::2], values[1::2], strict=True):
        if du <= 0 or dc <= 0:
            raise DamagedSeekPoints(f"seek points {text[:40]!r}: offsets do not rise")
        u, c = u + du, c + dc
        points.append((u, c))
    return points
