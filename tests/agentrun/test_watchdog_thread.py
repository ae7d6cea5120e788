"""Without a broker (no Celery beat) the web process's own watchdog thread ends runs at their deadline."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.models import Run
from engine.watchdog_thread import WatchdogThread, embedded_watchdog_start, embedded_watchdog_stop
from tests.support.webhooks import investigate
from tests.support.workers import wait_for
from tickets.models import Job

ROOT = Path(__file__).resolve().parents[2]
J42 = {"call": {"tool": "read_job_status", "args": {"job_id": "J-42"}}}


def test_the_in_process_watchdog_ends_a_run_waiting_past_its_deadline(ticket_t1001, roles):
    Job.objects.filter(ref="J-42").update(sensitive=True)
    run = investigate(ticket_t1001, script=(J42,))
    assert run.status == "WAITING_APPROVAL"
    timer = WatchdogThread(0.05)
    timer.start()
    try:
        Run.objects.filter(pk=run.pk).update(deadline_at=run.created_at)
        ended = wait_for(lambda: Run.objects.filter(pk=run.pk, status="DEADLINE").first(), 10, "the deadline end")
    finally:
        timer.stop()
    assert ended.packet.stop_reason == "DEADLINE" and ended.approvals.get().state == "expired"
    assert not timer.is_alive()


def test_it_starts_once_per_process_and_only_without_a_broker(settings, transactional_db):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:6379/0"
    assert embedded_watchdog_start() is None  # beat runs the passes
    settings.CELERY_BROKER_URL, settings.AGENT_WATCHDOG_INTERVAL = "", 0.05
    try:
        first = embedded_watchdog_start()
        assert first is not None and first.is_alive() and embedded_watchdog_start() is first
    finally:
        embedded_watchdog_stop()
    assert not first.is_alive()


def _threads_after(code: str, tmp_path: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "CELERY_", "AGENT_"))}
    env |= {"SUPPORTAGENT_VAR_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "supportagent.settings"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize(
    "loads, started",
    [
        ("import supportagent.wsgi", True),  # the web process (runserver loads it too)
        ("import django; django.setup()", False),  # management commands, tests, workers
    ],
)
def test_the_web_process_starts_it_nothing_else_does(tmp_path, loads, started):
    shown = _threads_after(f"{loads}; import threading; print([t.name for t in threading.enumerate()])", tmp_path)
    assert ("agentrun-watchdog" in shown) is started
