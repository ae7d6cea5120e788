"""Every exit of CONFORMANCE §3 through the production loop (run_scenario's path), and which one wins."""

from __future__ import annotations

import pytest

from engine.models import Approval, ReviewPacket, Run
from engine.selectors import run_report
from engine.services import approval_answer, run_cancel
from tickets.models import Evidence, Ticket
from tools.lookups import UNBOUNDED

pytestmark = pytest.mark.usefixtures("settle")

J42 = {"call": {"tool": "read_job_status", "args": {"job_id": "J-42"}}}
J41 = {"call": {"tool": "read_job_status", "args": {"job_id": "J-41"}}}
J77 = {"call": {"tool": "read_job_status", "args": {"job_id": "J-77"}}}
DOCS = {"call": {"tool": "search_docs", "args": {"query": "EXPORT_ROLE_REQUIRED"}}}
EXPORT = {"call": {"tool": "read_service_status", "args": {"service": "export"}}}
RAW = {"raw": "I think the job failed."}


def draft(*refs, summary="The requester is a viewer.", questions=()):
    return {"draft": {"summary": summary, "evidence": list(refs), "open_questions": list(questions)}}


def dispatched(report):
    return [(d["tool"], d["args"], d["outcome"]) for d in report["dispatched"]]


def ended(report, status, detail=None):
    """The run ended with `status`/`detail`, with exactly one packet whose stop reason is that status."""
    assert (report["status"], report["detail"]) == (status, detail), report
    assert report["packet"]["stop_reason"] == status
    assert report["packet"]["detail"] == detail
    assert ReviewPacket.objects.filter(run_id=report["run"]).count() == 1
    assert report["tokens"]["reserved"] == 0
    return report


# --- COMPLETED --------------------------------------------------------------------------


def test_valid_draft_completes_and_becomes_the_packet(play):
    report = play([J42, DOCS, draft("E2", "E1", "E2", summary="  Role problem [E1][E2].  ", questions=["When?"])])
    ended(report, "COMPLETED")
    assert report["packet"]["summary"] == "Role problem [E1][E2]."
    assert report["packet"]["evidence"] == ["E2", "E1"]
    assert report["packet"]["open_questions"] == ["When?"]
    assert report["evidence"] == ["E1", "E2"]
    assert [a["outcome"] for a in report["packet"]["attempts"]] == ["ok", "ok"]
    assert (report["model_requests"], report["tool_attempts"], report["validation_errors"]) == (3, 2, 0)


def test_packet_evidence_is_only_what_the_draft_cites(play):
    report = ended(play([J42, DOCS, draft("E2")]), "COMPLETED")
    assert report["packet"]["evidence"] == ["E2"]
    assert report["evidence"] == ["E1", "E2"]


def test_draft_is_accepted_when_the_tool_budget_is_spent(play):
    report = ended(play([J42, draft("E1")], budget={"max_tool_attempts": 1}), "COMPLETED")
    assert report["tool_attempts"] == 1


def test_invalid_draft_is_a_validation_error_and_the_loop_goes_on(play):
    report = play([J42, draft("E7"), draft("E1", summary="   "), draft("E1")])
    ended(report, "COMPLETED")
    assert (report["model_requests"], report["validation_errors"]) == (4, 2)


def test_draft_before_any_evidence_is_invalid(play):
    report = play([draft("E1"), J42, draft("E1")])
    ended(report, "COMPLETED")
    assert report["validation_errors"] == 1


# --- NEEDS_HELP ---------------------------------------------------------------------------


def test_handoff_needs_help_and_the_packet_lists_the_runs_evidence(play):
    report = ended(play([J42, DOCS, {"handoff": "a person should call the customer"}]), "NEEDS_HELP")
    assert report["packet"]["summary"] is None
    assert report["packet"]["evidence"] == ["E1", "E2"]
    assert report["packet"]["open_questions"] == []
    assert len(report["packet"]["attempts"]) == 2


def test_handoff_on_the_first_request(play):
    report = ended(play([{"handoff": {"reason": "nothing to look up"}}]), "NEEDS_HELP")
    assert (report["model_requests"], report["tool_attempts"], report["packet"]["evidence"]) == (1, 0, [])


