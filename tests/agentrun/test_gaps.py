"""Knowledge gaps: what no article answered, grouped by topic (staff/gaps.py), on its page, its CSV and the API."""

from __future__ import annotations

import csv
import io
import random
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from engine.models import PacketReview, ReviewPacket, Run
from engine.services import investigation_start
from providers.rules import GAP_HANDOFF, GAP_QUESTION
from staff.gaps import GapPacket, GapTicket, gaps_read, topic_words, topics_of
from staff.reviews import packet_review
from tests.support.staff import bearer, make_runs
from tickets.models import Ticket

# Tickets as customers write them, each under the topic a person would file it under.
WRITTEN = [
    ("dark", "Dark mode in the web vault", "Hi,\nIs there a dark theme for the web vault? The white background hurts my eyes at night.\nThanks,\nSam"),
    ("dark", "Dark theme please", "Can I switch the web vault to a dark theme?"),
    ("dark", "Night mode", "Hello team, does the web app have a night or dark mode? I work late and the bright page is painful."),
    ("invoice", "Invoices in euros", "Can our invoices be issued in EUR instead of USD?"),
    ("invoice", "Change invoice currency", "We need invoices in euros for our accounting department. How do we change the currency?"),
    ("invoice", "Billing currency", "Our finance team asks whether billing can be in euros rather than dollars. The invoice shows USD."),
    ("sso", "SSO with Azure AD", "We want to set up single sign-on with Azure AD for our organization. Is SAML supported?"),
    ("sso", "SAML single sign-on setup", "How do we configure SAML SSO? Our identity provider is Okta."),
    ("delete", "Delete my account", "Please tell me how to delete my account and all my data."),
    ("rate", "API rate limit", "Our integration gets 429 Too Many Requests from the API after about 100 calls a minute. What is the rate limit?"),
    ("rate", "429 errors from the API", "We are hitting rate limits on the public API. What are the limits per minute?"),
    ("empty-export", "CSV export is empty", "Exporting my vault to CSV gives an empty file. The export worked last month."),
    (
        "empty-export",
        "Exported CSV has no rows",
        "Hi, when I export to CSV the file downloads but it is empty, only the header row.\n\n"
        "On Mon, Sam wrote:\n> any news about the invoice in euros?\n> Billing currency USD\n\nBest regards,\nKim",
    ),
    ("locked", "Account locked", "My account is locked after too many failed login attempts. How long until I can log in again?"),
    ("locked", "Locked out after failed logins", "I typed my password wrong a few times and now the login says my account is locked."),
    ("import", "CSV import fails", "When I import the CSV from our old password manager the import fails with an error about columns."),
]  # fmt: skip
START = datetime(2026, 9, 1, tzinfo=UTC)


def _written_tickets() -> tuple[list[GapTicket], dict[str, str]]:
    tickets = [
        GapTicket(n, f"T-{n:03}", subject, body, (GapPacket(n, START + timedelta(hours=n), ("?",), "", False, ""),))
        for n, (_, subject, body) in enumerate(WRITTEN)
    ]
    return tickets, {t.ref: WRITTEN[t.ticket_id][0] for t in tickets}


def _partition(topics) -> set[frozenset[str]]:
    return {frozenset(t.ref for t in topic.tickets) for topic in topics}


# --- grouping (no database) ----------------------------------------------------------------------


def test_tickets_about_the_same_thing_share_a_topic_and_others_do_not():
    tickets, filed_under = _written_tickets()
    expected = {frozenset(ref for ref, f in filed_under.items() if f == filing) for filing in set(filed_under.values())}
    assert _partition(topics_of(tickets)) == expected


def test_the_same_tickets_in_any_order_make_the_same_topics():
    tickets, _ = _written_tickets()
    first = [(t.key_words, [x.ref for x in t.tickets]) for t in topics_of(tickets)]
    for seed in range(5):
        shuffled = tickets[:]
        random.Random(seed).shuffle(shuffled)
        assert [(t.key_words, [x.ref for x in t.tickets]) for t in topics_of(shuffled)] == first


def test_most_asked_first_then_most_recently_asked():
    tickets, filed_under = _written_tickets()
    topics = topics_of(tickets)
    assert [len(t.tickets) for t in topics] == sorted((len(t.tickets) for t in topics), reverse=True)
    # the two topics of three tickets: the invoices were asked last (hours 3-5, dark mode 0-2)
    assert [filed_under[t.tickets[0].ref] for t in topics[:2]] == ["invoice", "dark"]
    assert topics[0].last_at == START + timedelta(hours=5)
    assert [t.ref for t in topics[0].tickets] == ["T-005", "T-004", "T-003"]  # most recent first


