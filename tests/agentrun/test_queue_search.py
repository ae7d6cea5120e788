"""The review queue finds things: one handle per packet, the customer, and the ticket list's search plus cited sources."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from engine.models import ReviewPacket
from engine.services import investigation_start
from staff.gaps import gaps_read
from staff.queue import packets_search
from staff.reviews import packet_review
from tests.support.staff import make_runs
from tickets.models import CustomerSession, Evidence, Ticket

QUEUE = reverse("admin:agentrun_reviewpacket_changelist")


def _queue_refs(client, search: str) -> list[str]:
    response = client.get(QUEUE, {"state": "all", "q": search})
    assert response.status_code == 200
    return sorted(p.run.ticket.ref for p in response.context["cl"].result_list)


def _ticket_list_refs(client, search: str) -> set[str]:
    response = client.get(reverse("admin:tickets_ticket_changelist"), {"q": search})
    return {t.ref for t in response.context["cl"].result_list}


@pytest.fixture
def investigated(demo_committed):
    """A packet for each of the demo's tickets the rule-based investigator ends, and one on a GLOBEX ticket."""
    globex = Ticket.objects.create(
        ref="T-2001",
        account=CustomerSession.objects.get(ref="S-GLOBEX-1").account,
        session=CustomerSession.objects.get(ref="S-GLOBEX-1"),
        subject="Invoices are missing",
        body="Our March invoices never arrived.",
    )
    for ticket in [*Ticket.objects.filter(ref__in=["T-1001", "T-1002", "T-1003", "T-1004", "T-1007"]), globex]:
        investigation_start(ticket=ticket)
    return ReviewPacket.objects.select_related("run__ticket")


@pytest.mark.parametrize(
    "search", ["dana", "J-42", "hank@globex.example", "invoice", "T-100", "workspace", '"CSV export"']
)
def test_the_queue_finds_the_packets_whose_tickets_the_ticket_list_finds(staff_client, investigated, search):
    with_packets = {p.run.ticket.ref for p in investigated}
    found = set(_queue_refs(staff_client, search))
    assert found >= _ticket_list_refs(staff_client, search) & with_packets
    assert found  # every search here names something


def test_dana_and_j42_find_danas_packets_and_those_about_the_job(staff_client, investigated):
    assert _queue_refs(staff_client, "dana") == ["T-1001", "T-1002", "T-1004", "T-1007"]  # her session's tickets
    # T-1001 and T-1003 mention J-42; T-1001's packet also cites its record
    assert _queue_refs(staff_client, "J-42") == ["T-1001", "T-1003"]
    assert _queue_refs(staff_client, "dana J-42") == ["T-1001"]  # every word, as the ticket list searches
    assert _queue_refs(staff_client, "hank@globex.example") == ["T-2001"]


def test_a_document_code_finds_the_packets_that_cite_it(staff_client, investigated):
    t1007 = investigated.get(run__ticket__ref="T-1007")
    cited = Evidence.objects.filter(ticket=t1007.run.ticket, tool="search_docs").values_list("source_ref", flat=True)
    assert any("DOC-RENAME-2" in source for source in cited)
    assert "DOC-RENAME-2" not in f"{t1007.run.ticket.subject} {t1007.run.ticket.body}"
    assert "T-1007" in _queue_refs(staff_client, "DOC-RENAME-2")
    assert "T-1001" in _queue_refs(staff_client, "doc-export-7")  # any case


def _evidence(ticket: Ticket, number: int, source_ref: str) -> Evidence:
    return Evidence.objects.create(
        ticket=ticket,
        number=number,
        tool="search_docs",
        args={},
        content="{}",
        content_hash=hashlib.sha256(f"{ticket.pk}-{number}".encode()).hexdigest(),
        source_ref=source_ref,
        captured_at=timezone.now(),
    )


def test_only_the_sources_a_packet_cites_are_searched(demo):
    t1001 = Ticket.objects.get(ref="T-1001")
    ticket = Ticket.objects.create(ref="T-3001", account=t1001.account, session=t1001.session, subject="x", body="y")
    _evidence(ticket, 1, "DOC-FIRST@r1")
    _evidence(ticket, 12, "DOC-TWELFTH@r1")
    _evidence(ticket, 2, "DOC-UNCITED@r1")
    [run] = make_runs(1, ticket=ticket, endings=[("COMPLETED", "")])
    ReviewPacket.objects.filter(run=run).update(evidence_refs=["E12"])
    packets = ReviewPacket.objects.filter(run=run)
    assert packets_search(packets, "DOC-TWELFTH").count() == 1
    assert packets_search(packets, "DOC-FIRST").count() == 0  # E1 is not E12
    assert packets_search(packets, "DOC-UNCITED").count() == 0  # the ticket's, not the packet's
    assert packets_search(packets, '"doc-twelfth@r1"').count() == 1  # a quoted phrase, any case


