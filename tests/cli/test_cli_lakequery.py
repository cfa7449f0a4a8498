"""``coldkeep query --fleet`` over the fleet's lake (a folder remote and S3):
rows as text, JSON lines or CSV, the newest generation of each month alone,
sites and months chosen; ``--stats`` says the sites, months, objects and bytes
(the sizes the listing gave); a one-site one-month lookup opens one object in
the bucket. What --fleet does not take, SQL that reaches anything but the
view, and a prefix with no lake: one line each. ``coldkeep lake ddl`` for
every engine; DuckDB's, run in DuckDB, counts what the query counts."""

from __future__ import annotations

import csv
import io
import json
import subprocess
from pathlib import Path

import duckdb
import pytest

from coldkeep.core.base.space import human_bytes

from helpers import cli, make_events_db
from lakekit import COUNTS, GEN, LAKE, OLD, build, folder_put, webhooks
from s3kit import S3Site

COUNT = "SELECT site, month, count(*) AS n FROM events GROUP BY ALL ORDER BY ALL"
WEBHOOKS = (
    "SELECT site, count(*) AS n FROM events WHERE kind = 'webhook_event' "
    "AND month = '2026-03' GROUP BY site ORDER BY site"
)
DDL_COUNT = "SELECT site, month, count(*) FROM coldkeep.events GROUP BY ALL ORDER BY ALL"


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lake")
    build(folder_put(root / "bucket"), root)
    return root / "bucket"


def fleet(remote: str, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    run = cli("query", "--fleet", "--remote", remote, *args)
    assert run.returncode == code, (run.stdout, run.stderr)
    return run


def json_rows(run: subprocess.CompletedProcess[str]) -> list[dict[str, object]]:
    return [json.loads(line) for line in run.stdout.splitlines()]


def chosen_bytes(root: Path) -> int:
    return sum((root / m.key).stat().st_size for m in LAKE if m is not OLD)


def test_every_sites_months_as_text_json_and_csv(lake: Path) -> None:
    run = fleet(lake.as_uri(), "--json", "--stats", COUNT)
    assert {(r["site"], r["month"]): r["n"] for r in json_rows(run)} == COUNTS
    size = chosen_bytes(lake)
    assert run.stderr.startswith("coldkeep: query --fleet: 4 rows in "), run.stderr
    assert run.stderr.rstrip().endswith(
        f"from 2 sites, 2 months: 4 objects of {human_bytes(size)} ({size} bytes) read"
    ), run.stderr

    csv_rows = list(csv.reader(io.StringIO(fleet(lake.as_uri(), "--csv", WEBHOOKS).stdout)))
    assert csv_rows == [["site", "n"], ["2024", str(webhooks(12))], ["web-1", str(webhooks(9))]]
    text = fleet(lake.as_uri(), WEBHOOKS).stdout.splitlines()
    assert text[0].split() == ["site", "n"] and text[2].split() == ["2024", str(webhooks(12))]


def test_sites_and_range_choose_the_months_read(lake: Path) -> None:
    run = fleet(
        lake.as_uri(), "--sites", "web-1", "--from", "2026-03", "--to", "2026-03",
        "--json", "--stats", COUNT,
    )  # fmt: skip
    assert json_rows(run) == [{"site": "web-1", "month": "2026-03", "n": 9}]
    size = (lake / LAKE[4].key).stat().st_size
    assert (
        f"from 1 site, 1 month: 1 object of {human_bytes(size)} ({size} bytes) read" in run.stderr
    )
    run = fleet(lake.as_uri(), "--sites", "2024,web-1", "--from", "2026-02", "--json", COUNT)
    assert len(json_rows(run)) == 4


def test_the_config_remote_is_the_default(lake: Path, tmp_path: Path) -> None:
    (tmp_path / "live").mkdir()
    config = tmp_path / "coldkeep.toml"
    config.write_text(
        f'live_root = "live"\narchive_root = "archive"\n[remote]\nurl = "{lake.as_uri()}"\n'
    )
    run = cli("query", "--fleet", "--json", "--config", str(config), COUNT)
    assert run.returncode == 0, run.stderr
    assert len(json_rows(run)) == 4


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--engine", "sqlite"), "--fleet does not take --engine sqlite: the lake is Parquet"),
        (("--partial",), "--fleet does not take --partial: "),
        (("--identity", "/nonexistent"), "--fleet does not take --identity: "),
        (("--as-text",), "--fleet does not take --as-text: "),
        (("--sites", ","), "--sites: name at least one site"),
        (("--sites", "web-9"), "--sites web-9: no such site in the lake under "),
        (("--from", "2025-01", "--to", "2025-02"), "lies in --from/--to (it holds 2026-02 to"),
    ],
)
def test_what_fleet_does_not_take_is_one_line(lake: Path, args: tuple[str, ...], said: str) -> None:
    run = fleet(lake.as_uri(), *args, COUNT, code=1 if "--from" in args else 2)
    assert run.stderr.count("\n") == 1 and said in run.stderr, run.stderr


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM read_parquet('{other}')",
        "SELECT count(*) FROM '{other}'",
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM glob('{lake}/*')",
        "COPY (SELECT 1) TO '/tmp/coldkeep-lake-out.csv'",
    ],
)
def test_sql_reaching_anything_else_is_refused(lake: Path, sql: str) -> None:
    other = lake / LAKE[3].key  # web-1's February, left out by --sites
    run = fleet(lake.as_uri(), "--sites", "2024", sql.format(other=other, lake=lake), code=2)
    assert run.stderr.count("\n") == 1 and run.stdout == "", run.stderr
    assert "a fleet query reads the events view" in run.stderr or "only SELECT" in run.stderr


