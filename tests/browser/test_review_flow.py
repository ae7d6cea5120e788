"""Approvals people can answer and a review queue that flows, in a real browser, with screenshots."""

from __future__ import annotations

import re
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from engine.models import Approval, PacketReview, ReviewPacket, Run, StaffPreference
from engine.services import investigation_start
from tests.support.staff import PASSWORD, make_runs
from tickets.models import Account, CustomerSession, Job, Ticket


def _ticket_page(page, live_server, ticket: Ticket) -> None:
    page.goto(f"{live_server.url}/admin/tickets/ticket/{ticket.pk}/change/")


def _investigate(page, live_server, ticket: Ticket, status: str = "COMPLETED") -> Run:
    _ticket_page(page, live_server, ticket)
    page.click("#investigate")
    expect(page.locator("#run-progress")).to_have_attribute("data-status", status)
    return Run.objects.order_by("-id").first()


def _waiting_run(page, live_server, login) -> Run:
    Job.objects.filter(ref="J-42").update(sensitive=True)
    login("supervisor", PASSWORD)
    return _investigate(page, live_server, Ticket.objects.get(ref="T-1001"), "WAITING_APPROVAL")


def test_a_waiting_approval_is_counted_and_an_expired_one_cannot_be_answered(
    page, live_server, login, shot, supervisor_user, ticket_t1001
):
    run = _waiting_run(page, live_server, login)
    page.goto(f"{live_server.url}/admin/")
    expect(page.locator("#approvals-waiting")).to_have_text("1 waiting approval")
    expect(page.locator("#waiting-approvals")).to_contain_text(f"run {run.pk} on T-1001")
    expect(page.locator("#waiting-approvals .time-left")).to_have_text(re.compile(r"\d+ s left"))
    shot("20-index-waiting-approval")
    page.goto(f"{live_server.url}/admin/agentrun/run/{run.pk}/change/")
    expect(page.locator("#approval-reason")).to_contain_text("Job J-42 is marked sensitive")
    expect(page.locator("#approve")).to_be_visible()

    Run.objects.filter(pk=run.pk).update(deadline_at=run.created_at)  # the deadline passes before anyone answers
    page.reload()
    expect(page.locator("#approval-box")).to_have_attribute("data-state", "expired")
    expect(page.locator("#approval-expired")).to_be_visible()
    expect(page.locator("#approve")).to_have_count(0)
    expect(page.locator("#deny")).to_have_count(0)
    expect(page.locator("#approvals")).to_contain_text("expired")
    expect(page.locator("#approvals-waiting")).to_have_count(0)
    shot("21-approval-expired")
    expect(page.locator("#approval-expired")).to_contain_text("The run ended at its deadline.")
    assert Approval.objects.get(run=run).state == "expired" and Run.objects.get(pk=run.pk).status == "DEADLINE"


def test_a_denial_carries_its_reason_to_the_packet(page, live_server, login, shot, supervisor_user, ticket_t1001):
    run = _waiting_run(page, live_server, login)
    page.goto(f"{live_server.url}/admin/agentrun/run/{run.pk}/change/")
    page.fill("#deny-reason", "J-42 is under a legal hold; do not look it up.")
    shot("22-denying-with-a-reason")
    page.click("#deny")
    expect(page.locator(".messagelist")).to_contain_text("Call denied")
    page.goto(f"{live_server.url}/admin/agentrun/run/{run.pk}/change/")
    expect(page.locator("#approvals .approval-note")).to_have_text("J-42 is under a legal hold; do not look it up.")
    page.click("#open-packet")
    expect(page.locator("#approvals .approval-note")).to_have_text("J-42 is under a legal hold; do not look it up.")
    expect(page.locator("#refused-reason")).to_contain_text("legal hold")
    shot("23-packet-with-denial-reason")


def test_the_queue_opens_on_pending_packets_and_a_review_opens_the_next(
    page, live_server, login, shot, staff_user, demo
):
    runs = make_runs(3)  # packets created now, now-1s, now-2s: the last is the oldest
    oldest, middle, newest = (r.packet for r in reversed(runs))
    PacketReview.objects.create(packet=newest, reviewer=staff_user, decision="accepted")
    ReviewPacket.objects.filter(pk=newest.pk).update(review_state="accepted")
    login("staff", PASSWORD)
    page.goto(f"{live_server.url}/admin/agentrun/reviewpacket/")
    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(2)
    for column in ("Ticket", "Customer", "Subject", "Summary", "Account", "Age", "Stop reason"):
        expect(page.locator("#result_list thead")).to_contain_text(column)
    expect(rows.first).to_contain_text("ACME")
    expect(rows.first).to_contain_text("dana@acme.example")
    expect(rows.first.locator("a.sa-open")).to_have_text("T-1001")  # one handle: the ticket's ref, opening the packet
    expect(rows.first.locator("a.sa-open")).to_have_attribute("href", re.compile(f"/reviewpacket/{oldest.pk}/change/"))
    shot("24-queue-pending")
    rows.first.locator("a.sa-open").click()
    expect(page).to_have_url(re.compile(f"/reviewpacket/{oldest.pk}/change/"))
    box = page.locator("#accept").bounding_box()
    assert box["y"] + box["height"] < page.viewport_size["height"]  # above the fold
    page.click("#accept")
    expect(page).to_have_url(re.compile(f"/reviewpacket/{middle.pk}/change/"))
    expect(page.locator(".messagelist")).to_contain_text("Next pending packet")
    shot("25-next-pending-opened")
    page.click("#accept")
    expect(page).to_have_url(re.compile(r"/reviewpacket/$"))
    expect(page.locator(".messagelist")).to_contain_text("No pending packet is left")


