"""A private note on the Zendesk ticket when its packet is written and reviewed: sent after commit through the
webhook's outbox to a local server that speaks Zendesk's Tickets API, with Zendesk's refusals and rate limits."""

from __future__ import annotations

import json
import time

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.db import connection, transaction
from django.utils import timezone

from engine.models import PacketReview, ReviewPacket, Run, WebhookDelivery
from engine.packetview import PacketView, packet_view
from engine.services import investigation_start
from evaluation.services import evaluation_create, evaluation_run
from integrations.webhooks import webhook_threads_settle
from integrations.zendesknotes import note_text, retry_after_seconds, zendesk_note_record, zendesk_words
from staff.reviews import packet_review
from supportagent.celery import app as celery_app
from supportagent.settings import zendesk_notes
from tests.support.staff import make_user
from tests.support.webhooks import investigate
from tests.support.workers import Cluster, broker_down, publishing_to, wait_for
from tests.support.zendeskserver import CLOSED, EMAIL, SITE, TOKEN, Answer, ZendeskServer, basic, zendesk_configure
from tickets.models import Ticket

TICKET = 48213
NOTE = WebhookDelivery.Target.ZENDESK_NOTE


def from_zendesk(ticket, external_id: str = str(TICKET)):
    ticket.source, ticket.external_id = "zendesk", external_id
    ticket.save()
    return ticket


def notes_done(n: int = 1) -> list[WebhookDelivery] | None:
    done = list(
        WebhookDelivery.objects.filter(target=NOTE)
        .exclude(status=WebhookDelivery.Status.PENDING)
        .order_by("created_at")
    )
    return done if len(done) >= n else None


def link(run: Run) -> str:
    return f"{SITE}/admin/agentrun/reviewpacket/run/{run.pk}/"


def with_reply(run: Run, reply: str) -> ReviewPacket:
    """The run's packet as it is once packets carry a suggested reply (set here, as a model will write it)."""
    ReviewPacket.objects.filter(run=run).update(reply=reply)
    return ReviewPacket.objects.get(run=run)


# --- the request, as Zendesk documents it ------------------------------------------------------


def test_a_written_packet_puts_a_private_note_on_its_zendesk_ticket(ticket_t1001, zendesk):
    run = investigate(from_zendesk(ticket_t1001))
    (delivery,) = wait_for(notes_done, 10, "the note")

    (got,) = zendesk.received
    assert (got.method, got.path) == ("PUT", f"/api/v2/tickets/{TICKET}.json")
    assert got.headers["authorization"] == basic(f"{EMAIL}/token", TOKEN)
    assert got.headers["content-type"] == "application/json"
    body = got.json()
    assert body == {"ticket": {"comment": {"body": body["ticket"]["comment"]["body"], "public": False}}}
    note = body["ticket"]["comment"]["body"]
    assert zendesk.notes(TICKET) == [note]
    assert note.startswith("Support agent: a review packet for T-1001 waits for review.")
    assert "Stopped: Completed. The model returned a valid draft; it is the review packet." in note
    assert "Summary:\nThe export needs the admin role." in note
    assert "Suggested reply: none." in note
    assert note.endswith(f"Packet: {link(run)}")

    assert (delivery.status, delivery.attempt_count, delivery.run_id) == ("delivered", 1, run.pk)
    assert (delivery.event_type, delivery.ticket_external_id) == ("packet.written", str(TICKET))
    assert delivery.payload == body  # what was sent, as recorded
    assert delivery.created_at == run.packet.created_at  # recorded by the step that wrote the packet
    attempt = delivery.attempts.get()
    assert (attempt.outcome, attempt.http_status, attempt.error) == ("delivered", 200, "")
    assert not WebhookDelivery.objects.filter(target=WebhookDelivery.Target.WEBHOOK).exists()  # no webhook URL


