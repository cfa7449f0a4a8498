"""The per-file protocol: how one live file becomes a verified gzip, and back.

Archiving (``archive_file``): steps 1–5 in one trip to a worker thread (each step
announced from there), streamed in 1 MiB chunks through the rate cap:

  1. ``lstat`` the source: a regular file, or refused (symlinks, FIFOs, devices and
     directories are never opened, let alone followed); it is then opened with
     O_NOFOLLOW and its inode checked against the ``lstat``, and a write lease
     taken on it where the kernel allows (``InUse``: another process has it open,
     or opens it during the read, which then stops at once: left live);
  2. stream it through sha256 (and CRC-32, and the compressor) into
     ``<dest>.partial``, then fsync;                                ->  partial_written
  3. stream the partial back through gunzip and sha256: length and hash must equal
     step 2's, or the partial is deleted, the source kept: ``verify_failed``;
                                                                     ->  verified
  4. ``lstat`` the source again: any change of dev, ino, size, mtime or ctime (or
     more bytes read than it had) discards the partial: ``changed`` (the next
     pass archives the new bytes);
  5. give the partial the source's mtime, rename it into place WITHOUT replacing
     anything (an existing name gets the next version name, ``x.<sha12>.gz``),
     fsync the directory.                                           ->  renamed

The caller commits the manifest entry (6) and unlinks the source after checking
its identity (7): see filemove.py. What a crash leaves, and who cleans it up:

  before 2 done      a ``.partial``, or nothing        sweep_partials deletes it
  after 2, before 5  a ``.partial``                    sweep_partials deletes it
  after 5, before 6  a placed gzip with no entry       adopt_orphan re-verifies it
  after 6, before 7  entry + gzip + the source         the source is unlinked
                                                        after its identity check

No temporary name ends in an included extension (they end in ``.partial`` and
``.restore-partial``), so the application's scanners never read a half-written
file, and coldkeep never archives its own temporaries.

Results are closed, typed alternatives; exceptions are for I/O that proves
nothing (a read error is never taken for corruption) and for refusals.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from ..base.cancel import CancelToken, in_thread
from ..base.codec import (
    Codec,
    CorruptGzip,
    Digest,
    Packed,
    Progress,
    Span,
    compress_fd,
    digest_fd,
    inflate,
    read_gzip_header,
)
from ..base.durable import Site, fsync
from ..base.errors import ColdkeepError
from ..base.fsutil import (
    FileIdentity,
    create_unless_there,
    fsync_dir,
    identity_of,
    identity_or_none,
    kind_of,
    lease_held,
    open_file,
    place_noreplace,
    rename_noreplace,
    set_mtime,
    take_lease,
    unlink_if_present,
)
from ..base.ioerror import naming
from ..base.layout import PARTIAL_SUFFIX, partial_of, restore_partial_of, versioned_name
from ..base.ratelimit import UNLIMITED, RateLimiter
from ..base.steps import StepHook, ThreadStep, no_step, thread_step
from .reader import CachedCopy


@dataclass(frozen=True)
class Roots:
    """Where a file's source and its gzip live (live_root and archive_root, or the
    gzip's and the restore target's roots): every path under them is reached
    beneath them (beneath.py), never through a link."""

    src: Path
    dest: Path
    # Names under dest the manifest still holds for files whose local copy was
    # dropped (the only copy is remote): a new gzip never takes one.
    taken: frozenset[Path] = frozenset()


# A second version of a path takes <name>.<sha12>.gz; a third with the same sha12
# prefix (the same bytes archived again after a restore) <name>.<sha12>-<n>.gz.
_MAX_VERSION_NAMES = 1000


class Unarchivable(ColdkeepError, ValueError):
    """Not a regular file: refused, never opened or followed."""


class InUse(ColdkeepError):
    """Another process has the source open (its write lease was refused, or broke
    while it was read): left live, untouched, for a later pass."""


class PlacedNotDurable(ColdkeepError, OSError):
    """Step 5 renamed the gzip into place, then the fsync of its directory failed:
    its name may not survive a power loss. Nothing is committed on the strength
    of it and the source is kept; the gzip stays where it is, an orphan that
    recovery re-verifies against the source (and makes durable) before adopting."""

    def __init__(self, gz: Path, cause: OSError) -> None:
        super().__init__(
            cause.errno,
            f"{cause.strerror}: the fsync of {gz.parent} failed after {gz.name} was placed "
            "there; the source is kept and the gzip left for recovery to settle",
            str(gz.parent),
        )
        self.gz = gz


@dataclass(frozen=True)
class ArchiveOk:
    kind: ClassVar[Literal["ok"]] = "ok"
    dest: Path
    bytes: int
    sha256: str
    gz_bytes: int
    prefix_sha256: str | None
    identity: FileIdentity
    prefix: FileIdentity | None = None  # the plain file whose length prefix_sha256 covers
    seek_points: str | None = None  # the gzip's (codec.encode_points)


@dataclass(frozen=True)
class VerifyFailed:
    kind: ClassVar[Literal["verify_failed"]] = "verify_failed"
    detail: str


@dataclass(frozen=True)
class Changed:
    kind: ClassVar[Literal["changed"]] = "changed"
    detail: str


ArchiveResult = ArchiveOk | VerifyFailed | Changed


@dataclass(frozen=True)
class Verified:
    kind: ClassVar[Literal["verified"]] = "verified"
    bytes: int
    sha256: str


@dataclass(frozen=True)
class Mismatch:
    kind: ClassVar[Literal["mismatch"]] = "mismatch"
    detail: str


@dataclass(frozen=True)
class Corrupt:
    kind: ClassVar[Literal["corrupt"]] = "corrupt"
    detail: str


VerifyResult = Verified | Mismatch | Corrupt


@dataclass(frozen=True)
class Stale:
    """An orphan that decompresses cleanly to OTHER bytes than its source: an
    earlier version, verified before it was placed, that may exist nowhere else."""

    kind: ClassVar[Literal["stale"]] = "stale"
    bytes: int
    sha256: str
    gz_bytes: int
    mtime_ns: int
    mode: int | None = None


OrphanResult = ArchiveOk | Stale | Corrupt | Changed


@dataclass(frozen=True)
class Restored:
    kind: ClassVar[Literal["restored"]] = "restored"
    identity: FileIdentity


@dataclass(frozen=True)
class Exists:
    kind: ClassVar[Literal["exists"]] = "exists"


RestoreResult = Restored | Mismatch | Exists


@dataclass(frozen=True)
class RestoreExpect:
    """What the manifest says the restored file must be."""

    bytes: int
    sha256: str
    mtime_ns: int
    mode: int


def _short(d: Digest) -> str:
    return f"{d.bytes} bytes / {d.sha256[:12]}…"


def open_regular(path: Path, root: Path, *, lease: bool = False) -> tuple[int, FileIdentity]:
    """Steps 1 and the open: ``lstat``, refuse non-regular files, open without
    following (nothing on the way from ``root`` either), and check the open file
    is the one ``lstat`` saw. ``lease``: a write lease taken on it too, held while
    the descriptor is open (``InUse``: another process has it open)."""
    ident = identity_of(path, root=root)
    if not ident.is_regular:
        raise Unarchivable(f"{path} is {kind_of(ident.mode)}; only regular files are archived")
    try:
        fd = open_file(path, os.O_RDONLY | os.O_NONBLOCK, root=root)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise Unarchivable(f"{path} became a symlink; refused") from err
        if err.errno in (errno.EAGAIN, errno.EWOULDBLOCK):  # another's lease on it
            raise InUse(f"{path} is open in another process; left live") from err
        raise
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != (ident.dev, ident.ino) or not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise Unarchivable(f"{path} was replaced while it was opened; refused")
    if lease and take_lease(fd) == "open":
        os.close(fd)
        raise InUse(f"{path} is open in another process; left live")
    return fd, ident


def lease_guard(fd: int, path: Path, progress: Progress | None) -> Progress:
    """A progress callback that also checks, at each chunk, that no other process
    started opening the file (its lease broke): the read stops at once (``InUse``)
    and the lease goes with the descriptor, so the opener waits one chunk at
    most. Where no lease is held, nothing is checked."""
    leased = [lease_held(fd)]

    def guarded(n: int) -> None:
        if leased[0] and not lease_held(fd):
            raise InUse(f"{path} was opened by another process while it was read; left live")
        if progress is not None:
            progress(n)

    return guarded


def _discard(path: Path, root: Path, durably: Site) -> None:
    """A restore partial removed after an error: its intent may be cleared next,
    so its directory is fsynced too (as that fsync site), best effort (the error
    being handled is the one to report)."""
    if unlink_if_present(path, root=root):
        with contextlib.suppress(OSError):
            fsync_dir(path.parent, root=root, site=durably)


def _create_archive_partial(partial: Path, root: Path) -> int:
    """A new ``<dest>.partial`` under the archive, created O_EXCL: never through a
    link, never truncating a file. A name already there is a crash's leftover
    (only coldkeep writes under ``files/``, under its lock): it goes first."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    try:
        return open_file(partial, flags, root=root, create_parents=True)
    except FileExistsError:
        unlink_if_present(partial, root=root)
        return open_file(partial, flags, root=root, create_parents=True)


