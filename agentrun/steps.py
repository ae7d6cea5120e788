"""The steps of a run: every write to a run's status and counters is here.

The loop alternates between these transactions and slow I/O. Each step is one
short transaction that, holding the run's row lock, records what the previous
operation returned, decides what happens next, and *reserves* the next
operation (the request or attempt row and its counters) before it commits. The
operation itself starts only after the commit, so a crash can never lose a
spend: at most 2 commits per model-request-plus-dispatch cycle. A step's
writes are held and sent together just before it commits (one statement on
PostgreSQL, see supportagent.rows.writes_together).

Ownership: a worker drives a run under a lease (`lease_owner`,
`lease_expires_at`), taken in `run_begin` and renewed by every step. Each step
names the owner and the run version it read; a write from anyone else, or
from a stale version, is refused and recorded as a discarded late result.
"""
from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, assert_never

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from supportagent.rows import column, execute_later, row_insert_later, row_update_later, table, writes_together
from tickets.selectors import Forbidden, SessionScope, evidence_refs_for_ticket, job_refusal_reason
from tickets.services import evidence_record

from . import metrics
from .adapters.base import ModelError, ModelResponse
from .approvals import approval_notify_later, approval_reason
from .budgets import COUNT_LIMIT, Budget, allowances, check_before_request, cost_micros, tool_attempts_left
from .decisions import (
    AwaitApproval,
    Call,
    CallFacts,
    Dispatch,
    Draft,
    DraftProposal,
    Handoff,
    Malformed,
    MultipleCalls,
    NormalizedCall,
    ReuseReceipt,
    judge_call,
    normalize_call,
    parse_reply,
    validate_draft,
)
from .models import Approval, ModelRequest, Observation, Run, ToolAttempt
from .operations import DispatchOp, ModelOp, Next, Operation, OpResult, Tally
from .packets import packet_write
from .refusals import refusal_of_call, refusal_of_calls, refusal_of_dispatch
from .selectors import run_get_locked, run_relock
from .schemas import canonical_json, storable
from .statuses import Detail, Status, Stop
from .tools import TOOLS, ApprovalRequired, ToolError, ToolResult
from .waiting import Finished, Raised, TimedOut

log = logging.getLogger("agentrun")

STEP_FIELDS = [
    "status", "detail", "stop_note", "model_requests", "tool_attempts", "validation_errors",
    "tokens_reserved", "tokens_used", "cost_reserved_micros", "cost_used_micros", "last_executed_key",
    "pending_call", "evidence_refs", "started_at", "ended_at", "version", "lease_owner", "lease_expires_at",
]


def lease_seconds(budget: Budget) -> float:
    """A lease outlives the longest wait of one operation, so a live worker renews it in time."""
    return budget.operation_timeout_seconds + settings.AGENT_LEASE_MARGIN_SECONDS


# --- the steps ------------------------------------------------------------------


def run_begin(*, run_id: int, owner: str) -> Next:
    """Claim the run for `owner` and start or resume it.

    Returns the first operation, reserved, or no operation when the run is
    over, waits for an approval, or another live worker holds its lease; and
    the run, with its ticket and session.
    """
    with transaction.atomic(), writes_together():
        run = run_get_locked(run_id=run_id, ticket=True)
        now = timezone.now()
        if not run.is_active or _held_by_other(run, owner, now):
            return Next(None, run.version, run.tally, run)
        if run.status == Status.WAITING_APPROVAL:
            op = _resume_approved(run, now)
        else:
            if run.status == Status.RUNNING:
                _recover_interrupted(run, now)
            run.status = Status.RUNNING
            run.started_at = run.started_at or now
            op = _plan_request(run, now)
        run.lease_owner = owner if op is not None else ""
        _save(run, now)
        return Next(op, run.version, run.tally, run)


