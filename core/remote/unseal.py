"""Sealed remote copies opened for reading: the identity a read needs (the one
line without it), a copy's age stream opened into a file the caller reads as
plaintext, and what it opened checked against what the manifest records.

Every reader of remote bytes comes here for a sealed copy: restore and
disaster recovery (scratch files, fetch.py and rebuild.py), ``cat`` and the
mount (a file in the block cache's folder, fetch.py), ``verify --remote
--deep`` (verify.py), the fleet view and ``rebuild-manifest`` (a manifest
snapshot, sealed or not).

Invariants:
- A sealed copy is read only with an identity given for the command (never
  stored); without one the read is refused before any byte is fetched, in one
  line naming the object and the recipient set it is sealed to.
- What an opening wrote is trusted only once it ended without error and its
  size (and, where the manifest knows it, its sha256) is the recorded one: on
  any error the caller's file is discarded, never placed or read.
- Every failure to open (no identity, a wrong one, a stream altered or cut
  short) is a ``SealedUnreadable``, a ``RemoteError``: a restore counts it
  against the file and goes on with the others, a mount makes it EIO.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from typing import Protocol

from ..base.cancel import CancelToken
from ..base.codec import Digest
from ..base.errors import ColdkeepError, RemoteError
from ..base.fsutil import write_all
from ..base.ratelimit import UNLIMITED, RateLimiter
from .objectstore import ObjectStore
from .sealing import (
    Identities,
    SealedAltered,
    SealedTruncated,
    WrongIdentity,
    identity_needed,
    open_sealed,
)

# A sealed object's key ends in its recipient set's fingerprint: an archive
# file's ``<path>.<set>-<random>.age``, a manifest snapshot's ``<path>.<set>.age``.
SEALED_NAME = re.compile(r"^(?P<path>.+)\.(?P<set>[0-9a-f]{12})(?:-[0-9a-f]+)?\.age$")


class Readable(Protocol):
    def read(self, n: int, /) -> bytes: ...


class SealedUnreadable(RemoteError):
    """A sealed copy that cannot be opened here: no identity was given, the one
    given holds none of its keys, or its stream fails age's checks. ``cause``
    is sealing's own error (``IdentityNeeded``, ``WrongIdentity``,
    ``SealedAltered``, ``SealedTruncated``), or None for a plaintext that is not
    the recorded one."""

    def __init__(self, message: str, cause: ColdkeepError | None = None) -> None:
        super().__init__(message)
        self.cause = cause


def unsealed_name(key: str) -> tuple[str, str] | None:
    """(the archive path, the set's fingerprint) of a sealed object's key; None
    for a key that is not a sealed object's."""
    m = SEALED_NAME.match(key)
    return None if m is None else (m["path"], m["set"])


def identity_for(identities: Identities | None, what: str, sealed_to: str | None) -> Identities:
    """``identities``, or the one line a read of the sealed ``what`` says
    without them."""
    if identities is None:
        needed = identity_needed(what, sealed_to)
        raise SealedUnreadable(str(needed), needed)
    return identities


class _FdOut:
    """An open file descriptor as open_sealed's output."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def write(self, data: bytes) -> int:
        write_all(self.fd, data)
        return len(data)


def open_into(
    src: Readable,
    fd: int,
    identities: Identities,
    *,
    length: int,
    what: str,
    sealed_to: str | None,
    cancel: CancelToken,
    skip: int = 0,
    expect: Digest | int | None = None,
    limiter: RateLimiter = UNLIMITED,
) -> Digest:
    """The age stream of ``length`` bytes read from ``src`` opened into ``fd``
    (from its position, not fsynced), but for its first ``skip`` bytes; checked
    against ``expect`` (the plaintext's size and sha256, or its size alone).
    Synchronous: run it in a worker thread. Any failure is ``SealedUnreadable``
    and ``fd``'s file is to be discarded."""
    try:
        got = open_sealed(
            src,
            _FdOut(fd),
            identities,
            length=length,
            what=what,
            sealed_to=sealed_to,
            cancel=cancel,
            limiter=limiter,
            skip=skip,
        )
    except (WrongIdentity, SealedAltered, SealedTruncated) as err:
        raise SealedUnreadable(str(err), err) from None
    want = expect if isinstance(expect, Digest) else None
    size = expect.bytes if isinstance(expect, Digest) else expect
    if (size is not None and got.bytes != size) or (want is not None and got != want):
        said = f"{got.bytes:,} bytes, sha256 {got.sha256[:12]}…"
        recorded = f"{size:,} bytes" + (f", sha256 {want.sha256[:12]}…" if want else "")
        raise SealedUnreadable(
            f"{what}: opens to {said}, not the {recorded} recorded (not the object shipped)"
        )
    return got


class _Hashed:
    """Where an opening writes when only its size and sha256 are wanted."""

    def __init__(self) -> None:
        self.sha = hashlib.sha256()
        self.n = 0

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        self.n += len(data)
        return len(data)


class RangedSource:
    """The object ``key`` of ``size`` bytes (as ``version``) read from its start
    by ranged GETs of ``piece`` bytes, sent to the store's ``loop`` from a worker
    thread, and hashed as read: what an opening reads when nothing is to be
    written."""

    def __init__(
        self,
        store: ObjectStore,
        key: str,
        size: int,
        loop: asyncio.AbstractEventLoop,
        piece: int,
        version: str | None,
    ) -> None:
        self.store, self.key, self.size, self.loop, self.piece = store, key, size, loop, piece
        self.version = version
        self.sha = hashlib.sha256()
        self.at = 0  # bytes fetched
        self.held = memoryview(b"")

    def read(self, n: int) -> bytes:
        if not self.held:
            want = min(self.piece, self.size - self.at)
            if want <= 0:
                return b""
            call = self.store.read_range(self.key, self.at, want, self.version)
            data = asyncio.run_coroutine_threadsafe(call, self.loop).result()
            if len(data) != want:
                raise RemoteError(
                    f"{self.store.where(self.key)}: a read of {want:,} bytes at {self.at:,} "
                    f"gave {len(data):,}"
                )
            self.sha.update(data)
            self.at += want
            self.held = memoryview(data)
        piece, self.held = self.held[:n], self.held[n:]
        return bytes(piece)


def open_all(
    src: RangedSource,
    identities: Identities,
    streams: list[tuple[int, int]],
    *,
    what: str,
    sealed_to: str | None,
    cancel: CancelToken,
) -> Digest:
    """Every age stream of ``src`` ((offset, length) each, back to back from its
    start) opened in order: the size and sha256 of the whole plaintext. Any
    failure to open is ``SealedUnreadable``. Synchronous: a worker thread."""
    out = _Hashed()
    at = 0
    for offset, length in streams:
        if offset != at:
            raise SealedUnreadable(f"{what}: its recorded streams leave a gap at byte {at:,}")
        try:
            open_sealed(
                src, out, identities, length=length, what=what, sealed_to=sealed_to, cancel=cancel
            )
        except (WrongIdentity, SealedAltered, SealedTruncated) as err:
            raise SealedUnreadable(str(err), err) from None
        at += length
    return Digest(out.n, out.sha.hexdigest())
