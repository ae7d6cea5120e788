"""Packet notifications: a signed JSON event to the help desk when a packet is written or reviewed,
and when a call starts waiting for a supervisor's approval; and the outbox every message to the
help desk goes through (the event, and the Zendesk note of integrations.zendesknotes).

Recording: `packet_event_record` adds a WebhookDelivery in the caller's
transaction (a run's last step, or a review) and has it sent once that
transaction commits: never inside it, never before it. With no
AGENT_PACKET_WEBHOOK_URL nothing is recorded and no statement is added.

Sending: `webhook_deliver` makes one attempt at a delivery no one else holds and
records it, through its target's transport (`TRANSPORTS`: this module's signed
POST; the Zendesk note's PUT, which integrations.apps adds). Who calls it: the
task `agentrun.deliver_webhook` on the workers, which Celery retries at the
backoff; without a broker (inline mode) a background thread, so that the loop or
the review never waits on the receiver; and `manage.py deliver_webhooks`, for
what is due and was left pending (a process that exited, a broker that was down).
The help desk gets a note or a link; nothing goes to the customer.
"""

from __future__ import annotations

import atexit
import hashlib
import hmac
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Literal

import httpx2
from celery import current_app as celery_app
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerUnavailable
from pydantic import BaseModel, ConfigDict

from engine.models import Approval, PacketReview, ReviewPacket, Run, WebhookAttempt, WebhookDelivery
from engine.packetview import PacketView, packet_view
from engine.sql import StepWrites

log = logging.getLogger("agentrun")

EventType = WebhookDelivery.EventType
Target = WebhookDelivery.Target
SIGNATURE_HEADER = "X-Supportagent-Signature"
DELIVER_WEBHOOK_TASK = "agentrun.deliver_webhook"  # the task (integrations.tasks) that sends one delivery
# A sender holds a delivery for its request's timeout and this much more.
CLAIM_MARGIN_SECONDS = 10.0
Outcome = WebhookAttempt.Outcome


# --- the event ----------------------------------------------------------------------


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class EventTicket(_Part):
    ref: str
    source: str
    external_id: str


class EventRun(_Part):
    id: int
    status: str
    detail: str
    stop_reason: str


class EventPacket(_Part):
    url: str
    summary: str | None


class EventReview(_Part):
    decision: Literal[PacketReview.Decision.ACCEPTED, PacketReview.Decision.REJECTED]
    note: str
    reviewed_at: datetime


class PacketEvent(_Part):
    """What the receiver gets, as JSON. `review` only on `packet.reviewed`."""

    id: uuid.UUID
    type: Literal[EventType.PACKET_WRITTEN, EventType.PACKET_REVIEWED]
    created_at: datetime
    ticket: EventTicket
    run: EventRun
    packet: EventPacket
    review: EventReview | None = None


class EventWaitingRun(_Part):
    id: int
    status: str
    deadline_at: datetime
    url: str


class EventApproval(_Part):
    id: int
    tool: str
    args: dict
    reason: str


class ApprovalEvent(_Part):
    """What the receiver gets when a call starts waiting for approval: answer it before `run.deadline_at`."""

    id: uuid.UUID
    type: Literal[EventType.APPROVAL_WAITING]
    created_at: datetime
    ticket: EventTicket
    run: EventWaitingRun
    approval: EventApproval


def webhook_enabled() -> bool:
    return bool(settings.AGENT_PACKET_WEBHOOK_URL)


def packet_admin_url(run_id: int) -> str:
    """The absolute admin link to a run's packet (a run has one; the link opens it by the run's id)."""
    return settings.AGENT_SITE_URL + reverse("admin:agentrun_reviewpacket_of_run", args=[run_id])


def packet_event(*, run: Run, packet: ReviewPacket, review: PacketReview | None, now: datetime) -> PacketEvent:
    """The event for `packet` (of `run`, with its ticket) just written, or just given `review`."""
    return packet_event_of(packet_view(run=run, packet=packet), review=review, now=now)


