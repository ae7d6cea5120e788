"""Property-based test of the loop's invariants over random replies, faults and small budgets (issue 2).

For any script of replies (calls good and bad, drafts good and bad, raw text,
errors, handoffs, several calls at once, small delays), any faults and any
small budget, driven through the production loop with spies built from plain
classes around the replay model and the dispatcher:

* counters never exceed their budgets and never decrease;
* nothing is requested or dispatched after the deadline or beyond the budget,
  and every request and dispatch made is counted;
* the run ends in exactly one terminal status with exactly one review packet
  whose stop reason is that status, with nothing left reserved.
"""

from __future__ import annotations

import threading
import uuid
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from engine.budgets import Budget
from engine.loop import run_advance
from engine.models import ModelRequest, ReviewPacket, Run, ToolAttempt
from engine.services import approval_answer, run_start
from engine.statuses import TERMINAL, Status
from providers import ReplayAdapter
from scenarios.harness import FaultyDispatcher
from scenarios.runner import run_rewind_clock
from tickets.models import CustomerSession, Evidence, Ticket
from tools.lookups import UNBOUNDED

pytestmark = pytest.mark.usefixtures("settle")

COUNTERS = ("model_requests", "tool_attempts", "validation_errors", "tokens_used", "cost_used_micros")

# --- replies ------------------------------------------------------------------------------------

job_args = st.fixed_dictionaries({"job_id": st.sampled_from(["J-42", " j-42 ", "J-41", "J-77", "J-999", "bad", 42])})
docs_args = st.fixed_dictionaries(
    {"query": st.sampled_from(["export", " EXPORT ", "role editor", "", "zebra"])},
    optional={"max_results": st.sampled_from([1, 3, 9, 0, True, 3.0])},
)
service_args = st.fixed_dictionaries({"service": st.sampled_from(["export", "Billing", "nope"])})
extra_args = st.fixed_dictionaries({"service": st.just("api"), "verbose": st.just(True)})

one_call = st.one_of(
    st.builds(lambda a: {"tool": "read_job_status", "args": a}, job_args),
    st.builds(lambda a: {"tool": "search_docs", "args": a}, docs_args),
    st.builds(lambda a: {"tool": "read_service_status", "args": a}, st.one_of(service_args, extra_args)),
    st.just({"tool": "delete_workspace", "args": {}}),
    st.just({"tool": "read_job_status"}),  # no args: malformed
).flatmap(lambda c: st.sampled_from([None, "c1", "c2"]).map(lambda i: c if i is None else {**c, "id": i}))

draft = st.builds(
    lambda summary, refs, questions: {"draft": {"summary": summary, "evidence": refs, "open_questions": questions}},
    st.sampled_from(["Found it [E1].", "ok", "  "]),
    st.sampled_from([["E1"], ["E1", "E2"], ["E2", "E1", "E2"], [], ["E3"], ["E1", 2]]),
    st.sampled_from([[], ["why?"]]),
)

reply_body = st.one_of(
    one_call.map(lambda c: {"call": c}),
    draft,
    one_call.map(lambda c: {"call": c}),
    one_call.map(lambda c: {"calls": [c]}),
    st.lists(one_call, min_size=2, max_size=3).map(lambda cs: {"calls": cs}),
    draft,
    st.just({"handoff": "a person should look"}),
    one_call.map(lambda c: {"call": c}),
    st.just({"raw": "the export failed because of the role"}),
    st.just({"calls": []}),
    st.builds(
        lambda u: {"error": "provider said 500", **u},
        st.sampled_from([{}, {"usage": {"input_tokens": 40, "output_tokens": 3}}]),
    ),
)

reply = st.builds(
    lambda body, delay, usage: {**body, **delay, **usage},
    reply_body,
    st.sampled_from([{}] * 8 + [{"delay_seconds": 0.05}, {"delay_seconds": 0.4}]),
    st.sampled_from(
        [{}] * 10
        + [
            {"usage": {"input_tokens": 1200, "output_tokens": 60}},
            {"usage": {"input_tokens": 9000}},
            {"usage": {"output_tokens": 10}},
        ]
    ),
)

