"""The restore browser's in-memory filter gives exactly what a plain scan would."""

from __future__ import annotations

import random

import pytest

from coldkeep.core.files.catalog import Catalog, Query, QueryError, parse_query


def catalog(n: int = 3000) -> Catalog:
    rnd = random.Random(3)
    cat = Catalog()
    for i in range(n):
        unit = f"u{rnd.randrange(40)}"
        cat.ids.append(i + 1)
        cat.relpaths.append(f"{unit}/d{rnd.randrange(9)}/part-{rnd.randrange(300):03d}.jsonl")
        cat.units.append(unit)
        cat.shas.append(f"{rnd.getrandbits(256):064x}")
        cat.statuses.append(rnd.choice(["archived", "archived", "stale", "missing"]))
        cat.sizes.append(rnd.randrange(10**6))
        cat.mtimes.append(rnd.randrange(10**18))
        cat.archived.append(0)
        cat.gz_paths.append(f"files/{cat.relpaths[-1]}.gz")
    cat.index()
    return cat


def naive(cat: Catalog, q: Query) -> list[int]:
    return [
        i
        for i in range(len(cat))
        if (q.unit is None or cat.units[i] == q.unit)
        and (q.status is None or cat.statuses[i] == q.status)
        and (q.sha is None or cat.shas[i].startswith(q.sha))
        and all(w in cat.relpaths[i] for w in q.text)
        and (q.after_ns is None or cat.mtimes[i] >= q.after_ns)
        and (q.before_ns is None or cat.mtimes[i] < q.before_ns)
    ]


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
        "nothing-like-this",
        "after:2000-01-01 before:2020-01-01 part-",
    ],
)
def test_filter_equals_a_plain_scan(text: str) -> None:
    cat = catalog()
    query = parse_query(text)
    expected = naive(cat, query)
    total, first, capped = cat.filter(query, limit=50, cap=10**9)
    assert (total, first, capped) == (len(expected), expected[:50], False)


def test_a_word_matching_too_many_rows_stops_counting() -> None:
    cat = catalog()
    total, first, capped = cat.filter(parse_query("jsonl"), limit=10, cap=100)
    assert capped and total == 100 and first == list(range(10))


def test_bad_dates_are_named() -> None:
    with pytest.raises(QueryError, match="after:yesterday"):
        parse_query("after:yesterday")


def test_an_unknown_status_is_refused_naming_the_statuses() -> None:
    with pytest.raises(QueryError, match="status:bogus: use one of archived, stale"):
        parse_query("unit:a status:bogus")
    assert parse_query("status:stale").status == "stale"
