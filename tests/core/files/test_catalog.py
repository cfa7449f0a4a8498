"""The restore browser's filter, one SQL statement per filter over a real
manifest, gives exactly what a plain scan of every entry would: the first
``limit`` in path order, the count (stopped at the cap), each row's copies and
hold."""

from __future__ import annotations

import os
import random
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from coldkeep.core.base.names import is_text, to_db
from coldkeep.core.files.catalog import (
    Catalog,
    CatalogRow,
    Query,
    QueryError,
    Stopped,
    load_catalog,
    parse_query,
    path_order,
)
from coldkeep.core.files.pathindex import PathIndex
from coldkeep.core.store.schema import migration_scripts
from coldkeep.tui.console.screens.browse import search

HELD = "hold 1 (unit u7: case 9)"  # Hold.describe of the one hold placed
ODD = os.fsdecode(b"u3/caf\xe9/part-001.jsonl")  # a name that is not UTF-8: a BLOB


def manifest(
    path: Path, n: int = 3000, index: PathIndex | None = None, index_at: int = 2000
) -> list[CatalogRow]:
    """A manifest of ``n`` entries (one not UTF-8), a tenth of them shipped and
    one hold on unit u7; the rows as the catalog should give them. ``index`` is
    prepared when ``index_at`` entries are there: it covers those."""
    rnd = random.Random(3)
    rows: list[CatalogRow] = []
    with sqlite3.connect(path, isolation_level=None) as db:
        for _, script in migration_scripts(0):
            db.executescript(script)
        db.execute("BEGIN")
        for i in range(n):
            if index is not None and i == index_at:
                db.execute("COMMIT")
                index.prepare()
                db.execute("BEGIN")
            unit = f"u{rnd.randrange(40)}"
            rel = (
                ODD if i == 7 else f"{unit}/d{rnd.randrange(9)}/part-{rnd.randrange(300):03d}.jsonl"
            )
            unit = rel.split("/")[0]
            status = rnd.choice(["archived", "archived", "stale", "missing", "expired"])
            row = CatalogRow(
                i + 1, rel, unit, f"{rnd.getrandbits(256):064x}", status, rnd.randrange(10**6),
                rnd.randrange(10**18), 0, f"files/{rel}.{i}.gz", None,
            )  # fmt: skip
            db.execute(
                "INSERT INTO entries (id, unit, relpath, bytes, sha256, gz_path, gz_bytes, "
                "mtime_ns, dev, ino, mode, archived_at, status) "
                "VALUES (?, ?, ?, ?, ?, ?, 1, ?, 0, 0, 33188, 0, ?)",
                [row.id, row.unit, to_db(rel), row.bytes, row.sha256, to_db(row.gz_path),
                 row.mtime_ns, status],
            )  # fmt: skip
            if i % 10 == 0:
                gone = 5 if i % 20 == 0 else None
                db.execute(
                    "INSERT INTO remote_objects (path, bytes, sha256, shipped_at, local_gone_at) "
                    "VALUES (?, 1, 'x', 0, ?)",
                    [to_db(row.gz_path), gone],
                )
                row = replace(row, copies="remote" if gone else "local + remote")
            if status == "expired":
                row = replace(row, copies="none")
            if unit == "u7":
                row = replace(row, held=HELD)
            rows.append(row)
        db.execute(
            "INSERT INTO legal_holds (scope, target, reason, placed_at, placed_by) "
            "VALUES ('unit', 'u7', 'case 9', 0, 'tester')"
        )
        db.execute("COMMIT")
    return rows


def naive(rows: list[CatalogRow], q: Query) -> list[CatalogRow]:
    return sorted(
        (
            r
            for r in rows
            if (q.unit is None or r.unit == q.unit)
            and (q.status is None or r.status == q.status)
            and (q.sha is None or r.sha256.startswith(q.sha))
            and all(w in r.relpath for w in q.text)
            and (q.after_ns is None or r.mtime_ns >= q.after_ns)
            and (q.before_ns is None or r.mtime_ns < q.before_ns)
        ),
        # SQLite's order: every TEXT name, then the BLOB ones (not UTF-8: names.py).
        key=lambda r: (not is_text(r.relpath), os.fsencode(r.relpath), r.id),
    )