def test_the_note_carries_the_suggested_reply(ticket_t1001, zendesk, settings):
    settings.AGENT_ZENDESK_NOTE_ON_WRITTEN = False
    run = investigate(from_zendesk(ticket_t1001))
    packet = with_reply(run, "Hello Dana,\n\nCSV exports need the editor role.")
    with transaction.atomic():  # as the run's last step records it
        zendesk_note_record(run=Run.objects.select_related("ticket").get(pk=run.pk), packet=packet, now=timezone.now())
    wait_for(notes_done, 10, "the note")

    (note,) = zendesk.notes(TICKET)
    assert "Suggested reply:\nHello Dana,\n\nCSV exports need the editor role.\n" in note
    assert note.endswith(f"Packet: {link(run)}")


def test_an_accepted_review_notes_the_reply_as_the_reviewer_edited_it(ticket_t1001, zendesk):
    run = investigate(from_zendesk(ticket_t1001))
    wait_for(notes_done, 10, "the packet's note")
    packet = with_reply(run, "Hello Dana, exports need the editor role.")
    packet_review(
        packet_id=packet.pk,
        reviewer=make_user("lee", None),
        decision="accepted",
        note="Checked J-42.",
        reply="Hello Dana, ask an admin to make you an editor.",
    )
    (_, reviewed) = wait_for(lambda: notes_done(2), 10, "the review's note")

    written, note = zendesk.notes(TICKET)
    assert reviewed.event_type == "packet.reviewed" and reviewed.status == "delivered"
    assert note.startswith("Support agent: lee accepted the review packet for T-1001.\nNote: Checked J-42.\n")
    assert "Reply, edited by the reviewer:\nHello Dana, ask an admin to make you an editor.\n" in note
    assert "exports need the editor role" not in note  # the suggestion as it was is not repeated
    assert "Summary:\nThe export needs the admin role." in note
    assert note.endswith(f"Packet: {link(run)}")


def test_a_rejection_notes_its_reason_and_note_and_no_reply(ticket_t1001, zendesk):
    run = investigate(from_zendesk(ticket_t1001))
    wait_for(notes_done, 10, "the packet's note")
    packet = with_reply(run, "Hello Dana, exports need the admin role.")
    packet_review(
        packet_id=packet.pk,
        reviewer=make_user("lee", None),
        decision="rejected",
        reason="wrong_conclusion",
        note="J-42 failed for the role, not the rename.",
    )
    wait_for(lambda: notes_done(2), 10, "the review's note")

    note = zendesk.notes(TICKET)[1]
    assert note.startswith(
        "Support agent: lee rejected the review packet for T-1001.\n"
        "Reason: wrong conclusion\n"
        "Note: J-42 failed for the role, not the rename.\n"
    )
    assert "Reply" not in note and "Hello Dana" not in note
    assert note.endswith(f"Packet: {link(run)}")


def _view(**packet_fields) -> PacketView:
    """A packet's view built in memory (nothing saved): the note is written from the view alone."""
    ticket = Ticket(ref="ZD-48213", source="zendesk", external_id="48213")
    fields = {"summary": "Needs the editor role (E1).", "stop_reason": "COMPLETED", "reply": ""} | packet_fields
    run = Run(pk=7, ticket=ticket, status=fields["stop_reason"], model_name="rules")
    return packet_view(run=run, packet=ReviewPacket(run=run, **fields))


@pytest.mark.parametrize(
    ("review", "wanted", "unwanted"),
    [
        (None, ["a review packet for ZD-48213 waits", "Suggested reply:\nHi,\nuse an editor."], ["Reply,"]),
        ({"decision": "accepted", "reply": "Hi,\nuse an editor."}, ["Reply, as suggested:\nHi,\nuse an editor."], []),
        ({"decision": "accepted", "reply": ""}, ["Reply: none kept"], ["Hi,"]),
        (
            {"decision": "rejected", "reason": "evidence", "note": "E1 is old."},
            ["Reason: missing or wrong evidence\nNote: E1 is old."],
            ["Hi,", "Reply"],
        ),
    ],
)
def test_what_the_note_says(review, wanted, unwanted):
    given = PacketReview(reviewer=User(username="lee"), **review) if review else None
    note = note_text(_view(reply="Hi,\nuse an editor."), review=given, link="https://x/p/7/")
    assert "Stopped: Completed." in note and "Summary:\nNeeds the editor role (E1)." in note
    assert note.endswith("Packet: https://x/p/7/")
    assert all(text in note for text in wanted), note
    assert not any(text in note for text in unwanted), note


