"""The review packet: what staff review when a run ends. Written once; reviews never edit it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rapidfuzz.distance import Levenshtein

from engine.decisions import Draft
from engine.models import ReviewPacket, Run, ToolAttempt
from engine.signals import packet_written
from engine.sql import StepWrites, packets_supersede
from engine.statuses import Stop
from providers.replies import holding_reply


def packet_write(
    *,
    run: Run,
    stop: Stop,
    draft: Draft | None,
    now: datetime,
    writes: StepWrites,
    refused: dict[str, Any] | None = None,
) -> ReviewPacket:
    """The packet of a run ending now with `stop`; `draft` when it COMPLETED; `refused`, the
    proposal it ended on with the staff-only reason (engine.refusals), when it ended on one.

    Evidence: the references the draft cites (each once, in citing order), else
    every reference the run produced or reused, in order of first appearance.
    With the packet webhook on, its `packet.written` event is recorded with it
    (held with the step's writes) and sent after the commit. The packet lists
    the attempts as this step settled them: as the run's steps listed them
    (`Run.attempts_listed`), else as read, after what the step holds is sent.
    """
    packet = ReviewPacket(
        run_id=run.pk,
        summary=draft.summary if draft else None,
        evidence_refs=list(draft.evidence) if draft else list(run.evidence_refs),
        attempts=_attempts(run, writes),
        open_questions=list(draft.open_questions) if draft else [],
        stop_reason=stop.status,
        detail=stop.detail or "",
        stop_note=stop.note,
        refused=refused,
        budget_spent=budget_spent(run, now),
        reply=_reply(run, stop, draft),
        created_at=now,
        run_created_at=run.created_at,
        run_purpose=run.purpose,
    )
    writes.insert(packet)
    if run.purpose == Run.Purpose.INVESTIGATION:  # an evaluation's packet is on its own ticket copy, out of the queue
        packets_supersede_later(run=run, now=now, writes=writes)
        packet_written.send(sender=ReviewPacket, run=run, packet=packet, now=now, writes=writes)
    return packet


def _reply(run: Run, stop: Stop, draft: Draft | None) -> str:
    """The suggested reply: the draft's; else, when the run found something, the holding reply of its stop
    (a person is on it); else none. An evaluation's packet has none: nobody will send it."""
    if draft is not None and draft.reply:
        return draft.reply
    if run.purpose != Run.Purpose.INVESTIGATION or not run.evidence_refs:
        return ""
    return holding_reply(status=stop.status, subject=run.subject)


def packets_supersede_later(*, run: Run, now: datetime, writes: StepWrites) -> None:
    """The ticket's other pending packets leave the queue: each gets a system entry ("superseded",
    no reviewer) in its review history and the review state superseded (held with the step's writes)."""
    note = f"Superseded by the packet of run {run.pk}, a newer investigation of the same ticket."
    packets_supersede(run=run, note=note, now=now, writes=writes)


def _attempts(run: Run, writes: StepWrites) -> list[dict[str, Any]]:
    """The run's attempts in order, each with the evidence it produced: as its steps listed them, else read
    (after sending what the step holds, which may settle one)."""
    listed = run.__dict__.get("attempts_listed")
    if listed is not None:
        return [dict(attempt) for attempt in listed]
    writes.send()
    rows = (
        ToolAttempt.objects.filter(run_id=run.pk)
        .order_by("seq")
        .values_list("seq", "tool", "args", "outcome", "call_id", "error", "evidence__number")
    )
    return [packet_attempt(*row) for row in rows]


def packet_attempt(
    seq: int, tool: str, args: dict[str, Any], outcome: str, call_id: str, error: str, evidence_number: int | None
) -> dict[str, Any]:
    """An attempt as the packet lists it."""
    return {
        "seq": seq,
        "tool": tool,
        "args": args,
        "outcome": outcome,
        "call_id": call_id or None,
        "evidence": f"E{evidence_number}" if evidence_number is not None else None,
        "error": error or None,
    }


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


def reply_change(suggested: str, kept: str) -> float | None:
    """How far a kept reply is from the suggestion: the Levenshtein distance over characters, over the longer
    length (0 unchanged, 1 nothing alike); None when there was no suggestion or none was kept."""
    if not (suggested and kept):
        return None
    return Levenshtein.normalized_distance(suggested.strip(), kept.strip())
