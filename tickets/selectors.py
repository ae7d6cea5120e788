"""Reads. Anything about an account is scoped by the customer session asking."""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from functools import reduce

from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db import connection
from django.db.models import F, Q

from tickets.documents import Current
from tickets.models import Account, CustomerSession, Document, DocumentRevision, Evidence, IntakeProblem, Job, Service


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

    A scope lives for one decision or one dispatch; the jobs it looked up are
    kept in `seen`, so that judging one call reads each job once.
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


_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_SUFFIXES = ("ing", "ed", "es", "s", "e")  # "rename", "renamed", "renaming": all "renam"


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def query_terms(query: str) -> list[str]:
    return list(dict.fromkeys(_stem(w) for w in _WORD.findall(query.casefold())))


def documents_search(*, query: str, limit: int) -> list[DocumentRevision]:
    """Current revisions of public documents ranked by how well they match `query`.

    PostgreSQL full-text search where the database is PostgreSQL (any term may
    match; rank orders), a portable term-count ranking elsewhere.
    """
    terms = query_terms(query)
    if not terms:
        return []
    if connection.vendor == "postgresql":
        # PostgreSQL stems with its own English dictionary, as it stemmed the documents: it is given
        # the words as written (ours would cut "access" to "acces", which its stemmer then misses).
        return _documents_search_postgres(list(dict.fromkeys(_WORD.findall(query.casefold()))), limit)
    current = DocumentRevision.objects.filter(is_current=True, document__public=True).select_related("document")
    return _documents_search_portable(current, terms, limit)


def documents_current_revisions(*, codes: list[str]) -> dict[str, str]:
    """{code: "rN"} for the documents among `codes` that a search may find now (public, with a current
    revision); a retired, hidden or deleted document is left out."""
    current = DocumentRevision.objects.filter(is_current=True, document__public=True, document__code__in=codes)
    return {code: f"r{number}" for code, number in current.values_list("document__code", "number")}


def _documents_search_postgres(terms: list[str], limit: int) -> list[DocumentRevision]:
    """Ranked by ts_rank over the revisions' stored vectors (the title weighs A, the body B, in the
    English configuration); ties by code."""
    query = reduce(operator.or_, (SearchQuery(term, config="english", search_type="plain") for term in terms))
    found = (
        DocumentRevision.objects.filter(is_current=True, document__public=True, search_vector=query)
        .annotate(rank=SearchRank(F("search_vector"), query))
        .order_by("-rank", "document__code")
        .select_related("document")
        .defer("search_vector")
    )
    return list(found[:limit])


def _documents_search_portable(current, terms: list[str], limit: int) -> list[DocumentRevision]:
    """Ranked by the words that begin with a term, a title word counting twice; ties by code."""
    scored = []
    for revision in current:
        title = _WORD.findall(revision.document.title.casefold())
        body = _WORD.findall(revision.body.casefold())
        score = sum(2 * _starting(title, t) + _starting(body, t) for t in terms)
        if score:
            scored.append((-score, revision.document.code, revision))
    scored.sort(key=lambda row: row[:2])
    return [row[2] for row in scored[:limit]]


def _starting(words: list[str], term: str) -> int:
    return sum(1 for word in words if word.startswith(term))


def excerpt(text: str, terms: list[str], width: int = 240) -> str:
    """A window of `text` around the first matching term."""
    folded = text.casefold()
    hits = [folded.find(t) for t in terms if folded.find(t) >= 0]
    start = max(min(hits) - 60, 0) if hits else 0
    window = text[start : start + width]
    return ("…" if start else "") + window + ("…" if start + width < len(text) else "")


def evidence_refs_for_ticket(*, ticket_id: int) -> set[str]:
    return {f"E{n}" for n in Evidence.objects.filter(ticket_id=ticket_id).order_by().values_list("number", flat=True)}


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


def documents_imported_from(*, origins: list[str]) -> set[str]:
    """The codes of the documents last imported from one of the files `origins` (absolute paths)."""
    return set(Document.objects.filter(origin__in=origins).exclude(origin="").values_list("code", flat=True))


def intake_problems_open() -> int:
    """Refused intake requests staff have not brought in yet (the intake problems list's "not yet")."""
    return IntakeProblem.objects.filter(resolved_at__isnull=True).count()
