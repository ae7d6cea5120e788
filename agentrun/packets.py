"""The review packet: what staff review when a run ends. Written once; reviews never edit it."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from .decisions import Draft
from .models import ReviewPacket, Run
from .statuses import Stop


def packet_write(*, run: Run, stop: Stop, draft: Draft | None, now: datetime) -> ReviewPacket:
    """The packet of a run ending now with `stop`; `draft` when it COMPLETED.

    Evidence: the references the draft cites (each once, in citing order), else
    every reference the run produced or reused, in order of first appearance.
    """
    return ReviewPacket.objects.create(
        run=run,
        summary=draft.summary if draft else None,
        evidence_refs=list(draft.evidence) if draft else list(run.evidence_refs),
        attempts=[
            {"seq": a.seq, "tool": a.tool, "args": a.args, "outcome": a.outcome, "call_id": a.call_id or None,
             "evidence": a.evidence.ref if a.evidence else None, "error": a.error or None}
            for a in run.attempts.select_related("evidence")
        ],
        open_questions=list(draft.open_questions) if draft else [],
        stop_reason=stop.status,
        detail=stop.detail or "",
        stop_note=stop.note,
        budget_spent=budget_spent(run, now),
        created_at=now,
    )


def budget_spent(run: Run, now: datetime) -> dict[str, Any]:
    """Each budget as [spent, limit]."""
    budget = run.get_budget()
    return {
        "model_requests": [run.model_requests, budget.max_model_requests],
        "tool_attempts": [run.tool_attempts, budget.max_tool_attempts],
        "tokens": [run.tokens_used, budget.max_total_tokens],
        "cost_micros": [run.cost_used_micros, budget.max_cost_micros],
        "seconds": [round((now - run.created_at).total_seconds(), 3), budget.deadline_seconds],
    }
