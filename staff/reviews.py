"""Staff reviews of review packets: an append-only history; the packet itself is never edited.

A packet's review is final unless changed on purpose: a new decision on a
reviewed packet needs `change_decision` and a note, and the same reviewer's
same decision sent again (a double click, a retried request) adds nothing.

`ReviewPacket.review_state` mirrors the latest review's decision so the queue can
sort on it, and beside it the packet keeps what the outcomes dashboard counts: the
deciding rejection's reason, when a person first reviewed it, and how far an accepted
packet's kept reply is from the suggestion (`reply_change`). They are written only
here, in the same transaction as the review.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Value
from django.db.models.functions import Coalesce

from engine.models import PacketReview, ReviewPacket, Run
from engine.packets import reply_change
from integrations.webhooks import packet_event_record, webhook_enabled
from integrations.zendesknotes import zendesk_note_record
from staff.recheck import needing_acknowledgement, packet_recheck_now

MAX_NOTE = 2000
MAX_REPLY = 5000
Reason = PacketReview.Reason


class ReviewError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def packet_review(
    *,
    packet_id: int,
    reviewer: User,
    decision: str,
    note: str = "",
    reason: str = "",
    reply: str | None = None,
    acknowledge_changed_evidence: bool = False,
    change_decision: bool = False,
) -> tuple[PacketReview, bool]:
    """Record `reviewer`'s decision on a packet; returns (review, created). A rejection needs a reason (one of
    PacketReview.Reason) and a note saying why; a superseded packet is not reviewed (its ticket's newer packet is).

    An acceptance keeps the reply as the reviewer left it: `reply` (the suggestion edited, or "" when they chose
    not to use it), or the packet's suggestion unchanged when `reply` is None. A rejection keeps none.

    A reviewed packet keeps its decision: the same reviewer's same decision again
    returns the review already recorded (created False); any other decision is
    refused (`already_reviewed`) unless `change_decision` with a note says why.

    An acceptance re-reads every cited item now (staff.recheck.packet_recheck_now,
    stored and cached, so the packet's page shows it), whatever a recent check
    said; an item changed or gone needs `acknowledge_changed_evidence`, and the
    review records both. The re-read runs before the transaction, not under the
    packet's row lock: a backend may take up to AGENT_RECHECK_TIMEOUT (seconds,
    over HTTP), and the lock would hold every other reviewer of the packet and the
    run step that supersedes it that long. The lock is then taken for the short
    write only, and the decision checks are made again under it.

    With the packet webhook on, a `packet.reviewed` event is recorded with the
    review and sent after the commit; with AGENT_ZENDESK_NOTE_ON_REVIEW, a
    private note on the ticket's Zendesk ticket likewise.
    """
    note = _checked_note(decision, note)
    reason = _checked_reason(decision, reason)
    packet = ReviewPacket.objects.filter(pk=packet_id).first()
    if packet is None:
        raise ReviewError("not_found", f"There is no review packet {packet_id}.")
    kept_reply = _kept_reply(decision, reply, suggested=packet.reply)
    earlier = _earlier_decision(packet, reviewer=reviewer, decision=decision, note=note, change=change_decision)
    if earlier is not None:
        return earlier, False
    changed = _changed_evidence(packet, reviewer) if decision == PacketReview.Decision.ACCEPTED else []
    if changed and not acknowledge_changed_evidence:
        raise ReviewError(
            "evidence_changed",
            f"Evidence {', '.join(changed)} changed or is gone since the packet was "
            "written: acknowledge the changed evidence to accept the packet.",
        )
    with transaction.atomic():
        packet = ReviewPacket.objects.select_for_update().get(pk=packet_id)
        earlier = _earlier_decision(packet, reviewer=reviewer, decision=decision, note=note, change=change_decision)
        if earlier is not None:  # the same submit, sent twice at once: the other one recorded it
            return earlier, False
        review = PacketReview.objects.create(
            packet=packet,
            reviewer=reviewer,
            decision=decision,
            note=note,
            reason=reason,
            reply=kept_reply,
            acknowledged_changed_evidence=bool(changed) and acknowledge_changed_evidence,
            changed_evidence=changed,
        )
        ReviewPacket.objects.filter(pk=packet.pk).update(
            review_state=decision,
            review_reason=reason,
            first_reviewed_at=Coalesce("first_reviewed_at", Value(review.created_at)),
            reply_change=reply_change(packet.reply, kept_reply),
        )
        _help_desk_told(packet, review)
    return review, True


def _help_desk_told(packet: ReviewPacket, review: PacketReview) -> None:
    """Record what the help desk is told of the review (the webhook's event, the Zendesk note), each when on,
    in the review's transaction; nothing is read when both are off."""
    event, note = webhook_enabled(), settings.AGENT_ZENDESK_NOTE_ON_REVIEW
    if not (event or note):
        return
    run = Run.objects.select_related("ticket").get(pk=packet.run_id)
    if event:
        packet_event_record(run=run, packet=packet, review=review, now=review.created_at)
    if note:
        zendesk_note_record(run=run, packet=packet, review=review, now=review.created_at)


def _checked_note(decision: str, note: str) -> str:
    note = (note or "").strip()
    if decision not in (PacketReview.Decision.ACCEPTED, PacketReview.Decision.REJECTED):
        raise ReviewError("bad_decision", "The decision must be accept or reject.")
    if decision == PacketReview.Decision.REJECTED and not note:
        raise ReviewError("note_required", "Say why the packet is rejected: a note is required.")
    if len(note) > MAX_NOTE:
        raise ReviewError("note_too_long", f"The note is longer than {MAX_NOTE} characters.")
    return note


def _checked_reason(decision: str, reason: str) -> str:
    """A rejection's reason, checked; an acceptance has none (a reason sent with it is not kept)."""
    if decision != PacketReview.Decision.REJECTED:
        return ""
    reason = (reason or "").strip()
    if not reason:
        raise ReviewError("reason_required", f"Say why the packet is rejected: a reason is required ({_reasons()}).")
    if reason not in Reason.values:
        raise ReviewError("bad_reason", f"Unknown reason {reason[:40]!r}: use one of {_reasons()}.")
    return reason


def _reasons() -> str:
    return ", ".join(Reason.values)


def _kept_reply(decision: str, reply: str | None, *, suggested: str) -> str:
    if decision != PacketReview.Decision.ACCEPTED:
        return ""
    if reply is None:
        return suggested
    reply = reply.replace("\r\n", "\n").strip()
    if len(reply) > MAX_REPLY:
        raise ReviewError("reply_too_long", f"The reply is longer than {MAX_REPLY} characters.")
    return reply


def packet_decision(*, packet: ReviewPacket) -> PacketReview | None:
    """The review whose decision the packet stands on: its latest staff review (None while pending)."""
    if packet.review_state not in (ReviewPacket.ReviewState.ACCEPTED, ReviewPacket.ReviewState.REJECTED):
        return None
    return (
        packet.reviews.filter(reviewer__isnull=False).select_related("reviewer").order_by("-created_at", "-id").first()
    )


def _earlier_decision(
    packet: ReviewPacket, *, reviewer: User, decision: str, note: str, change: bool
) -> PacketReview | None:
    """The review to answer with instead of a new one (the identical decision), None to record a new one, or
    a ReviewError: a superseded packet, or a reviewed one whose decision is not changed on purpose."""
    if packet.review_state == ReviewPacket.ReviewState.SUPERSEDED:
        raise ReviewError(
            "superseded",
            f"Packet {packet.pk} was superseded by a newer investigation of its ticket; review the newer packet.",
        )
    latest = packet_decision(packet=packet)
    if latest is None:
        return None
    if latest.reviewer_id == reviewer.pk and latest.decision == decision:
        return latest
    who = latest.reviewer.get_username() if latest.reviewer else "the system"
    if not change:
        raise ReviewError(
            "already_reviewed",
            f"Packet {packet.pk} is already {latest.decision} (by {who}). To "
            "change the decision, say so (change decision) and give a note saying why.",
        )
    if not note:
        raise ReviewError("note_required", "Say why the decision changes: a note is required.")
    return None


def _changed_evidence(packet: ReviewPacket, reviewer: User) -> list[str]:
    """The cited items that read differently now, each re-read from its source (outside any transaction)."""
    return needing_acknowledgement(packet_recheck_now(packet=packet, user=reviewer))
