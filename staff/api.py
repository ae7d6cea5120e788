"""/api/ endpoints for runs, packets and approvals. Each one goes through staff.access."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any, Literal

from django.db.models import QuerySet
from django.utils import timezone
from ninja import Field, Header, Path, Query, Router, Schema
from ninja import Status as Reply
from pydantic import ConfigDict, field_validator

from engine.approvals import Waiting, approval_shown
from engine.budgets import BudgetSchema
from engine.models import Approval, PacketReview, ReviewPacket, Run, RunRequest
from engine.packetview import PacketView, packet_view
from engine.statuses import Detail, Status
from engine.timeline import EvidenceView, StepKind, budget_bars, evidence_for, packet_of, run_timeline, stop_explanation
from kit.adminkit import LargeListPaginator
from kit.apierrors import ERRORS, ErrorOut
from staff.access import (
    Refused,
    access_knowledge_gaps,
    access_packet,
    access_run,
    access_ticket,
    do_answer_approval,
    do_cancel,
    do_document_publish,
    do_investigate,
    do_packet_recheck,
    do_review,
    require,
)
from staff.gaps import GapTicket, Topic
from staff.periods import PeriodError, Preset, period_parse
from staff.recheck import document_links
from tickets.documents import CODE_MAX, CODE_PATTERN, Change, DocumentText
from tools.compare import Outcome

router = Router(tags=["agent"])

MAX_ID = 2**63 - 1
SAFE_TEXT = r"^[^\x00]*$"
REF = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$"
IDEMPOTENCY_KEY = r"^[\x21-\x7e]{1,200}$"  # printable ASCII, no spaces


class RunOut(Schema):
    id: int
    ticket: str
    status: Status
    detail: Detail | None
    stop_explanation: str
    model: str
    requested_by: str | None
    created_at: datetime
    deadline_at: datetime
    ended_at: datetime | None
    model_requests: int
    tool_attempts: int
    tokens_used: int
    cost_micros: int
    budget: BudgetSchema
    packet_id: int | None


class StepOut(Schema):
    kind: StepKind
    seq: int
    started_at: datetime
    finished_at: datetime | None
    latency_ms: int | None
    outcome: str
    what: str
    reserved_tokens: int | None
    reserved_cost_micros: int | None
    input_tokens: int | None
    output_tokens: int | None
    charged_tokens: int | None
    charged_cost_micros: int | None
    evidence: str | None
    error: str


class RefusedOut(Schema):
    tool: str | None
    args: Any
    id: str | None
    calls: list[Any] | None = None
    reason: str = Field(description="Why it was refused, for staff only: the model is not told this.")


class BarOut(Schema):
    label: str
    used: float
    limit: float
    percent: int


class ApprovalOut(Schema):
    id: int
    tool: str
    args: dict[str, Any]
    state: Approval.State
    reason: str
    note: str
    requested_at: datetime
    decided_by: str
    decided_at: datetime | None


class RunDetailOut(RunOut):
    subject: str
    body: str
    pending_call: dict[str, Any] | None
    approvals: list[ApprovalOut]
    timeline: list[StepOut]
    evidence: list[EvidenceView]
    budget_bars: list[BarOut]


class RunPage(Schema):
    items: list[RunOut]
    count: int = Field(description="The runs the filters match; past 10,000, PostgreSQL's estimate (count_estimated).")
    count_estimated: bool = Field(description="Whether `count` is an estimate: more or fewer runs may follow.")
    limit: int
    offset: int


class ReviewOut(Schema):
    id: int
    packet_id: int
    reviewer: str | None = Field(description="Empty (null) for a system entry: a packet superseded by a newer one.")
    decision: PacketReview.Decision
    note: str
    reason: PacketReview.Reason | None = Field(description="Why it was rejected; null otherwise.")
    reason_label: str | None
    reply: str = Field(description='The reply as the reviewer kept it (accepted packets); "" when none.')
    acknowledged_changed_evidence: bool
    changed_evidence: list[str]
    created_at: datetime


class DifferenceOut(Schema):
    field: str
    old: str
    new: str
    text: str
    document: str | None
    link: str | None


class EvidenceCheckOut(Schema):
    ref: str
    result: Outcome
    label: str
    reason: str
    differences: list[DifferenceOut]
    checked_at: datetime
    reused: bool


class LostLookupOut(Schema):
    tool: str
    args: dict[str, Any]
    outcome: str = Field(description="The last attempt's outcome: transient_error, timeout or interrupted.")
    why: str


class PacketOut(Schema):
    id: int
    run_id: int
    ticket: str
    subject: str
    body: str
    messages_seen: int = Field(description="The ticket's highest message number when the run started (0: none).")
    customer_wrote_again: bool = Field(
        description="Pending, and the customer added a message to the ticket after the run started."
    )
    summary: str | None
    reply: str = Field(description='The suggested reply to the customer, for staff to edit and send ("": none).')
    incomplete: bool = Field(
        description="A lookup of the run never got an answer (its service was down, or a worker restart cut it"
        " off): the findings lack it. `lost_lookups` names each."
    )
    lost_lookups: list[LostLookupOut]
    evidence: list[EvidenceView]
    attempts: list[dict[str, Any]]
    open_questions: list[str]
    stop_reason: Status
    detail: Detail | None
    stop_explanation: str
    refused: RefusedOut | None = Field(description="The proposal the run ended on, when it ended on one.")
    budget_spent: dict[str, Any]
    review_state: ReviewPacket.ReviewState
    reviews: list[ReviewOut]
    created_at: datetime
    evidence_checks: list[EvidenceCheckOut]
    approvals: list[ApprovalOut]


class StrictIn(Schema):
    model_config = ConfigDict(extra="forbid", strict=True)


class ReviewIn(StrictIn):
    decision: Literal[tuple(PacketReview.Action.values)]
    note: str = Field("", max_length=2000, pattern=SAFE_TEXT)
    reason: Literal[tuple(PacketReview.Reason.values)] | None = Field(
        None, description="Why a packet is rejected (required with reject; not kept with accept)."
    )
    reply: str | None = Field(
        None,
        max_length=5000,
        pattern=SAFE_TEXT,
        description="With accept: the reply to the customer as you will send it (the packet's suggestion, edited; "
        '"" when not used). Left out, the suggestion is kept unchanged.',
    )
    acknowledge_changed_evidence: bool = False
    change_decision: bool = Field(False, description="A new decision on a reviewed packet, on purpose (needs a note).")


class ApprovalIn(StrictIn):
    decision: Literal[tuple(Approval.Answer.values)]
    reason: str = Field(
        "",
        max_length=2000,
        pattern=SAFE_TEXT,
        description="Why the call is denied (optional); kept on the approval and shown in the packet.",
    )


class RunFilters(Schema):
    status: Status | None = None
    detail: Detail | None = None
    model: str | None = Field(None, max_length=120, pattern=SAFE_TEXT)
    ticket: str | None = Field(None, pattern=REF)
    since: datetime | None = None
    until: datetime | None = None
    purpose: Run.Purpose = Field(
        Run.Purpose.INVESTIGATION, description="investigation (the default) or evaluation: a candidate model's runs"
    )
    limit: int = Field(20, ge=1, le=100)
    offset: int = Field(0, ge=0, le=1_000_000)

    @field_validator("since", "until")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        """Compare in UTC; a naive time is UTC. Years outside 1970-9998 cannot match a run."""
        if value is None:
            return None
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value
        if not 1970 <= value.year <= 9998:
            raise ValueError("the year must be between 1970 and 9998")
        return value.astimezone(UTC)


# --- shapes ----------------------------------------------------------------------


def run_out(run: Run) -> dict[str, Any]:
    packet = packet_of(run)
    request = getattr(run, "request", None)  # RelatedObjectDoesNotExist is an AttributeError
    return {
        "id": run.pk,
        "ticket": run.ticket.ref,
        "status": run.status,
        "detail": run.detail or None,
        "stop_explanation": stop_explanation(run.status, run.detail, run.stop_note, model_name=run.model_name),
        "model": run.model_name,
        "requested_by": request.requested_by.get_username() if request and request.requested_by else None,
        "created_at": run.created_at,
        "deadline_at": run.deadline_at,
        "ended_at": run.ended_at,
        "model_requests": run.model_requests,
        "tool_attempts": run.tool_attempts,
        "tokens_used": run.tokens_used,
        "cost_micros": run.cost_used_micros,
        "budget": run.budget,
        "packet_id": packet.pk if packet else None,
    }


def run_detail_out(run: Run) -> dict[str, Any]:
    return {
        **run_out(run),
        "subject": run.subject,
        "body": run.body,  # the ticket's text as the run was shown it
        "pending_call": run.pending_call,
        "approvals": approvals_out(run),
        "timeline": [s.as_dict() for s in run_timeline(run=run)],
        "evidence": evidence_for(ticket_id=run.ticket_id, refs=list(run.evidence_refs)),
        "budget_bars": [b.as_dict() for b in budget_bars(run=run)],
    }


def approvals_out(run: Run) -> list[dict[str, Any]]:
    """A run's approvals; a pending one whose run has ended or passed its deadline is shown expired."""
    now = timezone.now()
    return [approval_out(approval_shown(a, run, now)) for a in run.approvals.all()]


