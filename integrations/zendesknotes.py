"""A private note on the Zendesk ticket when its packet is written and when staff review it.

The note is plain text (Zendesk shows a comment's `body` as written and makes its links
clickable): why the run stopped, in the words staff read; the summary; the suggested reply
(on a review: the decision, who made it, and the reply as the reviewer kept it, or the
rejection's reason and note); and the link to the packet. Only agents see it: nothing goes to
the customer.

It goes through the packet webhook's outbox (integrations.webhooks): a WebhookDelivery with
target `zendesk_note`, recorded in the transaction that writes the packet (held with the run's
last step) or the review, sent once that commits, by the same task, thread or command, with the
same attempts and backoff. A ticket that did not come from Zendesk (another source, or no
Zendesk ticket id) gets none, and an evaluation's run none: nothing is recorded.

Zendesk's side, as documented:

* Comments are added by updating the ticket (Tickets API, Update Ticket):
  `PUT {ZENDESK_URL}/api/v2/tickets/{id}.json` with `{"ticket": {"comment": {"body": ..., "public": false}}}`;
  `public: false` makes it an internal note
  (https://developer.zendesk.com/api-reference/ticketing/tickets/ticket_comments/).
* API-token authentication: basic authentication as `{email}/token` with the token as the password
  (https://support.zendesk.com/hc/en-us/articles/4408831452954).
* Rate limits: HTTP 429 with `Retry-After`, the seconds to wait
  (https://developer.zendesk.com/documentation/ticketing/using-the-zendesk-api/best-practices-for-avoiding-rate-limiting/).
* Errors come as `{"error": ..., "description": ..., "details": {field: [{"description": ...}]}}`; a closed
  ticket cannot be updated: 422, "Status: closed prevents ticket update".

What an answer does: a 2xx delivers the note; a 429 is tried again after its Retry-After (at most
the backoff's cap); a 5xx, a timeout or a connection error again at the backoff; a 4xx (401, 403,
404, a 422 for a closed ticket) fails for good, with Zendesk's words recorded. The credentials go
to ZENDESK_URL only (no redirect is followed) and never into an error, a log line or the admin.
"""

from __future__ import annotations

import base64
import json
import re
import time
import uuid
from datetime import datetime
from typing import Any

import httpx2
from django.conf import settings
from django.utils import timezone

from engine.models import PacketReview, ReviewPacket, Run, WebhookDelivery
from engine.packetview import PacketView, packet_view
from engine.sql import StepWrites
from integrations.webhooks import EventType, Sent, Target, Transport, delivery_record, packet_admin_url
from tickets.intake import HelpDesk
from tickets.models import Ticket

TICKET_ID = re.compile(r"[0-9]{1,20}")  # Zendesk's ticket ids are whole numbers
MAX_ERROR_BODY = 64 * 1024  # of a refusal's body, read for Zendesk's words
MAX_WORDS = 300
HEADERS = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": "supportagent-note/1"}
Decision = PacketReview.Decision


def zendesk_ready() -> bool:
    """Whether notes can be sent: ZENDESK_URL, ZENDESK_EMAIL and ZENDESK_API_TOKEN are all set."""
    return bool(settings.ZENDESK_URL and settings.ZENDESK_EMAIL and settings.ZENDESK_API_TOKEN)


def note_ticket_id(ticket: Ticket) -> str | None:
    """The Zendesk ticket a note about `ticket` goes on (its id there), or None: it did not come from Zendesk."""
    if ticket.source != HelpDesk.ZENDESK or not TICKET_ID.fullmatch(ticket.external_id):
        return None
    return ticket.external_id


# --- recording ---------------------------------------------------------------------------


def zendesk_note_record(
    *,
    run: Run,
    packet: ReviewPacket,
    review: PacketReview | None = None,
    now: datetime,
    writes: StepWrites | None = None,
) -> None:
    """Record the note about `packet` (of `run`, its ticket loaded with it) just written, or just given `review`,
    in the current transaction (held with a step's `writes`, if given), to be sent after commit. Nothing for an
    evaluation's run or a ticket that did not come from Zendesk."""
    if run.purpose != Run.Purpose.INVESTIGATION:
        return
    ticket_id = note_ticket_id(run.ticket)
    if ticket_id is None:
        return
    text = note_text(packet_view(run=run, packet=packet), review=review, link=packet_admin_url(run.pk))
    delivery = WebhookDelivery(
        event_id=uuid.uuid4(),
        event_type=EventType.PACKET_REVIEWED if review else EventType.PACKET_WRITTEN,
        target=Target.ZENDESK_NOTE,
        ticket_external_id=ticket_id,
        run_id=run.pk,
        payload=note_payload(text),
        created_at=now,
        next_attempt_at=now,
    )
    delivery_record(delivery, writes=writes)


def note_payload(text: str) -> dict[str, Any]:
    """The Update Ticket body that adds `text` as an internal note (not public: the customer does not see it)."""
    return {"ticket": {"comment": {"body": text, "public": False}}}


# --- the note (pure) -------------------------------------------------------------------------


def note_text(view: PacketView, *, review: PacketReview | None, link: str) -> str:
    """The note about the packet `view` shows, just written or just given `review`; `link` opens the packet."""
    lines = (
        _reviewed(view, review)
        if review
        else [f"Support agent: a review packet for {view.ticket_ref} waits for review."]
    )
    lines += ["", f"Stopped: {view.stop_label}. {view.stop_explanation}", ""]
    lines += [f"Summary:\n{view.summary}" if view.summary else "Summary: none (the run did not complete)."]
    if review is None:
        lines += ["", f"Suggested reply:\n{view.reply}" if view.reply else "Suggested reply: none."]
    elif review.decision == Decision.ACCEPTED:
        lines += ["", _kept_reply(suggested=view.reply, kept=review.reply)]
    lines += ["", f"Packet: {link}"]
    return "\n".join(lines)


