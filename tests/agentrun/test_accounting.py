"""Tokens and cost by reserve-then-reconcile, reservations committed before the operation, resumed counters."""

from __future__ import annotations

import pytest

from engine.budgets import Budget
from engine.loop import run_advance
from engine.models import ModelRequest, Run, ToolAttempt
from engine.selectors import run_report
from engine.services import run_start
from providers import ReplayAdapter
from tools.dispatch import Dispatcher
from tools.lookups import UNBOUNDED

pytestmark = pytest.mark.usefixtures("settle")

J42 = {"call": {"tool": "read_job_status", "args": {"job_id": "J-42"}}}
DOCS = {"call": {"tool": "search_docs", "args": {"query": "export"}}}
RAW = {"raw": "not a decision"}
HANDOFF = {"handoff": "h"}
PRICES = {"input_per_mtok_usd": 3.0, "output_per_mtok_usd": 15.0}


def draft(*refs):
    return {"draft": {"summary": "s", "evidence": list(refs), "open_questions": []}}


def charged(report):
    return list(
        ModelRequest.objects.filter(run_id=report["run"]).order_by("seq").values_list("charged_tokens", flat=True)
    )


def test_each_reply_is_charged_its_default_usage(play):
    report = play([J42, RAW, draft("E1")])
    assert report["tokens"] == {"reserved": 0, "used": 3 * 550}
    assert charged(report) == [550, 550, 550]


def test_reported_usage_is_what_is_charged(play):
    report = play([{**J42, "usage": {"input_tokens": 900, "output_tokens": 120}}, draft("E1")])
    assert report["tokens"]["used"] == 1020 + 550


def test_a_side_missing_from_usage_counts_zero(play):
    report = play([{**J42, "usage": {"output_tokens": 7}}, {**draft("E1"), "usage": {"input_tokens": 11}}])
    assert report["tokens"]["used"] == 18


def test_an_error_is_charged_what_it_reported(play):
    report = play([{"error": "500", "usage": {"input_tokens": 100, "output_tokens": 7}}])
    assert (report["status"], report["tokens"]["used"]) == ("MODEL_ERROR", 107)


def test_an_error_that_reported_nothing_is_charged_nothing(play):
    report = play([J42, {"error": "500"}])
    assert report["tokens"]["used"] == 550
    assert charged(report) == [550, 0]


def test_a_timed_out_request_is_charged_its_whole_reservation(play):
    budget = {"operation_timeout_seconds": 0.2, "max_input_tokens": 2000, "max_output_tokens": 100, "prices": PRICES}
    report = play([{**J42, "delay_seconds": 0.8, "usage": {"input_tokens": 1, "output_tokens": 1}}], budget=budget)
    assert (report["status"], report["detail"]) == ("MODEL_ERROR", "timeout")
    assert report["tokens"] == {"reserved": 0, "used": 2100}
    assert report["cost_micros"] == 2000 * 3 + 100 * 15


def test_a_request_cut_by_the_deadline_is_charged_its_whole_reservation(play):
    report = play(
        [{**J42, "delay_seconds": 2.0}],
        budget={"deadline_seconds": 45, "prices": PRICES},
        start={"elapsed_seconds": 44.0},
    )
    assert report["status"] == "DEADLINE"
    assert (report["tokens"]["used"], report["cost_micros"]) == (9000, 39000)


def test_usage_over_the_caps_is_still_counted_as_reported(play):
    report = play([{**J42, "usage": {"input_tokens": 12000, "output_tokens": 3000}}], budget={"prices": PRICES})
    assert (report["status"], report["detail"]) == ("MODEL_ERROR", "usage_overrun")
    assert (report["tokens"]["used"], report["cost_micros"]) == (15000, 12000 * 3 + 3000 * 15)


def test_cost_is_priced_from_the_reported_usage(play):
    report = play(
        [{**J42, "usage": {"input_tokens": 900, "output_tokens": 120}}, draft("E1")], budget={"prices": PRICES}
    )
    assert report["cost_micros"] == (900 * 3 + 120 * 15) + (500 * 3 + 50 * 15)


def test_cost_is_rounded_up_per_request(play):
    # 500 * 0.0001 = 0.05 micros a request: 1 each once rounded up, not 1 for the run
    prices = {"input_per_mtok_usd": "0.0001", "output_per_mtok_usd": "0"}
    report = play([RAW, RAW, HANDOFF], budget={"prices": prices})
    assert report["cost_micros"] == 3


def test_decimal_prices_are_exact(play):
    prices = {"input_per_mtok_usd": 0.1, "output_per_mtok_usd": 0.2}  # 500*0.1 + 50*0.2 = 60 exactly
    report = play([RAW, HANDOFF], budget={"prices": prices})
    assert report["cost_micros"] == 120


def test_a_free_model_costs_nothing(play):
    assert play([J42, draft("E1")])["cost_micros"] == 0


# --- reserve, commit, then act -------------------------------------------------------------------


