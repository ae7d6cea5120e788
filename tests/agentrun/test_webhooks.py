"""Packet notifications: signed events to a real local HTTP endpoint, after commit, with retries."""

from __future__ import annotations

import hashlib
import hmac
import json
import time

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.db import connection

from engine.models import Run, WebhookAttempt, WebhookDelivery
from engine.services import investigation_start
from engine.statuses import TERMINAL
from integrations.webhooks import attempt_outcome, retry_delay, webhook_threads_settle
from staff.reviews import packet_review
from supportagent.celery import app as celery_app
from supportagent.settings import packet_webhook
from tests.support.staff import make_user
from tests.support.webhooks import SECRET, SITE, configure, investigate
from tests.support.workers import Cluster, broker_down, publishing_to, wait_for


def verify(secret: str, header: str, body: bytes, tolerance: int = 300) -> bool:
    """What a receiver does (the snippet in docs/help-desks/notifications.md): recompute the HMAC over "<t>.<body>", compare in constant time."""
    fields = dict(part.split("=", 1) for part in header.split(","))
    timestamp, signature = fields["t"], fields["v1"]
    if abs(time.time() - int(timestamp)) > tolerance:
        return False
    expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, signature)


def delivered(n: int = 1) -> list[WebhookDelivery] | None:
    done = list(WebhookDelivery.objects.exclude(status=WebhookDelivery.Status.PENDING).order_by("created_at"))
    return done if len(done) >= n else None


# --- the events -----------------------------------------------------------------------


def test_a_written_packet_is_sent_signed_after_its_step_commits(ticket_t1001, hook):
    ticket_t1001.source, ticket_t1001.external_id = "zendesk", "48213"
    ticket_t1001.save()
    run = investigate(ticket_t1001)
    wait_for(delivered, 10, "the delivery")

    (got,) = hook.received
    assert got.packet_committed
    assert verify(SECRET, got.headers["X-Supportagent-Signature"], got.body)
    assert not verify("another secret", got.headers["X-Supportagent-Signature"], got.body)
    event = json.loads(got.body)
    assert (event["type"], got.headers["X-Supportagent-Event"]) == ("packet.written", "packet.written")
    assert got.headers["X-Supportagent-Delivery"] == event["id"]
    assert event["ticket"] == {"ref": "T-1001", "source": "zendesk", "external_id": "48213"}
    assert event["run"]["id"] == run.pk and event["run"]["status"] == "COMPLETED"
    assert event["run"]["stop_reason"].startswith("The model returned a valid draft")
    assert event["packet"] == {
        "summary": "The export needs the admin role.",
        "url": f"{SITE}/admin/agentrun/reviewpacket/run/{run.pk}/",
    }
    assert event["review"] is None
    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.attempt_count, delivery.run_id) == ("delivered", 1, run.pk)
    assert delivery.created_at == run.packet.created_at  # recorded by the step that wrote the packet
    attempt = delivery.attempts.get()
    assert (attempt.number, attempt.outcome, attempt.http_status, attempt.error) == (1, "delivered", 200, "")


def test_a_review_sends_its_decision_and_note(ticket_t1001, hook, staff_user):
    run = investigate(ticket_t1001)
    wait_for(delivered, 10, "the packet.written delivery")
    packet_review(
        packet_id=run.packet.pk,
        reviewer=staff_user,
        decision="rejected",
        reason="wrong_conclusion",
        note="Ask for the job id.",
    )
    wait_for(lambda: delivered(2), 10, "the packet.reviewed delivery")

    got = hook.received[1]
    assert verify(SECRET, got.headers["X-Supportagent-Signature"], got.body)
    event = json.loads(got.body)
    assert event["type"] == "packet.reviewed"
    assert (event["review"]["decision"], event["review"]["note"]) == ("rejected", "Ask for the job id.")
    assert event["run"]["id"] == run.pk and event["ticket"]["ref"] == "T-1001"
    assert event["id"] != hook.events()[0]["id"]


def test_the_event_s_link_opens_the_packet_in_the_admin(ticket_t1001, hook, staff_client):
    run = investigate(ticket_t1001)
    wait_for(delivered, 10, "the delivery")
    url = hook.events()[0]["packet"]["url"]
    response = staff_client.get(url.removeprefix(SITE))
    assert response.status_code == 302
    assert response["Location"] == f"/admin/agentrun/reviewpacket/{run.packet.pk}/change/"
    assert staff_client.get(response["Location"]).status_code == 200
    assert staff_client.get("/admin/agentrun/reviewpacket/run/999999/").status_code == 404


# --- retries -------------------------------------------------------------------------


