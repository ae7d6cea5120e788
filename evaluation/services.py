"""Testing a candidate model against reviewed packets.

Each case runs the candidate over a copy of a reviewed packet's ticket (so its
evidence takes no E-numbers on the real ticket) through the same loop, with the
original run's budget. Its run is marked `Run.Purpose.EVALUATION`: it never enters
the review queue, the outcomes dashboard or the webhook. By default its tools
answer from what the original run recorded (`RecordedDispatcher`); with
`live_tools` they read the live backends. The loop reaches this module through
its one hook (engine.loop.run_io), which imports evaluation.replay there so a
real run never loads it.

A case runs inline (`evaluation_run`) or on a worker (evaluation.tasks); either way
through `case_run`, which is safe to call twice: a finished case is never run again.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from django.db import models, transaction
from django.db.models import Count, OuterRef, Q, Subquery
from django.utils import timezone

from engine.budgets import Budget
from engine.loop import run_advance
from engine.models import Approval, Evaluation, EvaluationCase, PacketReview, ReviewPacket, Run
from engine.services import RunError, approval_answer, run_start
from engine.statuses import Status
from tickets.models import Evidence, Ticket
from tickets.services import ticket_messages_copy
from tools.base import call_key

MAX_APPROVAL_ROUNDS = 20
HELD_WAIT_SECONDS = 1.0  # between looks at a run another process holds
REVIEW_STATES = {
    Evaluation.Reviewed.ACCEPTED: [ReviewPacket.ReviewState.ACCEPTED],
    Evaluation.Reviewed.REJECTED: [ReviewPacket.ReviewState.REJECTED],
    Evaluation.Reviewed.ALL: [ReviewPacket.ReviewState.ACCEPTED, ReviewPacket.ReviewState.REJECTED],
}


# --- creating, running and resuming ---------------------------------------------------


def reviewed_runs(*, reviewed: str, since: datetime | None, limit: int | None) -> list[Run]:
    """The runs of the packets reviewed as `reviewed`, oldest packet first, each with its packet and the reason
    of its decision (`decision_reason`: why it was rejected; "" or None for an accepted one)."""
    packets = ReviewPacket.objects.filter(
        review_state__in=REVIEW_STATES[reviewed], run__purpose=Run.Purpose.INVESTIGATION
    ).order_by("created_at", "id")
    if since is not None:
        packets = packets.filter(created_at__gte=since)
    decision = PacketReview.objects.filter(packet__run=OuterRef("pk"), reviewer__isnull=False)
    runs = (
        Run.objects.filter(pk__in=packets.values("run_id"))
        .select_related("packet")
        .annotate(decision_reason=Subquery(decision.order_by("-created_at", "-id").values("reason")[:1]))
        .order_by("packet__created_at", "pk")
    )
    return list(runs[:limit] if limit else runs)


def evaluation_create(
    *,
    candidate_model: str,
    reviewed: str = Evaluation.Reviewed.ACCEPTED,
    since: datetime | None = None,
    limit: int | None = None,
    live_tools: bool = False,
    model_script: list[Any] | None = None,
    created_by: str = "",
) -> Evaluation:
    """An evaluation and one pending case per reviewed packet it covers."""
    with transaction.atomic():
        evaluation = Evaluation.objects.create(
            candidate_model=candidate_model,
            reviewed=reviewed,
            since=since,
            limit=limit,
            live_tools=live_tools,
            model_script=model_script,
            created_by=created_by,
        )
        EvaluationCase.objects.bulk_create(
            EvaluationCase(
                evaluation=evaluation,
                original_run=run,
                original_review=run.packet.review_state,
                original_reason=_rejection_reason(run),
            )
            for run in reviewed_runs(reviewed=reviewed, since=since, limit=limit)
        )
    return evaluation


def _rejection_reason(run: Run) -> str:
    """Why the run's packet was rejected (reviewed_runs' `decision_reason`); "" for an accepted packet."""
    rejected = run.packet.review_state == ReviewPacket.ReviewState.REJECTED
    return (getattr(run, "decision_reason", None) or "") if rejected else ""


def unfinished_like(**arguments: Any) -> Evaluation | None:
    """The last unfinished evaluation started with the same arguments."""
    script = arguments.pop("model_script", None)
    same = Evaluation.objects.filter(finished_at__isnull=True, **arguments)
    # A JSON field compared with None matches a JSON null; no script is stored as SQL NULL.
    same = same.filter(model_script__isnull=True) if script is None else same.filter(model_script=script)
    return same.order_by("-started_at", "-id").first()


def evaluation_run(evaluation: Evaluation, *, progress: Callable[[int, int], None] | None = None) -> Evaluation:
    """Run every case not yet done, inline; a finished case is never run again. Then the figures."""
    done, total = evaluation_progress(evaluation)
    for case_id in evaluation.cases.exclude(state=EvaluationCase.State.DONE).values_list("pk", flat=True):
        while not case_run(case_id=case_id):  # a worker, or a run cut off here, holds the run until its lease ends
            time.sleep(HELD_WAIT_SECONDS)
        done += 1
        if progress:
            progress(done, total)
    return evaluation_finish(evaluation)


def evaluation_progress(evaluation: Evaluation) -> tuple[int, int]:
    """How many of the evaluation's cases are done, of how many."""
    counts = evaluation.cases.aggregate(total=Count("pk"), done=Count("pk", filter=Q(state=EvaluationCase.State.DONE)))
    return counts["done"], counts["total"]


