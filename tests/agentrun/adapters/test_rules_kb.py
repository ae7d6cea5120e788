"""The rule-based investigator answers from the knowledge base: the ticket's own words, searched; an article
cited only when it matches well, with the passage that matched; a gap asked about, never papered over."""

from __future__ import annotations

import pytest

from engine.services import investigation_start
from providers.context import Context, MessageItem
from providers.replies import reply_problem
from providers.rules import Investigation
from tests.tickets.test_search import ARTICLES
from tickets.models import Document, Ticket
from tickets.services import document_publish

pytestmark = pytest.mark.usefixtures("settle")


@pytest.fixture
def help_center(ticket_t1001):
    Document.objects.filter(code__startswith="DOC-").update(public=False)  # the demo's own articles aside
    for code, title, body in ARTICLES:
        document_publish(code=code, title=title, body=body, public=True, url=f"https://help.example/{code.lower()}")
    return ticket_t1001


def investigated(subject: str, body: str):
    t1001 = Ticket.objects.get(ref="T-1001")
    ticket = Ticket.objects.create(
        ref=f"T-KB-{Ticket.objects.count()}", account=t1001.account, session=t1001.session, subject=subject, body=body
    )
    run = investigation_start(ticket=ticket)
    run.refresh_from_db()
    return run


def test_a_rotated_key_ticket_cites_the_encrypted_exports_article_with_its_passage(help_center):
    run = investigated("Export fails", "Hi team,\n\nExport fails after I rotated my encryption key.\n\nThanks,\nDana")
    summary = run.packet.summary
    assert run.status == "COMPLETED"
    assert "“Encrypted Exports” (ENCRYPTED-EXPORTS r1)" in summary
    assert "If you rotate your account encryption key, encrypted exports made before the rotation" in summary
    assert "https://help.example/encrypted-exports" in summary
    assert "For “Export fails: Export fails after I rotated my encryption key.”" in summary  # what it answers
    assert "Thanks" not in summary and "Dana" not in summary


def test_a_lost_phone_ticket_cites_the_lost_device_article(help_center):
    run = investigated("Lost my phone", "Hello, I lost my phone with the authenticator app and cannot log in.")
    assert "“Lost Two-step Login Device” (LOST-TWO-STEP-DEVICE r1)" in run.packet.summary


def test_a_word_in_passing_checks_no_service_once_an_article_answers(help_center):
    run = investigated("Importing from LastPass fails", "The LastPass import fails. We also use your API.")
    assert "“Import Data from LastPass” (IMPORT-FROM-LASTPASS r1)" in run.packet.summary
    assert list(run.attempts.values_list("tool", flat=True)) == ["search_docs"]
    assert "Service" not in run.packet.summary


def test_a_ticket_no_article_answers_cites_none_and_asks_which_should_have(help_center):
    run = investigated("Printer", "The office printer is jammed again and nobody can print.")
    assert run.status == "NEEDS_HELP"
    assert "found no article that matches it well" in run.packet.stop_note
    assert not run.packet.summary and "the article" not in run.packet.stop_note


def test_an_unanswered_problem_beside_a_finding_is_an_open_question(help_center):
    run = investigated("Invoices are late", "Our invoice for November has not arrived. Is billing down?")
    assert run.status == "COMPLETED"  # the billing service is cited
    (question,) = [q for q in run.packet.open_questions if "Which article should have answered" in q]
    assert "“Invoices are late: Our invoice for November has not arrived.”" in question


def test_quoted_history_signatures_and_staff_replies_are_not_searched():
    body = (
        "Hello,\nSync stopped working on my laptop.\n\nBest regards,\nSam\n--\nSam Doe, Acme\n"
        "On Mon, 1 Dec 2026 at 10:00, Support <help@example.com> wrote:\n> Have you tried the export page?"
    )
    messages = (
        MessageItem(1, "staff", "Try the recovery code page.", "2026-12-01T11:00:00+00:00"),
        MessageItem(2, "customer", "Also my invoices are missing since Tuesday.", "2026-12-01T12:00:00+00:00"),
    )
    problems = Investigation(Context("T-9", "Sync", body, True, messages=messages)).problems()
    assert problems == ["Sync: Sync stopped working on my laptop.", "Also my invoices are missing since Tuesday."]


def test_a_sentence_that_repeats_the_subject_is_not_searched_twice():
    ctx = Context("T-9", "Vault sync stopped working", "The vault sync stopped working. It happens daily.", True)
    assert Investigation(ctx).problems() == ["Vault sync stopped working", "It happens daily."]


def test_a_stray_control_character_in_the_ticket_never_makes_an_invalid_search(help_center):
    run = investigated("Export\x07 fails", "Export fails after I rotated my\x1b encryption key.")
    assert run.status == "COMPLETED"
    (query,) = [args["query"] for tool, args in run.attempts.values_list("tool", "args") if tool == "search_docs"]
    assert query == "export fails: export fails after i rotated my encryption key."


# --- the suggested reply ---------------------------------------------------------------


@pytest.mark.parametrize(
    "subject,body,title,passage,url",
    [
        (
            "Export fails",
            "Hi team,\n\nExport fails after I rotated my encryption key.\n\nThanks,\nDana",
            "Encrypted Exports",
            "If you rotate your account encryption key, encrypted exports made before the rotation",
            "https://help.example/encrypted-exports",
        ),
        (
            "Lost my phone",
            "Hello, I lost my phone with the authenticator app and cannot log in.",
            "Lost Two-step Login Device",
            "use your two-step login recovery code",
            "https://help.example/lost-two-step-device",
        ),
        (
            "Importing from LastPass fails",
            "The LastPass import fails. We also use your API.",
            "Import Data from LastPass",
            "Export your LastPass vault as a .csv file",
            "https://help.example/import-from-lastpass",
        ),
    ],
)
def test_the_reply_quotes_the_answering_article_and_links_it(help_center, subject, body, title, passage, url):
    reply = investigated(subject, body).packet.reply
    assert reply.startswith("Hello,\n\n") and reply.endswith("Best regards,")
    assert f"Our article “{title}”" in reply and passage in reply and f"You can read it here: {url}" in reply
    assert reply_problem(reply) is None and "[E" not in reply and "Dana" not in reply and "API" not in reply


def test_a_handoff_suggests_no_reply(help_center):
    run = investigated("Printer", "The office printer is jammed again and nobody can print.")
    assert run.status == "NEEDS_HELP" and run.packet.reply == ""


def test_a_job_failure_is_told_with_the_article_on_its_error_in_the_customers_terms(ticket_t1001):
    run = investigation_start(ticket=ticket_t1001)
    run.refresh_from_db()
    reply = run.packet.reply
    assert "We looked at your csv export J-42: it failed on 14 September 2026 at 10:02 UTC" in reply
    assert "with the error EXPORT_ROLE_REQUIRED. Our article “" in reply and "explains what this error means" in reply
    assert "T10:02" not in reply and "requester_current_role" not in reply and "{" not in reply