def run_record(*, run_id: int, owner: str, version: int, op: Operation, result: OpResult,
               tally: Tally | None = None, run: Run | None = None, retry: bool = False) -> Next:
    """Record what `op` returned, decide, and reserve the next operation (or stop).

    Refused, and recorded as a discarded late result, unless `owner` still
    holds the run at `version`. `tally` and `run` are what the previous step
    handed back: only the holder of the run at its current version writes the
    run or adds request and attempt rows, so they are still right whenever the
    write is allowed (the run is locked again and what others may change is
    read; both are read whole when absent).

    `retry`: this step was tried before and its connection was lost. Finding the
    run one version on, still held by `owner`, means that try committed (only the
    lease holder writes a run it holds): nothing is discarded, and the result says
    `landed` so that the driver resumes the run (run_begin settles what that try reserved).
    """
    with transaction.atomic(), writes_together():
        if run is not None and run.pk == run_id:
            run = run_relock(run=run)
        else:
            run = run_get_locked(run_id=run_id, tally=tally)
        now = timezone.now()
        if retry and run.lease_owner == owner and run.version == version + 1 and run.is_active:
            log.warning("run %s: a step committed before its connection was lost; the run is resumed", run.pk)
            return Next(None, run.version, landed=True)
        if run.lease_owner != owner or run.version != version or not run.is_active:
            _discard_late_result(run, op, owner)
            return Next(None, run.version)
        if isinstance(op, ModelOp):
            nxt = _record_model(run, op, result, now)
        else:
            nxt = _record_dispatch(run, op, result, now)
        _save(run, now)
        return Next(nxt, run.version, run.tally, run)


def _held_by_other(run: Run, owner: str, now: datetime) -> bool:
    return bool(run.lease_owner) and run.lease_owner != owner and bool(
        run.lease_expires_at and run.lease_expires_at > now
    )


def _discard_late_result(run: Run, op: Operation, owner: str) -> None:
    what = "model request" if isinstance(op, ModelOp) else f"{op.tool} dispatch"
    log.warning("run %s: a late result of a %s was discarded", run.pk, what)
    metrics.watchdog_acted(metrics.LATE_RESULT)
    Observation.objects.create(
        run=run, kind=Observation.DISCARDED,
        text=f"A result of a {what} arrived after the run had moved on (worker {owner}); it was not used.",
    )


def run_lock(*, run_id: int) -> Run:
    """The run, row-locked until the surrounding transaction ends."""
    assert transaction.get_connection().in_atomic_block, "run_lock needs a transaction"
    return run_get_locked(run_id=run_id)


def run_end(*, run: Run, stop: Stop, refused: dict[str, Any] | None = None) -> None:
    """End a locked run now with `stop`, writing its packet (with the proposal it `refused`, if any)."""
    now = timezone.now()
    _stop(run, stop, now, refused=refused)
    _save(run, now)


def _save(run: Run, now: datetime) -> None:
    """Commit the step: bump the version; renew the lease while the run is driven, else release it."""
    run.version += 1
    if run.status == Status.RUNNING and run.lease_owner:
        run.lease_expires_at = now + timedelta(seconds=lease_seconds(run.get_budget()))
    else:
        run.lease_owner, run.lease_expires_at = "", None
    row_update_later(run, STEP_FIELDS)


def run_expire(*, run_id: int) -> bool:
    """End an active run whose deadline has passed, whatever its worker is doing. True if it ended it.

    In-flight operations are settled as cut by the deadline: a pending model
    request is charged its whole reservation, a pending attempt is a timeout.
    Skips a run whose row another transaction holds; the next pass gets it.
    """
    with transaction.atomic():
        run = Run.objects.select_for_update(skip_locked=True).filter(pk=run_id).first()
        now = timezone.now()
        if run is None or not run.is_active or run.time_left(now) > 0:
            return False
        for request in run.model_request_rows.filter(outcome=ModelRequest.Outcome.PENDING):
            _charge(run, request, whole_reservation=True)
            request.outcome, request.finished_at = ModelRequest.Outcome.DEADLINE, now
            request.save()
            metrics.model_request_settled(model=run.model_name, outcome=request.outcome, latency_ms=None,
                                          purpose=run.purpose)
        run.attempts.filter(outcome=ToolAttempt.Outcome.PENDING).update(
            outcome=ToolAttempt.Outcome.TIMEOUT, finished_at=now
        )
        _stop(run, Stop(Status.DEADLINE, note="the watchdog ended the run at its deadline"), now)
        _save(run, now)
        return True


