"""An archived file's bytes as the pager reads them: appended, as they are
inflated, to an anonymous temporary file, with the offset where each line starts
kept in an array; a line is read back by its offsets when it is drawn, and a
search scans the file a chunk at a time.

Invariants:
- Never the whole file in memory: what is held is the line index (8 bytes a
  line) and the lines being drawn (each read capped at ``LINE_CAP`` bytes);
  a search reads ``SCAN`` bytes at a time.
- The file is made by ``tempfile.TemporaryFile`` in the system's temporary
  directory (``TMPDIR``), outside the live tree and the archive, unlinked from
  the start: nothing is left behind when the pager closes or the process dies.
  Its size on disk is the archived file's.
- One writer thread (the inflate) and the event loop share it: a write and
  ``close`` hold one lock, so the file is never written after it is closed (a
  write then is ``BrokenPipeError``: the reader left); reads use ``pread``,
  which moves no file position.
"""

from __future__ import annotations

import os
import tempfile
import threading
from array import array
from bisect import bisect_right

# Bytes of one line read back for drawing: a line longer than this (a file with
# no newline at all, say) is drawn cut, with how much more there is.
LINE_CAP = 16 * 1024
# Bytes a search reads at a time.
SCAN = 1 << 20


class Spool:
    """The bytes streamed so far, and where each line starts."""

    def __init__(self) -> None:
        # Kept open for the spool's life (``close`` ends it), not a with-block.
        self._file = tempfile.TemporaryFile(prefix="coldkeep-view-")  # noqa: SIM115
        self._fd = self._file.fileno()
        self._lock = threading.Lock()
        self._starts = array("q", [0])  # each line's first byte
        self._size = 0
        self.closed = False

    # the writer (the inflate's thread) ----------------------------------------

    def write(self, piece: bytes) -> int:
        with self._lock:
            if self.closed:
                raise BrokenPipeError("the pager was closed")
            view = memoryview(piece)
            while view:
                view = view[os.write(self._fd, view) :]
            base, found = self._size, array("q")
            at = piece.find(b"\n")
            while at >= 0:
                found.append(base + at + 1)
                at = piece.find(b"\n", at + 1)
            self._starts.extend(found)
            self._size += len(piece)
        return len(piece)

    def flush(self) -> None:
        """Nothing to flush: every write reached the file."""

    # the reader (the event loop) ----------------------------------------------

    @property
    def size(self) -> int:
        return self._size

    @property
    def lines(self) -> int:
        """Lines so far: each ended by a newline, and a last one without."""
        with self._lock:
            return len(self._starts) - 1 + (self._size > self._starts[-1])

    def span(self, i: int) -> tuple[int, int]:
        """Line ``i``'s first byte and the byte after its last (its newline not
        counted)."""
        with self._lock:
            start = self._starts[i]
            end = self._starts[i + 1] - 1 if i + 1 < len(self._starts) else self._size
        return start, end

    def line(self, i: int) -> tuple[bytes, int]:
        """Line ``i`` (its ``\\r\\n`` or ``\\n`` not included), at most ``LINE_CAP``
        bytes of it, and how many bytes more it has."""
        start, end = self.span(i)
        data = os.pread(self._fd, min(end - start, LINE_CAP), start) if end > start else b""
        more = end - start - len(data)
        if not more and data.endswith(b"\r"):
            data = data[:-1]
        return data, more

    def line_at(self, offset: int) -> int:
        """The line that holds byte ``offset``."""
        with self._lock:
            return bisect_right(self._starts, offset) - 1

    def find(self, needle: bytes, line: int, *, forward: bool = True) -> int | None:
        """The first line after ``line`` (before it, ``forward=False``) that holds
        ``needle``, as far as the bytes have come; a needle of lower case only is
        matched in any case (as less's ``-i``). Blocking: run it in a thread;
        ``BrokenPipeError`` once the spool is closed."""
        fold = needle == needle.lower()
        size = self._size
        if forward:
            if line + 1 >= self.lines:
                return None
            hit = self._scan_forward(needle, self.span(line + 1)[0], size, fold)
        else:
            if line <= 0:
                return None
            hit = self._scan_back(needle, self.span(line - 1)[1], fold)
        return None if hit is None else self.line_at(hit)

    def _read(self, start: int, end: int, fold: bool) -> bytes:
        # Under the lock: the pager may close the file while a search runs.
        with self._lock:
            if self.closed:
                raise BrokenPipeError("the pager was closed")
            data = os.pread(self._fd, end - start, start)
        return data.lower() if fold else data

    def _scan_forward(self, needle: bytes, start: int, size: int, fold: bool) -> int | None:
        overlap = max(len(needle) - 1, 0)
        while start < size:
            end = min(start + SCAN, size)
            at = self._read(start, end, fold).find(needle)
            if at >= 0:
                return start + at
            if end == size:
                return None
            start = end - overlap
        return None

    def _scan_back(self, needle: bytes, end: int, fold: bool) -> int | None:
        overlap = max(len(needle) - 1, 0)
        while end > 0:
            start = max(end - SCAN, 0)
            at = self._read(start, end, fold).rfind(needle)
            if at >= 0:
                return start + at
            if start == 0:
                return None
            end = start + overlap
        return None

    def close(self) -> None:
        with self._lock:
            if not self.closed:
                self.closed = True
                self._file.close()
