"""The review queue's reads: pending packets in order (oldest first), where to go next, and its search."""

from __future__ import annotations

from django.db.models import CharField, Exists, OuterRef, Q, QuerySet, TextField, Value
from django.db.models.functions import Cast, Concat
from django.db.models.lookups import Contains

from engine.models import ReviewPacket, Run
from kit.adminkit import search_terms
from tickets.models import Evidence
from tickets.selectors import tickets_holding


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


def packets_search(packets: QuerySet[ReviewPacket], text: str) -> QuerySet[ReviewPacket]:
    """The packets that hold every term of `text` (a quoted phrase as one; any case), each term in the packet's
    ticket where the ticket list's search looks (reference, subject, description, the customer's e-mail), in the
    subject as the row shows it (the run's, as the ticket had it then), or in the source of an evidence item the
    packet cites: a job id ("J-42"), a document code ("DOC-EXPORT-7"), a service.
    A filter on the packets themselves (no join that repeats a row), so a page of them costs what it did."""
    for term in search_terms(text):
        packets = packets.filter(run__in=_runs_holding(term))
    return packets


def _runs_holding(term: str) -> QuerySet:
    """The ids of the runs whose packet holds `term`: three sets united, each read through an index (the
    trigrams of the tickets' text, of the runs' subjects and of the evidence's sources on PostgreSQL), where
    one OR of them made PostgreSQL test every packet in turn (10 s at 100,000 packets, bench/pages_bench.py)."""
    of_ticket = Run.objects.filter(ticket__in=tickets_holding(term)).order_by().values("pk")
    by_subject = Run.objects.filter(subject__icontains=term).order_by().values("pk")
    holding = Evidence.objects.filter(source_ref__icontains=term).order_by().values("ticket")
    citing = ReviewPacket.objects.filter(Exists(_cited_sources_holding(term)), run__ticket__in=holding)
    return of_ticket.union(by_subject, citing.order_by().values("run_id"))


def _cited_sources_holding(term: str) -> QuerySet[Evidence]:
    """The outer packet's cited evidence whose source holds `term`. A packet names what it cites in a JSON list of
    refs ("E1", "E12"); an item is cited when its ref, quoted, is in that list's text (quoted, so that E1 is not
    found in E12), which reads alike on PostgreSQL (jsonb as text) and SQLite (the JSON text it stores)."""
    quoted_ref = Concat(Value('"E'), Cast("number", CharField()), Value('"'), output_field=TextField())
    cited = Contains(Cast(OuterRef("evidence_refs"), TextField()), quoted_ref)
    return Evidence.objects.filter(cited, ticket=OuterRef("run__ticket"), source_ref__icontains=term)