def _plan_request(run: Run, now: datetime) -> Operation | None:
    """Before a model request: cancellation, then the exits in order; else reserve it."""
    if run.cancel_requested:
        return _stop(run, Stop(Status.CANCELLED), now)
    budget = run.get_budget()
    stop = check_before_request(budget, run.usage(), run.time_left(now))
    if stop is not None:
        return _stop(run, stop, now)
    index = run.tally.requests
    run.tally = replace(run.tally, requests=index + 1)
    request = ModelRequest(
        run_id=run.pk,
        seq=index + 1,
        reserved_tokens=budget.reserved_tokens_per_request,
        reserved_cost_micros=budget.reserved_cost_per_request,
        started_at=now,
    )
    row_insert_later(request)
    run.model_requests += 1
    run.tokens_reserved += request.reserved_tokens
    run.cost_reserved_micros += request.reserved_cost_micros
    shown = allowances(budget, run.usage(), run.time_left(now))
    return ModelOp(index, request.reserved_tokens, request.reserved_cost_micros, shown)


def _reserve_attempt(run: Run, call: NormalizedCall, now: datetime, *, retry_number: int = 0,
                     approved: bool = False) -> DispatchOp:
    tally = run.tally
    attempt = ToolAttempt(
        run_id=run.pk,
        seq=tally.attempts + 1,
        call_id=call.call_id or "",
        tool=call.tool,
        args=call.args,
        call_key=call.key,
        retry_number=retry_number,
        started_at=now,
    )
    row_insert_later(attempt)
    index = tally.of(call.tool)
    run.tally = tally.after_attempt(call.tool)
    run.tool_attempts += 1
    run.last_executed_key = call.key
    return DispatchOp(attempt.seq, call.tool, call.args, index, call.key, attempt.call_id, retry_number, approved)


def _charge(run: Run, request: ModelRequest, *, input_tokens: int = 0, output_tokens: int = 0,
            whole_reservation: bool = False) -> None:
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


REQUEST_RESULT_FIELDS = [
    "input_tokens", "output_tokens", "charged_tokens", "charged_cost_micros", "outcome", "proposal",
    "validation_error", "error", "finished_at", "latency_ms",
]
ATTEMPT_RESULT_FIELDS = ["outcome", "result_excerpt", "error", "evidence", "finished_at", "latency_ms"]


def _record_model(run: Run, op: ModelOp, res: OpResult, now: datetime) -> Operation | None:
    request = ModelRequest(run_id=run.pk, seq=op.index + 1, reserved_tokens=op.reserved_tokens,
                           reserved_cost_micros=op.reserved_cost_micros)
    request.finished_at, request.latency_ms = now, res.latency_ms
    stop = _settle_request(run, request, res, now)
    if stop is None and run.cancel_requested:
        request.outcome = ModelRequest.Outcome.OK
        stop = Stop(Status.CANCELLED, note="cancelled while the model request was in flight; its reply was not used")
    if stop is None:
        assert isinstance(res.result, Finished)
        response = res.result.value
        proposal = Malformed(response.cut_short) if response.cut_short else parse_reply(response.payload)
        nxt = _decide(run, request, proposal, now)
    row_update_later(request, REQUEST_RESULT_FIELDS, by=("run", "seq"))
    metrics.model_request_settled(model=run.model_name, outcome=request.outcome, latency_ms=request.latency_ms,
                                   purpose=run.purpose)
    return _stop(run, stop, now) if stop is not None else nxt


