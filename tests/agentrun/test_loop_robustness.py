"""Model output and timing that once broke the loop: every run still ends with one status and a packet."""

from __future__ import annotations

import time

import pytest
from django.utils import timezone

from engine.budgets import Budget, BudgetError
from engine.loop import run_advance
from engine.models import Run
from engine.selectors import run_report
from engine.services import run_cancel, run_start
from engine.statuses import TERMINAL
from providers import ReplayAdapter
from scenarios.runner import run_rewind_clock
from tickets.models import CustomerSession

pytestmark = pytest.mark.usefixtures("settle")

J42 = {"call": {"tool": "read_job_status", "args": {"job_id": "J-42"}}}
DOCS = {"call": {"tool": "search_docs", "args": {"query": "export"}}}


class CancelledDuringRequest(ReplayAdapter):
    """Staff cancel the run while the model request `at` is in flight."""

    def __init__(self, script, run_id, at):
        super().__init__(script)
        self.run_id, self.at = run_id, at

    def request(self, spec):
        if spec.index == self.at:
            run_cancel(run_id=self.run_id)
        return super().request(spec)


def test_a_run_cancelled_during_a_model_request_dispatches_nothing_more(ticket_t1001):
    # services.run_cancel: "Cancel a run: at once when no operation is in flight, else before its next one."
    script = [J42, DOCS, {"handoff": "h"}]
    run = run_start(ticket=ticket_t1001, model_name="replay", model_script={"model": script})
    run = run_advance(run.pk, adapter=CancelledDuringRequest(script, run.pk, at=1))
    report = run_report(run_id=run.pk)
    assert report["status"] == "CANCELLED"
    assert [d["tool"] for d in report["dispatched"]] == ["read_job_status"]  # not search_docs after the cancel


class SlowToPrepare(ReplayAdapter):
    """A model whose request preparation (its prompt overhead) takes a while; records when requests are sent."""

    def __init__(self, script, pause):
        super().__init__(script)
        self.pause, self.sent_at = pause, []

    def input_overhead_bytes(self) -> int:
        time.sleep(self.pause)
        return 0

    def request(self, spec):
        self.sent_at.append(timezone.now())
        return super().request(spec)


def test_no_model_request_is_sent_after_the_deadline(ticket_t1001, settle):
    # CONFORMANCE §3 DEADLINE: "checked before every request and dispatch"; issue 2: nothing after the deadline
    run = run_start(
        ticket=ticket_t1001,
        model_name="replay",
        budget=Budget.from_mapping({"deadline_seconds": 45}),
        model_script={"model": [J42]},
    )
    run_rewind_clock(run_id=run.pk, elapsed_seconds=44.0)
    model = SlowToPrepare([J42], pause=1.5)
    run = run_advance(run.pk, adapter=model)
    settle()
    assert run.status == "DEADLINE"
    deadline = Run.objects.get(pk=run.pk).deadline_at
    assert all(sent < deadline for sent in model.sent_at), (model.sent_at, deadline)


def test_a_reply_reporting_negative_usage_still_ends_the_run_with_a_packet(ticket_t1001):
    # CONFORMANCE §3: "Every run ends in exactly one of these statuses; no path ends silently."
    # §2: "A crash or restart can never make a spent request ... disappear"; counters never decrease (issue 2).
    bad_usage = {
        "call": {"tool": "read_job_status", "args": {"job_id": "J-42"}},
        "usage": {"input_tokens": -100, "output_tokens": 5},
    }
    run = run_start(ticket=ticket_t1001, model_name="replay", model_script={"model": [bad_usage]})
    try:
        run_advance(run.pk)
    except Exception as exc:
        pytest.fail(f"the loop raised {exc!r} and left the run {Run.objects.get(pk=run.pk).status}")
    run.refresh_from_db()
    assert run.status in TERMINAL
    assert hasattr(run, "packet") and run.tokens_reserved == 0 and run.tokens_used >= 0


@pytest.mark.parametrize(
    "usage",
    [{"input_tokens": "500"}, {"input_tokens": 500.5}, {"output_tokens": True}, {"input_tokens": [500]}, "lots", 12],
    ids=["string", "fraction", "bool", "list", "not-an-object", "a-bare-number"],
)
@pytest.mark.parametrize("reply", [J42, {"error": "provider said 500"}], ids=["reply", "error"])
def test_reported_usage_that_is_not_a_count_is_a_model_error_charged_its_reservation(ticket_t1001, usage, reply):
    # CONFORMANCE §2: a request is reconciled to "the reported usage"; one that is not a count of tokens says
    # nothing of what was spent, so the reservation stays charged (nothing is rounded, parsed or guessed).
    run = run_start(ticket=ticket_t1001, model_name="replay", model_script={"model": [{**reply, "usage": usage}]})
    run = run_advance(run.pk)
    budget = run.get_budget()
    assert (run.status, run.detail) == ("MODEL_ERROR", "error")
    assert (run.model_requests, run.tool_attempts) == (1, 0)
    assert (run.tokens_used, run.tokens_reserved) == (budget.max_input_tokens + budget.max_output_tokens, 0)
    assert "not a count" in run.model_request_rows.get().error


J42_CALL = {"tool": "read_job_status", "args": {"job_id": "J-42"}}
DRAFT_E1 = {"summary": "s", "evidence": ["E1"], "open_questions": []}


