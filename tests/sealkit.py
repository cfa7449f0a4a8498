"""Sealed remote copies made behind coldkeep's back, as a sealing ship leaves
them: each object of a shipped folder remote sealed to a fresh identity (a
bundle one age stream per member), moved to its sealed key and its row
replaced with the sealed one (its version the sealed object's, as its HEAD
says) and its streams. For the read side's tests before
(and besides) ship sealing itself."""

from __future__ import annotations

import gzip
import os
from dataclasses import replace
from pathlib import Path

from pyrage import x25519

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.cancel import CancelToken
from coldkeep.core.base.codec import Span
from coldkeep.core.base.config import load_settings
from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.base.layout import Layout
from coldkeep.core.base.recipients import RecipientSet, parse_recipients
from coldkeep.core.base.stream import EventStream
from coldkeep.core.ops.demo import write_demo
from coldkeep.core.remote.filestore import FileStore
from coldkeep.core.remote.sealing import seal_spans, tile
from coldkeep.core.store.manifest import Manifest
from coldkeep.core.store.remoteobjects import RemoteObjects, sealed_key


def new_identity(folder: Path, name: str = "key.txt") -> tuple[Path, RecipientSet]:
    """A fresh age identity file in ``folder`` and the set of its public key."""
    key = x25519.Identity.generate()
    path = folder / name
    path.write_text(f"# created by a test\n{key}\n")
    path.chmod(0o600)  # as age-keygen -o leaves it: a file others read is warned of
    return path, parse_recipients([str(key.to_public())])


async def member_spans(manifest: Manifest, gz_path: str) -> list[Span]:
    rows = await manifest.rows(
        "SELECT DISTINCT member_offset, member_length FROM entries WHERE gz_path = ? "
        "AND member_offset IS NOT NULL ORDER BY member_offset",
        [gz_path],
    )
    return [Span(int(o), int(n)) for o, n in rows]


async def seal_remote(archive: Path, remote: Path, site: str, recipients: RecipientSet) -> int:
    """Every object recorded for the site at ``archive``, in the folder remote
    ``remote``, sealed in place of its plain copy; how many."""
    manifest = await Manifest.open(Layout(archive).manifest)
    store = FileStore(remote)
    n = 0
    async with manifest:
        objects = RemoteObjects(manifest)
        for obj in await objects.after(None, 1 << 30):
            src = remote / site / obj.path
            if obj.seek_points is not None:  # a packed month: sealed as its database
                src.write_bytes(gzip.decompress(src.read_bytes()))
            spans = await member_spans(manifest, obj.path)
            fingerprint = recipients.fingerprint
            sealed_obj = replace(
                obj,
                sealed_to=fingerprint,
                stored_as=sealed_key(obj.path, fingerprint),
                seek_points=None,
            )
            dst = remote / site / sealed_obj.key
            with open(src, "rb") as f, open(dst, "wb") as w:
                size = os.fstat(f.fileno()).st_size
                sealed = seal_spans(
                    f,
                    w,
                    recipients,
                    tile(size, spans) if spans else None,
                    what=str(src),
                    cancel=CancelToken(),
                )
            src.unlink()
            info = await store.head(f"{site}/{sealed_obj.key}")
            assert info is not None
            streams = (
                [(p.offset, p.length, s.offset, s.length) for p, s in sealed.pieces]
                if spans
                else []
            )
            await objects.replace_row(
                replace(
                    sealed_obj,
                    bytes=sealed.sealed.bytes,
                    sha256=sealed.sealed.sha256,
                    plain_bytes=sealed.plain.bytes,
                    plain_sha256=sealed.plain.sha256,
                    version=info.version,
                ),
                streams,
            )
            n += 1
    return n


async def ship_sealed_site(base: Path, remote: Path, name: str, seed: int, key: Path) -> None:
    """A demo site archived and shipped sealed to the identity file ``key``'s
    public key (made by ``new_identity``), every local copy dropped."""
    public = [line for line in key.read_text().splitlines() if line.startswith("AGE-SECRET")]
    recipients = parse_recipients([str(x25519.Identity.from_str(public[0]).to_public())])
    config = write_demo(base / name, seed=seed, scale=0.02).config
    settings = replace(
        load_settings(config),
        remote=RemoteSettings(remote.as_uri(), site=name, keep_local_days=0, encrypt_to=recipients),
    )
    archiver = Archiver(settings, stream=EventStream(), serve_events=False)
    await archiver.run_pass()
    report = await archiver.ship()
    assert not report.problems