def case_run(*, case_id: int) -> bool:
    """Run one case to its end and finish it; True once it is done (now or before).

    Safe to call twice, at once too (a duplicate delivery, a resumed evaluation): the case
    row's lock lets one call start the candidate's run, the run's lease lets one drive it,
    and the case is finished once. False when another process holds the run: the caller
    looks again later, and whoever sees the run end finishes the case.
    """
    case = case_claim(case_id=case_id)
    if case is None:
        return True
    run = _drive(case)
    if run.is_active and run.status != Status.WAITING_APPROVAL:
        return False
    case_finish(case_id=case_id, run=run)
    return True


def case_claim(*, case_id: int) -> EvaluationCase | None:
    """The case with its candidate's run (started here if it had none), or None when the case is done.

    Holds the case row's lock while it decides, so two callers start one run. The row is locked
    alone: a row joined to it would be read as it was before the wait for the lock (a run started
    meanwhile would look absent), so the decision reads only the locked row's own columns.
    """
    with transaction.atomic():
        case = EvaluationCase.objects.select_for_update().get(pk=case_id)
        if case.state == EvaluationCase.State.DONE:
            return None
        if case.candidate_run_id is None:
            case_start(case)
    return case


def case_start(case: EvaluationCase) -> Run:
    """The candidate's run on a fresh copy of the original ticket, with the original run's budget."""
    original, evaluation = case.original_run, case.evaluation
    with transaction.atomic():
        ticket = Ticket.objects.create(
            ref=f"{original.ticket.ref[:18]}~eval~{uuid.uuid4().hex[:8]}",
            account_id=original.ticket.account_id,
            session_id=original.ticket.session_id,
            subject=original.subject,
            body=original.body,
            evaluation_copy=True,
        )
        ticket_messages_copy(source_id=original.ticket_id, ticket=ticket, up_to=original.messages_seen)
        run = run_start(
            ticket=ticket,
            session=original.session,
            model_name=evaluation.candidate_model,
            budget=Budget.from_mapping(original.budget),
            model_script=_script(evaluation),
            purpose=Run.Purpose.EVALUATION,
        )
        case.candidate_run = run
        case.save(update_fields=["candidate_run"])
    return run


def _script(evaluation: Evaluation) -> dict[str, Any] | None:
    return {"model": evaluation.model_script} if evaluation.model_script is not None else None


def _drive(case: EvaluationCase) -> Run:
    """Drive the run to its end; a call waiting for approval gets the original run's answer."""
    run = run_advance(case.candidate_run.pk)
    for _ in range(MAX_APPROVAL_ROUNDS):
        if run.status != Status.WAITING_APPROVAL:
            break
        _answer_as_before(case, run)
        run = run_advance(run.pk)
    return run


def _answer_as_before(case: EvaluationCase, run: Run) -> None:
    """Grant the pending call if the original run had it granted, else deny it; nothing if another
    caller of the same case answered it first."""
    pending = run.approvals.filter(state=Approval.State.PENDING).first()
    if pending is None:
        return
    granted = case.original_run.approvals.filter(
        call_key=pending.call_key, state__in=[Approval.State.GRANTED, Approval.State.USED]
    ).exists()
    try:
        approval_answer(run_id=run.pk, grant=granted, decided_by="evaluation", resume=False)
    except RunError as exc:
        if exc.code != "not_waiting":
            raise


def cited_sources(run: Run) -> list[str]:
    """Tool and arguments of each evidence item the run's packet cites: comparable across tickets."""
    packet = ReviewPacket.objects.filter(run=run).first()
    if packet is None:
        return []
    numbers = [int(ref[1:]) for ref in packet.evidence_refs if str(ref)[1:].isdigit()]
    items = Evidence.objects.filter(ticket_id=run.ticket_id, number__in=numbers)
    return sorted({call_key(e.tool, e.args) for e in items})


class CaseResult(models.TextChoices):
    """What one case shows, exactly one of these: the table's row, the header's counts and the CSV agree."""

    AGREED = "agreed", "agrees"
    AGREED_WITH_REJECTED = "agreed_with_rejected", "agrees with a rejected packet"
    REGRESSION = "regression", "regression"
    DIFFERS = "differs", "differs"
    PENDING = "pending", "pending"


def case_result(
    *, done: bool, original_review: str, drafted: bool, original_drafted: bool, overlap: float | None
) -> CaseResult:
    """Pure. Agreement is with an accepted packet; matching a rejected one is reported as such, never
    counted as agreement. A regression is an accepted packet's draft lost, or fewer of its sources cited."""
    if not done:
        return CaseResult.PENDING
    every_source = overlap is None or overlap >= 1.0
    if original_review == ReviewPacket.ReviewState.ACCEPTED and (
        (original_drafted and not drafted) or not every_source
    ):
        return CaseResult.REGRESSION
    if drafted == original_drafted and every_source:
        accepted = original_review == ReviewPacket.ReviewState.ACCEPTED
        return CaseResult.AGREED if accepted else CaseResult.AGREED_WITH_REJECTED
    return CaseResult.DIFFERS


