"""Client-side encryption of what ships: each object sealed to age X25519
recipients before it leaves the host, opened on the way back with an identity
the host does not keep.

The format (age v1, binary, through pyrage: nothing here is cryptography):
- A whole object (a gzip of its own, an event month's snapshot, a manifest
  snapshot) is one age stream of its bytes, to every recipient of the set: what
  ``age -d -i KEY`` opens.
- A bundle is tiled into spans (``tile``): each member with the bytes before
  it back to the member before (its tar header, padding), and what follows the
  last member (the tar's end, the index). The sealed object is one age stream
  per span, back to back, so one member is one ranged GET of its stream's
  (offset, length), opened alone, its header's bytes skipped. A stream costs
  its header (one stanza per recipient and a random "grease" stanza: 217 to
  372 bytes for one recipient, 413 to 569 for three, over 300 seals each) plus
  16 bytes of nonce and 16 of tag per 64 KiB chunk (one chunk at least): a
  member of m bytes after a 512-byte tar header reads m + m/4096 + under
  1.5 KiB, within m + 64 KiB up to 255 MiB. A tar header rides in its member's
  stream rather than in one of its own because each stream wraps a new file
  key to every recipient (an X25519 exchange, about 55 µs each), which is most
  of a small member's cost.
- The header's size is random (the grease stanza), so a stream's place in the
  sealed object is never computed: ``seal_spans`` returns each span's
  ciphertext (offset, length), which the caller records.

Invariants:
- Sealing needs only public keys (``parse_recipients``); opening needs the
  identity file (``load_identities``), given for each read, never stored. No
  message, repr or exception names a secret key. A file others may read is
  used all the same, with a warning its client says (``Identities.warnings``).
- Memory is bounded whatever the size: the source is read 1 MiB at a time, age
  works in 64 KiB chunks, and the output is written as it comes.
- One pass: sealing hashes what it read (the plaintext, what restore checks)
  and what it wrote (the object, what the server reads back); opening hashes
  what it wrote (the plaintext).
- Opening reads exactly the recorded length. A short read is ``SealedTruncated``;
  a chunk or a header that fails age's authentication is ``SealedAltered``
  (age authenticates each chunk and marks the last one, so a stream cut at a
  chunk's end fails too, never yielding a short plaintext as if whole); no key
  of the file opening any stanza is ``WrongIdentity``. On any error ``out``
  may hold the chunks opened before it: the caller discards it, never places it.
- Re-wrapping is not possible here: pyrage seals and opens whole streams and
  never hands out a stream's file key, the only thing a new stanza could wrap,
  so new recipients get a stream only by sealing the plaintext again
  (``rekey_step`` says from where, and why).
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, cast

import pyrage
from pyrage import x25519

from ..base.cancel import CancelToken
from ..base.codec import Digest, Span
from ..base.errors import ColdkeepError, UsageError
from ..base.fsutil import open_file
from ..base.ratelimit import UNLIMITED, RateLimiter
from ..base.recipients import RecipientSet, short

MAGIC = b"age-encryption.org/v1\n"
READ_CHUNK = 1 << 20
MAX_IDENTITY_FILE = 1 << 20  # an identity file is a few lines; more is not one
_SECRET_PREFIX = "AGE-SECRET-KEY-1"


class Readable(Protocol):
    def read(self, n: int, /) -> bytes: ...


class Writable(Protocol):
    def write(self, data: bytes, /) -> int | None: ...


# --- recipients ----------------------------------------------------------------


# --- identities ----------------------------------------------------------------


class IdentityFileError(UsageError):
    """The identity file given cannot be used; the message names it."""

    def __init__(self, file: Path, problem: str, fix: str) -> None:
        super().__init__(f"{file}: {problem} ({fix})")
        self.file = file


class IdentityNeeded(UsageError):
    """A sealed object was to be read and no identity file was given."""


class WrongIdentity(UsageError):
    """No key of the identity file opens any of the object's stanzas."""