def test_a_handoff_s_note_says_why_and_that_there_is_no_summary():
    view = _view(summary=None, stop_reason="NEEDS_HELP", stop_note="The customer asks for a refund.")
    note = note_text(view, review=None, link="https://x/p/7/")
    assert "Stopped: Handed to a person." in note and "Its reason: The customer asks for a refund." in note
    assert "Summary: none (the run did not complete)." in note and "Suggested reply: none." in note


# --- Zendesk's answers ------------------------------------------------------------------------------


def test_a_429_waits_as_retry_after_asks_then_the_note_goes(ticket_t1001, zendesk):
    zendesk.answers.append(Answer(429, b"Rate limit for ticket updates exceeded", {"Retry-After": "1"}))
    investigate(from_zendesk(ticket_t1001))
    (delivery,) = wait_for(notes_done, 10, "the note")

    attempts = list(delivery.attempts.values_list("outcome", "http_status", "error"))
    assert attempts == [
        ("retry", 429, "HTTP 429: Zendesk's rate limit (Rate limit for ticket updates exceeded)"),
        ("delivered", 200, ""),
    ]
    first, second = zendesk.received
    assert second.at - first.at >= 1.0  # Retry-After, not the 0.05 s backoff
    assert len(zendesk.notes(TICKET)) == 1


def test_a_retry_after_longer_than_the_backoff_cap_waits_the_cap(ticket_t1001, zendesk, settings):
    settings.AGENT_PACKET_WEBHOOK_BACKOFF_CAP_SECONDS = 0.2
    zendesk.answers.append(Answer(429, {"error": "TooManyRequests"}, {"Retry-After": "3600"}))
    investigate(from_zendesk(ticket_t1001))
    (delivery,) = wait_for(notes_done, 10, "the note")

    assert [a.outcome for a in delivery.attempts.all()] == ["retry", "delivered"]
    first, second = zendesk.received
    assert 0.2 <= second.at - first.at < 3


def test_a_closed_ticket_fails_at_once_with_zendesk_s_words(ticket_t1001, zendesk):
    zendesk.tickets[TICKET] = "closed"
    investigate(from_zendesk(ticket_t1001))
    (delivery,) = wait_for(notes_done, 10, "the note to fail")

    assert (delivery.status, delivery.attempt_count, delivery.finished_at is not None) == ("failed", 1, True)
    attempt = delivery.attempts.get()
    assert (attempt.outcome, attempt.http_status) == ("failed", 422)
    assert attempt.error == (
        f"HTTP 422: Zendesk refused the note on ticket {TICKET} "
        "(RecordInvalid; Record validation errors; Status: closed prevents ticket update)"
    )
    time.sleep(0.3)  # several backoffs: it is not tried again
    assert len(zendesk.received) == 1 and zendesk.notes(TICKET) == []
    call_command("deliver_webhooks")  # nor by the command
    assert len(zendesk.received) == 1


@pytest.mark.parametrize(
    ("answer", "token", "error"),
    [
        (None, "a-wrong-token", "HTTP 401: Zendesk did not accept ZENDESK_EMAIL and ZENDESK_API_TOKEN"),
        (
            Answer(403, {"error": {"title": "Forbidden", "message": "You do not have access to this page."}}),
            TOKEN,
            f"HTTP 403: ZENDESK_EMAIL's user may not update ticket {TICKET} (Forbidden; You do not have access",
        ),
        ("unknown ticket", TOKEN, "HTTP 404: Zendesk has no ticket 48213 (RecordNotFound; Not found)"),
    ],
)
def test_refusals_fail_for_good_with_a_clear_error_and_no_token(
    ticket_t1001, zendesk, settings, caplog, answer, token, error
):
    settings.ZENDESK_API_TOKEN = token
    if answer == "unknown ticket":
        del zendesk.tickets[TICKET]
    elif answer is not None:
        zendesk.answers.append(answer)
    investigate(from_zendesk(ticket_t1001))
    (delivery,) = wait_for(notes_done, 10, "the note to fail")
    assert webhook_threads_settle(5)  # its warning is logged once the attempt is recorded

    attempt = delivery.attempts.get()
    assert (delivery.status, attempt.outcome) == ("failed", "failed")
    assert attempt.error.startswith(error)
    assert f"Zendesk note {delivery.event_id} (packet.written): attempt 1 failed for good" in caplog.text
    for secret in (token, TOKEN):
        assert secret not in attempt.error and secret not in caplog.text
    time.sleep(0.3)
    assert len(zendesk.received) == 1