def result_of(case: EvaluationCase) -> CaseResult:
    """The case's result from its stored figures (rows recorded before results were told apart read right too)."""
    return case_result(
        done=case.state == EvaluationCase.State.DONE,
        original_review=case.original_review,
        drafted=case.drafted,
        original_drafted=case.original_drafted,
        overlap=case.overlap,
    )


def case_figures(*, original: Run, candidate: Run) -> dict[str, Any]:
    """What the case's table row shows: a pure comparison of the two runs' records."""
    accepted, cited = cited_sources(original), cited_sources(candidate)
    drafted = ReviewPacket.objects.filter(run=candidate, summary__isnull=False).exists()
    original_drafted = original.packet.summary is not None
    overlap = round(len(set(accepted) & set(cited)) / len(accepted) if accepted else 1.0, 4)
    result = case_result(
        done=True,
        original_review=original.packet.review_state,
        drafted=drafted,
        original_drafted=original_drafted,
        overlap=overlap,
    )
    ended = candidate.ended_at or timezone.now()
    return {
        "status": candidate.status,
        "detail": candidate.detail,
        "drafted": drafted,
        "original_drafted": original_drafted,
        "cited_sources": cited,
        "accepted_sources": accepted,
        "overlap": overlap,
        "model_requests": candidate.model_requests,
        "tokens": candidate.tokens_used,
        "cost_micros": candidate.cost_used_micros,
        "original_cost_micros": original.cost_used_micros,
        "wall_seconds": round((ended - candidate.created_at).total_seconds(), 3),
        "agreed": result == CaseResult.AGREED,
        "regression": result == CaseResult.REGRESSION,
    }


def case_finish(*, case_id: int, run: Run) -> None:
    """Record the case's figures once: under the case row's lock, a case already done is left alone.
    The last case to finish finishes the evaluation (its figures), wherever it ran."""
    with transaction.atomic():
        case = EvaluationCase.objects.select_for_update().get(pk=case_id)  # alone, as in case_claim
        if case.state == EvaluationCase.State.DONE:
            return
        for name, value in case_figures(original=case.original_run, candidate=run).items():
            setattr(case, name, value)
        case.state = EvaluationCase.State.DONE
        case.save()
    if not case.evaluation.cases.exclude(state=EvaluationCase.State.DONE).exists():
        evaluation_finish(case.evaluation)


def evaluation_figures(cases: Iterable[EvaluationCase]) -> dict[str, Any]:
    """The header's figures, counted from the cases' results (`result_of`), the same the table's rows show:
    agreement with accepted packets, agreement with rejected ones apart (and the rejected ones by their reviewers'
    reason, "" for a rejection recorded without one), regressions, draft and handoff rates, cost per case against
    the originals."""
    cases = [c for c in cases if c.state == EvaluationCase.State.DONE]
    results = [result_of(c) for c in cases]
    accepted = sum(c.original_review == ReviewPacket.ReviewState.ACCEPTED for c in cases)
    n = len(cases)

    def share(count: int, of: int) -> float | None:
        return round(count / of, 4) if of else None

    def counted(result: CaseResult) -> int:
        return results.count(result)

    return {
        "cases": n,
        "accepted_cases": accepted,
        "rejected_cases": sum(c.original_review == ReviewPacket.ReviewState.REJECTED for c in cases),
        "rejected_by_reason": dict(
            Counter(c.original_reason for c in cases if c.original_review == ReviewPacket.ReviewState.REJECTED)
        ),
        "agreed": counted(CaseResult.AGREED),
        "agreement": share(counted(CaseResult.AGREED), accepted),
        "agreed_with_rejected": counted(CaseResult.AGREED_WITH_REJECTED),
        "differs": counted(CaseResult.DIFFERS),
        "draft_rate": share(sum(c.drafted for c in cases), n),
        "handoff_rate": share(sum(c.status == Status.NEEDS_HELP for c in cases), n),
        "cost_micros_per_case": share(sum(c.cost_micros for c in cases), n),
        "original_cost_micros_per_case": share(sum(c.original_cost_micros for c in cases), n),
        "regressions": [c.original_run_id for c, r in zip(cases, results, strict=True) if r == CaseResult.REGRESSION],
    }


def evaluation_finish(evaluation: Evaluation) -> Evaluation:
    """The figures of the cases done so far; finished (once) when none is left."""
    evaluation.refresh_from_db(fields=["finished_at"])
    evaluation.figures = evaluation_figures(evaluation.cases.all())
    if evaluation.finished_at is None and not evaluation.cases.exclude(state=EvaluationCase.State.DONE).exists():
        evaluation.finished_at = timezone.now()
    evaluation.save(update_fields=["figures", "finished_at"])
    return evaluation
