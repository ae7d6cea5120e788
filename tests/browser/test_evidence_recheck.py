"""The packet page's evidence re-check banner in a real browser (Debian's Chromium), with screenshots."""

import re

from django.contrib.auth.models import Group
from django.core.cache import cache
from playwright.sync_api import expect

from engine.models import PacketReview, Run
from engine.roles import KNOWLEDGE_EDITORS
from tests.support.staff import PASSWORD
from tickets.models import Document, DocumentRevision, Job, Ticket


def test_changed_evidence_is_flagged_and_accepting_needs_the_checkbox(
    page, live_server, login, shot, staff_user, ticket_t1001
):
    cache.clear()
    login("staff", PASSWORD)
    page.goto(f"{live_server.url}/admin/tickets/ticket/{Ticket.objects.get(ref='T-1001').pk}/change/")
    page.click("#investigate")
    expect(page.locator("#run-progress")).to_have_attribute("data-status", "COMPLETED")
    Job.objects.filter(ref="J-42").update(status="succeeded", error_code="")  # the customer's export went through since
    page.goto(f"{live_server.url}/admin/agentrun/reviewpacket/{Run.objects.get().packet.pk}/change/")
    expect(page.locator("#recheck-banner")).to_contain_text("Evidence E1 changed or is gone")
    expect(page.locator("#recheck-E1")).to_have_attribute("data-result", "changed")
    expect(page.locator("#recheck-E1")).to_contain_text("status: failed → succeeded")
    expect(page.locator("#recheck-E2")).to_have_attribute("data-result", "unchanged")
    shot("11-packet-evidence-changed")
    page.click("#accept")
    expect(page.locator(".messagelist")).to_contain_text("acknowledge the changed evidence")
    assert PacketReview.objects.count() == 0
    page.check("#acknowledge-changed-evidence")
    shot("12-packet-evidence-acknowledged")
    page.click("#accept")
    expect(page.locator(".messagelist")).to_contain_text("accepted. Nothing was sent to the customer.")
    review = PacketReview.objects.get()
    assert review.acknowledged_changed_evidence and review.changed_evidence == ["E1"]


def test_a_knowledge_editors_new_revision_is_flagged_on_the_packet_that_cites_the_old_one(
    page, live_server, login, shot, staff_user, ticket_t1001
):
    cache.clear()
    staff_user.groups.add(Group.objects.get(name=KNOWLEDGE_EDITORS))
    login("staff", PASSWORD)
    page.goto(f"{live_server.url}/admin/tickets/ticket/{ticket_t1001.pk}/change/")
    page.click("#investigate")
    expect(page.locator("#run-progress")).to_have_attribute("data-status", "COMPLETED")
    packet = Run.objects.get().packet

    document = Document.objects.get(code="DOC-EXPORT-7")
    page.goto(f"{live_server.url}/admin/tickets/document/{document.pk}/change/")
    expect(page.locator("#id_body")).to_have_value(re.compile(r"^CSV export requires the editor role"))  # r3
    page.fill("#id_body", "CSV export requires the owner role since the September release.")
    shot("13-knowledge-editor-publishes")
    page.click("input[name=_save]")
    expect(page.locator(".messagelist")).to_contain_text("Published DOC-EXPORT-7 r4")
    r3 = DocumentRevision.objects.get(document=document, number=3)
    assert r3.body.startswith("CSV export requires the editor role") and not r3.is_current  # r3 kept its text

    page.goto(f"{live_server.url}/admin/agentrun/reviewpacket/{packet.pk}/change/")
    card = page.locator("#changed-E2")
    expect(card).to_have_attribute("data-result", "changed")
    expect(card.locator("li.difference")).to_contain_text("DOC-EXPORT-7: r3 → r4")
    expect(card.locator("a.old")).to_have_attribute("href", re.compile(r"/documentrevision/\d+/"))
    expect(card.locator("a.new")).to_have_attribute("href", re.compile(r"/documentrevision/\d+/"))
    expect(page.locator("#recheck-banner")).to_contain_text("E2")
    shot("14-packet-flags-the-new-revision")
    page.click("#accept")
    expect(page.locator(".messagelist")).to_contain_text("acknowledge the changed evidence")
    assert not PacketReview.objects.exists()
