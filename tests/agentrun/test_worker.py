"""The production path: Celery workers on Redis and PostgreSQL, crashes, duplicates, the watchdog."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
from celery.signals import before_task_publish
from django.db import connection

from engine.models import Approval, Observation, ReviewPacket, Run, ToolAttempt
from engine.services import approval_answer, investigation_start
from engine.statuses import TERMINAL, Status
from engine.tasks import advance_run, enqueue_advance, watchdog
from scenarios.format import Scenario
from scenarios.probe import probe_read
from scenarios.runner import create_scenario_run
from supportagent.celery import app as celery_app
from tests.support.workers import ROOT, Cluster, broker_down, publishing_to, terminal, wait_for
from tickets.models import Ticket

J42 = {"call": {"tool": "read_job_status", "args": {"job_id": "J-42"}}}
DOCS = {"call": {"tool": "search_docs", "args": {"query": "EXPORT_ROLE_REQUIRED"}}}
DRAFT = {"draft": {"summary": "Role problem.", "evidence": ["E1"], "open_questions": []}}


@pytest.fixture
def cluster(demo_committed, tmp_path):
    """A private queue; this process enqueues to it through Redis instead of running inline."""
    c = Cluster(tmp_path)
    with publishing_to(celery_app, c.queue):
        yield c
        c.stop()


def scenario_run(model, **fields) -> Run:
    data = {"name": "worker", "session": "S-ACME-1", "ticket": "T-1001", "model": model, **fields}
    return create_scenario_run(Scenario.model_validate(data))


def packet_content(run: Run) -> dict:
    packet = run.packet
    return {
        "summary": packet.summary,
        "evidence": packet.evidence_refs,
        "open_questions": packet.open_questions,
        "stop_reason": packet.stop_reason,
        "attempts": [{k: a[k] for k in ("tool", "args", "outcome", "evidence")} for a in packet.attempts],
    }


def test_worker_completes_the_same_packet_as_the_inline_run(cluster):
    ticket = Ticket.objects.get(ref="T-1001")
    twin = Ticket.objects.create(
        ref="T-1001-W", account=ticket.account, session=ticket.session, subject=ticket.subject, body=ticket.body
    )
    celery_app.conf.task_always_eager = True
    try:
        inline = investigation_start(ticket=ticket)
    finally:
        celery_app.conf.task_always_eager = False
    cluster.worker()
    queued = investigation_start(ticket=twin)

    done = wait_for(lambda: terminal(queued.pk), 60, "the worker to finish the run")

    inline = Run.objects.get(pk=inline.pk)
    assert done.status == Status.COMPLETED
    assert packet_content(done) == packet_content(inline)
    assert done.lease_owner == ""


def test_a_killed_worker_s_run_is_resumed_with_its_counters_and_deadline(cluster):
    worker = cluster.worker()
    run = scenario_run(
        [J42, DOCS, DRAFT],
        budget={"operation_timeout_seconds": 4, "deadline_seconds": 60},
        faults={"read_job_status": [{"delay_seconds": 30}]},
    )
    deadline = run.deadline_at
    enqueue_advance(run.pk)
    wait_for(lambda: ToolAttempt.objects.filter(run=run, outcome="pending").exists(), 60, "the slow dispatch")
    before = Run.objects.get(pk=run.pk)
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait()
    cluster.worker()

    def watchdog_once():
        subprocess.run(
            [sys.executable, "manage.py", "watchdog", "--once"],
            cwd=ROOT,
            env=cluster.env,
            check=True,
            capture_output=True,
        )
        return terminal(run.pk)

    done = wait_for(watchdog_once, 30, "the run to be picked up again and finish", every=0.5)

    assert done.status == Status.COMPLETED
    assert list(done.attempts.values_list("tool", "outcome")) == [
        ("read_job_status", "interrupted"),
        ("search_docs", "ok"),
    ]
    assert (before.model_requests, before.tool_attempts) == (1, 1)
    assert (done.model_requests, done.tool_attempts) == (3, 2)
    assert done.deadline_at == deadline
    assert done.packet.evidence_refs == ["E1"]


def test_duplicate_deliveries_and_racing_workers_run_each_operation_once(cluster):
    cluster.worker()
    cluster.worker()
    probe = f"probe-{uuid.uuid4().hex[:8]}"
    slow = {"delay_seconds": 0.3}
    run = scenario_run(
        [{**J42, **slow}, {**DOCS, **slow}, {**DRAFT, **slow}],
        probe=probe,
        faults={"read_job_status": [slow], "search_docs": [slow]},
    )
    for _ in range(4):  # the same task, delivered again and again, to two workers
        advance_run.apply_async((run.pk,))

    done = wait_for(lambda: terminal(run.pk), 60, "the run to finish")
    wait_for(lambda: not Run.objects.filter(pk=run.pk).exclude(lease_owner="").exists(), 5, "the lease release")

    assert done.status == Status.COMPLETED
    assert (done.model_requests, done.tool_attempts) == (3, 2)
    assert (probe_read(probe, "model"), probe_read(probe, "dispatch")) == (3, 2)
    assert ReviewPacket.objects.filter(run=done).count() == 1


@pytest.fixture
def watchdog_cluster(demo_committed, tmp_path):
    """Two workers, whose own watchdog threads share a pass every 0.2 s; no Celery beat."""
    c = Cluster(tmp_path, AGENT_WATCHDOG_INTERVAL="0.2")
    with publishing_to(celery_app, c.queue):
        try:
            c.worker()
            c.worker()
            c.wait_ready(celery_app)
            yield c
        finally:
            c.stop()


def test_watchdog_ends_a_blocked_worker_s_run_at_its_deadline_and_refuses_its_late_result(watchdog_cluster):
    run = scenario_run([J42, DRAFT], budget={"deadline_seconds": 8}, faults={"read_job_status": [{"delay_seconds": 2}]})
    enqueue_advance(run.pk)
    attempt = wait_for(lambda: ToolAttempt.objects.filter(run=run, outcome="pending").first(), 8, "the dispatch")
    blocked_pid = int(Run.objects.get(pk=run.pk).lease_owner.split(":")[1])
    os.kill(blocked_pid, signal.SIGSTOP)
    try:
        done = wait_for(lambda: terminal(run.pk), 15, "the watchdog to end the run")
        frozen = Run.objects.values().get(pk=run.pk)
    finally:
        os.kill(blocked_pid, signal.SIGCONT)
    wait_for(
        lambda: Observation.objects.filter(run=run, kind=Observation.Kind.DISCARDED).exists(),
        15,
        "the blocked worker's late result to be refused",
    )

    assert done.status == Status.DEADLINE
    late_by = (done.ended_at - done.deadline_at).total_seconds()
    assert 0 <= late_by < 1.0
    assert ToolAttempt.objects.get(pk=attempt.pk).outcome == "timeout"
    assert Run.objects.values().get(pk=run.pk) == frozen


def test_two_hundred_runs_on_two_workers_all_end_with_a_packet_within_budget(cluster):
    cluster.worker(concurrency=16)
    cluster.worker(concurrency=16)
    runs = [
        scenario_run([J42, DOCS, {"draft": {"summary": "ok", "evidence": ["E1", "E2"], "open_questions": []}}])
        for _ in range(200)
    ]
    for run in runs:
        enqueue_advance(run.pk)
    ids = [r.pk for r in runs]

    wait_for(
        lambda: not Run.objects.filter(pk__in=ids).exclude(status__in=TERMINAL).exists(),
        180,
        "all 200 runs to end",
        every=0.5,
    )

    assert ReviewPacket.objects.filter(run_id__in=ids).count() == 200
    for run in Run.objects.filter(pk__in=ids):
        budget = run.get_budget()
        assert run.status == Status.COMPLETED
        assert run.model_requests <= budget.max_model_requests
        assert run.tool_attempts <= budget.max_tool_attempts
        assert run.tokens_reserved == 0 and run.tokens_used <= budget.max_total_tokens


def test_a_run_started_while_the_broker_is_down_is_kept_and_handed_to_a_worker_once_it_is_back(
    cluster, settings, caplog
):
    settings.AGENT_QUEUED_GRACE_SECONDS = 0.5
    ticket = Ticket.objects.get(ref="T-1001")
    with broker_down(celery_app):
        run = investigation_start(ticket=ticket)  # the caller is not failed for a run that exists

    assert Run.objects.get(pk=run.pk).status == Status.QUEUED
    assert f"run {run.pk} is saved but could not be enqueued" in caplog.text
    cluster.worker()
    wait_for(lambda: run.pk in watchdog().requeued, 10, "the watchdog to enqueue the run again", every=0.2)
    done = wait_for(lambda: terminal(run.pk), 60, "the worker to finish the run")
    assert done.status == Status.COMPLETED
    assert (done.model_requests, done.tool_attempts) == (3, 2)


def test_a_grant_the_broker_missed_is_handed_to_a_worker_and_a_pending_approval_is_left_alone(
    cluster, settings, caplog
):
    settings.AGENT_QUEUED_GRACE_SECONDS = 0.5
    cluster.worker()
    run = scenario_run([J42, DRAFT], require_approval=["read_job_status"], budget={"deadline_seconds": 60})
    enqueue_advance(run.pk)
    wait_for(
        lambda: Run.objects.filter(pk=run.pk, status=Status.WAITING_APPROVAL).exists(),
        30,
        "the run to wait for its approval",
    )
    time.sleep(0.6)  # past the grace
    assert run.pk not in watchdog().requeued  # no answer yet: nothing for a worker to do

    with broker_down(celery_app):
        approval_answer(run_id=run.pk, grant=True, decided_by="supervisor")

    assert f"run {run.pk} is saved but could not be enqueued" in caplog.text
    assert Run.objects.get(pk=run.pk).status == Status.WAITING_APPROVAL
    wait_for(lambda: run.pk in watchdog().requeued, 10, "the watchdog to enqueue the granted run", every=0.2)
    done = wait_for(lambda: terminal(run.pk), 30, "the worker to finish the run")
    assert done.status == Status.COMPLETED
    assert [(a.tool, a.outcome) for a in done.attempts.order_by("seq")] == [("read_job_status", "ok")]
    assert Approval.objects.get(run=run).state == Approval.State.USED


def test_a_run_whose_worker_loses_its_database_connections_mid_run_goes_on_without_losing_a_result(cluster):
    cluster.worker()
    run = scenario_run(
        [J42, DOCS, DRAFT],
        budget={"operation_timeout_seconds": 5, "deadline_seconds": 60},
        faults={"read_job_status": [{"delay_seconds": 1.5}]},
    )
    enqueue_advance(run.pk)
    wait_for(lambda: ToolAttempt.objects.filter(run=run, outcome="pending").exists(), 30, "the slow dispatch")
    with connection.cursor() as cursor:  # what a restart or a failover does to the workers' sessions
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = %s", [cluster.queue]
        )
        assert cursor.fetchone()[0] >= 1

    done = wait_for(lambda: terminal(run.pk), 20, "the worker to finish the run")  # no watchdog: the worker goes on

    attempts = list(done.attempts.order_by("seq").values_list("tool", "outcome"))
    assert done.status == Status.COMPLETED
    assert attempts[-2:] == [("read_job_status", "ok"), ("search_docs", "ok")]
    assert set(attempts[:-2]) <= {("read_job_status", "transient_error")}  # a lookup that met a dropped connection
    assert (done.model_requests, done.tool_attempts) == (3, len(attempts))
    assert done.packet.evidence_refs == ["E1"]


def test_a_worker_told_to_stop_finishes_the_runs_it_drives_and_leaves_new_ones_to_the_next(cluster):
    """A rolling restart: SIGTERM is Celery's warm shutdown. The run in flight ends normally
    (no interrupted attempt, nothing for the watchdog), and a run enqueued meanwhile waits in
    the queue for the worker that replaces it."""
    old = cluster.worker()
    cluster.wait_ready(celery_app)
    busy = scenario_run(
        [J42, DOCS, DRAFT],
        budget={"operation_timeout_seconds": 10, "deadline_seconds": 60},
        faults={"read_job_status": [{"delay_seconds": 6}]},
    )
    enqueue_advance(busy.pk)
    wait_for(lambda: ToolAttempt.objects.filter(run=busy, outcome="pending").exists(), 30, "the slow dispatch")
    os.kill(old.pid, signal.SIGTERM)
    time.sleep(3)  # a fetch from the broker already waiting when the signal came may still deliver, for ~1 s
    later = scenario_run([J42, DOCS, DRAFT])
    enqueue_advance(later.pk)

    assert old.wait(timeout=30) == 0
    done = Run.objects.get(pk=busy.pk)
    assert done.status == Status.COMPLETED and done.lease_owner == ""
    assert list(done.attempts.order_by("seq").values_list("tool", "outcome")) == [
        ("read_job_status", "ok"),
        ("search_docs", "ok"),
    ]
    assert Run.objects.get(pk=later.pk).status == Status.QUEUED
    cluster.worker()
    assert wait_for(lambda: terminal(later.pk), 30, "the new worker to take the queued run").status == Status.COMPLETED


def test_a_run_is_sent_with_a_hard_time_limit_in_whole_seconds_past_its_deadline(cluster, settings):
    """Celery takes whole seconds: the limit is rounded up from the time left plus the margin."""
    settings.AGENT_LEASE_MARGIN_SECONDS = 5.0
    run = scenario_run([DRAFT], budget={"deadline_seconds": 60})
    limits = []

    def record(headers=None, **kwargs):
        limits.append(headers["timelimit"])

    before_task_publish.connect(record, weak=False)
    try:
        enqueue_advance(run.pk)  # outside a transaction: sent at once, to a queue no worker reads
    finally:
        before_task_publish.disconnect(record)

    ((hard, soft),) = limits
    assert type(hard) is int and 60 < hard <= 65
    assert soft is None
