"""Staff reviews of review packets: an append-only history; the packet itself is never edited.

`ReviewPacket.review_state` mirrors the latest review's decision so the queue can
sort on it; it is written only here, in the same transaction as the review.
"""
from __future__ import annotations

from collections.abc import Sequence

from django.contrib.auth.models import User
from django.db import transaction

from .models import PacketReview, ReviewPacket, Run
from .webhooks import packet_event_record, webhook_enabled

MAX_NOTE = 2000


class ReviewError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def packet_review(*, packet_id: int, reviewer: User, decision: str, note: str = "",
                  changed_evidence: Sequence[str] = (), acknowledge_changed_evidence: bool = False) -> PacketReview:
    """Record `reviewer`'s decision on a packet. A rejection needs a note saying why; a superseded
    packet is not reviewed (its ticket's newer packet is).

    Accepting a packet whose `changed_evidence` (refs re-checked as changed or
    gone, agentrun.recheck.packet_attention) is not empty needs
    `acknowledge_changed_evidence`; the review records both.

    With the packet webhook on, a `packet.reviewed` event is recorded with the
    review and sent after the commit.
    """
    note = (note or "").strip()
    if decision not in (PacketReview.Decision.ACCEPTED, PacketReview.Decision.REJECTED):
        raise ReviewError("bad_decision", "The decision must be accept or reject.")
    if decision == PacketReview.Decision.REJECTED and not note:
        raise ReviewError("note_required", "Say why the packet is rejected: a note is required.")
    if len(note) > MAX_NOTE:
        raise ReviewError("note_too_long", f"The note is longer than {MAX_NOTE} characters.")
    accepting = decision == PacketReview.Decision.ACCEPTED
    if accepting and changed_evidence and not acknowledge_changed_evidence:
        raise ReviewError("evidence_changed", f"Evidence {', '.join(changed_evidence)} changed or is gone since the "
                          "packet was written: acknowledge the changed evidence to accept the packet.")
    with transaction.atomic():
        packet = ReviewPacket.objects.select_for_update().filter(pk=packet_id).first()
        if packet is None:
            raise ReviewError("not_found", f"There is no review packet {packet_id}.")
        if packet.review_state == ReviewPacket.ReviewState.SUPERSEDED:
            raise ReviewError("superseded", f"Packet {packet_id} was superseded by a newer investigation of its "
                              "ticket; review the newer packet.")
        review = PacketReview.objects.create(
            packet=packet, reviewer=reviewer, decision=decision, note=note,
            acknowledged_changed_evidence=accepting and acknowledge_changed_evidence,
            changed_evidence=list(changed_evidence) if accepting else [],
        )
        ReviewPacket.objects.filter(pk=packet.pk).update(review_state=decision)
        if webhook_enabled():
            run = Run.objects.select_related("ticket").get(pk=packet.run_id)
            packet_event_record(run=run, packet=packet, review=review, now=review.created_at)
    return review
