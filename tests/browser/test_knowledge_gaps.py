"""The knowledge gaps page in a real browser, at 1400 px and at 390 px, with screenshots: reached from the
dashboard, its topics open their packets."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from engine.models import ReviewPacket
from engine.services import investigation_start
from staff.reviews import packet_review
from tests.support.staff import PASSWORD
from tickets.models import Ticket


def _ticket(ref: str, subject: str, body: str) -> Ticket:
    t1001 = Ticket.objects.get(ref="T-1001")
    return Ticket.objects.create(ref=ref, account=t1001.account, session=t1001.session, subject=subject, body=body)


@pytest.mark.parametrize("width", [1400, 390])
def test_the_gaps_are_grouped_by_topic_and_open_their_packets(
    page, live_server, login, shot, supervisor_user, ticket_t1001, width
):
    asked = investigation_start(ticket=Ticket.objects.get(ref="T-1004"))  # invoices: no article answers it
    again = investigation_start(
        ticket=_ticket("T-1101", "Invoice arrived late again", "Our November invoice is late, like last month.")
    )
    dark = investigation_start(ticket=_ticket("T-1102", "Dark mode", "Is there a dark theme for the web app?"))
    rejected = investigation_start(
        ticket=_ticket("T-1103", "Dark theme on the web app", "Can I switch the web app to a dark theme at night?")
    )
    packet_review(
        packet_id=ReviewPacket.objects.get(run=rejected).pk,
        reviewer=supervisor_user,
        decision="rejected",
        reason="no_article",
        note="We have no page on themes; write one.",
    )
    login("supervisor", PASSWORD)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/admin/outcomes/")
    page.click("#gaps-link a")
    expect(page).to_have_url(re.compile(r"/admin/knowledge-gaps/\?first="))
    expect(page.locator("#gap-tickets")).to_have_text("4")
    expect(page.locator("#gap-topics")).to_have_text("2")
    themes, invoices = page.locator("#topic-1"), page.locator("#topic-2")  # two tickets each: the latest asked first
    expect(invoices.locator(".sa-key-words")).to_contain_text("invoice")
    expect(invoices.locator(".sa-gap")).to_have_count(2)
    expect(themes.locator(".sa-key-words")).to_contain_text("dark")
    expect(themes.locator(".sa-reviewer-note")).to_have_text("We have no page on themes; write one.")
    expect(themes).to_contain_text("handed to a person: no article matched; rejected: no article answers it")
    expect(themes.locator(".sa-handoff").first).to_contain_text("found no article that matches it well")
    expect(page.locator("#gaps-csv")).to_have_attribute("href", re.compile(r"/admin/knowledge-gaps\.csv\?first="))
    shot(f"60-knowledge-gaps-{width}")
    assert page.evaluate("document.documentElement.scrollWidth") <= width

    invoices.locator(".sa-gap", has_text="T-1004").locator("a.sa-packet").click()
    expect(page).to_have_url(re.compile(f"/reviewpacket/{asked.packet.pk}/change/"))
    expect(page.locator("#open-questions")).to_contain_text("Which article should have answered")
    assert {again.packet.pk, dark.packet.pk} <= set(ReviewPacket.objects.values_list("pk", flat=True))
