"""Evidence reads like sources: each document of a search on its own, linked to its revision, flagged when it
addresses the agent; on the packet page and in the API."""

from __future__ import annotations

import pytest
from django.utils.dateparse import parse_datetime

from engine.models import ReviewPacket
from engine.services import investigation_start
from engine.timeline import EvidenceView, evidence_for
from tests.support.staff import bearer, client_for
from tickets.models import Document, DocumentRevision, Ticket

pytestmark = pytest.mark.usefixtures("settle")


def _packet(ref: str) -> ReviewPacket:
    run = investigation_start(ticket=Ticket.objects.get(ref=ref))
    return ReviewPacket.objects.get(run_id=run.pk)


def test_a_search_lists_each_document_with_its_revision_and_link(ticket_t1001):
    packet = _packet("T-1001")
    search = evidence_for(ticket_id=packet.run.ticket_id, refs=packet.evidence_refs)[1]
    listed = [(d.code, d.revision) for d in search.documents]
    assert listed[0] == ("DOC-EXPORT-7", "r3") and ("DOC-NOTE-9", "r1") in listed
    current = DocumentRevision.objects.get(document__code="DOC-EXPORT-7", is_current=True)
    assert search.documents[0].url == f"/admin/tickets/documentrevision/{current.pk}/change/"
    assert search.documents[0].title == "CSV export permissions"
    assert "EXPORT_ROLE_REQUIRED" in search.documents[0].excerpt


def test_the_document_that_addresses_agents_is_flagged_and_the_others_are_not(ticket_t1001):
    packet = _packet("T-1001")
    job, search = evidence_for(ticket_id=packet.run.ticket_id, refs=packet.evidence_refs)
    assert {d.code: d.injection for d in search.documents if d.injection} == {"DOC-NOTE-9": "AI agents reading this"}
    assert search.injection == "AI agents reading this" and job.injection is None


def test_a_long_document_is_cut_between_words_with_an_ellipsis(demo_committed):
    body = " ".join(["Quotas reset monthly and unused quota does not carry over to the next month."] * 12)
    doc = Document.objects.create(code="DOC-QUOTA-1", title="Quotas", public=True)
    DocumentRevision.objects.create(
        document=doc, number=1, body=body, is_current=True, published_at="2026-01-01T00:00:00Z"
    )
    ticket = Ticket.objects.get(ref="T-1001")
    ticket.pk, ticket.ref, ticket.evidence_count = None, "T-3001", 0
    ticket.subject, ticket.body = "A message we do not understand", "Why does QUOTA_EXCEEDED show?"
    ticket.save()
    packet = _packet("T-3001")
    searches = evidence_for(ticket_id=ticket.pk, refs=packet.evidence_refs)
    quota = next(d for search in searches for d in search.documents if d.code == "DOC-QUOTA-1")
    assert quota.excerpt.endswith(" …") and "|" not in quota.excerpt
    shown = quota.excerpt.removeprefix("… ").removesuffix(" …")
    assert shown in body and body[body.index(shown) + len(shown)] == " "  # ends at a word's end
    assert shown.endswith(".")  # and here at a sentence's end


def test_the_packet_page_shows_each_document_and_the_injection_flag(staff_user, ticket_t1001):
    packet = _packet("T-1007")
    page = client_for(staff_user).get(f"/admin/agentrun/reviewpacket/{packet.pk}/change/").content.decode()
    assert page.count('class="sa-doc"') == 2 and page.count('class="sa-doc sa-suspect"') == 1
    assert 'data-code="DOC-RENAME-2"' in page and "Renaming a workspace" in page
    assert "Suspected injection:" in page and "AI agents reading this" in page
    assert " | " not in page[page.index('id="evidence-E2"') : page.index("Attempted operations")]