def test_a_new_investigation_supersedes_the_pending_packet(page, live_server, login, shot, staff_user, ticket_t1001):
    login("staff", PASSWORD)
    first = _investigate(page, live_server, ticket_t1001)
    _ticket_page(page, live_server, ticket_t1001)
    expect(page.locator("#pending-warning")).to_contain_text(f"packet {first.packet.pk}")
    shot("26-ticket-warns-of-pending-packet")
    dialogs = []
    page.once("dialog", lambda dialog: dialogs.append(dialog.message) or dialog.accept())
    page.click("#investigate")
    expect(page.locator("#run-progress")).to_have_attribute("data-status", "COMPLETED")
    assert "supersedes it" in dialogs[0]
    second = Run.objects.order_by("-id").first()
    page.goto(f"{live_server.url}/admin/agentrun/reviewpacket/")
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    expect(page.locator("#result_list a.sa-open")).to_have_attribute(
        "href", re.compile(f"/reviewpacket/{second.packet.pk}/change/")
    )
    page.goto(f"{live_server.url}/admin/agentrun/reviewpacket/{first.packet.pk}/change/")
    expect(page.locator("#review-state")).to_have_text("superseded")
    expect(page.locator("#superseded-note")).to_be_visible()
    expect(page.locator("#reviews")).to_contain_text("system")
    expect(page.locator("#reviews")).to_contain_text(f"run {second.pk}")
    expect(page.locator("#accept")).to_have_count(0)
    shot("27-superseded-packet")


def test_keyboard_shortcuts_on_the_packet_page(page, live_server, login, shot, staff_user, demo):
    oldest, middle, newest = (r.packet for r in reversed(make_runs(3)))
    login("staff", PASSWORD)
    page.goto(f"{live_server.url}/admin/agentrun/reviewpacket/{middle.pk}/change/")
    page.keyboard.press("j")
    expect(page).to_have_url(re.compile(f"/reviewpacket/{newest.pk}/change/"))
    page.keyboard.press("k")
    expect(page).to_have_url(re.compile(f"/reviewpacket/{middle.pk}/change/"))
    page.keyboard.press("k")
    expect(page).to_have_url(re.compile(f"/reviewpacket/{oldest.pk}/change/"))
    page.keyboard.press("r")
    expect(page.locator("#review-note")).to_be_focused()
    page.keyboard.type("Cites the wrong job.")  # "a", "j", "k" typed in the note are text, not shortcuts
    shot("28-reject-note-focused")
    expect(page).to_have_url(re.compile(f"/reviewpacket/{oldest.pk}/change/"))
    page.keyboard.press("Control+Enter")  # no reason chosen: the browser keeps the form
    expect(page).to_have_url(re.compile(f"/reviewpacket/{oldest.pk}/change/"))
    assert PacketReview.objects.filter(packet=oldest).count() == 0
    page.select_option("#review-reason", "evidence")
    page.focus("#review-note")
    page.keyboard.press("Control+Enter")
    expect(page).to_have_url(re.compile(f"/reviewpacket/{middle.pk}/change/"))
    page.keyboard.press("a")
    expect(page).to_have_url(re.compile(f"/reviewpacket/{newest.pk}/change/"))
    assert PacketReview.objects.get(packet=oldest).decision == "rejected"
    assert PacketReview.objects.get(packet=oldest).note == "Cites the wrong job."
    assert PacketReview.objects.get(packet=oldest).reason == "evidence"
    assert PacketReview.objects.get(packet=middle).decision == "accepted"


def _globex_ticket() -> Ticket:
    globex = Account.objects.get(code="GLOBEX")
    return Ticket.objects.create(
        ref="T-2001",
        account=globex,
        session=CustomerSession.objects.get(ref="S-GLOBEX-1"),
        subject="Invoices are missing",
        body="Our March invoices never arrived.",
    )


