"""The Grafana dashboard and the Prometheus alert rules shipped in docs/grafana/
speak of metrics that ``coldkeep metrics`` really prints, and every alert says
what it is about."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from coldkeep.core.ops.demo import write_demo

from helpers import ck, cli

DOCS = Path(__file__).resolve().parents[2] / "docs"
DASHBOARD = DOCS / "grafana" / "coldkeep-dashboard.json"
ALERTS = DOCS / "grafana" / "coldkeep-alerts.yml"
FLEET_ALERTS = DOCS / "grafana" / "coldkeep-fleet-alerts.yml"
FLEET_DASHBOARD = DOCS / "grafana" / "coldkeep-fleet-dashboard.json"
METRIC = re.compile(r"\bcoldkeep_[a-z0-9_]+")


def dashboard_exprs(dash: dict[str, Any]) -> list[str]:
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    for var in dash["templating"]["list"]:
        if var["type"] == "query":
            exprs.append(var["definition"])
    return exprs


def alert_rules(path: Path = ALERTS) -> list[dict[str, Any]]:
    rules: dict[str, Any] = yaml.safe_load(path.read_text())
    return [r for g in rules["groups"] for r in g["rules"] if "alert" in r]


def printed_names(text: str) -> set[str]:
    """Every metric name a query can use in ``coldkeep metrics``' output: a
    counter's samples are ``<name>_total``, an info's ``<name>_info``, even where
    the family has none yet."""
    names = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        names.update(s.name for s in family.samples)
        if family.type == "counter":
            names.add(f"{family.name}_total")
        if family.type == "info":
            names.add(f"{family.name}_info")
    return names


@pytest.fixture(scope="module")
def printed(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """The names on a demo site (it has a state_db and a [remote]) after a pass:
    what shows only once something was archived and is waiting to ship too."""
    site = write_demo(tmp_path_factory.mktemp("dash") / "demo", seed=5, scale=0.02).config.parent
    ck(site, "pass")
    return printed_names(ck(site, "metrics").stdout)


def test_every_metric_the_dashboard_queries_is_printed(printed: set[str]) -> None:
    dash = json.loads(DASHBOARD.read_text())
    exprs = dashboard_exprs(dash)
    assert len(exprs) > 10
    used = {name for e in exprs for name in METRIC.findall(e)}
    assert used - printed == set()
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)), "panel ids are unique"


def test_every_alert_queries_printed_metrics_and_has_a_summary(printed: set[str]) -> None:
    rules = alert_rules()
    names = [r["alert"] for r in rules]
    assert len(names) == len(set(names)) >= 5
    for rule in rules:
        assert set(METRIC.findall(rule["expr"])) <= printed, rule["alert"]
        assert rule["annotations"]["summary"].strip(), rule["alert"]


def test_the_runbook_points_to_both() -> None:
    runbook = (DOCS / "operations.md").read_text()
    assert "grafana/coldkeep-dashboard.json" in runbook
    assert "grafana/coldkeep-alerts.yml" in runbook


def test_every_fleet_alert_and_panel_queries_what_fleet_metrics_prints(tmp_path: Path) -> None:
    """On a site that shipped (its heartbeat in the folder remote)."""
    site = write_demo(tmp_path / "demo", seed=5, scale=0.02).config.parent
    ck(site, "pass")
    ck(site, "ship")
    run = cli("fleet", "metrics", "--remote", (site / "remote").as_uri())
    assert run.returncode == 0, run.stderr
    printed = printed_names(run.stdout)
    rules = alert_rules(FLEET_ALERTS)
    assert len(rules) >= 4
    for rule in rules:
        assert set(METRIC.findall(rule["expr"])) <= printed, rule["alert"]
        assert rule["annotations"]["summary"].strip(), rule["alert"]
    dash = json.loads(FLEET_DASHBOARD.read_text())
    exprs = dashboard_exprs(dash)
    assert len(exprs) > 10
    assert {name for e in exprs for name in METRIC.findall(e)} - printed == set()
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    assert "grafana/coldkeep-fleet-dashboard.json" in (DOCS / "operations.md").read_text()
    families = {f.name: f for f in text_string_to_metric_families(run.stdout)}
    states = {s.labels["state"]: s.value for s in families["coldkeep_fleet_site_state"].samples}
    assert states == {"critical": 0, "silent": 0, "warn": 0, "ok": 1}
    [age] = families["coldkeep_fleet_site_heartbeat_age_seconds"].samples
    assert age.labels == {"site": "demo"} and 0 <= age.value < 600
