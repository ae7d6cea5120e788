"""Writes to the ticket domain."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from supportagent.rows import row_find, row_insert, row_update

from .documents import Change, Current, DocumentIn, publish_change
from .models import Document, DocumentRevision, Evidence, Ticket


def evidence_content_hash(*, tool: str, args_key: str, content: str) -> str:
    return hashlib.sha256(f"{tool}\n{args_key}\n{content}".encode()).hexdigest()


def evidence_record(
    *, ticket_id: int, tool: str, args: dict[str, Any], args_key: str, content: str,
    source_ref: str, truncated: bool, run_id: int | None,
) -> Evidence:
    """Record one tool result as evidence of the ticket, or reuse the identical one.

    Numbering is per ticket (E1, E2, …) in order of first appearance; it is
    given under the ticket's row lock, so it must run inside a transaction.
    Evidence is never changed or removed, so an identical item found before
    taking the lock is the one to reuse.
    """
    assert transaction.get_connection().in_atomic_block, "evidence_record needs a transaction"
    digest = evidence_content_hash(tool=tool, args_key=args_key, content=content)
    existing = row_find(Evidence, ticket=ticket_id, content_hash=digest)
    if existing is not None:
        return existing
    ticket = row_find(Ticket, lock=True, pk=ticket_id)
    if ticket is None:
        raise Ticket.DoesNotExist(f"no ticket {ticket_id}")
    existing = row_find(Evidence, ticket=ticket_id, content_hash=digest)  # recorded while we waited for the lock
    if existing is not None:
        return existing
    ticket.evidence_count += 1
    row_update(ticket, ["evidence_count"])
    evidence = Evidence(
        ticket_id=ticket_id, number=ticket.evidence_count, tool=tool, args=args, content=content,
        content_hash=digest, source_ref=source_ref[:200], truncated=truncated,
        captured_at=timezone.now(), run_id=run_id,
    )
    row_insert(evidence)
    return evidence


# --- documents -------------------------------------------------------------------------


@dataclass(frozen=True)
class PublishOutcome:
    code: str
    change: Change
    revision: str  # the current revision's label after publishing, e.g. "r3"

    @property
    def new_revision(self) -> bool:
        return self.change is not Change.UNCHANGED


def document_publish(*, code: str, title: str, body: str, public: bool, origin: str = "") -> PublishOutcome:
    """Make `body` (with `title` and `public`) the current revision of document `code`, unless it already is.

    One transaction holding the document's row lock, so that two publishers of
    one document number their revisions one after the other. `origin` is the
    file the text came from (blank for the API): the last writer owns the
    document, which is what `import_docs --prune` goes by. Raises pydantic's
    ValidationError for a document that does not fit `DocumentIn`, writing nothing.
    """
    incoming = DocumentIn(code=code, title=title, body=body, public=public)
    with transaction.atomic():
        document, created = Document.objects.select_for_update().get_or_create(
            code=incoming.code, defaults={"title": incoming.title, "public": incoming.public, "origin": origin}
        )
        current = None if created else document.revisions.filter(is_current=True).first()
        known = None if created else Current(document.title, document.public, current.body if current else None)
        change = publish_change(known, incoming)
        _document_set(document, title=incoming.title, public=incoming.public, origin=origin)
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