def test_ticket_list_filters_search_and_links(page, live_server, login, shot, staff_user, ticket_t1001):
    _globex_ticket()
    login("staff", PASSWORD)
    run = _investigate(page, live_server, ticket_t1001)
    page.goto(f"{live_server.url}/admin/tickets/ticket/")
    expect(page.locator("#result_list tbody tr")).to_have_count(Ticket.objects.count())
    expect(page.locator("#changelist-filter")).to_contain_text(re.compile("pending packet", re.I))
    page.goto(f"{live_server.url}/admin/tickets/ticket/?pending=yes")
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    expect(page.locator("#result_list")).to_contain_text("T-1001")
    row = page.locator("#result_list tbody tr").first
    expect(row.locator("a", has_text=f"run {run.pk}")).to_have_attribute("href", re.compile(f"/run/{run.pk}/change/"))
    expect(row.locator("a", has_text="pending")).to_have_attribute(
        "href", re.compile(f"/reviewpacket/{run.packet.pk}/change/")
    )
    shot("29-tickets-pending-filter")
    page.goto(f"{live_server.url}/admin/tickets/ticket/?latest_run=never")
    expect(page.locator("#result_list tbody tr")).to_have_count(
        Ticket.objects.exclude(pk__in=Run.objects.values("ticket_id")).count()
    )
    expect(page.locator("#result_list")).to_contain_text("T-2001")
    globex = Account.objects.get(code="GLOBEX")
    page.goto(f"{live_server.url}/admin/tickets/ticket/?account__id__exact={globex.pk}")
    expect(page.locator("#result_list")).to_contain_text("T-2001")
    expect(page.locator("#result_list")).not_to_contain_text("T-1001")
    page.goto(f"{live_server.url}/admin/tickets/ticket/")
    page.fill("#searchbar", "hank@globex.example")
    page.keyboard.press("Enter")
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    expect(page.locator("#result_list")).to_contain_text("T-2001")
    page.fill("#searchbar", "March invoices")
    page.keyboard.press("Enter")
    expect(page.locator("#result_list")).to_contain_text("T-2001")
    shot("30-tickets-search-body")


def test_staff_create_a_ticket_and_a_foreign_session_is_refused_on_save(
    page, live_server, login, shot, staff_user, ticket_t1001
):
    login("staff", PASSWORD)
    page.goto(f"{live_server.url}/admin/tickets/ticket/add/")
    page.select_option("#id_account", label="ACME")
    page.select_option("#id_session", label="S-GLOBEX-1")
    page.fill("#id_subject", "Export fails")
    page.fill("#id_body", "The export button does nothing.")
    page.click("input[name=_save]")
    expect(page.locator(".errorlist")).to_contain_text("belongs to account GLOBEX")
    shot("31-ticket-foreign-session-refused")
    assert not Ticket.objects.filter(subject="Export fails").exists()
    page.select_option("#id_session", label="S-ACME-1")
    page.click("input[name=_save]")
    ticket = Ticket.objects.get(subject="Export fails")  # its ref is assigned, never typed
    expect(page.locator(".messagelist")).to_contain_text(ticket.ref)
    assert ticket.ref.startswith("T-") and ticket.session.ref == "S-ACME-1"


def test_a_refusal_is_a_styled_page(page, live_server, login, shot, staff_user, demo):
    login("staff", PASSWORD)
    response = page.goto(f"{live_server.url}/admin/auth/user/")
    assert response.status == 403
    expect(page.locator("#site-name")).to_have_text(re.compile("supportagent"))
    expect(page.locator("#refusal")).to_contain_text("Not allowed")
    shot("32-refusal-styled")


def _no_sideways_scroll(page, width: int = 390) -> None:
    assert page.evaluate("document.documentElement.scrollWidth") <= width


def test_pages_fit_390_px(page, live_server, login, shot, supervisor_user, ticket_t1001):
    login("supervisor", PASSWORD)
    _investigate(page, live_server, ticket_t1001)
    make_runs(5)
    page.set_viewport_size({"width": 390, "height": 844})
    for name, url in (
        ("33-queue-390", "/admin/agentrun/reviewpacket/"),
        ("34-tickets-390", "/admin/tickets/ticket/"),
        ("35-dashboard-390", "/admin/outcomes/"),
    ):
        page.goto(live_server.url + url)
        expect(page.locator("#site-name")).to_contain_text("supportagent")
        shot(name)
        _no_sideways_scroll(page)