def approval_out(shown: Waiting) -> dict[str, Any]:
    a = shown.approval
    return {
        "id": a.pk,
        "tool": a.tool,
        "args": a.args,
        "state": shown.state_shown,
        "reason": a.reason,
        "note": a.note,
        "requested_at": a.requested_at,
        "decided_by": a.decided_by,
        "decided_at": a.decided_at,
    }


def review_out(review: PacketReview) -> dict[str, Any]:
    reviewer = review.reviewer.get_username() if review.reviewer else None
    return {
        "id": review.pk,
        "packet_id": review.packet_id,
        "reviewer": reviewer,
        "decision": review.decision,
        "note": review.note,
        "reason": review.reason or None,
        "reason_label": review.get_reason_display() if review.reason else None,
        "reply": review.reply,
        "acknowledged_changed_evidence": review.acknowledged_changed_evidence,
        "changed_evidence": review.changed_evidence,
        "created_at": review.created_at,
    }


def packet_out(view: PacketView) -> dict[str, Any]:
    """The packet as the API shows it: every field read from its PacketView (engine.packetview)."""
    return {
        "id": view.id,
        "run_id": view.run_id,
        "ticket": view.ticket_ref,
        "subject": view.subject,
        "body": view.body,
        "messages_seen": view.messages_seen,
        "customer_wrote_again": view.customer_wrote_again,
        "summary": view.summary,
        "reply": view.reply,
        "incomplete": view.incomplete,
        "lost_lookups": [
            {"tool": lost.tool, "args": lost.args, "outcome": lost.outcome, "why": lost.why}
            for lost in view.lost_lookups
        ],
        "evidence": view.evidence,
        "attempts": view.attempts,
        "open_questions": view.open_questions,
        "stop_reason": view.stop_reason,
        "detail": view.detail or None,
        "stop_explanation": view.stop_explanation,
        "refused": view.refused,
        "budget_spent": view.budget_spent,
        "review_state": view.review_state,
        "reviews": [review_out(r) for r in view.reviews],
        "created_at": view.created_at,
        "evidence_checks": list(view.evidence_checks),
        "approvals": [approval_out(w) for w in view.approvals],
    }