def test_a_500_is_tried_again_and_every_attempt_is_recorded(ticket_t1001, receivers, settings):
    receiver = receivers(statuses=(500, 503, 200))
    configure(settings, receiver.url)
    investigate(ticket_t1001)
    (delivery,) = wait_for(delivered, 10, "the delivery")

    assert (delivery.status, delivery.attempt_count) == ("delivered", 3)
    attempts = list(delivery.attempts.values_list("number", "outcome", "http_status"))
    assert attempts == [(1, "retry", 500), (2, "retry", 503), (3, "delivered", 200)]
    assert len(receiver.received) == 3
    assert len({r.headers["X-Supportagent-Delivery"] for r in receiver.received}) == 1
    assert all(verify(SECRET, r.headers["X-Supportagent-Signature"], r.body) for r in receiver.received)


def test_a_4xx_fails_for_good_at_once(ticket_t1001, receivers, settings):
    receiver = receivers(statuses=(410, 200))
    configure(settings, receiver.url)
    investigate(ticket_t1001)
    (delivery,) = wait_for(delivered, 10, "the delivery")

    assert (delivery.status, delivery.attempt_count) == ("failed", 1)
    assert list(delivery.attempts.values_list("outcome", "http_status")) == [("failed", 410)]
    time.sleep(0.3)  # several backoffs: nothing more is sent
    assert len(receiver.received) == 1


def test_an_unreachable_receiver_is_tried_as_often_as_allowed_and_the_secret_stays_out(
    ticket_t1001, settings, caplog, receivers
):
    closed = receivers()
    url = closed.url + "?token=" + SECRET  # a URL may carry a token: it is no more logged than the secret
    closed.close()
    configure(settings, url, attempts=3)
    investigate(ticket_t1001)
    (delivery,) = wait_for(delivered, 10, "the delivery to give up")

    assert (delivery.status, delivery.attempt_count) == ("failed", 3)
    attempts = list(delivery.attempts.all())
    assert [a.outcome for a in attempts] == ["retry", "retry", "failed"]
    assert all(a.http_status is None and a.error.startswith("ConnectError") for a in attempts)
    stored = " ".join(a.error for a in attempts) + json.dumps(delivery.payload)
    assert SECRET not in stored and "127.0.0.1" not in stored
    assert "attempt 3 failed for good" in caplog.text and SECRET not in caplog.text


@pytest.mark.parametrize(
    ("status", "number", "outcome"),
    [
        (200, 1, "delivered"),
        (204, 5, "delivered"),
        (500, 1, "retry"),
        (302, 1, "retry"),
        (None, 4, "retry"),
        (408, 1, "retry"),
        (429, 1, "retry"),
        (400, 1, "failed"),
        (401, 1, "failed"),
        (404, 1, "failed"),
        (500, 5, "failed"),
        (None, 5, "failed"),
        (429, 5, "failed"),
    ],
)
def test_which_answers_are_tried_again(status, number, outcome):
    assert attempt_outcome(http_status=status, number=number, max_attempts=5) == outcome


def test_the_backoff_doubles_up_to_its_cap():
    assert [retry_delay(number=n, base=30, cap=300) for n in range(1, 7)] == [30, 60, 120, 240, 300, 300]


# --- the loop never waits; nothing when unconfigured --------------------------------------------


def test_a_slow_receiver_does_not_lengthen_the_run(ticket_t1001, receivers, settings):
    receiver = receivers(delay=2.0)
    configure(settings, receiver.url)
    started = time.monotonic()
    run = investigate(ticket_t1001)
    took = time.monotonic() - started

    assert run.status == "COMPLETED"
    assert took < 1.5 and receiver.answered == 0  # the run was over before the receiver answered
    (delivery,) = wait_for(delivered, 10, "the slow delivery")
    assert delivery.status == "delivered" and delivery.attempts.get().latency_ms >= 2000


def test_nothing_is_recorded_or_sent_when_unconfigured(ticket_t1001, receivers, settings):
    receiver = receivers()
    settings.AGENT_PACKET_WEBHOOK_URL = ""
    settings.AGENT_SITE_URL = SITE
    run = investigate(ticket_t1001)
    packet_review(packet_id=run.packet.pk, reviewer=make_user("reviewer", None), decision="accepted")
    assert webhook_threads_settle(5)
    assert WebhookDelivery.objects.count() == 0 and receiver.received == []


def _statements(ticket) -> list[str]:
    sent: list[str] = []
    with connection.execute_wrapper(lambda execute, sql, *args: sent.append(sql) or execute(sql, *args)):
        investigate(ticket)
    return sent


def test_the_event_adds_no_statement_to_a_run_on_postgresql_and_none_when_unconfigured(
    ticket_t1001, receivers, settings
):
    receiver = receivers()
    settings.AGENT_PACKET_WEBHOOK_URL = ""
    _statements(ticket_t1001)  # warm: the first run of a process reads what later runs have cached
    off = _statements(ticket_t1001)
    assert not any(WebhookDelivery._meta.db_table in sql for sql in off)
    configure(settings, receiver.url)
    on = _statements(ticket_t1001)

    # PostgreSQL: the delivery's INSERT goes with the last step's other writes, in one statement.
    assert len(on) - len(off) == (0 if connection.vendor == "postgresql" else 1)
    assert sum(WebhookDelivery._meta.db_table in sql for sql in on) == 1
    wait_for(delivered, 10, "the delivery")


