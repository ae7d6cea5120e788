"""Reads about runs: a run locked for a step, the context a model is shown, the report."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, Min
from django.utils import timezone
from django.utils.crypto import salted_hmac

from supportagent.rows import column, columns, field, row_from, rows_convert, table, width
from tickets.models import CustomerSession, Evidence, Ticket

from .budgets import Budget
from .context import AttemptItem, Context, EvidenceItem, fit_context
from .models import Approval, ModelRequest, Observation, Run, StaffPreference, ToolAttempt, default_time_zone
from .operations import Tally
from .statuses import ACTIVE, Status
from .tools import TOOLS


def run_get_locked(*, run_id: int, tally: Tally | None = None, ticket: bool = False) -> Run:
    """The run, row-locked until the transaction ends (needs one), with its customer session and row tally.

    One statement: the run's columns, its session's (a session can be verified
    or revoked while a run goes on), with `ticket` its ticket's, and, unless
    `tally` is given, how many request and attempt rows the run has, so that a
    step numbers what it reserves without reading again.
    """
    connection = transaction.get_connection()
    lock = connection.features.has_select_for_update
    with connection.cursor() as cursor:
        if tally is None:
            cursor.execute(_locked_sql(lock, tally=True, ticket=ticket), [*TOOLS, run_id])
        else:
            cursor.execute(_locked_sql(lock, tally=False, ticket=ticket), [run_id])
        row = cursor.fetchone()
    if row is None:
        raise Run.DoesNotExist(f"no run {run_id}")
    n = width(Run)
    m = n + width(CustomerSession)
    run = row_from(Run, row[:n], alias=connection.alias)
    run.session = row_from(CustomerSession, row[n:m], alias=connection.alias)
    if ticket:
        run.ticket = row_from(Ticket, row[m : m + width(Ticket)], alias=connection.alias)
        m += width(Ticket)
    if tally is None:
        requests, attempts, *per_tool = row[m:]
        tally = Tally(requests, attempts, tuple(zip(TOOLS, per_tool)))
    run.tally = tally
    return run


def run_relock(*, run: Run) -> Run:
    """`run` as a step left it, row-locked again (needs a transaction) and brought up to date.

    Only the run's lock and the columns others may change while a worker holds
    it are read: its version, lease and status (which every other writer
    changes together with the version), the cancellation flag, and its customer
    session. When the version, lease or status differ, the run is read whole.
    """
    connection = transaction.get_connection()
    with connection.cursor() as cursor:
        cursor.execute(_relock_sql(connection.features.has_select_for_update), [run.pk])
        row = cursor.fetchone()
    if row is None:
        raise Run.DoesNotExist(f"no run {run.pk}")
    version, lease_owner, status, cancel_requested = rows_convert(_RELOCK_FIELDS, [row[:4]])[0]
    if (version, lease_owner, status) != (run.version, run.lease_owner, run.status):
        return run_get_locked(run_id=run.pk)
    run.cancel_requested = cancel_requested
    session = tuple(row[4:])
    if run.__dict__.get("_session_row") != session:  # changed (or not seen): a new instance
        run.session = row_from(CustomerSession, session, alias=connection.alias)
        run._session_row = session
    return run


_RELOCK_FIELDS = [field(Run, name) for name in ("version", "lease_owner", "status", "cancel_requested")]


@cache
def _relock_sql(lock: bool) -> str:
    return (
        f"SELECT {', '.join('r.' + column(Run, f.name) for f in _RELOCK_FIELDS)}, {columns(CustomerSession, 's.')}"
        f" FROM {table(Run)} r JOIN {table(CustomerSession)} s ON s.id = r.{column(Run, 'session')}"
        f" WHERE r.id = %s" + (" FOR UPDATE OF r" if lock else "")
    )


@cache
def _locked_sql(lock: bool, *, tally: bool, ticket: bool = False) -> str:
    run_fk, tool = column(ToolAttempt, "run"), column(ToolAttempt, "tool")
    counts = (
        f", (SELECT COUNT(*) FROM {table(ModelRequest)} q WHERE q.{column(ModelRequest, 'run')} = r.id),"
        f" (SELECT COUNT(*) FROM {table(ToolAttempt)} t WHERE t.{run_fk} = r.id)"
        + "".join(f", (SELECT COUNT(*) FROM {table(ToolAttempt)} t WHERE t.{run_fk} = r.id AND t.{tool} = %s)"
                  for _ in TOOLS)
    )
    return (
        f"SELECT {columns(Run, 'r.')}, {columns(CustomerSession, 's.')}"
        + (f", {columns(Ticket, 't.')}" if ticket else "") + (counts if tally else "")
        + f" FROM {table(Run)} r JOIN {table(CustomerSession)} s ON s.id = r.{column(Run, 'session')}"
        + (f" JOIN {table(Ticket)} t ON t.id = r.{column(Run, 'ticket')}" if ticket else "")
        + " WHERE r.id = %s" + (" FOR UPDATE OF r" if lock else "")
    )


def run_context(*, run: Run, budget: Budget, shown_allowances: dict[str, Any], reserve_bytes: int = 0) -> Context:
    """The ticket's text as the run started with it, its evidence (each item once), this run's lookups
    and recent problems, fitted to the cap.

    The data blocks' id is keyed by the run and the secret key: the same in each of the run's requests
    (a provider can cache the prompt's unchanged start), and not to be guessed by whoever writes the ticket.
    """
    evidence, attempts, notes = _shown(ticket_id=run.ticket_id, run_id=run.pk)
    ctx = Context(
        ticket_ref=run.ticket.ref,
        subject=run.subject,
        body=run.body,
        session_verified=run.session.verified,
        evidence=evidence,
        attempts=attempts,
        notes=notes,
        allowances=shown_allowances,
        fence_key=salted_hmac("agentrun.context.fence_key", run.pk).hexdigest(),
    )
    return fit_context(ctx, max(budget.max_input_tokens - reserve_bytes, 0))


def _shown(*, ticket_id: int, run_id: int):
    """The ticket's evidence, the run's attempts and its last few notes to the model.

    One statement in three parts, each in order: evidence by number, attempts
    by sequence, notes oldest first.
    """
    sql = _shown_sql(last_notes=5)
    with connection.cursor() as cursor:
        cursor.execute(sql, [ticket_id, run_id, run_id, Observation.DISCARDED])
        rows = cursor.fetchall()
    fields = [field(Evidence, name) for name in ("number", "tool", "args", "content", "source_ref", "truncated")]
    evidence, attempts, notes = [], [], []
    for part, _, number, tool, args, text, source_ref, truncated in rows:
        if part == 0:
            number, tool, args, text, source_ref, truncated = rows_convert(
                fields, [(number, tool, args, text, source_ref, truncated)])[0]
            evidence.append(EvidenceItem(f"E{number}", tool, args, text, source_ref, truncated))
        elif part == 1:
            args = rows_convert(fields[2:3], [(args,)])[0][0]
            attempts.append(AttemptItem(tool, args, text, f"E{number}" if number is not None else ""))
        else:
            notes.append(text)
    return tuple(evidence), tuple(attempts), tuple(notes)


@cache
def _shown_sql(*, last_notes: int) -> str:
    e, a, n = _columns(Evidence), _columns(ToolAttempt), _columns(Observation)
    return (
        f"SELECT 0, e.{e['number']}, e.{e['number']}, e.{e['tool']}, e.{e['args']}, e.{e['content']},"
        f" e.{e['source_ref']}, e.{e['truncated']} FROM {table(Evidence)} e WHERE e.{e['ticket']} = %s"
        f" UNION ALL SELECT 1, a.{a['seq']}, x.{e['number']}, a.{a['tool']}, a.{a['args']}, a.{a['outcome']},"
        f" NULL, NULL FROM {table(ToolAttempt)} a LEFT JOIN {table(Evidence)} x ON x.{e['id']} = a.{a['evidence']}"
        f" WHERE a.{a['run']} = %s"
        f" UNION ALL SELECT 2, n.{n['id']}, NULL, NULL, NULL, n.{n['text']}, NULL, NULL FROM"
        f" (SELECT {n['id']}, {n['text']} FROM {table(Observation)} WHERE {n['run']} = %s AND {n['kind']} <> %s"
        f" ORDER BY {n['id']} DESC LIMIT {int(last_notes)}) n"
        " ORDER BY 1, 2"
    )


def _columns(model) -> dict[str, str]:
    return {f.name: column(model, f.name) for f in model._meta.concrete_fields}


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
        n=Count("pk"), oldest=Min("created_at"))
    oldest = queued["oldest"]
    age = max((timezone.now() - oldest).total_seconds(), 0.0) if oldest else 0.0
    waiting = Approval.objects.filter(state=Approval.State.PENDING, run__purpose=Run.Purpose.INVESTIGATION).count()
    return QueueFigures(queued["n"], age, waiting)


def staff_time_zone(*, user_id: int) -> str:
    """The time zone a staff member sees times in: their preference, else settings.TIME_ZONE."""
    zone = StaffPreference.objects.filter(user_id=user_id).values_list("time_zone", flat=True).first()
    return zone or default_time_zone()