def runs_filtered(f: RunFilters) -> QuerySet[Run]:
    runs = Run.objects.select_related("ticket", "packet", "request__requested_by").order_by("-created_at", "-id")
    runs = runs.filter(purpose=f.purpose)
    if f.status:
        runs = runs.filter(status=f.status)
    if f.detail:
        runs = runs.filter(detail=f.detail)
    if f.model:
        runs = runs.filter(model_name=f.model)
    if f.ticket:
        runs = runs.filter(ticket__ref=f.ticket)
    if f.since:
        runs = runs.filter(created_at__gte=f.since)
    if f.until:
        runs = runs.filter(created_at__lt=f.until)
    return runs


# --- endpoints -------------------------------------------------------------------

IdPath = Path(..., ge=1, le=MAX_ID)


@router.post("/tickets/{ref}/investigations", response={202: RunOut, ERRORS: ErrorOut})
def start_investigation(
    request,
    ref: str = Path(..., pattern=REF),
    idempotency_key: str | None = Header(None, alias="Idempotency-Key", pattern=IDEMPOTENCY_KEY),
):
    """Start an investigation of the ticket. A retry with the same `Idempotency-Key` returns the same run."""
    ticket = access_ticket(user=request.auth, ref=ref)
    run, _created = do_investigate(
        user=request.auth, ticket=ticket, via=RunRequest.Via.API, idempotency_key=idempotency_key or ""
    )
    return Reply(202, run_out(access_run(user=request.auth, run_id=run.pk)))


