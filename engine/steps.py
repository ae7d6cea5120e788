"""The steps of a run: every write to a run's status and counters starts here.

The loop alternates between these transactions and slow I/O. Each step is one
short transaction that, holding the run's row lock, records what the previous
operation returned (engine.settling charges and settles it), decides what
happens next, and *reserves* the next operation (the request or attempt row
and its counters) before it commits. The operation itself starts only after
the commit, so a crash can never lose a spend: at most 2 commits per
model-request-plus-dispatch cycle. A step's writes are held in the
`StepWrites` its transaction starts with, handed to every function that
writes, and sent together just before it commits (engine.sql.StepWrites);
of the run, a step writes the fields it changed (`Run.fields_changed`).

Ownership: a worker drives a run under a lease (`lease_owner`,
`lease_expires_at`), taken in `run_begin` and renewed by every step. Each
operation names the run version the step that reserved it committed; a result
from anyone but the lease holder, or for a stale version, is refused and
recorded as a discarded late result. Ending runs from outside (the deadline, a
dead worker) is the watchdog's (engine.watchdog).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, assert_never

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from engine import metrics
from engine.approvals import approval_notify_later, approval_reason
from engine.budgets import Budget, allowances, check_before_request, tool_attempts_left
from engine.decisions import (
    AwaitApproval,
    Call,
    CallFacts,
    Dispatch,
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
from engine.models import Approval, ModelRequest, Observation, Run, ToolAttempt
from engine.operations import DispatchOp, ModelOp, Next, Operation, OpResult
from engine.packets import packet_attempt
from engine.refusals import refusal_of_call, refusal_of_calls, refusal_of_dispatch
from engine.settling import (
    attempt_settle,
    attempts_settle_interrupted,
    request_settle,
    requests_settle_unanswered,
    run_stop,
)
from engine.sql import StepWrites, run_locked, run_relocked
from engine.statuses import Detail, Status, Stop
from engine.waiting import Finished, Raised, TimedOut
from tickets.selectors import Forbidden, SessionScope, evidence_refs_for_ticket, evidence_texts
from tools.base import canonical_json
from tools.registry import TOOLS, ApprovalRequired, Catalog

log = logging.getLogger("agentrun")

REQUEST_RESULT_FIELDS = [
    "input_tokens",
    "output_tokens",
    "charged_tokens",
    "charged_cost_micros",
    "outcome",
    "proposal",
    "validation_error",
    "error",
    "finished_at",
    "latency_ms",
]
ATTEMPT_RESULT_FIELDS = ["outcome", "result_excerpt", "error", "evidence_id", "finished_at", "latency_ms"]


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
    with transaction.atomic(), StepWrites() as writes:
        run = run_locked(run_id=run_id, ticket=True)
        now = timezone.now()
        if not run.is_active or _held_by_other(run, owner, now):
            return Next(None, run)
        if run.status == Status.WAITING_APPROVAL:
            op = _resume_approved(run, writes, now)
        else:
            if run.status == Status.RUNNING:  # cut off: settle what was in flight, keeping it counted
                requests_settle_unanswered(run=run, outcome=ModelRequest.Outcome.INTERRUPTED, now=now)
                attempts_settle_interrupted(run=run, now=now)
            run.status = Status.RUNNING
            run.started_at = run.started_at or now
            op = _plan_request(run, writes, now)
        run.lease_owner = owner if op is not None else ""
        run_save(run=run, writes=writes, now=now)
        return Next(op, run)


def run_record(*, run: Run, owner: str, op: Operation, result: OpResult, retry: bool = False) -> Next:
    """Record what `op` returned, decide, and reserve the next operation (or stop).

    `run` is the run as the step that reserved `op` left it. Refused, and
    recorded as a discarded late result, unless `owner` still holds the run at
    the version that step committed (`op.version`): only that holder writes
    the run or adds request and attempt rows, so its tally is still right
    whenever the write is allowed (the run is locked again and what others may
    change is read).

    `retry`: this step was tried before and its connection was lost; the run is
    read whole (the failed try changed the object). Finding it one version on,
    still held by `owner`, means that try committed (only the lease holder writes
    a run it holds): nothing is discarded, and the result says `landed` so that
    the driver resumes the run (run_begin settles what that try reserved).
    """
    with transaction.atomic(), StepWrites() as writes:
        run = run_locked(run_id=run.pk) if retry else run_relocked(run=run)
        now = timezone.now()
        if retry and run.lease_owner == owner and run.version == op.version + 1 and run.is_active:
            log.warning("run %s: a step committed before its connection was lost; the run is resumed", run.pk)
            return Next(None, landed=True)
        if run.lease_owner != owner or run.version != op.version or not run.is_active:
            _discard_late_result(run, op, owner)
            return Next(None)
        if isinstance(op, ModelOp):
            nxt = _record_model(run, writes, op, result, now)
        else:
            nxt = _record_dispatch(run, writes, op, result, now)
        run_save(run=run, writes=writes, now=now)
        return Next(nxt, run)


def _held_by_other(run: Run, owner: str, now: datetime) -> bool:
    return (
        bool(run.lease_owner) and run.lease_owner != owner and bool(run.lease_expires_at and run.lease_expires_at > now)
    )


def _discard_late_result(run: Run, op: Operation, owner: str) -> None:
    what = "model request" if isinstance(op, ModelOp) else f"{op.tool} dispatch"
    log.warning("run %s: a late result of a %s was discarded", run.pk, what)
    metrics.watchdog_acted(metrics.WatchdogAction.LATE_RESULT)
    Observation.objects.create(
        run=run,
        kind=Observation.Kind.DISCARDED,
        text=f"A result of a {what} arrived after the run had moved on (worker {owner}); it was not used.",
    )


def run_end(*, run: Run, stop: Stop, refused: dict[str, Any] | None = None) -> None:
    """End a locked run now with `stop`, writing its packet (with the proposal it `refused`, if any)."""
    now = timezone.now()
    with StepWrites() as writes:
        run_stop(run=run, stop=stop, now=now, writes=writes, refused=refused)
        run_save(run=run, writes=writes, now=now)


def run_save(*, run: Run, writes: StepWrites, now: datetime) -> None:
    """End the step: bump the version; renew the lease while the run is driven, else release it;
    write the fields the step changed."""
    run.version += 1
    if run.status == Status.RUNNING and run.lease_owner:
        run.lease_expires_at = now + timedelta(seconds=lease_seconds(run.get_budget()))
    else:
        run.lease_owner, run.lease_expires_at = "", None
    changed = run.fields_changed()
    writes.save(run, changed)
    run.fields_saved(changed)


# --- reserving ----------------------------------------------------------------------


def _plan_request(run: Run, writes: StepWrites, now: datetime) -> Operation | None:
    """Before a model request: cancellation, then the exits in order; else reserve it."""
    if run.cancel_requested:
        run_stop(run=run, stop=Stop(Status.CANCELLED), now=now, writes=writes)
        return None
    budget = run.get_budget()
    stop = check_before_request(budget, run.usage(), run.time_left(now))
    if stop is not None:
        run_stop(run=run, stop=stop, now=now, writes=writes)
        return None
    seq = run.tally.requests + 1
    run.tally = replace(run.tally, requests=seq)
    writes.insert(
        ModelRequest(
            run_id=run.pk,
            seq=seq,
            reserved_tokens=budget.reserved_tokens_per_request,
            reserved_cost_micros=budget.reserved_cost_per_request,
            started_at=now,
        )
    )
    run.model_requests += 1
    run.tokens_reserved += budget.reserved_tokens_per_request
    run.cost_reserved_micros += budget.reserved_cost_per_request
    shown = allowances(budget, run.usage(), run.time_left(now))
    return ModelOp(run.pk, seq, run.version + 1, shown)  # valid at the version this step commits


def _reserve_attempt(
    run: Run,
    writes: StepWrites,
    call: NormalizedCall,
    now: datetime,
    *,
    retry_number: int = 0,
    approved: bool = False,
    scope: SessionScope | None = None,
) -> DispatchOp:
    """Reserve the dispatch of `call`; `scope`, the one that judged it, for the dispatch to use what its policy read."""
    tally = run.tally
    seq = tally.attempts + 1
    writes.insert(
        ToolAttempt(
            run_id=run.pk,
            seq=seq,
            call_id=call.call_id or "",
            tool=call.tool,
            args=call.args,
            call_key=call.key,
            retry_number=retry_number,
            started_at=now,
        )
    )
    _attempt_listed(
        run, packet_attempt(seq, call.tool, call.args, ToolAttempt.Outcome.PENDING, call.call_id or "", "", None)
    )
    run.tally = tally.after_attempt(call.tool)
    run.tool_attempts += 1
    run.last_executed_key = call.key
    return DispatchOp(run.pk, seq, run.version + 1, call, tally.of(call.tool), retry_number, approved, scope)


# --- recording a model request and deciding ----------------------------------------------


def _record_model(run: Run, writes: StepWrites, op: ModelOp, res: OpResult, now: datetime) -> Operation | None:
    budget = run.get_budget()
    request = ModelRequest(
        run_id=run.pk,
        seq=op.seq,
        reserved_tokens=budget.reserved_tokens_per_request,
        reserved_cost_micros=budget.reserved_cost_per_request,
        finished_at=now,
        latency_ms=res.latency_ms,
    )
    stop = request_settle(run=run, request=request, result=res, now=now)
    if stop is None and run.cancel_requested:
        request.outcome = ModelRequest.Outcome.OK
        stop = Stop(Status.CANCELLED, note="cancelled while the model request was in flight; its reply was not used")
    if stop is None:
        assert isinstance(res.result, Finished)
        response = res.result.value
        proposal = Malformed(response.cut_short) if response.cut_short else parse_reply(response.payload)
        nxt = _decide(run, writes, request, proposal, now)
    writes.update(
        ModelRequest,
        {"run_id": op.run_id, "seq": op.seq},
        **{name: getattr(request, name) for name in REQUEST_RESULT_FIELDS},
    )
    metrics.model_request_settled(
        model=run.model_name, outcome=request.outcome, latency_ms=request.latency_ms, purpose=run.purpose
    )
    if stop is not None:
        run_stop(run=run, stop=stop, now=now, writes=writes)
        return None
    return nxt


def _decide(run: Run, writes: StepWrites, request: ModelRequest, proposal, now: datetime) -> Operation | None:
    """What a well-formed, in-time reply leads to."""
    request.outcome = ModelRequest.Outcome.OK
    if isinstance(proposal, Malformed):
        request.outcome, request.proposal = ModelRequest.Outcome.MALFORMED, "malformed"
        return _validation_error(run, writes, request, proposal.reason, now)
    if isinstance(proposal, MultipleCalls):
        request.proposal = f"{proposal.count} calls"
        stop = Stop(Status.INVALID_OR_FORBIDDEN, Detail.MULTIPLE_CALLS, "several calls in one reply")
        run_stop(run=run, stop=stop, now=now, writes=writes, refused=refusal_of_calls(list(proposal.calls)))
        return None
    if isinstance(proposal, Handoff):
        request.proposal = "handoff"
        run_stop(run=run, stop=Stop(Status.NEEDS_HELP, note=proposal.reason[:2000]), now=now, writes=writes)
        return None
    if isinstance(proposal, DraftProposal):
        request.proposal = "draft"
        draft = validate_draft(
            proposal.raw,
            TicketRefs(run),
            lambda refs: evidence_texts(ticket_id=run.ticket_id, refs=refs),
        )
        if isinstance(draft, str):
            request.outcome = ModelRequest.Outcome.INVALID_DRAFT
            return _validation_error(run, writes, request, draft, now)
        run_stop(run=run, stop=Stop(Status.COMPLETED), now=now, writes=writes, draft=draft)
        return None
    if isinstance(proposal, Call):
        request.proposal = f"call {proposal.tool}"[:200]
        return _judge(run, writes, proposal, now)
    assert_never(proposal)


class TicketRefs:
    """The ticket's evidence references, as a draft's check asks for them: those the run produced or
    reused exist (evidence is never removed); any other is looked up, the ticket's read once."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.read: set[str] | None = None

    def __contains__(self, ref: object) -> bool:
        if ref in self.run.evidence_refs:
            return True
        if self.read is None:
            self.read = evidence_refs_for_ticket(ticket_id=self.run.ticket_id)
        return ref in self.read