class PartialTaken(ColdkeepError, FileExistsError):
    """``<target>.restore-partial`` exists and is not this restore's: refused, that
    file untouched."""


def _pack(
    src: Path,
    partial: Path,
    roots: Roots,
    codec: Codec,
    limiter: RateLimiter,
    cancel: CancelToken,
    prefix_bytes: int | None,
    progress: Progress | None,
) -> tuple[FileIdentity, Packed]:
    fd, ident = open_regular(src, roots.src, lease=True)
    try:
        out = _create_archive_partial(partial, roots.dest)
        packed = compress_fd(
            fd,
            partial,
            dst_fd=out,
            name=os.fsencode(src.name),
            mtime_ns=ident.mtime_ns,
            mode=ident.mode,
            codec=codec,
            limiter=limiter,
            cancel=cancel,
            prefix_bytes=prefix_bytes,
            progress=lease_guard(fd, src, progress),
            src_path=src,
        )
    finally:
        os.close(fd)
    return ident, packed


def _check_and_place(
    src: Path, partial: Path, dest: Path, roots: Roots, ident: FileIdentity, packed: Packed
) -> Path | Changed:
    """Step 4, then step 5 (one trip to a thread): the source is still the file
    that was hashed, or nothing is placed."""
    now = identity_or_none(src, root=roots.src)
    if not ident.same_file(now) or packed.bytes != ident.size:
        was = now.describe() if now else "gone"
        return Changed(
            f"{src} changed while it was archived ({ident.describe()} -> {was}, "
            f"{packed.bytes} bytes read)"
        )
    return _place(partial, dest, roots, packed.sha256, ident.mtime_ns)


