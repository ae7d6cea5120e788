"""A new packet for a ticket supersedes its older pending ones, with the step that writes it."""

from __future__ import annotations

import pytest
from django.db import connection

from engine.models import PacketReview, ReviewPacket
from staff.access import Refused, do_review
from staff.reviews import packet_review
from tests.support.staff import make_user
from tests.support.webhooks import investigate
from tickets.models import Ticket


def test_a_new_packet_supersedes_the_older_pending_one_with_a_system_entry(ticket_t1001):
    first = investigate(ticket_t1001)
    second = investigate(ticket_t1001)

    old, new = ReviewPacket.objects.get(run=first), ReviewPacket.objects.get(run=second)
    assert (old.review_state, new.review_state) == ("superseded", "pending")
    (entry,) = old.reviews.all()
    assert (entry.decision, entry.reviewer) == ("superseded", None)
    assert f"run {second.pk}" in entry.note
    assert not new.reviews.exists()


def test_reviewed_packets_and_other_tickets_are_left_alone(ticket_t1001, roles):
    reviewer = make_user("reviewer", None)
    accepted = investigate(ticket_t1001)
    packet_review(packet_id=accepted.packet.pk, reviewer=reviewer, decision="accepted")
    other_ticket = Ticket.objects.create(
        ref="T-9002",
        account=ticket_t1001.account,
        session=ticket_t1001.session,
        subject="Another",
        body=ticket_t1001.body,
    )
    other = investigate(other_ticket)
    investigate(ticket_t1001)

    assert ReviewPacket.objects.get(run=accepted).review_state == "accepted"
    assert ReviewPacket.objects.get(run=other).review_state == "pending"
    assert list(PacketReview.objects.values_list("decision", flat=True)) == ["accepted"]


def test_a_superseded_packet_is_not_reviewed(ticket_t1001, staff_user):
    first = investigate(ticket_t1001)
    investigate(ticket_t1001)
    with pytest.raises(Refused) as refused:
        do_review(user=staff_user, packet_id=first.packet.pk, decision="accepted")
    assert (refused.value.code, refused.value.status) == ("superseded", 409)
    assert ReviewPacket.objects.get(run=first).review_state == "superseded"
    assert PacketReview.objects.filter(reviewer=staff_user).count() == 0


def test_superseding_is_idempotent(ticket_t1001):
    from django.db import transaction

    from engine.packets import packets_supersede_later
    from engine.sql import StepWrites

    first, second = investigate(ticket_t1001), investigate(ticket_t1001)
    with transaction.atomic(), StepWrites() as writes:
        packets_supersede_later(run=second, now=second.ended_at, writes=writes)  # again, outside a step
    assert ReviewPacket.objects.get(run=first).reviews.count() == 1
    assert ReviewPacket.objects.get(run=second).review_state == "pending"


def _statements(ticket) -> list[str]:
    sent: list[str] = []
    with connection.execute_wrapper(lambda execute, sql, *args: sent.append(sql) or execute(sql, *args)):
        investigate(ticket)
    return sent


def test_superseding_adds_no_statement_to_a_run(ticket_t1001, roles):
    reviewer = make_user("reviewer", None)
    warm = investigate(ticket_t1001)  # the first run of a process reads what later runs have cached
    packet_review(packet_id=warm.packet.pk, reviewer=reviewer, decision="accepted")
    nothing_pending = _statements(ticket_t1001)
    one_pending = _statements(ticket_t1001)

    # PostgreSQL: the supersede goes with the step's other writes, in one statement (elsewhere two more).
    assert len(one_pending) - len(nothing_pending) == 0
    assert ReviewPacket.objects.filter(review_state="superseded").count() == 1