def test_5xx_answers_are_tried_again(ticket_t1001, zendesk):
    zendesk.answers += [Answer(503, b"<html>Service Unavailable</html>"), Answer(500, {"error": "InternalError"})]
    investigate(from_zendesk(ticket_t1001))
    (delivery,) = wait_for(notes_done, 10, "the note")

    attempts = list(delivery.attempts.values_list("outcome", "http_status", "error"))
    assert attempts == [
        ("retry", 503, "HTTP 503: Zendesk's error"),
        ("retry", 500, "HTTP 500: Zendesk's error (InternalError)"),
        ("delivered", 200, ""),
    ]
    assert len(zendesk.notes(TICKET)) == 1


def test_an_unreachable_zendesk_is_tried_as_often_as_allowed_and_the_token_stays_out(ticket_t1001, settings, caplog):
    gone = ZendeskServer()
    zendesk_configure(settings, gone)
    gone.close()
    settings.AGENT_PACKET_WEBHOOK_ATTEMPTS = 3
    investigate(from_zendesk(ticket_t1001))
    (delivery,) = wait_for(notes_done, 10, "the note to give up")
    assert webhook_threads_settle(5)

    attempts = list(delivery.attempts.all())
    assert [a.outcome for a in attempts] == ["retry", "retry", "failed"]
    assert all(a.http_status is None and a.error.startswith("ConnectError") for a in attempts)
    assert "attempt 3 failed for good" in caplog.text
    stored = " ".join(a.error for a in attempts) + json.dumps(delivery.payload)
    assert TOKEN not in stored and TOKEN not in caplog.text


def test_the_parsing_of_zendesk_s_answers():
    assert retry_after_seconds("93") == 93.0
    assert retry_after_seconds(" 7 ") == 7.0
    assert retry_after_seconds("Wed, 21 Oct 2026 07:28:00 GMT") is None  # not Zendesk's: the backoff applies
    assert retry_after_seconds("") is None
    assert zendesk_words(json.dumps(CLOSED).encode()) == (
        "RecordInvalid; Record validation errors; Status: closed prevents ticket update"
    )
    assert zendesk_words(b'{"error": "Couldn\'t authenticate you"}') == "Couldn't authenticate you"
    assert zendesk_words(b"<html><body>502 Bad Gateway</body></html>") == ""
    assert zendesk_words(b"[1, 2]") == ""
    assert zendesk_words(b"x" * 1000) == "x" * 300


# --- who gets a note, and when ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "external_id"), [("", ""), ("freshdesk", "48213"), ("zendesk", "ZD-7"), ("zendesk", "")]
)
def test_a_ticket_that_did_not_come_from_zendesk_gets_no_note(ticket_t1001, zendesk, source, external_id):
    ticket_t1001.source, ticket_t1001.external_id = source, external_id
    ticket_t1001.save()
    run = investigate(ticket_t1001)
    packet_review(packet_id=run.packet.pk, reviewer=make_user("lee", None), decision="accepted")
    assert webhook_threads_settle(5)
    assert WebhookDelivery.objects.count() == 0 and zendesk.received == []


@pytest.mark.parametrize("off", ["written", "review"])
def test_a_switch_off_sends_no_note_of_its_kind(ticket_t1001, zendesk, settings, off):
    zendesk_configure(settings, zendesk, **{off: False})
    run = investigate(from_zendesk(ticket_t1001))
    packet_review(packet_id=run.packet.pk, reviewer=make_user("lee", None), decision="accepted")
    (delivery,) = wait_for(notes_done, 10, "the other note")
    assert webhook_threads_settle(5)

    assert delivery.event_type == ("packet.reviewed" if off == "written" else "packet.written")
    assert WebhookDelivery.objects.count() == 1 and len(zendesk.received) == 1