def packet_event_of(view: PacketView, *, review: PacketReview | None, now: datetime) -> PacketEvent:
    """The event as a projection of the packet's view: every field but its own id, type and time read from it."""
    return PacketEvent(
        id=uuid.uuid4(),
        type=EventType.PACKET_REVIEWED if review else EventType.PACKET_WRITTEN,
        created_at=now,
        ticket=EventTicket(ref=view.ticket_ref, source=view.ticket_source, external_id=view.ticket_external_id),
        run=EventRun(id=view.run_id, status=view.run_status, detail=view.detail, stop_reason=view.stop_explanation),
        packet=EventPacket(url=packet_admin_url(view.run_id), summary=view.summary),
        review=EventReview(decision=review.decision, note=review.note, reviewed_at=review.created_at)
        if review
        else None,
    )


def approval_event(*, run: Run, approval: Approval, now: datetime) -> ApprovalEvent:
    """The event for `approval` (of `run`, with its ticket), just asked for."""
    ticket = run.ticket
    return ApprovalEvent(
        id=uuid.uuid4(),
        type=EventType.APPROVAL_WAITING,
        created_at=now,
        ticket=EventTicket(ref=ticket.ref, source=ticket.source, external_id=ticket.external_id),
        run=EventWaitingRun(
            id=run.pk,
            status=run.status,
            deadline_at=run.deadline_at,
            url=settings.AGENT_SITE_URL + reverse("admin:agentrun_run_change", args=[run.pk]),
        ),
        approval=EventApproval(id=approval.pk, tool=approval.tool, args=approval.args, reason=approval.reason),
    )


def packet_event_record(
    *,
    run: Run,
    packet: ReviewPacket,
    review: PacketReview | None = None,
    now: datetime,
    writes: StepWrites | None = None,
) -> None:
    """Record the event in the current transaction (held with a step's `writes`, if given) and send it after commit."""
    event_record(packet_event(run=run, packet=packet, review=review, now=now), run_id=run.pk, now=now, writes=writes)


def event_record(
    event: PacketEvent | ApprovalEvent, *, run_id: int, now: datetime, writes: StepWrites | None = None
) -> None:
    """Record any event in the current transaction (held with a step's `writes`, if given) and send it after commit."""
    delivery = WebhookDelivery(
        event_id=event.id,
        event_type=event.type,
        run_id=run_id,
        payload=event.model_dump(mode="json"),
        created_at=now,
        next_attempt_at=now,
    )
    delivery_record(delivery, writes=writes)


def delivery_record(delivery: WebhookDelivery, *, writes: StepWrites | None = None) -> None:
    """Insert a new delivery of any target in the current transaction (held with a step's `writes`, if given)
    and have it sent once that transaction commits."""
    if writes is None:
        delivery.save(force_insert=True)
    else:
        writes.insert(delivery)
    transaction.on_commit(partial(webhook_enqueue, str(delivery.event_id)))


# --- signing and deciding (pure) ----------------------------------------------------


