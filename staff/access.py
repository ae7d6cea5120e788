"""What staff may do, checked. `access_*` reads one object if the user may see it;
`do_*` checks the permission and calls the core service. The admin and the API
go through here and nowhere else; they never write runs themselves.

A run past its deadline is ended (engine.watchdog.run_expire, with its row
lock and packet) before it is shown or acted on, so that a page never shows it
waiting or running after its deadline, whether or not a watchdog runs.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerUnavailable

from engine.autocaps import auto_investigation_admit, held_note
from engine.config import ConfigError
from engine.models import Approval, Evaluation, PacketReview, ReviewPacket, Run, RunRequest
from engine.permissions import can, require
from engine.roles import SUPERVISORS
from engine.selectors import ticket_active_run
from engine.services import RunError, approval_answer, investigation_start, run_cancel
from engine.statuses import Status
from engine.watchdog import run_expire, runs_expire_overdue
from evaluation.services import evaluation_create
from evaluation.tasks import evaluation_launch
from kit.refused import Refused
from providers import BuiltInModel, model_problem
from staff.gaps import Topic, gaps_read, topics_of
from staff.periods import Period
from staff.recheck import ItemCheck, packet_recheck
from staff.reviews import ReviewError, packet_review
from tickets.documents import DocumentText
from tickets.models import Account, Document, Ticket
from tickets.services import PublishOutcome, document_publish, ticket_auto_hold

log = logging.getLogger("agentrun")
MAX_IDEMPOTENCY_KEY = 200
MAX_DENIAL_NOTE = 2000


# --- reads -------------------------------------------------------------------------


def access_ticket(*, user: User, ref: str) -> Ticket:
    """A ticket, its runs past their deadline ended first."""
    require(user, "tickets.view_ticket")
    ticket = Ticket.objects.select_related("session", "account").filter(ref=ref).first()
    if ticket is None:
        raise Refused("not_found", f"There is no ticket {ref}.", 404)
    runs_expire_overdue(ticket_id=ticket.pk)
    return ticket


def access_run(*, user: User, run_id: int) -> Run:
    """A run as it stands; one past its deadline is ended first."""
    require(user, "agentrun.view_run")
    run = _run_read(run_id)
    if run is None:
        raise Refused("not_found", f"There is no run {run_id}.", 404)
    if run_overdue(run) and run_expire(run_id=run_id):
        run = _run_read(run_id)
    return run


def _run_read(run_id: int) -> Run | None:
    return Run.objects.select_related("ticket", "session", "packet", "request__requested_by").filter(pk=run_id).first()


def run_overdue(run: Run) -> bool:
    """Still going after its deadline: what run_expire ends."""
    return run.is_active and run.time_left() <= 0


def access_packet(*, user: User, packet_id: int) -> ReviewPacket:
    require(user, "agentrun.view_reviewpacket")
    packets = ReviewPacket.objects.select_related("run__ticket__account", "run__session__user")
    packet = packets.filter(pk=packet_id).first()
    if packet is None:
        raise Refused("not_found", f"There is no review packet {packet_id}.", 404)
    return packet


def access_approval(*, user: User, approval_id: int) -> Approval:
    """An approval, for a user who may see approvals and the runs they belong to."""
    require(user, "agentrun.view_approval")
    require(user, "agentrun.view_run")
    approval = Approval.objects.select_related("run").filter(pk=approval_id).first()
    if approval is None:
        raise Refused("not_found", f"There is no approval {approval_id}.", 404)
    if run_overdue(approval.run) and run_expire(run_id=approval.run_id):
        approval = Approval.objects.select_related("run").get(pk=approval_id)
    return approval


def access_knowledge_gaps(*, user: User, period: Period) -> list[Topic]:
    """What no article answered in `period`, grouped by topic (staff.gaps), for a user who may see the dashboard."""
    require(user, "agentrun.view_dashboard")
    return topics_of(gaps_read(since=period.since, until=period.until))


# --- writes ------------------------------------------------------------------------


def do_investigate(*, user: User, ticket: Ticket, via: str, idempotency_key: str = "") -> tuple[Run, bool]:
    """Start a run on `ticket` for `user`; returns (run, created).

    The same `idempotency_key` from the same user returns the run it started the first
    time (and refuses to reuse the key for another ticket). A ticket with a run still
    going gets no second one.
    """
    require(user, "agentrun.start_investigation")
    if len(idempotency_key) > MAX_IDEMPOTENCY_KEY:
        raise Refused("bad_idempotency_key", f"Idempotency-Key is longer than {MAX_IDEMPOTENCY_KEY} characters.")
    if idempotency_key:
        earlier = _run_for_key(user, idempotency_key, ticket)
        if earlier is not None:
            return earlier, False
    runs_expire_overdue(ticket_id=ticket.pk)  # a run past its deadline no longer holds the ticket
    active = ticket_active_run(ticket=ticket)
    if active is not None:
        raise Refused(
            "run_active", f"Run {active.pk} on {ticket.ref} is still {active.status}; wait for it to end.", 409
        )
    try:
        run = _start_requested(ticket=ticket, user=user, via=via, idempotency_key=idempotency_key)
    except IntegrityError:  # the same key, sent twice at once: the other request won
        earlier = _run_for_key(user, idempotency_key, ticket) if idempotency_key else None
        if earlier is None:
            raise
        return earlier, False
    except (RunError, ConfigError) as exc:
        raise Refused(getattr(exc, "code", "config_error"), str(exc), 400) from None
    return Run.objects.get(pk=run.pk), True


def _start_requested(*, ticket: Ticket, user: User | None, via: str, idempotency_key: str = "") -> Run:
    """The run, and who asked for it, in one transaction; the run goes to a worker once it commits."""
    with transaction.atomic():
        run = investigation_start(ticket=ticket)
        RunRequest.objects.create(run=run, requested_by=user, via=via, idempotency_key=idempotency_key)
    return run


def investigate_new_ticket(*, ticket_id: int, requested_by: User | None) -> Run | None:
    """AGENT_AUTO_INVESTIGATE: a ticket intake has just made, or one the customer has just written on again,
    is investigated as *Investigate* would (the new packet supersedes the ticket's pending one), unless its
    account has reached a cap on automatic runs (engine.autocaps): then the ticket says why and waits for
    staff, who may still investigate it by hand.

    Called once intake commits, for the integration user (None for a signed
    webhook), whose role does not include starting investigations: the setting
    is the operator's decision. A ticket with a run going gets no second one. A
    run that cannot start leaves the ticket as it is, and says why in the log.
    """
    ticket = Ticket.objects.select_related("session").get(pk=ticket_id)
    runs_expire_overdue(ticket_id=ticket.pk)
    if ticket_active_run(ticket=ticket) is not None:
        return None
    try:
        with transaction.atomic():
            # The account's row lock, held until the run commits, makes counting and starting one step:
            # on PostgreSQL webhooks of one account that arrive together wait here in turn, and each counts
            # the runs those before it started, so a burst cannot pass a cap. NO KEY: intake writing a
            # ticket of this account meanwhile (its foreign key takes KEY SHARE) neither waits nor deadlocks
            # with us over the session it holds. (SQLite, the demo's database, has no row locks; it lets
            # one writer at a time through the whole database.)
            account = Account.objects.select_for_update(no_key=True).get(pk=ticket.account_id)
            now = timezone.now()
            held = auto_investigation_admit(account=account, now=now)
            if held is not None:
                ticket_auto_hold(ticket_id=ticket.pk, note=held_note(held=held, account=account, at=now), at=now)
                log.warning(
                    "ticket %s is not investigated automatically: %s reached %s", ticket.ref, account, held.reached
                )
                return None
            return _start_requested(ticket=ticket, user=requested_by, via=RunRequest.Via.INTAKE)
    except (RunError, ConfigError) as exc:
        log.error("ticket %s is saved but its investigation could not start: %s", ticket.ref, exc)
        return None


def on_ticket_arrived(sender, *, ticket_id: int, requested_by: User | None, **kwargs) -> None:
    investigate_new_ticket(ticket_id=ticket_id, requested_by=requested_by)


def _run_for_key(user: User, key: str, ticket: Ticket) -> Run | None:
    request = RunRequest.objects.select_related("run").filter(requested_by=user, idempotency_key=key).first()
    if request is None:
        return None
    if request.run.ticket_id != ticket.pk:
        raise Refused("idempotency_key_reused", "This Idempotency-Key was already used for another ticket.", 409)
    return request.run


def may_cancel(user: User, run: Run) -> bool:
    """Supervisors cancel any run; whoever asked for a run (RunRequest.requested_by) may cancel that one."""
    if can(user, "agentrun.cancel_run"):
        return True
    request = getattr(run, "request", None)
    return bool(user.is_authenticated and user.is_active and request is not None and request.requested_by_id == user.pk)


def do_cancel(*, user: User, run_id: int) -> Run:
    """Cancel a run: a supervisor any, other staff the runs they started."""
    run = access_run(user=user, run_id=run_id)
    if not may_cancel(user, run):
        raise Refused("forbidden", f"Only {SUPERVISORS} may cancel runs that others started.", 403)
    if not run.is_active:
        raise Refused("run_ended", f"Run {run_id} has already ended; there is nothing to cancel.", 409)
    run = run_cancel(run_id=run_id)
    return Run.objects.get(pk=run.pk)


def do_answer_approval(*, user: User, run_id: int, grant: bool, note: str = "") -> Run:
    """A supervisor's answer to the call a run waits on, used once. An approval whose run has ended,
    or whose deadline has passed, is expired: the answer is refused and not recorded, and a run
    still waiting past its deadline is ended (DEADLINE). A denial may say why (`note`)."""
    require(user, "agentrun.answer_approval")
    run = access_run(user=user, run_id=run_id)
    note = (note or "").strip()
    if len(note) > MAX_DENIAL_NOTE:
        raise Refused("note_too_long", f"The reason is longer than {MAX_DENIAL_NOTE} characters.", 422)
    if run.status == Status.DEADLINE and run.approvals.filter(state=Approval.State.EXPIRED, decided_by="").exists():
        raise _approval_expired(run_id)
    if run.status != Status.WAITING_APPROVAL:
        raise Refused(
            "not_waiting",
            f"Run {run_id} is not waiting for an approval (it is {run.status}): there is nothing to answer.",
            409,
        )
    try:
        run = approval_answer(run_id=run_id, grant=grant, decided_by=user.get_username(), note=note, refuse_late=True)
    except RunError as exc:
        if exc.code == "approval_expired":  # the deadline passed meanwhile
            run_expire(run_id=run_id)
            raise _approval_expired(run_id) from None
        raise Refused(exc.code, str(exc), 409) from None
    return Run.objects.get(pk=run.pk)


def _approval_expired(run_id: int) -> Refused:
    return Refused(
        "approval_expired",
        f"This approval has expired: run {run_id}'s deadline passed before it was "
        "answered. The answer was not recorded; the run ended at its deadline.",
        409,
    )


def do_packet_recheck(*, user: User, packet: ReviewPacket) -> list[ItemCheck]:
    """The packet's evidence re-checked for a user who may see it (staff.recheck)."""
    require(user, "agentrun.view_reviewpacket")
    return packet_recheck(packet=packet, user=user)


_REVIEW_STATUS = {"not_found": 404, "evidence_changed": 409, "superseded": 409, "already_reviewed": 409}


def do_review(
    *,
    user: User,
    packet_id: int,
    decision: str,
    note: str = "",
    reason: str = "",
    reply: str | None = None,
    acknowledge_changed_evidence: bool = False,
    change_decision: bool = False,
) -> tuple[PacketReview, bool]:
    """A user's review of a packet they may see (staff.reviews.packet_review); returns (review, created)."""
    require(user, "agentrun.review_packet")
    access_packet(user=user, packet_id=packet_id)
    try:
        return packet_review(
            packet_id=packet_id,
            reviewer=user,
            decision=decision,
            note=note,
            reason=reason,
            reply=reply,
            acknowledge_changed_evidence=acknowledge_changed_evidence,
            change_decision=change_decision,
        )
    except ReviewError as exc:
        # A review that does not fit (no note for a rejection) is a 422, like any body that does not fit; an
        # acceptance of changed evidence without saying so, or a new decision on a reviewed packet not marked as
        # a change, is a 409 (the packet is not as the request assumed).
        raise Refused(exc.code, str(exc), _REVIEW_STATUS.get(exc.code, 422)) from None


def do_document_publish(*, user: User, code: str, text: DocumentText) -> PublishOutcome:
    """Publish `text` as document `code` (a new revision only when it differs); a new document also needs add_document."""
    require(user, "tickets.change_document")
    if not Document.objects.filter(code=code).exists():
        require(user, "tickets.add_document")
    return document_publish(code=code, title=text.title, body=text.body, public=text.public)


# --- evaluations of candidate models ------------------------------------------------------


def evaluation_models() -> list[tuple[str, str]]:
    """The candidate models a supervisor may start an evaluation of from the admin: the rule-based investigator,
    and the configured model when it is a provider's and usable here (replay needs a script: the command's)."""
    models = [(BuiltInModel.RULES.value, f"{BuiltInModel.RULES} ({BuiltInModel.RULES.label})")]
    configured = settings.AGENT_MODEL
    if configured not in BuiltInModel.values and model_problem(configured) is None:
        models.append((configured, f"{configured} (the configured model)"))
    return models


def do_evaluation_start(
    *, user: User, candidate_model: str, reviewed: str, limit: int | None, since: datetime | None, live_tools: bool
) -> Evaluation:
    """Create an evaluation and run it as `manage.py evaluate` does: inline without a broker, on the workers
    with one. A broker that does not answer leaves the evaluation created, to be resumed."""
    require(user, "agentrun.add_evaluation")
    if candidate_model not in dict(evaluation_models()):
        raise Refused("bad_model", f"{candidate_model!r} cannot be evaluated from here.", 400)
    evaluation = evaluation_create(
        candidate_model=candidate_model,
        reviewed=reviewed,
        since=since,
        limit=limit,
        live_tools=live_tools,
        created_by=user.get_username(),
    )
    try:
        return evaluation_launch(evaluation)
    except BrokerUnavailable:
        raise Refused(
            "broker_unavailable",
            f"The broker did not answer; evaluation {evaluation.pk} was created"
            f" and can be sent again with manage.py evaluate --resume {evaluation.pk}.",
            503,
        ) from None