def test_an_evaluation_s_run_sends_nothing(ticket_t1001, zendesk):
    run = investigate(from_zendesk(ticket_t1001))
    lee = make_user("lee", None)
    packet_review(packet_id=run.packet.pk, reviewer=lee, decision="accepted")
    wait_for(lambda: notes_done(2), 10, "the original's notes")
    evaluation = evaluation_run(evaluation_create(candidate_model="rules"))
    candidate = evaluation.cases.get().candidate_run
    assert candidate.purpose == Run.Purpose.EVALUATION and candidate.packet is not None

    # Even on a ticket from Zendesk (its copy is not one), an evaluation's packet gets no note when reviewed.
    from_zendesk(candidate.ticket, external_id="48214")
    packet_review(packet_id=candidate.packet.pk, reviewer=lee, decision="accepted")
    assert webhook_threads_settle(5)
    assert WebhookDelivery.objects.count() == 2 and len(zendesk.received) == 2


def test_the_webhook_and_the_note_go_side_by_side(ticket_t1001, zendesk, hook):
    run = investigate(from_zendesk(ticket_t1001))
    done = WebhookDelivery.objects.exclude(status=WebhookDelivery.Status.PENDING)
    wait_for(lambda: done.count() == 2 or None, 10, "the note and the event")

    (event,) = hook.events()
    assert event["type"] == "packet.written" and event["run"]["id"] == run.pk  # the event as before
    targets = sorted(WebhookDelivery.objects.values_list("target", "status"))
    assert targets == [("webhook", "delivered"), ("zendesk_note", "delivered")]
    assert len(zendesk.notes(TICKET)) == 1


def _statements(ticket) -> list[str]:
    sent: list[str] = []
    with connection.execute_wrapper(lambda execute, sql, *args: sent.append(sql) or execute(sql, *args)):
        investigate(ticket)
    return sent


def test_the_note_adds_no_statement_to_a_run_on_postgresql_and_none_when_off(ticket_t1001, zendesk, settings):
    ticket = from_zendesk(ticket_t1001)
    zendesk_configure(settings, zendesk, written=False, review=False)
    _statements(ticket)  # warm: the first run of a process reads what later runs have cached
    off = _statements(ticket)
    assert not any(WebhookDelivery._meta.db_table in sql for sql in off)
    zendesk_configure(settings, zendesk)
    on = _statements(ticket)

    # PostgreSQL: the note's INSERT goes with the last step's other writes, in one statement.
    assert len(on) - len(off) == (0 if connection.vendor == "postgresql" else 1)
    assert sum(WebhookDelivery._meta.db_table in sql for sql in on) == 1
    wait_for(notes_done, 10, "the note")


# --- the command, the admin, the settings -------------------------------------------------------------


def test_the_command_sends_a_note_the_broker_did_not_take(ticket_t1001, zendesk, settings, caplog):
    settings.AGENT_ZENDESK_NOTE_ON_WRITTEN = False
    run = investigate(from_zendesk(ticket_t1001))
    with publishing_to(celery_app, "test-unused"), broker_down(celery_app):
        packet_review(packet_id=run.packet.pk, reviewer=make_user("lee", None), decision="accepted")
    assert "could not be enqueued" in caplog.text
    pending = WebhookDelivery.objects.get(status="pending")
    assert zendesk.received == []

    call_command("deliver_webhooks")
    pending.refresh_from_db()
    assert (pending.status, pending.target, pending.attempt_count) == ("delivered", "zendesk_note", 1)
    assert len(zendesk.notes(TICKET)) == 1
    call_command("deliver_webhooks")  # nothing is due any more
    assert len(zendesk.received) == 1