@dataclass(frozen=True)
class Identities:
    """The X25519 keys of one identity file. Only ``file`` and the public keys
    they open (``opens``) are ever shown. ``warnings``: what the client that
    loaded them says once, each a line (the file open to others)."""

    file: Path
    opens: tuple[str, ...]
    _keys: tuple[x25519.Identity, ...] = field(repr=False, compare=False)
    warnings: tuple[str, ...] = field(default=(), compare=False)

    def describe(self) -> str:
        return f"{self.file} holds {', '.join(short(k) for k in self.opens)}"


_KEY_FORMAT = "AGE-SECRET-KEY-1… lines, # comments, as age-keygen writes"


def _read_identity_text(path: Path) -> tuple[str, int]:
    """The file's text, and its permission bits (of the file read: no other
    name looked up between)."""
    try:
        with open(path, "rb") as f:
            mode = stat.S_IMODE(os.fstat(f.fileno()).st_mode)
            raw = f.read(MAX_IDENTITY_FILE + 1)
    except FileNotFoundError:
        raise IdentityFileError(
            path, "no such file", "give --identity the age identity file"
        ) from None
    except IsADirectoryError:
        raise IdentityFileError(
            path, "is a folder", "give --identity the age identity file"
        ) from None
    except OSError as err:
        raise IdentityFileError(
            path, f"cannot be read: {err.strerror}", "check its permissions"
        ) from None
    if len(raw) > MAX_IDENTITY_FILE or raw.startswith(MAGIC):
        what = "is itself age-encrypted" if raw.startswith(MAGIC) else "is too large"
        raise IdentityFileError(path, f"{what}, not an identity file", _KEY_FORMAT)
    try:
        return raw.decode("utf-8"), mode
    except UnicodeDecodeError:
        raise IdentityFileError(path, "is not text", _KEY_FORMAT) from None


def _unprotected(path: Path, mode: int) -> tuple[str, ...]:
    """The warning for an identity file others than its owner may read or
    change (as ssh's for a private key; ssh refuses it, but a restore at 3 a.m.
    must not wait for a chmod): none for 0600 or 0400."""
    if not mode & 0o077:
        return ()
    return (
        f"identity file {path} is open to others than its owner (mode {mode:04o}): whoever "
        f"can read it can open every copy sealed to its keys; chmod 600 {path}",
    )


def _identity_line(path: Path, n: int, line: str) -> x25519.Identity:
    # The line itself is never shown: it may be a secret, mistyped or not.
    if line.startswith("AGE-PLUGIN-"):
        raise IdentityFileError(
            path, f"line {n} is a plugin identity", "only X25519 keys are supported"
        )
    if not line.upper().startswith(_SECRET_PREFIX):
        raise IdentityFileError(path, f"line {n} is not an age secret key", _KEY_FORMAT)
    try:
        return x25519.Identity.from_str(line)
    except pyrage.IdentityError:
        raise IdentityFileError(
            path, f"line {n} is not a valid age X25519 secret key", "is it cut short?"
        ) from None


def load_identities(path: Path) -> Identities:
    """The keys of an age identity file (``AGE-SECRET-KEY-1…`` lines, ``#``
    comments, blank lines); a one-line ``IdentityFileError`` naming the file
    for a missing, unreadable or keyless one. A file open to others is used,
    and said in ``warnings`` for the client to show."""
    keys: dict[str, x25519.Identity] = {}
    text, mode = _read_identity_text(path)
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if line and not line.startswith("#"):
            key = _identity_line(path, n, line)
            keys.setdefault(str(key.to_public()), key)
    if not keys:
        raise IdentityFileError(path, "holds no age secret key", _KEY_FORMAT)
    return Identities(path, tuple(keys), tuple(keys.values()), _unprotected(path, mode))


def identity_needed(what: str, sealed_to: str | None) -> IdentityNeeded:
    """The one line a read without ``--identity`` says: the key it needs."""
    to = f"sealed to {sealed_to}" if sealed_to else "sealed"
    return IdentityNeeded(
        f"{what} is {to}: give --identity FILE, an age identity file with its key"
    )


# --- the streams ---------------------------------------------------------------


class SealError(ColdkeepError):
    """Sealing could not finish: the source was not what the caller said."""