def test_each_row_is_its_tickets_ref_opening_the_packet_with_the_customer_and_the_summarys_first_line(
    staff_client, demo
):
    [run] = make_runs(1, endings=[("COMPLETED", "")])
    summary = "Job J-42 failed with EXPORT_ROLE_REQUIRED. " + "The requester is a viewer now. " * 5 + "\nSecond line."
    ReviewPacket.objects.filter(run=run).update(summary=summary)
    page = staff_client.get(QUEUE).content.decode()
    packet_url = reverse("admin:agentrun_reviewpacket_change", args=[run.packet.pk])
    assert f'<a class="sa-open" href="{packet_url}" title="Open the packet">T-1001</a>' in page
    assert f"Review {run.packet.pk}" not in page and "run " + str(run.pk) not in page
    assert "dana@acme.example" in page
    first_line = summary.split("\n")[0]
    shown = first_line[:99].rsplit(" ", 1)[0] + "…"
    assert shown in page and "Second line." not in page and len(shown) <= 100
    for column in ("Ticket", "Customer", "Subject", "Summary", "Account", "Age", "Stop reason"):
        assert f">{column}<" in page or f">{column}</a>" in page


def test_the_search_box_says_where_it_looks(staff_client, demo):
    page = staff_client.get(QUEUE).content.decode()
    assert 'id="searchbar"' in page and "a job id or document code the packet cites" in page


SQLITE_SCRIPT = """
import json, sys
from datetime import timedelta
import django
django.setup()
from django.contrib.auth.models import User
from django.utils import timezone
from engine.models import ReviewPacket
from engine.services import investigation_start
from staff.gaps import gaps_read
from staff.gaps import gaps_read
from staff.queue import packets_search
from staff.reviews import packet_review
from staff.reviews import packet_review
from tickets.demo import seed_demo
from tickets.models import Ticket

seed_demo()
for ref in ("T-1001", "T-1003", "T-1004", "T-1007"):
    investigation_start(ticket=Ticket.objects.get(ref=ref))
t1007 = ReviewPacket.objects.get(run__ticket__ref="T-1007")
packet_review(packet_id=t1007.pk, reviewer=User.objects.create_user("lead"), decision="rejected",
              reason="no_article", note="None on old links.")
found = {q: sorted(p.run.ticket.ref for p in packets_search(ReviewPacket.objects.all(), q)) for q in json.load(sys.stdin)}
now = timezone.now()
gaps = {t.ref: [p.how for p in t.packets] for t in gaps_read(since=now - timedelta(days=1), until=now + timedelta(days=1))}
print(json.dumps({"found": found, "gaps": gaps}))
"""


def test_the_search_and_the_gaps_read_alike_on_sqlite(sqlite_search, investigated, staff_client, supervisor_user):
    """The cited sources are found in the packet's JSON text, and the gap questions too: SQLite's text is not
    PostgreSQL's jsonb, so the same searches are played on both."""
    searches = ["J-42", "DOC-RENAME-2", "doc-export-7", "dana", "dana J-42", '"CSV export"']
    on_sqlite = sqlite_search.play(SQLITE_SCRIPT, searches)
    investigated.filter(run__ticket__ref__in=["T-1002", "T-2001"]).delete()  # the script investigates the other four
    packet_review(
        packet_id=investigated.get(run__ticket__ref="T-1007").pk,
        reviewer=supervisor_user,
        decision="rejected",
        reason="no_article",
        note="None on old links.",
    )
    on_postgres = {q: sorted(p.run.ticket.ref for p in packets_search(ReviewPacket.objects.all(), q)) for q in searches}
    assert on_sqlite["found"] == on_postgres
    assert on_postgres["J-42"] == ["T-1001", "T-1003"] and "T-1007" in on_postgres["DOC-RENAME-2"]
    now = timezone.now()
    read = gaps_read(since=now - timedelta(days=1), until=now + timedelta(days=1))
    assert on_sqlite["gaps"] == {t.ref: [p.how for p in t.packets] for t in read}
    assert on_sqlite["gaps"]["T-1007"] == ["rejected: no article answers it"] and "T-1004" in on_sqlite["gaps"]