def test_supervisors_see_the_note_in_the_deliveries_and_no_token(ticket_t1001, zendesk, supervisor_client):
    zendesk.tickets[TICKET] = "closed"
    investigate(from_zendesk(ticket_t1001))
    (delivery,) = wait_for(notes_done, 10, "the note")

    page = supervisor_client.get("/admin/agentrun/webhookdelivery/")
    assert page.status_code == 200
    assert b"Zendesk note" in page.content and f"ticket {TICKET}".encode() in page.content
    detail = supervisor_client.get(f"/admin/agentrun/webhookdelivery/{delivery.pk}/change/")
    assert detail.status_code == 200
    assert b"Status: closed prevents ticket update" in detail.content and b"Support agent:" in detail.content
    assert TOKEN.encode() not in page.content + detail.content


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, (False, False)),
        ({"ZENDESK": True}, (True, True)),
        ({"ZENDESK": True, "AGENT_ZENDESK_NOTE_ON_WRITTEN": "false"}, (False, True)),
        ({"ZENDESK": True, "AGENT_ZENDESK_NOTE_ON_REVIEW": "off"}, (True, False)),
    ],
)
def test_the_notes_are_on_by_default_with_zendesk_s_credentials(monkeypatch, env, expected):
    for name in ("AGENT_ZENDESK_NOTE_ON_WRITTEN", "AGENT_ZENDESK_NOTE_ON_REVIEW"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        if name != "ZENDESK":
            monkeypatch.setenv(name, value)
    zendesk = ("https://acme.zendesk.com", EMAIL, TOKEN) if env.get("ZENDESK") else ("", "", "")
    assert zendesk_notes(site_url=SITE, zendesk=zendesk) == expected


@pytest.mark.parametrize(
    ("env", "zendesk", "site", "complaint"),
    [
        (
            {"AGENT_ZENDESK_NOTE_ON_WRITTEN": "true"},
            ("https://acme.zendesk.com", "", ""),
            SITE,
            "AGENT_ZENDESK_NOTE_ON_WRITTEN is on: a note needs ZENDESK_URL, ZENDESK_EMAIL and ZENDESK_API_TOKEN",
        ),
        (
            {},
            ("https://acme.zendesk.com", EMAIL, TOKEN),
            "",
            "AGENT_SITE_URL must be set when AGENT_ZENDESK_NOTE_ON_WRITTEN and AGENT_ZENDESK_NOTE_ON_REVIEW are on",
        ),
        ({"AGENT_ZENDESK_NOTE_ON_REVIEW": "maybe"}, ("", "", ""), SITE, "must be a boolean"),
    ],
)
def test_notes_that_cannot_be_sent_are_refused_at_start(monkeypatch, env, zendesk, site, complaint):
    for name in ("AGENT_ZENDESK_NOTE_ON_WRITTEN", "AGENT_ZENDESK_NOTE_ON_REVIEW"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ImproperlyConfigured, match=complaint) as refused:
        zendesk_notes(site_url=site, zendesk=zendesk)
    assert TOKEN not in str(refused.value)


# --- a real worker ----------------------------------------------------------------------------------


def test_a_worker_puts_the_note_and_waits_as_zendesk_asks(ticket_t1001, zendesk, tmp_path):
    zendesk.answers.append(Answer(429, {"error": "TooManyRequests"}, {"Retry-After": "1"}))
    cluster = Cluster(
        tmp_path,
        ZENDESK_URL=zendesk.base,
        ZENDESK_EMAIL=EMAIL,
        ZENDESK_API_TOKEN=TOKEN,
        AGENT_SITE_URL=SITE,
        AGENT_PACKET_WEBHOOK_BACKOFF_SECONDS="0.05",
    )
    ticket = from_zendesk(ticket_t1001)
    with publishing_to(celery_app, cluster.queue):
        try:
            cluster.worker()
            run = investigation_start(ticket=ticket)  # the rules model, on the worker
            (delivery,) = wait_for(notes_done, 60, "the worker to put the note")
        finally:
            cluster.stop()

    assert (delivery.status, delivery.run_id) == ("delivered", run.pk)
    assert [(a.outcome, a.http_status) for a in delivery.attempts.order_by("number")] == [
        ("retry", 429),
        ("delivered", 200),
    ]
    first, second = zendesk.received
    assert second.at - first.at >= 1.0  # the task's countdown is Retry-After's, not the backoff's
    (note,) = zendesk.notes(TICKET)
    assert note.endswith(f"Packet: {link(run)}")
    assert TOKEN not in "".join(log.read_text() for log in tmp_path.glob("*.log"))