class SealedTruncated(ColdkeepError):
    """A sealed stream ends before its recorded length."""


class SealedAltered(ColdkeepError):
    """A sealed stream fails age's authentication, or is not an age stream."""


class _Window:
    """The next ``limit`` bytes of ``src`` (to its end when None), as pyrage reads
    them (8 KiB asks), served from 1 MiB reads through the rate cap and the
    cancel token, hashed as they pass when ``hashed``."""

    def __init__(
        self, src: Readable, limiter: RateLimiter, cancel: CancelToken, *, hashed: bool
    ) -> None:
        self.src, self.limiter, self.cancel = src, limiter, cancel
        self.sha = hashlib.sha256() if hashed else None
        self.limit: int | None = None
        self.got = 0  # bytes handed out in this window
        self.ended = False  # the source ended (before the window's limit, if any)
        self.block, self.at = b"", 0
        self.failure: BaseException | None = None
        self.head = b""  # the first bytes of the window: is it age at all?

    def start(self, limit: int | None) -> None:
        self.limit, self.got = limit, 0
        self.head = b""

    def _fill(self) -> None:
        self.cancel.check()
        want = READ_CHUNK if self.limit is None else min(READ_CHUNK, self.limit - self.got)
        self.block, self.at = (self.src.read(want) if want > 0 else b""), 0
        self.ended = want > 0 and not self.block
        self.limiter.take(len(self.block), self.cancel)
        if self.sha is not None:
            self.sha.update(self.block)

    def read(self, n: int = -1) -> bytes:
        # pyrage turns an exception raised here into its own error with the type
        # in the text: kept, and raised as itself once pyrage returns.
        try:
            if self.at >= len(self.block):
                self._fill()
            end = len(self.block) if n < 0 else self.at + n
            piece = self.block[self.at : end]
            self.at += len(piece)
            self.got += len(piece)
            if len(self.head) < len(MAGIC):
                self.head += piece[: len(MAGIC) - len(self.head)]
            return piece
        except BaseException as err:
            self.failure = self.failure or err
            raise

    def left_over(self) -> bool:
        """Whether ``src`` has bytes past the window (read no further than one)."""
        return self.at < len(self.block) or bool(self.src.read(1))


def _write_all(out: Writable, data: bytes) -> None:
    done = 0
    while done < len(data):
        k = out.write(data[done:] if done else data)
        if not k:
            raise OSError(f"the output took no bytes ({k!r})")
        done += k


class _Tee:
    """Where pyrage writes: ``out``, counted and hashed, its first ``skip``
    bytes dropped."""

    def __init__(self, out: Writable, skip: int = 0) -> None:
        self.out = out
        self.sha = hashlib.sha256()
        self.n = 0
        self.skip = skip
        self.failure: BaseException | None = None

    def write(self, data: bytes) -> int:
        # pyrage drops an exception raised by the first write of a stream (the
        # header's) and returns as if it had sealed: kept, and raised after.
        try:
            kept = data
            if self.skip:
                kept, self.skip = data[self.skip :], max(0, self.skip - len(data))
            _write_all(self.out, kept)
            self.sha.update(kept)
            self.n += len(kept)
            return len(data)
        except BaseException as err:
            self.failure = self.failure or err
            raise


def _through(run: Callable[[], object], *ends: _Window | _Tee) -> None:
    """``run`` (a pyrage call), an error of our own reader or writer raised as
    itself, whatever pyrage made of it or of its absence."""
    try:
        run()
    finally:
        for end in ends:
            if end.failure is not None:
                raise end.failure


@dataclass(frozen=True)
class Sealed:
    """One sealing pass: what was read (``plain``: size and sha256, what restore
    checks), what was written (``sealed``: the object's size and sha256, what
    the server reads back), and each plaintext span beside its age stream."""

    plain: Digest
    sealed: Digest
    pieces: tuple[tuple[Span, Span], ...]

    def locate(self, member: Span) -> tuple[Span, int]:
        """Where the stream holding ``member`` (a plaintext span that ends one of
        the pieces) lies in the object, and how many plaintext bytes of it come
        before the member (``open_sealed``'s ``skip``)."""
        for p, s in self.pieces:
            if p.offset <= member.offset and p.offset + p.length == member.offset + member.length:
                return s, member.offset - p.offset
        raise KeyError(member)


