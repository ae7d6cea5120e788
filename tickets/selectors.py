"""Reads. Anything about an account is scoped by the customer session asking."""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dataclass_field

from django.db.models import Q, QuerySet

from kit.adminkit import search_terms
from tickets.documents import Current
from tickets.models import (
    Account,
    CustomerSession,
    Document,
    DocumentRevision,
    Evidence,
    IntakeProblem,
    Job,
    Service,
    Ticket,
    TicketMessage,
)

# Where the ticket list's search looks (the Ticket admin's search_fields), and the review queue's through each
# packet's ticket (staff.queue.packets_search): the reference, the subject, the description, the customer's e-mail.
TICKET_TEXT_FIELDS, TICKET_CUSTOMER_FIELD = ("ref", "subject", "body"), "session__user__email"
TICKET_SEARCH_FIELDS = (*TICKET_TEXT_FIELDS, TICKET_CUSTOMER_FIELD)


def tickets_holding(term: str) -> QuerySet:
    """The ids of the tickets that hold `term` (any case) where the ticket list's search looks, as a subquery
    (`pk__in=`, `ticket__in=`).

    Two sets united rather than one OR across the join to the customer: each side is read through an index
    (on PostgreSQL the trigrams of the ticket's own text, migration 0015; the customer's sessions), where the
    OR made PostgreSQL read every ticket (1.9 s at 72,780 tickets, bench/pages_bench.py).
    """
    in_text = Q.create([(f"{field}__icontains", term) for field in TICKET_TEXT_FIELDS], connector=Q.OR)
    by_customer = Ticket.objects.filter(**{f"{TICKET_CUSTOMER_FIELD}__icontains": term}).order_by().values("pk")
    return Ticket.objects.filter(in_text).order_by().values("pk").union(by_customer)


def tickets_search(tickets: QuerySet[Ticket], text: str) -> QuerySet[Ticket]:
    """The tickets that hold every term of `text` (a quoted phrase as one; any case) where the list's search looks."""
    for term in search_terms(text):
        tickets = tickets.filter(pk__in=tickets_holding(term))
    return tickets


class Forbidden(Exception):
    """The session may not see this. Says nothing about whether it exists.

    `staff_reason`, when the raiser knows it, says why in plain words for staff only
    (the packet's refused call); the model is never shown it.
    """

    def __init__(self, message: str = "", *, staff_reason: str = ""):
        super().__init__(message)
        self.staff_reason = staff_reason


@dataclass(frozen=True)
class SessionScope:
    """Who a run acts for: the customer session, as plain values.

    A scope lives for one decision and the dispatch it leads to; the jobs it
    looked up are kept in `seen`, so that judging a call and dispatching it
    read each job once.
    """

    session_ref: str
    account_id: int
    verified: bool
    seen: dict[str, Job | None] = dataclass_field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, session: CustomerSession) -> SessionScope:
        return cls(session.ref, session.account_id, session.verified)


def job_get_for_session(*, scope: SessionScope, job_ref: str) -> Job:
    """The job, if this session may read it: verified, and the job is its own account's."""
    if not scope.verified:
        raise Forbidden("job lookups need a verified session")
    if job_ref not in scope.seen:
        scope.seen[job_ref] = _job_with_requester(job_ref=job_ref, account_id=scope.account_id)
    job = scope.seen[job_ref]
    if job is None:
        raise Forbidden("no such job for this session")
    return job


def job_refusal_reason(*, scope: SessionScope, job_ref: str) -> str:
    """Why this session may not read the job, in words for staff only: the model is never told
    whether a job exists (CONFORMANCE §4)."""
    if not scope.verified:
        return f"Session {scope.session_ref} is not verified; job lookups need a verified session."
    job = Job.objects.filter(ref=job_ref).select_related("account").first()
    if job is None:
        return f"{job_ref} does not exist."
    if job.account_id != scope.account_id:
        return f"{job_ref} belongs to another account ({job.account.code})."
    return f"{job_ref} may not be read by this session."


def _job_with_requester(*, job_ref: str, account_id: int) -> Job | None:
    return Job.objects.select_related("requested_by").filter(ref=job_ref, account_id=account_id).first()


