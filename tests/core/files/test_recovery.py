"""Recovery on real archives: every kind of leftover a crash can leave is settled as
recovery's table (core/files/recovery.py) says."""

from __future__ import annotations

import itertools
import os
from dataclasses import replace
from pathlib import Path

import pytest

from coldkeep.core.base.codec import Codec
from coldkeep.core.files import recovery
from coldkeep.core.files.filemove import Archived, FileMover
from coldkeep.core.files.gzfile import ArchiveOk, archive_file
from coldkeep.core.files.recovery import Recovery, RecoveryReport
from coldkeep.core.store.manifest import Manifest

from helpers import Roots, gunzip, jsonl, planted


async def place_orphan(roots: Roots, relpath: str, data: bytes) -> Path:
    """A gzip placed by steps 1-5 with no entry: a crash before step 6."""
    src = roots.write(relpath, data)
    ok = await archive_file(src, roots.layout.gz_for(relpath), roots=roots.pair, codec=Codec())
    assert isinstance(ok, ArchiveOk)
    return ok.dest


async def recover(roots: Roots) -> tuple[Manifest, Recovery]:
    m = await Manifest.open(roots.layout.manifest)
    return m, Recovery(m, FileMover(roots.live, roots.layout, m, Codec()))


async def test_each_kind_of_orphan(roots: Roots) -> None:
    adopt = await place_orphan(roots, "u/adopt.jsonl", jsonl(100, 1))
    stale = await place_orphan(roots, "u/stale.jsonl", b"old version\n")
    roots.write("u/stale.jsonl", b"new version\n")
    corrupt = await place_orphan(roots, "u/corrupt.jsonl", jsonl(100, 2))
    with corrupt.open("r+b") as f:
        f.seek(-12, os.SEEK_END)
        f.write(b"\xff\xff")
    lonely = await place_orphan(roots, "u/lonely.jsonl", b"source deleted since\n")
    (roots.live / "u" / "lonely.jsonl").unlink()

    m, rec = await recover(roots)
    async with m:
        report = await rec.run()
        outcomes = {o.relpath: o.outcome for o in report.orphans}
        assert outcomes == {
            "u/adopt.jsonl": "adopted",
            "u/stale.jsonl": "stale",
            "u/corrupt.jsonl": "corrupt",
            "u/lonely.jsonl": "stale",
        }
        by_path = {e.relpath: e for e in await m.entries()}
        assert by_path["u/adopt.jsonl"].status == "archived"
        assert not (roots.live / "u" / "adopt.jsonl").exists(), "adopted: step 7 done"
        assert by_path["u/stale.jsonl"].status == "stale"
        assert gunzip(stale) == b"old version\n"
        assert (roots.live / "u" / "stale.jsonl").read_bytes() == b"new version\n"
        assert not corrupt.exists() and (roots.live / "u" / "corrupt.jsonl").exists()
        assert gunzip(lonely) == b"source deleted since\n"
        assert "u/corrupt.jsonl" not in by_path
        assert adopt.exists()
        # A second run finds nothing left to do.
        assert not (await rec.run()).anything


async def test_a_versioned_orphan_finds_its_source_by_its_header_name(roots: Roots) -> None:
    first = await place_orphan(roots, "u/a.jsonl", b"one\n")
    second = await place_orphan(roots, "u/a.jsonl", b"two\n")
    assert second.name != first.name  # a.jsonl.<sha12>.gz
    m, rec = await recover(roots)
    async with m:
        report = await rec.run()
        assert {(o.gz.name, o.outcome) for o in report.orphans} == {
            (first.name, "stale"),
            (second.name, "adopted"),
        }
        assert {e.relpath for e in await m.entries()} == {"u/a.jsonl"}


async def test_a_lost_gzip_is_marked_missing_and_a_committed_source_is_unlinked(
    roots: Roots,
) -> None:
    m, rec = await recover(roots)
    async with m:
        mover = rec.mover
        relpath = "u/gone.jsonl"
        roots.write(relpath, b"x\n")
        gone = await mover.archive(relpath)
        assert isinstance(gone, Archived)
        (roots.archive / gone.entry.gz_path).unlink()
        # A crash between steps 6 and 7: entry committed, the source still there.
        src = roots.write("u/kept.jsonl", b"y\n")
        ok = await archive_file(
            src, roots.layout.gz_for("u/kept.jsonl"), roots=roots.pair, codec=Codec()
        )
        assert isinstance(ok, ArchiveOk)
        await m.add_entry(mover._new_entry("u/kept.jsonl", ok))

        report = await rec.run()
        assert [e.relpath for e in report.missing] == [relpath]
        assert report.sources_unlinked == ["u/kept.jsonl"] and not src.exists()
        statuses = {e.relpath: (e.status, e.source_present) for e in await m.entries()}
        assert statuses == {relpath: ("missing", False), "u/kept.jsonl": ("archived", False)}