# --- DEADLINE ---------------------------------------------------------------------------


def test_deadline_passed_before_a_request_sends_nothing(play):
    report = play(
        [J42, draft("E1")],
        budget={"deadline_seconds": 45},
        start={"model_requests": 2, "tool_attempts": 1, "elapsed_seconds": 46},
    )
    ended(report, "DEADLINE")
    assert (report["model_requests"], report["tool_attempts"], report["dispatched"]) == (2, 1, [])
    assert report["tokens"]["used"] == 0


def test_deadline_during_a_model_request_is_deadline_not_model_error(play):
    slow = {**J42, "delay_seconds": 2}
    report = play(
        [slow], budget={"deadline_seconds": 45, "operation_timeout_seconds": 10}, start={"elapsed_seconds": 44.0}
    )
    ended(report, "DEADLINE")
    assert (report["model_requests"], report["tool_attempts"], report["dispatched"]) == (1, 0, [])
    assert report["tokens"]["used"] == 9000  # a wait ended without a reply is charged its whole reservation


def test_deadline_during_a_dispatch_records_a_timeout_and_no_evidence(play, settle):
    report = play(
        [J42, draft("E1")],
        budget={"deadline_seconds": 45, "operation_timeout_seconds": 5},
        start={"elapsed_seconds": 44.0},
        faults={"read_job_status": [{"delay_seconds": 2.5}]},
    )
    ended(report, "DEADLINE")
    assert dispatched(report) == [("read_job_status", {"job_id": "J-42"}, "timeout")]
    assert (report["model_requests"], report["tool_attempts"], report["evidence"]) == (1, 1, [])
    settle()  # the late result arrives... and goes nowhere
    run = Run.objects.get(pk=report["run"])
    assert Evidence.objects.filter(ticket=run.ticket).count() == 0
    assert run_report(run_id=run.pk)["dispatched"][0]["outcome"] == "timeout"
    assert (run.status, run.model_requests, run.tool_attempts) == ("DEADLINE", 1, 1)


def test_deadline_beats_model_limit_before_a_request(play):
    report = play(
        [J42],
        budget={"max_model_requests": 3, "deadline_seconds": 45},
        start={"model_requests": 3, "elapsed_seconds": 50},
    )
    ended(report, "DEADLINE")


# --- MODEL_LIMIT ---------------------------------------------------------------------------


def test_malformed_replies_spend_requests_until_model_limit(play):
    report = ended(play([RAW, RAW, RAW, RAW], budget={"max_model_requests": 3}), "MODEL_LIMIT")
    assert (report["model_requests"], report["validation_errors"]) == (3, 3)


def test_model_limit_when_the_resumed_run_has_no_request_left(play):
    report = ended(play([J42], budget={"max_model_requests": 4}, start={"model_requests": 4}), "MODEL_LIMIT")
    assert (report["model_requests"], report["dispatched"]) == (4, [])


def test_model_limit_after_the_last_request_led_to_a_dispatch(play):
    report = ended(play([J42, DOCS], budget={"max_model_requests": 1}), "MODEL_LIMIT")
    assert (report["model_requests"], report["tool_attempts"]) == (1, 1)


def test_model_limit_beats_token_limit(play):
    ended(play([J42], budget={"max_model_requests": 0, "max_total_tokens": 0}), "MODEL_LIMIT")


# --- TOOL_LIMIT -----------------------------------------------------------------------------


def test_a_call_after_the_tool_budget_is_spent_is_tool_limit(play):
    report = ended(play([J42, DOCS, draft("E1")], budget={"max_tool_attempts": 1}), "TOOL_LIMIT")
    assert dispatched(report) == [("read_job_status", {"job_id": "J-42"}, "ok")]
    assert (report["model_requests"], report["tool_attempts"]) == (2, 1)
    assert report["packet"]["evidence"] == ["E1"]


