"""Writes to the ticket domain."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.db.models.functions import Length
from django.utils import timezone

from tickets.documents import Change, Current, DocumentIn, publish_change
from tickets.intake import CommentIn, SessionIn, TicketIn, body_json, ref_candidates
from tickets.models import (
    Account,
    CustomerSession,
    CustomerUser,
    Document,
    DocumentRevision,
    Evidence,
    IntakeProblem,
    Ticket,
    TicketMessage,
)
from tickets.signals import ticket_arrived


def evidence_content_hash(*, tool: str, args_key: str, content: str) -> str:
    return hashlib.sha256(f"{tool}\n{args_key}\n{content}".encode()).hexdigest()


def evidence_record(
    *,
    ticket_id: int,
    tool: str,
    args: dict[str, Any],
    args_key: str,
    content: str,
    source_ref: str,
    truncated: bool,
    run_id: int | None,
) -> Evidence:
    """Record one tool result as evidence of the ticket, or reuse the identical one.

    Numbering is per ticket (E1, E2, …) in order of first appearance; it is
    given under the ticket's row lock, so it must run inside a transaction.
    Evidence is never changed or removed, so an identical item found before
    taking the lock is the one to reuse.
    """
    assert transaction.get_connection().in_atomic_block, "evidence_record needs a transaction"
    digest = evidence_content_hash(tool=tool, args_key=args_key, content=content)
    existing = Evidence.objects.filter(ticket_id=ticket_id, content_hash=digest).first()
    if existing is not None:
        return existing
    ticket = Ticket.objects.select_for_update().filter(pk=ticket_id).only("evidence_count").first()
    if ticket is None:
        raise Ticket.DoesNotExist(f"no ticket {ticket_id}")
    existing = Evidence.objects.filter(ticket_id=ticket_id, content_hash=digest).first()  # recorded while we waited
    if existing is not None:
        return existing
    ticket.evidence_count += 1
    ticket.save(update_fields=["evidence_count"])
    return Evidence.objects.create(
        ticket_id=ticket_id,
        number=ticket.evidence_count,
        tool=tool,
        args=args,
        content=content,
        content_hash=digest,
        source_ref=source_ref[:200],
        truncated=truncated,
        captured_at=timezone.now(),
        run_id=run_id,
    )


# --- tickets from a help desk --------------------------------------------------------


class IntakeError(Exception):
    """An intake request refused, nothing written: a machine `code`, a message, an HTTP status."""

    def __init__(self, code: str, message: str, status: int):
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


@dataclass(frozen=True)
class Intake:
    """What an intake request did: the ticket, whether it was made now, what it changed, the message it
    added (None when none, or when the comment was kept before), and whether it was `outdated`: older
    than the update the ticket holds, so it changed no field."""

    ticket: Ticket
    created: bool
    updated: tuple[str, ...]
    message: TicketMessage | None = None
    outdated: bool = False


def ticket_intake(*, data: TicketIn, requested_by: User | None = None) -> Intake:
    """Create the ticket `data` describes, or bring the one with its source and external id up to date,
    and add its comment as the ticket's next message.

    One transaction: the ticket's row lock, the customer session (found or made by its ref, in the
    ticket's account), the ticket, then the message. The same request again writes nothing. A request
    whose `updated_at` is older than the ticket's changes no field (a late retry never undoes a later
    update) but still adds a comment the ticket does not have: messages are only ever added.
    Once this commits, with AGENT_AUTO_INVESTIGATE on, a new ticket or a new customer message is
    investigated, requested by `requested_by` (none for a signed webhook).
    """
    try:
        return _intake(data, requested_by)
    except IntegrityError:  # the same ticket, session or comment, sent twice at once: the other one made it
        return _intake(data, requested_by)


@transaction.atomic
def _intake(data: TicketIn, requested_by: User | None) -> Intake:
    account = account_for_intake(data)
    ticket = Ticket.objects.select_for_update().filter(source=data.source, external_id=data.external_id).first()
    if ticket is None:
        session, updated = _session(data.session, account, source=data.source)
        ticket = _ticket_create(data, account, session)
        message = _comment_add(ticket, data)
        if settings.AGENT_AUTO_INVESTIGATE:
            _investigate_on_commit(ticket, requested_by)
        return Intake(ticket, True, updated, message)
    if ticket.account_id != account.pk:
        raise IntakeError("account_mismatch", f"Ticket {ticket.ref} belongs to another account.", 409)
    outdated = _outdated(ticket, data)
    updated = () if outdated else _ticket_update(ticket, data, account)
    message = _comment_add(ticket, data)
    if message is not None and message.author == TicketMessage.Author.CUSTOMER and settings.AGENT_AUTO_INVESTIGATE:
        _investigate_on_commit(ticket, requested_by)
    return Intake(ticket, False, updated, message, outdated)


def _outdated(ticket: Ticket, data: TicketIn) -> bool:
    """The request describes the ticket as it was before the update the ticket holds (equal is not older)."""
    held = ticket.external_updated_at
    return data.updated_at is not None and held is not None and data.updated_at < held


def _ticket_update(ticket: Ticket, data: TicketIn, account: Account) -> tuple[str, ...]:
    """Bring the locked ticket and its session to what `data` says; the names of what changed."""
    session, updated = _session(data.session, account, source=data.source)
    wanted = {"subject": data.subject, "body": data.body, "session": session, "extra": data.model_extra or {}}
    if data.updated_at is not None:
        wanted["external_updated_at"] = data.updated_at
    changed = [name for name, value in wanted.items() if getattr(ticket, name) != value]
    for name in changed:
        setattr(ticket, name, wanted[name])
    if changed:
        ticket.save(update_fields=changed)
    return (*updated, *[name.removeprefix("external_") for name in changed])


def _session(data: SessionIn, account: Account, *, source: str) -> tuple[CustomerSession, tuple[str, ...]]:
    """The session with `data.ref`, made or brought up to date; refused when it is another account's,
    or not `source`'s own (made here by staff, or by another help desk).

    `verified` follows the help desk that made the session, and only that one. The email links the
    account's user with that address; a user of another account is never linked (the session is left unlinked).
    """
    session = CustomerSession.objects.select_for_update().filter(ref=data.ref).first()
    if session is not None and session.account_id != account.pk:
        raise IntakeError("session_mismatch", f"Session {data.ref} belongs to another account.", 409)
    if session is not None and session.source != source:
        raise IntakeError("session_source_mismatch", _not_yours(session, source), 409)
    if session is None:
        session = CustomerSession.objects.create(
            ref=data.ref, account=account, verified=data.verified, user=_user(data.email, account), source=source
        )
        return session, ()
    wanted = {"verified": data.verified}
    if data.email is not None:
        wanted["user"] = _user(data.email, account)
    changed = [name for name, value in wanted.items() if getattr(session, name) != value]
    for name in changed:
        setattr(session, name, wanted[name])
    if changed:
        session.save(update_fields=changed)
    return session, tuple(f"session.{name}" for name in changed)


def _not_yours(session: CustomerSession, source: str) -> str:
    whose = f"belongs to {session.source}, not to {source}" if session.source else "was made here by staff"
    return (
        f"Session {session.ref} {whose}: intake from {source} may neither use nor change it. "
        f"Send the session ref {source} has for the requester."
    )


def _user(email: str | None, account: Account) -> CustomerUser | None:
    if not email:
        return None
    return CustomerUser.objects.filter(email__iexact=email, account=account).first()


def _ticket_create(data: TicketIn, account: Account, session: CustomerSession) -> Ticket:
    candidates = ref_candidates(source=data.source, external_id=data.external_id)
    taken = set(Ticket.objects.filter(ref__in=candidates).values_list("ref", flat=True))
    ref = next(c for c in candidates if c not in taken)
    return Ticket.objects.create(
        ref=ref,
        source=data.source,
        external_id=data.external_id,
        account=account,
        session=session,
        subject=data.subject,
        body=data.body,
        extra=data.model_extra or {},
        external_updated_at=data.updated_at,
    )


def _comment_add(ticket: Ticket, data: TicketIn) -> TicketMessage | None:
    """The request's comment as the ticket's next message; None when there is none or it is kept already."""
    comment = data.comment
    if comment is None:
        return None
    return ticket_message_add(
        ticket=ticket,
        external_id=comment.id,
        author=comment_author(comment, requester=data.session.ref),
        body=comment.body,
        written_at=comment.created_at or data.updated_at,
    )


def comment_author(comment: CommentIn, *, requester: str) -> TicketMessage.Author:
    """Who wrote the comment: "customer" and the requester's own ref are the customer; "staff" and anyone else, staff."""
    if comment.author in (TicketMessage.Author.CUSTOMER, requester):
        return TicketMessage.Author.CUSTOMER
    return TicketMessage.Author.STAFF


