"""The scenario judge: a report against its `expect`, as the conformance checker compares them."""

from __future__ import annotations

import pytest

from scenarios.judge import scenario_judge

REPORT = {
    "status": "COMPLETED",
    "detail": None,
    "model_requests": 3,
    "tool_attempts": 2,
    "validation_errors": 0,
    "evidence": ["E1", "E2"],
    "elapsed_seconds": 1.5,
    "tokens": {"used": 1650},
    "cost_micros": 3300,
    "dispatched": [{"tool": "read_job_status", "args": {"job_id": "J-42"}, "outcome": "ok", "call_id": "c1"}],
    "packet": {"stop_reason": "COMPLETED", "evidence": ["E1"], "summary": "found it"},
}


@pytest.mark.parametrize(
    "expect",
    [
        {},
        {"status": "COMPLETED", "detail": None, "model_requests": 3, "tool_attempts": 2, "evidence": ["E1", "E2"]},
        {"dispatched": [{"tool": "read_job_status", "args": {"job_id": "J-42"}, "outcome": "ok"}]},
        {"packet_evidence": ["E1"], "elapsed_max": 1.5, "elapsed_min": 1, "tokens_used": 1650, "tokens_used_max": 1650},
        {"cost_micros": 3300, "cost_micros_max": 4000},
    ],
)
def test_a_report_that_matches_its_expect_has_no_problem(expect):
    assert scenario_judge(expect, REPORT) == []


@pytest.mark.parametrize(
    ("expect", "problem"),
    [
        ({"status": "DEADLINE"}, 'status: expected "DEADLINE", got "COMPLETED"'),
        ({"model_requests": 2}, "model_requests: expected 2, got 3"),
        ({"evidence": ["E1"]}, 'evidence: expected ["E1"], got ["E1", "E2"]'),
        (
            {"dispatched": []},
            'dispatched: expected [], got [{"tool": "read_job_status", "args": {"job_id": "J-42"}, "outcome": "ok"}]',
        ),
        ({"packet_evidence": ["E2"]}, "packet.evidence: expected ['E2'], got ['E1']"),
        ({"packet_summary_null": True}, "packet.summary: expected null, got 'found it'"),
        ({"elapsed_max": 1.0}, "elapsed_seconds: expected <= 1.0, got 1.5"),
        ({"elapsed_min": 2}, "elapsed_seconds: expected >= 2, got 1.5"),
        ({"tokens_used": 1000}, "tokens.used: expected 1000, got 1650"),
        ({"tokens_used_max": 1000}, "tokens.used: expected <= 1000, got 1650"),
        ({"cost_micros": 1}, "cost_micros: expected 1, got 3300"),
        ({"cost_micros_max": 3299}, "cost_micros: expected <= 3299, got 3300"),
        ({"finished": True}, "unknown expect key 'finished'"),
    ],
)
def test_each_difference_is_named(expect, problem):
    assert scenario_judge(expect, REPORT) == [problem]


def test_a_bound_on_a_missing_or_non_numeric_value_fails():
    report = {**REPORT, "elapsed_seconds": None, "cost_micros": "3300"}
    assert scenario_judge({"elapsed_max": 10, "cost_micros_max": 10**6}, report) == [
        "elapsed_seconds: expected <= 10, got None",
        "cost_micros: expected <= 1000000, got 3300",
    ]


@pytest.mark.parametrize(
    "report",
    [
        {**REPORT, "packet": {**REPORT["packet"], "stop_reason": "DEADLINE"}},
        {key: value for key, value in REPORT.items() if key != "packet"},
    ],
)
def test_a_terminal_run_s_packet_must_give_its_status_as_the_stop_reason(report):
    assert scenario_judge({}, report) == ["packet.stop_reason must equal status on every terminal run"]


def test_a_run_waiting_for_approval_needs_no_packet():
    report = {key: value for key, value in REPORT.items() if key != "packet"}
    assert scenario_judge({}, {**report, "status": "WAITING_APPROVAL"}) == []