def test_tool_limit_when_the_resumed_run_has_no_attempt_left(play):
    report = ended(play([J42], budget={"max_tool_attempts": 2}, start={"tool_attempts": 2}), "TOOL_LIMIT")
    assert (report["model_requests"], report["tool_attempts"], report["dispatched"]) == (1, 2, [])


def test_zero_tool_budget_still_allows_a_handoff(play):
    ended(play([{"handoff": "no lookups allowed"}], budget={"max_tool_attempts": 0}), "NEEDS_HELP")


# --- TOKEN_LIMIT and COST_LIMIT -----------------------------------------------------------------


def test_token_limit_when_the_next_reservation_does_not_fit(play):
    # each request reserves 9000; after two replies of 550 only 8900 of 10000 is left
    report = ended(play([RAW] * 5, budget={"max_total_tokens": 10000}), "TOKEN_LIMIT")
    assert (report["model_requests"], report["tokens"]["used"]) == (2, 1100)


def test_a_reservation_equal_to_what_is_left_fits(play):
    report = ended(play([RAW, RAW], budget={"max_total_tokens": 9000 + 550, "max_model_requests": 2}), "MODEL_LIMIT")
    assert report["tokens"]["used"] == 1100


def test_token_limit_counts_tokens_used_before_a_resume(play):
    report = ended(play([J42], budget={"max_total_tokens": 60000}, start={"tokens_used": 51001}), "TOKEN_LIMIT")
    assert (report["model_requests"], report["tokens"]["used"]) == (0, 51001)


def test_cost_limit_when_the_next_cost_reservation_does_not_fit(play):
    # reservation 8000*3 + 1000*15 = 39000; a reply of 500/50 costs 2250
    prices = {"input_per_mtok_usd": 3.0, "output_per_mtok_usd": 15.0}
    report = ended(play([RAW] * 5, budget={"prices": prices, "max_cost_micros": 39000 + 2250}), "COST_LIMIT")
    assert (report["model_requests"], report["cost_micros"]) == (2, 4500)


def test_cost_limit_counts_cost_spent_before_a_resume(play):
    prices = {"input_per_mtok_usd": "3", "output_per_mtok_usd": "15"}
    report = ended(play([J42], budget={"prices": prices}, start={"cost_micros": 500000 - 38999}), "COST_LIMIT")
    assert report["model_requests"] == 0


def test_token_limit_beats_cost_limit(play):
    prices = {"input_per_mtok_usd": 3.0, "output_per_mtok_usd": 15.0}
    ended(play([J42], budget={"prices": prices, "max_cost_micros": 0, "max_total_tokens": 0}), "TOKEN_LIMIT")


# --- NO_PROGRESS ---------------------------------------------------------------------------------


def test_the_same_call_twice_is_no_progress(play):
    again = {"call": {"tool": "read_job_status", "args": {"job_id": "  j-42 "}}}
    report = ended(play([J42, again, draft("E1")]), "NO_PROGRESS")
    assert report["tool_attempts"] == 1 and report["packet"]["evidence"] == ["E1"]


def test_repetition_is_judged_on_normalized_arguments_with_defaults_filled(play):
    first = {"call": {"tool": "search_docs", "args": {"query": "Export  Role"}}}
    again = {"call": {"tool": "search_docs", "args": {"query": " export role ", "max_results": 3}}}
    ended(play([first, again]), "NO_PROGRESS")


def test_clamped_max_results_count_as_the_same_call(play):
    first = {"call": {"tool": "search_docs", "args": {"query": "export", "max_results": 5}}}
    again = {"call": {"tool": "search_docs", "args": {"query": "export", "max_results": 50}}}
    ended(play([first, again]), "NO_PROGRESS")


def test_a_b_a_is_progress(play):
    report = ended(play([J42, DOCS, J42, draft("E1", "E2")]), "COMPLETED")
    assert [d[0] for d in dispatched(report)] == ["read_job_status", "search_docs", "read_job_status"]
    assert report["evidence"] == ["E1", "E2"]


def test_repeat_beats_tool_budget(play):
    report = ended(play([J42, J42], budget={"max_tool_attempts": 1}), "NO_PROGRESS")
    assert report["tool_attempts"] == 1