def ticket_message_add(
    *, ticket: Ticket, external_id: str, author: str, body: str, written_at: datetime | None
) -> TicketMessage | None:
    """Add a message to `ticket` under the next number, or None when one with `external_id` is kept already.

    The caller holds the ticket's row lock (select_for_update), inside its transaction: the number is
    one above the highest kept (read, not taken from `message_count`, so a counter written back stale
    cannot make a number twice), and `message_count` follows it. Without `written_at` the message was
    written when it arrived.
    """
    assert transaction.get_connection().in_atomic_block, "ticket_message_add needs the ticket's row lock"
    if external_id and ticket.messages.filter(external_id=external_id).exists():
        return None
    now = timezone.now()
    ticket.message_count = (ticket.messages.aggregate(last=Max("number"))["last"] or 0) + 1
    ticket.save(update_fields=["message_count"])
    return TicketMessage.objects.create(
        ticket=ticket,
        number=ticket.message_count,
        external_id=external_id,
        author=author,
        body=body,
        written_at=written_at or now,
        received_at=now,
    )


def ticket_messages_copy(*, source_id: int, ticket: Ticket, up_to: int) -> None:
    """Copy messages 1..`up_to` of ticket `source_id` onto `ticket`, a fresh copy (an evaluation's), numbers and all."""
    rows = TicketMessage.objects.filter(ticket_id=source_id, number__lte=up_to).order_by("number")
    copies = [
        TicketMessage(
            ticket=ticket,
            number=m.number,
            external_id=m.external_id,
            author=m.author,
            body=m.body,
            written_at=m.written_at,
            received_at=m.received_at,
        )
        for m in rows
    ]
    TicketMessage.objects.bulk_create(copies)
    ticket.message_count = max((m.number for m in copies), default=0)
    ticket.save(update_fields=["message_count"])