def _settle_request(run: Run, request: ModelRequest, res: OpResult, now: datetime) -> Stop | None:
    """Charge the request; the stop it causes, if any (a failure, an overrun, the deadline)."""
    late = run.time_left(now) <= 0
    outcome = res.result
    if isinstance(outcome, TimedOut) or (isinstance(outcome, Raised) and getattr(outcome.error, "timeout", False)):
        _charge(run, request, whole_reservation=True)
        if res.by_deadline or late:
            request.outcome = ModelRequest.Outcome.DEADLINE
            return Stop(Status.DEADLINE, note="the deadline cut the model request short")
        request.outcome = ModelRequest.Outcome.TIMEOUT
        return Stop(Status.MODEL_ERROR, Detail.TIMEOUT, "the model request took longer than the operation timeout")
    if isinstance(outcome, Raised):
        error = outcome.error
        request.outcome = ModelRequest.Outcome.ERROR
        if isinstance(error, ModelError) and _is_count(error.usage.input_tokens) and _is_count(
            error.usage.output_tokens
        ):
            _charge(run, request, input_tokens=error.usage.input_tokens, output_tokens=error.usage.output_tokens)
            request.error = storable(str(error))[:2000]
        else:  # nobody knows what was spent: the whole reservation stays charged
            _charge(run, request, whole_reservation=True)
            if isinstance(error, ModelError):
                request.error = storable(f"{error} (its reported usage is not a count)")[:2000]
            else:  # an adapter bug
                request.error = f"{type(error).__name__} in the model adapter"
                log.error("run %s: model adapter raised %s", run.pk, type(error).__name__)
        if late:
            return Stop(Status.DEADLINE)
        return Stop(Status.MODEL_ERROR, Detail.ERROR, request.error)
    response: ModelResponse = outcome.value
    budget = run.get_budget()
    if not _is_count(response.usage.input_tokens) or not _is_count(response.usage.output_tokens):
        _charge(run, request, whole_reservation=True)
        request.outcome, request.error = ModelRequest.Outcome.ERROR, "the reply's reported usage is not a count"
        return Stop(Status.DEADLINE) if late else Stop(Status.MODEL_ERROR, Detail.ERROR, request.error)
    _charge(run, request, input_tokens=response.usage.input_tokens, output_tokens=response.usage.output_tokens)
    if late:
        request.outcome = ModelRequest.Outcome.DEADLINE
        return Stop(Status.DEADLINE, note="the reply came after the deadline")
    if response.usage.input_tokens > budget.max_input_tokens or response.usage.output_tokens > budget.max_output_tokens:
        request.outcome = ModelRequest.Outcome.USAGE_OVERRUN
        return Stop(Status.MODEL_ERROR, Detail.USAGE_OVERRUN, "reported usage above the request's caps")
    return None


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _decide(run: Run, request: ModelRequest, proposal, now: datetime) -> Operation | None:
    """What a well-formed, in-time reply leads to."""
    request.outcome = ModelRequest.Outcome.OK
    if isinstance(proposal, Malformed):
        request.outcome, request.proposal = ModelRequest.Outcome.MALFORMED, "malformed"
        return _validation_error(run, request, proposal.reason, now)
    if isinstance(proposal, MultipleCalls):
        request.proposal = f"{proposal.count} calls"
        stop = Stop(Status.INVALID_OR_FORBIDDEN, Detail.MULTIPLE_CALLS, "several calls in one reply")
        return _stop(run, stop, now, refused=refusal_of_calls(list(proposal.calls)))
    if isinstance(proposal, Handoff):
        request.proposal = "handoff"
        return _stop(run, Stop(Status.NEEDS_HELP, note=proposal.reason[:2000]), now)
    if isinstance(proposal, DraftProposal):
        request.proposal = "draft"
        draft = validate_draft(proposal.raw, evidence_refs_for_ticket(ticket_id=run.ticket_id))
        if isinstance(draft, str):
            request.outcome = ModelRequest.Outcome.INVALID_DRAFT
            return _validation_error(run, request, draft, now)
        return _stop(run, Stop(Status.COMPLETED), now, draft=draft)
    if isinstance(proposal, Call):
        request.proposal = f"call {proposal.tool}"[:200]
        return _judge(run, proposal, now)
    assert_never(proposal)


