"""``coldkeep cat PATH[@VERSION]`` through the real CLI, on a real site: the
bytes of a gzip, of a bundle member and of a remote-only copy, any version by
id or by time, checked against the manifest's sha256 as they stream; a reader
that leaves early, odd names, unknown paths and expired versions. Nothing is
ever written in the archive or the live tree."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import select
import shutil
import signal
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import clizygote
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pyrage import x25519

from helpers import COLDKEEP, EVERY_FILE, ck, entries, jsonl, sha, write_old
from s3kit import S3Site
from s3kit.proxy import Delay

ODD = (b"u/r\xe9sum\xe9.log", b"u/two\nlines.log", b"u/at@2.log")
CONFIG = EVERY_FILE + '[remote]\nurl = "file:remote"\nsite = "t"\n'


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A site after two passes: a big file in a gzip of its own, small ones in a
    bundle (odd names among them), and two versions of ``u/v.jsonl``."""
    site = tmp_path_factory.mktemp("cat") / "site"
    site.mkdir()
    (site / "coldkeep.toml").write_text(CONFIG)
    write_old(site, b"u/big.jsonl", jsonl(24_000, seed=1))  # ~3 MiB: more than a pipe holds
    for n in range(3):
        write_old(site, f"u/small-{n}.jsonl".encode(), jsonl(150, seed=10 + n))  # ~20 KiB
    for raw in ODD:
        write_old(site, raw, b"data of " + raw + b"\n")
    write_old(site, b"u/v.jsonl", b"version one\n")
    ck(site, "pass")
    write_old(site, b"u/v.jsonl", b"version two\n")
    ck(site, "pass")
    return site


@pytest.fixture
def site(template: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "site"
    shutil.copytree(template, copy)
    return copy


def cat(site: Path, *args: bytes | str) -> subprocess.CompletedProcess[bytes]:
    """``coldkeep cat ARGS``, its output as bytes: forked warm (clizygote.py)
    when every argument is text (the server takes a request as JSON), else a
    new interpreter."""
    argv = ["cat", *args, "--config", str(site / "coldkeep.toml")]
    if all(isinstance(a, str) for a in argv) and clizygote.warm_ok(os.environ):
        done = clizygote.run_bytes([str(a) for a in argv], env=os.environ, timeout=120)
        if done is not None:
            return done
    return subprocess.run([*COLDKEEP, *argv], capture_output=True, timeout=120, check=False)


def _entry(site: Path, relpath: str) -> dict[str, Any]:
    found = [e for e in entries(site) if e["relpath"] == relpath]
    assert found, relpath
    return found[-1]


def _tree(root: Path) -> list[tuple[str, int, int]]:
    """Every file with its size and mtime, every folder (a database opened to
    read makes and removes its -wal and -shm beside it: not a write)."""
    return sorted(
        (
            str(p.relative_to(root)),
            *((p.lstat().st_size, p.lstat().st_mtime_ns) if p.is_file() else (0, 0)),
        )
        for p in root.rglob("*")
        if not p.name.endswith(("-wal", "-shm"))
    )


def test_a_gzip_and_bundle_members_give_their_archived_bytes(site: Path) -> None:
    before = _tree(site)
    for relpath in ("u/big.jsonl", "u/small-0.jsonl", "u/small-2.jsonl"):
        entry = _entry(site, relpath)
        run = cat(site, relpath)
        assert run.returncode == 0, run.stderr
        assert run.stderr == b""
        assert sha(run.stdout) == entry["sha256"] and len(run.stdout) == entry["bytes"]
    assert _entry(site, "u/big.jsonl")["member_offset"] is None
    assert _entry(site, "u/small-0.jsonl")["member_offset"] is not None, "a bundle member"
    absolute = str(site / "live" / "u" / "small-1.jsonl")  # an absolute path inside live_root
    assert sha(cat(site, absolute).stdout) == _entry(site, "u/small-1.jsonl")["sha256"]
    assert _tree(site) == before, "nothing written"


# The command as `coldkeep` runs it, with a handler for SIGUSR1 that does nothing:
# a write(2) to a full pipe that the signal interrupts returns with what it wrote.
_HANDLED = (
    "import signal; signal.signal(signal.SIGUSR1, lambda *_: None); "
    "from coldkeep.tui.cli.main import main; main()"
)


def test_every_byte_reaches_a_pipe_whose_writes_a_signal_cuts_short(site: Path) -> None:
    """Under PYTHONUNBUFFERED (many container images set it) stdout's binary layer
    is the raw pipe, and a write a signal interrupts once the pipe is full comes
    back short: the rest must still go, in order."""
    entry = _entry(site, "u/big.jsonl")
    config = str(site / "coldkeep.toml")
    with subprocess.Popen(
        [sys.executable, "-c", _HANDLED, "cat", "u/big.jsonl", "--config", config],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    ) as child:
        assert child.stdout is not None and child.stderr is not None
        fd = child.stdout.fileno()
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, 4096)  # a piece of 1 MiB waits in write(2)
        got = bytearray()
        for _ in range(64):
            # Data: the child is writing, or has ended.
            assert select.select([fd], [], [], 60)[0], "cat wrote nothing for a minute"
            if child.poll() is None:
                child.send_signal(signal.SIGUSR1)
            piece = os.read(fd, 4096)
            if not piece:
                break
            got += piece
        rest, err = child.communicate(timeout=120)
        got += rest
    assert child.returncode == 0, err
    assert (len(got), sha(bytes(got))) == (entry["bytes"], entry["sha256"])


