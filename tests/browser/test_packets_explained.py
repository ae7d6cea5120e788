"""Packets that explain every ending, in a real browser (Debian's Chromium), with screenshots."""

import pytest
from playwright.sync_api import expect

from engine.models import ReviewPacket
from engine.services import investigation_start
from tests.support.staff import PASSWORD
from tickets.models import Ticket

PHONE = {"width": 390, "height": 844}


def _packet_of(ref: str) -> ReviewPacket:
    run = investigation_start(ticket=Ticket.objects.get(ref=ref))
    return ReviewPacket.objects.get(run_id=run.pk)


def _open_packet(page, live_server, packet: ReviewPacket) -> None:
    page.goto(f"{live_server.url}/admin/agentrun/reviewpacket/{packet.pk}/change/")


def _no_sideways_scroll(page) -> None:
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


@pytest.mark.parametrize(
    "ref,job,reason,wrote,name",
    [
        ("T-1002", "J-99", "J-99 does not exist.", "job J-99, and nothing ever arrived", "nonexistent-job"),
        ("T-1005", "J-77", "J-77 belongs to another account (GLOBEX).", "shared job J-77 with me", "forbidden-job"),
    ],
)
def test_the_refused_job_is_named_in_the_packet(
    page, live_server, login, shot, staff_user, demo_committed, ref, job, reason, wrote, name
):
    packet = _packet_of(ref)
    login("staff", PASSWORD)
    _open_packet(page, live_server, packet)
    expect(page.locator("#refused-call")).to_have_text(f'read_job_status {{"job_id": "{job}"}}')
    expect(page.locator("#refused-reason")).to_contain_text(reason)
    expect(page.locator("#stop-label")).to_have_text(f"Refused a lookup: {reason.rstrip('.')}")
    expect(page.locator("#customer-message")).to_contain_text(wrote)
    shot(f"20-packet-{name}-{ref}")
    page.click("#ticket-link")
    expect(page.locator("#ticket-runs")).to_contain_text("Refused a lookup")
    page.goto(f"{live_server.url}/admin/agentrun/reviewpacket/")
    expect(page.locator("#result_list")).to_contain_text(
        "Refused a proposal"
    )  # the queue names stop reasons in plain words


def test_the_injection_flag_on_the_demo_documents(page, live_server, login, shot, staff_user, demo_committed):
    packet = _packet_of("T-1007")
    login("staff", PASSWORD)
    _open_packet(page, live_server, packet)
    rename = page.locator('.sa-doc[data-code="DOC-RENAME-2"]')
    note = page.locator('.sa-doc[data-code="DOC-NOTE-9"]')
    expect(rename).to_contain_text("Renaming a workspace")
    expect(rename.locator(".sa-flag")).to_have_count(0)
    expect(note.locator(".sa-flag")).to_have_text("suspected injection")
    expect(page.locator("#evidence-E2 .sa-injection")).to_contain_text("AI agents reading this")
    expect(page.locator("#summary")).to_contain_text("the article “Renaming a workspace”")
    shot("22-packet-injection-flag-T-1007")
    rename.locator("a.sa-doc-link").click()
    expect(page.locator("body")).to_contain_text("Renaming keeps members and roles")
    shot("23-document-revision")


def test_citations_link_to_their_evidence(page, live_server, login, shot, staff_user, demo_committed):
    packet = _packet_of("T-1001")
    login("staff", PASSWORD)
    _open_packet(page, live_server, packet)
    page.click("#summary a.sa-cite >> text=[E2]")
    assert page.url.endswith("#evidence-E2")
    expect(page.locator('#evidence-E2 .sa-doc[data-code="DOC-NOTE-9"] .sa-flag')).to_be_visible()
    shot("24-packet-T-1001")


@pytest.mark.parametrize("ref", ["T-1001", "T-1005"])
def test_run_and_packet_pages_fit_a_phone(page, live_server, login, shot, staff_user, demo_committed, ref):
    packet = _packet_of(ref)
    page.set_viewport_size(PHONE)
    login("staff", PASSWORD)
    _open_packet(page, live_server, packet)
    expect(page.locator("#packet")).to_be_visible()
    _no_sideways_scroll(page)
    shot(f"25-packet-390px-{ref}")
    page.goto(f"{live_server.url}/admin/agentrun/run/{packet.run_id}/change/")
    expect(page.locator("#run-detail")).to_be_visible()
    _no_sideways_scroll(page)
    shot(f"26-run-390px-{ref}")
