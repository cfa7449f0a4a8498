"""Client-side sealing to age recipients: recipients and identity files checked
in one line each, bundles sealed a stream per span and each member opened alone
from its recorded span, every damage a distinct error, memory bounded."""

from __future__ import annotations

import gzip
import hashlib
import io
import math
import os
import random
import shutil
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyrage import x25519

from coldkeep.core.base.cancel import Cancelled, CancelToken
from coldkeep.core.base.codec import Span
from coldkeep.core.base.recipients import RecipientInvalid, RecipientSet, parse_recipients
from coldkeep.core.files.bundle import read_bundle
from coldkeep.core.remote.sealing import (
    MAGIC,
    Current,
    Identities,
    IdentityFileError,
    IdentityNeeded,
    Reseal,
    Sealed,
    SealedAltered,
    SealedTruncated,
    SealError,
    WrongIdentity,
    identity_needed,
    load_identities,
    open_sealed,
    rekey_step,
    seal_spans,
    tile,
)

KIB = 1024
AGE_CHUNK = 64 * KIB
KEYS = [x25519.Identity.generate() for _ in range(3)]
PUBLIC = [str(k.to_public()) for k in KEYS]


def key_file(path: Path, *keys: x25519.Identity) -> Path:
    """An identity file as age-keygen writes it (a comment block per key)."""
    text = "".join(
        f"# created: 2026-12-02T12:00:00Z\n# public key: {k.to_public()}\n{k}\n\n" for k in keys
    )
    path.write_text(text)
    path.chmod(0o600)  # age-keygen -o makes it its owner's alone
    return path


def identities(tmp: Path, *keys: x25519.Identity) -> Identities:
    return load_identities(key_file(tmp / "key.txt", *keys))


def seal_bytes(
    data: bytes, recipients: RecipientSet, spans: tuple[Span, ...] | None
) -> tuple[bytes, Sealed]:
    out = io.BytesIO()
    sealed = seal_spans(io.BytesIO(data), out, recipients, spans, what="t", cancel=CancelToken())
    return out.getvalue(), sealed


def open_bytes(
    ct: bytes, ids: Identities, length: int | None = None, sealed_to: str = "", skip: int = 0
) -> bytes:
    out = io.BytesIO()
    got = open_sealed(
        io.BytesIO(ct),
        out,
        ids,
        length=len(ct) if length is None else length,
        what="files/u/b.tar member a.gz",
        sealed_to=sealed_to or None,
        cancel=CancelToken(),
        skip=skip,
    )
    assert got.bytes == len(out.getvalue())
    assert got.sha256 == hashlib.sha256(out.getvalue()).hexdigest()
    return out.getvalue()


def header_length(stream: bytes) -> int:
    """Where an age stream's header ends: after the line ``--- <MAC>``."""
    mac = stream.index(b"\n--- ") + 1
    return stream.index(b"\n", mac) + 1


# --- recipients ---


def test_a_set_is_the_same_in_any_order_and_says_its_fingerprint() -> None:
    a = parse_recipients([PUBLIC[0], f"  {PUBLIC[1]}\n"])
    b = parse_recipients([PUBLIC[1], PUBLIC[0]])
    assert a == b and a.fingerprint == b.fingerprint and len(a.fingerprint) == 12
    assert a.keys == tuple(sorted(PUBLIC[:2]))
    assert parse_recipients(PUBLIC[:1]).fingerprint != a.fingerprint
    assert a.fingerprint in a.describe() and PUBLIC[0][:12] in a.describe()