fault = st.sampled_from(
    [None, None, {"fail": "transient"}, {"fail": "error"}, {"delay_seconds": 0.05}, {"delay_seconds": 0.4}]
)
faults = st.fixed_dictionaries(
    {},
    optional={tool: st.lists(fault, max_size=4) for tool in ("read_job_status", "search_docs", "read_service_status")},
)


FINAL_DRAFT = {"draft": {"summary": "Done [E1].", "evidence": ["E1"], "open_questions": []}}


@st.composite
def case(draw) -> dict[str, Any]:
    max_model_requests = draw(st.sampled_from([5, 6, 4, 5, 6, 3, 2, 1, 0]))
    max_tool_attempts = draw(st.sampled_from([3, 4, 3, 4, 2, 1, 0]))
    budget = {
        "max_model_requests": max_model_requests,
        "max_tool_attempts": max_tool_attempts,
        "max_read_retries": draw(st.sampled_from([1, 0, 2])),
        "max_total_tokens": draw(st.sampled_from([60000] * 6 + [20000, 12000, 9000, 0])),
        "max_cost_micros": draw(st.sampled_from([500000] * 6 + [90000, 45000, 0])),
        "operation_timeout_seconds": draw(st.sampled_from([10, 0.25])),
        "max_tool_result_chars": draw(st.sampled_from([4000, 40])),
        "prices": draw(st.sampled_from([{}, {"input_per_mtok_usd": "3", "output_per_mtok_usd": "15"}])),
    }
    return {
        "budget": budget,
        "start": {
            "model_requests": min(draw(st.sampled_from([0, 0, 0, 1, 2])), max_model_requests),
            "tool_attempts": min(draw(st.sampled_from([0, 0, 0, 1, 2])), max_tool_attempts),
            "tokens_used": draw(st.sampled_from([0, 0, 3000])),
        },
        "elapsed": draw(st.sampled_from([0, 0, 0, 0, 44.6, 44.85])),
        "session": draw(st.sampled_from(["S-ACME-1", "S-ACME-1", "S-ACME-ANON"])),
        "model": draw(st.lists(reply, min_size=1, max_size=7)) + draw(st.sampled_from([[], [FINAL_DRAFT]])),
        "faults": draw(faults),
        "require_approval": draw(st.sampled_from([[], [], ["read_service_status"], ["search_docs"]])),
        "answers": draw(st.lists(st.booleans(), min_size=6, max_size=6)),
    }


# --- spies -------------------------------------------------------------------------------------------


class Watch:
    """What another connection sees committed at the moment each operation starts."""

    def __init__(self, run_id: int):
        self.run_id = run_id
        self.seen: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def look(self, kind: str) -> None:
        run = Run.objects.get(pk=self.run_id)
        pending_requests = list(run.model_request_rows.filter(outcome=ModelRequest.Outcome.PENDING))
        pending_attempts = list(run.attempts.filter(outcome=ToolAttempt.Outcome.PENDING))
        with self.lock:
            self.seen.append(
                {
                    "kind": kind,
                    "status": run.status,
                    "deadline_at": run.deadline_at,
                    "pending": pending_requests if kind == "model" else pending_attempts,
                    **{name: getattr(run, name) for name in COUNTERS},
                }
            )


class SpyModel(ReplayAdapter):
    def __init__(self, script, watch: Watch):
        super().__init__(script)
        self.watch = watch

    def request(self, spec):
        self.watch.look("model")
        return super().request(spec)


class SpyDispatcher(FaultyDispatcher):
    def __init__(self, watch: Watch, **kwargs):
        super().__init__(**kwargs)
        self.watch = watch

    def dispatch(self, tool, scope, args, index, lookup=UNBOUNDED):
        self.watch.look("dispatch")
        return super().dispatch(tool, scope, args, index, lookup)


# --- the property -----------------------------------------------------------------------------------