def test_repeating_a_failed_call_is_no_progress(play):
    report = ended(play([J42, J42], faults={"read_job_status": [{"fail": "error"}]}), "NO_PROGRESS")
    assert dispatched(report) == [("read_job_status", {"job_id": "J-42"}, "error")]


def test_malformed_output_between_repeats_does_not_make_progress(play):
    report = ended(play([J42, RAW, draft("E9"), J42]), "NO_PROGRESS")
    assert report["validation_errors"] == 2


# --- INVALID_OR_FORBIDDEN ------------------------------------------------------------------------


def test_several_calls_at_once_are_rejected_and_nothing_is_dispatched(play):
    both = {"calls": [J42["call"], DOCS["call"]]}
    report = ended(play([both, draft("E1")]), "INVALID_OR_FORBIDDEN", "multiple_calls")
    assert (report["dispatched"], report["tool_attempts"], report["model_requests"]) == ([], 0, 1)


def test_several_malformed_calls_are_still_multiple_calls(play):
    ended(play([{"calls": [{"tool": ""}, "x"]}]), "INVALID_OR_FORBIDDEN", "multiple_calls")


def test_a_list_of_one_call_is_one_call(play):
    report = ended(play([{"calls": [J42["call"]]}, draft("E1")]), "COMPLETED")
    assert report["tool_attempts"] == 1


def test_an_empty_list_of_calls_is_malformed_output(play):
    report = ended(play([{"calls": []}, J42, draft("E1")]), "COMPLETED")
    assert report["validation_errors"] == 1


@pytest.mark.parametrize(
    "bad",
    [
        {"call": {"args": {"job_id": "J-42"}}},
        {"call": {"tool": 3, "args": {"job_id": "J-42"}}},
        {"call": {"tool": "", "args": {}}},
        {"call": {"tool": "read_job_status"}},
        {"call": {"tool": "read_job_status", "args": "J-42"}},
        {"call": {"tool": "delete_workspace", "args": ["everything"]}},  # args checked before the tool lookup
        {"raw": '{"call": {"tool": "read_job_status", "args": {"job_id": "J-42"}}}'},  # raw text is never parsed
    ],
    ids=["no-tool", "tool-number", "tool-empty", "no-args", "args-text", "unknown-tool-bad-args", "raw-json"],
)
def test_a_call_that_is_not_well_formed_is_malformed_output(play, bad):
    report = ended(play([bad, J42, draft("E1")]), "COMPLETED")
    assert (report["validation_errors"], report["model_requests"], report["tool_attempts"]) == (1, 3, 1)


def test_unknown_tool_is_refused(play):
    injected = {"call": {"tool": "delete_workspace", "args": {"workspace": "acme-analytics"}}}
    report = ended(play([J42, injected]), "INVALID_OR_FORBIDDEN", "unknown_tool")
    assert report["tool_attempts"] == 1


def test_unknown_tool_comes_before_bad_arguments(play):
    ended(play([{"call": {"tool": "read_jobs", "args": {"job_id": 42}}}]), "INVALID_OR_FORBIDDEN", "unknown_tool")


@pytest.mark.parametrize(
    "args",
    [{"job_id": "42"}, {"job_id": 42}, {"job_id": "J-42", "account": "GLOBEX"}, {}, {"job_id": "J-\u0664\u0662"}],
)
def test_bad_arguments_are_refused(play, args):
    report = ended(play([{"call": {"tool": "read_job_status", "args": args}}]), "INVALID_OR_FORBIDDEN", "bad_arguments")
    assert report["dispatched"] == []


@pytest.mark.parametrize("value", [True, 3.0, "3", 0])
def test_max_results_must_be_a_positive_json_integer(play, value):
    call = {"call": {"tool": "search_docs", "args": {"query": "export", "max_results": value}}}
    ended(play([call]), "INVALID_OR_FORBIDDEN", "bad_arguments")


def test_bad_arguments_come_before_forbidden(play):
    call = {"call": {"tool": "read_job_status", "args": {"job_id": "J-77", "extra": 1}}}
    ended(play([call], session="S-ACME-ANON"), "INVALID_OR_FORBIDDEN", "bad_arguments")


