"""The review queue's reads: pending packets in order (oldest first), and where to go next."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from engine.models import ReviewPacket, Run


def packets_pending() -> QuerySet[ReviewPacket]:
    return ReviewPacket.objects.filter(
        review_state=ReviewPacket.ReviewState.PENDING, run__purpose=Run.Purpose.INVESTIGATION
    ).order_by("created_at", "id")


def _after(packet: ReviewPacket) -> Q:
    return Q(created_at__gt=packet.created_at) | Q(created_at=packet.created_at, id__gt=packet.pk)


def _before(packet: ReviewPacket) -> Q:
    return Q(created_at__lt=packet.created_at) | Q(created_at=packet.created_at, id__lt=packet.pk)


def packet_next_pending(*, packet: ReviewPacket) -> int | None:
    """The pending packet after `packet` in the queue's order (or None)."""
    return packets_pending().filter(_after(packet)).values_list("pk", flat=True).first()


def packet_previous_pending(*, packet: ReviewPacket) -> int | None:
    """The pending packet before `packet` in the queue's order (or None)."""
    return packets_pending().filter(_before(packet)).order_by("-created_at", "-id").values_list("pk", flat=True).first()


def packet_to_review_after(*, packet: ReviewPacket) -> int | None:
    """Where a reviewer goes once `packet` is reviewed: the next pending packet, else the oldest one left."""
    return (
        packet_next_pending(packet=packet)
        or packets_pending().exclude(pk=packet.pk).values_list("pk", flat=True).first()
    )
