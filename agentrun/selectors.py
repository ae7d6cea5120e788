"""Reads about runs: the context a model is shown, and the run report."""
from __future__ import annotations

from typing import Any

from django.utils import timezone

from tickets.models import Evidence

from .budgets import Budget
from .context import AttemptItem, Context, EvidenceItem, fit_context
from .models import Observation, Run
from .statuses import Status


def run_context(*, run: Run, budget: Budget, shown_allowances: dict[str, Any], reserve_bytes: int = 0) -> Context:
    """The ticket, its evidence (each item once), this run's lookups and recent problems, fitted to the cap."""
    ticket = run.ticket
    evidence = tuple(
        EvidenceItem(e.ref, e.tool, e.args, e.content, e.source_ref, e.truncated)
        for e in Evidence.objects.filter(ticket_id=ticket.pk).order_by("number")
    )
    attempts = tuple(
        AttemptItem(a.tool, a.args, a.outcome, a.evidence.ref if a.evidence else "")
        for a in run.attempts.select_related("evidence").order_by("seq")
    )
    shown = run.observations.exclude(kind=Observation.DISCARDED).order_by("-id")
    notes = tuple(reversed(shown.values_list("text", flat=True)[:5]))
    ctx = Context(
        ticket_ref=ticket.ref,
        subject=ticket.subject,
        body=ticket.body,
        session_verified=run.session.verified,
        evidence=evidence,
        attempts=attempts,
        notes=notes,
        allowances=shown_allowances,
    )
    return fit_context(ctx, max(budget.max_input_tokens - reserve_bytes, 0))


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
            {"tool": a.tool, "args": a.args, "outcome": a.outcome, "call_id": a.call_id or None,
             "evidence": a.evidence.ref if a.evidence else None, "latency_ms": a.latency_ms}
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