def _place(partial: Path, dest: Path, roots: Roots, sha256: str, mtime_ns: int) -> Path:
    """Step 5: the source's mtime, then into place under the first free name."""
    root = roots.dest
    set_mtime(partial, mtime_ns, root=root)
    for n in range(_MAX_VERSION_NAMES):
        target = dest if n == 0 else dest.with_name(versioned_name(dest.name, sha256, n - 1))
        if target in roots.taken:
            continue
        if rename_noreplace(partial, target, root=root) == "renamed":
            try:
                fsync_dir(target.parent, root=root, site="gzip.placed")
            except OSError as err:
                raise PlacedNotDurable(target, err) from err
            return target
    raise FileExistsError(f"{dest}: {_MAX_VERSION_NAMES} versions exist; refusing to add more")


def _archive(
    src: Path,
    dest: Path,
    roots: Roots,
    codec: Codec,
    limiter: RateLimiter,
    cancel: CancelToken,
    step: ThreadStep,
    prefix_of: Path | None,
    progress: Progress | None,
) -> ArchiveResult:
    """Steps 1–5 on this worker thread, each announced through ``step`` (which
    returns once the hook is done): the partial is removed on any way out but
    the rename."""
    partial = partial_of(dest)
    info = {"src": src, "dest": dest, "partial": partial}
    try:
        prefix = identity_or_none(prefix_of, root=roots.dest) if prefix_of else None
        if prefix is not None and not prefix.is_regular:
            prefix = None
        size = prefix.size if prefix else None
        ident, packed = _pack(src, partial, roots, codec, limiter, cancel, size, progress)
        step("partial_written", info)
        # Step 3: a gzip that does not decompress is the same verdict as one that
        # decompresses to other bytes, never an I/O failure.
        try:
            back = inflate(partial, limiter=limiter, cancel=cancel)
        except CorruptGzip as err:
            unlink_if_present(partial, root=roots.dest)
            return VerifyFailed(f"{partial} does not decompress ({err})")
        if (back.bytes, back.sha256) != (packed.bytes, packed.sha256):
            unlink_if_present(partial, root=roots.dest)
            return VerifyFailed(
                f"{partial} decompressed to {_short(back)}, the source read {_short(packed)}"
            )
        step("verified", info)
        cancel.check()  # the last point where stopping leaves nothing behind
        placed = _check_and_place(src, partial, dest, roots, ident, packed)
        if isinstance(placed, Changed):
            unlink_if_present(partial, root=roots.dest)
            return placed
    except BaseException:
        # Suppressed: the error being raised is the one to report, and a partial
        # left behind is swept by the next pass.
        with contextlib.suppress(OSError):
            unlink_if_present(partial, root=roots.dest)
        raise
    step("renamed", {**info, "dest": placed})
    return ArchiveOk(
        placed, packed.bytes, packed.sha256, packed.gz_bytes, packed.prefix_sha256, ident, prefix,
        packed.seek_points,
    )  # fmt: skip


