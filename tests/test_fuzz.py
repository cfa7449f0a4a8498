"""Hostile input, generated: whatever an operator's editor, a copied archive or a
local process hands coldkeep, the answer is a one-line error (or a result),
never a traceback.

    the config       arbitrary TOML documents and bytes -> Settings or ConfigError
    cron in [jobs]   an accepted expression always has a next fire time
    gzip headers     arbitrary bytes -> a header or CorruptGzip
    bundles          a real bundle, bytes overwritten or cut -> its members, each
                     checked, and the rest refused by name
    attach lines     arbitrary lines -> a reply, never a dropped connection
    stream events    arbitrary JSON objects -> an event or None
    browser queries  arbitrary text -> a Query or QueryError

Bounded for the suite (the "ci" profile, tests/conftest.py); `make fuzz` runs the
same properties for much longer (HYPOTHESIS_PROFILE=long).
"""

from __future__ import annotations

import json
import string
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from coldkeep.core.base.cancel import CancelToken
from coldkeep.core.base.codec import Codec, CorruptGzip, read_gzip_header
from coldkeep.core.base.config import Settings, load_settings, parse_settings
from coldkeep.core.base.configjobs import JOB_NAMES
from coldkeep.core.base.configtable import ConfigError
from coldkeep.core.base.layout import check_relpath
from coldkeep.core.base.ratelimit import UNLIMITED
from coldkeep.core.base.stream import EventStream, Phase, from_dict
from coldkeep.core.files.bundle import pack, read_bundle
from coldkeep.core.files.catalog import Query, QueryError, parse_query
from coldkeep.core.files.gzfile import Roots
from coldkeep.core.ops.attach import AttachServer
from coldkeep.core.sched.jobs import next_fire_after

# Values a TOML document can hold, awkward ones included.
SCALARS = (
    st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=True)
    | st.text(max_size=40)
    | st.sampled_from(["", "..", "/", "live", "archive", "\x00", "**", "[", "state.db", "on"])
    | st.dates()
    | st.datetimes()
    | st.times()
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)
TOP_KEYS = [
    "live_root",
    "archive_root",
    "state_db",
    "mode",
    "hold_days",
    "files",
    "events",
    "gzip",
    "io",
    "jobs",
    "alerts",
]
TABLE_KEYS = {
    "files": ["include", "exclude", "min_age_days", "unit_closed"],
    "events": ["table", "kind_column", "ts_column", "ts_format", "min_age_days", "kinds"],
    "gzip": ["engine", "level"],
    "io": ["bytes_per_s", "workers"],
    "alerts": ["command", "webhook", "timeout"],
}


def documents() -> st.SearchStrategy[dict[str, Any]]:
    """Config-shaped documents: the real keys (and some others) with any values,
    the real tables with their real keys, the jobs with their real names."""
    table = {
        name: st.dictionaries(st.sampled_from([*keys, "nonsense"]), VALUES, max_size=5)
        for name, keys in TABLE_KEYS.items()
    }
    jobs = st.dictionaries(
        st.sampled_from([*JOB_NAMES, "timezone", "retention_days"]),
        st.dictionaries(
            st.sampled_from(["cron", "interval", "timeout", "enabled", "run_on_boot"]),
            VALUES | st.sampled_from(["17 3 * * *", "0 0 31 2 *", "* * * * * *", "@daily"]),
            max_size=4,
        )
        | VALUES,
        max_size=4,
    )
    return st.fixed_dictionaries(
        {},
        optional={
            **{k: VALUES for k in TOP_KEYS if k not in table and k != "jobs"},
            "live_root": st.sampled_from(["live", "nowhere", "", "\x00bad", "/"]) | VALUES,
            "archive_root": st.sampled_from(["archive", "live/archive", "\x00"]) | VALUES,
            **{k: s | VALUES for k, s in table.items()},
            "jobs": jobs,
        },
    )