# --- the command, the admin, the settings ---------------------------------------------------


def test_the_command_sends_what_the_broker_did_not_take(ticket_t1001, hook, settings, caplog):
    run = investigate(ticket_t1001)
    wait_for(delivered, 10, "the packet.written delivery")
    user = make_user("reviewer", None)
    with publishing_to(celery_app, "test-unused"), broker_down(celery_app):
        packet_review(packet_id=run.packet.pk, reviewer=user, decision="accepted")
    assert "could not be enqueued" in caplog.text
    pending = WebhookDelivery.objects.get(status="pending")
    assert len(hook.received) == 1

    call_command("deliver_webhooks")
    pending.refresh_from_db()
    assert (pending.status, pending.attempt_count) == ("delivered", 1)
    assert [e["type"] for e in hook.events()] == ["packet.written", "packet.reviewed"]
    call_command("deliver_webhooks")  # nothing is due any more
    assert len(hook.received) == 2


def test_supervisors_see_deliveries_read_only_and_staff_do_not(ticket_t1001, hook, supervisor_client, staff_client):
    investigate(ticket_t1001)
    (delivery,) = wait_for(delivered, 10, "the delivery")
    page = supervisor_client.get("/admin/agentrun/webhookdelivery/")
    assert page.status_code == 200 and b"packet.written" in page.content
    detail = supervisor_client.get(f"/admin/agentrun/webhookdelivery/{delivery.pk}/change/")
    assert detail.status_code == 200 and b"T-1001" in detail.content and b"Delivered" in detail.content
    assert b'name="_save"' not in detail.content
    assert staff_client.get("/admin/agentrun/webhookdelivery/").status_code == 403


@pytest.mark.parametrize(
    ("env", "complaint"),
    [
        (
            {"AGENT_PACKET_WEBHOOK_URL": "https://desk.example.com/hook", "AGENT_SITE_URL": SITE},
            "AGENT_PACKET_WEBHOOK_SECRET must be set",
        ),
        (
            {"AGENT_PACKET_WEBHOOK_URL": "https://desk.example.com/hook", "AGENT_PACKET_WEBHOOK_SECRET": SECRET},
            "AGENT_SITE_URL must be set",
        ),
        (
            {
                "AGENT_PACKET_WEBHOOK_URL": "desk.example.com/hook?token=abc",
                "AGENT_PACKET_WEBHOOK_SECRET": SECRET,
                "AGENT_SITE_URL": SITE,
            },
            "AGENT_PACKET_WEBHOOK_URL must be an absolute",
        ),
    ],
)
def test_incomplete_webhook_settings_are_refused(monkeypatch, env, complaint):
    for name in ("AGENT_PACKET_WEBHOOK_URL", "AGENT_PACKET_WEBHOOK_SECRET", "AGENT_SITE_URL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ImproperlyConfigured, match=complaint) as refused:
        packet_webhook()
    assert "token=abc" not in str(refused.value) and SECRET not in str(refused.value)


def test_webhook_settings_read_whole(monkeypatch):
    monkeypatch.setenv("AGENT_PACKET_WEBHOOK_URL", "https://desk.example.com/hook")
    monkeypatch.setenv("AGENT_PACKET_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("AGENT_SITE_URL", SITE + "/")
    assert packet_webhook() == ("https://desk.example.com/hook", SECRET, SITE)


# --- a real worker ----------------------------------------------------------------------


def test_a_worker_delivers_and_retries_with_countdown(demo_committed, receivers, tmp_path):
    receiver = receivers(statuses=(500, 200))
    cluster = Cluster(
        tmp_path,
        AGENT_PACKET_WEBHOOK_URL=receiver.url,
        AGENT_PACKET_WEBHOOK_SECRET=SECRET,
        AGENT_SITE_URL=SITE,
        AGENT_PACKET_WEBHOOK_BACKOFF_SECONDS="0.5",
    )
    from tickets.models import Ticket

    with publishing_to(celery_app, cluster.queue):
        try:
            cluster.worker()
            run = investigation_start(ticket=Ticket.objects.get(ref="T-1001"))  # the rules model, on the worker
            (delivery,) = wait_for(delivered, 60, "the worker to deliver the event")
        finally:
            cluster.stop()

    assert Run.objects.get(pk=run.pk).status in TERMINAL
    assert (delivery.status, delivery.run_id) == ("delivered", run.pk)
    attempts = list(delivery.attempts.order_by("number"))
    assert [(a.outcome, a.http_status) for a in attempts] == [("retry", 500), ("delivered", 200)]
    assert (attempts[1].started_at - attempts[0].started_at).total_seconds() >= 0.5  # the countdown
    assert all(verify(SECRET, r.headers["X-Supportagent-Signature"], r.body) for r in receiver.received)
    assert WebhookAttempt.objects.count() == 2