@router.get("/runs", response={200: RunPage, ERRORS: ErrorOut})
def list_runs(request, filters: Query[RunFilters]):
    """Runs, newest first, filtered and paginated (`limit`, `offset`)."""
    require(request.auth, "agentrun.view_run")
    runs = runs_filtered(filters)
    # The page's ids first, then their rows: an offset skips index entries alone, where skipping whole rows
    # joined to their tickets and packets took 335 ms at offset 10,000 (bench/pages_bench.py).
    ids = list(runs.values_list("pk", flat=True)[filters.offset : filters.offset + filters.limit])
    page = list(runs.filter(pk__in=ids))
    counted = LargeListPaginator(runs, filters.limit)  # COUNT(*) read every run matched: 230 ms at 100,000
    return {
        "items": [run_out(r) for r in page],
        "count": counted.count,
        "count_estimated": counted.estimated,
        "limit": filters.limit,
        "offset": filters.offset,
    }


@router.get("/runs/{run_id}", response={200: RunDetailOut, ERRORS: ErrorOut})
def get_run(request, run_id: int = IdPath):
    """A run with its timeline of model requests and tool attempts, its evidence and budget use."""
    return run_detail_out(access_run(user=request.auth, run_id=run_id))


@router.post("/runs/{run_id}/cancel", response={200: RunOut, ERRORS: ErrorOut})
def cancel_run(request, run_id: int = IdPath):
    """Cancel a run (supervisors, or whoever started it). A run in the middle of an operation stops before its next one."""
    do_cancel(user=request.auth, run_id=run_id)
    return run_out(access_run(user=request.auth, run_id=run_id))


@router.post("/runs/{run_id}/approval", response={200: RunOut, ERRORS: ErrorOut})
def answer_approval(request, payload: ApprovalIn, run_id: int = IdPath):
    """Grant or deny the call a run waits on (supervisors). After the deadline it changes nothing."""
    do_answer_approval(
        user=request.auth, run_id=run_id, grant=payload.decision == Approval.Answer.GRANT, note=payload.reason
    )
    return run_out(access_run(user=request.auth, run_id=run_id))


@router.get("/packets/{packet_id}", response={200: PacketOut, ERRORS: ErrorOut})
def get_packet(request, packet_id: int = IdPath):
    """A review packet with its cited evidence inline, each item re-checked against its source now, and its
    review history."""
    packet = access_packet(user=request.auth, packet_id=packet_id)
    checks = do_packet_recheck(user=request.auth, packet=packet)
    links = document_links(checks)
    return packet_out(packet_view(run=packet.run, packet=packet, evidence_checks=[c.as_dict(links) for c in checks]))


@router.post("/packets/{packet_id}/review", response={200: ReviewOut, 201: ReviewOut, ERRORS: ErrorOut})
def review_packet(request, payload: ReviewIn, packet_id: int = IdPath):
    """Accept or reject a packet; a rejection needs a `reason` and a note. An acceptance keeps `reply`, the
    reply as it will be sent (the packet's suggestion when left out). An acceptance re-reads every cited item now: one that
    changed or is gone needs `acknowledge_changed_evidence: true` (409 `evidence_changed` otherwise). A reviewed
    packet keeps its decision: the same reviewer's same decision again answers 200 with the review already
    recorded; another decision is 409 `already_reviewed` unless `change_decision: true` with a note. Reviews are
    appended, never edited."""
    decision = PacketReview.Action(payload.decision).decision
    review, created = do_review(
        user=request.auth,
        packet_id=packet_id,
        decision=decision,
        note=payload.note,
        reason=payload.reason or "",
        reply=payload.reply,
        acknowledge_changed_evidence=payload.acknowledge_changed_evidence,
        change_decision=payload.change_decision,
    )
    return Reply(201 if created else 200, review_out(PacketReview.objects.select_related("reviewer").get(pk=review.pk)))