def test_another_accounts_job_is_forbidden(play):
    report = ended(play([J42, J77]), "INVALID_OR_FORBIDDEN", "forbidden")
    assert [d[1] for d in dispatched(report)] == [{"job_id": "J-42"}]


def test_a_job_that_does_not_exist_is_forbidden_too(play):
    missing = {"call": {"tool": "read_job_status", "args": {"job_id": "J-999999"}}}
    ended(play([missing]), "INVALID_OR_FORBIDDEN", "forbidden")


def test_forbidden_beats_tool_limit(play):
    ended(play([J77], start={"tool_attempts": 6}), "INVALID_OR_FORBIDDEN", "forbidden")


def test_approval_denied_ends_the_run_and_nothing_is_dispatched(play):
    report = play([J42, draft("E1")], require_approval=["read_job_status"], approval="deny")
    ended(report, "INVALID_OR_FORBIDDEN", "approval_denied")
    assert (report["dispatched"], report["tool_attempts"]) == ([], 0)
    assert list(Approval.objects.filter(run_id=report["run"]).values_list("state", flat=True)) == ["denied"]


def test_tool_limit_comes_before_asking_for_approval(play):
    report = play([J42], require_approval=["read_job_status"], approval="deny", budget={"max_tool_attempts": 0})
    ended(report, "TOOL_LIMIT")
    assert not Approval.objects.filter(run_id=report["run"]).exists()


# --- MODEL_ERROR ------------------------------------------------------------------------------------


def test_provider_error_is_model_error(play):
    report = ended(play([J42, {"error": "provider said 500"}, draft("E1")]), "MODEL_ERROR", "error")
    assert (report["model_requests"], report["tool_attempts"]) == (2, 1)
    assert report["packet"]["evidence"] == ["E1"]


def test_a_request_after_the_script_is_exhausted_is_sent_counted_and_fails(play):
    report = ended(play([J42]), "MODEL_ERROR", "error")
    assert (report["model_requests"], report["tokens"]["used"]) == (2, 550)


def test_operation_timeout_shorter_than_the_time_left_is_model_error_timeout(play):
    slow = {**J42, "delay_seconds": 1.0}
    report = ended(play([slow], budget={"operation_timeout_seconds": 0.2}), "MODEL_ERROR", "timeout")
    assert (report["model_requests"], report["dispatched"]) == (1, [])


@pytest.mark.parametrize(
    "usage",
    [{"input_tokens": 8001, "output_tokens": 10}, {"input_tokens": 10, "output_tokens": 1001}, {"output_tokens": 5000}],
)
def test_reported_usage_over_a_cap_is_usage_overrun(play, usage):
    report = ended(play([{**J42, "usage": usage}]), "MODEL_ERROR", "usage_overrun")
    assert report["dispatched"] == []
    assert report["tokens"]["used"] == usage.get("input_tokens", 0) + usage.get("output_tokens", 0)


def test_usage_exactly_at_the_caps_is_not_an_overrun(play):
    report = ended(play([{**J42, "usage": {"input_tokens": 8000, "output_tokens": 1000}}, draft("E1")]), "COMPLETED")
    assert report["tokens"]["used"] == 9000 + 550


def test_usage_caps_are_the_runs_own(play):
    usage = {"input_tokens": 600, "output_tokens": 10}
    ended(play([{**J42, "usage": usage}], budget={"max_input_tokens": 599}), "MODEL_ERROR", "usage_overrun")


# --- WAITING_APPROVAL and CANCELLED -------------------------------------------------------------------


def test_a_call_needing_approval_rests_waiting_with_no_packet(play):
    call = {"call": {"tool": "read_job_status", "args": {"job_id": " j-42 "}, "id": "c1"}}
    report = play([call, draft("E1")], require_approval=["read_job_status"])
    assert (report["status"], report["detail"], report["packet"]) == ("WAITING_APPROVAL", None, None)
    assert report["pending_call"]["args"] == {"job_id": "J-42"}
    assert (report["tool_attempts"], report["dispatched"]) == (0, [])
    assert not ReviewPacket.objects.filter(run_id=report["run"]).exists()