def test_a_version_by_entry_id_and_by_time(site: Path) -> None:
    one, two = [e for e in entries(site) if e["relpath"] == "u/v.jsonl"]
    assert cat(site, "u/v.jsonl").stdout == b"version two\n"
    assert cat(site, f"u/v.jsonl@{one['id']}").stdout == b"version one\n"
    assert cat(site, "u/v.jsonl", "--version", str(two["id"])).stdout == b"version two\n"

    def at(ms: float) -> str:
        return datetime.fromtimestamp(ms / 1000).isoformat(timespec="milliseconds")

    between = at((one["archived_at"] + two["archived_at"]) / 2)
    assert cat(site, f"u/v.jsonl@{between}").stdout == b"version one\n"
    assert cat(site, f"u/v.jsonl@{at(two['archived_at'] + 1000)}").stdout == b"version two\n"
    utc = datetime.fromtimestamp((one["archived_at"] + two["archived_at"]) / 2000, UTC)
    as_versions_prints = utc.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    assert cat(site, f"u/v.jsonl@{as_versions_prints}").stdout == b"version one\n"
    early = cat(site, f"u/v.jsonl@{at(one['archived_at'] - 60_000)}")
    assert early.returncode == 2 and early.stdout == b""
    assert b"no version of u/v.jsonl was archived at or before" in early.stderr
    other = cat(site, f"u/v.jsonl@{_entry(site, 'u/big.jsonl')['id']}")
    assert other.returncode == 2 and b"is not a version of u/v.jsonl" in other.stderr
    arabic = cat(site, f"u/v.jsonl@{in_script(one['id'], 0x660)}")  # its id, not in ASCII
    assert arabic.returncode == 2 and arabic.stdout == b"", arabic.stderr
    assert b"is neither an entry id (digits 0-9) nor a time" in arabic.stderr


# What an operator might type after the @: any text a command line can carry
# (no NUL, no lone surrogate), ids and times in ASCII and in other scripts'
# digits (a regex's \d is any script's), and times out of every range.
ARGV_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"))
OTHER_ZEROS = (0x660, 0x966, 0xFF10)  # Arabic-Indic, Devanagari, fullwidth


def in_script(n: int, zero: int) -> str:
    """``n`` in the digits of the script whose zero is ``zero``."""
    return "".join(chr(zero + int(d)) for d in str(n))