@pytest.mark.parametrize(
    ("values", "index", "says"),
    [
        ([], 0, "the list is empty"),
        ([PUBLIC[0], "age1nothing"], 1, "'age1nothing' is not a valid age X25519 recipient"),
        (["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI"], 0, "is an SSH key"),
        ([PUBLIC[0], 7], 1, "is int, not a string"),
        ([PUBLIC[0], PUBLIC[1], PUBLIC[0]], 2, "repeats encrypt_to[0]"),
        (["age1pq1" + "q" * 60], 0, "is not an age X25519 recipient"),
        ([PUBLIC[0][:-1] + ("q" if PUBLIC[0][-1] != "q" else "p")], 0, "not a valid"),
    ],
)
def test_a_bad_recipient_is_one_line_naming_its_index(
    values: list[object], index: int, says: str
) -> None:
    with pytest.raises(RecipientInvalid) as err:
        parse_recipients(values)
    line = str(err.value)
    assert line.startswith(f"remote.encrypt_to[{index}]: ") and says in line
    assert "\n" not in line and err.value.key == f"encrypt_to[{index}]"
    assert err.value.problem and err.value.fix


def test_a_secret_key_among_the_recipients_is_refused_and_never_repeated() -> None:
    secret = str(KEYS[0])
    with pytest.raises(RecipientInvalid) as err:
        parse_recipients([PUBLIC[1], secret])
    assert "encrypt_to[1]: is a secret key" in str(err.value)
    assert secret not in str(err.value) and secret[16:30] not in str(err.value)


# --- identity files ---


def test_an_identity_file_as_age_keygen_writes_it_is_read(tmp_path: Path) -> None:
    path = key_file(tmp_path / "k.txt", KEYS[0], KEYS[2])
    path.write_text(path.read_text().replace("\n", "\r\n") + "   \n# the end\n")
    ids = load_identities(path)
    assert ids.opens == (PUBLIC[0], PUBLIC[2]) and ids.file == path
    assert ids.warnings == ()


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620, 0o602, 0o700, 0o600, 0o400])
def test_an_identity_file_open_to_others_is_used_and_warned_of(tmp_path: Path, mode: int) -> None:
    path = key_file(tmp_path / "k.txt", KEYS[0])
    path.chmod(mode)
    ids = load_identities(path)
    assert ids.opens == (PUBLIC[0],), "used all the same"
    if mode & 0o077:
        [said] = ids.warnings
        assert said.startswith(f"identity file {path} is open to others than its owner")
        assert f"(mode {mode:04o})" in said and said.endswith(f"chmod 600 {path}")
    else:
        assert ids.warnings == ()


def test_no_message_or_repr_shows_a_secret_key(tmp_path: Path) -> None:
    ids = identities(tmp_path, KEYS[0])
    secret = str(KEYS[0])
    assert secret not in repr(ids) and secret not in ids.describe() and secret not in str(ids)
    bad = tmp_path / "bad.txt"
    bad.write_text(f"{PUBLIC[1]}\n{secret[:-3]}\n")  # a public key where a secret goes; a cut one
    with pytest.raises(IdentityFileError, match="line 1 is not an age secret key"):
        load_identities(bad)
    bad.write_text(f"{secret[:-3]}\n")
    with pytest.raises(IdentityFileError) as err:
        load_identities(bad)
    assert "line 1 is not a valid age X25519 secret key" in str(err.value)
    assert secret[:-3] not in str(err.value) and secret[20:40] not in str(err.value)


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "no such file"),
        (b"", "holds no age secret key"),
        (b"# created: 2026-12-02\n\n", "holds no age secret key"),
        (b"AGE-PLUGIN-YUBIKEY-1QQQQ\n", "line 1 is a plugin identity"),
        (b"\xff\xfe\x00key\n", "is not text"),
        (MAGIC + b"-> scrypt abc 18\n", "is itself age-encrypted"),
        (b"-----BEGIN OPENSSH PRIVATE KEY-----\n", "line 1 is not an age secret key"),
    ],
)
def test_an_unusable_identity_file_is_one_line_naming_it(
    tmp_path: Path, content: bytes | None, says: str
) -> None:
    path = tmp_path / "id.txt"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(IdentityFileError) as err:
        load_identities(path)
    assert str(err.value).startswith(f"{path}: {says}"), str(err.value)
    assert "\n" not in str(err.value)


