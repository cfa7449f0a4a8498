"""The bundle format, and the thread-side steps of packing one and unlinking its
sources. Synchronous: run in worker threads, or in worker processes
(bundleprocs.py).

A bundle (``files/<unit>/<YYYY-MM>.<sha12>.tar``) is a plain, uncompressed POSIX
(pax) tar. Its members are small files' own standard gzips, each named
``<relpath>.gz`` with the source's mtime and permission bits, then a last member
``.coldkeep-index.json``: per member the relpath, the data offset and length of
its gzip in the tar, the source's length, sha256, mtime (ns) and mode. ``tar -tvf``
lists a bundle; ``tar -xf`` then ``gunzip -N`` gives every file back with nothing
of coldkeep installed.

Invariants:
- A member's gzip is the bytes ``[offset, offset + length)`` of the tar: reading
  one needs a seek, never the tar's structure (``codec.inflate(span=...)``).
- The index only saves work: everything in it can be had again from the tar
  headers and the gzips (``read_bundle`` falls back to walking the headers when
  the index is missing, damaged or disagrees with them).
- Everything read back is untrusted (a bundle may be copied from anywhere): a
  member name that could leave the live root or is too long for a disk, a span outside
  the file, a relpath twice: that member is refused, by name; the rest is read.
- The name ``<month>.<sha12>.tar`` is the sha256 of the index: two bundles with
  different contents never take each other's name.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import stat
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from ..base.beneath import walks_kept
from ..base.cancel import CancelToken
from ..base.codec import Codec, CorruptGzip, Packed, Span, compress_to_bytes, inflate
from ..base.durable import fsync
from ..base.fsutil import (
    Closer,
    FileIdentity,
    SourceOutcome,
    fsync_dir,
    identity_or_none,
    lease_held,
    open_file,
    rename_noreplace,
    unlink_source,
)
from ..base.ioerror import naming
from ..base.layout import UnsafePath, check_relpath, check_stored_name
from ..base.ratelimit import RateLimiter
from ..base.times import NS_PER_S
from .gzfile import InUse, PlacedNotDurable, Roots, Unarchivable, open_regular

BUNDLE_SUFFIX = ".tar"
# <YYYY-MM>.<sha12>[-n].tar: only such a name under files/ is taken for a bundle
# (a plain file an older, copy-based scheme left there may end in .tar too).
_BUNDLE_NAME = re.compile(r"-?\d{4,5}-\d{2}\.[0-9a-f]{12}(-\d+)?\.tar")
INDEX_NAME = ".coldkeep-index.json"
INDEX_FORMAT = 1
_BLOCK = tarfile.BLOCKSIZE
_RECORD = tarfile.RECORDSIZE
_MAX_NAMES = 1000


@dataclass(frozen=True)
class Member:
    """One file in a bundle, as read back. ``bytes`` and ``sha256`` are None when
    the index could not be used (the tar headers do not carry them)."""

    relpath: str
    span: Span
    mtime_ns: int
    mode: int
    bytes: int | None = None
    sha256: str | None = None


@dataclass
class Contents:
    """What ``read_bundle`` found: the members it could read, and each one it
    refused or could not, by name."""

    members: list[Member] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    index_used: bool = False


@dataclass(frozen=True)
class PackedMember:
    relpath: str
    identity: FileIdentity
    packed: Packed
    span: Span


@dataclass(frozen=True)
class PackedBundle:
    members: list[PackedMember]
    skipped: list[tuple[str, str]]  # (relpath, why): gone, or not a regular file
    unreadable: list[tuple[str, str]]  # (relpath, the error): a read failed; kept live
    index_sha256: str


def is_bundle_name(name: str) -> bool:
    return name.endswith(BUNDLE_SUFFIX) and _BUNDLE_NAME.fullmatch(name) is not None


def _tar_header(name: str, size: int, mtime_ns: int, mode: int) -> bytes:
    """A member's header: plain ustar when everything fits it (what ``tarfile``
    writes then, byte for byte, built directly: tarfile took a tenth of a small
    file's archiving), else tarfile's pax."""
    mtime = mtime_ns // NS_PER_S
    if name.isascii() and len(name) <= 100 and 0 <= mtime < _OCTAL_11 and size < _OCTAL_11:
        head = b"%s%07o\0%s%011o\0%011o\0        0" % (
            name.encode().ljust(100, b"\0"),
            stat.S_IMODE(mode) & 0o777,
            _NO_IDS,
            size,
            mtime,
        )
        block = head + _USTAR_TAIL
        return head[:148] + b"%06o\0" % sum(block) + block[155:]
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = mtime_ns // NS_PER_S  # pax keeps one before 1970
    info.mode = stat.S_IMODE(mode) & 0o777
    info.type = tarfile.REGTYPE
    return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")


_OCTAL_11 = 8**11  # what an 11-digit octal field holds
_NO_IDS = b"0000000\0" * 2  # uid, gid
# linkname, then the "ustar" magic and version 00, then uname, gname, devmajor,
# devminor, prefix and the padding to 512, all empty.
_USTAR_TAIL = b"\0" * 100 + b"ustar\x0000" + b"\0" * 247


def _write_member(out: io.BufferedWriter, name: str, data: bytes, mtime_ns: int, mode: int) -> int:
    """Header, data, padding; returns where the data starts."""
    out.write(_tar_header(name, len(data), mtime_ns, mode))
    offset = out.tell()
    out.write(data)
    out.write(b"\0" * (-len(data) % _BLOCK))
    return offset


def index_document(members: list[PackedMember]) -> bytes:
    doc = {
        "coldkeep_bundle": INDEX_FORMAT,
        "members": [
            {
                "relpath": m.relpath,
                "offset": m.span.offset,
                "length": m.span.length,
                "bytes": m.packed.bytes,
                "sha256": m.packed.sha256,
                "mtime_ns": m.identity.mtime_ns,
                "mode": m.identity.mode,
            }
            for m in members
        ],
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def _member_of(
    src: Path, root: Path, codec: Codec, limiter: RateLimiter, cancel: CancelToken
) -> tuple[bytes, FileIdentity, Packed]:
    """One source's gzip, in memory: opened beneath ``root`` without following
    links, read once through the hashes and the compressor."""
    src_fd, ident = open_regular(src, root, lease=True)
    try:
        leased = lease_held(src_fd)
        data, packed = compress_to_bytes(
            src_fd,
            name=os.fsencode(src.name),
            mtime_ns=ident.mtime_ns,
            mode=ident.mode,
            codec=codec,
            limiter=limiter,
            cancel=cancel,
            src_path=src,
        )
        if leased and not lease_held(src_fd):
            raise InUse(f"{src} was opened by another process while it was read; left live")
    finally:
        os.close(src_fd)
    return data, ident, packed


def pack(
    partial: Path,
    sources: list[tuple[str, Path]],
    roots: Roots,
    codec: Codec,
    limiter: RateLimiter,
    cancel: CancelToken,
) -> PackedBundle:
    """Steps 1–2 at bundle scale: each source (relpath, path under ``roots.src``)
    opened without following links, hashed while compressed into its member, the
    index last, the partial fsynced. A source gone or no longer a regular file is
    skipped (and said why), one that cannot be read is left out with its error;
    a write error raises (the caller removes the partial)."""
    members: list[PackedMember] = []
    skipped: list[tuple[str, str]] = []
    unreadable: list[tuple[str, str]] = []
    # A new name (random): O_EXCL, so nothing already there is ever written to.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    fd = open_file(partial, flags, root=roots.dest, create_parents=True)
    with naming(partial), os.fdopen(fd, "wb") as out, walks_kept(roots.src):
        for relpath, src in sources:
            cancel.check()
            try:
                data, ident, packed = _member_of(src, roots.src, codec, limiter, cancel)
            except FileNotFoundError:
                skipped.append((relpath, "gone"))
                continue
            except Unarchivable as err:
                skipped.append((relpath, str(err)))
                continue
            except InUse:
                skipped.append((relpath, "open"))
                continue
            except OSError as err:
                # Its bytes are in memory until whole: the partial holds nothing
                # of it, and the others go on (the source is kept).
                unreadable.append((relpath, str(err)))
                continue
            offset = _write_member(out, f"{relpath}.gz", data, ident.mtime_ns, ident.mode)
            members.append(PackedMember(relpath, ident, packed, Span(offset, len(data))))
        index = index_document(members)
        _write_member(
            out, INDEX_NAME, index, max((m.identity.mtime_ns for m in members), default=0), 0o644
        )
        end = out.tell() + 2 * _BLOCK
        out.write(b"\0" * (2 * _BLOCK + (-end % _RECORD)))
        out.flush()
        fsync(out.fileno(), "bundle.partial")
    return PackedBundle(members, skipped, unreadable, hashlib.sha256(index).hexdigest())


def check_packed(
    partial: Path, packed: PackedBundle, limiter: RateLimiter, cancel: CancelToken
) -> str | None:
    """Step 3 at bundle scale: the partial read back as a stranger would (its tar
    headers and index), every member inflated and hashed. None when every member
    is exactly what was read from its source; else what is wrong."""
    contents = read_bundle(partial)
    read = [(m.relpath, m.span, m.bytes, m.sha256) for m in contents.members]
    wrote = [(m.relpath, m.span, m.packed.bytes, m.packed.sha256) for m in packed.members]
    if contents.refused or not contents.index_used or read != wrote:
        problems = "; ".join(contents.refused) or "its index does not list what was written"
        return f"{partial} does not read back as the bundle written: {problems}"
    for m in packed.members:
        try:
            back = inflate(partial, span=m.span, limiter=limiter, cancel=cancel)
        except CorruptGzip as err:
            return f"the member {m.relpath} does not decompress ({err})"
        if (back.bytes, back.sha256) != (m.packed.bytes, m.packed.sha256):
            return (
                f"the member {m.relpath} decompressed to {back.bytes} bytes / "
                f"{back.sha256[:12]}…, its source read {m.packed.bytes} / {m.packed.sha256[:12]}…"
            )
    return None


def changed_sources(packed: PackedBundle, root: Path) -> set[str]:
    """Step 4 at bundle scale: the relpaths whose source is no longer the file
    that was read (another inode, size or mtime, or more bytes read than it had)."""
    changed: set[str] = set()
    with walks_kept(root):
        for m in packed.members:
            now = identity_or_none(root / m.relpath, root=root)
            if not m.identity.same_file(now) or m.packed.bytes != m.identity.size:
                changed.add(m.relpath)
    return changed


def place(
    partial: Path,
    folder: Path,
    month: str,
    index_sha256: str,
    root: Path,
    taken: frozenset[Path] = frozenset(),
) -> Path:
    """Step 5 at bundle scale: renamed into ``folder`` without replacing anything
    (nor taking a name in ``taken``: one whose copy is only remote now), the
    folder fsynced."""
    for n in range(_MAX_NAMES):
        tag = index_sha256[:12] if n == 0 else f"{index_sha256[:12]}-{n}"
        target = folder / f"{month}.{tag}{BUNDLE_SUFFIX}"
        if target in taken:
            continue
        if rename_noreplace(partial, target, root=root) == "renamed":
            try:
                fsync_dir(folder, root=root, site="bundle.placed")
            except OSError as err:
                raise PlacedNotDurable(target, err) from err
            return target
    raise FileExistsError(f"{folder}: {_MAX_NAMES} bundles named {month}.{index_sha256[:12]}")


def unlink_members(
    members: list[tuple[Path, FileIdentity]], root: Path, closer: Closer
) -> tuple[list[SourceOutcome], dict[Path, OSError]]:
    """Step 7 at bundle scale: each source unlinked if it is still the file
    archived (only the inode checked: ``unlink_source``), then each directory
    that lost one fsynced once. An error on one source (EPERM of an immutable
    file, EIO) leaves that one ``unsettled``, with its error, and the others go
    on: their entries keep source_present for recovery. Each source's last
    descriptor goes to ``closer``, which frees the unlinked inodes meanwhile."""
    results: list[SourceOutcome] = []
    errors: dict[Path, OSError] = {}
    dirs: set[Path] = set()
    with walks_kept(root):
        for src, ident in members:
            try:
                outcome: SourceOutcome = unlink_source(
                    src, ident, root=root, durably=None, closer=closer
                )
            except OSError as err:
                outcome = "unsettled"
                errors[src] = err
            results.append(outcome)
            if outcome == "removed":
                dirs.add(src.parent)
    for folder in sorted(dirs):
        try:
            fsync_dir(folder, root=root, site="bundle.sources_unlinked")
        except OSError:
            # Not durably gone: recovery checks again (the entry stays pending).
            results = [
                "unsettled" if r == "removed" and s.parent == folder else r
                for r, (s, _) in zip(results, members, strict=True)
            ]
    return results, errors


# reading -----------------------------------------------------------------------


def _tar_members(path: Path) -> tuple[list[tarfile.TarInfo], str | None]:
    """Every header the tar yields, up to the first that cannot be read (and why)."""
    infos: list[tarfile.TarInfo] = []
    with path.open("rb") as f, naming(path):
        try:
            tar = tarfile.open(fileobj=f, mode="r:")  # noqa: SIM115 (closed below)
        except tarfile.TarError as err:
            return [], f"not a tar ({err})"
        with tar:
            while True:
                try:
                    info = tar.next()
                except tarfile.TarError as err:
                    return infos, f"its tar headers stop at member {len(infos) + 1} ({err})"
                if info is None:
                    return infos, None
                infos.append(info)


def _checked_relpath(name: str) -> str:
    check_relpath(name)
    for segment in name.split("/"):
        check_stored_name(segment)
    return name


def _from_index(raw: bytes) -> list[Member]:
    """The index's members (``ValueError`` if it is not a usable index)."""
    doc = json.loads(raw)
    if not isinstance(doc, dict) or doc.get("coldkeep_bundle") != INDEX_FORMAT:
        raise ValueError("not a coldkeep bundle index of a known format")
    found: list[Member] = []
    for listed in doc.get("members", []):
        item = listed if isinstance(listed, dict) else {}
        n = [item.get(k) for k in ("offset", "length", "bytes", "mtime_ns", "mode")]
        ints = [v for v in n if isinstance(v, int) and not isinstance(v, bool)]
        mtime_at = 3  # an mtime before 1970 is negative; every other number is not
        if any(v < 0 for i, v in enumerate(ints) if i != mtime_at):
            ints = []
        rel, sha = item.get("relpath"), item.get("sha256")
        if len(ints) < len(n) or not isinstance(rel, str) or not isinstance(sha, str):
            raise ValueError(f"a member is not what an index lists: {item!r:.80}")
        offset, length, size, mtime_ns, mode = ints
        found.append(Member(rel, Span(offset, length), mtime_ns, mode, size, sha))
    return found


