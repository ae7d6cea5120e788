"""seed_scale: exactly the runs asked for, spread over days as a busy team's, everything around them
consistent (keys checked by PostgreSQL, counters, review states), and a database with other data refused."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.db.models import Count, Max, Sum
from django.utils import timezone

from engine.management.commands.seed_scale import seed_scale
from engine.models import Approval, EvidenceCheck, ModelRequest, PacketReview, ReviewPacket, Run, ToolAttempt
from engine.packets import reply_change
from engine.statuses import TERMINAL, Status
from staff.recheck import evidence_reread
from tickets.models import Account, Evidence, Ticket, TicketMessage
from tools.compare import Outcome

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="seed_scale writes with PostgreSQL's COPY")

RUNS, PER_DAY = 1500, 300


@pytest.fixture
def seeded(transactional_db):
    """RUNS runs, written with PostgreSQL checking every foreign key."""
    return seed_scale(runs=RUNS, per_day=PER_DAY, seed=3, trust_keys=False)


def test_writes_exactly_the_runs_asked_every_one_ended_with_its_packet(seeded):
    assert Run.objects.count() == RUNS == seeded[Run]
    assert not Run.objects.exclude(status__in=TERMINAL).exists()
    assert ReviewPacket.objects.count() == RUNS
    assert ModelRequest.objects.count() == Run.objects.aggregate(n=Sum("model_requests"))["n"]
    assert ToolAttempt.objects.count() == Run.objects.aggregate(n=Sum("tool_attempts"))["n"]
    assert Ticket.objects.count() < RUNS  # some tickets were investigated again


def test_runs_spread_over_days_at_the_rate_asked_ids_in_the_order_they_started(seeded):
    first, last = (Run.objects.order_by(f).values_list("created_at", flat=True).first() for f in ("id", "-id"))
    days = (last - first) / timedelta(days=1)
    assert RUNS / PER_DAY - 1.5 <= days <= RUNS / PER_DAY + 1.5
    assert last <= timezone.now()
    starts = list(Run.objects.order_by("id").values_list("created_at", flat=True))
    assert starts == sorted(starts)
    assert Account.objects.annotate(n=Count("tickets")).filter(n__gt=0).count() >= 10


def test_stop_reasons_in_realistic_proportions(seeded):
    counts = Counter(Run.objects.values_list("status", flat=True))
    assert 0.55 < counts[Status.COMPLETED] / RUNS < 0.75
    assert 0.08 < counts[Status.NEEDS_HELP] / RUNS < 0.2
    assert len(counts) >= 8  # the rarer endings too


def test_reviews_accepted_rejected_with_reasons_pending_and_superseded(seeded):
    states = Counter(ReviewPacket.objects.values_list("review_state", flat=True))
    assert states["accepted"] > states["rejected"] > 0
    assert states["pending"] > 0 and states["superseded"] > 0
    rejections = PacketReview.objects.filter(decision=PacketReview.Decision.REJECTED)
    assert rejections.exists() and not rejections.filter(reason="").exists()
    assert not PacketReview.objects.filter(decision=PacketReview.Decision.SUPERSEDED, reviewer__isnull=False).exists()
    assert ReviewPacket.objects.exclude(reply="").exists()
    assert EvidenceCheck.objects.exists()


def test_each_packet_in_the_state_of_its_latest_review(seeded):
    for packet in ReviewPacket.objects.prefetch_related("reviews"):
        reviews = sorted(packet.reviews.all(), key=lambda r: (r.created_at, r.pk))
        assert packet.review_state == (reviews[-1].decision if reviews else ReviewPacket.ReviewState.PENDING)
        by_people = [r for r in reviews if r.reviewer_id is not None]  # what staff.reviews keeps on the packet
        assert packet.first_reviewed_at == (by_people[0].created_at if by_people else None)
        assert packet.review_reason == (by_people[-1].reason if by_people else "")
        kept = by_people[-1].reply if by_people else ""
        assert packet.reply_change == reply_change(packet.reply, kept)


def test_ticket_counters_match_their_evidence_and_messages(seeded):
    evidence = dict(Evidence.objects.values_list("ticket").annotate(top=Max("number")))
    messages = dict(TicketMessage.objects.values_list("ticket").annotate(n=Count("id")))
    for pk, evidence_count, message_count in Ticket.objects.values_list("pk", "evidence_count", "message_count"):
        assert evidence_count == evidence.get(pk, 0)
        assert message_count == messages.get(pk, 0)


def test_evidence_reads_as_the_tools_read_it_now(seeded):
    """A job and a search the runs cited are unchanged when read again through the tools themselves, for a
    session verified now; a session that is not verified reads nothing and says so."""
    cited = Evidence.objects.select_related("ticket__session").order_by("id")
    for tool in ("read_job_status", "search_docs", "read_service_status"):
        evidence = cited.filter(tool=tool, ticket__session__verified=True).first()
        run = Run.objects.get(pk=evidence.run_id)
        comparison = evidence_reread(
            evidence=evidence, run=run, session=evidence.ticket.session, approved=set(), timeout=5
        )
        assert comparison.outcome == Outcome.UNCHANGED, (tool, comparison.reason)
    anonymous = cited.filter(tool="search_docs", ticket__session__verified=False).first()
    comparison = evidence_reread(
        evidence=anonymous, run=anonymous.run, session=anonymous.ticket.session, approved=set(), timeout=5
    )
    assert comparison.outcome == Outcome.COULD_NOT_CHECK
    assert comparison.reason == "the customer's session is not verified; nothing was read"


def test_sensitive_lookups_wait_for_a_supervisor(transactional_db):
    seed_scale(runs=4000, per_day=2000, seed=5, trust_keys=False)
    states = set(Approval.objects.values_list("state", flat=True))
    assert {Approval.State.USED, Approval.State.DENIED} <= states


def test_pages_open_on_the_seeded_data(seeded, supervisor_client):
    packet = ReviewPacket.objects.order_by("?").first()
    for url in (
        "/admin/agentrun/reviewpacket/",
        f"/admin/agentrun/reviewpacket/{packet.pk}/change/",
        f"/admin/tickets/ticket/{packet.run.ticket_id}/change/",
        "/admin/agentrun/run/",
        "/admin/outcomes/",
    ):
        assert supervisor_client.get(url).status_code == 200, url


# --- the command --------------------------------------------------------------------------------------


def test_same_size_again_writes_nothing(transactional_db, capsys):
    call_command("seed_scale", runs=40, per_day=20)
    runs, reviews = Run.objects.count(), PacketReview.objects.count()
    call_command("seed_scale", runs=40, per_day=20)
    assert "Already seeded with 40 runs; nothing written." in capsys.readouterr().out
    assert (Run.objects.count(), PacketReview.objects.count()) == (runs, reviews) == (40, reviews)


def test_another_size_on_a_seeded_database_is_refused(transactional_db):
    call_command("seed_scale", runs=40, per_day=20)
    with pytest.raises(CommandError, match="already holds 40 seeded runs, not 50"):
        call_command("seed_scale", runs=50, per_day=20)
    assert Run.objects.count() == 40


def test_a_database_with_real_data_is_refused_unless_forced(demo_committed):
    tickets = Ticket.objects.count()
    with pytest.raises(CommandError, match="did not write"):
        call_command("seed_scale", runs=30)
    assert Ticket.objects.count() == tickets and not Run.objects.exists()
    call_command("seed_scale", runs=30, force=True)
    assert Run.objects.count() == 30
    assert Ticket.objects.filter(ref="T-1001").exists()


@pytest.mark.parametrize("runs", [0, -5, 10_000_001])
def test_a_size_out_of_bounds_is_refused(db, runs):
    with pytest.raises(CommandError, match="--runs must be 1 to"):
        call_command("seed_scale", runs=runs)
