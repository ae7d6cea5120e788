"""Log lines: JSON when AGENT_LOG_FORMAT=json, each of the loop's lines naming its run, ticket, step and worker."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

from engine.waiting import call_with_timeout
from kit.logs import RUN_CONTEXT, JsonFormatter, RunContextFilter, log_step, run_logging
from tests.support import workers
from tickets.models import Document, Ticket


def investigate(*args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "DATABASE_URL": workers.test_database_url(), "CELERY_BROKER_URL": "", **env}
    return subprocess.run(
        [sys.executable, "manage.py", "investigate", *args],
        cwd=workers.ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_json_lines_of_one_run_carry_its_id_ticket_step_and_worker(demo_committed):
    done = investigate("T-1001", "--json", AGENT_LOG_FORMAT="json", AGENT_LOG_LEVEL="INFO")
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["run"]
    lines = [json.loads(line) for line in done.stderr.splitlines()]  # every line is one JSON object

    ours = [line for line in lines if line["logger"] == "agentrun"]
    assert ours and all(line["run_id"] == run_id and line["ticket"] == "T-1001" for line in ours)
    assert len({line["worker"] for line in ours}) == 1
    steps = [line["step"] for line in ours]
    assert steps[0] == "begin" and "model_request 1" in steps and "dispatch 1 read_job_status" in steps
    assert ours[-1]["message"] == f"run {run_id} left COMPLETED"
    assert {"time", "level", "logger", "message"} <= ours[0].keys()


def test_no_ticket_text_or_tool_result_reaches_the_log(demo_committed):
    done = investigate("T-1001", AGENT_LOG_FORMAT="json", AGENT_LOG_LEVEL="DEBUG")
    assert done.returncode == 0, done.stderr
    ticket = Ticket.objects.get(ref="T-1001")
    private = [ticket.body[:40], ticket.subject, *(d.title for d in Document.objects.all()[:3])]
    assert not [text for text in private if text and text in done.stderr]


def test_plain_lines_stay_the_default(demo_committed):
    done = investigate("T-1001", AGENT_LOG_LEVEL="INFO")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0].startswith("run ") and "{" not in done.stderr


def test_an_operation_s_own_thread_logs_in_its_run_s_context():
    with run_logging(7, "host:1:2:ab"):
        log_step("dispatch 1 search_docs", ticket="T-9")
        seen = call_with_timeout(RUN_CONTEXT.get, 5).value
    assert (seen.run_id, seen.ticket, seen.step, seen.worker) == (7, "T-9", "dispatch 1 search_docs", "host:1:2:ab")
    assert RUN_CONTEXT.get() is None


def test_the_formatter_writes_one_json_object_with_the_run_s_fields():
    record = logging.LogRecord("agentrun", logging.WARNING, __file__, 1, "run %s: %s", (7, "x\ny"), None)
    with run_logging(7, "w"):
        RunContextFilter().filter(record)
    line = JsonFormatter().format(record)
    assert "\n" not in line
    assert json.loads(line) | {"time": ""} == {
        "time": "",
        "level": "WARNING",
        "logger": "agentrun",
        "message": "run 7: x\ny",
        "run_id": 7,
        "worker": "w",
    }