# --- knowledge gaps ----------------------------------------------------------------------


class GapsFilters(Schema):
    first: date | None = Field(None, description="The period's first day (UTC; default: 29 days before `last`).")
    last: date | None = Field(None, description="The period's last day, included (UTC; default: today).")


class GapPacketOut(Schema):
    id: int
    at: datetime = Field(description="When it showed the gap: the rejection's time, else the packet's.")
    open_questions: list[str] = Field(description="Its open questions that ask which article should have answered.")
    handoff: str = Field(
        description="What the rules searched and found no article for, when they handed the ticket to a person for"
        ' it ("" otherwise).'
    )
    rejected_no_article: bool = Field(description="Its decision is a rejection because no article answers it.")
    note: str = Field(description='The reviewer\'s note of that rejection ("" otherwise).')


class GapTicketOut(Schema):
    ticket: str
    subject: str
    last_at: datetime
    packets: list[GapPacketOut]


class TopicOut(Schema):
    key_words: list[str] = Field(description="The words its tickets share, most shared first.")
    ticket_count: int
    last_at: datetime
    tickets: list[GapTicketOut]


class GapsOut(Schema):
    first: date
    last: date
    topics: list[TopicOut] = Field(description="Most asked first.")


def gap_ticket_out(ticket: GapTicket) -> dict[str, Any]:
    return {
        "ticket": ticket.ref,
        "subject": ticket.subject,
        "last_at": ticket.last_at,
        "packets": [
            {
                "id": p.id,
                "at": p.at,
                "open_questions": list(p.questions),
                "handoff": p.handoff,
                "rejected_no_article": p.rejected,
                "note": p.note,
            }
            for p in ticket.packets
        ],
    }


def topic_out(topic: Topic) -> dict[str, Any]:
    return {
        "key_words": list(topic.key_words),
        "ticket_count": len(topic.tickets),
        "last_at": topic.last_at,
        "tickets": [gap_ticket_out(t) for t in topic.tickets],
    }


@router.get("/knowledge-gaps", response={200: GapsOut, ERRORS: ErrorOut})
def knowledge_gaps(request, filters: Query[GapsFilters]):
    """What customers asked that no article answered, grouped by topic, most asked first (supervisors): the
    packets that asked which article should have answered, those handed to a person because no article matched,
    and those rejected because no article answers it."""
    try:
        period = period_parse(
            first=filters.first.isoformat() if filters.first else None,
            last=filters.last.isoformat() if filters.last else None,
            default=Preset.LAST_30,
        )
    except PeriodError as exc:
        raise Refused("bad_period", str(exc), 422) from None
    topics = access_knowledge_gaps(user=request.auth, period=period)
    return {"first": period.first, "last": period.last, "topics": [topic_out(t) for t in topics]}


# --- documents from a knowledge base ------------------------------------------------------


class PublishOut(Schema):
    code: str
    revision: str
    change: Change
    new_revision: bool


@router.put("/documents/{code}", tags=["documents"], response={frozenset({200, 201}): PublishOut, ERRORS: ErrorOut})
def put_document(request, payload: DocumentText, code: str = Path(..., pattern=CODE_PATTERN, max_length=CODE_MAX)):
    """Publish a revision of document `code` (201 when the document is new). The same text, title and
    visibility again make no revision (`new_revision` false)."""
    outcome = do_document_publish(user=request.auth, code=code, text=payload)
    out = {
        "code": outcome.code,
        "revision": outcome.revision,
        "change": outcome.change,
        "new_revision": outcome.new_revision,
    }
    return Reply(201 if outcome.change is Change.ADDED else 200, out)