def _validation_error(run: Run, request: ModelRequest, text: str, now: datetime) -> Operation | None:
    request.validation_error = text[:2000]
    run.validation_errors += 1
    Observation.objects.create(run=run, kind="validation_error", text=f"Your last reply was not used: {text}"[:2000])
    return _plan_request(run, now)


def _scope(run: Run) -> SessionScope:
    return SessionScope.of(run.session)


def _judge(run: Run, call: Call, now: datetime) -> Operation | None:
    scope = _scope(run)

    def receipt_key(call_id: str) -> str | None:
        return run.attempts.filter(call_id=call_id).values_list("call_key", flat=True).first()

    def authorized(c: NormalizedCall) -> bool:
        return TOOLS[c.tool].policy(scope, c.args)

    def needs_approval(c: NormalizedCall) -> bool:
        return c.tool in run.require_approval or TOOLS[c.tool].needs_approval(scope, c.args)

    facts = CallFacts(receipt_key, authorized, needs_approval, run.last_executed_key or None)
    verdict = judge_call(call, budget=run.get_budget(), usage=run.usage(), time_left=run.time_left(now), facts=facts)
    if isinstance(verdict, Stop):
        refused = refusal_of_call(call, verdict, staff_reason=_staff_reason(scope, call, verdict))
        return _stop(run, verdict, now, refused=refused)
    if isinstance(verdict, Dispatch):
        return _reserve_attempt(run, verdict.call, now)
    if isinstance(verdict, ReuseReceipt):
        _reuse_receipt(run, verdict.call)
        return _plan_request(run, now)
    if isinstance(verdict, AwaitApproval):
        return _await_approval(run, verdict.call)
    assert_never(verdict)


def _staff_reason(scope: SessionScope, call: Call, stop: Stop) -> str:
    """Why a forbidden job lookup was refused, for staff only (one more read, on this path only)."""
    if stop.detail != Detail.FORBIDDEN or call.tool != "read_job_status":
        return ""
    normalized = normalize_call(call)
    return "" if isinstance(normalized, Stop) else job_refusal_reason(scope=scope, job_ref=normalized.args["job_id"])


def _reuse_receipt(run: Run, call: NormalizedCall) -> None:
    receipt = run.attempts.filter(call_id=call.call_id).select_related("evidence").order_by("-seq").first()
    ref = receipt.evidence.ref if receipt.evidence else ""
    if ref and ref not in run.evidence_refs:
        run.evidence_refs = [*run.evidence_refs, ref]
    outcome = f"its result is {ref}" if ref else f"it ended {receipt.outcome}"
    Observation.objects.create(
        run=run, kind="receipt_reused", evidence_ref=ref,
        text=f"Call {call.call_id} was already made; {outcome}. It was not made again.",
    )


def _await_approval(run: Run, call: NormalizedCall) -> None:
    reason = approval_reason(tool=call.tool, args=call.args, run_requires=run.require_approval,
                             configured=settings.AGENT_REQUIRE_APPROVAL)
    approval = Approval.objects.create(run=run, tool=call.tool, args=call.args, call_key=call.key,
                                       call_id=call.call_id or "", reason=reason)
    run.status = Status.WAITING_APPROVAL
    run.pending_call = {"tool": call.tool, "args": call.args, "id": call.call_id}
    approval_notify_later(run=run, approval=approval, now=approval.requested_at)
    return None


def _resume_approved(run: Run, now: datetime) -> Operation | None:
    approval = run.approvals.filter(state=Approval.State.GRANTED).order_by("-id").first()
    if run.time_left(now) <= 0:
        run.approvals.filter(state__in=[Approval.State.PENDING, Approval.State.GRANTED]).update(
            state=Approval.State.EXPIRED
        )
        return _stop(run, Stop(Status.DEADLINE, note="the deadline passed while waiting for approval"), now)
    if approval is None:
        return None  # still waiting
    approval.state = Approval.State.USED
    approval.save(update_fields=["state"])
    run.status, run.pending_call = Status.RUNNING, None
    if run.cancel_requested:
        return _stop(run, Stop(Status.CANCELLED), now)
    call = NormalizedCall(approval.tool, approval.args, approval.call_id or None)
    return _reserve_attempt(run, call, now, approved=True)


