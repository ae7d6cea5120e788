"""Reading Prometheus' text format in tests: samples by name and labels, and what changed between two scrapes."""

from __future__ import annotations

import socket

from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def scrape(**headers: str) -> Samples:
    """/metrics of this process, asked from the loopback address (allowed by default)."""
    response = Client().get("/metrics", **headers)
    assert response.status_code == 200, response.content
    return parse(response.content.decode())


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def grew(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def label_sets(samples: Samples, prefix: str = "supportagent_") -> set[tuple[str, tuple]]:
    return {key for key in samples if key[0].startswith(prefix)}


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
