"""Follow-up comments: the second Zendesk trigger (and POST /api/tickets) adds the customer's comment to the
ticket as a message, once; an older update never undoes a newer one; runs read the messages they saw.

Every request goes through a real HTTP server (Django's live_server), signed as Zendesk signs.
"""

from __future__ import annotations

import json
import urllib.request

import pytest
from django.contrib import admin
from django.urls import reverse

from engine.budgets import Budget
from engine.loop import run_advance
from engine.models import ReviewPacket, Run
from engine.roles import integration_user_setup
from engine.services import run_start
from tests.support.staff import bearer
from tests.support.webhooks import DRAFT, J42, investigate
from tests.tickets.test_zendesk import SECRET, _send, _signed
from tickets.models import Ticket, TicketMessage

FIRST = {
    "source": "zendesk",
    "external_id": "48300",
    "subject": "CSV export fails",
    "body": "The CSV export fails since the rename.",
    "account": "ACME",
    "updated_at": "2026-12-06T09:00:00Z",
    "session": {"ref": "zd-user-901", "verified": True, "email": "dana@acme.example"},
}


def _comment(comment_id: str, text: str, *, author: str = "zd-user-901", updated_at: str, **fields) -> dict:
    """The second trigger's body: the ticket as it is now, and its latest public comment."""
    return {**FIRST, **fields, "updated_at": updated_at, "comment": {"id": comment_id, "body": text, "author": author}}


@pytest.fixture
def zendesk(live_server, demo_committed, settings):
    settings.INTAKE_ZENDESK_SECRET = SECRET

    def _post(payload: dict) -> tuple[int, dict]:
        body = json.dumps(payload).encode()
        return _send(live_server.url, body, _signed(body))

    return _post


def _ticket() -> Ticket:
    return Ticket.objects.get(source="zendesk", external_id="48300")


def _messages() -> list[tuple[int, str, str]]:
    return list(TicketMessage.objects.order_by("written_at", "number").values_list("number", "author", "body"))


def test_a_follow_up_comment_is_kept_once(zendesk):
    assert zendesk(FIRST)[0] == 201
    follow_up = _comment("9001", "It was job J-42.", updated_at="2026-12-06T09:05:00Z")

    status, reply = zendesk(follow_up)
    assert status == 200, reply
    assert (reply["message"], reply["updated"], reply["outdated"]) == (1, ["updated_at"], False)
    assert _messages() == [(1, "customer", "It was job J-42.")]
    ticket = _ticket()
    assert ticket.body == FIRST["body"] and ticket.message_count == 1
    assert ticket.external_updated_at.isoformat() == "2026-12-06T09:05:00+00:00"

    status, reply = zendesk(follow_up)  # Zendesk retries: the same comment again
    assert status == 200 and reply["message"] is None and reply["updated"] == []
    assert _messages() == [(1, "customer", "It was job J-42.")] and _ticket().message_count == 1


def test_an_older_update_changes_no_field_but_keeps_a_new_comment(zendesk):
    zendesk(FIRST)
    newer = _comment("9002", "Now J-43 fails too.", updated_at="2026-12-06T09:10:00Z", subject="Exports fail")
    older = _comment(
        "9001",
        "It was job J-42.",
        updated_at="2026-12-06T09:05:00Z",
        subject="CSV export fails",
        body="An older description",
        session={"ref": "zd-user-901", "verified": False, "email": "dana@acme.example"},
    )
    assert zendesk(newer)[1]["updated"] == ["subject", "updated_at"]

    status, reply = zendesk(older)  # delivered late, after the newer one
    assert status == 200 and reply["outdated"] is True and reply["updated"] == [] and reply["message"] == 2
    ticket = Ticket.objects.select_related("session").get(pk=_ticket().pk)
    assert (ticket.subject, ticket.body, ticket.session.verified) == ("Exports fail", FIRST["body"], True)
    assert ticket.external_updated_at.isoformat() == "2026-12-06T09:10:00+00:00"
    # Numbered as they arrived, shown as they were written.
    assert _messages() == [(2, "customer", "It was job J-42."), (1, "customer", "Now J-43 fails too.")]


