"""The packet page's evidence re-check banner in a real browser (Debian's Chromium), with screenshots."""
from django.core.cache import cache
from playwright.sync_api import expect

from agentrun.models import PacketReview, Run
from tests.support.staff import PASSWORD
from tickets.models import Job, Ticket


def test_changed_evidence_is_flagged_and_accepting_needs_the_checkbox(page, live_server, login, shot, staff_user,
                                                                     ticket_t1001):
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
