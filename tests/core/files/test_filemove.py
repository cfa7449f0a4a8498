"""Step 7 and its neighbours on real files: a live source goes only if it is the
very inode that was archived, unchanged (its ctime too); a copy of the archive in
the live tree never costs the archive; a restore's temporary never takes an
existing name."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.codec import Codec
from coldkeep.core.base.config import Settings, parse_settings
from coldkeep.core.base.layout import aside_of, restore_partial_of
from coldkeep.core.base.steps import StepHook, StepInfo, StepName, no_step
from coldkeep.core.files.filemove import Archived, FileMover
from coldkeep.core.files.gzfile import (
    ArchiveOk,
    Changed,
    RestoreExpect,
    archive_file,
    restore_file,
)
from coldkeep.core.files.recovery import Recovery
from coldkeep.core.store.manifest import Manifest

from helpers import Roots, gunzip, jsonl, leases_or_skip


def rewrite_keeping_mtime(path: Path, data: bytes) -> None:
    """What ``rsync -t --inplace`` or a rewrite followed by ``touch -r`` does: the
    same size, other bytes, the mtime put back. Written until the ctime moved
    (the kernel's clock for it ticks every few milliseconds)."""
    before = os.lstat(path)
    while True:
        with path.open("r+b") as f:
            f.write(data)
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        if os.lstat(path).st_ctime_ns != before.st_ctime_ns:
            return


def other_bytes(data: bytes) -> bytes:
    return data.replace(b"webhook", b"WEBHOOK")


async def test_a_same_size_rewrite_during_the_read_with_its_mtime_put_back_is_changed(
    roots: Roots,
) -> None:
    data = jsonl(5_000)
    src = roots.write("u/app.jsonl", data)
    new = other_bytes(data)
    assert new != data and len(new) == len(data)

    async def rewrite(name: StepName, info: StepInfo) -> None:
        if name == "partial_written":
            await asyncio.to_thread(rewrite_keeping_mtime, src, new)

    dest = roots.layout.gz_for("u/app.jsonl")
    result = await archive_file(src, dest, roots=roots.pair, codec=Codec(), step=rewrite)

    assert isinstance(result, Changed), result
    assert src.read_bytes() == new, "the new bytes are live"
    assert not dest.exists()


async def mover(roots: Roots) -> tuple[Manifest, FileMover]:
    m = await Manifest.open(roots.layout.manifest)
    return m, FileMover(roots.live, roots.layout, m, Codec())


async def test_a_same_size_rewrite_before_the_unlink_with_its_mtime_put_back_is_kept(
    roots: Roots,
) -> None:
    data = jsonl(3_000)
    src = roots.write("u/app.jsonl", data)
    new = other_bytes(data)

    async def rewrite(name: StepName, info: StepInfo) -> None:
        if name == "entry_committed":
            await asyncio.to_thread(rewrite_keeping_mtime, src, new)

    m, fm = await mover(roots)
    async with m:
        fm.step = rewrite
        result = await fm.archive("u/app.jsonl")
        assert isinstance(result, Archived) and result.unlinked == "changed"
        assert src.read_bytes() == new, "the rewritten file is never unlinked"
        assert gunzip(roots.archive / result.entry.gz_path) == data


async def test_a_file_renamed_onto_the_name_between_the_check_and_the_unlink_survives(
    roots: Roots,
) -> None:
    data = jsonl(2_000)
    src = roots.write("u/app.log", data)
    fresh = roots.write("u/app.log.new", b"logrotate's new file\n", age_days=0)
    seen: list[Path] = []

    async def rotate(name: StepName, info: StepInfo) -> None:
        if name == "source_set_aside":
            # logrotate's ``create``, or an application's atomic rewrite: a new
            # file renamed onto the name, right after the old one was checked.
            os.rename(fresh, src)
            seen.append(src)

    m, fm = await mover(roots)
    async with m:
        fm.step = rotate
        result = await fm.archive("u/app.log")
        assert seen, "the source was set aside before its unlink"
        assert isinstance(result, Archived) and result.unlinked == "removed"
        assert src.read_bytes() == b"logrotate's new file\n"
        assert not aside_of(src).exists()
        assert gunzip(roots.archive / result.entry.gz_path) == data


async def test_a_file_renamed_onto_the_name_before_it_is_set_aside_goes_back(
    roots: Roots,
) -> None:
    """The name's check passed, then a new file took the name before the rename
    aside: the aside name holds the new file, which is put back, kept."""
    data = jsonl(2_000)
    src = roots.write("u/app.log", data)
    m, fm = await mover(roots)
    async with m:
        ok = await archive_file(
            src, roots.layout.gz_for("u/app.log"), roots=roots.pair, codec=Codec()
        )
        assert isinstance(ok, ArchiveOk)
        aside = aside_of(src)

        async def swap(name: StepName, info: StepInfo) -> None:
            if name == "source_set_aside":
                # As if the swap had come just before the rename: the aside name
                # holds another inode.
                os.unlink(aside)
                (src.parent / "other").write_bytes(b"someone else's\n")
                os.rename(src.parent / "other", aside)

        fm.step = swap
        outcome = await fm.unlink_source(src, ok.identity)
        assert outcome == "changed"
        assert src.read_bytes() == b"someone else's\n"
        assert not aside.exists()


async def test_recovery_finishes_a_source_set_aside_when_the_process_died(roots: Roots) -> None:
    data = jsonl(1_000)
    src = roots.write("u/app.log", data)

    class Died(Exception):
        pass

    async def die(name: StepName, info: StepInfo) -> None:
        if name == "source_set_aside":
            raise Died

    m, fm = await mover(roots)
    async with m:
        fm.step = die
        with pytest.raises(Died):
            await fm.archive("u/app.log")
        assert not src.exists() and aside_of(src).exists()
        report = await Recovery(m, FileMover(roots.live, roots.layout, m, Codec())).run()
        assert report.sources_unlinked == ["u/app.log"]
        assert not aside_of(src).exists() and not src.exists()
        [entry] = await m.entries()
        assert not entry.source_present


async def test_recovery_puts_back_a_file_set_aside_that_is_not_the_archived_one(
    roots: Roots,
) -> None:
    data = jsonl(1_000)
    src = roots.write("u/app.log", data)

    async def die(name: StepName, info: StepInfo) -> None:
        if name == "source_set_aside":
            raise asyncio.CancelledError

    m, fm = await mover(roots)
    async with m:
        fm.step = die
        with pytest.raises(asyncio.CancelledError):
            await fm.archive("u/app.log")
        with aside_of(src).open("ab") as f:  # a writer that still had it open
            f.write(b"one more line\n")
        await Recovery(m, FileMover(roots.live, roots.layout, m, Codec())).run()
        assert src.read_bytes() == data + b"one more line\n"
        assert not aside_of(src).exists()


def settings(roots: Roots, **files: object) -> Settings:
    return parse_settings(
        {
            "live_root": str(roots.live),
            "archive_root": str(roots.archive),
            "mode": "on",
            "files": {"min_age_days": 1, **files},
        },
        roots.base / "coldkeep.toml",
    )


def aged_copy(src: Path, dst: Path) -> None:
    """``cp -p``, and old enough to archive."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, dst)
    old = time.time_ns() - 40 * 86_400 * 10**9
    os.utime(dst, ns=(old, old))


@pytest.mark.parametrize("bundled", [False, True], ids=["gzip", "bundle"])
async def test_a_copy_of_an_archive_file_in_the_live_tree_never_removes_the_real_one(
    roots: Roots, bundled: bool
) -> None:
    roots.write("u/a.log", jsonl(200, 1))
    roots.write("u/b.log", jsonl(200, 2))
    below = 1 << 20 if bundled else 0
    conf = {"bundle_below": below, "include": ["**"]}
    first = await Archiver(settings(roots, **conf)).run_pass()
    assert first.status == "ok" and first.files.archived == 2, first.problems
    archived = sorted(p for p in (roots.archive / "files" / "u").iterdir())
    assert archived
    for real in archived:  # an operator's copy, at the same relative path
        aged_copy(real, roots.live / "u" / real.name)
    before = {p: p.read_bytes() for p in archived}

    second = await Archiver(settings(roots, **conf)).run_pass()

    assert second.status == "ok", second.problems
    for real, data in before.items():
        assert real.read_bytes() == data, f"{real} is the archive's own file"
    check = await Archiver(settings(roots, **conf)).verify()
    assert not check.failed and check.checked >= 2, check


async def test_an_existing_restore_partial_name_is_never_truncated_or_followed(
    roots: Roots,
) -> None:
    data = jsonl(500)
    src = roots.write("u/app.log", data)
    ok = await archive_file(src, roots.layout.gz_for("u/app.log"), roots=roots.pair, codec=Codec())
    assert isinstance(ok, ArchiveOk)
    src.unlink()
    precious = restore_partial_of(src)
    precious.write_bytes(b"an application's own file\n")
    outside = roots.base / "outside.txt"
    outside.write_bytes(b"not in the live tree\n")
    expect = RestoreExpect(ok.bytes, ok.sha256, ok.identity.mtime_ns, ok.identity.mode)

    with pytest.raises(FileExistsError, match="restore-partial"):
        await restore_file(ok.dest, src, expect, root=roots.live)
    assert precious.read_bytes() == b"an application's own file\n"
    assert not src.exists()

    precious.unlink()
    os.link(outside, precious)  # a hard link planted under the partial's name
    with pytest.raises(FileExistsError):
        await restore_file(ok.dest, src, expect, root=roots.live)
    assert outside.read_bytes() == b"not in the live tree\n"


@pytest.fixture
def ext4(tmp_path: Path) -> Iterator[Path]:
    """A small ext4 filesystem, loop-mounted (``chattr +i`` needs one)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a loop device needs root")
    image, mnt = tmp_path / "ext4.img", tmp_path / "ext4"
    mnt.mkdir()
    with image.open("wb") as f:
        f.truncate(32 << 20)
    made = subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=False, capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"mkfs.ext4 failed: {made.stderr.decode().strip()}")
    mount = ["mount", "-o", "loop", str(image), str(mnt)]
    mounted = subprocess.run(mount, check=False, capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot loop-mount ext4 here: {mounted.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["chattr", "-R", "-i", "-a", str(mnt)], check=False, capture_output=True)
        subprocess.run(["umount", str(mnt)], check=True)


@pytest.mark.parametrize("bundled", [False, True], ids=["gzip", "bundle"])
@pytest.mark.parametrize("attr", ["+i", "+a"])
async def test_an_immutable_source_is_one_files_problem_and_every_later_pass_goes_on(
    tmp_path: Path, ext4: Path, bundled: bool, attr: str
) -> None:
    roots = Roots(tmp_path, ext4 / "live", tmp_path / "archive")
    roots.write("u/locked.log", jsonl(300, 1))
    roots.write("u/free.log", jsonl(300, 2))
    subprocess.run(["chattr", attr, str(roots.live / "u" / "locked.log")], check=True)
    conf = settings(roots, bundle_below=(1 << 20) if bundled else 0)

    first = await Archiver(conf).run_pass()

    assert first.status == "ok", first.problems
    assert first.files.archived == 2
    assert not (roots.live / "u" / "free.log").exists()
    assert [(p["relpath"], p["kind"]) for p in first.new_problems] == [
        ("u/locked.log", "unlink_refused")
    ]
    roots.write("u/later.log", jsonl(300, 3))
    second = await Archiver(conf).run_pass()
    assert second.status == "ok", second.problems
    assert second.files.archived == 1, "the refused file is not archived a second time"
    assert not (roots.live / "u" / "later.log").exists()
    backlog = (await Archiver(conf).plan()).plan
    assert backlog.files == 0, "archived, its removal refused: no backlog (the console's)"
    status = await Archiver(conf).status()
    [problem] = status.file_problems
    assert (problem.relpath, problem.kind, problem.times) == ("u/locked.log", "unlink_refused", 2)
    assert "chattr" in problem.remedy
    said = first.new_problems[0]["reason"]
    assert "refused" in said and "recovery settles" not in said, said  # the operator's to lift

    cleared = attr.replace("+", "-")
    subprocess.run(["chattr", cleared, str(roots.live / "u" / "locked.log")], check=True)
    third = await Archiver(conf).run_pass()
    assert third.status == "ok" and third.recovery["sources_unlinked"] == 1
    assert not (roots.live / "u" / "locked.log").exists()
    assert (await Archiver(conf).status()).file_problems == []


DAEMON = (
    "import os, sys\n"
    "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)\n"
    "print('ready', flush=True)\n"
    "for line in sys.stdin:\n"
    "    os.write(fd, line.encode())\n"
    "os.close(fd)\n"
)


class Daemon:
    """A process holding a live log open with O_APPEND, writing a line whenever
    asked (an application's rarely written log)."""

    def __init__(self, path: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", DAEMON, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline() == "ready\n"

    def write_and_stop(self, lines: list[str]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("".join(lines))
        self.proc.stdin.close()
        assert self.proc.wait() == 0


@pytest.mark.parametrize("bundled", [False, True], ids=["gzip", "bundle"])
async def test_a_log_held_open_by_a_daemon_stays_live_and_every_later_line_lands(
    roots: Roots, bundled: bool
) -> None:
    leases_or_skip(roots.live)
    data = jsonl(300)
    log = roots.write("u/daemon.log", data)
    roots.write("u/closed.log", jsonl(300, 2))
    daemon = Daemon(log)
    conf = settings(roots, bundle_below=(1 << 20) if bundled else 0)
    try:
        summary = await Archiver(conf).run_pass()
    finally:
        lines = [f"line {n} written after the pass\n" for n in range(158)]
        daemon.write_and_stop(lines)

    assert summary.status == "ok", summary.problems
    assert summary.files.skipped.get("open") == 1
    assert summary.files.archived == 1, "the closed file is archived"
    assert log.read_bytes() == data + "".join(lines).encode(), "every line the daemon wrote"


async def test_a_source_opened_after_its_read_is_kept_until_it_is_closed(roots: Roots) -> None:
    leases_or_skip(roots.live)
    data = jsonl(300)
    log = roots.write("u/daemon.log", data)
    daemons: list[Daemon] = []

    async def open_it(name: StepName, info: StepInfo) -> None:
        if name == "entry_committed":
            daemons.append(await asyncio.to_thread(Daemon, log))

    m, fm = await mover(roots)
    async with m:
        fm.step = open_it
        result = await fm.archive("u/daemon.log")
        assert isinstance(result, Archived) and result.unlinked == "open"
        assert log.read_bytes() == data
        report = await Recovery(m, FileMover(roots.live, roots.layout, m, Codec())).run()
        assert report.pending_sources == {"u/daemon.log"} and log.exists()
        daemons[0].write_and_stop([])
        report = await Recovery(m, FileMover(roots.live, roots.layout, m, Codec())).run()
        assert report.sources_unlinked == ["u/daemon.log"] and not log.exists()


async def test_recovery_goes_on_past_an_item_it_cannot_settle(tmp_path: Path, ext4: Path) -> None:
    """A crashed restore's partial that cannot be removed (immutable) is that
    item's problem: its intent stays for the next recovery, and every other
    leftover is settled in the same run."""
    roots = Roots(tmp_path, ext4 / "live", tmp_path / "archive")
    roots.archive.mkdir()
    restored = roots.write("u/restored.log", jsonl(100, 1))
    pending = roots.write("u/pending.log", jsonl(100, 2))

    class Died(Exception):
        pass

    async def die_at(step: StepName) -> StepHook:
        async def hook(name: StepName, info: StepInfo) -> None:
            if name == step:
                raise Died

        return hook

    m, fm = await mover(roots)
    async with m:
        done = await fm.archive("u/restored.log")
        assert isinstance(done, Archived) and not restored.exists()
        fm.step = await die_at("restore_partial_written")
        with pytest.raises(Died):
            await fm.restore(done.entry, restored, root=roots.live)
        partial = restore_partial_of(restored)
        subprocess.run(["chattr", "+i", str(partial)], check=True)
        fm.step = await die_at("entry_committed")
        with pytest.raises(Died):
            await fm.archive("u/pending.log")

        report = await Recovery(m, FileMover(roots.live, roots.layout, m, Codec())).run()

        assert report.sources_unlinked == ["u/pending.log"] and not pending.exists()
        [problem] = report.problems
        assert problem.kind == "recovery" and str(partial) in problem.reason
        assert len(await m.restore_intents()) == 1, "kept for the next recovery"
        subprocess.run(["chattr", "-i", str(partial)], check=True)
        again = await Recovery(m, FileMover(roots.live, roots.layout, m, Codec())).run()
        assert again.restore_partials == [partial] and again.problems == []
        assert await m.restore_intents() == []


async def test_a_restore_after_one_that_died_replaces_the_partial_its_intent_names(
    roots: Roots,
) -> None:
    data = jsonl(200)
    src = roots.write("u/app.log", data)

    async def die(name: StepName, info: StepInfo) -> None:
        if name == "restore_partial_written":
            raise asyncio.CancelledError

    m, fm = await mover(roots)
    async with m:
        done = await fm.archive("u/app.log")
        assert isinstance(done, Archived) and not src.exists()
        fm.step = die
        with pytest.raises(asyncio.CancelledError):
            await fm.restore(done.entry, src, root=roots.live)
        assert restore_partial_of(src).exists(), "the dead restore's partial, named by its intent"
        fm.step = no_step
        again = await fm.restore(done.entry, src, root=roots.live)
        assert again.kind == "restored" and src.read_bytes() == data
        assert not restore_partial_of(src).exists() and await m.restore_intents() == []


async def test_a_file_said_to_have_no_legacy_copy_is_archived_without_asking_the_manifest(
    roots: Roots, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass that found nothing at files/<relpath> says so: the file is archived
    the same, and the manifest is not asked whether that path is one of its own
    (a lookup that waited behind the other files' commits)."""
    data = jsonl(2_000)
    roots.write("u/app.jsonl", data)
    m, mv = await mover(roots)
    asked: list[list[str]] = []
    looked_up = m.gz_statuses_of

    async def counting(paths: Iterable[str]) -> list[tuple[str, str]]:
        asked.append(list(paths))
        return await looked_up(asked[-1])

    monkeypatch.setattr(m, "gz_statuses_of", counting)
    try:
        done = await mv.archive("u/app.jsonl", no_legacy_copy=True)
        assert isinstance(done, Archived) and done.legacy == "none"
        assert gunzip(roots.layout.files / "u" / "app.jsonl.gz") == data
        assert asked == []
        roots.write("v/app.jsonl", data)
        assert isinstance(await mv.archive("v/app.jsonl"), Archived)
        assert asked == [["files/v/app.jsonl"]], "without the word, it asks"
    finally:
        await m.close()