async def archive_file(
    src: Path,
    dest: Path,
    *,
    roots: Roots,
    codec: Codec,
    limiter: RateLimiter = UNLIMITED,
    cancel: CancelToken | None = None,
    step: StepHook = no_step,
    prefix_of: Path | None = None,
    progress: Progress | None = None,
) -> ArchiveResult:
    """Archive ``src`` as the gzip ``dest`` (steps 1–5), each reached beneath its
    root in ``roots``, in one trip to a worker thread. ``ok`` carries the path the
    gzip was placed at: ``dest``, or a version name when ``dest`` was taken.

    ``prefix_of``: a path under ``roots.dest`` that, if it is a plain file, has
    the source's first N bytes (N its length) hashed in the same read
    (``ok.prefix_sha256``, with that file's identity in ``ok.prefix``)."""
    cancel = cancel or CancelToken()
    announce = thread_step(step, asyncio.get_running_loop())
    return await in_thread(
        cancel, _archive, src, dest, roots, codec, limiter, cancel, announce, prefix_of, progress
    )


async def verify_gzip(
    gz: Path,
    expect: Digest | None = None,
    *,
    span: Span | None = None,
    limiter: RateLimiter = UNLIMITED,
    cancel: CancelToken | None = None,
    progress: Progress | None = None,
) -> VerifyResult:
    """Re-read ``gz`` (its ``span``: a bundle member) through gunzip and sha256;
    compare with ``expect`` if given. A read error raises: it says nothing about
    the gzip."""
    cancel = cancel or CancelToken()
    try:
        got = await in_thread(
            cancel, inflate, gz, span=span, limiter=limiter, cancel=cancel, progress=progress
        )
    except CorruptGzip as err:
        return Corrupt(str(err))
    if expect is not None and (got.bytes, got.sha256) != (expect.bytes, expect.sha256):
        where = gz if span is None else f"{gz} (the member at byte {span.offset})"
        return Mismatch(f"{where} decompressed to {_short(got)}, expected {_short(expect)}")
    return Verified(got.bytes, got.sha256)


def _digest_source(
    src: Path, root: Path, limiter: RateLimiter, cancel: CancelToken, prefix_bytes: int | None
) -> tuple[Digest, str | None]:
    fd, _ = open_regular(src, root)
    try:
        return digest_fd(fd, limiter=limiter, cancel=cancel, prefix_bytes=prefix_bytes, path=src)
    finally:
        os.close(fd)


def _remove_durably(path: Path, root: Path, site: Site) -> None:
    unlink_if_present(path, root=root, durably=site)