def test_the_ticket_page_shows_the_messages_in_the_order_they_were_written(zendesk, staff_client):
    zendesk(FIRST)
    zendesk(_comment("9002", "Second, written later.", updated_at="2026-12-06T09:10:00Z"))
    zendesk(_comment("9001", "First, delivered late.", updated_at="2026-12-06T09:05:00Z"))
    html = staff_client.get(reverse("admin:tickets_ticket_change", args=[_ticket().pk])).content.decode()
    assert 'id="ticket-messages"' in html
    assert html.index("First, delivered late.") < html.index("Second, written later.")
    assert html.index('id="message-2"') < html.index('id="message-1"')


def test_saving_the_ticket_in_the_admin_keeps_its_message_count(zendesk, staff_client):
    zendesk(FIRST)
    ticket = _ticket()
    zendesk(_comment("9001", "It was job J-42.", updated_at="2026-12-06T09:05:00Z"))
    form = {"account": ticket.account_id, "session": ticket.session_id, "subject": "Renamed", "body": ticket.body}
    ticket.subject = "Renamed"  # the form's instance, read before the message came
    admin.site._registry[Ticket].save_model(None, ticket, form, change=True)  # as the change form saves it
    assert Ticket.objects.filter(pk=ticket.pk).values_list("subject", "message_count").get() == ("Renamed", 1)
    zendesk(_comment("9002", "Any news?", updated_at="2026-12-06T09:10:00Z"))
    assert [n for n, _, _ in _messages()] == [1, 2]


def test_a_comment_on_an_unknown_ticket_creates_it_with_the_message(zendesk):
    status, reply = zendesk(_comment("9001", "It was job J-42.", updated_at="2026-12-06T09:05:00Z"))
    assert status == 201 and reply["created"] is True and reply["message"] == 1
    ticket = _ticket()
    assert ticket.subject == FIRST["subject"] and ticket.message_count == 1
    assert _messages() == [(1, "customer", "It was job J-42.")]


@pytest.mark.parametrize(
    ("comment", "field"),
    [
        ({"id": "", "body": "x", "author": "customer"}, "id"),  # a placeholder that rendered empty
        ({"id": "9001", "body": "", "author": "customer"}, "body"),
        ({"id": "9001", "body": "x", "author": ""}, "author"),
        ({"id": "9001", "body": "x", "author": "customer", "created_at": "2026-12-06T09:05:00"}, "created_at"),
    ],
)
def test_a_comment_that_does_not_fit_is_refused_naming_the_field(zendesk, comment, field):
    zendesk(FIRST)
    status, reply = zendesk({**FIRST, "comment": comment})
    assert status == 422 and reply["code"] == "invalid_input"
    assert any(e["loc"][-2:] == ["comment", field] for e in reply["errors"]), reply
    assert not TicketMessage.objects.exists()


def test_a_job_id_only_in_the_follow_up_is_looked_up_by_the_rules(zendesk):
    zendesk(FIRST)
    zendesk(_comment("9001", "The job was J-42.", updated_at="2026-12-06T09:05:00Z"))
    ticket = _ticket()

    run = run_advance(run_start(ticket=ticket, model_name="rules").pk)

    assert run.status == "COMPLETED" and run.messages_seen == 1
    assert [(a.tool, a.args) for a in run.attempts.all()][0] == ("read_job_status", {"job_id": "J-42"})
    packet = ReviewPacket.objects.get(run=run)
    assert "J-42" in packet.summary and "E1" in packet.evidence_refs


def test_a_staff_reply_s_example_job_id_is_not_looked_up(zendesk):
    zendesk(FIRST)
    zendesk(
        _comment(
            "9001", "Could you send the job id? It looks like J-41.", author="staff", updated_at="2026-12-06T09:05:00Z"
        )
    )

    run = run_advance(run_start(ticket=_ticket(), model_name="rules").pk)

    assert run.messages_seen == 1
    assert not run.attempts.filter(tool="read_job_status").exists()


