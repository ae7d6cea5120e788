"""A broker outage leaves no mark: workers keep their runs, come back within a second, and send lost runs again."""

from __future__ import annotations

import pytest

from engine.models import ReviewPacket, Run
from engine.services import investigation_start
from engine.statuses import Status
from supportagent.broker import RedisWatch
from supportagent.celery import app as celery_app
from tests.support.workers import Cluster, PrivateRedis, publishing_to, terminal, wait_for
from tickets.models import Ticket

from .test_worker import DRAFT, J42, scenario_run


@pytest.fixture
def redis_server(tmp_path):
    server = PrivateRedis(tmp_path)
    server.start()
    yield server
    server.stop()


def test_the_watch_says_when_the_broker_is_back_or_restarted(redis_server, settings):
    watch = RedisWatch(redis_server.url)
    assert watch.came_back() is False  # answering all along
    redis_server.stop()
    assert watch.came_back() is False  # away: nothing to send to yet
    redis_server.start()
    assert watch.came_back() is True  # back: its queue may have lost messages
    assert watch.came_back() is False
    redis_server.stop()
    redis_server.start()  # restarted between two questions: another run_id, an empty queue
    assert watch.came_back() is True


def test_one_pass_per_interval_for_the_workers_of_one_database_and_queue(redis_server, settings):
    first, second = RedisWatch(redis_server.url), RedisWatch(redis_server.url)
    assert first.elected(30) is True and second.elected(30) is False
    settings.CELERY_TASK_DEFAULT_QUEUE = "another-fleet"
    assert RedisWatch(redis_server.url).elected(30) is True  # a fleet of its own
    redis_server.stop()
    assert second.elected(30) is True  # the broker cannot tell: the database is what a pass needs


@pytest.fixture
def outage_cluster(demo_committed, tmp_path, redis_server):
    """One worker on the private Redis; a queued run is handed back only when the broker comes back (the grace
    is longer than the test)."""
    c = Cluster(tmp_path, CELERY_BROKER_URL=redis_server.url, AGENT_QUEUED_GRACE_SECONDS="600")
    with publishing_to(celery_app, c.queue, redis_server.url):
        try:
            c.worker()
            c.wait_ready(celery_app)
            yield c
        finally:
            c.stop()


def test_a_worker_keeps_its_runs_through_a_broker_outage_and_runs_started_meanwhile_are_sent_when_it_is_back(
    outage_cluster, redis_server
):
    slow = [J42, {**DRAFT, "delay_seconds": 2}]
    running = [scenario_run(slow) for _ in range(3)]
    for run in running:
        celery_app.send_task("agentrun.advance_run", (run.pk,))
    wait_for(lambda: Run.objects.filter(pk__in=[r.pk for r in running], status=Status.RUNNING).count() == 3, 20, "runs")
    redis_server.stop()
    ticket = Ticket.objects.get(ref="T-1002")
    queued = investigation_start(ticket=ticket)  # saved; its task could not be sent
    redis_server.start()

    for run in [*running, queued]:
        done = wait_for(lambda run=run: terminal(run.pk), 60, f"run {run.pk} to end")
        assert ReviewPacket.objects.filter(run=done).count() == 1
    assert all(terminal(r.pk).status == Status.COMPLETED for r in running)
    assert terminal(queued.pk).status not in (Status.QUEUED, Status.RUNNING)
    (worker,) = outage_cluster.workers.values()
    assert worker.poll() is None  # the worker lived through it
    log = "".join(p.read_text() for p in outage_cluster.logdir.glob("w*.log"))
    assert "Unrecoverable error" not in log