async def adopt_orphan(
    src: Path,
    gz: Path,
    *,
    roots: Roots,
    identity: FileIdentity,
    limiter: RateLimiter = UNLIMITED,
    cancel: CancelToken | None = None,
    prefix_bytes: int | None = None,
) -> OrphanResult:
    """Decide what a placed gzip with no manifest entry (a crash between steps 5
    and 6) is, by re-reading it and its source (``identity``: its ``lstat`` taken by
    the caller before the check).

    ``ok``: it decompresses to exactly the source's bytes and the source did not
    change: adopt it, nothing is recompressed. ``stale``: it decompresses cleanly
    to other bytes: an earlier version, kept. ``corrupt``: the codec refuses it:
    removed here. ``changed``: the source changed while it was read: left as
    found. A gzip that cannot be READ raises and stays where it is.
    """
    cancel = cancel or CancelToken()
    live, packed = await asyncio.gather(
        in_thread(cancel, _digest_source, src, roots.src, limiter, cancel, prefix_bytes),
        in_thread(cancel, inflate, gz, limiter=limiter, cancel=cancel),
        return_exceptions=True,
    )
    if isinstance(packed, CorruptGzip):
        if isinstance(live, BaseException):
            raise live
        # Not durably: nothing rests on its absence. One a power cut brings back
        # is found and removed again by the next recovery (with or without its
        # source), and the gzip the pass places at its name next is fsynced
        # with the removal (one directory).
        await asyncio.to_thread(functools.partial(unlink_if_present, gz, root=roots.dest))
        return Corrupt(str(packed))
    for outcome in (packed, live):
        if isinstance(outcome, BaseException):
            raise outcome
    assert isinstance(live, tuple) and isinstance(packed, Digest)
    digest, prefix_sha = live
    now = await asyncio.to_thread(functools.partial(identity_or_none, src, root=roots.src))
    if not identity.same_file(now) or digest.bytes != identity.size:
        was = now.describe() if now else "gone"
        return Changed(f"{src} changed while its orphan {gz} was checked -> {was}")
    gz_st = await asyncio.to_thread(os.lstat, gz)
    if (packed.bytes, packed.sha256) == (digest.bytes, digest.sha256):
        return ArchiveOk(gz, digest.bytes, digest.sha256, gz_st.st_size, prefix_sha, identity)
    return await stale_of(gz, packed)


async def stale_of(gz: Path, digest: Digest) -> Stale:
    """A gzip that decompressed cleanly to ``digest``, kept as an earlier version:
    its source's mtime and mode from its header when coldkeep wrote it, else the
    gzip's own mtime (coldkeep sets it to the source's)."""
    with naming(gz):
        header = await asyncio.to_thread(read_gzip_header, gz)
    st = await asyncio.to_thread(os.lstat, gz)
    mtime_ns = header.mtime_ns if header.mtime_ns is not None else st.st_mtime_ns
    return Stale(digest.bytes, digest.sha256, st.st_size, mtime_ns, header.mode)


def _unpack(
    fd: int,
    gz: Path | CachedCopy,
    span: Span | None,
    partial: Path,
    root: Path,
    expect: RestoreExpect,
    limiter: RateLimiter,
    cancel: CancelToken,
    progress: Progress | None,
    named: str | None,
) -> Mismatch | None:
    """Write the restore partial (open as ``fd``, closed here) completely:
    bytes, then verdict, then mode, mtime and fsync. On a mismatch the partial
    is removed (the gzip called ``named`` where given). A read error names the
    gzip, any other error the partial; a failed fsync is never retried (see
    ``codec.compress_fd``): the caller removes the partial."""
    with naming(partial), os.fdopen(fd, "wb") as out:
        src = gz if isinstance(gz, Path) else gz.open()
        try:
            got: Digest | str = inflate(
                src, span=span, out=out, limiter=limiter, cancel=cancel, progress=progress
            )
        except CorruptGzip as err:
            got = str(err)
        finally:
            if not isinstance(src, Path):
                src.close()
        if isinstance(got, str) or (got.bytes, got.sha256) != (expect.bytes, expect.sha256):
            out.close()
            # Durably: the intent naming it is cleared next, and a partial whose
            # name came back after a power cut would be named by nothing.
            _remove_durably(partial, root, "restore.partial_removed")
            # A CorruptGzip's text names the gzip already.
            name = named or (gz if isinstance(gz, Path) else gz.name)
            what = got if isinstance(got, str) else f"{name} gave {_short(got)}"
            return Mismatch(
                f"{what}; the manifest records {_short(Digest(expect.bytes, expect.sha256))}"
            )
        out.flush()
        # Permission bits only: restored by root, a set-user-id bit the
        # application's user once put on its own file would make a root binary.
        os.fchmod(out.fileno(), stat.S_IMODE(expect.mode) & 0o777)
        os.utime(out.fileno(), ns=(expect.mtime_ns, expect.mtime_ns))
        fsync(out.fileno(), "restore.partial")
    return None


