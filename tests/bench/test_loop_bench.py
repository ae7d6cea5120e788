"""The benchmark runs end to end (on small numbers) and prints the figures docs/development/benchmark.md promises."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import psycopg
import pytest

from tests.support.workers import ROOT

KEYS = {
    "commits_per_cycle",
    "statements_per_run",
    "ms_per_run_median",
    "floor_ms_per_run_median",
    "ratio_to_floor",
    "sql_alone_ratio_to_floor",
    "concurrency_efficiency",
    "floor_concurrency_efficiency",
    "rss_growth_ratio",
    "metrics_on_ms_per_run_median",
    "metrics_off_ms_per_run_median",
    "metrics_overhead_ratio",
    "inflight_p95_slowdown",
    "inflight_capacity",
}


@pytest.fixture(scope="module")
def server() -> str:
    """The PostgreSQL server of DATABASE_URL (bin/test sets it), read when a test runs, not at import."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        pytest.fail("the benchmark runs on PostgreSQL: set DATABASE_URL (bin/test does)")
    return url.rsplit("/", 1)[0]


def bench(server: str, *args: str, timeout: float, **extra: str) -> subprocess.CompletedProcess:
    """bench/loop_bench.py run with `args` on a database of its own on `server` (and `extra` environment)."""
    env = {
        **os.environ,
        "DATABASE_URL": f"{server}/supportagent_bench_smoke",
        **extra,
        "DJANGO_SECRET_KEY": "bench-smoke-" + uuid.uuid4().hex + uuid.uuid4().hex,
    }
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / "loop_bench.py"), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_the_benchmark_prints_its_figures_as_json(server):
    # As docs/production/deployment.md exports it: the runs and the workers meet on this broker.
    done = bench(
        server,
        "--json",
        "--runs",
        "3",
        "--concurrency-runs",
        "24",
        "--concurrency",
        "4",
        "--rounds",
        "1",
        "--memory-runs",
        "110",
        "--inflight-runs",
        "4",
        "--inflight-levels",
        "4",
        timeout=600,
        CELERY_BROKER_URL="redis://127.0.0.1:6379/2",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert KEYS <= figures.keys()
    # J-42 is 3 cycles in 6 commits: the reservation of each operation merged with the previous result.
    assert (figures["commits_per_run"], figures["commits_per_cycle"], figures["floor_commits_per_run"]) == (6, 2.0, 6)
    assert figures["floor_statements_per_run"] == 11  # the run's INSERT, then an UPDATE and an INSERT per operation
    assert (
        figures["statements_per_run"] > 0 and figures["ratio_to_floor"] > 1 and figures["sql_alone_ratio_to_floor"] > 0
    )
    assert figures["client_cpu_ms_per_run_median"] > figures["floor_client_cpu_ms_per_run_median"] > 0
    assert 0 < figures["concurrency_efficiency"] <= 1.1 and 0 < figures["floor_concurrency_efficiency"] <= 1.1
    for side in ("concurrency", "floor_concurrency"):  # the workers and PostgreSQL did work, on busy cores
        assert figures[f"{side}_worker_cpu_ms_per_run"] > 0 and figures[f"{side}_db_cpu_ms_per_run"] > 0
        assert figures[f"{side}_worker_context_switches_per_run"] > 0
        assert 0 < figures[f"{side}_cpu_busy"] <= 1
        assert 0 < figures[f"{side}_cpu_bound_efficiency"] <= 1
    assert figures["rss_growth_ratio"] > 0
    assert figures["metrics_on_ms_per_run_median"] > 0 and figures["metrics_off_ms_per_run_median"] > 0
    # A run in flight takes at least its own latencies; capacity is a level tried, or 0 when none kept within 1.10.
    assert figures["inflight_runs"] == 4 and figures["inflight_p95_slowdown"] >= 1
    assert figures["inflight_capacity"] == (4 if figures["inflight_p95_slowdown"] <= 1.10 else 0)


def test_the_benchmark_refuses_a_concurrency_the_database_cannot_connect(server):
    with psycopg.connect(f"{server}/postgres") as conn:  # a worker process's pool opens at most 40 connections
        allowed = conn.execute("SELECT current_setting('max_connections')::int").fetchone()[0]
    workers = allowed // 40 + 1
    done = bench(server, "--json", "--workers", str(workers), "--concurrency", str(40 * workers), timeout=300)
    assert done.returncode == 1 and done.stdout == ""
    assert f"concurrency {40 * workers} on {workers} workers needs about" in done.stderr
    assert "max_connections" in done.stderr