def account_for_intake(data: TicketIn) -> Account:
    """The ticket's account, found in order: the code given; an account listing the organization's
    external id; one listing the requester's e-mail domain; INTAKE_DEFAULT_ACCOUNT. A code given
    that no account has is refused (never guessed past); no account at all is refused too."""
    if data.account:
        account = Account.objects.filter(code=data.account).first()
        if account is None:
            raise IntakeError("unknown_account", f"There is no account {data.account!r}.", 422)
        return account
    domain = data.session.email.rpartition("@")[2].lower() if data.session.email else ""
    found = _account_listing(organization=(data.organization or "").lower(), domain=domain)
    if found is None and settings.INTAKE_DEFAULT_ACCOUNT:
        found = Account.objects.filter(code=settings.INTAKE_DEFAULT_ACCOUNT).first()
    if found is not None:
        return found
    raise IntakeError(
        "no_account", "No account fits: no account code, organization, e-mail domain or default account.", 422
    )


def _account_listing(*, organization: str, domain: str) -> Account | None:
    """The account listing the organization id, else the first listing the e-mail domain (lower-case both).

    One read of the accounts that list anything, matched here: the lists are JSON so that SQLite keeps
    them too, and a help desk has accounts by the hundred, not the million.
    """
    listing = list(Account.objects.exclude(org_ids=[], email_domains=[]).order_by("pk"))
    by_org = (a for a in listing if organization and organization in a.org_ids)
    by_domain = (a for a in listing if domain and domain in a.email_domains)
    return next(by_org, None) or next(by_domain, None)


def intake_problem_record(*, source: str, body: bytes, code: str, reason: str) -> IntakeProblem:
    """Keep a refused request whole, so staff see it and can bring it in (outside any refused transaction)."""
    return IntakeProblem.objects.create(
        source=source, body=body.decode("utf-8", "replace"), code=code, reason=reason[:2000]
    )


def intake_problem_bring_in(*, problem: IntakeProblem, requested_by: User | None) -> Intake:
    """Run the intake again on the problem's body with its account set; the problem is resolved when it takes.

    Raises IntakeError (or tickets.intake.BodyRefused, pydantic.ValidationError) when it still does not fit.
    """
    if problem.account is None:
        raise IntakeError("no_account", "Choose the account first.", 422)
    raw = body_json(problem.body.encode())
    if not isinstance(raw, dict):
        raise IntakeError("invalid_input", "The body is not a JSON object.", 422)
    data = TicketIn.model_validate({**raw, "account": problem.account.code})
    result = ticket_intake(data=data, requested_by=requested_by)
    problem.ticket, problem.resolved_at = result.ticket, timezone.now()
    problem.save(update_fields=["ticket", "resolved_at"])
    return result


STAFF_REF_PREFIX = "T-"  # tickets staff add in the admin: T-1001, T-1002, …
STAFF_REF_FIRST = 1001