def test_a_topics_key_words_are_the_words_its_tickets_share_as_they_write_them():
    tickets, filed_under = _written_tickets()
    by_filing = {filed_under[t.tickets[0].ref]: t.key_words for t in topics_of(tickets)}
    assert by_filing["invoice"][:2] == ("invoice", "euros")  # held by all three; "invoices" and "invoice" are one word
    assert by_filing["dark"][:2] == ("dark", "web")
    assert "locked" in by_filing["locked"] and "account" in by_filing["locked"]
    assert by_filing["delete"] == ("delete", "account")  # a lone ticket's: its subject's
    assert all(len(words) <= 6 for words in by_filing.values())


def test_greetings_signatures_quoted_history_and_filler_are_not_a_topics_words():
    body = "Hello,\nplease help: the file is empty.\n> our invoices in euros\n-- \nKim Example"
    ticket = GapTicket(1, "T-1", "Export is empty", body, ())
    assert ticket.words == {"export": "export", "empti": "empty", "file": "file"}
    assert topic_words("Job J-42 failed 3 times") == {"job": "job", "fail": "failed", "time": "times"}


def test_tickets_sharing_one_word_stay_apart():
    def one(n, subject, body):
        return GapTicket(n, f"T-{n}", subject, body, (GapPacket(n, START + timedelta(hours=n), ("?",), "", False, ""),))

    topics = topics_of([one(1, "Delete my account", "How do I delete it?"), one(2, "Account locked", "Locked again.")])
    assert len(topics) == 2


# --- the read ------------------------------------------------------------------------------------


def _ticket(ref: str, subject: str, body: str) -> Ticket:
    t1001 = Ticket.objects.get(ref="T-1001")
    return Ticket.objects.create(ref=ref, account=t1001.account, session=t1001.session, subject=subject, body=body)


def _packet(ticket: Ticket, *, asks: bool = True, at: datetime | None = None, purpose=Run.Purpose.INVESTIGATION):
    """A completed run's packet on `ticket`, asking which article should have answered (or not)."""
    [run] = make_runs(1, ticket=ticket, endings=[("COMPLETED", "")], created_at=at)
    questions = ["What was the requester's role?"]
    if asks:
        questions.append(f"{GAP_QUESTION} “{ticket.subject}”? The search [E1] found none that matches well.")
    ReviewPacket.objects.filter(run=run).update(open_questions=questions)
    Run.objects.filter(pk=run.pk).update(purpose=purpose)
    return ReviewPacket.objects.get(run=run)


def _reject(packet: ReviewPacket, reviewer, reason: str, note: str, **extra) -> None:
    packet_review(packet_id=packet.pk, reviewer=reviewer, decision="rejected", reason=reason, note=note, **extra)


def _last_30_days():
    now = timezone.now()
    return {"since": now - timedelta(days=30), "until": now + timedelta(minutes=1)}


def test_questions_that_ask_and_rejections_for_no_article_are_read(demo, supervisor_user):
    asks = _packet(_ticket("T-A", "Dark mode", "Is there a dark theme?"))
    again = _packet(Ticket.objects.get(ref="T-A"))  # the same ticket investigated again: one ticket, two packets
    _packet(_ticket("T-B", "Export fails", "It fails."), asks=False)  # answered: no gap
    no_article = _packet(_ticket("T-C", "Invoices in euros", "Can invoices be in EUR?"), asks=False)
    _reject(no_article, supervisor_user, "no_article", "We have no page on currencies.")
    other = _packet(_ticket("T-D", "Wrong job", "J-41"), asks=False)
    _reject(other, supervisor_user, "wrong_conclusion", "Not J-42.")
    changed = _packet(_ticket("T-E", "Fonts", "Can I change the font?"), asks=False)
    _reject(changed, supervisor_user, "no_article", "No page.")
    packet_review(
        packet_id=changed.pk, reviewer=supervisor_user, decision="accepted", note="It is there.", change_decision=True
    )
    _packet(_ticket("T-F", "Evaluated", "A candidate's run"), purpose=Run.Purpose.EVALUATION)
    _packet(_ticket("T-G", "Long ago", "Asked last year"), at=timezone.now() - timedelta(days=365))
    unreached = _packet(_ticket("T-H", "Where is J-42?", "It never came."), asks=False)
    ReviewPacket.objects.filter(pk=unreached.pk).update(
        stop_reason="NEEDS_HELP",
        stop_note="The job status service could not be reached, so J-42 could not be looked up.",
    )

    read = {t.ref: t for t in gaps_read(**_last_30_days())}
    assert set(read) == {"T-A", "T-C"}
    assert [p.id for p in read["T-A"].packets] == [again.pk, asks.pk]
    assert read["T-A"].packets[0].questions == (
        f"{GAP_QUESTION} “Dark mode”? The search [E1] found none that matches well.",
    )
    [rejected] = read["T-C"].packets
    assert (rejected.rejected, rejected.note, rejected.questions) == (True, "We have no page on currencies.", ())
    assert rejected.at == PacketReview.objects.get(packet=no_article).created_at  # the rejection's time
    assert rejected.how == "rejected: no article answers it" and read["T-A"].packets[0].how == "open question"