def tile(size: int, members: Sequence[Span]) -> tuple[Span, ...]:
    """A file of ``size`` bytes cut after each of ``members`` (a bundle's spans):
    each member's span taking the bytes between it and the member before (its
    tar header), and what follows the last member (the tar's end, the index)
    one span of its own, in order."""
    out: list[Span] = []
    at = 0
    for m in sorted(members, key=lambda s: (s.offset, s.length)):
        if m.offset < at or m.length < 0 or m.offset + m.length > size:
            raise ValueError(f"span {m} overlaps another or leaves the {size} bytes")
        out.append(Span(at, m.offset + m.length - at))
        at = m.offset + m.length
    if at < size or not out:
        out.append(Span(at, size - at))  # an empty file is one empty stream, not none
    return tuple(out)


def seal_spans(
    src: Readable,
    out: Writable,
    recipients: RecipientSet,
    spans: Sequence[Span] | None,
    *,
    what: str,
    cancel: CancelToken,
    limiter: RateLimiter = UNLIMITED,
) -> Sealed:
    """``src`` (from its current offset) sealed into ``out``: one age stream per
    span of ``spans`` (which tile it from 0, as ``tile`` cuts it), or, with None,
    one stream of all of it. A source shorter or longer than its spans is a
    ``SealError`` naming ``what``. Synchronous: run it in a worker thread."""
    window = _Window(src, limiter, cancel, hashed=True)
    tee = _Tee(out)
    pieces: list[tuple[Span, Span]] = []
    at = 0
    if spans is not None and not spans:
        raise ValueError("no spans: an empty file is one empty span (tile(0, []))")
    for span in spans if spans is not None else (None,):
        if span is not None and span.offset != at:
            raise ValueError(f"span {span} does not start where the one before ended ({at})")
        start = tee.n
        _seal_one(window, tee, recipients, span.length if span is not None else None)
        if span is not None and window.got < span.length:
            raise SealError(f"{what}: ended at byte {at + window.got}, inside the span {span}")
        plain = span if span is not None else Span(0, window.got)
        pieces.append((plain, Span(start, tee.n - start)))
        at += plain.length
    window.start(None)
    if spans is not None and window.left_over():
        raise SealError(f"{what}: is longer than its spans' {at} bytes (did it change?)")
    assert window.sha is not None
    return Sealed(
        Digest(at, window.sha.hexdigest()), Digest(tee.n, tee.sha.hexdigest()), tuple(pieces)
    )