@pytest.mark.parametrize(
    "script",
    [
        [{"call": {**J42_CALL, "id": "c" * 300}}, {"handoff": "h"}],
        [{"call": {**J42_CALL, "id": "c\x001"}}, {"handoff": "h"}],
        [{"handoff": "a person\x00 should look"}],
        [{"call": J42_CALL}, {"draft": {**DRAFT_E1, "summary": "role\x00 problem"}}],
        [{"call": J42_CALL}, {"draft": {**DRAFT_E1, "open_questions": ["when\x00?"]}}],
        [{"call": {"tool": "search_docs", "args": {"query": "exp\x00ort"}}}, {"handoff": "h"}],
        [{"call": {"tool": "delete\x00workspace", "args": {}}}],
    ],
    ids=[
        "call-id-300-chars",
        "nul-in-call-id",
        "nul-in-handoff",
        "nul-in-summary",
        "nul-in-question",
        "nul-in-query",
        "nul-in-tool-name",
    ],
)
def test_model_output_the_database_cannot_store_does_not_crash_the_loop(ticket_t1001, script):
    # Fails on PostgreSQL only (varchar(200) call ids; text and jsonb refuse NUL); SQLite stores these.
    # CONFORMANCE §3: "Every run ends in exactly one of these statuses; no path ends silently."
    run = run_start(ticket=ticket_t1001, model_name="replay", model_script={"model": []})
    try:
        run_advance(run.pk, adapter=ReplayAdapter(script))
    except Exception as exc:
        pytest.fail(f"the loop raised {exc!r} and left the run {Run.objects.get(pk=run.pk).status}")
    run.refresh_from_db()
    assert run.status in TERMINAL and hasattr(run, "packet")


def test_a_huge_reported_usage_is_a_usage_overrun_counted_as_reported(ticket_t1001):
    # Fails on PostgreSQL (ModelRequest.input_tokens is a 32-bit integer); passes on SQLite.
    # CONFORMANCE §2: usage over the caps is usage_overrun, "counted as reported, even when over the caps".
    huge = {"call": {"tool": "read_job_status", "args": {"job_id": "J-42"}}, "usage": {"input_tokens": 3_000_000_000}}
    run = run_start(ticket=ticket_t1001, model_name="replay", model_script={"model": [huge]})
    try:
        run_advance(run.pk)
    except Exception as exc:
        pytest.fail(f"the loop raised {exc!r} and left the run {Run.objects.get(pk=run.pk).status}")
    run.refresh_from_db()
    assert (run.status, run.detail, run.tokens_used) == ("MODEL_ERROR", "usage_overrun", 3_000_000_000)


def advance_without_crashing(run: Run, script) -> Run:
    try:
        run_advance(run.pk, adapter=ReplayAdapter(script))
    except Exception as exc:  # the point of the test
        pytest.fail(f"the loop raised {exc!r} and left the run {Run.objects.get(pk=run.pk).status}")
    run.refresh_from_db()
    return run


def test_a_reported_usage_beyond_64_bits_is_a_usage_overrun_not_a_crash(ticket_t1001):
    # CONFORMANCE §2/§3: usage above the caps is MODEL_ERROR / usage_overrun; "no path ends silently".
    # Actual: OverflowError (SQLite) / DataError "bigint out of range" (PostgreSQL); the run stays RUNNING.
    run = run_start(ticket=ticket_t1001, model_name="replay", model_script={"model": []})
    run = advance_without_crashing(run, [{**J42, "usage": {"input_tokens": 10**20}}])
    assert (run.status, run.detail) == ("MODEL_ERROR", "usage_overrun")
    assert hasattr(run, "packet")


@pytest.mark.parametrize(
    "mapping",
    [
        {"max_input_tokens": 10**19, "max_total_tokens": 3 * 10**19},
        {"max_output_tokens": 10**19, "max_total_tokens": 3 * 10**19},
        {"deadline_seconds": 10**12},
    ],
    ids=["input-cap-beyond-64-bits", "output-cap-beyond-64-bits", "deadline-beyond-the-calendar"],
)
def test_a_budget_that_cannot_be_used_is_refused_clearly_or_works(ticket_t1001, mapping):
    # Budget.from_mapping "raises BudgetError with every problem named"; it accepts these, then
    # run_start raises OverflowError (deadline) or the first reservation crashes the loop (caps).
    try:
        budget = Budget.from_mapping(mapping)
    except BudgetError:
        return
    try:
        run = run_start(ticket=ticket_t1001, model_name="replay", budget=budget, model_script={"model": []})
    except Exception as exc:
        pytest.fail(f"Budget.from_mapping accepted {mapping} but run_start raised {exc!r}")
    run = advance_without_crashing(run, [J42, {"handoff": "h"}])
    assert run.status in TERMINAL


class SessionUnverifiedDuringRequest(ReplayAdapter):
    """The customer's session loses its verification while the model request `at` is in flight."""

    def __init__(self, script, session_id, at):
        super().__init__(script)
        self.session_id, self.at = session_id, at

    def request(self, spec):
        if spec.index == self.at:
            CustomerSession.objects.filter(pk=self.session_id).update(verified=False)
        return super().request(spec)


def test_a_step_judges_a_call_against_the_session_as_it_is_now(ticket_t1001):
    """Each step takes up the run as the previous one wrote it, but reads its session again."""
    assert ticket_t1001.session.verified
    script = [DOCS, J42, {"handoff": "h"}]
    run = run_start(ticket=ticket_t1001, model_name="replay", model_script={"model": script})
    run = run_advance(run.pk, adapter=SessionUnverifiedDuringRequest(script, ticket_t1001.session_id, at=1))
    report = run_report(run_id=run.pk)
    assert [d["tool"] for d in report["dispatched"]] == ["search_docs"]  # the job read was never dispatched
    assert report["status"] == "INVALID_OR_FORBIDDEN"