def _validation_error(
    run: Run, writes: StepWrites, request: ModelRequest, text: str, now: datetime
) -> Operation | None:
    request.validation_error = text[:2000]
    run.validation_errors += 1
    Observation.objects.create(
        run=run, kind=Observation.Kind.VALIDATION_ERROR, text=f"Your last reply was not used: {text}"[:2000]
    )
    return _plan_request(run, writes, now)


def _scope(run: Run) -> SessionScope:
    return SessionScope.of(run.session)


def _judge(run: Run, writes: StepWrites, call: Call, now: datetime) -> Operation | None:
    scope = _scope(run)

    def receipt_key(call_id: str) -> str | None:
        return run.attempts.filter(call_id=call_id).values_list("call_key", flat=True).first()

    def authorized(c: NormalizedCall) -> bool:
        return TOOLS[c.tool].policy(scope, c.args)

    def needs_approval(c: NormalizedCall) -> bool:
        return c.tool in run.require_approval or TOOLS[c.tool].needs_approval(scope, c.args)

    def catalog(tool: str) -> Catalog | None:  # one query of our own database, or what the page listed when last read
        return TOOLS[tool].catalog(0)

    facts = CallFacts(receipt_key, authorized, needs_approval, run.last_executed_key or None, catalog)
    verdict = judge_call(call, budget=run.get_budget(), usage=run.usage(), time_left=run.time_left(now), facts=facts)
    if isinstance(verdict, Stop):
        refused = refusal_of_call(call, verdict, staff_reason=_staff_reason(scope, call, verdict))
        run_stop(run=run, stop=verdict, now=now, writes=writes, refused=refused)
        return None
    if isinstance(verdict, Dispatch):
        return _reserve_attempt(run, writes, verdict.call, now, scope=scope)
    if isinstance(verdict, ReuseReceipt):
        _reuse_receipt(run, verdict.call)
        return _plan_request(run, writes, now)
    if isinstance(verdict, AwaitApproval):
        _await_approval(run, writes, verdict.call)
        return None
    assert_never(verdict)


