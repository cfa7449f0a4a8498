"""Include/exclude globs, anchored at live_root."""

from __future__ import annotations

import pytest

from coldkeep.core.base.globs import GlobError, PathFilter


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("**/*.jsonl", "a.jsonl", True),
        ("**/*.jsonl", "u/x/a.jsonl", True),
        ("**/*.jsonl", "u/a.jsonl.gz", False),
        ("**/*.jsonl", "u/a.jsonl.partial", False),
        ("*.log", "a.log", True),
        ("*.log", "u/a.log", False),
        ("u/**", "u/a/b/c", True),
        ("u/**", "v/a", False),
        ("u/?.log", "u/a.log", True),
        ("u/?.log", "u/ab.log", False),
        ("[ab]*.log", "b1.log", True),
        ("[!ab]*.log", "b1.log", False),
        ("a/**/z.txt", "a/z.txt", True),
        ("a/**/z.txt", "a/b/c/z.txt", True),
        ("a.b", "axb", False),
    ],
)
def test_glob(pattern: str, path: str, matches: bool) -> None:
    assert PathFilter([pattern], [])(path) is matches


def test_exclude_wins() -> None:
    f = PathFilter(["**/*.jsonl"], ["keep/**"])
    assert f("u/a.jsonl") and not f("keep/a.jsonl")


@pytest.mark.parametrize("bad", ["", "/abs", "a/../b", "a//b", "[x"])
def test_bad_globs(bad: str) -> None:
    with pytest.raises(GlobError):
        PathFilter([bad], [])


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("**", "legal/mail\n2026.log", True),
        ("legal/**", "legal/mail\n2026.log", True),
        ("keep/**", "keep/a\nb", True),
        ("*", "a\nb", True),
        ("?", "\n", True),
        ("a/*", "a/\x1b[31m\r\x7f", True),
        ("[!a]", "\n", True),
        ("[!a]", "/", False),
        ("*", "r\udce9sum\udce9.log", True),
        ("r?sum?.log", "r\udce9sum\udce9.log", True),
        ("**/x", "a\n/b\n/x", True),
        ("[[]x", "[x", True),
        ("[a-]", "-", True),
        ("[]]", "]", True),
        ("[&&]", "&", True),
    ],
)
def test_every_byte_of_a_name_is_matched_like_any_other(
    pattern: str, path: str, matches: bool
) -> None:
    assert PathFilter([pattern], [])(path) is matches
    assert PathFilter(["**"], [pattern])(path) is not matches, "exclude"