async def test_a_changed_committed_source_is_kept(roots: Roots) -> None:
    m, rec = await recover(roots)
    async with m:
        src = roots.write("u/k.jsonl", b"archived\n")
        ok = await archive_file(
            src, roots.layout.gz_for("u/k.jsonl"), roots=roots.pair, codec=Codec()
        )
        assert isinstance(ok, ArchiveOk)
        await m.add_entry(rec.mover._new_entry("u/k.jsonl", ok))
        with src.open("ab") as f:
            f.write(b"written after step 4\n")
        report = await rec.run()
        assert report.sources_unlinked == []
        assert src.read_bytes() == b"archived\nwritten after step 4\n"


async def commit_as_before_a_renumbering(rec: Recovery, roots: Roots, relpath: str) -> Path:
    """A crash between steps 6 and 7, then a reboot (or a remount) that gave the
    filesystem another device number: the entry records the source as it was
    archived, under the device number it had then."""
    src = roots.write(relpath, jsonl(50, 3))
    ok = await archive_file(src, roots.layout.gz_for(relpath), roots=roots.pair, codec=Codec())
    assert isinstance(ok, ArchiveOk)
    before = replace(ok, identity=replace(ok.identity, dev=ok.identity.dev + 1))
    await rec.manifest.add_entry(rec.mover._new_entry(relpath, before))
    return src


async def test_a_committed_source_on_a_renumbered_device_goes_once_its_bytes_match(
    roots: Roots,
) -> None:
    m, rec = await recover(roots)
    async with m:
        src = await commit_as_before_a_renumbering(rec, roots, "u/same.jsonl")
        assert (await rec.scan()).sources_unlinked == ["u/same.jsonl"]
        report = await rec.run()
        assert report.sources_unlinked == ["u/same.jsonl"] and not src.exists()
        assert [e.source_present for e in await m.entries()] == [False]


async def test_a_committed_source_on_a_renumbered_device_with_other_bytes_is_kept(
    roots: Roots,
) -> None:
    """Same inode number, size, mtime and mode, other bytes: not the archived file
    (an identity is no proof across devices), so it stays for the pass to judge."""
    m, rec = await recover(roots)
    async with m:
        src = await commit_as_before_a_renumbering(rec, roots, "u/other.jsonl")
        st = src.stat()
        data = bytearray(src.read_bytes())
        data[10] ^= 1
        with src.open("r+b") as f:  # in place: the same inode
            f.write(data)
        os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert (await rec.scan()).sources_unlinked == []
        report = await rec.run()
        assert report.sources_unlinked == [] and src.read_bytes() == bytes(data)


async def test_only_intent_named_restore_partials_are_removed(roots: Roots) -> None:
    stray = roots.write("u/app-own.jsonl.restore-partial", b"not ours to judge\n")
    ours = roots.write("u/f.jsonl.restore-partial", b"half\n")
    m, rec = await recover(roots)
    async with m:
        await m.add_restore_intent(None, roots.live / "u" / "f.jsonl")
        report = await rec.run()
        assert report.restore_partials == [ours] and report.intents == 1
        assert not ours.exists() and stray.exists()
        assert await m.restore_intents() == []


async def test_links_and_directories_in_files_are_never_taken_for_orphans(
    roots: Roots,
) -> None:
    elsewhere = roots.base / "elsewhere.gz"
    elsewhere.write_bytes(b"not coldkeep's")
    files = roots.layout.files / "u"
    files.mkdir(parents=True)
    (files / "link.jsonl.gz").symlink_to(elsewhere)
    (files / "dir.jsonl.gz").mkdir()
    m, rec = await recover(roots)
    async with m:
        report = await rec.run()
        assert report.orphans == []
        assert elsewhere.read_bytes() == b"not coldkeep's"
        assert (files / "link.jsonl.gz").is_symlink() and (files / "dir.jsonl.gz").is_dir()