VERSIONS = (
    ARGV_TEXT.filter(lambda t: not t.startswith("-"))
    | st.integers(min_value=0).map(str)
    | st.builds(in_script, st.integers(1, 12), st.sampled_from(OTHER_ZEROS))
    | st.from_regex(
        r"\d{1,5}-\d{1,2}-\d{1,2}(T\d{1,2}:\d{1,2}(:\d{1,2})?)?(Z|[+-]\d{2}:\d{2})?", fullmatch=True
    )
)


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(version=VERSIONS, whole=st.booleans())
@example(version="0001-01-01", whole=False)
@example(version="\u00b2", whole=False)  # a superscript 2: str.isdigit, not int()'s
@example(version="\u0661", whole=False)  # an Arabic-Indic 1: int() reads it as 1
@example(version="0001-01-01", whole=True)
@example(version="9999-12-31T23:59:59-23:59", whole=False)
@example(version="1_0", whole=False)
@example(version="", whole=True)
def test_any_version_is_read_or_refused_in_one_line(
    template: Path, version: str, whole: bool
) -> None:
    """``PATH@VERSION`` and ``--version VERSION``: the bytes of a version it
    names, or one line and exit 2 (1: a version it names has no copy); never a
    traceback. Only ASCII digits are an id."""
    args = ("u/v.jsonl", "--version", version) if whole else (f"u/v.jsonl@{version}",)
    run = cat(template, *args)
    said = run.stderr.decode(errors="replace")
    assert "Traceback" not in said and "a bug" not in said, said
    assert run.returncode in (0, 1, 2), said
    if run.returncode == 0:
        assert run.stdout in (b"version one\n", b"version two\n") and said == ""
        ids = {str(e["id"]) for e in entries(template) if e["relpath"] == "u/v.jsonl"}
        assert not version.isdigit() or version in ids, "only an id in ASCII digits is an id"
    else:
        assert run.stdout == b"" and said.count("\n") == 1, said


def test_odd_names_and_a_name_with_at(site: Path) -> None:
    for raw in ODD:
        run = cat(site, raw)
        assert run.returncode == 0, run.stderr
        assert run.stdout == b"data of " + raw + b"\n"
    said = cat(site, b"u/nope\xe9\n.log")
    assert said.returncode == 2
    assert said.stderr.count(b"\n") == 1, "one line, the name's newline escaped"
    assert b"nothing is archived at u/nope\\xe9\\n.log" in said.stderr


def test_unknown_path_is_exit_2_with_one_line(site: Path) -> None:
    run = cat(site, "u/no-such.jsonl")
    assert run.returncode == 2 and run.stdout == b""
    assert run.stderr.count(b"\n") == 1
    assert b"nothing is archived at u/no-such.jsonl" in run.stderr