def event_body(payload: dict) -> bytes:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def signature_header(*, secret: str, timestamp: int, body: bytes) -> str:
    """`t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" keyed with the secret>`."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def attempt_outcome(*, http_status: int | None, number: int, max_attempts: int) -> Outcome:
    """A 2xx delivers; a 4xx other than 408 and 429 fails for good; anything else (another status,
    no answer) is tried again, until `max_attempts` were made."""
    if http_status is not None and 200 <= http_status < 300:
        return Outcome.DELIVERED
    if http_status is not None and 400 <= http_status < 500 and http_status not in (408, 429):
        return Outcome.FAILED
    return Outcome.RETRY if number < max_attempts else Outcome.FAILED


def retry_delay(*, number: int, base: float, cap: float) -> float:
    """Seconds to wait after failed attempt `number` (1, 2, ...): base, doubling, at most cap."""
    return min(cap, base * 2 ** (number - 1))


# --- sending ------------------------------------------------------------------------


@dataclass(frozen=True)
class Sent:
    started_at: datetime
    http_status: int | None
    error: str
    latency_ms: int
    retry_after: float | None = None  # the seconds the receiver asked to wait before the next attempt


@dataclass(frozen=True)
class Transport:
    """How a target's deliveries are sent: `ready()` says whether its settings allow sending now (a target
    that is not ready is left pending, unclaimed); `send` makes one attempt, outside any transaction, and
    reports it without raising."""

    ready: Callable[[], bool]
    send: Callable[[WebhookDelivery], Sent]


def webhook_deliver(*, event_id: str) -> float | None:
    """Make one attempt at a pending delivery, unless another sender holds it, and record it.

    Seconds until the delivery should be tried again, or None: delivered, failed
    for good, or not this caller's to send. Safe to call twice.
    """
    targets = [target for target, transport in TRANSPORTS.items() if transport.ready()]
    if not targets:
        return None
    delivery = _claim(event_id, targets)
    if delivery is None:
        return None
    return _record_attempt(delivery, TRANSPORTS[delivery.target].send(delivery))


def _claim(event_id: str, targets: list[str]) -> WebhookDelivery | None:
    """Hold the delivery, if it goes to one of `targets`, for one attempt (a conditional UPDATE: 0 rows means
    it is done or held, or its target is not ready)."""
    now = timezone.now()
    hold = now + timedelta(seconds=settings.AGENT_PACKET_WEBHOOK_TIMEOUT + CLAIM_MARGIN_SECONDS)
    free = Q(claimed_until__isnull=True) | Q(claimed_until__lt=now)
    mine = WebhookDelivery.objects.filter(
        free, event_id=event_id, status=WebhookDelivery.Status.PENDING, target__in=targets
    )
    if not mine.update(claimed_until=hold):
        return None
    return WebhookDelivery.objects.get(event_id=event_id)


def _post_event(delivery: WebhookDelivery) -> Sent:
    """POST the event, signed now; outside any transaction. The response's body is not read."""
    body = event_body(delivery.payload)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "supportagent-webhook/1",
        "X-Supportagent-Event": delivery.event_type,
        "X-Supportagent-Delivery": str(delivery.event_id),
        SIGNATURE_HEADER: signature_header(
            secret=settings.AGENT_PACKET_WEBHOOK_SECRET, timestamp=int(time.time()), body=body
        ),
    }
    started, clock = timezone.now(), time.monotonic()
    status, error = None, ""
    try:
        with httpx2.Client(timeout=settings.AGENT_PACKET_WEBHOOK_TIMEOUT) as client:
            with client.stream("POST", settings.AGENT_PACKET_WEBHOOK_URL, content=body, headers=headers) as response:
                status = response.status_code
    except httpx2.HTTPError as exc:
        error = _scrubbed(f"{type(exc).__name__}: {exc}")
    return Sent(started, status, error, round((time.monotonic() - clock) * 1000))


def _scrubbed(text: str) -> str:
    """An error as stored and logged: the secret and the URL (which may carry a token) left out."""
    for secret, name in (
        (settings.AGENT_PACKET_WEBHOOK_SECRET, "[secret]"),
        (settings.AGENT_PACKET_WEBHOOK_URL, "[webhook URL]"),
    ):
        if secret:
            text = text.replace(secret, name)
    return text[:500]


def _record_attempt(delivery: WebhookDelivery, sent: Sent) -> float | None:
    number = delivery.attempt_count + 1
    outcome = attempt_outcome(
        http_status=sent.http_status, number=number, max_attempts=settings.AGENT_PACKET_WEBHOOK_ATTEMPTS
    )
    wait = _next_wait(sent, number=number) if outcome == Outcome.RETRY else None
    now = timezone.now()
    status = {
        Outcome.DELIVERED: WebhookDelivery.Status.DELIVERED,
        Outcome.FAILED: WebhookDelivery.Status.FAILED,
        Outcome.RETRY: WebhookDelivery.Status.PENDING,
    }[outcome]
    with transaction.atomic():
        WebhookAttempt.objects.create(
            delivery=delivery,
            number=number,
            started_at=sent.started_at,
            http_status=sent.http_status,
            error=sent.error,
            latency_ms=sent.latency_ms,
            outcome=outcome,
        )
        WebhookDelivery.objects.filter(pk=delivery.pk).update(
            status=status,
            attempt_count=number,
            claimed_until=None,
            next_attempt_at=now + timedelta(seconds=wait) if wait is not None else None,
            finished_at=None if wait is not None else now,
        )
    if outcome != Outcome.DELIVERED:
        log.warning(
            "%s %s (%s): attempt %d %s (%s)%s",
            Target(delivery.target).label,
            delivery.event_id,
            delivery.event_type,
            number,
            outcome.label,
            sent.error or f"HTTP {sent.http_status}",
            f"; next in {wait:g} s" if wait is not None else "",
        )
    return wait