def account_has_sensitive_jobs(*, account_id: int) -> bool:
    """Whether a lookup of one of the account's jobs may wait for a supervisor's approval."""
    return Job.objects.filter(account_id=account_id, sensitive=True).exists()


def account_code(*, account_id: int) -> str:
    """The account's code: how the operator's own services know it."""
    return Account.objects.values_list("code", flat=True).get(pk=account_id)


def service_names() -> list[str]:
    """The operator's services by name, as read_service_status's database backend lists them."""
    return list(Service.objects.order_by("name").values_list("name", flat=True))


def service_get_with_incidents(*, name: str, recent: int = 5) -> tuple[Service, list]:
    service = Service.objects.get(name=name)
    return service, list(service.incidents.all()[:recent])


def documents_current_revisions(*, codes: list[str]) -> dict[str, str]:
    """{code: "rN"} for the documents among `codes` that a search may find now (public, with a current
    revision); a retired, hidden or deleted document is left out."""
    current = DocumentRevision.objects.filter(is_current=True, document__public=True, document__code__in=codes)
    return {code: f"r{number}" for code, number in current.values_list("document__code", "number")}


def evidence_refs_for_ticket(*, ticket_id: int) -> set[str]:
    return {f"E{n}" for n in Evidence.objects.filter(ticket_id=ticket_id).order_by().values_list("number", flat=True)}


def evidence_texts(*, ticket_id: int, refs: tuple[str, ...]) -> list[str]:
    """The contents of the ticket's evidence items `refs` (E1, E2, …), as recorded."""
    numbers = [int(ref[1:]) for ref in refs if ref[:1] == "E" and ref[1:].isdigit()]
    return list(Evidence.objects.filter(ticket_id=ticket_id, number__in=numbers).values_list("content", flat=True))


def document_current(*, code: str) -> Current | None:
    """Document `code` as it reads now (title, visibility, current body), or None when there is none."""
    document = Document.objects.filter(code=code).first()
    if document is None:
        return None
    current = document.revisions.filter(is_current=True).first()
    return Current(document.title, document.public, current.body if current else None)


def documents_imported_under(*, roots: list[str]) -> dict[str, str]:
    """{code: origin} of the documents with a current revision last imported from a file at or under `roots`.

    `roots` are absolute paths. A document written by the admin, the demo or the
    API has no origin, so it is never among them.
    """
    under = Q(pk__in=[])
    for root in roots:
        under |= Q(origin=root) | Q(origin__startswith=root.rstrip("/") + "/")
    found = Document.objects.filter(under, revisions__is_current=True).exclude(origin="")
    return dict(found.order_by("code").values_list("code", "origin"))


def documents_current_from(*, origin: str) -> list[str]:
    """The codes of the documents with a current revision last imported from `origin` (a Zendesk Guide listing)."""
    found = Document.objects.filter(origin=origin, revisions__is_current=True).exclude(origin="")
    return list(found.order_by("code").values_list("code", flat=True))


def documents_imported_from(*, origins: list[str]) -> set[str]:
    """The codes of the documents last imported from one of the files `origins` (absolute paths)."""
    return set(Document.objects.filter(origin__in=origins).exclude(origin="").values_list("code", flat=True))


def intake_problems_open() -> int:
    """Refused intake requests staff have not brought in yet (the intake problems list's "not yet")."""
    return IntakeProblem.objects.filter(resolved_at__isnull=True).count()


def ticket_messages(*, ticket_id: int, up_to: int) -> list[TicketMessage]:
    """The ticket's messages numbered 1..`up_to`, in the order they were written, then of arrival.
    `up_to` 0 (a run that saw the description alone) reads nothing."""
    if up_to <= 0:
        return []
    return list(TicketMessage.objects.filter(ticket_id=ticket_id, number__lte=up_to).order_by("written_at", "number"))


def ticket_customer_wrote_after(*, ticket_id: int, number: int) -> bool:
    """The customer added a message to the ticket after message `number` (0: after the description)."""
    return TicketMessage.objects.filter(
        ticket_id=ticket_id, number__gt=number, author=TicketMessage.Author.CUSTOMER
    ).exists()


def tickets_auto_held() -> int:
    """New tickets a cap kept from automatic investigation that nobody has investigated since."""
    return Ticket.objects.filter(auto_held_at__isnull=False, runs__isnull=True, evaluation_copy=False).count()