def play_case(c: dict[str, Any]) -> tuple[Run, Watch]:
    original = Ticket.objects.get(ref="T-1001")
    ticket = Ticket.objects.create(
        ref=f"T-P-{uuid.uuid4().hex[:10]}",
        account=original.account,
        session=original.session,
        subject=original.subject,
        body=original.body,
    )
    run = run_start(
        ticket=ticket,
        session=CustomerSession.objects.get(ref=c["session"]),
        model_name="replay",
        budget=Budget.from_mapping(c["budget"]),
        model_script={"model": c["model"], "faults": c["faults"]},
        require_approval=c["require_approval"],
        resume_from=c["start"],
    )
    run_rewind_clock(run_id=run.pk, elapsed_seconds=c["elapsed"])
    watch = Watch(run.pk)
    model, tools = SpyModel(c["model"], watch), SpyDispatcher(watch, faults=c["faults"])
    run = run_advance(run.pk, adapter=model, dispatcher=tools)
    for grant in c["answers"]:
        if run.status != Status.WAITING_APPROVAL:
            break
        approval_answer(run_id=run.pk, grant=grant, decided_by="property", resume=False)
        run = run_advance(run.pk, adapter=model, dispatcher=tools)
    return run, watch


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(c=case())
def test_loop_invariants_hold_for_any_replies_faults_and_budget(demo_committed, settle, c):
    run, watch = play_case(c)
    settle()  # operations the loop stopped waiting for finish too: their spies report late, never unseen
    run.refresh_from_db()
    event(f"{run.status} {run.detail}".strip())
    budget, start = c["budget"], c["start"]

    # exactly one terminal status, one packet that names it, nothing left reserved
    if run.status == Status.WAITING_APPROVAL:  # only if every answer was a grant that led to another wait
        assert all(c["answers"])
    else:
        assert run.status in TERMINAL
        packets = ReviewPacket.objects.filter(run=run)
        assert packets.count() == 1 and packets.get().stop_reason == run.status
        assert (run.tokens_reserved, run.cost_reserved_micros) == (0, 0)
        assert bool(run.detail) == (run.status in (Status.INVALID_OR_FORBIDDEN, Status.MODEL_ERROR))
        if run.status != Status.COMPLETED:
            assert packets.get().summary is None

    # counters within budgets; every request and dispatch made was counted
    assert run.model_requests <= budget["max_model_requests"]
    assert run.tool_attempts <= budget["max_tool_attempts"]
    requests_made = [s for s in watch.seen if s["kind"] == "model"]
    dispatches_made = [s for s in watch.seen if s["kind"] == "dispatch"]
    assert run.model_requests == start["model_requests"] + len(requests_made)
    assert run.tool_attempts == start["tool_attempts"] + len(dispatches_made)
    assert run.model_request_rows.count() == len(requests_made)
    assert run.attempts.count() == len(dispatches_made)

    # each operation was reserved and committed before it started, before the deadline, within the budget
    for seen in watch.seen:
        if seen["status"] == Status.RUNNING:  # else a spy looked late, after the wait for it was over
            assert len(seen["pending"]) == 1
            assert seen["pending"][0].started_at < seen["deadline_at"]
        else:
            assert seen["status"] in TERMINAL
        assert seen["model_requests"] <= budget["max_model_requests"]
        assert seen["tool_attempts"] <= budget["max_tool_attempts"]
    assert all(a.started_at < run.deadline_at for a in run.attempts.all())
    assert all(r.started_at < run.deadline_at for r in run.model_request_rows.all())

    # counters never decrease
    history = (
        [{name: start.get(name, 0) for name in COUNTERS}]
        + watch.seen
        + [{name: getattr(run, name) for name in COUNTERS}]
    )
    for before, after in pairwise(history):
        for name in COUNTERS:
            assert after[name] >= before[name], (name, before, after)

    # every evidence reference the run names exists on its ticket
    refs = {e.ref for e in Evidence.objects.filter(ticket_id=run.ticket_id)}
    assert set(run.evidence_refs) <= refs