def seal_path(
    src: Path,
    out: Path,
    recipients: RecipientSet,
    spans: Sequence[Span] | None,
    *,
    root: Path,
    cancel: CancelToken,
    limiter: RateLimiter = UNLIMITED,
) -> Sealed:
    """The file ``src`` (reached beneath ``root``, never through a link) sealed
    into a new file ``out`` (a scratch name under ``root``), as ``seal_spans``
    seals it (``spans``: a bundle's members, which ``tile`` cuts it around).
    Synchronous: run it in a worker thread."""
    fd = open_file(src, os.O_RDONLY, root=root)
    with os.fdopen(fd, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        tiles = None if spans is None else tile(size, spans)
        out_fd = open_file(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, root=root)
        with os.fdopen(out_fd, "wb") as w:
            return seal_spans(
                f, w, recipients, tiles, what=str(src), cancel=cancel, limiter=limiter
            )


def _seal_one(window: _Window, tee: _Tee, recipients: RecipientSet, length: int | None) -> None:
    """The next ``length`` bytes of the window's source (all that is left, with
    None) as one age stream written to ``tee``."""
    window.start(length)
    _through(lambda: pyrage.encrypt_io(_io(window), _io(tee), recipients._parsed), window, tee)


def _io(end: _Window | _Tee) -> io.BufferedIOBase:
    # pyrage calls read(n) / write(b) and nothing else; its stubs ask for a file.
    return cast(io.BufferedIOBase, end)


def _opening_failed(
    err: Exception,
    window: _Window,
    length: int,
    identities: Identities,
    what: str,
    sealed_to: str | None,
) -> ColdkeepError:
    """What a failed ``decrypt_io`` means, in the operator's one line."""
    if window.ended and window.got < length:
        return SealedTruncated(
            f"{what}: its sealed copy ends after {window.got:,} of its {length:,} bytes"
            " (cut short, or not the object recorded)"
        )
    if not window.head.startswith(MAGIC[: len(window.head)]) or length < len(MAGIC):
        return SealedAltered(f"{what}: is not an age stream (was it shipped unsealed?)")
    if isinstance(err, pyrage.DecryptError) and "No matching keys" in str(err):
        to = f"sealed to {sealed_to}" if sealed_to else "sealed to recipients not recorded"
        # An altered stanza reads the same to age: the message says so.
        return WrongIdentity(
            f"{what} is {to}; {identities.describe()} (give --identity a file with one of"
            " its keys; if it has one, the object's header is damaged)"
        )
    said = (str(err).splitlines() or [type(err).__name__])[0].rstrip(".")  # age's, one line
    return SealedAltered(
        f"{what}: its sealed copy fails age's authentication ({said}): altered or damaged"
    )


def open_sealed(
    src: Readable,
    out: Writable,
    identities: Identities,
    *,
    length: int,
    what: str,
    sealed_to: str | None,
    cancel: CancelToken,
    limiter: RateLimiter = UNLIMITED,
    skip: int = 0,
) -> Digest:
    """One age stream of ``length`` bytes read from ``src`` (a whole object, or a
    member's stream read by one ranged GET), opened into ``out`` but for its
    first ``skip`` bytes (a member's tar header: ``Sealed.locate``); the size
    and sha256 of what was written. ``sealed_to`` (the recorded set, described)
    is what a wrong identity's message names. On error ``out`` holds nothing to
    trust. Synchronous: run it in a worker thread."""
    window = _Window(src, limiter, cancel, hashed=False)
    window.start(length)
    tee = _Tee(out, skip)
    try:
        _through(lambda: pyrage.decrypt_io(_io(window), _io(tee), identities._keys), window, tee)
    except (pyrage.DecryptError, OSError) as err:
        if err is window.failure or err is tee.failure:
            raise
        raise _opening_failed(err, window, length, identities, what, sealed_to) from None
    if window.got < length:
        raise _opening_failed(SealError("short"), window, length, identities, what, sealed_to)
    return Digest(tee.n, tee.sha.hexdigest())


# --- new recipients ------------------------------------------------------------


@dataclass(frozen=True)
class Current:
    """Sealed to the recipients configured now: nothing to do."""


@dataclass(frozen=True)
class Reseal:
    """To be sealed again to the current set and uploaded under a new key:
    from the local copy, or from the remote one (opened with ``--identity``
    when it is sealed)."""

    source: Literal["local", "remote"]
    needs_identity: bool
    reason: str


RekeyStep = Current | Reseal


def rekey_step(sealed_to: str | None, current: RecipientSet, *, local_copy: bool) -> RekeyStep:
    """What ``rekey`` must do for one object, given the fingerprint of the set
    it was sealed to (None: stored unsealed). There is no re-wrap in place:
    pyrage never hands out a stream's file key, the only thing a new stanza
    could wrap, so new recipients get the plaintext sealed again."""
    if sealed_to == current.fingerprint:
        return Current()
    was = "stored unsealed" if sealed_to is None else f"sealed to set {sealed_to}"
    source: Literal["local", "remote"] = "local" if local_copy else "remote"
    needs_identity = sealed_to is not None and not local_copy
    whence = "the local copy" if local_copy else "the remote copy"
    if needs_identity:
        whence += ", opened with --identity"
    reason = (
        f"{was}, not {current.describe()}: sealed again from {whence}"
        " (an age stream's file key cannot be re-wrapped without opening it)"
    )
    return Reseal(source, needs_identity, reason)
