"""The suggested reply, edited on the packet's page and accepted, reaches the help desk in a private note."""

from __future__ import annotations

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from engine.models import PacketReview, WebhookDelivery
from engine.services import investigation_start
from tests.support.staff import PASSWORD
from tests.support.workers import wait_for
from tests.support.zendeskserver import Answer, zendesk_configure

TICKET = 48213
NOTE = WebhookDelivery.Target.ZENDESK_NOTE
EDITED = "Hi Dana,\n\nAsk a workspace owner to make you an editor, then run the export again.\n\nLee"


def notes_done(n: int) -> list[WebhookDelivery] | None:
    done = list(
        WebhookDelivery.objects.filter(target=NOTE).exclude(status=WebhookDelivery.Status.PENDING).order_by("id")
    )
    return done if len(done) >= n else None


@pytest.mark.parametrize("width", [1400, 390])
def test_an_edited_reply_is_accepted_and_its_note_reaches_zendesk_after_a_429(
    page, live_server, login, shot, staff_user, ticket_t1001, zendesk, settings, width
):
    zendesk_configure(settings, zendesk, site_url=live_server.url)
    ticket_t1001.source, ticket_t1001.external_id = "zendesk", str(TICKET)
    ticket_t1001.save()
    run = investigation_start(ticket=ticket_t1001)
    (written,) = wait_for(lambda: notes_done(1), 10, "the note on the packet written")
    assert written.status == "delivered" and "Suggested reply:\nHello," in zendesk.notes(TICKET)[0]

    page.set_viewport_size({"width": width, "height": 900})
    login("staff", PASSWORD)
    page.goto(f"{live_server.url}/admin/agentrun/reviewpacket/{run.packet.pk}/change/")
    reply = page.locator("#reply-edit")
    expect(reply).to_have_value(run.packet.reply)
    expect(reply).to_contain_text("it failed on 14 September 2026 at 10:02 UTC with the error EXPORT_ROLE_REQUIRED")
    reply.fill(EDITED)
    page.click("#copy-reply")
    expect(page.locator("#copy-status")).not_to_be_empty()
    shot(f"90-suggested-reply-edited-{width}")

    zendesk.answers.append(Answer(429, b"Rate limit for ticket updates exceeded", {"Retry-After": "1"}))
    page.click("#accept")
    expect(page.locator(".messagelist")).to_contain_text("accepted. Nothing was sent to the customer.")
    review = PacketReview.objects.get(packet=run.packet)
    assert review.reply == EDITED

    _, reviewed = wait_for(lambda: notes_done(2), 15, "the note on the review")
    assert [a.outcome for a in reviewed.attempts.order_by("number")] == ["retry", "delivered"]
    first, second = zendesk.received[-2:]
    assert second.at - first.at >= 1.0  # as Retry-After asked, not the backoff
    note = zendesk.notes(TICKET)[-1]
    assert "staff accepted the review packet for T-1001" in note
    assert f"Reply, edited by the reviewer:\n{EDITED}" in note
    assert note.endswith(f"Packet: {live_server.url}{reverse('admin:agentrun_reviewpacket_of_run', args=[run.pk])}")

    page.goto(f"{live_server.url}/admin/agentrun/reviewpacket/{run.packet.pk}/change/")
    expect(page.locator("#reply-kept-note")).to_contain_text("edited from the suggestion")
    expect(page.locator("#reply-text")).to_contain_text("Ask a workspace owner to make you an editor")
    shot(f"91-reply-kept-after-accept-{width}")