@pytest.fixture(scope="module", params=["manifest", "index of paths"])
def site(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> tuple[Catalog, list[CatalogRow]]:
    """The catalog, read from the manifest alone, or from the index of paths
    (built when 2,000 entries were there) and the manifest's later entries."""
    path = tmp_path_factory.mktemp("catalog") / "coldkeep.db"
    index = PathIndex(path) if request.param == "index of paths" else None
    rows = manifest(path, index=index)
    cat = replace(load_catalog(path), paths=index)
    if index is not None:
        found = index.candidates(b"part", cap=10**6)
        assert found is not None and found[1] == 2000
    [hold] = cat.holds.holds
    assert hold.describe() == HELD
    return cat, rows


@pytest.mark.parametrize(
    "text",
    [
        "",
        "part-01",
        "u1/",
        "d3 part-2",
        "unit:u7",
        "unit:u7 part-1",
        "status:stale",
        "status:missing u2",
        "sha:ab",
        "sha:f unit:u3",
        "sha:0",
        "jsonl",
        "caf",
        "nothing-like-this",
        "after:2000-01-01 before:2020-01-01 part-",
    ],
)
def test_filter_equals_a_plain_scan(site: tuple[Catalog, list[CatalogRow]], text: str) -> None:
    cat, rows = site
    query = parse_query(text)
    expected = naive(rows, query)
    total, first, capped = cat.filter(query, limit=50, cap=10**9)
    assert (total, first, capped) == (len(expected), expected[:50], False)


@pytest.mark.parametrize("text", ["", "part-01", "unit:u3", "caf", "jsonl"])
@pytest.mark.parametrize("at", [0, 9, 120])
def test_a_listing_up_to_a_path_lists_only_those_and_counts_them_all(
    site: tuple[Catalog, list[CatalogRow]], text: str, at: int
) -> None:
    """What a search of many catalogs asks once it has its first page: only
    the paths up to the last of them (the name that is not UTF-8 too)."""
    cat, rows = site
    expected = naive(rows, parse_query(text))
    upto = expected[min(at, len(expected) - 1)].relpath
    total, first, _ = cat.filter(parse_query(text), limit=50, cap=10**9, upto=upto)
    before = [r for r in expected if path_order(r.relpath) <= path_order(upto)]
    assert (total, first) == (len(expected), before[:50])
    total, first, _ = cat.filter(parse_query(text), limit=50, cap=10**9, upto=ODD)
    assert (total, first) == (len(expected), expected[:50]), "the BLOB name sorts last"


@pytest.mark.parametrize("text", ["", "part-01", "u7/", "caf", "nothing-like-this"])
def test_a_search_of_many_catalogs_lists_the_first_of_them_all(tmp_path: Path, text: str) -> None:
    """The fleet view's filter: the first ``limit`` matches of every catalog
    together, in path order then by catalog and id (the same paths at several
    sites, as a fleet of one application's hosts has), and every match
    counted; the same from connections kept open between filters."""
    every: list[tuple[str, CatalogRow]] = []
    catalogs: dict[str, Catalog] = {}
    for name, n in (("b", 900), ("a", 400), ("c", 1300), ("d", 0)):
        path = tmp_path / name / "coldkeep.db"
        path.parent.mkdir()
        every += [(name, r) for r in manifest(path, n=n)]
        catalogs[name] = load_catalog(path, keep_open=name != "a")
    query = parse_query(text)
    matches = [(k, r) for k, r in every if naive([r], query)]
    matches.sort(key=lambda hit: (path_order(hit[1].relpath), hit[0], hit[1].id))
    try:
        for limit in (1, 37, 500, 5000):
            for _ in range(2):  # a kept connection serves the next filter too
                assert search(catalogs, text, limit) == (len(matches), matches[:limit], False)
    finally:
        for catalog in catalogs.values():
            catalog.close()


def test_the_catalog_counts_every_entry_without_reading_them(
    site: tuple[Catalog, list[CatalogRow]],
) -> None:
    cat, rows = site
    assert len(cat) == len(rows)
    assert cat.filter(parse_query(""), limit=10) == (len(rows), naive(rows, Query())[:10], False)


def test_a_word_matching_too_many_rows_stops_counting(
    site: tuple[Catalog, list[CatalogRow]],
) -> None:
    cat, rows = site
    total, first, capped = cat.filter(parse_query("jsonl"), limit=10, cap=100)
    assert capped and total == 100 and first == naive(rows, parse_query("jsonl"))[:10]


def test_a_filter_whose_stop_says_so_is_given_up_part_way(tmp_path: Path) -> None:
    """The console's filter asks its worker whether a newer filter replaced it
    while SQLite scans: a rare word's scan of every path stops there."""
    manifest(tmp_path / "coldkeep.db", n=10_000)
    cat = load_catalog(tmp_path / "coldkeep.db")
    asked = 0

    def replaced() -> bool:
        nonlocal asked
        asked += 1
        return True

    with pytest.raises(Stopped):
        cat.filter(parse_query("nothing-like-this"), stop=replaced)
    # Once by SQLite part way through the scan, once to tell a stop from a
    # failure (a stop asked only after the scan would be asked once).
    assert asked == 2
    # Never stopped: the same answer as without a stop.
    query = parse_query("part-01")
    assert cat.filter(query, stop=lambda: False) == cat.filter(query)


def test_no_manifest_is_an_empty_catalog(tmp_path: Path) -> None:
    cat = load_catalog(tmp_path / "coldkeep.db")
    assert len(cat) == 0 and cat.filter(parse_query("x")) == (0, [], False)


def test_bad_dates_are_named() -> None:
    with pytest.raises(QueryError, match="after:yesterday"):
        parse_query("after:yesterday")


def test_an_unknown_status_is_refused_naming_the_statuses() -> None:
    with pytest.raises(QueryError, match="status:bogus: use one of archived, stale"):
        parse_query("unit:a status:bogus")
    assert parse_query("status:stale").status == "stale"