def test_a_granted_approval_dispatches_exactly_the_approved_call(play):
    call = {"call": {"tool": "read_job_status", "args": {"job_id": " j-42 "}}}
    report = ended(play([call, draft("E1")], require_approval=["read_job_status"], approval="grant"), "COMPLETED")
    assert dispatched(report) == [("read_job_status", {"job_id": "J-42"}, "ok")]
    assert list(Approval.objects.filter(run_id=report["run"]).values_list("state", flat=True)) == ["used"]


def test_an_approval_is_used_once(play):
    report = play([J42, DOCS, J42, draft("E1")], require_approval=["read_job_status"], approval="grant")
    ended(report, "COMPLETED")
    assert report["tool_attempts"] == 3
    states = list(Approval.objects.filter(run_id=report["run"]).values_list("state", flat=True))
    assert states == ["used", "used"]


def test_cancelling_a_run_waiting_for_approval_ends_it_cancelled(play):
    waiting = play([J42, draft("E1")], require_approval=["read_job_status"])
    assert waiting["status"] == "WAITING_APPROVAL"
    run_cancel(run_id=waiting["run"])
    report = ended(run_report(run_id=waiting["run"]), "CANCELLED")
    assert (report["dispatched"], report["tool_attempts"], report["model_requests"]) == ([], 0, 1)
    assert report["packet"]["summary"] is None
    assert not Approval.objects.filter(run_id=waiting["run"], state__in=["pending", "granted"]).exists()


def test_cancelling_a_finished_run_changes_nothing(play):
    report = ended(play([{"handoff": "h"}]), "NEEDS_HELP")
    run_cancel(run_id=report["run"])
    ended(run_report(run_id=report["run"]), "NEEDS_HELP")


def test_an_approval_answered_after_the_deadline_changes_nothing(play):
    waiting = play([J42, draft("E1")], require_approval=["read_job_status"])
    run = Run.objects.get(pk=waiting["run"])
    Run.objects.filter(pk=run.pk).update(deadline_at=run.created_at)  # the deadline has passed meanwhile
    approval_answer(run_id=run.pk, grant=True, decided_by="supervisor", resume=False)
    report = ended(run_report(run_id=run.pk), "DEADLINE")
    assert (report["dispatched"], report["tool_attempts"]) == ([], 0)


def test_cancelling_a_queued_run_ends_it_before_anything_is_spent(ticket_t1001):
    from engine.loop import run_advance
    from engine.services import run_start

    run = run_start(ticket=ticket_t1001, model_name="replay", model_script={"model": [J42, draft("E1")]})
    run_cancel(run_id=run.pk)
    run_advance(run.pk)
    report = ended(run_report(run_id=run.pk), "CANCELLED")
    assert (report["model_requests"], report["tool_attempts"]) == (0, 0)


def test_a_run_cancelled_during_a_dispatch_stops_before_its_next_request(ticket_t1001):
    from engine.loop import run_advance
    from engine.services import run_start
    from tools.dispatch import Dispatcher

    class CancelWhileDispatching(Dispatcher):
        def dispatch(self, tool, scope, args, index, lookup=UNBOUNDED):
            run_cancel(run_id=run.pk)
            return super().dispatch(tool, scope, args, index, lookup)

    run = run_start(ticket=ticket_t1001, model_name="replay", model_script={"model": [J42, DOCS, draft("E1")]})
    run_advance(run.pk, dispatcher=CancelWhileDispatching())
    report = ended(run_report(run_id=run.pk), "CANCELLED")
    assert dispatched(report) == [("read_job_status", {"job_id": "J-42"}, "ok")]
    assert (report["model_requests"], report["evidence"], report["packet"]["evidence"]) == (1, ["E1"], ["E1"])


def test_nothing_the_model_says_raises_a_budget(play):
    generous = {**J42, "budget": {"max_tool_attempts": 99}, "max_tool_attempts": 99}
    report = ended(play([generous, DOCS], budget={"max_tool_attempts": 1}), "TOOL_LIMIT")
    assert Run.objects.get(pk=report["run"]).budget["max_tool_attempts"] == 1


