"""A published revision is frozen: its document, number and body never change, on SQLite and PostgreSQL alike.

The model's save() refuses first; the database's trigger (migration 0007) refuses a queryset's update() and
plain SQL. New text is a new revision; only `is_current` moves.
"""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction

from engine.models import ReviewPacket
from engine.services import investigation_start
from engine.timeline import evidence_for
from tests.support.staff import client_for
from tickets.demo import seed_demo
from tickets.models import Document, DocumentRevision, RevisionFrozen, Ticket
from tickets.search import documents_search
from tickets.services import document_publish

THIRTY_DAYS = "Old links redirect for 30 days."


def rename_r1() -> DocumentRevision:
    return DocumentRevision.objects.get(document__code="DOC-RENAME-2", number=1)


def test_saving_new_text_over_a_published_revision_is_refused(demo):
    revision = rename_r1()
    revision.body = revision.body.replace("30 days", "7 days only")
    with pytest.raises(RevisionFrozen, match="DOC-RENAME-2 r1 is published"), transaction.atomic():
        revision.save()
    assert THIRTY_DAYS in rename_r1().body


@pytest.mark.parametrize("field", ["body", "number", "document"])
def test_saving_a_published_revision_under_another_number_or_document_is_refused(demo, field):
    revision = rename_r1()
    new_document = Document.objects.create(code="DOC-NEW", title="New")  # no revision of its own in the way
    other = {"body": "7 days only", "number": 9, "document": new_document}[field]
    setattr(revision, field, other)
    with pytest.raises(RevisionFrozen), transaction.atomic():
        revision.save(update_fields=[field])


@pytest.mark.parametrize("change", [{"body": "Old links redirect for 7 days only."}, {"number": 9}, "document"])
def test_the_database_refuses_an_update_of_a_published_revision(demo, change):
    if change == "document":  # a document with no revision of its own: nothing else stands in the way
        change = {"document": Document.objects.create(code="DOC-NEW", title="New")}
    with pytest.raises(IntegrityError), transaction.atomic():
        DocumentRevision.objects.filter(pk=rename_r1().pk).update(**change)
    revision = rename_r1()
    assert (revision.document.code, revision.number, THIRTY_DAYS in revision.body) == ("DOC-RENAME-2", 1, True)


def test_the_database_refuses_plain_sql_too(demo):
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE tickets_documentrevision SET body = %s WHERE id = %s", ["7 days only", rename_r1().pk])
    assert THIRTY_DAYS in rename_r1().body


def test_the_current_flag_and_writes_of_the_same_text_stay_allowed(demo):
    revision = rename_r1()
    DocumentRevision.objects.filter(pk=revision.pk).update(is_current=False)
    revision.is_current = False
    revision.save()  # every field written, the same text
    revision.is_current = True
    revision.save(update_fields=["is_current"])
    seed_demo()  # loading the demo again writes each revision's same text
    assert rename_r1().is_current and THIRTY_DAYS in rename_r1().body


def test_a_new_title_still_reaches_the_search(demo):
    """On PostgreSQL the title's trigger rewrites each revision's body with itself; that is no change."""
    Document.objects.filter(code="DOC-RENAME-2").update(title="Basalt workspace names")
    assert [r.document.code for r in documents_search(query="basalt", limit=3)] == ["DOC-RENAME-2"]


def test_publishing_new_text_makes_the_next_revision_and_keeps_the_old_one(demo):
    before = rename_r1()
    outcome = document_publish(
        code="DOC-RENAME-2",
        title="Renaming a workspace",
        public=True,
        body="Renaming a workspace changes its name. Old links redirect for 7 days only.",
    )
    assert (outcome.revision, outcome.new_revision) == ("r2", True)
    after = rename_r1()
    assert (after.pk, after.body, after.is_current) == (before.pk, before.body, False)
    current = DocumentRevision.objects.get(document__code="DOC-RENAME-2", is_current=True)
    assert current.label == "r2" and "7 days only" in current.body


@pytest.mark.usefixtures("settle")
def test_a_cited_revision_keeps_the_text_the_packet_quotes(staff_user, demo_committed):
    """The issue's case: a packet cites DOC-RENAME-2 r1 ("30 days"); r1 cannot be edited to "7 days only",
    and publishing that text makes r2 while r1, and the page its link opens, still say "30 days"."""
    run = investigation_start(ticket=Ticket.objects.get(ref="T-1007"))
    packet = ReviewPacket.objects.get(run_id=run.pk)
    cited = [
        d
        for view in evidence_for(ticket_id=run.ticket_id, refs=packet.evidence_refs)
        for d in view.documents
        if d.code == "DOC-RENAME-2"
    ]
    assert [d.revision for d in cited] == ["r1"]

    revision = rename_r1()
    revision.body = revision.body.replace("30 days", "7 days only")
    with pytest.raises(RevisionFrozen):
        revision.save()
    with pytest.raises(IntegrityError), transaction.atomic():
        DocumentRevision.objects.filter(pk=revision.pk).update(body=revision.body)

    outcome = document_publish(code="DOC-RENAME-2", title="Renaming a workspace", body=revision.body, public=True)
    assert outcome.revision == "r2"
    assert THIRTY_DAYS in rename_r1().body and "7 days only" not in rename_r1().body
    page = client_for(staff_user).get(cited[0].url).content.decode()
    assert "30 days" in page and "7 days only" not in page