async def test_an_in_place_restore_holds_the_entry_only_if_it_placed_the_file(
    roots: Roots,
) -> None:
    """The hold is committed before the file is placed (a crash after the rename
    must find it held); a restore that places nothing gives it back."""
    m, rec = await recover(roots)
    async with m:
        roots.write("u/h.jsonl", b"held\n")
        done = await rec.mover.archive("u/h.jsonl")
        assert isinstance(done, Archived)
        target = roots.live / "u" / "h.jsonl"
        target.write_bytes(b"the application's new file\n")
        assert (
            await rec.mover.restore(done.entry, target, root=roots.live, grace_until=10**15)
        ).kind == "exists"
        entry = await m.entry(done.entry.id)
        assert entry is not None and (entry.status, entry.grace_until) == ("archived", None)

        target.unlink()
        assert (
            await rec.mover.restore(done.entry, target, root=roots.live, grace_until=10**15)
        ).kind == "restored"
        entry = await m.entry(done.entry.id)
        assert entry is not None and (entry.status, entry.grace_until) == ("restored", 10**15)
        assert await m.restore_intents() == []


async def test_an_orphan_whose_header_names_no_plain_file_is_refused_and_left(
    roots: Roots,
) -> None:
    """An archive copied from elsewhere: a header naming a path or a name too
    long for a disk is never written to; the gzip stays for a human, and the
    others are settled (a control character is a name's own: kept, stale)."""
    hostile = [
        planted(roots.layout, "u/a.gz", b"../../../etc/cron.d/job", b"x\n", 0o100644, 1),
        planted(roots.layout, "u/c.gz", b"c" * 300, b"z\n", 0o100644, 1),
    ]
    escape = planted(roots.layout, "u/b.gz", b"\x1b[2Jb.jsonl", b"y\n", 0o100644, 1)
    fine = await place_orphan(roots, "u/fine.jsonl", jsonl(20, 3))
    m, recovery = await recover(roots)
    async with m:
        report = await recovery.run()
    outcomes = {o.gz: o.outcome for o in report.orphans}
    assert outcomes == {**{gz: "refused" for gz in hostile}, escape: "stale", fine: "adopted"}
    assert all(gz.exists() for gz in hostile) and report.errors
    assert not (roots.base / "etc").exists()


async def test_a_scan_reports_what_it_found_as_its_walk_goes(
    roots: Roots, monkeypatch: pytest.MonkeyPatch
) -> None:
    m, rec = await recover(roots)
    async with m:
        for n in range(12):
            rel = f"u{n:02d}/kept.jsonl"
            roots.write(rel, jsonl(5, n))
            assert isinstance(await rec.mover.archive(rel), Archived)
        roots.write("u99/lost.jsonl", b"z\n")
        lost = await rec.mover.archive("u99/lost.jsonl")
        assert isinstance(lost, Archived)
        (roots.archive / lost.entry.gz_path).unlink()
        orphans = [await place_orphan(roots, f"o{n}/a.jsonl", b"a\n") for n in range(3)]
        partial = roots.archive / "files" / "u05" / "x.jsonl.gz.partial"
        partial.write_bytes(b"half")
        monkeypatch.setattr(recovery, "WALK_PIECE", 1)  # a piece per directory
        seen: list[RecoveryReport] = []
        final = await rec.scan(seen.append)

    # First what needs no walk, then one report per piece, each holding all
    # the one before did; the entry without a gzip only at the end.
    assert seen[0].walking and seen[0].walked == 0
    assert len(seen) == 1 + 16  # a directory each: 12 kept, 1 lost, 3 orphans
    walked = [r.walked for r in seen]
    assert walked == sorted(walked) and walked[-1] == 12 + 3
    for before, after in itertools.pairwise(seen):
        assert {o.gz for o in before.orphans} <= {o.gz for o in after.orphans}
        assert set(before.partials) <= set(after.partials)
    assert all(r.walking and not r.missing for r in seen)
    # Each orphan shown once the piece that holds it is walked.
    assert sorted({len(r.orphans) for r in seen}) == [0, 1, 2, 3]
    assert not final.walking and final.walked == 15
    assert sorted(o.gz for o in final.orphans) == sorted(orphans)
    assert final.partials == [partial]
    assert [e.relpath for e in final.missing] == ["u99/lost.jsonl"]
