"""Settling what an operation spent and returned, and ending a run: the money and the evidence.

A model request is reserved before it is made (engine.steps); when it
answers, or nobody knows what it did (a crash, the deadline), its reservation
is settled here into what it is charged. A dispatch's outcome becomes the
attempt's outcome, and a successful result becomes evidence. A run that ends
gets everything still reserved charged, exactly one status and its packet.
All of it runs inside a step's transaction, holding the run's row lock.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any, TypeGuard

from engine import metrics
from engine.budgets import COUNT_LIMIT, cost_micros
from engine.decisions import Draft
from engine.models import Approval, ModelRequest, Observation, Run, ToolAttempt
from engine.operations import OpResult
from engine.packets import packet_write
from engine.sql import StepWrites
from engine.statuses import Detail, Status, Stop
from engine.waiting import Raised, TimedOut
from providers.base import ModelError, ModelResponse
from tickets.selectors import Forbidden
from tickets.services import evidence_record
from tools.base import canonical_json, storable
from tools.registry import ApprovalRequired, ToolError, ToolResult

log = logging.getLogger("agentrun")


# --- model requests -----------------------------------------------------------------


def request_charge(
    *, run: Run, request: ModelRequest, input_tokens: int = 0, output_tokens: int = 0, whole_reservation: bool = False
) -> None:
    """Reconcile a request's reservation with what it is charged."""
    if whole_reservation:
        tokens, cost = request.reserved_tokens, request.reserved_cost_micros
    else:
        # Counted as reported, up to a ceiling far above any cap (a larger report is an overrun anyway).
        input_tokens, output_tokens = min(input_tokens, COUNT_LIMIT), min(output_tokens, COUNT_LIMIT)
        tokens, cost = input_tokens + output_tokens, cost_micros(run.get_budget(), input_tokens, output_tokens)
        request.input_tokens, request.output_tokens = input_tokens, output_tokens
    request.charged_tokens, request.charged_cost_micros = tokens, cost
    run.tokens_reserved -= request.reserved_tokens
    run.cost_reserved_micros -= request.reserved_cost_micros
    run.tokens_used += tokens
    run.cost_used_micros += cost


def request_settle(*, run: Run, request: ModelRequest, result: OpResult, now: datetime) -> Stop | None:
    """Charge the request; the stop it causes, if any (a failure, an overrun, the deadline)."""
    late = run.time_left(now) <= 0
    outcome = result.result
    if isinstance(outcome, TimedOut) or (isinstance(outcome, Raised) and getattr(outcome.error, "timeout", False)):
        request_charge(run=run, request=request, whole_reservation=True)
        if result.by_deadline or late:
            request.outcome = ModelRequest.Outcome.DEADLINE
            return Stop(Status.DEADLINE, note="the deadline cut the model request short")
        request.outcome = ModelRequest.Outcome.TIMEOUT
        return Stop(Status.MODEL_ERROR, Detail.TIMEOUT, "the model request took longer than the operation timeout")
    if isinstance(outcome, Raised):
        return _request_failed(run, request, outcome.error, late)
    response: ModelResponse = outcome.value
    budget = run.get_budget()
    if not _is_count(response.usage.input_tokens) or not _is_count(response.usage.output_tokens):
        request_charge(run=run, request=request, whole_reservation=True)
        request.outcome, request.error = ModelRequest.Outcome.ERROR, "the reply's reported usage is not a count"
        return Stop(Status.DEADLINE) if late else Stop(Status.MODEL_ERROR, Detail.ERROR, request.error)
    request_charge(
        run=run, request=request, input_tokens=response.usage.input_tokens, output_tokens=response.usage.output_tokens
    )
    if late:
        request.outcome = ModelRequest.Outcome.DEADLINE
        return Stop(Status.DEADLINE, note="the reply came after the deadline")
    if response.usage.input_tokens > budget.max_input_tokens or response.usage.output_tokens > budget.max_output_tokens:
        request.outcome = ModelRequest.Outcome.USAGE_OVERRUN
        return Stop(Status.MODEL_ERROR, Detail.USAGE_OVERRUN, "reported usage above the request's caps")
    return None


def _request_failed(run: Run, request: ModelRequest, error: BaseException, late: bool) -> Stop:
    request.outcome = ModelRequest.Outcome.ERROR
    if isinstance(error, ModelError) and _is_count(error.usage.input_tokens) and _is_count(error.usage.output_tokens):
        request_charge(
            run=run, request=request, input_tokens=error.usage.input_tokens, output_tokens=error.usage.output_tokens
        )
        request.error = storable(str(error))[:2000]
    else:  # nobody knows what was spent: the whole reservation stays charged
        request_charge(run=run, request=request, whole_reservation=True)
        if isinstance(error, ModelError):
            request.error = storable(f"{error} (its reported usage is not a count)")[:2000]
        else:  # an adapter bug
            request.error = f"{type(error).__name__} in the model adapter"
            log.error("run %s: model adapter raised %s", run.pk, type(error).__name__)
    if late:
        return Stop(Status.DEADLINE)
    return Stop(Status.MODEL_ERROR, Detail.ERROR, request.error)