def test_a_document_telling_the_agent_to_misbehave_is_just_evidence(play):
    note = {"call": {"tool": "search_docs", "args": {"query": "troubleshooting notes delete_workspace"}}}
    obey = {"call": {"tool": "delete_workspace", "args": {}}}
    report = play([note, obey])
    ended(report, "INVALID_OR_FORBIDDEN", "unknown_tool")
    assert report["evidence"] == ["E1"]


def test_forbidden_comes_before_asking_for_approval(play):
    report = play([J77], require_approval=["read_job_status"], approval="grant")
    ended(report, "INVALID_OR_FORBIDDEN", "forbidden")
    assert not Approval.objects.filter(run_id=report["run"]).exists()


def test_a_validation_error_is_shown_to_the_model_in_its_next_request(ticket_t1001):
    from engine.loop import run_advance
    from engine.services import run_start
    from providers import ReplayAdapter

    class Recorder(ReplayAdapter):
        def __init__(self, script):
            super().__init__(script)
            self.prompts: list[str] = []

        def request(self, spec):
            self.prompts.append(spec.context.prompt)
            return super().request(spec)

    script = [J42, draft("E9"), draft("E1")]
    run = run_start(ticket=ticket_t1001, model_name="replay", model_script={"model": script})
    model = Recorder(script)
    assert run_advance(run.pk, adapter=model).status == "COMPLETED"
    assert "E9" not in model.prompts[1] and "E9" in model.prompts[2]


def test_a_supervisors_grant_resumes_the_run_and_dispatches_the_call(play):
    waiting = play([J42, draft("E1")], require_approval=["read_job_status"])
    approval_answer(run_id=waiting["run"], grant=True, decided_by="supervisor")  # resumes it (inline: no broker)
    report = ended(run_report(run_id=waiting["run"]), "COMPLETED")
    assert dispatched(report) == [("read_job_status", {"job_id": "J-42"}, "ok")]


def test_only_a_waiting_run_can_be_answered(play):
    from engine.services import RunError

    report = ended(play([{"handoff": "h"}]), "NEEDS_HELP")
    with pytest.raises(RunError):
        approval_answer(run_id=report["run"], grant=True, decided_by="supervisor")
    ended(run_report(run_id=report["run"]), "NEEDS_HELP")


def test_run_scenario_command_prints_one_json_object_whatever_the_status(demo_committed, tmp_path):
    import json
    from io import StringIO

    from django.core.management import call_command

    scenario = {
        "name": "limit",
        "session": "S-ACME-1",
        "ticket": "T-1001",
        "budget": {"max_tool_attempts": 1},
        "model": [J42, DOCS],
    }
    path = tmp_path / "limit.json"
    path.write_text(json.dumps(scenario))
    out = StringIO()
    call_command("run_scenario", str(path), stdout=out)
    report = json.loads(out.getvalue())
    assert (report["name"], report["status"], report["packet"]["stop_reason"]) == ("limit", "TOOL_LIMIT", "TOOL_LIMIT")


def test_run_scenario_refuses_a_session_of_another_account(demo_committed, tmp_path):
    import json

    from django.core.management import call_command
    from django.core.management.base import CommandError

    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"name": "bad", "session": "S-GLOBEX-1", "ticket": "T-1001", "model": [J77]}))
    tickets = Ticket.objects.count()
    with pytest.raises(CommandError):
        call_command("run_scenario", str(path))
    assert not Run.objects.exists()
    assert Ticket.objects.count() == tickets  # no ticket copy left behind


