"""The staff and supervisor workflow in a real browser (Debian's Chromium), with screenshots."""

from playwright.sync_api import expect

from engine.models import PacketReview, Run
from tests.support.staff import PASSWORD
from tickets.models import Job, Ticket


def _investigate(page, live_server) -> None:
    ticket = Ticket.objects.get(ref="T-1001")
    page.goto(f"{live_server.url}/admin/tickets/ticket/{ticket.pk}/change/")
    page.click("#investigate")
    expect(page.locator("#run-progress")).to_have_attribute("data-status", "COMPLETED")


def test_staff_investigates_watches_it_finish_and_accepts_the_packet(
    page, live_server, login, shot, staff_user, ticket_t1001
):
    login("staff", PASSWORD)
    page.goto(f"{live_server.url}/admin/tickets/ticket/")
    expect(page.locator("#result_list")).to_contain_text("T-1001")
    shot("01-ticket-list")
    page.click("text=T-1001")
    expect(page.locator("#investigate")).to_be_visible()
    shot("02-ticket-page")
    page.click("#investigate")
    expect(page.locator("#run-progress")).to_have_attribute("data-status", "COMPLETED")
    expect(page.locator("#model-requests")).to_have_text("3 of 8")
    shot("03-run-progress")
    page.click("#open-packet")
    expect(page.locator("#evidence-E1 .source")).to_have_text("J-42")
    expect(page.locator("#evidence-E2 .source")).to_contain_text("DOC-EXPORT-7 revision r3")
    expect(page.locator("#evidence-E2")).to_contain_text("EXPORT_ROLE_REQUIRED")
    shot("04-packet")
    page.click("#accept")
    expect(page.locator(".messagelist")).to_contain_text("accepted. Nothing was sent to the customer.")
    shot("05-review-queue-after-accept")
    assert PacketReview.objects.get().decision == "accepted"


def test_a_second_packet_is_rejected_with_a_note(page, live_server, login, shot, staff_user, ticket_t1001):
    login("staff", PASSWORD)
    page.on("dialog", lambda dialog: dialog.accept())  # "investigate again?" while the first packet is pending
    _investigate(page, live_server)
    _investigate(page, live_server)
    second = Run.objects.order_by("-id").first()
    page.goto(f"{live_server.url}/admin/agentrun/reviewpacket/{second.packet.pk}/change/")
    page.select_option("#review-reason", "other")
    page.click("#reject")
    expect(page.locator(".messagelist")).to_contain_text("a note is required")
    shot("06-reject-without-note")
    page.select_option("#review-reason", "other")
    page.fill("#review-note", "Duplicate of the first investigation.")
    page.click("#reject")
    expect(page.locator(".messagelist")).to_contain_text("rejected")
    page.goto(f"{live_server.url}/admin/agentrun/reviewpacket/{second.packet.pk}/change/")
    expect(page.locator("#reviews")).to_contain_text("Duplicate of the first investigation.")
    expect(page.locator("#review-state")).to_have_text("rejected")
    shot("07-rejected-packet")


def test_supervisor_sees_the_outcomes_dashboard(page, live_server, login, shot, supervisor_user, ticket_t1001):
    login("supervisor", PASSWORD)
    _investigate(page, live_server)
    page.goto(f"{live_server.url}/admin/")
    page.click("text=Outcomes dashboard")
    expect(page.locator("#total-runs")).to_have_text("1")
    expect(page.locator("#completion-rate")).to_have_text("100%")
    expect(page.locator("#chart-stop-reasons .chart")).to_be_visible()
    expect(page.locator("#chart-stop-reasons")).to_contain_text("Completed")
    shot("08-dashboard")


def test_staff_cannot_open_the_dashboard_or_approve(page, live_server, login, shot, staff_user, ticket_t1001):
    Job.objects.filter(ref="J-42").update(sensitive=True)
    login("staff", PASSWORD)
    page.goto(f"{live_server.url}/admin/outcomes/")
    expect(page.locator("#refusal")).to_contain_text(
        "Only Supervisors may see the outcomes dashboard and the knowledge gaps."
    )
    shot("09-dashboard-refused")
    ticket = Ticket.objects.get(ref="T-1001")
    page.goto(f"{live_server.url}/admin/tickets/ticket/{ticket.pk}/change/")
    page.click("#investigate")
    expect(page.locator("#run-progress")).to_have_attribute("data-status", "WAITING_APPROVAL")
    page.click("text=Run details")
    expect(page.locator("#approval-needs-supervisor")).to_be_visible()
    expect(page.locator("#approve")).to_have_count(0)
    shot("10-approval-needs-supervisor")
    assert Run.objects.get().status == "WAITING_APPROVAL"