def _put_in_place(partial: Path, target: Path, root: Path, sync_dir: bool) -> Restored | Exists:
    placed = place_noreplace(partial, target, root=root)
    if placed is None:
        # As in _unpack: the intent is cleared next.
        _remove_durably(partial, root, "restore.partial_removed")
        return Exists()
    if sync_dir:
        fsync_dir(target.parent, root=root, site="restore.placed")
    return Restored(placed)


async def restore_file(
    gz: Path | CachedCopy,
    target: Path,
    expect: RestoreExpect,
    *,
    root: Path,
    span: Span | None = None,
    limiter: RateLimiter = UNLIMITED,
    cancel: CancelToken | None = None,
    step: StepHook = no_step,
    progress: Progress | None = None,
    sync_dir: bool = True,
    named: str | None = None,
) -> RestoreResult:
    """Put the bytes of ``gz`` (a path, or a remote copy read through the block
    cache; ``named``, where given, is what a mismatch calls it: a scratch
    copy's object URL) back at ``target`` (the caller checked that the path
    is inside its ``root``, every name reached beneath it): ``<target>.restore-partial``,
    sha256 verified, mode and mtime set, fsynced, renamed into place without
    replacing anything that is there, the directory fsynced; in one trip to a
    worker thread. A target that exists
    is ``exists``, untouched. ``sync_dir=False``: the directory is left to the
    caller, who fsyncs it once for the files it placed there and announces
    ``restored`` for each, before their intents are cleared.

    A failure removes the partial before it is reported; only a crash can leave
    one, and the restore intent names it for recovery.
    """
    cancel = cancel or CancelToken()
    announce = thread_step(step, asyncio.get_running_loop())
    return await in_thread(
        cancel, _restore, gz, target, expect, root, span, limiter, cancel, announce, progress,
        sync_dir, named,
    )  # fmt: skip


def _restore(
    gz: Path | CachedCopy,
    target: Path,
    expect: RestoreExpect,
    root: Path,
    span: Span | None,
    limiter: RateLimiter,
    cancel: CancelToken,
    step: ThreadStep,
    progress: Progress | None,
    sync_dir: bool,
    named: str | None = None,
) -> RestoreResult:
    """``restore_file`` on this worker thread, each step announced through
    ``step`` (which returns once the hook is done)."""
    temp = restore_partial_of(target)
    try:
        # O_EXCL (and never through a link): a file already at the partial's
        # name, an application's own or a hard link planted there, is never
        # written to.
        fd = create_unless_there(target, temp, root=root)
    except FileExistsError as err:
        raise PartialTaken(
            errno.EEXIST,
            f"{temp} already exists and is not coldkeep's: this restore is refused and "
            "that file left untouched (move it away, then restore again)",
            str(temp),
        ) from err
    if fd is None:
        return Exists()
    info = {"gz": gz if isinstance(gz, Path) else gz.name, "target": target, "partial": temp}
    try:
        bad = _unpack(fd, gz, span, temp, root, expect, limiter, cancel, progress, named)
        if bad is not None:
            return bad
    except PartialTaken:
        raise  # not ours: never removed
    except BaseException:
        _discard(temp, root, "restore.partial_discarded")
        raise
    # Outside the clean-up: a crash here leaves the partial, as a real one would.
    step("restore_partial_written", info)
    try:
        result = _put_in_place(temp, target, root, sync_dir)
    except BaseException:
        _discard(temp, root, "restore.partial_discarded")
        raise
    if isinstance(result, Restored) and sync_dir:
        step("restored", info)
    return result


def find_partials(files_dir: Path) -> list[Path]:
    """Every ``*.partial`` regular file under ``files_dir`` (links never followed)."""
    found: list[Path] = []
    for dirpath, _dirs, names in os.walk(files_dir):
        for name in names:
            path = Path(dirpath, name)
            if name.endswith(PARTIAL_SUFFIX) and stat.S_ISREG(path.lstat().st_mode):
                found.append(path)
    return found


def _sweep(files_dir: Path) -> list[Path]:
    return [p for p in find_partials(files_dir) if unlink_if_present(p, root=files_dir)]


async def sweep_partials(files_dir: Path) -> list[Path]:
    """Delete every leftover ``*.partial`` under the archive's ``files/`` (a missing
    directory is nothing to do). Only coldkeep writes there, under its lock, so any
    partial found outside a step in flight is a crash's leftover."""
    return await asyncio.to_thread(_sweep, files_dir)