def _staff_reason(scope: SessionScope, call: Call, stop: Stop) -> str:
    """Why a forbidden lookup was refused, for staff only, as its tool can tell (one more read, on this path only)."""
    if stop.detail != Detail.FORBIDDEN:
        return ""
    normalized = normalize_call(call)
    return "" if isinstance(normalized, Stop) else TOOLS[normalized.tool].refusal_reason(scope, normalized.args)


def _reuse_receipt(run: Run, call: NormalizedCall) -> None:
    receipt = run.attempts.filter(call_id=call.call_id).select_related("evidence").order_by("-seq").first()
    assert receipt is not None  # judge_call reuses a receipt only where the run has an attempt with this call id
    ref = receipt.evidence.ref if receipt.evidence else ""
    if ref and ref not in run.evidence_refs:
        run.evidence_refs = [*run.evidence_refs, ref]
    outcome = f"its result is {ref}" if ref else f"it ended {receipt.outcome}"
    Observation.objects.create(
        run=run,
        kind=Observation.Kind.RECEIPT_REUSED,
        evidence_ref=ref,
        text=f"Call {call.call_id} was already made; {outcome}. It was not made again.",
    )


def _await_approval(run: Run, writes: StepWrites, call: NormalizedCall) -> None:
    reason = approval_reason(
        tool=call.tool, args=call.args, run_requires=run.require_approval, configured=settings.AGENT_REQUIRE_APPROVAL
    )
    approval = Approval.objects.create(
        run=run, tool=call.tool, args=call.args, call_key=call.key, call_id=call.call_id or "", reason=reason
    )
    run.status = Status.WAITING_APPROVAL
    run.pending_call = {"tool": call.tool, "args": call.args, "id": call.call_id}
    approval_notify_later(run=run, approval=approval, now=approval.requested_at, writes=writes)
    return None