def test_a_reader_that_leaves_early_ends_it_quietly(site: Path) -> None:
    command = " ".join(
        [*map(str, COLDKEEP), "cat", "u/big.jsonl", "--config", str(site / "coldkeep.toml")]
    )
    run = subprocess.run(
        ["bash", "-c", f'{command} 2>err | head -c 10; echo "${{PIPESTATUS[0]}}" >rc'],
        cwd=site,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert run.stdout == jsonl(24_000, seed=1)[:10]
    assert (site / "rc").read_text().strip() == "0"
    assert (site / "err").read_bytes() == b"", "no traceback, nothing said"


def test_a_corrupt_gzip_gives_its_bytes_then_one_line(site: Path) -> None:
    entry = _entry(site, "u/big.jsonl")
    gz = site / "archive" / entry["gz_path"]
    data = bytearray(gz.read_bytes())
    data[len(data) * 3 // 4] ^= 0x55
    gz.write_bytes(bytes(data))
    run = cat(site, "u/big.jsonl")
    assert run.returncode == 1
    assert len(run.stdout) > 0 and jsonl(24_000, seed=1).startswith(run.stdout[:100_000])
    assert run.stderr.count(b"\n") == 1, run.stderr
    assert b"u/big.jsonl (entry" in run.stderr and b"not the archived file" in run.stderr


def test_bytes_that_do_not_match_the_manifest_are_said_after_them(site: Path) -> None:
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        db.execute("UPDATE entries SET sha256 = ? WHERE relpath = 'u/small-1.jsonl'", ["0" * 64])
    run = cat(site, "u/small-1.jsonl")
    assert run.returncode == 1
    assert run.stdout == jsonl(150, seed=11), "every byte, then the verdict"
    assert run.stderr.count(b"\n") == 1
    assert b"the manifest records" in run.stderr and b"not the archived file" in run.stderr


def test_a_remote_only_copy_is_read_from_its_member(site: Path) -> None:
    config = site / "coldkeep.toml"
    config.write_text(config.read_text() + "keep_local_days = 0\n")
    ck(site, "ship")
    member = _entry(site, "u/small-2.jsonl")
    alone = _entry(site, "u/big.jsonl")
    for dropped in (member, alone):
        assert not (site / "archive" / dropped["gz_path"]).exists(), "local copy dropped"
    remote_tar = site / "remote" / "t" / member["gz_path"]
    # Every byte of the remote bundle but this member's span garbled: what cat
    # gives right came from the member's range alone. Its mtime put back: the
    # file is still the version the row names (its inode and mtime), or the
    # read, pinned to it, would refuse the object as replaced.
    offset, length = member["member_offset"], member["member_length"]
    data = bytearray(remote_tar.read_bytes())
    data[:offset] = b"\xff" * offset
    data[offset + length :] = b"\xff" * (len(data) - offset - length)
    st = remote_tar.stat()
    remote_tar.write_bytes(bytes(data))
    os.utime(remote_tar, ns=(st.st_atime_ns, st.st_mtime_ns))
    before = _tree(site)
    run = cat(site, "u/small-2.jsonl")
    assert run.returncode == 0, run.stderr
    assert sha(run.stdout) == member["sha256"]
    whole = cat(site, "u/big.jsonl")  # a gzip of its own: the whole object
    assert whole.returncode == 0, whole.stderr
    assert sha(whole.stdout) == alone["sha256"]
    assert _tree(site) == before, "no scratch file left, nothing written"


def test_an_expired_version_says_when(site: Path) -> None:
    config = site / "coldkeep.toml"
    config.write_text(config.read_text().replace("[files]", "[retention]\nfiles_days = 1\n[files]"))
    ck(site, "expire", "--yes")
    run = cat(site, "u/small-0.jsonl")
    assert run.returncode == 1 and run.stdout == b""
    assert run.stderr.count(b"\n") == 1
    assert b"u/small-0.jsonl (entry" in run.stderr and b"expired on " in run.stderr


def test_nothing_is_drawn_on_a_terminal_stderr(site: Path) -> None:
    """``cat x | less``: stderr is the terminal the pager draws on; no progress
    display (nor its hidden cursor) may land there."""
    master, slave = pty.openpty()
    try:
        run = subprocess.run(
            [*COLDKEEP, "cat", "u/big.jsonl", "--config", str(site / "coldkeep.toml")],
            stdout=subprocess.PIPE,
            stderr=slave,
            timeout=120,
            check=False,
        )
        os.close(slave)
        said = b""
        while select.select([master], [], [], 0)[0]:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            said += chunk
    finally:
        os.close(master)
    assert run.returncode == 0
    assert sha(run.stdout) == _entry(site, "u/big.jsonl")["sha256"]
    assert said == b"", said


def test_a_remote_only_member_is_one_ranged_get_of_its_bytes(site: Path, s3: S3Site) -> None:
    config = site / "coldkeep.toml"
    config.write_text(
        config.read_text().split("[remote]")[0]
        + f'[remote]\nurl = "s3://{s3.bucket}/p"\nendpoint_url = "{s3.endpoint}"\n'
        'region = "us-east-1"\nsite = "t"\nkeep_local_days = 0\n'
    )
    s3.proxy.reset_counts()
    assert cat(site, "u/small-2.jsonl").returncode == 0
    assert s3.proxy.exchanges == [], "a local copy is read without asking the store"
    ck(site, "ship")
    member = _entry(site, "u/small-2.jsonl")
    assert not (site / "archive" / member["gz_path"]).exists(), "the local copy was dropped"
    s3.proxy.reset_counts()
    run = cat(site, "u/small-2.jsonl")
    assert run.returncode == 0, run.stderr
    assert sha(run.stdout) == member["sha256"]
    reads = [x for x in s3.proxy.exchanges if x.path.endswith(member["gz_path"])]
    assert len(reads) == 1 and reads[0].method == "GET", reads
    assert reads[0].body_sent == member["member_length"], "the member's bytes, not the bundle's"


def test_a_remote_only_copy_writes_nothing_under_archive_root_and_says_its_gets(
    site: Path, s3: S3Site, tmp_path: Path
) -> None:
    """Read through a block cache of its own (under [mount] cache_dir, removed
    after): nothing appears under archive_root while the GETs are in flight
    (each held a moment by the proxy), and --stats says what they cost."""
    config = site / "coldkeep.toml"
    cache = tmp_path / "cache"
    config.write_text(
        config.read_text().split("[remote]")[0]
        + f'[mount]\ncache_dir = "{cache}"\n'
        + f'[remote]\nurl = "s3://{s3.bucket}/p"\nendpoint_url = "{s3.endpoint}"\n'
        'region = "us-east-1"\nsite = "t"\nkeep_local_days = 0\n'
    )
    local = cat(site, "--stats", "u/big.jsonl")
    assert local.returncode == 0, local.stderr
    assert local.stderr.endswith(b" bytes from its gzip in the archive\n"), local.stderr
    ck(site, "ship")
    big = _entry(site, "u/big.jsonl")
    assert not (site / "archive" / big["gz_path"]).exists(), "the local copy was dropped"
    archive = site / "archive"
    before = set(os.listdir(archive))
    s3.proxy.reset_counts()
    s3.proxy.fail(Delay(0.2), method="GET", path=re.escape(big["gz_path"]))
    with (tmp_path / "out").open("wb") as out_f, (tmp_path / "err").open("wb") as err_f:
        proc = subprocess.Popen(
            [*COLDKEEP, "cat", "--stats", "u/big.jsonl", "--config", str(config)],
            stdout=out_f,
            stderr=err_f,
        )
    seen: set[str] = set()
    while proc.poll() is None:  # watched while it reads, not waited for blind
        seen |= set(os.listdir(archive))
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=0.005)
    out, err = (tmp_path / "out").read_bytes(), (tmp_path / "err").read_bytes()
    assert proc.returncode == 0, err
    assert sha(out) == big["sha256"]
    assert seen <= before | {"coldkeep.db-wal", "coldkeep.db-shm"}, seen - before
    gets = [x for x in s3.proxy.exchanges if x.method == "GET" and x.path.endswith(big["gz_path"])]
    fetched = sum(x.body_sent for x in gets)
    assert fetched == big["gz_bytes"], "each byte of the gzip once"
    said = err.decode()
    assert said.count("\n") == 1, said
    assert f"u/big.jsonl (entry {big['id']}): {big['bytes']} bytes from the remote tier" in said
    assert f"{len(gets)} GET{'s' if len(gets) > 1 else ''}, {fetched} bytes fetched" in said
    assert os.listdir(cache) == [], "the cache's folder removed after the read"


def test_an_identity_file_open_to_others_is_used_with_a_warning(tmp_path: Path) -> None:
    """As ssh warns of a private key others can read (ssh refuses it; a restore
    at 3 a.m. must not wait for a chmod): one line naming the file and the fix,
    then the read goes on, in a plain command (cat) and a registry one (restore)."""
    key = x25519.Identity.generate()
    identity = tmp_path / "key.txt"
    identity.write_text(f"{key}\n")
    site = tmp_path / "site"
    site.mkdir()
    (site / "coldkeep.toml").write_text(
        f'{CONFIG}keep_local_days = 0\nencrypt_to = ["{key.to_public()}"]\n'
    )
    write_old(site, b"u/sealed.jsonl", b"sealed bytes\n")
    ck(site, "pass")
    ck(site, "ship")
    warning = (
        f"coldkeep: warning: identity file {identity} is open to others than its owner "
        f"(mode 0644): whoever can read it can open every copy sealed to its keys; "
        f"chmod 600 {identity}\n"
    )
    for mode, said in ((0o644, warning), (0o600, "")):
        identity.chmod(mode)
        run = cat(site, "u/sealed.jsonl", "--identity", str(identity))
        assert (run.returncode, run.stdout, run.stderr.decode()) == (0, b"sealed bytes\n", said)
        out = tmp_path / f"out-{mode:o}"
        args = ("restore", "--path", "**", "--to", str(out), "--identity", str(identity))
        restored = ck(site, *args).stderr  # the warning, then its progress lines
        warned = [line for line in restored.splitlines(keepends=True) if "warning" in line]
        assert restored.startswith(said) and warned == ([said] if said else [])
        assert (out / "u" / "sealed.jsonl").read_bytes() == b"sealed bytes\n"
