"""Starting, cancelling and approving runs: the entry points that staff surfaces and commands call.

The steps of a running run (and every counter write) are in engine.steps; handing a run
to a worker is engine.tasks.enqueue_advance (services sit above the tasks, never below).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from engine import metrics
from engine.budgets import Budget
from engine.config import ConfigError, default_budget
from engine.models import Approval, Run
from engine.refusals import refusal_of_denial
from engine.sql import run_locked
from engine.statuses import Detail, Status, Stop
from engine.steps import run_end
from engine.tasks import enqueue_advance
from providers import BuiltInModel
from tickets.models import CustomerSession, Ticket
from tools.registry import TOOLS, session_may_need_approval


class RunError(Exception):
    """A request about a run that cannot be carried out; `code` says why."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


# --- starting, cancelling, approving ----------------------------------------------


def run_start(
    *,
    ticket: Ticket,
    session: CustomerSession | None = None,
    model_name: str | None = None,
    budget: Budget | None = None,
    model_script: dict[str, Any] | None = None,
    require_approval: list[str] | tuple[str, ...] = (),
    resume_from: dict[str, int] | None = None,
    purpose: str = Run.Purpose.INVESTIGATION,
) -> Run:
    """Create a run for `ticket`, acting for `session` (default: the ticket's own).

    The run keeps the ticket's subject and body as they are now, and the number of its latest message
    (`messages_seen`): its context and packet show that text and those messages.
    """
    session = session or ticket.session
    if session.account_id != ticket.account_id:
        raise RunError("session_mismatch", f"session {session.ref} does not belong to ticket {ticket.ref}'s account")
    unknown = sorted(set(require_approval) - TOOLS.keys())
    if unknown:
        raise RunError("unknown_tool", f"no such tool to require approval for: {', '.join(unknown)}")
    model_name = model_name or settings.AGENT_MODEL
    if model_name == BuiltInModel.REPLAY and model_script is None:
        raise ConfigError("the replay model only plays scenario files (run_scenario); use 'rules' or a provider model")
    listed = sorted(set(require_approval) | set(settings.AGENT_REQUIRE_APPROVAL))
    budget = budget or default_budget(
        model_name, approval_possible=session_may_need_approval(session=session, listed=listed)
    )
    counters = resume_from or {}
    now = timezone.now()
    run = Run(
        ticket=ticket,
        session=session,
        subject=ticket.subject,
        body=ticket.body,
        messages_seen=ticket.message_count,
        model_name=model_name,
        model_script=model_script,
        require_approval=listed,
        budget=budget.as_dict(),
        purpose=purpose,
        model_requests=counters.get("model_requests", 0),
        tool_attempts=counters.get("tool_attempts", 0),
        tokens_used=counters.get("tokens_used", 0),
        cost_used_micros=counters.get("cost_micros", 0),
        created_at=now,
        deadline_at=now + timedelta(seconds=budget.deadline_seconds),
    )
    run.save(force_insert=True)
    metrics.run_started(model_name, purpose=purpose)
    return run


def investigation_start(
    *, ticket: Ticket, session: CustomerSession | None = None, model_name: str | None = None
) -> Run:
    """Start an investigation: commit the run, then hand it to a worker (inline when no broker)."""
    with transaction.atomic():
        run = run_start(ticket=ticket, session=session, model_name=model_name)
        enqueue_advance(run.pk)
    return run


def run_cancel(*, run_id: int) -> Run:
    """Cancel a run: at once when no operation is in flight, else before its next one."""
    with transaction.atomic():
        run = run_locked(run_id=run_id)
        if not run.is_active:
            return run
        if run.status == Status.RUNNING:
            run.cancel_requested = True
            run.save(update_fields=["cancel_requested"])
            return run
        run_end(run=run, stop=Stop(Status.CANCELLED))
        return run


def approval_answer(
    *, run_id: int, grant: bool, decided_by: str, resume: bool = True, note: str = "", refuse_late: bool = False
) -> Run:
    """A supervisor's answer for the call the run waits on. After the deadline it changes nothing,
    and with `refuse_late` it is refused (RunError "approval_expired") with nothing written.

    A grant hands the run back to a worker (unless `resume` is false: the caller drives it). A
    denial keeps `note`, the supervisor's reason, on the approval and in the run's stop note.
    """
    with transaction.atomic():
        run = run_locked(run_id=run_id)
        approval = run.approvals.filter(state=Approval.State.PENDING).first()
        if run.status != Status.WAITING_APPROVAL or approval is None:
            raise RunError("not_waiting", f"run {run_id} is not waiting for an approval")
        now = timezone.now()
        if refuse_late and run.time_left(now) <= 0:
            raise RunError("approval_expired", f"the approval expired: run {run_id}'s deadline has passed")
        approval.decided_at, approval.decided_by = now, decided_by
        if run.time_left(now) <= 0:
            approval.state = Approval.State.EXPIRED
            approval.save()
            run_end(run=run, stop=Stop(Status.DEADLINE, note="the approval came after the deadline"))
        elif grant:
            approval.state = Approval.State.GRANTED
            approval.save()
            if resume:
                enqueue_advance(run.pk)
        else:
            approval.state, approval.note = Approval.State.DENIED, note
            approval.save()
            refused = refusal_of_denial(
                tool=approval.tool, args=approval.args, call_id=approval.call_id, decided_by=decided_by, reason=note
            )
            said = f"a supervisor denied the call: {note}" if note else "a supervisor denied the call"
            run_end(run=run, stop=Stop(Status.INVALID_OR_FORBIDDEN, Detail.APPROVAL_DENIED, said), refused=refused)
        return run