def _recover_interrupted(run: Run, now: datetime) -> None:
    """A run found RUNNING by `run_begin` was cut off: settle what was in flight, keeping it counted."""
    for request in run.model_request_rows.filter(outcome=ModelRequest.Outcome.PENDING):
        _charge(run, request, whole_reservation=True)
        request.outcome, request.finished_at = ModelRequest.Outcome.INTERRUPTED, now
        request.save()
        metrics.model_request_settled(model=run.model_name, outcome=request.outcome, latency_ms=None,
                                      purpose=run.purpose)
    for attempt in run.attempts.filter(outcome=ToolAttempt.Outcome.PENDING):
        attempt.outcome, attempt.finished_at = ToolAttempt.Outcome.INTERRUPTED, now
        attempt.save()
        metrics.dispatch_settled(tool=attempt.tool, outcome=attempt.outcome, latency_ms=None,
                                 purpose=run.purpose)
        Observation.objects.create(
            run=run, kind="interrupted",
            text=f"The {attempt.tool} call was interrupted and its result is unknown. It counts as the last call"
            " made: proposing it again next ends the run (no progress).",
        )


def _record_dispatch(run: Run, op: DispatchOp, res: OpResult, now: datetime) -> Operation | None:
    attempt = ToolAttempt(run_id=run.pk, seq=op.seq, tool=op.tool, args=op.args, call_key=op.call_key,
                          call_id=op.call_id, retry_number=op.retry_number)
    attempt.finished_at, attempt.latency_ms = now, res.latency_ms
    outcome = res.result
    if isinstance(outcome, TimedOut):
        attempt.outcome = ToolAttempt.Outcome.TIMEOUT
    elif isinstance(outcome, Raised):
        transient = isinstance(outcome.error, ToolError) and outcome.error.transient
        attempt.outcome = ToolAttempt.Outcome.TRANSIENT_ERROR if transient else ToolAttempt.Outcome.ERROR
        attempt.error = _tool_error_text(outcome.error)
    else:
        _record_result(run, attempt, outcome.value)
    row_update_later(attempt, ATTEMPT_RESULT_FIELDS, by=("run", "seq"))
    metrics.dispatch_settled(tool=op.tool, outcome=attempt.outcome, latency_ms=attempt.latency_ms,
                              purpose=run.purpose)
    if run.time_left(now) <= 0 or (isinstance(outcome, TimedOut) and res.by_deadline):
        return _stop(run, Stop(Status.DEADLINE, note=f"the deadline passed during {op.tool}"), now)
    # A backend that learns only from its reply that a job is another account's (Forbidden) or
    # sensitive (ApprovalRequired) ends the run, or waits, as the checks before dispatch would have.
    error = outcome.error if isinstance(outcome, Raised) else None
    if isinstance(error, Forbidden):
        stop = Stop(Status.INVALID_OR_FORBIDDEN, Detail.FORBIDDEN, "this session may not make this call")
        refused = refusal_of_dispatch(tool=op.tool, args=op.args, call_id=op.call_id, staff_reason=error.staff_reason)
        return _stop(run, stop, now, refused=refused)
    if isinstance(error, ApprovalRequired) and _may_wait_for_approval(run):
        return _await_approval(run, op.call)
    budget = run.get_budget()
    if attempt.outcome == ToolAttempt.Outcome.TRANSIENT_ERROR and not run.cancel_requested:
        if attempt.retry_number < budget.max_read_retries and tool_attempts_left(budget, run.usage()) > 0:
            return _reserve_attempt(run, op.call, now, retry_number=op.retry_number + 1, approved=op.approved)
    if attempt.outcome != ToolAttempt.Outcome.OK:
        Observation.objects.create(
            run=run, kind="tool_failure",
            text=f"{attempt.tool} {canonical_json(attempt.args)} ended {attempt.outcome}: {attempt.error or 'no answer in time'}",
        )
    return _plan_request(run, now)


