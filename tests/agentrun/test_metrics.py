"""Metrics of the runs: counted where the facts are decided, once, after the commit, with bounded labels."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import transaction
from django.test import override_settings
from django.utils import timezone

from engine.metrics import model_label, tool_label
from engine.models import ModelRequest, Run, ToolAttempt
from engine.services import run_start
from engine.statuses import Status
from engine.watchdog import watchdog_pass
from scenarios.runner import run_rewind_clock
from tests.support.metrics import grew, label_sets, scrape, value
from tools.registry import TOOLS

pytestmark = pytest.mark.usefixtures("settle")

J42 = {"call": {"tool": "read_job_status", "args": {"job_id": "J-42"}}}
DOCS = {"call": {"tool": "search_docs", "args": {"query": "EXPORT_ROLE_REQUIRED"}}}
DRAFT = {"draft": {"summary": "Role problem.", "evidence": ["E1", "E2"], "open_questions": []}}


def test_a_run_s_counters_after_it_ends(play):
    before = scrape()
    report = play([J42, DOCS, DRAFT])
    after = scrape()

    assert report["status"] == "COMPLETED"
    assert grew(before, after, "supportagent_runs_started_total", model="replay") == 1
    assert grew(before, after, "supportagent_runs_ended_total", status="COMPLETED", model="replay") == 1
    assert grew(before, after, "supportagent_run_duration_seconds_count", model="replay") == 1
    assert grew(before, after, "supportagent_model_requests_total", model="replay", outcome="ok") == 3
    assert grew(before, after, "supportagent_model_request_duration_seconds_count", model="replay") == 3
    for tool in ("read_job_status", "search_docs"):
        assert grew(before, after, "supportagent_tool_dispatches_total", tool=tool, outcome="ok") == 1
        assert grew(before, after, "supportagent_tool_dispatch_duration_seconds_count", tool=tool) == 1
    assert grew(before, after, "supportagent_tokens_total", model="replay") == report["tokens"]["used"] > 0


def test_failures_are_counted_by_their_outcome(play):
    before = scrape()
    report = play([J42, {"error": "500"}], faults={"read_job_status": [{"fail": "error"}]})
    after = scrape()
    assert report["status"] == "MODEL_ERROR"
    assert grew(before, after, "supportagent_tool_dispatches_total", tool="read_job_status", outcome="error") == 1
    assert grew(before, after, "supportagent_model_requests_total", model="replay", outcome="error") == 1
    assert grew(before, after, "supportagent_runs_ended_total", status="MODEL_ERROR", model="replay") == 1


def test_nothing_is_counted_for_a_transaction_rolled_back(ticket_t1001):
    before = scrape()
    with pytest.raises(RuntimeError), transaction.atomic():
        run_start(ticket=ticket_t1001)
        raise RuntimeError("rolled back")
    assert grew(before, scrape(), "supportagent_runs_started_total", model="rules") == 0


def test_nothing_is_counted_with_metrics_off(play):
    before = scrape()
    with override_settings(AGENT_METRICS=False):
        play([J42, DOCS, DRAFT])
    assert label_sets(scrape()) == label_sets(before)
    assert grew(before, scrape(), "supportagent_runs_ended_total", status="COMPLETED", model="replay") == 0


def test_the_queue_gauges_read_the_database_at_scrape_time(ticket_t1001):
    assert value(scrape(), "supportagent_runs_queued") == 0
    old = run_start(ticket=ticket_t1001)
    Run.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(seconds=90))
    run_start(ticket=ticket_t1001)
    now = scrape()
    assert value(now, "supportagent_runs_queued") == 2
    assert 90 <= value(now, "supportagent_oldest_queued_run_age_seconds") < 120
    assert value(now, "supportagent_approvals_waiting") == 0


def test_approvals_waiting(play):
    play([J42], require_approval=["read_job_status"], approval="none")
    assert value(scrape(), "supportagent_approvals_waiting") == 1


def test_the_watchdog_s_deadline_ends_are_counted(ticket_t1001):
    run = run_start(ticket=ticket_t1001)
    run_rewind_clock(run_id=run.pk, elapsed_seconds=run.get_budget().deadline_seconds + 1)
    before = scrape()
    assert watchdog_pass().expired == [run.pk]
    after = scrape()
    assert grew(before, after, "supportagent_watchdog_actions_total", action="deadline_end") == 1
    assert grew(before, after, "supportagent_runs_ended_total", status="DEADLINE", model="rules") == 1


def test_label_values_stay_bounded_after_100_runs_on_different_tickets(play):
    outcomes = [[J42, DOCS, DRAFT], [J42, {"error": "500"}], [{"raw": "no call"}, {"handoff": "help"}]]
    for script in outcomes:  # every label set these runs can produce, once
        play(script)
    seen = label_sets(scrape())
    refs = set()
    for i in range(100):
        report = play(outcomes[i % len(outcomes)])
        refs.add(str(report["run"]))
    after = scrape()
    assert label_sets(after) == seen
    values = {(name, v) for _, labels in seen for name, v in labels if name != "le"}
    assert not {v for _, v in values} & refs
    allowed = {
        "status": set(Status),
        "model": {"rules", "replay", "other"},
        "tool": {*TOOLS, "unknown"},
        "outcome": {*ModelRequest.Outcome, *ToolAttempt.Outcome},
        "action": {"deadline_end", "requeue", "late_result_discarded"},
    }
    assert all(v in allowed[name] for name, v in values), values


@pytest.mark.parametrize(
    "name, label",
    [
        ("rules", "rules"),
        ("replay", "replay"),
        ("openai:gpt-4o-mini", "openai:gpt-4o-mini"),
        ("openai:my-finetune-123", "other"),
        ("anthropic:claude-x", "other"),
    ],
)
def test_model_labels_come_from_configuration(name, label):
    assert model_label(name) == label


def test_a_tool_label_is_a_tool_of_the_dispatch_table():
    assert (tool_label("search_docs"), tool_label("rm -rf")) == ("search_docs", "unknown")


def test_the_example_dashboard_uses_metrics_that_exist(play):
    play([J42, DOCS, DRAFT])
    served = {name for name, _ in scrape()}
    dashboard = (settings.BASE_DIR / "deploy" / "grafana-dashboard.json").read_text()
    used = set(re.findall(r"supportagent_\w+", dashboard))
    assert used and used <= served, used - served
