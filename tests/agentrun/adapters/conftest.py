"""Fixtures of the provider tests."""

from __future__ import annotations

import pytest
from prometheus_client import Counter, Histogram

from engine import metrics

LABELLED = [m for m in vars(metrics).values() if isinstance(m, Counter | Histogram)]


def _label_values(metric) -> set[tuple[str, ...]]:
    return {
        tuple(v for k, v in sample.labels.items() if k != "le")
        for family in metric.collect()
        for sample in family.samples
    }


@pytest.fixture(autouse=True)
def no_model_label_left_behind():
    """The metrics are the process's: a provider's model names a label set only while its test runs.

    These tests configure models of their own (`openai:gpt-test`, ...); the metrics tests expect
    only the models the suite's settings configure, whichever order the two run in.
    """
    before = {metric: _label_values(metric) for metric in LABELLED}
    yield
    for metric in LABELLED:
        for values in _label_values(metric) - before[metric]:
            metric.remove(*values)
