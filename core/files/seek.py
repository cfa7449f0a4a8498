"""Random access inside an archived file: the bytes ``[offset, offset + length)``
of its data, read from its gzip (or bundle member) without inflating it from the
start. Synchronous and thread-safe: call it from worker threads (a FUSE read, a
``cat`` of a range); nothing in it touches an event loop.

Two ways in:
- The gzip has seek points (the entry's ``seek_points``: ``codec.encode_points``):
  raw inflate starts at the nearest point at or before ``offset``, so a read
  inflates at most ``Codec.seek_every`` bytes before the first one it returns.
- It has none (every gzip written before seek points, an entry recovery or a
  rebuild recorded): the checkpoint cache. The first read past what is known
  inflates forward from the furthest checkpoint, keeping a copy of the inflater
  (its 32 KiB window and state) every ``spacing`` bytes of output; later reads
  start from the nearest copy at or before their offset.

Invariants:
- Memory is bounded: at most ``max_checkpoints`` inflater copies in all once
  a read ends, about 36 KiB each (zlib-ng's 32 KiB window and its state;
  bench/seek.py measures it): 512 by default, ~18 MiB. A gzip never holds more
  than half of them (past that it keeps every other one, its spacing doubled);
  past the bound, the gzips read least recently lose theirs (walks under way in
  other threads may hold half as many again until they end). One read holds
  its ``length`` of output, one ``codec.CHUNK`` of inflated bytes and
  ``_IN_CHUNK`` of input beside it.
- A gzip's checkpoints are keyed by its identity and the member's offset: a
  file's (device, inode, size, mtime), so that a gzip replaced under the same
  name starts afresh; a remote copy read through the block cache by its
  object's key and its window (``CachedCopy.ident``).
- Threads: a gzip's checkpoints grow under its own lock (one walk at a time);
  a read inside what is known only copies a checkpoint under the lock and
  inflates on its own copy. Stored inflaters are never fed, only copied.
- A range read is not checked against the sha256 (only a whole read can be;
  ``reader.stream_entry`` is that path). Bytes that are not valid deflate, or
  end early, are ``CorruptGzip`` naming the gzip; a read error is an
  ``OSError`` naming it (a remote copy: a ``RemoteError`` naming its object).
  Nothing is written.
- Every gzip is opened by ``GzipAt.open``: a file on disk and a remote copy
  read through the block cache go through the same walk.
"""

from __future__ import annotations

import bisect
import functools
import io
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from isal import isal_zlib
from zlib_ng import zlib_ng

from ..base.codec import CHUNK, CorruptGzip, DamagedSeekPoints, Span, decode_points
from ..base.ioerror import naming
from ..store.entries import Entry
from .reader import CachedCopy, GzipAt

# Input read at a time: a 4 KiB read from a point needs a few KiB of deflate,
# not a MiB.
_IN_CHUNK = 64 << 10
DEFAULT_SPACING = 1 << 20
DEFAULT_MAX_CHECKPOINTS = 512  # ~18 MiB
_CODEC_ERRORS = cast("tuple[type[Exception], ...]", (isal_zlib.error, zlib_ng.error))


@dataclass
class _Place:
    """An inflate under way: its next output byte is ``out`` of the file's data,
    its next input byte ``at`` from the gzip's (member's) first byte. ``d`` is
    None at the very start (a member's header still to read)."""

    out: int
    at: int
    d: Any  # an ISA-L or zlib-ng decompressobj (neither is typed)
    raw: bool = False  # raw deflate from a seek point: it ends with its member


@dataclass(frozen=True)
class _Gzip:
    """The compressed bytes of one gzip: in ``path``, ``length`` bytes from
    ``base`` (a bundle member's span, or the whole file)."""

    path: str
    base: int
    length: int