def test_a_question_that_only_mentions_the_words_is_not_a_gap(demo):
    packet = _packet(_ticket("T-A", "Dark mode", "Is there a dark theme?"), asks=False)
    ReviewPacket.objects.filter(pk=packet.pk).update(open_questions=[f"Staff asked: {GAP_QUESTION} this?"])
    assert gaps_read(**_last_30_days()) == []


def test_the_rules_open_question_and_their_handoff_for_no_article_are_listed(demo_committed):
    asked = investigation_start(ticket=Ticket.objects.get(ref="T-1004"))  # invoices: a draft, billing is degraded
    dark = _ticket("T-DARK", "Dark mode", "Is there a dark theme for the web app?")
    handed_off = investigation_start(ticket=dark)  # nothing to cite: the rules hand off
    handed_off.refresh_from_db()
    assert handed_off.status == "NEEDS_HELP" and GAP_HANDOFF in handed_off.stop_note
    read = {t.ref: t for t in gaps_read(**_last_30_days())}
    assert set(read) == {"T-1004", "T-DARK"}
    [question] = read["T-1004"].packets
    assert question.id == asked.packet.pk and question.how == "open question"
    assert question.questions[0].startswith(f"{GAP_QUESTION} “Invoices are late this month")
    [handoff] = read["T-DARK"].packets
    assert (handoff.id, handoff.questions, handoff.how) == (
        handed_off.packet.pk,
        (),
        "handed to a person: no article matched",
    )
    assert handoff.handoff == (
        f"The documentation search for “dark mode: is there a dark theme for the web app?” [E1] {GAP_HANDOFF}."
    )


# --- the page, its CSV, the API ------------------------------------------------------------------


@pytest.fixture
def gaps(demo, supervisor_user):
    """Two tickets on invoices in euros (one asked, one rejected for no article), one on dark mode."""
    first = _packet(_ticket("T-EUR1", "Invoices in euros", "Can our invoices be issued in EUR instead of USD?"))
    rejected = _packet(
        _ticket("T-EUR2", "Change invoice currency", "We need invoices in euros. How do we change the currency?"),
        asks=False,
    )
    _reject(rejected, supervisor_user, "no_article", "=No page on invoice currencies.")
    dark = _packet(_ticket("T-DARK", "Dark mode", "Is there a dark theme for the web vault?"))
    return first, rejected, dark


def test_the_page_lists_topics_most_asked_first_with_links_to_their_packets(supervisor_client, gaps):
    first, rejected, dark = gaps
    response = supervisor_client.get(reverse("knowledge-gaps"))
    page = response.content.decode()
    assert response.status_code == 200
    assert 'id="gap-tickets">3<' in page and 'id="gap-topics">2<' in page
    topic_one = page[page.index('id="topic-1"') : page.index('id="topic-2"')]
    assert "invoice, euros" in topic_one and "2 tickets" in topic_one
    assert reverse("admin:agentrun_reviewpacket_change", args=[first.pk]) in topic_one
    assert reverse("admin:agentrun_reviewpacket_change", args=[rejected.pk]) in topic_one
    assert "=No page on invoice currencies." in topic_one and "rejected: no article answers it" in topic_one
    assert reverse("admin:agentrun_reviewpacket_change", args=[dark.pk]) in page[page.index('id="topic-2"') :]


def test_the_period_chooses_what_is_shown(supervisor_client, gaps):
    last_year = (timezone.now() - timedelta(days=365)).date()
    page = supervisor_client.get(reverse("knowledge-gaps") + f"?first={last_year}&last={last_year}").content.decode()
    assert 'id="no-gaps"' in page and 'id="gap-tickets">0<' in page
    page = supervisor_client.get(reverse("knowledge-gaps") + "?first=2026-99-01").content.decode()
    assert "The first day, “2026-99-01”, is not a date: write it YYYY-MM-DD." in page and 'id="gap-tickets">3<' in page