def _next_wait(sent: Sent, *, number: int) -> float:
    """The backoff after attempt `number`, or the wait the receiver asked for (Retry-After), at most the cap."""
    cap = settings.AGENT_PACKET_WEBHOOK_BACKOFF_CAP_SECONDS
    if sent.retry_after is not None:
        return min(cap, sent.retry_after)
    return retry_delay(number=number, base=settings.AGENT_PACKET_WEBHOOK_BACKOFF_SECONDS, cap=cap)


TRANSPORTS: dict[str, Transport] = {Target.WEBHOOK: Transport(ready=webhook_enabled, send=_post_event)}


# --- who sends: a worker, a background thread, or the command -------------------------


def webhook_enqueue(event_id: str) -> None:
    """Have the delivery sent: by a worker, or without a broker by a background thread.

    When the broker cannot be reached the delivery stays pending and the error is
    logged; `manage.py deliver_webhooks` sends it once it is due.
    """
    if celery_app.conf.task_always_eager:
        _send_in_background(event_id)
        return
    try:
        celery_app.send_task(DELIVER_WEBHOOK_TASK, (event_id,))  # by name: integrations.tasks imports this module
    except BrokerUnavailable as exc:
        log.error(
            "packet webhook %s is saved but could not be enqueued, the broker did not answer (%s);"
            " manage.py deliver_webhooks sends it",
            event_id,
            exc,
        )


_threads: set[threading.Thread] = set()
_threads_lock = threading.Lock()


def _send_in_background(event_id: str) -> None:
    thread = threading.Thread(
        target=_deliver_until_done, args=(event_id,), daemon=True, name=f"packet-webhook-{event_id[:8]}"
    )
    with _threads_lock:
        _threads.add(thread)
    thread.start()


def _deliver_until_done(event_id: str) -> None:
    """Every attempt a delivery gets, sleeping the backoff between them (inline mode)."""
    try:
        while (wait := webhook_deliver(event_id=event_id)) is not None:
            time.sleep(wait)
    except Exception as exc:  # the delivery stays pending, for the command
        log.error("packet webhook %s: sending stopped on %s", event_id, type(exc).__name__)
    finally:
        connection.close()
        with _threads_lock:
            _threads.discard(threading.current_thread())


def webhook_threads_settle(timeout: float) -> bool:
    """Wait up to `timeout` seconds for the background senders; whether none is left."""
    until = time.monotonic() + timeout
    with _threads_lock:
        threads = list(_threads)
    for thread in threads:
        thread.join(max(until - time.monotonic(), 0))
    return not any(thread.is_alive() for thread in threads)


@atexit.register
def _let_first_attempts_finish() -> None:
    """A command that exits (investigate, run_scenario) gives an attempt in flight its timeout to end;
    whatever is left is pending, for `manage.py deliver_webhooks`."""
    if _threads:
        webhook_threads_settle(settings.AGENT_PACKET_WEBHOOK_TIMEOUT + 1)


def webhooks_due(*, now: datetime | None = None) -> list[str]:
    """The event ids of pending deliveries whose next attempt is due and that no sender holds."""
    now = now or timezone.now()
    free = Q(claimed_until__isnull=True) | Q(claimed_until__lt=now)
    due = WebhookDelivery.objects.filter(free, status=WebhookDelivery.Status.PENDING, next_attempt_at__lte=now)
    return [str(event_id) for event_id in due.order_by("next_attempt_at").values_list("event_id", flat=True)]


# --- what the engine announces (engine.signals; connected in integrations.apps) --------


def on_packet_written(sender, *, run: Run, packet: ReviewPacket, now: datetime, writes: StepWrites, **kwargs) -> None:
    if webhook_enabled():
        packet_event_record(run=run, packet=packet, now=now, writes=writes)


def on_approval_asked(sender, *, run: Run, approval: Approval, now: datetime, writes: StepWrites, **kwargs) -> None:
    if webhook_enabled():
        event_record(approval_event(run=run, approval=approval, now=now), run_id=run.pk, now=now, writes=writes)
