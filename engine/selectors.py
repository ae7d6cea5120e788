"""Reads about runs: the context a model is shown, the report, the queue."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Min
from django.utils import timezone
from django.utils.crypto import salted_hmac

from engine.budgets import Budget
from engine.models import Approval, Run, StaffPreference, default_time_zone
from engine.sql import context_rows
from engine.statuses import ACTIVE, Status
from providers.context import AttemptItem, Context, EvidenceItem, MessageItem, fit_context
from tickets.models import Ticket
from tickets.selectors import ticket_messages
from tools.registry import Catalog


def run_context(
    *,
    run: Run,
    budget: Budget,
    shown_allowances: dict[str, Any],
    reserve_bytes: int = 0,
    catalogs: Mapping[str, Catalog] | None = None,
) -> Context:
    """The ticket's text and follow-up messages as the run started with them, its evidence (each item once),
    this run's lookups and recent problems, fitted to the cap; with what the tools' sources list (`catalogs`,
    as read for this request).

    The data blocks' id is keyed by the run and the secret key: the same in each of the run's requests
    (a provider can cache the prompt's unchanged start), and not to be guessed by whoever writes the ticket.
    """
    evidence, attempts, notes = _shown(ticket_id=run.ticket_id, run_id=run.pk)
    messages = ticket_messages(ticket_id=run.ticket_id, up_to=run.messages_seen)  # no query when it saw none
    ctx = Context(
        ticket_ref=run.ticket.ref,
        subject=run.subject,
        body=run.body,
        session_verified=run.session.verified,
        evidence=evidence,
        attempts=attempts,
        notes=notes,
        allowances=shown_allowances,
        fence_key=salted_hmac("agentrun.context.fence_key", str(run.pk)).hexdigest(),  # as text: the same bytes
        messages=tuple(MessageItem(m.number, m.author, m.body, m.written_at.isoformat()) for m in messages),
        catalogs=dict(catalogs or {}),
    )
    return fit_context(ctx, max(budget.max_input_tokens - reserve_bytes, 0))


def _shown(*, ticket_id: int, run_id: int):
    """The ticket's evidence, the run's attempts and its last few notes to the model (engine.sql.context_rows)."""
    evidence, attempts, notes = context_rows(ticket_id=ticket_id, run_id=run_id, last_notes=5)
    return (
        tuple(EvidenceItem(f"E{number}", *rest) for number, *rest in evidence),
        tuple(
            AttemptItem(tool, args, outcome, f"E{number}" if number is not None else "")
            for tool, args, outcome, number in attempts
        ),
        notes,
    )


def ticket_active_run(*, ticket: Ticket) -> Run | None:
    """The ticket's run that is still going (queued, running or waiting for an approval), if any."""
    return ticket.runs.filter(status__in=ACTIVE).order_by("-created_at").first()


def run_report(*, run_id: int, elapsed_seconds: float | None = None, name: str | None = None) -> dict[str, Any]:
    """The run in the JSON shape of `run_scenario` (CONFORMANCE §7)."""
    run = Run.objects.select_related("ticket", "session").get(pk=run_id)
    packet = getattr(run, "packet", None)
    report: dict[str, Any] = {
        "run": run.pk,
        "ticket": run.ticket.ref,
        "session": run.session.ref,
        "model": run.model_name,
        "status": run.status,
        "detail": run.detail or None,
        "model_requests": run.model_requests,
        "tool_attempts": run.tool_attempts,
        "validation_errors": run.validation_errors,
        "dispatched": [
            {
                "tool": a.tool,
                "args": a.args,
                "outcome": a.outcome,
                "call_id": a.call_id or None,
                "evidence": a.evidence.ref if a.evidence else None,
                "latency_ms": a.latency_ms,
            }
            for a in run.attempts.select_related("evidence").order_by("seq")
        ],
        "evidence": list(run.evidence_refs),
        "packet": _packet(packet) if packet and run.status != Status.WAITING_APPROVAL else None,
        "tokens": {"reserved": run.tokens_reserved, "used": run.tokens_used},
        "cost_micros": run.cost_used_micros,
        "deadline_at": run.deadline_at.isoformat(),
        "pending_call": run.pending_call,
    }
    if name is not None:
        report = {"name": name, **report}
    if elapsed_seconds is None and run.started_at:
        elapsed_seconds = ((run.ended_at or timezone.now()) - run.started_at).total_seconds()
    report["elapsed_seconds"] = round(elapsed_seconds, 3) if elapsed_seconds is not None else None
    return report


def _packet(packet) -> dict[str, Any]:
    return {
        "summary": packet.summary,
        "evidence": packet.evidence_refs,
        "open_questions": packet.open_questions,
        "stop_reason": packet.stop_reason,
        "detail": packet.detail or None,
        "stop_note": packet.stop_note or None,
        "attempts": packet.attempts,
        "budget_spent": packet.budget_spent,
        "review_state": packet.review_state,
    }


@dataclass(frozen=True)
class QueueFigures:
    queued: int
    oldest_age: float  # seconds; 0 when none is queued
    approvals_waiting: int


def queue_figures() -> QueueFigures:
    """How many runs wait for a worker and for how long, and how many calls wait for a supervisor
    (investigations only: an evaluation answers its own calls).

    Two reads, each within an index: queued runs by the run's (status, deadline_at) index
    (only the queued rows are visited), pending approvals by their partial unique index.
    """
    queued = Run.objects.filter(status=Status.QUEUED, purpose=Run.Purpose.INVESTIGATION).aggregate(
        n=Count("pk"), oldest=Min("created_at")
    )
    oldest = queued["oldest"]
    age = max((timezone.now() - oldest).total_seconds(), 0.0) if oldest else 0.0
    waiting = Approval.objects.filter(state=Approval.State.PENDING, run__purpose=Run.Purpose.INVESTIGATION).count()
    return QueueFigures(queued["n"], age, waiting)


def staff_time_zone(*, user_id: int) -> str:
    """The time zone a staff member sees times in: their preference, else settings.TIME_ZONE."""
    zone = StaffPreference.objects.filter(user_id=user_id).values_list("time_zone", flat=True).first()
    return zone or default_time_zone()


def run_model_names() -> list[str]:
    """Every model name runs were made with, in order: one probe of the model_name index per name (a loose index
    scan), where `SELECT DISTINCT` reads every run (200 ms at 100,000 runs, bench/pages_bench.py). As many
    statements as names, which grow with the models tried, not with the runs."""
    names: list[str] = []
    ordered = Run.objects.order_by("model_name").values_list("model_name", flat=True)
    while (name := ordered.filter(model_name__gt=names[-1]).first() if names else ordered.first()) is not None:
        names.append(name)
    return names