@pytest.mark.parametrize(
    "extra,problem",
    [
        ({"faults": {"search_docs": [{"fail": "sometimes"}]}}, "'transient' or 'error'"),
        ({"faults": {"search_docs": [{"delay_seconds": "3"}]}}, "delay_seconds"),
        ({"faults": {"search_docs": [{"delay_seconds": -1}]}}, "delay_seconds"),
        ({"faults": {"search_docs": [{"slow": True}]}}, "slow"),
        ({"faults": {"delete_workspace": [None]}}, "search_docs"),
        ({"require_approval": ["delete_workspace"]}, "delete_workspace"),
        ({"model": [{**DOCS, "delay_seconds": "0.3"}]}, "delay_seconds"),
        ({"model": [{**DOCS, "delay_seconds": -1}]}, "delay_seconds"),
        ({"model": [{**DOCS, "delay_seconds": 1e300}]}, "delay_seconds"),
        ({"faults": {"search_docs": [{"delay_seconds": 1e16}]}}, "delay_seconds"),
        ({"start": {"elapsed_seconds": 1e15}}, "elapsed_seconds"),
        ({"start": {"model_requests": 10**23}}, "model_requests"),
        ({"start": {"tokens_used": 2**63}}, "tokens_used"),
    ],
)
def test_run_scenario_refuses_faults_and_approvals_it_cannot_apply(demo_committed, tmp_path, extra, problem):
    import json

    from django.core.management import call_command
    from django.core.management.base import CommandError

    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"name": "bad", "session": "S-ACME-1", "ticket": "T-1001", "model": [DOCS], **extra}))
    tickets = Ticket.objects.count()
    with pytest.raises(CommandError, match=problem):
        call_command("run_scenario", str(path))
    assert not Run.objects.exists() and Ticket.objects.count() == tickets


def test_run_scenario_prices_with_the_digits_written_in_the_file(demo_committed, tmp_path):
    import json
    from io import StringIO

    from django.core.management import call_command

    # As a float this price is 1.0; as written, 100 input tokens cost 100.000000000000001 micros: 101 rounded up.
    text = (
        '{"name": "price", "session": "S-ACME-1", "ticket": "T-1001", "budget": {"prices": '
        '{"input_per_mtok_usd": 1.00000000000000001, "output_per_mtok_usd": 0}}, '
        '"model": [{"handoff": "h", "usage": {"input_tokens": 100, "output_tokens": 0}}]}'
    )
    path = tmp_path / "price.json"
    path.write_text(text)
    out = StringIO()
    call_command("run_scenario", str(path), stdout=out)
    report = json.loads(out.getvalue())
    assert (report["status"], report["cost_micros"]) == ("NEEDS_HELP", 101)
    assert Run.objects.get(pk=report["run"]).budget["input_per_mtok_usd"] == "1.00000000000000001"


@pytest.mark.parametrize("text", ['{"name": "x",', '{"name": NaN, "session": "S-ACME-1", "ticket": "T-1001"}'])
def test_run_scenario_refuses_a_file_that_is_not_json(demo_committed, tmp_path, text):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(CommandError, match="not a JSON document"):
        call_command("run_scenario", str(path))
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    "extra,where",
    [
        ({"name": "nul\u0000"}, "name"),
        ({"ticket": "T-10\u000001"}, "ticket"),
        (
            {"model": [{"call": {"tool": "search_docs", "args": {"query": "export\u0000"}}}]},
            r"model\[0\]\.call\.args\.query",
        ),
        (
            {"model": [{"draft": {"summary": "s\u0000", "evidence": [], "open_questions": []}}]},
            r"model\[0\]\.draft\.summary",
        ),
        ({"model": [{"call": {"tool": "search_docs", "args": {"qu\u0000ery": "x"}}}]}, r"model\[0\]\.call\.args\.qu"),
        ({"expect": {"status": ["COMPLETED\u0000"]}}, r"expect\.status\[0\]"),
    ],
)
def test_run_scenario_refuses_a_nul_character_anywhere_with_where_it_is(demo_committed, tmp_path, extra, where):
    import json

    from django.core.management import call_command
    from django.core.management.base import CommandError

    path = tmp_path / "nul.json"
    path.write_text(json.dumps({"name": "nul", "session": "S-ACME-1", "ticket": "T-1001", "model": [DOCS], **extra}))
    tickets = Ticket.objects.count()
    with pytest.raises(CommandError, match=f"{where}.* contains a NUL character"):
        call_command("run_scenario", str(path))
    assert not Run.objects.exists() and Ticket.objects.count() == tickets