def committed(run_id):
    run = Run.objects.get(pk=run_id)
    return {
        "status": run.status,
        "model_requests": run.model_requests,
        "tool_attempts": run.tool_attempts,
        "tokens_reserved": run.tokens_reserved,
        "cost_reserved": run.cost_reserved_micros,
        "pending_requests": run.model_request_rows.filter(outcome=ModelRequest.Outcome.PENDING).count(),
        "pending_attempts": run.attempts.filter(outcome=ToolAttempt.Outcome.PENDING).count(),
    }


class SpyModel(ReplayAdapter):
    def __init__(self, script, run_id):
        super().__init__(script)
        self.run_id, self.seen = run_id, []

    def request(self, spec):
        self.seen.append(committed(self.run_id))  # what another connection sees while the request is made
        return super().request(spec)


class SpyDispatcher(Dispatcher):
    def __init__(self, run_id, **kwargs):
        super().__init__(**kwargs)
        self.run_id, self.seen = run_id, []

    def dispatch(self, tool, scope, args, index, lookup=UNBOUNDED):
        self.seen.append(committed(self.run_id))
        return super().dispatch(tool, scope, args, index, lookup)


def test_reservations_are_committed_before_the_request_and_the_dispatch(ticket_t1001):
    script = [J42, DOCS, draft("E1")]
    run = run_start(
        ticket=ticket_t1001,
        model_name="replay",
        budget=Budget.from_mapping({"prices": PRICES}),
        model_script={"model": script},
        resume_from={"model_requests": 1, "tool_attempts": 2},
    )
    model, tools = SpyModel(script, run.pk), SpyDispatcher(run.pk)
    run = run_advance(run.pk, adapter=model, dispatcher=tools)
    assert run.status == "COMPLETED"
    assert [s["model_requests"] for s in model.seen] == [2, 3, 4]
    assert all(s["tokens_reserved"] == 9000 and s["cost_reserved"] == 39000 for s in model.seen)
    assert all(s["pending_requests"] == 1 and s["status"] == "RUNNING" for s in model.seen)
    assert [s["tool_attempts"] for s in tools.seen] == [3, 4]
    assert all(s["pending_attempts"] == 1 and s["tokens_reserved"] == 0 for s in tools.seen)
    assert (run.model_requests, run.tool_attempts, run.tokens_reserved, run.cost_reserved_micros) == (4, 4, 0, 0)


# --- resumed runs ---------------------------------------------------------------------------------


def test_a_resumed_run_adds_to_its_counters(play):
    report = play(
        [J42, draft("E1")], start={"model_requests": 3, "tool_attempts": 2, "tokens_used": 1000, "cost_micros": 5}
    )
    assert report["status"] == "COMPLETED"
    assert (report["model_requests"], report["tool_attempts"]) == (5, 3)
    assert (report["tokens"]["used"], report["cost_micros"]) == (1000 + 1100, 5)
    assert report["packet"]["budget_spent"]["model_requests"] == [5, 8]
    assert report["packet"]["budget_spent"]["tool_attempts"] == [3, 6]


def test_a_resumed_run_keeps_its_original_deadline(play):
    report = play([J42, draft("E1")], budget={"deadline_seconds": 45}, start={"elapsed_seconds": 30})
    run = Run.objects.get(pk=report["run"])
    assert (run.deadline_at - run.created_at).total_seconds() == pytest.approx(45)
    assert run.created_at < run.started_at


def test_a_resumed_scenario_has_no_earlier_executed_call(play):
    report = play([J42, draft("E1")], start={"model_requests": 1, "tool_attempts": 1})
    assert (report["status"], report["evidence"]) == ("COMPLETED", ["E1"])


def test_advancing_a_finished_run_again_changes_nothing(play):
    report = play([J42, draft("E1")])
    before = run_report(run_id=report["run"])
    run_advance(report["run"])
    after = run_report(run_id=report["run"])
    for key in ("status", "model_requests", "tool_attempts", "tokens", "cost_micros", "dispatched", "evidence"):
        assert after[key] == before[key]


# --- budgets come from configuration and the run record ------------------------------------------------


def test_a_new_run_takes_its_budget_from_settings(ticket_t1001, settings):
    from engine.services import investigation_start

    settings.AGENT_BUDGET_DEFAULTS = {"max_tool_attempts": 1}
    run = investigation_start(ticket=ticket_t1001)
    run.refresh_from_db()
    assert run.budget["max_tool_attempts"] == 1
    assert (run.status, run.tool_attempts) == ("TOOL_LIMIT", 1)  # the rules model wanted a second lookup


def test_a_started_run_keeps_the_budget_it_was_started_with(ticket_t1001, settings):
    run = run_start(ticket=ticket_t1001, model_name="rules")
    settings.AGENT_BUDGET_DEFAULTS = {"max_tool_attempts": 0, "max_model_requests": 0}
    run = run_advance(run.pk)
    assert (run.status, run.tool_attempts, run.budget["max_tool_attempts"]) == ("COMPLETED", 2, 6)


def test_approval_required_by_settings_makes_the_run_wait(ticket_t1001, settings):
    settings.AGENT_REQUIRE_APPROVAL = ["search_docs"]
    run = run_advance(run_start(ticket=ticket_t1001, model_name="rules").pk)
    assert run.status == "WAITING_APPROVAL"
    assert run.pending_call["tool"] == "search_docs"
    assert run.tool_attempts == 1
