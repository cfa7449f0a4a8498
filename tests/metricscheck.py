"""Reading coldkeep's Prometheus metrics in tests: the exposition text parsed into
samples, and a site's metrics as the daemon would publish them."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from coldkeep.core.base.config import Settings
from coldkeep.core.sched.metrics import SnapshotCollector, read_site, registry_for

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


async def scrape(settings: Settings) -> Samples:
    collector = SnapshotCollector(settings)
    collector.publish(await read_site(settings))
    return parse(generate_latest(registry_for(collector)).decode())
