"""Prometheus metrics of the runs: what the steps, the services and the watchdog decided.

Counted where the facts are decided, after the transaction that decided them
commits (a step tried again on a new connection is counted once), and nowhere
else: a counter's increment costs no database statement. Labels take bounded
values only: a status, an outcome, a tool of the dispatch table (else
"unknown"), a model name from configuration (else "other"); never a ticket or
a run. A candidate model's evaluation runs (Run.Purpose.EVALUATION) are not
counted: the figures are the service's. The queue's gauges are read from the database when /metrics is scraped
(QueueCollector). With PROMETHEUS_MULTIPROC_DIR set (before the process
starts) every process writes its counts there and an endpoint serves them all.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from django.conf import settings
from django.db import transaction
from django.db.models import TextChoices
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, generate_latest, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from engine.models import Run
from tools.registry import TOOLS

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
RUN_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 45, 60, 120, 300)

RUNS_STARTED = Counter("supportagent_runs_started", "Runs created, by model.", ["model"])
RUNS_ENDED = Counter("supportagent_runs_ended", "Runs ended, by status and model.", ["status", "model"])
RUN_SECONDS = Histogram(
    "supportagent_run_duration_seconds", "From a run's creation to its end, by model.", ["model"], buckets=RUN_BUCKETS
)
MODEL_REQUESTS = Counter(
    "supportagent_model_requests", "Model requests settled, by model and outcome.", ["model", "outcome"]
)
MODEL_SECONDS = Histogram(
    "supportagent_model_request_duration_seconds",
    "Model request latency, by model.",
    ["model"],
    buckets=LATENCY_BUCKETS,
)
DISPATCHES = Counter(
    "supportagent_tool_dispatches", "Tool dispatches settled, by tool and outcome.", ["tool", "outcome"]
)
DISPATCH_SECONDS = Histogram(
    "supportagent_tool_dispatch_duration_seconds", "Tool dispatch latency, by tool.", ["tool"], buckets=LATENCY_BUCKETS
)
TOKENS = Counter("supportagent_tokens", "Tokens spent by ended runs, by model.", ["model"])
COST = Counter("supportagent_cost_dollars", "Dollars spent by ended runs, by model.", ["model"])
WATCHDOG = Counter(
    "supportagent_watchdog_actions", "Watchdog actions and late results discarded, by action.", ["action"]
)


class WatchdogAction(TextChoices):
    """The `action` label of supportagent_watchdog_actions."""

    DEADLINE_END = "deadline_end", "ended at its deadline"
    REQUEUE = "requeue", "requeued"
    LATE_RESULT = "late_result_discarded", "late result discarded"


def model_label(name: str) -> str:
    """A model name from configuration (the default model or one with a configured price), else "other"."""
    return name if name == settings.AGENT_MODEL or name in settings.AGENT_MODEL_PRICES else "other"


def tool_label(name: str) -> str:
    return name if name in TOOLS else "unknown"


def after_commit(count) -> None:
    """Call `count` once the current transaction commits (at once outside one); nothing on a rollback."""
    if settings.AGENT_METRICS:
        transaction.on_commit(count)


def counted(purpose: str) -> bool:
    """Whether a run's facts are counted: an investigation's are, an evaluation's are not."""
    return purpose == Run.Purpose.INVESTIGATION


def run_started(model: str, *, purpose: str = Run.Purpose.INVESTIGATION) -> None:
    if counted(purpose):
        after_commit(RUNS_STARTED.labels(model_label(model)).inc)


def run_ended(
    *, status: str, model: str, seconds: float, tokens: int, cost_micros: int, purpose: str = Run.Purpose.INVESTIGATION
) -> None:
    if not counted(purpose):
        return
    label = model_label(model)

    def count() -> None:
        RUNS_ENDED.labels(status, label).inc()
        RUN_SECONDS.labels(label).observe(seconds)
        TOKENS.labels(label).inc(tokens)
        COST.labels(label).inc(cost_micros / 1_000_000)

    after_commit(count)


def model_request_settled(
    *, model: str, outcome: str, latency_ms: int | None, purpose: str = Run.Purpose.INVESTIGATION
) -> None:
    if counted(purpose):
        _settled(MODEL_REQUESTS, MODEL_SECONDS, model_label(model), outcome, latency_ms)


def dispatch_settled(
    *, tool: str, outcome: str, latency_ms: int | None, purpose: str = Run.Purpose.INVESTIGATION
) -> None:
    if counted(purpose):
        _settled(DISPATCHES, DISPATCH_SECONDS, tool_label(tool), outcome, latency_ms)


def _settled(total: Counter, seconds: Histogram, label: str, outcome: str, latency_ms: int | None) -> None:
    """An operation settled: its outcome counted, its latency observed (unknown for one cut off)."""

    def count() -> None:
        total.labels(label, outcome).inc()
        if latency_ms is not None:
            seconds.labels(label).observe(latency_ms / 1000)

    after_commit(count)


def watchdog_acted(action: str, times: int = 1) -> None:
    if times:
        after_commit(lambda: WATCHDOG.labels(action).inc(times))


class QueueCollector(Collector):
    """The queue, the approvals and the intake problems as the database has them at scrape time."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from engine.selectors import queue_figures
        from tickets.selectors import intake_problems_open, tickets_auto_held

        figures = queue_figures()
        yield GaugeMetricFamily("supportagent_runs_queued", "Runs waiting for a worker.", value=figures.queued)
        yield GaugeMetricFamily(
            "supportagent_oldest_queued_run_age_seconds",
            "Age of the oldest run waiting for a worker (0: none).",
            value=figures.oldest_age,
        )
        yield GaugeMetricFamily(
            "supportagent_approvals_waiting",
            "Calls waiting for a supervisor's answer.",
            value=figures.approvals_waiting,
        )
        yield GaugeMetricFamily(
            "supportagent_intake_problems_open",
            "Help-desk requests intake refused that staff have not brought in yet.",
            value=intake_problems_open(),
        )
        yield GaugeMetricFamily(
            "supportagent_tickets_auto_held",
            "New tickets a per-account cap kept from automatic investigation that nobody has investigated since.",
            value=tickets_auto_held(),
        )


_QUEUE = CollectorRegistry(auto_describe=False)
_QUEUE.register(QueueCollector())


def process_registry() -> CollectorRegistry:
    """This process's counts, or with PROMETHEUS_MULTIPROC_DIR those of every process writing there."""
    if "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
        return REGISTRY
    registry = CollectorRegistry()
    MultiProcessCollector(registry)
    return registry


def exposition(*, queue: bool) -> bytes:
    """The metrics in Prometheus' text format; with `queue`, the queue's gauges read from the database too."""
    text = generate_latest(process_registry())
    return text + generate_latest(_QUEUE) if queue else text


def serve_worker_metrics() -> None:
    """Serve this worker process's metrics on AGENT_METRICS_PORT (none when 0), in a daemon thread."""
    if settings.AGENT_METRICS_PORT:
        start_http_server(settings.AGENT_METRICS_PORT, addr=settings.AGENT_METRICS_BIND, registry=process_registry())