def _is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def requests_settle_unanswered(*, run: Run, outcome: str, now: datetime) -> None:
    """Settle the run's pending requests, whose answer nobody will record (a crash, the deadline):
    each is charged its whole reservation, as nobody knows what it spent."""
    for request in run.model_request_rows.filter(outcome=ModelRequest.Outcome.PENDING):
        request_charge(run=run, request=request, whole_reservation=True)
        request.outcome, request.finished_at = outcome, now
        request.save()
        metrics.model_request_settled(
            model=run.model_name, outcome=request.outcome, latency_ms=None, purpose=run.purpose
        )


# --- dispatches -------------------------------------------------------------------------


def attempt_settle(*, run: Run, attempt: ToolAttempt, result: OpResult) -> None:
    """The attempt's outcome (and error) from what the dispatch returned; a result becomes evidence."""
    outcome = result.result
    if isinstance(outcome, TimedOut):
        attempt.outcome = ToolAttempt.Outcome.TIMEOUT
    elif isinstance(outcome, Raised):
        transient = isinstance(outcome.error, ToolError) and outcome.error.transient
        attempt.outcome = ToolAttempt.Outcome.TRANSIENT_ERROR if transient else ToolAttempt.Outcome.ERROR
        attempt.error = _tool_error_text(outcome.error)
    else:
        _evidence_record(run, attempt, outcome.value)


def _tool_error_text(error: BaseException) -> str:
    if isinstance(error, (ToolError, Forbidden)):
        return str(error)[:500]
    if isinstance(error, ApprovalRequired):
        return f"{error}: the call needs a supervisor's approval; the reply was not kept"[:500]
    log.error("tool backend raised %s", type(error).__name__)
    return f"{type(error).__name__} in the tool backend"


def _evidence_record(run: Run, attempt: ToolAttempt, result: ToolResult) -> None:
    """A successful result becomes evidence (or reuses the identical one)."""
    limit = run.get_budget().max_tool_result_chars
    text = canonical_json(result.content)
    truncated = len(text) > limit
    if truncated:
        text = text[:limit]
    evidence = evidence_record(
        ticket_id=run.ticket_id,
        tool=attempt.tool,
        args=attempt.args,
        args_key=attempt.call_key,
        content=text,
        source_ref=result.source_ref,
        truncated=truncated,
        run_id=run.pk,
    )
    attempt.outcome, attempt.evidence, attempt.result_excerpt = ToolAttempt.Outcome.OK, evidence, text[:500]
    if evidence.ref not in run.evidence_refs:
        run.evidence_refs = [*run.evidence_refs, evidence.ref]


def attempts_settle_interrupted(*, run: Run, now: datetime) -> None:
    """A run found RUNNING by `run_begin` was cut off: its pending attempts are interrupted, still counted."""
    for attempt in run.attempts.filter(outcome=ToolAttempt.Outcome.PENDING):
        attempt.outcome, attempt.finished_at = ToolAttempt.Outcome.INTERRUPTED, now
        attempt.save()
        metrics.dispatch_settled(tool=attempt.tool, outcome=attempt.outcome, latency_ms=None, purpose=run.purpose)
        Observation.objects.create(
            run=run,
            kind=Observation.Kind.INTERRUPTED,
            text=f"The {attempt.tool} call was interrupted and its result is unknown. It counts as the last call"
            " made: proposing it again next ends the run (no progress).",
        )


# --- ending --------------------------------------------------------------------------------


def run_stop(
    *,
    run: Run,
    stop: Stop,
    now: datetime,
    writes: StepWrites,
    draft: Draft | None = None,
    refused: dict[str, Any] | None = None,
) -> None:
    """End the locked run with exactly one status and write its review packet; whatever is still
    reserved was spent, as far as anyone knows. Always None: the step reserves nothing after it."""
    run.status, run.detail, run.stop_note, run.ended_at = stop.status, stop.detail or "", stop.note, now
    run.tokens_used += run.tokens_reserved
    run.cost_used_micros += run.cost_reserved_micros
    run.tokens_reserved = run.cost_reserved_micros = 0
    run.pending_call = None
    metrics.run_ended(
        status=stop.status,
        model=run.model_name,
        seconds=(now - run.created_at).total_seconds(),
        tokens=run.tokens_used,
        cost_micros=run.cost_used_micros,
        purpose=run.purpose,
    )
    packet_write(run=run, stop=stop, draft=draft, now=now, writes=writes, refused=refused)
    # Approvals still open when a run ends can no longer be used.
    writes.update(
        Approval,
        {"run_id": run.pk, "state": [Approval.State.PENDING, Approval.State.GRANTED]},
        state=Approval.State.EXPIRED,
    )
    return None