def test_outside_a_fleet_query_the_lake_options_are_refused(tmp_path: Path) -> None:
    for args in (("--sites", "a"), ("--remote", tmp_path.as_uri())):
        run = cli("query", *args, "SELECT 1")
        assert run.returncode == 2 and run.stderr.endswith("goes with --fleet\n"), run.stderr


def test_a_prefix_without_a_lake_says_what_to_do(tmp_path: Path) -> None:
    run = fleet(tmp_path.as_uri(), COUNT, code=1)
    assert run.stderr == (
        f"coldkeep: no site has a lake under {tmp_path.as_uri()}/lake/events/: set [lake] "
        "enabled = true in each site's coldkeep.toml and run coldkeep lake export there\n"
    )


def test_over_s3_a_one_site_one_month_lookup_opens_one_object(s3: S3Site, tmp_path: Path) -> None:
    build(lambda key, data: s3.server.put_raw(s3.bucket, f"fleet/{key}", data), tmp_path)
    url, endpoint = f"s3://{s3.bucket}/fleet", ("--endpoint-url", s3.endpoint)
    remote = ("--remote", url, *endpoint)
    run = fleet(url, *endpoint, "--json", COUNT)
    assert {(r["site"], r["month"]): r["n"] for r in json_rows(run)} == COUNTS
    s3.proxy.reset_counts()
    run = fleet(url, *endpoint, "--sites", "web-1", "--from", "2026-02", "--to", "2026-02",
                "--json", "--stats", COUNT)  # fmt: skip
    assert json_rows(run) == [{"site": "web-1", "month": "2026-02", "n": 20}]
    opened = {x.path for x in s3.proxy.exchanges if "/lake/events/" in x.path}
    assert opened == {f"/{s3.bucket}/fleet/{LAKE[3].key}"}, opened
    assert "1 object of" in run.stderr

    ddl = cli("lake", "ddl", "--engine", "athena", *remote)
    assert ddl.returncode == 0, ddl.stderr
    assert f"LOCATION 's3://{s3.bucket}/fleet/lake/events/'" in ddl.stdout
    assert "'projection.site.values' = '2024,web-1'" in ddl.stdout
    duck = cli("lake", "ddl", "--engine", "duckdb", *remote).stdout
    host = s3.endpoint.removeprefix("http://")
    assert f"ENDPOINT '{host}', URL_STYLE 'path', USE_SSL false" in duck
    assert "KEY_ID" not in duck, "no credential is printed"


def test_lake_ddl_for_every_engine_and_duckdbs_counts_as_the_query(lake: Path) -> None:
    texts = {}
    for engine in ("athena", "trino", "spark", "duckdb"):
        run = cli("lake", "ddl", "--engine", engine, "--remote", lake.as_uri())
        assert run.returncode == 0, run.stderr
        texts[engine] = run.stdout
        assert "CREATE OR REPLACE VIEW coldkeep.events AS" in run.stdout, engine
        assert "-- seconds: query coldkeep.events, which reads only the newest" in run.stdout
    assert "PARTITIONED BY (`site` string, `month` string)" in texts["athena"]
    assert 'regexp_extract("$path"' in texts["athena"] and '"$path"' in texts["trino"]
    assert "partitioned_by = ARRAY['site', 'month']" in texts["trino"]
    assert (
        "CALL system.sync_partition_metadata('coldkeep', 'events_all', 'FULL');" in texts["trino"]
    )
    assert "input_file_name()" in texts["spark"] and "USING parquet" in texts["spark"]
    con = duckdb.connect()
    try:
        con.execute(texts["duckdb"])
        got = {(s, m): n for s, m, n in con.execute(DDL_COUNT).fetchall()}
    finally:
        con.close()
    queried = json_rows(fleet(lake.as_uri(), "--json", COUNT))
    assert got == {(r["site"], r["month"]): r["n"] for r in queried} == COUNTS


def test_lake_ddl_before_any_export_reads_the_sites_table(tmp_path: Path) -> None:
    (tmp_path / "live").mkdir()
    (tmp_path / "bucket").mkdir()
    make_events_db(tmp_path / "state.db", 3, now_ms=GEN)
    config = tmp_path / "coldkeep.toml"
    config.write_text(
        'live_root = "live"\narchive_root = "archive"\nstate_db = "state.db"\n'
        f'[remote]\nurl = "{(tmp_path / "bucket").as_uri()}"\nsite = "web-7"\n'
    )
    run = cli("lake", "ddl", "--engine", "trino", "--config", str(config))
    assert run.returncode == 0, run.stderr
    assert "'s table events (no lake file yet)" in run.stdout
    assert '  "n" double,\n  "coldkeep_raw" varchar,\n  "site" varchar' in run.stdout
    alone = cli("lake", "ddl", "--engine", "spark", "--remote", (tmp_path / "bucket").as_uri())
    assert alone.returncode == 1 and "no site has a lake under" in alone.stderr, alone.stderr
    bad = cli("lake", "ddl", "--engine", "spark", "--schema", "a;b", "--config", str(config))
    assert bad.returncode == 2 and "--schema 'a;b': give a plain name" in bad.stderr
