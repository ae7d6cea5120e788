"""Call-id receipts, transient-read retries, and tool failures as observations (CONFORMANCE §2, §3)."""

from __future__ import annotations

import pytest

from engine.loop import run_advance
from engine.models import Observation, Run
from engine.selectors import run_report
from engine.services import run_start
from providers import ReplayAdapter
from tickets.models import Evidence

pytestmark = pytest.mark.usefixtures("settle")


def call(tool, call_id=None, **args):
    body = {"tool": tool, "args": args}
    if call_id is not None:
        body["id"] = call_id
    return {"call": body}


def draft(*refs):
    return {"draft": {"summary": "Found it.", "evidence": list(refs), "open_questions": []}}


HANDOFF = {"handoff": "a person should look"}


def outcomes(report):
    return [(d["tool"], d["outcome"]) for d in report["dispatched"]]


# --- receipts -----------------------------------------------------------------------------------


def test_same_id_and_identical_call_reuses_the_receipt(play):
    report = play(
        [call("read_job_status", "c1", job_id="J-42"), call("read_job_status", "c1", job_id=" j-42 "), draft("E1")]
    )
    assert report["status"] == "COMPLETED"
    assert (report["tool_attempts"], report["model_requests"]) == (1, 3)  # no attempt spent, the request is
    assert report["evidence"] == ["E1"]
    reused = Observation.objects.filter(run_id=report["run"], kind=Observation.Kind.RECEIPT_REUSED)
    assert [o.evidence_ref for o in reused] == ["E1"]


def test_a_reused_receipt_spends_no_attempt_even_when_none_is_left(play):
    report = play(
        [call("read_job_status", "c1", job_id="J-42"), call("read_job_status", "c1", job_id="J-42"), draft("E1")],
        budget={"max_tool_attempts": 1},
    )
    assert (report["status"], report["tool_attempts"], report["model_requests"]) == ("COMPLETED", 1, 3)


def test_a_reused_receipt_still_spends_a_model_request(play):
    c1 = call("read_job_status", "c1", job_id="J-42")
    report = play([c1, c1, c1], budget={"max_model_requests": 3})
    assert (report["status"], report["model_requests"], report["tool_attempts"]) == ("MODEL_LIMIT", 3, 1)


def test_a_reused_receipt_is_not_an_execution(play):
    # A(c1), B, A(c1) reuses; B again repeats the last *executed* call
    a, b = call("read_job_status", "c1", job_id="J-42"), call("search_docs", "c2", query="export")
    report = play([a, b, a, call("search_docs", query="export")])
    assert report["status"] == "NO_PROGRESS"
    assert report["tool_attempts"] == 2


def test_after_a_reuse_the_same_call_without_id_is_still_a_repeat(play):
    a = call("read_job_status", "c1", job_id="J-42")
    report = play([a, a, call("read_job_status", job_id="J-42")])
    assert (report["status"], report["tool_attempts"]) == ("NO_PROGRESS", 1)


def test_the_same_call_with_a_new_id_is_a_repeat(play):
    report = play([call("read_job_status", "c1", job_id="J-42"), call("read_job_status", "c2", job_id="J-42")])
    assert (report["status"], report["tool_attempts"]) == ("NO_PROGRESS", 1)


def test_same_id_with_a_different_call_is_a_call_id_conflict(play):
    report = play([call("read_job_status", "c1", job_id="J-42"), call("search_docs", "c1", query="export")])
    assert (report["status"], report["detail"]) == ("INVALID_OR_FORBIDDEN", "call_id_conflict")
    assert report["tool_attempts"] == 1


def test_call_id_conflict_comes_before_forbidden(play):
    report = play([call("read_job_status", "c1", job_id="J-42"), call("read_job_status", "c1", job_id="J-77")])
    assert (report["status"], report["detail"]) == ("INVALID_OR_FORBIDDEN", "call_id_conflict")


def test_an_id_on_malformed_output_leaves_no_receipt(play):
    malformed = {"call": {"tool": "read_job_status", "id": "c1"}}  # no args
    report = play([malformed, call("search_docs", "c1", query="export"), draft("E1")])
    assert (report["status"], report["validation_errors"], report["tool_attempts"]) == ("COMPLETED", 1, 1)


def test_an_id_on_a_bad_call_leaves_no_receipt_for_the_next_run_either(ticket_t1001):
    # an id only becomes a receipt when its call is dispatched; receipts are the run's own
    first = run_start(
        ticket=ticket_t1001, model_name="replay", model_script={"model": [call("read_job_status", "c1", job_id="J-77")]}
    )
    assert run_advance(first.pk).detail == "forbidden"
    second = run_start(
        ticket=ticket_t1001,
        model_name="replay",
        model_script={"model": [call("read_job_status", "c1", job_id="J-42"), draft("E1")]},
    )
    assert run_advance(second.pk).status == "COMPLETED"


def test_a_receipt_of_a_failed_call_is_reused_without_a_new_dispatch(play):
    c1 = call("read_job_status", "c1", job_id="J-42")
    report = play([c1, c1, HANDOFF], faults={"read_job_status": [{"fail": "error"}]})
    assert report["status"] == "NEEDS_HELP"
    assert outcomes(report) == [("read_job_status", "error")]
    assert report["evidence"] == []


# --- transient retries ------------------------------------------------------------------------------


def test_a_transient_failure_is_retried_and_the_retry_spends_an_attempt(play):
    report = play(
        [call("read_job_status", job_id="J-42"), draft("E1")], faults={"read_job_status": [{"fail": "transient"}, None]}
    )
    assert report["status"] == "COMPLETED"
    assert outcomes(report) == [("read_job_status", "transient_error"), ("read_job_status", "ok")]
    assert (report["tool_attempts"], report["model_requests"]) == (2, 2)
    assert report["dispatched"][1]["args"] == {"job_id": "J-42"}