def read_bundle(path: Path) -> Contents:
    """A bundle's members, from its index when that agrees with the tar headers,
    else from the headers alone. Each member is checked (``_checked_relpath``,
    its span inside the file, its relpath once); one that fails is refused by
    name and the rest is read. A read error raises."""
    infos, broken = _tar_members(path)
    size = path.stat().st_size
    contents = Contents()
    if broken:
        contents.refused.append(broken)
    on_tar = {i.name: i for i in infos if i.isreg()}
    members = _members_from_index(path, on_tar) if INDEX_NAME in on_tar else None
    if members is not None:
        contents.index_used = True
    else:
        members = [
            Member(
                i.name.removesuffix(".gz"),
                Span(i.offset_data, i.size),
                int(i.mtime) * NS_PER_S,
                i.mode,
            )
            for i in infos
            if i.isreg() and i.name.endswith(".gz")
        ]
    seen: set[str] = set()
    for m in members:
        try:
            _checked_relpath(m.relpath)
        except UnsafePath as err:
            contents.refused.append(f"member refused: {err}")
            continue
        if m.span.offset + m.span.length > size:
            contents.refused.append(f"member {m.relpath} runs past the end of the file")
        elif m.relpath in seen:
            contents.refused.append(f"member {m.relpath} appears twice; the second refused")
        else:
            seen.add(m.relpath)
            contents.members.append(m)
    return contents


def _members_from_index(path: Path, on_tar: dict[str, tarfile.TarInfo]) -> list[Member] | None:
    """The index's members if it reads and agrees with the tar headers."""
    info = on_tar[INDEX_NAME]
    if info.size > 64 << 20:
        return None
    with path.open("rb") as f, naming(path):
        f.seek(info.offset_data)
        raw = f.read(info.size)
    try:
        members = _from_index(raw)
    except (ValueError, RecursionError):
        return None
    for m in members:
        tar = on_tar.get(f"{m.relpath}.gz")
        if tar is None or (tar.offset_data, tar.size) != (m.span.offset, m.span.length):
            return None
    return members