def _reviewed(view: PacketView, review: PacketReview) -> list[str]:
    who = review.reviewer.get_username() if review.reviewer else "the system"
    lines = [f"Support agent: {who} {review.decision} the review packet for {view.ticket_ref}."]
    if review.reason:
        lines.append(f"Reason: {review.get_reason_display()}")
    if review.note:
        lines.append(f"Note: {review.note}")
    return lines


def _kept_reply(*, suggested: str, kept: str) -> str:
    if not kept:
        return "Reply: none kept (the reviewer chose not to use one)." if suggested else "Reply: none."
    how = "as suggested" if kept == suggested else "edited by the reviewer"
    return f"Reply, {how}:\n{kept}"


# --- sending -------------------------------------------------------------------------------


def zendesk_note_send(delivery: WebhookDelivery) -> Sent:
    """PUT the note on its ticket; outside any transaction. A refusal's body is read (bounded) for Zendesk's
    words; a success's is not."""
    email, token = settings.ZENDESK_EMAIL, settings.ZENDESK_API_TOKEN
    url = f"{settings.ZENDESK_URL}/api/v2/tickets/{delivery.ticket_external_id}.json"
    started, clock = timezone.now(), time.monotonic()
    status, error, retry_after = None, "", None
    try:
        with (
            httpx2.Client(timeout=settings.AGENT_PACKET_WEBHOOK_TIMEOUT, follow_redirects=False) as client,
            client.stream(
                "PUT",
                url,
                content=json.dumps(delivery.payload).encode(),
                headers=HEADERS,
                auth=(f"{email}/token", token),
            ) as response,
        ):
            status = response.status_code
            if not 200 <= status < 300:
                error, retry_after = _refused(response, ticket_id=delivery.ticket_external_id)
    except httpx2.HTTPError as exc:
        error = f"{type(exc).__name__}: {exc}"
    latency = round((time.monotonic() - clock) * 1000)
    return Sent(started, status, _scrubbed(error, email=email, token=token), latency, retry_after)


def _refused(response: httpx2.Response, *, ticket_id: str) -> tuple[str, float | None]:
    """A refusal as recorded, and for a 429 the seconds its Retry-After asks to wait."""
    body = bytearray()
    for chunk in response.iter_bytes():
        body += chunk
        if len(body) >= MAX_ERROR_BODY:
            break
    wait = retry_after_seconds(response.headers.get("retry-after", "")) if response.status_code == 429 else None
    return refusal(response.status_code, bytes(body[:MAX_ERROR_BODY]), ticket_id=ticket_id), wait


ZENDESK_NOTE = Transport(ready=zendesk_ready, send=zendesk_note_send)


def refusal(status: int, body: bytes, *, ticket_id: str) -> str:
    """What a non-2xx answer is recorded as: the status, what it means here, and Zendesk's own words."""
    meaning = {
        401: "Zendesk did not accept ZENDESK_EMAIL and ZENDESK_API_TOKEN",
        403: f"ZENDESK_EMAIL's user may not update ticket {ticket_id}",
        404: f"Zendesk has no ticket {ticket_id}",
        422: f"Zendesk refused the note on ticket {ticket_id}",
        429: "Zendesk's rate limit",
    }.get(status, "Zendesk's error" if status >= 500 else "")
    words = zendesk_words(body)
    text = f"HTTP {status}" + (f": {meaning}" if meaning else "")
    return text + (f" ({words})" if words else "")


def zendesk_words(body: bytes) -> str:
    """Zendesk's message in an error body (`error`, `description`, each of `details`' descriptions), or a short
    plain-text body; "" for anything else (an HTML page, nothing)."""
    try:
        data = json.loads(body)
    except ValueError:
        text = body.decode("utf-8", "replace").strip()
        return text[:MAX_WORDS] if text and not text.startswith("<") else ""
    found = [text for text in _strings(data) if text]
    return "; ".join(dict.fromkeys(found))[:MAX_WORDS]


def _strings(data: Any) -> list[str]:
    """The messages of Zendesk's error shapes: `{"error": "RecordInvalid", "description": ..., "details": {field:
    [{"description": ...}]}}` and `{"error": {"title": ..., "message": ...}}`."""
    if not isinstance(data, dict):
        return [data.strip()] if isinstance(data, str) else []
    found: list[str] = []
    for key in ("error", "title", "description", "message"):
        found += _strings(data.get(key))
    details = data.get("details")
    if isinstance(details, dict):
        for entries in details.values():
            for entry in entries if isinstance(entries, list) else [entries]:
                found += _strings(entry.get("description")) if isinstance(entry, dict) else _strings(entry)
    return found


def retry_after_seconds(value: str) -> float | None:
    """The seconds a 429's Retry-After asks to wait (Zendesk gives whole seconds); None when it says none."""
    value = value.strip()
    return float(value) if value.isdigit() else None


def _scrubbed(text: str, *, email: str, token: str) -> str:
    """An error as stored and logged: the token, and the basic credentials it makes, left out."""
    if token:
        basic = base64.b64encode(f"{email}/token:{token}".encode()).decode()
        text = text.replace(basic, "[credentials]").replace(token, "[token]")
    return text[:500]


# --- what the engine announces (engine.signals; connected in integrations.apps) --------


def on_packet_written(sender, *, run: Run, packet: ReviewPacket, now: datetime, writes: StepWrites, **kwargs) -> None:
    if settings.AGENT_ZENDESK_NOTE_ON_WRITTEN:
        zendesk_note_record(run=run, packet=packet, now=now, writes=writes)