def test_an_identity_file_that_cannot_be_read_names_it(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("x")
    for path in (tmp_path / "plain" / "key.txt", tmp_path):  # ENOTDIR (even as root); a folder
        with pytest.raises(IdentityFileError) as err:
            load_identities(path)
        assert str(err.value).startswith(f"{path}: ")
        assert "cannot be read: Not a directory" in str(err.value) or "is a folder" in str(
            err.value
        )


def test_a_read_without_an_identity_says_which_key_it_needs() -> None:
    rs = parse_recipients(PUBLIC[:2])
    err = identity_needed("files/u/a.gz", rs.describe())
    assert isinstance(err, IdentityNeeded)
    assert str(err).startswith("files/u/a.gz is sealed to age1")
    assert rs.fingerprint in str(err) and "--identity FILE" in str(err)


# --- sealing and opening ---

EDGES = [0, 1, 2, AGE_CHUNK - 1, AGE_CHUNK, AGE_CHUNK + 1, 2 * AGE_CHUNK, 3 * AGE_CHUNK + 17]
lengths = st.one_of(st.sampled_from(EDGES), st.integers(0, 3 * AGE_CHUNK))
gaps = st.one_of(st.sampled_from([0, 0, 1, 512, AGE_CHUNK]), st.integers(0, 2 * AGE_CHUNK))


@st.composite
def layouts(draw: st.DrawFn) -> tuple[int, list[Span]]:
    """A file's size and its members' spans: gaps (none, a byte, a chunk) and
    members (empty, a byte, a chunk ± 1, several chunks) alternating."""
    members: list[Span] = []
    at = draw(gaps)
    for _ in range(draw(st.integers(0, 5))):
        n = draw(lengths)
        members.append(Span(at, n))
        at += n + draw(gaps)
    return at, members


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(layout=layouts(), n_recipients=st.integers(1, 3), seed=st.integers(0, 2**32))
def test_each_member_opens_alone_from_its_recorded_span(
    layout: tuple[int, list[Span]], n_recipients: int, seed: int
) -> None:
    size, members = layout
    rnd = random.Random(seed)
    data = rnd.randbytes(size)
    rs = parse_recipients(PUBLIC[:n_recipients])
    key = KEYS[rnd.randrange(n_recipients)]
    ids = Identities(Path("k"), (str(key.to_public()),), (key,))
    spans = tile(size, members)
    assert sum(s.length for s in spans) == size
    ct, sealed = seal_bytes(data, rs, spans)
    assert sealed.plain.bytes == size
    assert sealed.plain.sha256 == hashlib.sha256(data).hexdigest()
    assert sealed.sealed.bytes == len(ct)
    assert sealed.sealed.sha256 == hashlib.sha256(ct).hexdigest()
    at = 0
    for plain, cut in sealed.pieces:
        assert cut.offset == at  # back to back, nothing between
        at += cut.length
        stream = ct[cut.offset : cut.offset + cut.length]
        assert stream.startswith(MAGIC)
        chunks = max(1, math.ceil(plain.length / AGE_CHUNK))
        assert cut.length == header_length(stream) + 16 + plain.length + 16 * chunks
        assert cut.length <= plain.length + AGE_CHUNK
    assert at == len(ct)
    for m in members:
        cut, skip = sealed.locate(m)
        got = open_bytes(ct[cut.offset : cut.offset + cut.length], ids, skip=skip)
        assert got == data[m.offset : m.offset + m.length]


def test_a_whole_file_is_one_stream_the_age_cli_opens(tmp_path: Path) -> None:
    data = random.Random(1).randbytes(3 * AGE_CHUNK + 5)
    ct, sealed = seal_bytes(data, parse_recipients(PUBLIC), None)
    assert [p for p, _ in sealed.pieces] == [Span(0, len(data))]
    assert open_bytes(ct, identities(tmp_path, KEYS[2])) == data
    if shutil.which("age") is None:
        pytest.skip("the age CLI is not installed: its reading of a sealed object is not checked")
    key = key_file(tmp_path / "cli.txt", KEYS[1])
    out = subprocess.run(["age", "-d", "-i", str(key)], input=ct, capture_output=True, check=True)
    assert out.stdout == data


def test_a_real_bundle_s_members_read_back_one_stream_each(tmp_path: Path) -> None:
    rnd = random.Random(5)
    files = {f"u/{i:02d}é.jsonl": rnd.randbytes(rnd.choice([0, 1, 700, 20_000])) for i in range(12)}
    path = tmp_path / "b.tar"
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in files.items():
            gz = gzip.compress(data)
            info = tarfile.TarInfo(f"{name}.gz")
            info.size = len(gz)
            tar.addfile(info, io.BytesIO(gz))
    members = read_bundle(path).members
    assert len(members) == len(files)
    raw = path.read_bytes()
    spans = tile(len(raw), [m.span for m in members])
    assert len(spans) == len(members) + 1  # the tar's end its own stream
    ct, sealed = seal_bytes(raw, parse_recipients(PUBLIC), spans)
    ids = identities(tmp_path, KEYS[0])
    for m in members:
        cut, skip = sealed.locate(m.span)
        assert cut.length < m.span.length + 3 * KIB  # the member, its tar header, age's
        got = open_bytes(ct[cut.offset : cut.offset + cut.length], ids, skip=skip)
        assert gzip.decompress(got) == files[m.relpath]
    with pytest.raises(KeyError):
        sealed.locate(Span(1, 2))


def test_no_plaintext_shows_through(tmp_path: Path) -> None:
    marker = b"coldkeep-marker-" + os.urandom(16).hex().encode()
    gz = b"\x1f\x8b\x08\x00" + bytes(6) + (b"{}\n" + marker) * 5000
    size = len(gz)
    spans = tile(size, [Span(0, 100), Span(100, size - 200)])
    for layout in (None, spans):
        ct, _ = seal_bytes(gz, parse_recipients(PUBLIC[:2]), layout)
        assert marker not in ct and marker[-16:] not in ct
        assert not ct.startswith(b"\x1f\x8b") and ct.startswith(MAGIC)


def test_the_header_is_not_the_same_size_twice() -> None:
    # Why spans are recorded, never computed: a random grease stanza.
    rs = parse_recipients(PUBLIC[:1])
    sizes = {len(seal_bytes(b"", rs, None)[0]) for _ in range(40)}
    assert len(sizes) > 1


def test_a_source_that_is_not_what_its_spans_say_is_refused() -> None:
    rs = parse_recipients(PUBLIC[:1])
    with pytest.raises(SealError, match="ended at byte 100, inside the span"):
        seal_bytes(b"x" * 100, rs, (Span(0, 50), Span(50, 60)))
    with pytest.raises(SealError, match="is longer than its spans' 100 bytes"):
        seal_bytes(b"x" * 101, rs, (Span(0, 50), Span(50, 50)))
    with pytest.raises(ValueError, match="overlaps"):
        tile(100, [Span(0, 60), Span(50, 10)])


def test_a_bundle_is_cut_after_each_member() -> None:
    # A tar header rides in the stream of the member it precedes.
    members = [Span(1124, 300), Span(512, 100), Span(1124, 0)]
    assert tile(2000, members) == (Span(0, 612), Span(612, 512), Span(1124, 300), Span(1424, 576))
    assert tile(100, [Span(0, 100)]) == (Span(0, 100),)
    assert tile(0, []) == (Span(0, 0),)  # an empty file is one empty stream


class FailingOut:
    """An output whose nth write fails as a full disk does."""

    def __init__(self, nth: int) -> None:
        self.nth, self.calls = nth, 0

    def write(self, data: bytes) -> int:
        self.calls += 1
        if self.calls == self.nth:
            raise OSError(28, "No space left on device")
        return len(data)


@pytest.mark.parametrize("nth", [1, 2])
def test_a_write_that_fails_fails_the_seal(nth: int) -> None:
    # pyrage itself returns in silence when the first write (the header) fails.
    with pytest.raises(OSError, match="No space left") as err:
        seal_spans(
            io.BytesIO(b"y" * 3 * AGE_CHUNK),
            FailingOut(nth),
            parse_recipients(PUBLIC[:1]),
            None,
            what="t",
            cancel=CancelToken(),
        )
    assert err.value.errno == 28


def test_a_cancelled_seal_stops_as_cancelled() -> None:
    token = CancelToken()
    token.cancel("stop")
    with pytest.raises(Cancelled):
        seal_spans(
            io.BytesIO(b"z" * 10),
            io.BytesIO(),
            parse_recipients(PUBLIC[:1]),
            None,
            what="t",
            cancel=token,
        )


# --- damage ---


@pytest.fixture
def member(tmp_path: Path) -> tuple[bytes, bytes, Identities, RecipientSet]:
    data = random.Random(2).randbytes(2 * AGE_CHUNK + 300)
    rs = parse_recipients(PUBLIC[:2])
    ct, _ = seal_bytes(data, rs, None)
    return data, ct, identities(tmp_path, KEYS[1]), rs


def test_a_stranger_s_key_says_which_key_is_needed(
    tmp_path: Path, member: tuple[bytes, bytes, Identities, RecipientSet]
) -> None:
    _, ct, _, rs = member
    other = load_identities(key_file(tmp_path / "other.txt", KEYS[2]))
    with pytest.raises(WrongIdentity) as err:
        open_bytes(ct, other, sealed_to=rs.describe())
    line = str(err.value)
    assert f"is sealed to {rs.describe()}; {other.file} holds {PUBLIC[2][:12]}" in line
    assert str(KEYS[2]) not in line and "\n" not in line
    with pytest.raises(WrongIdentity, match="sealed to recipients not recorded"):
        open_bytes(ct, other)


def test_a_copy_shorter_than_recorded_is_truncated(
    member: tuple[bytes, bytes, Identities, RecipientSet],
) -> None:
    _, ct, ids, _ = member
    for cut in (1, 16, 300 + 16, len(ct) - 40):
        with pytest.raises(SealedTruncated, match=f"ends after {len(ct) - cut:,} of its"):
            open_bytes(ct[:-cut], ids, length=len(ct))


def test_a_stream_cut_at_a_chunk_s_end_never_opens_short(
    member: tuple[bytes, bytes, Identities, RecipientSet],
) -> None:
    # Recorded as cut: the last whole chunk was never marked the last one.
    _, ct, ids, _ = member
    header = header_length(ct)
    for chunks in (1, 2):
        cut = ct[: header + 16 + chunks * (AGE_CHUNK + 16)]
        out = io.BytesIO()
        with pytest.raises(SealedAltered, match="fails age's authentication"):
            open_sealed(
                io.BytesIO(cut), out, ids, length=len(cut), what="m", sealed_to=None,
                cancel=CancelToken(),
            )  # fmt: skip


@pytest.mark.parametrize("where", ["mac", "nonce", "first chunk", "last byte"])
def test_a_flipped_byte_is_altered(
    member: tuple[bytes, bytes, Identities, RecipientSet], where: str
) -> None:
    _, ct, ids, _ = member
    header = header_length(ct)
    at = {"mac": header - 3, "nonce": header + 3, "first chunk": header + 100, "last byte": -1}
    raw = bytearray(ct)
    raw[at[where]] ^= 0x01
    with pytest.raises(SealedAltered, match="fails age's authentication"):
        open_bytes(bytes(raw), ids)


def test_no_damage_opens(member: tuple[bytes, bytes, Identities, RecipientSet]) -> None:
    _, ct, ids, _ = member
    rnd = random.Random(4)
    for _ in range(300):
        raw = bytearray(ct)
        for _ in range(rnd.choice([1, 1, 3])):
            at = rnd.randrange(len(raw)) if rnd.random() < 0.3 else rnd.randrange(400)
            raw[at] ^= rnd.randrange(1, 256)
        if rnd.random() < 0.2:
            raw = raw[: rnd.randrange(len(raw))]
        with pytest.raises((SealedAltered, WrongIdentity, SealedTruncated)) as err:
            open_bytes(bytes(raw), ids, length=len(ct))
        assert "\n" not in str(err.value)


def test_an_unsealed_object_is_named_so(
    member: tuple[bytes, bytes, Identities, RecipientSet],
) -> None:
    _, _, ids, _ = member
    gz = b"\x1f\x8b\x08\x00" + bytes(200)
    with pytest.raises(SealedAltered, match="is not an age stream"):
        open_bytes(gz, ids)


def test_a_failing_output_while_opening_is_raised_as_itself(
    member: tuple[bytes, bytes, Identities, RecipientSet],
) -> None:
    _, ct, ids, _ = member
    for nth in (1, 3):
        with pytest.raises(OSError, match="No space left"):
            open_sealed(
                io.BytesIO(ct), FailingOut(nth), ids, length=len(ct), what="m", sealed_to=None,
                cancel=CancelToken(),
            )  # fmt: skip


# --- new recipients ---


def test_rekey_says_what_must_be_sealed_again_and_from_where() -> None:
    now = parse_recipients(PUBLIC[1:])
    assert rekey_step(now.fingerprint, now, local_copy=False) == Current()
    old = parse_recipients(PUBLIC[:1]).fingerprint
    local = rekey_step(old, now, local_copy=True)
    assert isinstance(local, Reseal) and local.source == "local" and not local.needs_identity
    remote = rekey_step(old, now, local_copy=False)
    assert isinstance(remote, Reseal) and remote.source == "remote" and remote.needs_identity
    assert f"sealed to set {old}, not {now.describe()}" in remote.reason
    assert "--identity" in remote.reason and "cannot be re-wrapped" in remote.reason
    plain = rekey_step(None, now, local_copy=False)
    assert isinstance(plain, Reseal) and not plain.needs_identity
    assert plain.reason.startswith("stored unsealed")


# --- memory ---

CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from pyrage import x25519
    from coldkeep.core.base.cancel import CancelToken
    from coldkeep.core.base.recipients import parse_recipients
    from coldkeep.core.remote.sealing import Identities, open_sealed, seal_spans

    def hwm():
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024

    src, sealed, back = (Path(a) for a in sys.argv[1:4])
    key = x25519.Identity.generate()
    rs = parse_recipients([str(key.to_public())])
    ids = Identities(Path("k"), rs.keys, (key,))
    Path("/proc/self/clear_refs").write_text("5")
    base = hwm()
    with src.open("rb") as f, sealed.open("wb") as o:
        s = seal_spans(f, o, rs, None, what="big", cancel=CancelToken())
    seal_peak = hwm()
    Path("/proc/self/clear_refs").write_text("5")
    base2 = hwm()
    with sealed.open("rb") as f, back.open("wb") as o:
        d = open_sealed(f, o, ids, length=s.sealed.bytes, what="big", sealed_to=None,
                        cancel=CancelToken())
    assert d == s.plain, (d, s.plain)
    print(seal_peak - base, hwm() - base2)
    """
)


def test_sealing_and_opening_a_large_file_takes_bounded_memory(tmp_path: Path) -> None:
    if not Path("/proc/self/clear_refs").exists():
        pytest.skip("no /proc/self/clear_refs: the peak RSS cannot be reset")
    size = 72 << 20
    src = tmp_path / "big.gz"
    with src.open("wb") as f:
        block = random.Random(3).randbytes(1 << 20)
        for _ in range(size >> 20):
            f.write(block)
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(src), str(tmp_path / "s.age"), str(tmp_path / "back")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    seal_growth, open_growth = (int(v) for v in out.stdout.split())
    assert seal_growth < 16 << 20, seal_growth
    assert open_growth < 16 << 20, open_growth
    assert (tmp_path / "back").stat().st_size == size