def test_a_pending_packet_says_the_customer_wrote_again(zendesk, staff_client):
    zendesk(FIRST)
    zendesk(_comment("9001", "The job was J-42.", updated_at="2026-12-06T09:05:00Z"))
    run = investigate(_ticket())
    page = reverse("admin:agentrun_reviewpacket_change", args=[run.packet.pk])
    queue = reverse("admin:agentrun_reviewpacket_changelist")

    html = staff_client.get(page).content.decode()
    assert "The run saw the description and message 1." in html and "The job was J-42." in html
    assert 'id="wrote-again"' not in html
    assert "the customer wrote again" not in staff_client.get(queue).content.decode()

    zendesk(_comment("9002", "Any news?", updated_at="2026-12-06T09:30:00Z"))
    zendesk(_comment("9003", "We are looking.", author="staff", updated_at="2026-12-06T09:31:00Z"))

    html = staff_client.get(page).content.decode()
    assert 'id="wrote-again"' in html and "Any news?" not in html  # the run never saw it
    assert "the customer wrote again" in staff_client.get(queue).content.decode()


def test_a_staff_message_alone_does_not_say_the_customer_wrote_again(zendesk, staff_client):
    zendesk(FIRST)
    run = investigate(_ticket())
    zendesk(_comment("9003", "We are looking.", author="staff", updated_at="2026-12-06T09:31:00Z"))
    html = staff_client.get(reverse("admin:agentrun_reviewpacket_change", args=[run.packet.pk])).content.decode()
    assert 'id="wrote-again"' not in html and "The run saw the description." in html


def test_auto_investigate_starts_a_run_on_a_customer_message_and_not_on_a_staff_one(zendesk, settings):
    settings.AGENT_AUTO_INVESTIGATE = True
    zendesk(FIRST)
    first = Run.objects.get()
    assert first.status == "COMPLETED" and first.messages_seen == 0

    zendesk(_comment("9003", "We are looking.", author="staff", updated_at="2026-12-06T09:04:00Z"))
    assert Run.objects.count() == 1

    zendesk(_comment("9001", "The job was J-42.", updated_at="2026-12-06T09:05:00Z"))
    second = Run.objects.exclude(pk=first.pk).get()
    assert second.status == "COMPLETED" and second.messages_seen == 2
    assert second.attempts.filter(tool="read_job_status", args={"job_id": "J-42"}).exists()
    states = dict(ReviewPacket.objects.values_list("run_id", "review_state"))
    assert states == {first.pk: "superseded", second.pk: "pending"}

    zendesk(_comment("9001", "The job was J-42.", updated_at="2026-12-06T09:05:00Z"))  # replayed: no third run
    assert Run.objects.count() == 2


def test_a_customer_message_while_a_run_is_going_starts_none(zendesk, settings):
    zendesk(FIRST)
    going = run_start(ticket=_ticket(), model_name="replay", budget=Budget(), model_script={"model": [J42, DRAFT]})
    settings.AGENT_AUTO_INVESTIGATE = True
    zendesk(_comment("9001", "The job was J-42.", updated_at="2026-12-06T09:05:00Z"))
    assert list(Run.objects.values_list("pk", flat=True)) == [going.pk]
    run = run_advance(going.pk)
    assert ReviewPacket.objects.get(run=run).review_state == "pending" and run.messages_seen == 0


def test_the_api_endpoint_takes_a_comment_too(live_server, demo_committed, roles):
    headers = {
        "Authorization": bearer(integration_user_setup(username="zendesk"), source="zendesk")["HTTP_AUTHORIZATION"]
    }
    payload = _comment("c-1", "The job was J-42.", author="customer", updated_at="2026-12-06T09:05:00+01:00")
    request = urllib.request.Request(
        f"{live_server.url}/api/tickets",
        data=json.dumps(payload).encode(),
        method="POST",
        headers={"Content-Type": "application/json", **headers},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 201 and json.loads(response.read())["message"] == 1
    (message,) = TicketMessage.objects.all()
    assert (message.author, message.external_id, message.written_at.isoformat()) == (
        "customer",
        "c-1",
        "2026-12-06T08:05:00+00:00",
    )