def ticket_create(*, ticket: Ticket) -> Ticket:
    """Save a new ticket staff made (the admin's form) under the next free ref, `T-<number>`.

    The number is one above the highest taken. Two tickets saved at once may pick the same
    one; the unique ref refuses the second, which takes the next (a savepoint per try).
    """
    tries = 5
    while True:
        ticket.ref = _staff_ref_next()
        try:
            with transaction.atomic():
                ticket.save(force_insert=True)
            return ticket
        except IntegrityError:
            tries -= 1
            if not tries:
                raise


def _staff_ref_next() -> str:
    """The highest `T-<number>` is the longest, then the greatest; other refs (`T-12a`, an evaluation's
    `T-1001~eval~…`) do not count."""
    highest = (
        Ticket.objects.filter(ref__regex=rf"^{STAFF_REF_PREFIX}[1-9][0-9]*$")
        .annotate(width=Length("ref"))
        .order_by("-width", "-ref")
        .values_list("ref", flat=True)
        .first()
    )
    number = int(highest.removeprefix(STAFF_REF_PREFIX)) if highest else STAFF_REF_FIRST - 1
    return f"{STAFF_REF_PREFIX}{number + 1}"


def ticket_auto_hold(*, ticket_id: int, note: str, at: datetime) -> None:
    """Say on the ticket why intake did not investigate it (a cap of its account), for staff to see."""
    Ticket.objects.filter(pk=ticket_id).update(auto_held_at=at, auto_held_note=note[:300])


def _investigate_on_commit(ticket: Ticket, requested_by: User | None) -> None:
    transaction.on_commit(
        lambda: ticket_arrived.send(sender=Ticket, ticket_id=ticket.pk, requested_by=requested_by),
        robust=True,
    )


# --- documents -------------------------------------------------------------------------


@dataclass(frozen=True)
class PublishOutcome:
    code: str
    change: Change
    revision: str  # the current revision's label after publishing, e.g. "r3"

    @property
    def new_revision(self) -> bool:
        return self.change is not Change.UNCHANGED


def document_publish(
    *,
    code: str,
    title: str,
    body: str,
    public: bool,
    origin: str = "",
    url: str = "",
    metadata: dict[str, Any] | None = None,
) -> PublishOutcome:
    """Make `body` (with `title` and `public`) the current revision of document `code`, unless it already is.

    One transaction holding the document's row lock, so that two publishers of
    one document number their revisions one after the other. `origin` is the
    file the text came from (blank for the API): the last writer owns the
    document, which is what `import_docs --prune` goes by. Raises pydantic's
    ValidationError for a document that does not fit `DocumentIn`, writing nothing.
    `url` and `metadata` describe the document, not its text: they change in
    place (no new revision), and only when they differ, so a re-import of the
    same files writes nothing.
    """
    incoming = DocumentIn(code=code, title=title, body=body, public=public)
    with transaction.atomic():
        document, created = Document.objects.select_for_update().get_or_create(
            code=incoming.code,
            defaults={
                "title": incoming.title,
                "public": incoming.public,
                "origin": origin,
                "url": url,
                "metadata": metadata or {},
            },
        )
        current = None if created else document.revisions.filter(is_current=True).first()
        known = None if created else Current(document.title, document.public, current.body if current else None)
        change = publish_change(known, incoming)
        _document_set(
            document, title=incoming.title, public=incoming.public, origin=origin, url=url, metadata=metadata or {}
        )
        if change is Change.UNCHANGED:
            return PublishOutcome(document.code, change, current.label)
        return PublishOutcome(document.code, change, _revision_add(document, incoming.body).label)


def _document_set(document: Document, **values: Any) -> None:
    changed = [name for name, value in values.items() if getattr(document, name) != value]
    for name in changed:
        setattr(document, name, values[name])
    if changed:
        document.save(update_fields=changed)  # a new title re-weighs the revisions' search vectors (trigger)


def _revision_add(document: Document, body: str) -> DocumentRevision:
    """The next revision, made current; the caller holds the document's row lock."""
    last = document.revisions.aggregate(last=Max("number"))["last"] or 0
    document.revisions.filter(is_current=True).update(is_current=False)
    return DocumentRevision.objects.create(
        document=document, number=last + 1, body=body, is_current=True, published_at=timezone.now()
    )


def document_retire(*, code: str) -> bool:
    """Leave document `code` with no current revision (search no longer finds it); its revisions stay.

    Returns whether it had a current revision. Publishing it again makes a new one.
    """
    with transaction.atomic():
        document = Document.objects.select_for_update().filter(code=code).first()
        if document is None:
            return False
        return document.revisions.filter(is_current=True).update(is_current=False) > 0
