"""Disaster recovery against any history of the bucket: ships between clock jumps
ahead and back, a second host shipping under the same remote.site, names
planted to sort after the site's own, another site's genuine snapshot copied in,
and a forgery sealed to the site's public recipient and signed by a key of its
own. Whatever the sequence, recovery gives back exactly the site's own newest
generation, or refuses in one line: never another site's files, never an older
generation in silence."""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pyrage
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyrage import x25519

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.config import load_settings
from coldkeep.core.base.errors import UsageError
from coldkeep.core.base.recipients import parse_recipients
from coldkeep.core.base.signing import SiteKey
from coldkeep.core.base.stream import EventStream
from coldkeep.core.base.times import DAY_MS, now_ms
from coldkeep.core.remote.identity import SiteClaimed
from coldkeep.core.remote.rebuild import DrChoice
from coldkeep.core.remote.sealing import load_identities
from coldkeep.core.remote.snapshots import Statement, sign

from helpers import EVERY_FILE, write_old

NAME = "web"


class Clock:
    def __init__(self) -> None:
        self.now = now_ms()

    def __call__(self) -> int:
        return self.now


def site_at(folder: Path, bucket: Path, name: str, recipient: str | None) -> Path:
    folder.mkdir(parents=True)
    (folder / "live").mkdir()
    sealed = f'encrypt_to = ["{recipient}"]\n' if recipient else ""
    (folder / "coldkeep.toml").write_text(
        f'{EVERY_FILE}\n[remote]\nurl = "{bucket.as_uri()}"\nsite = "{name}"\n'
        f"keep_local_days = -1\n{sealed}"
    )
    write_old(folder, b"u/first.log", b"first\n" * 100)
    return folder


def archiver(site: Path, clock: Clock) -> Archiver:
    settings = load_settings(site / "coldkeep.toml")
    return Archiver(settings, stream=EventStream(), clock=clock, serve_events=False)


def relpaths(db: Path) -> set[str]:
    with sqlite3.connect(db) as conn:
        return {str(r[0]) for r in conn.execute("SELECT relpath FROM entries")}


@dataclass
class History:
    """What the site itself shipped: its newest generation and what it held."""

    generation: int = 0
    relpaths: set[str] = field(default_factory=set)
    files: int = 0


ACTIONS = st.lists(
    st.one_of(
        st.just(("ship", 0)),
        st.tuples(st.just("jump"), st.integers(-400, 400)),
        st.just(("second host", 0)),
        st.tuples(st.just("plant"), st.integers(1, 5)),
        st.just(("foreign", 0)),
        st.just(("forged", 0)),
    ),
    min_size=1,
    max_size=7,
).map(lambda steps: [("ship", 0), *steps])


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("dr-property")


@settings(max_examples=10, deadline=None)
@given(steps=ACTIONS)
def test_recovery_gives_back_the_site_s_own_newest_generation_or_refuses(
    base: Path, steps: list[tuple[str, int]]
) -> None:
    work = Path(tempfile.mkdtemp(dir=base))
    asyncio.run(_history(work, steps))


async def _history(work: Path, steps: list[tuple[str, int]]) -> None:
    bucket = work / "bucket"
    identity = x25519.Identity.generate()
    (work / "key.txt").write_text(f"{identity}\n")
    public = str(identity.to_public())
    a = site_at(work / "a", bucket, NAME, public)
    clock = Clock()
    history = History()
    for step, n in steps:
        if step == "ship":
            history.files += 1
            write_old(a, f"u/f{history.files}.log".encode(), b"x\n" * (50 + history.files))
            ck = archiver(a, clock)
            await ck.run_pass()
            shipped = await ck.ship()
            assert not shipped.problems, shipped.problems
            state = (await ck.status()).site
            assert state is not None
            history.generation = state.generation
            history.relpaths = relpaths(a / "archive" / "coldkeep.db")
        elif step == "jump":
            clock.now += n * DAY_MS
        elif step == "second host":
            other = work / f"b{len(list(work.glob('b*')))}"
            b = site_at(other, bucket, NAME, None)
            before = sorted(bucket.rglob("*"))
            await archiver(b, Clock()).run_pass()
            with pytest.raises(SiteClaimed):
                await archiver(b, Clock()).ship()
            assert sorted(bucket.rglob("*")) == before, "the second host wrote nothing"
        elif step == "plant":
            for i in range(n):
                planted = bucket / NAME / "manifest" / f"g{999_999_999_990 + i:012d}-0000000{i}.db"
                planted.parent.mkdir(parents=True, exist_ok=True)
                planted.write_bytes(b"SQLite format 3\x00" + bytes(100))
        elif step == "foreign":
            await _foreign_snapshot(work, bucket)
        else:
            _forgery(a, bucket, identity, history.generation + 5)

    fingerprint = (await archiver(a, clock).status()).site
    assert fingerprint is not None and fingerprint.key is not None
    shutil.rmtree(a / "archive")
    ck = archiver(a, Clock())
    ck.sessions.identities = load_identities(work / "key.txt")
    # Without the fingerprint: the site's own newest generation, or one line.
    try:
        report = await ck.rebuild_from_remote()
    except UsageError as err:
        assert "\n" not in str(err)
    else:
        assert report.generation == history.generation
        assert relpaths(a / "archive" / "coldkeep.db") == history.relpaths
        shutil.rmtree(a / "archive")
    # With it: always the site's own newest generation.
    report = await ck.rebuild_from_remote(choice=DrChoice(site_key=fingerprint.key))
    assert report.generation == history.generation
    assert relpaths(a / "archive" / "coldkeep.db") == history.relpaths