def test_the_csv_has_a_row_per_ticket_under_its_topic(supervisor_client, gaps):
    first, rejected, _ = gaps
    response = supervisor_client.get(reverse("knowledge-gaps-csv"))
    assert response.status_code == 200 and response["Content-Type"] == "text/csv"
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [(r["topic"], r["ticket"], r["topic_tickets"]) for r in rows] == [
        ("1", "T-EUR2", "2"),
        ("1", "T-EUR1", "2"),
        ("2", "T-DARK", "1"),
    ]
    assert rows[0]["key_words"].startswith("invoice euros") and rows[0]["packets"] == str(rejected.pk)
    assert rows[0]["reviewer_notes"] == "'=No page on invoice currencies."  # never a formula in a spreadsheet
    assert rows[1]["open_questions"].startswith(GAP_QUESTION) and rows[1]["signs"] == "open question"
    assert supervisor_client.get(reverse("knowledge-gaps-csv") + "?last=nope").status_code == 400


def test_the_api_gives_the_same_topics(client, supervisor_user, gaps):
    first, rejected, dark = gaps
    body = client.get("/api/knowledge-gaps", **bearer(supervisor_user)).json()
    assert body["last"] == timezone.now().date().isoformat()
    assert [(t["key_words"][:2], t["ticket_count"]) for t in body["topics"]] == [
        (["invoice", "euros"], 2),
        (["dark", "mode"], 1),
    ]
    eur2 = body["topics"][0]["tickets"][0]
    assert eur2["ticket"] == "T-EUR2" and eur2["subject"] == "Change invoice currency"
    assert eur2["packets"] == [
        {
            "id": rejected.pk,
            "at": eur2["packets"][0]["at"],
            "open_questions": [],
            "handoff": "",
            "rejected_no_article": True,
            "note": "=No page on invoice currencies.",
        }
    ]
    last_year = (timezone.now() - timedelta(days=365)).date()
    quiet = client.get(f"/api/knowledge-gaps?first={last_year}&last={last_year}", **bearer(supervisor_user)).json()
    assert quiet == {"first": str(last_year), "last": str(last_year), "topics": []}


@pytest.mark.parametrize(
    "query,code",
    [("?first=2026-05-02&last=2026-05-01", "bad_period"), ("?first=nope", "invalid_input")],
)
def test_the_api_refuses_a_bad_period(client, supervisor_user, demo, query, code):
    response = client.get(f"/api/knowledge-gaps{query}", **bearer(supervisor_user))
    assert response.status_code == 422 and response.json()["code"] == code


def test_support_staff_may_not_see_the_knowledge_gaps(client, staff_client, staff_user, supervisor_client, gaps):
    for url in (reverse("knowledge-gaps"), reverse("knowledge-gaps-csv")):
        response = staff_client.get(url)
        assert response.status_code == 403
        assert "Only Supervisors may see the outcomes dashboard and the knowledge gaps." in response.content.decode()
    response = client.get("/api/knowledge-gaps", **bearer(staff_user))
    assert response.status_code == 403 and response.json()["code"] == "forbidden"
    assert reverse("knowledge-gaps") not in staff_client.get(reverse("admin:index")).content.decode()
    assert reverse("knowledge-gaps") in supervisor_client.get(reverse("admin:index")).content.decode()
    assert reverse("knowledge-gaps") in supervisor_client.get(reverse("outcomes")).content.decode()


@pytest.mark.parametrize("tickets", [5, 200])
def test_the_page_and_the_api_read_as_many_statements_whatever_the_number_of_gaps(
    client, supervisor_client, supervisor_user, demo, django_assert_max_num_queries, tickets
):
    written = [WRITTEN[3], WRITTEN[0], WRITTEN[6], WRITTEN[9]]  # invoices, dark mode, SSO, API rate limits
    for n in range(tickets):
        _, subject, body = written[n % 4]
        ticket = _ticket(f"T-Q{n}", subject, body)
        packet = _packet(ticket, asks=n % 3 != 0)
        if n % 3 == 0:
            _reject(packet, supervisor_user, "no_article", "No page on it.")
    auth = bearer(supervisor_user)
    for get, url, bound in (
        (supervisor_client.get, reverse("knowledge-gaps"), 6),
        (supervisor_client.get, reverse("knowledge-gaps-csv"), 5),
        (lambda u: client.get(u, **auth), "/api/knowledge-gaps", 5),
    ):
        get(url)  # warm the session and content-type caches
        with django_assert_max_num_queries(bound):
            response = get(url)
        assert response.status_code == 200
    body = client.get("/api/knowledge-gaps", **auth).json()
    assert sorted(t["ticket_count"] for t in body["topics"]) == sorted(len(range(i, tickets, 4)) for i in range(4))