def _gzip_of(at: GzipAt, f: io.RawIOBase) -> tuple[_Gzip, tuple[object, ...]]:
    """The compressed bytes ``f`` (``at`` opened) holds, and what keys its
    checkpoints."""
    if isinstance(at.path, CachedCopy):
        size = f.seek(0, os.SEEK_END)
        ident: tuple[object, ...] = ("remote", *at.path.ident)
    else:
        st = os.fstat(f.fileno())
        size = st.st_size
        ident = (str(at.path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    span = at.span if at.span is not None else Span(0, size)
    return _Gzip(at.name, span.offset, span.length), (*ident, span.offset)


def _new_member() -> Any:
    return zlib_ng.decompressobj(31)


def _walk(
    f: io.RawIOBase,
    gz: _Gzip,
    place: _Place,
    sink: Callable[[int, bytes], bool],
    mark: Callable[[_Place], None] | None = None,
) -> None:
    """Inflate from ``place`` (advanced as it goes), handing each piece and its
    offset to ``sink`` until it says enough or the data ends; ``mark`` sees
    ``place`` after each piece. From a member's start (``place.d`` None) the
    gzip is read across its members; raw inflate from a seek point ends with
    its member (coldkeep writes one)."""
    f.seek(gz.base + place.at)
    while True:
        data = f.read(min(_IN_CHUNK, gz.length - place.at)) if place.at < gz.length else b""
        if not data:
            if place.d is None or place.d.eof:
                return
            raise CorruptGzip(f"{gz.path}: truncated (the stream ends inside a gzip member)")
        while data:
            if place.d is None or place.d.eof:
                place.d = _new_member()
            d = place.d
            try:
                piece = d.decompress(data, CHUNK)
            except _CODEC_ERRORS as err:
                raise CorruptGzip(f"{gz.path} (at byte {gz.base + place.at}): {err}") from err
            rest = d.unused_data if d.eof else d.unconsumed_tail
            place.at += len(data) - len(rest)
            data = rest
            place.out += len(piece)
            if sink(place.out - len(piece), piece) or (place.raw and d.eof):
                return
            if mark is not None:
                mark(place)


class _Collect:
    """The sink gathering ``[offset, offset + length)`` of the pieces."""

    def __init__(self, offset: int, length: int) -> None:
        self.offset, self.end = offset, offset + length
        self.got = bytearray()

    def __call__(self, start: int, piece: bytes) -> bool:
        end = start + len(piece)
        if end > self.offset and start < self.end:
            self.got += piece[max(0, self.offset - start) : self.end - start]
        return end >= self.end


@functools.lru_cache(maxsize=256)
def _decoded(text: str) -> list[tuple[int, int]]:
    """An open file's points, decoded once (a 1 GiB file has a thousand; every
    read needs them). Never changed by a caller."""
    return decode_points(text)


def read_from_points(at: GzipAt, points: list[tuple[int, int]], offset: int, length: int) -> bytes:
    """The bytes ``[offset, offset + length)`` (fewer at the end of the data) of
    the gzip ``at``, inflated from the nearest of its seek ``points`` (decoded:
    (data offset, offset from the member's first byte)) at or before
    ``offset``."""
    want = _Collect(offset, length)
    if length <= 0:
        return b""
    i = bisect.bisect_right(points, offset, key=lambda p: p[0]) - 1
    with naming(at.name), at.open() as f:
        gz, _ = _gzip_of(at, f)
        if i < 0:
            place = _Place(0, 0, None)  # before the first point: the member's start
        else:
            out, comp = points[i]
            place = _Place(out, comp, isal_zlib.decompressobj(-15), raw=True)
        _walk(f, gz, place, want)
    return bytes(want.got)


@dataclass
class _Checkpoints:
    """One gzip's known places, ``out`` ascending; the first is its start."""

    spacing: int
    places: list[_Place] = field(default_factory=lambda: [_Place(0, 0, None)])
    done: bool = False  # walked to the end: no place past the last is needed
    lock: threading.Lock = field(default_factory=threading.Lock)

    def nearest(self, offset: int) -> _Place:
        """A copy of the last place at or before ``offset``, its own to feed."""
        i = bisect.bisect_right(self.places, offset, key=lambda p: p.out) - 1
        p = self.places[i]
        return _Place(p.out, p.at, None if p.d is None else p.d.copy())

    def thin(self) -> None:
        """Every other place dropped (the start kept), the spacing doubled."""
        self.places = self.places[::2]
        self.spacing *= 2


class SeekReader:
    """Range reads of archived files, with the checkpoint cache for gzips that
    have no seek points. One per process is enough (a mount holds one); every
    method may be called from any thread."""

    def __init__(
        self,
        *,
        spacing: int = DEFAULT_SPACING,
        max_checkpoints: int = DEFAULT_MAX_CHECKPOINTS,
    ) -> None:
        self.spacing = spacing
        self.max_checkpoints = max(4, max_checkpoints)
        self._lock = threading.Lock()
        self._known: OrderedDict[tuple[object, ...], _Checkpoints] = OrderedDict()

    def read(self, at: GzipAt, offset: int, length: int, *, seek_points: str | None) -> bytes:
        """The bytes ``[offset, offset + length)`` of the file whose gzip is ``at``
        (fewer at its end, none past it): from its ``seek_points`` (an entry's
        ``seek_points`` column) when it has them, else through the checkpoint
        cache. Damaged seek points are passed over for the cache: the read
        still gives the right bytes, only slower."""
        if offset < 0 or length < 0:
            raise ValueError(f"{at.name}: a read needs offset and length >= 0")
        if seek_points is not None:
            try:
                points = _decoded(seek_points)
            except DamagedSeekPoints:
                points = []
            if points:
                return read_from_points(at, points, offset, length)
        return self.read_via_checkpoints(at, offset, length)

    def read_entry(self, at: GzipAt, entry: Entry, offset: int, length: int) -> bytes:
        """``read`` of ``entry`` (whose gzip ``at`` is, as ``reader.entry_gzip``
        gives it), from its recorded seek points."""
        return self.read(at, offset, length, seek_points=entry.seek_points)

    def read_via_checkpoints(self, at: GzipAt, offset: int, length: int) -> bytes:
        """``read`` through the checkpoint cache alone."""
        want = _Collect(offset, length)
        if length <= 0:
            return b""
        with naming(at.name), at.open() as f:
            gz, ident = _gzip_of(at, f)
            known = self._checkpoints(ident)
            with known.lock:
                last = known.places[-1]
                inside = known.done or offset < last.out + known.spacing
                place = known.nearest(offset)
                if not inside:  # walk on from the furthest place, keeping places
                    _walk(f, gz, place, want, self._marker(known))
                    known.done = known.done or want.end > place.out
            if inside:
                _walk(f, gz, place, want)
        self._bound()
        return bytes(want.got)

    def _marker(self, known: _Checkpoints) -> Callable[[_Place], None]:
        def mark(place: _Place) -> None:
            if place.d is not None and place.out >= known.places[-1].out + known.spacing:
                known.places.append(_Place(place.out, place.at, place.d.copy()))
                if len(known.places) > self.max_checkpoints // 2:
                    known.thin()

        return mark

    def _checkpoints(self, key: tuple[object, ...]) -> _Checkpoints:
        with self._lock:
            known = self._known.get(key)
            if known is None:
                known = self._known[key] = _Checkpoints(self.spacing)
            self._known.move_to_end(key)
            return known

    def _bound(self) -> None:
        """The gzips read least recently forget their checkpoints while there
        are more than ``max_checkpoints`` in all (the one read last keeps its)."""
        with self._lock:
            total = sum(len(k.places) for k in self._known.values())
            while total > self.max_checkpoints and len(self._known) > 1:
                _, gone = self._known.popitem(last=False)
                total -= len(gone.places)

    def checkpoints(self) -> int:
        """How many inflater copies are held now (for the bench and tests)."""
        with self._lock:
            return sum(len(k.places) for k in self._known.values())