def test_the_dashboard_names_reasons_links_runs_and_shows_the_backlog(
    page, live_server, login, shot, supervisor_user, ticket_t1001
):
    login("supervisor", PASSWORD)
    page.goto(f"{live_server.url}/admin/outcomes/")
    expect(page.locator("#completion-rate")).to_have_text("—")
    expect(page.locator("#acceptance-rate")).to_have_text("—")
    _investigate(page, live_server, ticket_t1001)
    page.goto(f"{live_server.url}/admin/outcomes/")
    expect(page.locator("#backlog-count")).to_have_text("1")
    page.locator("#stop-rows a", has_text="Completed").click()
    expect(page).to_have_url(re.compile(r"/admin/agentrun/run/\?status__in=COMPLETED"))
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    shot("36-dashboard-bar-to-runs")


def test_a_reviewed_packet_shows_its_decision_and_changes_it_only_with_a_note(
    page, live_server, login, shot, staff_user, demo
):
    packet = make_runs(1)[0].packet
    StaffPreference.objects.create(user=staff_user, time_zone="Europe/Paris")
    login("staff", PASSWORD)
    page.goto(f"{live_server.url}/admin/agentrun/reviewpacket/{packet.pk}/change/")
    page.keyboard.press("a")
    expect(page).to_have_url(re.compile(r"/reviewpacket/$"))  # accepted; no pending packet is left
    review = PacketReview.objects.get(packet=packet)
    at = timezone.localtime(review.created_at, ZoneInfo("Europe/Paris")).strftime("%H:%M (%Z)")

    page.goto(f"{live_server.url}/admin/agentrun/reviewpacket/{packet.pk}/change/")
    expect(page.locator("#decision-line")).to_contain_text(f"Accepted by staff at {at}")
    expect(page.locator("#accept")).to_have_count(0)
    expect(page.locator("#reject")).to_have_count(0)
    page.keyboard.press("a")  # the shortcut has nothing to press on a reviewed packet
    expect(page.locator("#decision-line")).to_contain_text("Accepted by staff")
    shot("32-reviewed-packet")
    assert PacketReview.objects.filter(packet=packet).count() == 1

    page.click("#change-decision summary")
    page.click("#change-submit")  # no reason, no note: the form does not go
    expect(page.locator("#change-reason")).to_be_focused()
    page.select_option("#change-reason", "wrong_conclusion")
    page.click("#change-submit")
    expect(page.locator("#change-note")).to_be_focused()
    assert PacketReview.objects.filter(packet=packet).count() == 1
    page.fill("#change-note", "It cites the wrong job.")
    shot("33-changing-a-decision")
    page.click("#change-submit")
    expect(page.locator(".messagelist")).to_contain_text(f"Packet {packet.pk}: decision changed to rejected.")
    expect(page.locator("#decision-line")).to_contain_text("Rejected by staff at")
    expect(page.locator("#decision-line")).to_contain_text("It cites the wrong job.")
    expect(page.locator("#decision-reason")).to_have_text("wrong conclusion")
    expect(page.locator("#review-state")).to_have_text("rejected")
    expect(page.locator("#change-submit")).to_have_text("Change to accepted")
    shot("34-decision-changed")
    assert list(PacketReview.objects.filter(packet=packet).values_list("decision", flat=True)) == [
        "accepted",
        "rejected",
    ]


@pytest.mark.parametrize("width", [1400, 390])
def test_the_queue_finds_a_customer_a_job_and_a_cited_article(
    page, live_server, login, shot, staff_user, ticket_t1001, width
):
    for ticket in (Ticket.objects.get(ref="T-1001"), Ticket.objects.get(ref="T-1004"), _globex_ticket()):
        investigation_start(ticket=ticket)
    login("staff", PASSWORD)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/admin/agentrun/reviewpacket/")
    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(3)
    expect(page.locator("#searchbar_helptext")).to_contain_text("job id or document code")

    page.fill("#searchbar", "dana")
    page.keyboard.press("Enter")
    expect(rows).to_have_count(2)
    expect(page.locator("#result_list a.sa-open")).to_have_text(["T-1001", "T-1004"])
    expect(page.locator("#result_list")).not_to_contain_text("T-2001")
    expect(rows.first).to_contain_text("dana@acme.example")
    expect(rows.first).to_contain_text("Job J-42 (csv_export) failed")  # the summary's first line
    shot(f"37-queue-search-dana-{width}")
    _no_sideways_scroll(page, width)

    page.fill("#searchbar", "J-42")
    page.keyboard.press("Enter")
    expect(page.locator("#result_list a.sa-open")).to_have_text(["T-1001"])
    page.fill("#searchbar", "DOC-EXPORT-7")  # cited by T-1001's packet; no ticket says it
    page.keyboard.press("Enter")
    expect(page.locator("#result_list a.sa-open")).to_have_text(["T-1001"])
    shot(f"38-queue-search-cited-document-{width}")
    _no_sideways_scroll(page, width)
    page.locator("#result_list a.sa-open").click()
    packet = ReviewPacket.objects.get(run__ticket__ref="T-1001")
    expect(page).to_have_url(re.compile(f"/reviewpacket/{packet.pk}/change/"))