def test_a_retry_takes_the_next_fault_entry(play):
    report = play(
        [call("read_job_status", job_id="J-42"), HANDOFF],
        faults={"read_job_status": [{"fail": "transient"}, {"fail": "error"}]},
    )
    assert outcomes(report) == [("read_job_status", "transient_error"), ("read_job_status", "error")]
    assert report["status"] == "NEEDS_HELP"


def test_later_dispatches_continue_after_the_entries_retries_took(play):
    report = play(
        [
            call("read_job_status", job_id="J-42"),
            call("search_docs", query="export"),
            call("read_job_status", job_id="J-41"),
            HANDOFF,
        ],
        faults={"read_job_status": [{"fail": "transient"}, None, {"fail": "error"}]},
    )
    assert outcomes(report) == [
        ("read_job_status", "transient_error"),
        ("read_job_status", "ok"),
        ("search_docs", "ok"),
        ("read_job_status", "error"),
    ]


def test_retries_stop_at_max_read_retries_and_the_failure_stands(play):
    report = play(
        [call("read_job_status", job_id="J-42"), HANDOFF], faults={"read_job_status": [{"fail": "transient"}] * 5}
    )
    assert outcomes(report) == [("read_job_status", "transient_error")] * 2
    assert (report["status"], report["tool_attempts"]) == ("NEEDS_HELP", 2)


@pytest.mark.parametrize("retries, dispatches", [(0, 1), (2, 3), (3, 4)])
def test_max_read_retries_is_the_number_of_automatic_retries(play, retries, dispatches):
    report = play(
        [call("read_job_status", job_id="J-42"), HANDOFF],
        budget={"max_read_retries": retries},
        faults={"read_job_status": [{"fail": "transient"}] * 5},
    )
    assert report["tool_attempts"] == dispatches


def test_no_retry_when_no_attempt_is_left(play):
    report = play(
        [call("read_job_status", job_id="J-42"), HANDOFF],
        budget={"max_tool_attempts": 1},
        faults={"read_job_status": [{"fail": "transient"}, None]},
    )
    assert outcomes(report) == [("read_job_status", "transient_error")]
    assert (report["status"], report["tool_attempts"]) == ("NEEDS_HELP", 1)


def test_retries_stop_when_the_attempts_run_out(play):
    report = play(
        [call("read_job_status", job_id="J-42"), HANDOFF],
        budget={"max_tool_attempts": 2, "max_read_retries": 5},
        faults={"read_job_status": [{"fail": "transient"}] * 5},
    )
    assert report["tool_attempts"] == 2


def test_a_permanent_failure_is_not_retried(play):
    report = play(
        [call("read_job_status", job_id="J-42"), HANDOFF], faults={"read_job_status": [{"fail": "error"}, None]}
    )
    assert outcomes(report) == [("read_job_status", "error")]


# --- failures and timeouts are observations, shown to the model ---------------------------------------


class Recorder(ReplayAdapter):
    """The replay model, remembering the prompt of every request."""

    def __init__(self, script):
        super().__init__(script)
        self.prompts: list[str] = []

    def request(self, spec):
        self.prompts.append(spec.context.prompt)
        return super().request(spec)


def test_a_tool_failure_is_recorded_shown_to_the_model_and_the_loop_goes_on(ticket_t1001):
    script = [call("read_job_status", job_id="J-42"), call("search_docs", query="export"), draft("E1")]
    run = run_start(
        ticket=ticket_t1001,
        model_name="replay",
        model_script={"model": script, "faults": {"read_job_status": [{"fail": "error"}]}},
    )
    model = Recorder(script)
    run = run_advance(run.pk, adapter=model)
    report = run_report(run_id=run.pk)
    assert report["status"] == "COMPLETED"
    assert outcomes(report) == [("read_job_status", "error"), ("search_docs", "ok")]
    assert "read failure" in model.prompts[1] and "error" in model.prompts[1]
    assert report["evidence"] == ["E1"]  # the failed attempt is not evidence
    assert Evidence.objects.get(ticket=ticket_t1001).tool == "search_docs"


def test_a_tool_timeout_is_an_observation_and_its_late_result_is_never_evidence(play, settle):
    report = play(
        [call("read_job_status", job_id="J-42"), call("search_docs", query="export"), draft("E1")],
        budget={"operation_timeout_seconds": 1.0},
        faults={"read_job_status": [{"delay_seconds": 2.0}]},
    )
    assert report["status"] == "COMPLETED"
    assert outcomes(report) == [("read_job_status", "timeout"), ("search_docs", "ok")]
    settle()
    run = Run.objects.get(pk=report["run"])
    assert list(Evidence.objects.filter(ticket=run.ticket).values_list("tool", flat=True)) == ["search_docs"]
    assert [d["outcome"] for d in run_report(run_id=run.pk)["dispatched"]] == ["timeout", "ok"]


def test_after_a_reused_receipt_the_call_executed_last_still_decides_repetition(play):
    a, b = call("read_job_status", "c1", job_id="J-42"), call("search_docs", query="export")
    report = play([a, b, a, call("read_job_status", job_id="J-42"), draft("E1")])
    assert report["status"] == "COMPLETED"  # A(c1), B, A(c1) reused, A: the last executed was B
    assert [d["tool"] for d in report["dispatched"]] == ["read_job_status", "search_docs", "read_job_status"]