async def _foreign_snapshot(work: Path, bucket: Path) -> None:
    """Another site's genuine snapshot and statement, copied under this one's."""
    other = work / "c"
    if not other.exists():
        site_at(other, bucket, "elsewhere", None)
        ck = archiver(other, Clock())
        await ck.run_pass()
        await ck.ship()
    for path in (bucket / "elsewhere" / "manifest").iterdir():
        target = bucket / NAME / "manifest" / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)


def _forgery(site: Path, bucket: Path, identity: x25519.Identity, generation: int) -> None:
    """The site's own manifest with a file of the forger's, as a later
    generation, sealed to the site's public recipient, signed by a key of the
    forger's own for the site's id."""
    db = site.parent / f"forged-{generation}.db"
    with sqlite3.connect(site / "archive" / "coldkeep.db") as src, sqlite3.connect(db) as out:
        src.backup(out)
    forger = SiteKey.new()
    with sqlite3.connect(db) as conn:
        site_id = str(conn.execute("SELECT site_id FROM site_state").fetchone()[0])
        conn.execute("UPDATE site_state SET generation = ?", [generation])
        conn.execute(
            "INSERT INTO site_keys (fingerprint, public_key, added_at) VALUES (?, ?, 0)",
            [forger.fingerprint, forger.public_b64],
        )
        conn.execute("UPDATE entries SET relpath = 'u/forged.log'")
    conn.close()  # its WAL into the file: the bytes sealed are the forgery whole
    recipients = parse_recipients([str(identity.to_public())])
    body = pyrage.encrypt(db.read_bytes(), [identity.to_public()])
    name = f"manifest/g{generation:012d}-f0f0f0f0.db.{recipients.fingerprint}.age"
    (bucket / NAME / name).write_bytes(body)
    statement = Statement(
        NAME, site_id, generation, now_ms(), name, len(body),
        hashlib.sha256(body).hexdigest(), "forger", forger.fingerprint,
    )  # fmt: skip
    (bucket / NAME / f"{name}.sig").write_bytes(sign(forger, statement))


def test_a_forgery_sealed_to_the_site_s_recipient_is_refused_even_picked_by_hand(
    tmp_path: Path,
) -> None:
    """The forgery above opens with the site's identity and reads as a later
    generation (what a recovery by names took): only its signature tells it
    from the site's own, and a recovery refuses it even when it is picked."""
    identity = x25519.Identity.generate()
    bucket = tmp_path / "bucket"
    a = site_at(tmp_path / "a", bucket, NAME, str(identity.to_public()))

    async def ship() -> None:
        ck = archiver(a, Clock())
        await ck.run_pass()
        await ck.ship()

    asyncio.run(ship())
    _forgery(a, bucket, identity, 7)
    [forged] = (bucket / NAME / "manifest").glob("g000000000007-*.age")
    opened = pyrage.decrypt(forged.read_bytes(), [identity])
    (tmp_path / "opened.db").write_bytes(opened)
    assert "u/forged.log" in relpaths(tmp_path / "opened.db")
    (tmp_path / "key.txt").write_text(f"{identity}\n")
    shutil.rmtree(a / "archive")
    ck = archiver(a, Clock())
    ck.sessions.identities = load_identities(tmp_path / "key.txt")
    picked = DrChoice(snapshot=f"manifest/{forged.name}")
    with pytest.raises(UsageError, match="not taken"):
        asyncio.run(ck.rebuild_from_remote(choice=picked))
    assert not (a / "archive" / "coldkeep.db").exists()