def _resume_approved(run: Run, writes: StepWrites, now: datetime) -> Operation | None:
    approval = run.approvals.filter(state=Approval.State.GRANTED).order_by("-id").first()
    if run.time_left(now) <= 0:
        run.approvals.filter(state__in=[Approval.State.PENDING, Approval.State.GRANTED]).update(
            state=Approval.State.EXPIRED
        )
        stop = Stop(Status.DEADLINE, note="the deadline passed while waiting for approval")
        run_stop(run=run, stop=stop, now=now, writes=writes)
        return None
    if approval is None:
        return None  # still waiting
    approval.state = Approval.State.USED
    approval.save(update_fields=["state"])
    run.status, run.pending_call = Status.RUNNING, None
    if run.cancel_requested:
        run_stop(run=run, stop=Stop(Status.CANCELLED), now=now, writes=writes)
        return None
    call = NormalizedCall(approval.tool, approval.args, approval.call_id or None)
    return _reserve_attempt(run, writes, call, now, approved=True)


# --- recording a dispatch and deciding ----------------------------------------------------


def _record_dispatch(run: Run, writes: StepWrites, op: DispatchOp, res: OpResult, now: datetime) -> Operation | None:
    attempt = ToolAttempt(
        run_id=run.pk,
        seq=op.seq,
        tool=op.tool,
        args=op.args,
        call_key=op.call.key,
        call_id=op.call.call_id or "",
        retry_number=op.retry_number,
        finished_at=now,
        latency_ms=res.latency_ms,
    )
    attempt_settle(run=run, attempt=attempt, result=res)
    number = attempt.evidence.number if attempt.evidence else None
    _attempt_listed(
        run, packet_attempt(op.seq, op.tool, op.args, attempt.outcome, attempt.call_id, attempt.error, number)
    )
    writes.update(
        ToolAttempt,
        {"run_id": op.run_id, "seq": op.seq},
        **{name: getattr(attempt, name) for name in ATTEMPT_RESULT_FIELDS},
    )
    metrics.dispatch_settled(tool=op.tool, outcome=attempt.outcome, latency_ms=attempt.latency_ms, purpose=run.purpose)
    outcome = res.result
    if run.time_left(now) <= 0 or (isinstance(outcome, TimedOut) and res.by_deadline):
        stop = Stop(Status.DEADLINE, note=f"the deadline passed during {op.tool}")
        run_stop(run=run, stop=stop, now=now, writes=writes)
        return None
    # A backend that learns only from its reply that a job is another account's (Forbidden) or
    # sensitive (ApprovalRequired) ends the run, or waits, as the checks before dispatch would have.
    error = outcome.error if isinstance(outcome, Raised) else None
    if isinstance(error, Forbidden):
        stop = Stop(Status.INVALID_OR_FORBIDDEN, Detail.FORBIDDEN, "this session may not make this call")
        refused = refusal_of_dispatch(
            tool=op.tool, args=op.args, call_id=attempt.call_id, staff_reason=error.staff_reason
        )
        run_stop(run=run, stop=stop, now=now, writes=writes, refused=refused)
        return None
    if isinstance(error, ApprovalRequired) and _may_wait_for_approval(run):
        _await_approval(run, writes, op.call)
        return None
    budget = run.get_budget()
    if attempt.outcome == ToolAttempt.Outcome.TRANSIENT_ERROR and not run.cancel_requested:
        if attempt.retry_number < budget.max_read_retries and tool_attempts_left(budget, run.usage()) > 0:
            return _reserve_attempt(run, writes, op.call, now, retry_number=op.retry_number + 1, approved=op.approved)
    if attempt.outcome != ToolAttempt.Outcome.OK:
        Observation.objects.create(
            run=run,
            kind=Observation.Kind.TOOL_FAILURE,
            text=f"{attempt.tool} {canonical_json(attempt.args)} ended {attempt.outcome}: {attempt.error or 'no answer in time'}",
        )
    return _plan_request(run, writes, now)


def _attempt_listed(run: Run, attempt: dict[str, Any]) -> None:
    """Keep the run's list of its attempts (`Run.attempts_listed`) up to date: `attempt` added, or settled."""
    listed = run.__dict__.get("attempts_listed")
    if listed is None:
        return
    if listed and listed[-1]["seq"] == attempt["seq"]:  # settled: the attempt reserved last
        listed[-1] = attempt
    else:
        listed.append(attempt)


def _may_wait_for_approval(run: Run) -> bool:
    """An approved call is dispatched again: only while an attempt is left for it and the run is not cancelled."""
    return not run.cancel_requested and tool_attempts_left(run.get_budget(), run.usage()) > 0
