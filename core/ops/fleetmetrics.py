"""``coldkeep fleet metrics``: every fleet site's health as Prometheus gauges,
one set per site (label ``site``), from what ``Fleet.load`` judged: a Grafana
fleet dashboard and alert rules read these, beside each host's own metrics.

A value a site's heartbeat does not give (no believable beat) is left out, not
written as 0: a silent host must not look like one with nothing wrong.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .fleet import FleetSite
from .health import STATES, tally


class FleetCollector(Collector):
    """The families of one fleet read, at bucket time ``now`` (ms)."""

    def __init__(self, sites: Sequence[FleetSite], now: int) -> None:
        self.sites = sites
        self.now = now

    def collect(self) -> Iterator[Metric]:
        state = GaugeMetricFamily(
            "coldkeep_fleet_site_state",
            "1 for the site's health now (critical, silent, warn, ok), 0 for the others.",
            labels=["site", "state"],
        )
        count = GaugeMetricFamily(
            "coldkeep_fleet_sites", "How many sites are in each state.", labels=["state"]
        )
        for name, n in tally(s.health for s in self.sites).items():
            count.add_metric([name], n)
        for s in self.sites:
            for name in STATES:
                state.add_metric([s.site, name], 1 if s.health.state == name else 0)
        yield state
        yield count
        yield from self._beats()

    def _beats(self) -> Iterator[Metric]:
        def family(name: str, doc: str, *labels: str) -> GaugeMetricFamily:
            return GaugeMetricFamily(f"coldkeep_fleet_site_{name}", doc, labels=["site", *labels])

        age = family("heartbeat_age_seconds", "Since its newest believable heartbeat.")
        verify = family("verify_failed", "Archive files (here) or copies (remote) that "
                        "failed verify, as its heartbeat says.", "where")  # fmt: skip
        backlog = family("backlog", "Its backlog as its heartbeat says.", "kind")
        standing = family("backlog_age_seconds", "How long its backlog has stood (0: none).")
        problems = family("file_problems", "Files quarantined.")
        pending = family("pending_bytes", "Archived, not yet shipped.")
        failed = family("job_failed", "1 for each job whose last run failed.", "job")
        for s in self.sites:
            heard = s.heard
            if heard is None or heard.beat is None or heard.at is None:
                continue
            b, site = heard.beat, s.site
            age.add_metric([site], max(self.now - heard.at, 0) / 1000)
            verify.add_metric([site, "local"], b.verify_failed)
            verify.add_metric([site, "remote"], b.remote_verify_failed)
            backlog.add_metric([site, "files"], b.backlog_files)
            backlog.add_metric([site, "rows"], b.backlog_rows)
            since = 0 if b.backlog_since is None else max(self.now - b.backlog_since, 0) / 1000
            standing.add_metric([site], since)
            problems.add_metric([site], b.file_problems)
            pending.add_metric([site], b.pending_bytes)
            for job in sorted(b.job_failures):
                failed.add_metric([site, job], 1)
        yield from (age, verify, backlog, standing, problems, pending, failed)