def one_line(err: Exception) -> None:
    text = str(err)
    assert text and "\n" not in text, text


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(documents())
@example({"live_root": "live", "archive_root": "\x00"})  # found by `make fuzz`
def test_any_config_document_loads_or_is_refused_in_one_line(doc: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        (base / "live").mkdir()
        try:
            cfg = parse_settings(doc, base / "coldkeep.toml")
        except ConfigError as err:
            one_line(err)
            return
        assert isinstance(cfg, Settings)
        for job in cfg.jobs.jobs.values():  # an accepted schedule has a next time
            assert next_fire_after(job, None, 1_796_000_000.0) > 1_796_000_000.0


@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_any_config_bytes_load_or_are_refused_in_one_line(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "coldkeep.toml"
        path.write_bytes(raw)
        try:
            load_settings(path)
        except ConfigError as err:
            one_line(err)


# minute, hour, day of month, month, day of week: real values, impossible
# dates (the 31st of February) and out-of-range ones.
CRON = st.tuples(
    st.sampled_from(["0", "*/5", "60", "*", "1-5"]),
    st.sampled_from(["0", "3", "24", "*"]),
    st.sampled_from(["31", "30", "*", "1", "L"]),
    st.sampled_from(["2", "*", "13", "4"]),
    st.sampled_from(["*", "0", "7", "8"]),
).map(" ".join)


@given(
    CRON
    | st.lists(st.sampled_from(["*", "0", "1"]), max_size=7).map(" ".join)
    | st.text(max_size=20)
)
def test_a_cron_expression_is_refused_or_fires(expr: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        (base / "live").mkdir()
        doc = {"live_root": "live", "archive_root": "archive", "jobs": {"pass": {"cron": expr}}}
        try:
            cfg = parse_settings(doc, base / "coldkeep.toml")
        except ConfigError as err:
            one_line(err)
            return
        job = cfg.jobs.jobs["pass"]
        assert next_fire_after(job, None, 1_796_000_000.0) > 1_796_000_000.0


GZIP_START = st.sampled_from(
    [b"", b"\x1f\x8b", b"\x1f\x8b\x08", b"\x1f\x8b\x08\xff", b"\x1f\x8b\x08\x0c"]
)


@given(GZIP_START, st.binary(max_size=200))
def test_any_bytes_give_a_gzip_header_or_corrupt_gzip(start: bytes, rest: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        gz = Path(tmp) / "x.gz"
        gz.write_bytes(start + rest)
        try:
            header = read_gzip_header(gz)
        except CorruptGzip as err:
            one_line(err)
            return
        assert header.name is None or isinstance(header.name, str)


def small_bundle() -> bytes:
    """A bundle of three small members, as a pass writes it."""
    with tempfile.TemporaryDirectory() as tmp:
        live, archive = Path(tmp, "live"), Path(tmp, "archive")
        for n in range(3):
            (live / "u").mkdir(parents=True, exist_ok=True)
            (live / "u" / f"f{n}.jsonl").write_bytes(b'{"n": %d}\n' % n * (n + 1))
        partial = archive / "b.tar.partial"
        sources = [(f"u/f{n}.jsonl", live / "u" / f"f{n}.jsonl") for n in range(3)]
        pack(partial, sources, Roots(live, archive), Codec(), UNLIMITED, CancelToken())
        return partial.read_bytes()


BUNDLE = small_bundle()


@given(
    st.lists(st.tuples(st.integers(0, len(BUNDLE) - 1), st.binary(min_size=1, max_size=8))),
    st.integers(0, len(BUNDLE)),
)
def test_any_damage_to_a_bundle_reads_members_or_refuses_them(
    writes: list[tuple[int, bytes]], keep: int
) -> None:
    data = bytearray(BUNDLE)
    for at, chunk in writes:
        data[at : at + len(chunk)] = chunk
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "2026-01.000000000000.tar"
        path.write_bytes(bytes(data[:keep]))
        contents = read_bundle(path)
    for m in contents.members:
        check_relpath(m.relpath)
        assert m.span.offset + m.span.length <= keep
    for why in contents.refused:
        assert "\n" not in why


def attach_server() -> AttachServer:
    stopped: list[str] = []
    return AttachServer(Path("/nonexistent.sock"), EventStream(), {"pid": 1}, stopped.append)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)


@given(st.binary(max_size=200) | JSON_VALUES.map(lambda v: json.dumps(v).encode()))
def test_any_attach_line_gets_a_reply(raw: bytes) -> None:
    reply = attach_server()._answer(raw)
    assert isinstance(reply, dict) and ("ok" in reply or "error" in reply)


@given(
    st.dictionaries(
        st.sampled_from(["kind", "op", "relpath", "phase", "items", "bytes", "months", "level"]),
        st.sampled_from(["file_done", "phase", "batch", "notice", "progress", "?"])
        | st.integers()
        | st.text(max_size=8)
        | st.lists(st.integers(), max_size=3)
        | st.none(),
    )
)
@example({"kind": "batch", "months": 1})  # found by `make fuzz`
@example({"kind": "phase", "phase": "files", "items": "many"})
def test_any_event_object_becomes_an_event_or_nothing(data: dict[str, Any]) -> None:
    # Never raises: an attached console reads another process's lines. An event
    # it accepts has the field types the console will compute with.
    event = from_dict(data)
    if isinstance(event, Phase):
        assert isinstance(event.items, int) and isinstance(event.bytes, int)


@given(st.text(alphabet=string.printable + "é∂\x00", max_size=60))
def test_any_filter_text_is_a_query_or_a_query_error(text: str) -> None:
    try:
        assert isinstance(parse_query(text), Query)
    except QueryError as err:
        one_line(err)