def _may_wait_for_approval(run: Run) -> bool:
    """An approved call is dispatched again: only while an attempt is left for it and the run is not cancelled."""
    return not run.cancel_requested and tool_attempts_left(run.get_budget(), run.usage()) > 0


def _tool_error_text(error: BaseException) -> str:
    if isinstance(error, (ToolError, Forbidden)):
        return str(error)[:500]
    if isinstance(error, ApprovalRequired):
        return f"{error}: the call needs a supervisor's approval; the reply was not kept"[:500]
    log.error("tool backend raised %s", type(error).__name__)
    return f"{type(error).__name__} in the tool backend"


def _record_result(run: Run, attempt: ToolAttempt, result: ToolResult) -> None:
    """A successful result becomes evidence (or reuses the identical one)."""
    limit = run.get_budget().max_tool_result_chars
    text = canonical_json(result.content)
    truncated = len(text) > limit
    if truncated:
        text = text[:limit]
    evidence = evidence_record(
        ticket_id=run.ticket_id, tool=attempt.tool, args=attempt.args, args_key=attempt.call_key,
        content=text, source_ref=result.source_ref, truncated=truncated, run_id=run.pk,
    )
    attempt.outcome, attempt.evidence, attempt.result_excerpt = ToolAttempt.Outcome.OK, evidence, text[:500]
    if evidence.ref not in run.evidence_refs:
        run.evidence_refs = [*run.evidence_refs, evidence.ref]


# --- ending ------------------------------------------------------------------------


def _stop(run: Run, stop: Stop, now: datetime, *, draft: Draft | None = None,
          refused: dict[str, Any] | None = None) -> None:
    """End the run with exactly one status and write its review packet."""
    run.status, run.detail, run.stop_note, run.ended_at = stop.status, stop.detail or "", stop.note, now
    run.tokens_used += run.tokens_reserved  # anything still reserved was spent, as far as anyone knows
    run.cost_used_micros += run.cost_reserved_micros
    run.tokens_reserved = run.cost_reserved_micros = 0
    run.pending_call = None
    metrics.run_ended(status=stop.status, model=run.model_name, seconds=(now - run.created_at).total_seconds(),
                      tokens=run.tokens_used, cost_micros=run.cost_used_micros, purpose=run.purpose)
    packet_write(run=run, stop=stop, draft=draft, now=now, refused=refused)
    _expire_approvals(run)
    return None


def _expire_approvals(run: Run) -> None:
    """Approvals still open when a run ends can no longer be used."""
    state = column(Approval, "state")
    sql = f"UPDATE {table(Approval)} SET {state} = %s WHERE {column(Approval, 'run')} = %s AND {state} IN (%s, %s)"
    execute_later(sql, [Approval.State.EXPIRED, run.pk, Approval.State.PENDING, Approval.State.GRANTED])


def run_requeue(*, run_id: int, grace_seconds: float) -> bool:
    """Release the lease of a run whose worker stopped renewing it, or that no worker took up
    (queued, or granted and still waiting). True if it should be enqueued again.

    The run stays claimable by anyone; it is not requeued again for `grace_seconds`.
    """
    with transaction.atomic():
        run = Run.objects.select_for_update(skip_locked=True).filter(pk=run_id).first()
        now = timezone.now()
        if run is None or run.status not in (Status.RUNNING, Status.QUEUED, Status.WAITING_APPROVAL):
            return False
        if run.status == Status.WAITING_APPROVAL and not run.approvals.filter(state=Approval.State.GRANTED).exists():
            return False  # still waiting for its answer: nothing for a worker to do
        if run.lease_expires_at and run.lease_expires_at > now:
            return False
        run.lease_owner, run.lease_expires_at = "", now + timedelta(seconds=grace_seconds)
        run.version += 1
        run.save(update_fields=["lease_owner", "lease_expires_at", "version"])
        return True
