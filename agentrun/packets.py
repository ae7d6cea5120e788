"""The review packet: what staff review when a run ends. Written once; reviews never edit it."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from supportagent.rows import column, execute_later, field, row_insert_later, rows_select, table
from tickets.models import Evidence

from .decisions import Draft
from .models import PacketReview, ReviewPacket, Run, ToolAttempt
from .statuses import Stop
from .webhooks import packet_event_record, webhook_enabled


def packet_write(*, run: Run, stop: Stop, draft: Draft | None, now: datetime,
                 refused: dict[str, Any] | None = None) -> ReviewPacket:
    """The packet of a run ending now with `stop`; `draft` when it COMPLETED; `refused`, the
    proposal it ended on with the staff-only reason (agentrun.refusals), when it ended on one.

    Evidence: the references the draft cites (each once, in citing order), else
    every reference the run produced or reused, in order of first appearance.
    With the packet webhook on, its `packet.written` event is recorded with it
    (held with the step's writes) and sent after the commit.
    """
    packet = ReviewPacket(
        run_id=run.pk,
        summary=draft.summary if draft else None,
        evidence_refs=list(draft.evidence) if draft else list(run.evidence_refs),
        attempts=_attempts(run),
        open_questions=list(draft.open_questions) if draft else [],
        stop_reason=stop.status,
        detail=stop.detail or "",
        stop_note=stop.note,
        refused=refused,
        budget_spent=budget_spent(run, now),
        created_at=now,
    )
    row_insert_later(packet)
    if run.purpose == Run.Purpose.INVESTIGATION:  # an evaluation's packet is on its own ticket copy, out of the queue
        packets_supersede_later(run=run, now=now)
        if webhook_enabled():
            packet_event_record(run=run, packet=packet, now=now)
    return packet


def packets_supersede_later(*, run: Run, now: datetime) -> None:
    """The ticket's other pending packets leave the queue: each gets a system entry ("superseded",
    no reviewer) in its review history and the review state superseded.

    Held with the step's writes: on PostgreSQL they go with the packet's INSERT in one
    statement, so a run adds no statement for them. Both read the pending packets as
    they were before the step (one snapshot), and touch only pending packets: running
    them again changes nothing.
    """
    note = f"Superseded by the packet of run {run.pk}, a newer investigation of the same ticket."
    execute_later(_SUPERSEDE_HISTORY, [PacketReview.Decision.SUPERSEDED, note, now, *_others(run)])
    execute_later(_SUPERSEDE_STATE, [ReviewPacket.ReviewState.SUPERSEDED, *_others(run)])


def _others(run: Run) -> list[Any]:
    return [ReviewPacket.ReviewState.PENDING, run.ticket_id, run.pk]


_P, _R, _V = table(ReviewPacket), table(Run), table(PacketReview)
_PENDING_OF_TICKET = (
    f"p.{column(ReviewPacket, 'review_state')} = %s AND r.{column(Run, 'id')} = p.{column(ReviewPacket, 'run')}"
    f" AND r.{column(Run, 'ticket')} = %s AND p.{column(ReviewPacket, 'run')} <> %s"
)
_SUPERSEDE_HISTORY = (
    f"INSERT INTO {_V} ({column(PacketReview, 'packet')}, {column(PacketReview, 'reviewer')},"
    f" {column(PacketReview, 'decision')}, {column(PacketReview, 'note')}, {column(PacketReview, 'created_at')},"
    f" {column(PacketReview, 'acknowledged_changed_evidence')}, {column(PacketReview, 'changed_evidence')})"
    f" SELECT p.{column(ReviewPacket, 'id')}, NULL, %s, %s, %s, FALSE, '[]' FROM {_P} p, {_R} r"
    f" WHERE {_PENDING_OF_TICKET}"
)
# A subquery rather than UPDATE ... FROM, which SQLite's grammar does not take with an alias.
_SUPERSEDE_STATE = (
    f"UPDATE {_P} SET {column(ReviewPacket, 'review_state')} = %s WHERE {column(ReviewPacket, 'review_state')} = %s"
    f" AND {column(ReviewPacket, 'run')} IN (SELECT {column(Run, 'id')} FROM {_R} WHERE {column(Run, 'ticket')} = %s)"
    f" AND {column(ReviewPacket, 'run')} <> %s"
)


_ATTEMPT_FIELDS = ("seq", "tool", "args", "outcome", "call_id", "error")


def _attempts(run: Run) -> list[dict[str, Any]]:
    """The run's attempts in order, each with the evidence it produced."""
    fields = [*(field(ToolAttempt, name) for name in _ATTEMPT_FIELDS), field(Evidence, "number")]
    columns = ", ".join(f"a.{column(ToolAttempt, name)}" for name in _ATTEMPT_FIELDS)
    sql = (
        f"SELECT {columns}, e.{column(Evidence, 'number')} FROM {table(ToolAttempt)} a"
        f" LEFT JOIN {table(Evidence)} e ON e.{column(Evidence, 'id')} = a.{column(ToolAttempt, 'evidence')}"
        f" WHERE a.{column(ToolAttempt, 'run')} = %s ORDER BY a.{column(ToolAttempt, 'seq')}"
    )
    return [
        {"seq": seq, "tool": tool, "args": args, "outcome": outcome, "call_id": call_id or None,
         "evidence": f"E{number}" if number is not None else None, "error": error or None}
        for seq, tool, args, outcome, call_id, error, number in rows_select(fields, sql, [run.pk])
    ]


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
