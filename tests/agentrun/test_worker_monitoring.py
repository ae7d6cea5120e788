"""A real worker's metrics port after a run, and `manage.py worker_health` against the workers' heartbeat."""

from __future__ import annotations

import subprocess
import sys
import urllib.request

import pytest

from engine.services import investigation_start
from engine.statuses import Status
from supportagent.celery import app as celery_app
from tests.support.metrics import free_port, parse, value
from tests.support.workers import ROOT, Cluster, publishing_to, terminal, wait_for
from tickets.models import Ticket


@pytest.fixture
def port():
    return free_port()


@pytest.fixture
def cluster(demo_committed, tmp_path, port):
    c = Cluster(tmp_path, AGENT_METRICS_PORT=str(port))
    with publishing_to(celery_app, c.queue):
        yield c
        c.stop()


def worker_health(cluster: Cluster, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "worker_health", *args],
        cwd=ROOT,
        env={**cluster.env, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_worker_serves_its_run_s_metrics_on_its_port(cluster, port):
    cluster.worker()
    cluster.wait_ready(celery_app)
    run = investigation_start(ticket=Ticket.objects.get(ref="T-1001"))
    done = wait_for(lambda: terminal(run.pk), 60, "the worker to finish the run")

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        samples = parse(response.read().decode())

    assert done.status == Status.COMPLETED
    assert value(samples, "supportagent_runs_ended_total", status="COMPLETED", model="rules") == 1
    assert value(samples, "supportagent_model_requests_total", model="rules", outcome="ok") == done.model_requests
    dispatched = sum(
        value(samples, "supportagent_tool_dispatches_total", tool=tool, outcome="ok")
        for tool in ("read_job_status", "search_docs", "read_service_status")
    )
    assert dispatched == done.tool_attempts > 0
    assert value(samples, "supportagent_tokens_total", model="rules") == done.tokens_used
    # the queue's gauges come from the web process's /metrics, once, not from every worker
    assert not any(name.startswith("supportagent_runs_queued") for name, _ in samples)


def test_worker_health_passes_after_a_worker_consumed_and_fails_for_a_queue_nobody_reads(cluster):
    cluster.worker()
    cluster.wait_ready(celery_app)
    run = investigation_start(ticket=Ticket.objects.get(ref="T-1001"))
    wait_for(lambda: terminal(run.pk), 60, "the worker to finish the run")
    name = next(iter(cluster.workers))

    healthy = worker_health(cluster, "--within", "60")
    assert healthy.returncode == 0, healthy.stderr
    assert name in healthy.stdout
    assert worker_health(cluster, "--within", "60", "--worker", "nobody@nowhere").returncode == 1

    idle = worker_health(cluster, "--within", "60", AGENT_QUEUE=f"{cluster.queue}-unread")
    assert idle.returncode == 1
    assert "nothing consumed from queue" in idle.stderr