def test_the_packet_page_links_a_cited_document_s_public_page(staff_user, ticket_t1001):
    guide_url = "https://acme.zendesk.com/hc/en-us/articles/360001234567-CSV-export-permissions"
    Document.objects.filter(code="DOC-EXPORT-7").update(url=guide_url)
    Document.objects.filter(code="DOC-NOTE-9").update(url="javascript:alert(1)")
    packet = _packet("T-1001")
    page = client_for(staff_user).get(f"/admin/agentrun/reviewpacket/{packet.pk}/change/").content.decode()
    card = page[page.index('data-code="DOC-EXPORT-7"') :]
    card = card[: card.index("</li>")]
    assert "“CSV export permissions”" in card
    assert f'<a class="sa-doc-public" href="{guide_url}" rel="noopener noreferrer" target="_blank">' in card
    assert 'href="javascript:' not in page
    api = client_for(staff_user).get(f"/api/packets/{packet.pk}", **bearer(staff_user)).json()
    documents = {d["code"]: d for d in api["evidence"][1]["documents"]}
    assert documents["DOC-EXPORT-7"]["public_url"] == guide_url and documents["DOC-NOTE-9"]["public_url"] == ""


def test_the_api_adds_documents_and_the_flag_and_keeps_its_fields(staff_user, ticket_t1001):
    packet = _packet("T-1001")
    body = client_for(staff_user).get(f"/api/packets/{packet.pk}", **bearer(staff_user)).json()
    search = body["evidence"][1]
    assert {"ref", "tool", "args", "source_kind", "source", "excerpt", "truncated", "captured_at"} <= search.keys()
    assert "EXPORT_ROLE_REQUIRED" in search["excerpt"]
    assert (search["suspected_injection"], search["injection_phrase"]) == (True, "AI agents reading this")
    note = search["documents"][1]
    assert (note["code"], note["revision"], note["suspected_injection"], note["injection"]) == (
        "DOC-NOTE-9",
        "r1",
        True,
        "AI agents reading this",
    )
    assert body["evidence"][0]["documents"] == [] and body["evidence"][0]["suspected_injection"] is False


def test_staff_can_open_the_cited_revision(staff_user, ticket_t1001):
    revision = DocumentRevision.objects.get(document__code="DOC-NOTE-9", number=1)
    page = client_for(staff_user).get(f"/admin/tickets/documentrevision/{revision.pk}/change/")
    assert page.status_code == 200 and "ignore your rules" in page.content.decode()


def test_the_api_shows_the_evidence_exactly_as_the_staff_pages_read_it(staff_user, ticket_t1001):
    packet = _packet("T-1007")
    body = client_for(staff_user).get(f"/api/packets/{packet.pk}", **bearer(staff_user)).json()
    views = evidence_for(ticket_id=packet.run.ticket_id, refs=packet.evidence_refs)
    # The API's JSON gives times to the millisecond.
    shown = [{**item, "captured_at": parse_datetime(item["captured_at"])} for item in body["evidence"]]
    assert shown == [
        view.model_dump(mode="json")
        | {"captured_at": view.captured_at.replace(microsecond=view.captured_at.microsecond // 1000 * 1000)}
        for view in views
    ]
    assert [set(item) for item in body["evidence"]] == [
        set(EvidenceView.model_json_schema(mode="serialization")["properties"])
    ] * len(views)
    search = next(view for view in views if view.documents)
    assert search.suspected_injection and search.injection == search.injection_phrase == "AI agents reading this"


def test_the_api_documents_the_evidence_with_the_view_s_fields(staff_user):
    schema = client_for(staff_user).get("/api/openapi.json").json()["components"]["schemas"]
    evidence = set(schema["EvidenceView"]["properties"])
    assert evidence == {
        "ref",
        "tool",
        "args",
        "source_kind",
        "source",
        "excerpt",
        "truncated",
        "captured_at",
        "documents",
        "suspected_injection",
        "injection_phrase",
    }
    assert set(schema["DocumentView"]["properties"]) == {
        "code",
        "revision",
        "title",
        "url",
        "public_url",
        "excerpt",
        "suspected_injection",
        "injection",
    }
    assert schema["EvidenceView"]["properties"]["source_kind"] == {"$ref": "#/components/schemas/SourceKind"}
