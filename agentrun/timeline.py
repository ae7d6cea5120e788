"""Reads for the staff pages and the API: a run's timeline, its evidence with sources, its budget bars."""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone

from tickets.models import Evidence

from .models import ReviewPacket, Run
from .statuses import STOP_EXPLANATIONS, Detail, Status

DETAIL_EXPLANATIONS: dict[str, str] = {
    Detail.MULTIPLE_CALLS: "The model asked for several calls at once; only one per reply is allowed.",
    Detail.UNKNOWN_TOOL: "The model asked for a tool that does not exist.",
    Detail.BAD_ARGUMENTS: "The model's arguments did not fit the tool's schema.",
    Detail.CALL_ID_CONFLICT: "The model reused a call id for a different call.",
    Detail.FORBIDDEN: "The customer's session may not make that lookup.",
    Detail.APPROVAL_DENIED: "A supervisor denied the lookup the run was waiting on.",
    Detail.ERROR: "The model provider returned an error.",
    Detail.TIMEOUT: "The model took longer than the operation timeout.",
    Detail.USAGE_OVERRUN: "The model reported more tokens than a request may use.",
}


def stop_explanation(status: str, detail: str = "", note: str = "") -> str:
    """The stop reason in plain words."""
    if status == Status.WAITING_APPROVAL:
        return "The run is waiting for a supervisor to approve or deny a lookup; its deadline keeps running."
    if status in (Status.QUEUED, Status.RUNNING):
        return "The run is still going."
    parts = [STOP_EXPLANATIONS.get(Status(status), status)]
    if detail:
        parts.append(DETAIL_EXPLANATIONS.get(detail, detail))
    if note:
        parts.append(f"Note: {note}")
    return " ".join(parts)


@dataclass(frozen=True)
class Step:
    kind: str  # "model_request" or "tool_attempt"
    seq: int
    started_at: datetime
    finished_at: datetime | None
    latency_ms: int | None
    outcome: str
    what: str
    reserved_tokens: int | None = None
    reserved_cost_micros: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    charged_tokens: int | None = None
    charged_cost_micros: int | None = None
    evidence: str | None = None
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in self.__dict__.items()}


def run_timeline(*, run: Run) -> list[Step]:
    """Every model request and tool attempt of the run, in the order they started."""
    steps = [
        Step("model_request", r.seq, r.started_at, r.finished_at, r.latency_ms, r.outcome,
             r.proposal or r.validation_error[:120] or "", r.reserved_tokens, r.reserved_cost_micros,
             r.input_tokens, r.output_tokens, r.charged_tokens, r.charged_cost_micros,
             error=r.error or r.validation_error)
        for r in run.model_request_rows.all()
    ]
    steps += [
        Step("tool_attempt", a.seq, a.started_at, a.finished_at, a.latency_ms, a.outcome,
             f"{a.tool} {json.dumps(a.args, sort_keys=True)}" + (f" (retry {a.retry_number})" if a.retry_number else ""),
             evidence=a.evidence.ref if a.evidence_id else None, error=a.error)
        for a in run.attempts.select_related("evidence")
    ]
    order = {"model_request": 0, "tool_attempt": 1}
    return sorted(steps, key=lambda s: (s.started_at, order[s.kind], s.seq))


SOURCE_KIND = {"search_docs": "document", "read_job_status": "job", "read_service_status": "service"}


@dataclass(frozen=True)
class EvidenceView:
    ref: str
    tool: str
    args: dict[str, Any]
    source_kind: str
    source: str
    excerpt: str
    truncated: bool
    captured_at: datetime

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "captured_at": self.captured_at.isoformat()}


def evidence_view(e: Evidence) -> EvidenceView:
    return EvidenceView(e.ref, e.tool, e.args, SOURCE_KIND.get(e.tool, "other"), _source(e), _excerpt(e),
                        e.truncated, e.captured_at)


def _source(e: Evidence) -> str:
    if e.tool == "search_docs":
        return ", ".join(s.strip().replace("@", " revision ") for s in e.source_ref.split(",")) or e.source_ref
    if e.tool == "read_service_status":
        return e.source_ref.removeprefix("service:") + " service status"
    return e.source_ref


def _excerpt(e: Evidence, width: int = 400) -> str:
    try:
        content = json.loads(e.content)
    except ValueError:
        return e.content[:width]
    if e.tool == "search_docs":
        hits = content.get("results", [])
        text = " | ".join(f"{h['id']} {h['revision']} “{h['title']}”: {h['excerpt']}" for h in hits)
        return (text or f"No documents matched “{content.get('query', '')}”.")[:width]
    if e.tool == "read_job_status":
        keys = ("kind", "status", "error_code", "requested_by", "requester_current_role", "failed_at")
        return ", ".join(f"{k}: {content.get(k)}" for k in keys if content.get(k) is not None)[:width]
    if e.tool == "read_service_status":
        incidents = "; ".join(f"{i['id']} {i['title']} ({i['status']})" for i in content.get("incidents", []))
        return f"status: {content.get('status')}" + (f"; incidents: {incidents}" if incidents else "")
    return e.content[:width]


def evidence_for(*, ticket_id: int, refs: list[str]) -> list[EvidenceView]:
    """The ticket's evidence items named by `refs`, in that order."""
    numbers = [int(r[1:]) for r in refs if r[:1] == "E" and r[1:].isdigit()]
    found = {e.number: e for e in Evidence.objects.filter(ticket_id=ticket_id, number__in=numbers)}
    return [evidence_view(found[n]) for n in numbers if n in found]


@dataclass(frozen=True)
class Bar:
    label: str
    used: float
    limit: float
    unit: str = ""

    @property
    def percent(self) -> int:
        if self.limit <= 0:
            return 100 if self.used else 0
        return min(int(round(100 * self.used / self.limit)), 100)

    def as_dict(self) -> dict[str, Any]:
        return {"label": self.label, "used": self.used, "limit": self.limit, "percent": self.percent}


def budget_bars(*, run: Run, now: datetime | None = None) -> list[Bar]:
    budget = run.get_budget()
    end = run.ended_at or now or timezone.now()
    elapsed = round(max((end - run.created_at).total_seconds(), 0.0), 1)
    return [
        Bar("Model requests", run.model_requests, budget.max_model_requests),
        Bar("Tool attempts", run.tool_attempts, budget.max_tool_attempts),
        Bar("Tokens", run.tokens_used + run.tokens_reserved, budget.max_total_tokens),
        Bar("Cost (micro-dollars)", run.cost_used_micros + run.cost_reserved_micros, budget.max_cost_micros),
        Bar("Seconds", min(elapsed, budget.deadline_seconds), budget.deadline_seconds),
    ]


def packet_of(run: Run) -> ReviewPacket | None:
    try:
        return run.packet
    except ReviewPacket.DoesNotExist:
        return None
