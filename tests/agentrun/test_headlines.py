"""Each stop is headlined by what actually happened (agentrun/headlines.py), on every demo ticket."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.urls import reverse

from engine.headlines import run_headline, stop_headline, unreached_services
from engine.loop import run_advance
from engine.models import ReviewPacket, Run
from engine.services import approval_answer, investigation_start, run_start
from engine.statuses import Detail, Status
from engine.timeline import packet_of, stop_explanation
from tests.support.operatorserver import OperatorServer, demo_jobs, statuspage_summary
from tests.support.staff import bearer, client_for
from tickets.models import Ticket

pytestmark = pytest.mark.usefixtures("settle")

DENIED_AT = datetime(2026, 9, 14, 10, 5, tzinfo=UTC)


# --- pure: one headline for each refusal kind ----------------------------------------------------------


@pytest.mark.parametrize(
    "status,detail,fields,expected",
    [
        (
            Status.INVALID_OR_FORBIDDEN,
            Detail.FORBIDDEN,
            {"refused_reason": "J-99 does not exist."},
            "Refused a lookup: J-99 does not exist",
        ),
        (
            Status.INVALID_OR_FORBIDDEN,
            Detail.FORBIDDEN,
            {"refused_reason": "J-77 belongs to another account (GLOBEX)."},
            "Refused a lookup: J-77 belongs to another account (GLOBEX)",
        ),
        (
            Status.INVALID_OR_FORBIDDEN,
            Detail.FORBIDDEN,
            {"refused_reason": "Session S-ACME-ANON is not verified; job lookups need a verified session."},
            "Refused a lookup: Session S-ACME-ANON is not verified; job lookups need a verified session",
        ),
        (Status.INVALID_OR_FORBIDDEN, Detail.FORBIDDEN, {}, "Refused a lookup"),
        (
            Status.INVALID_OR_FORBIDDEN,
            Detail.APPROVAL_DENIED,
            {"denied_by": "sam", "denied_at": DENIED_AT},
            "Lookup denied by a supervisor (sam)",
        ),
        (Status.INVALID_OR_FORBIDDEN, Detail.APPROVAL_DENIED, {}, "Lookup denied by a supervisor"),
        (Status.INVALID_OR_FORBIDDEN, Detail.UNKNOWN_TOOL, {}, "Refused a proposal (a tool that does not exist)"),
        (Status.INVALID_OR_FORBIDDEN, Detail.BAD_ARGUMENTS, {}, "Refused a proposal (arguments that do not fit)"),
        (Status.INVALID_OR_FORBIDDEN, Detail.CALL_ID_CONFLICT, {}, "Refused a proposal (a call id used twice)"),
        (Status.INVALID_OR_FORBIDDEN, Detail.MULTIPLE_CALLS, {}, "Refused a proposal (several calls at once)"),
        (Status.NO_PROGRESS, "", {}, "Repeated the last lookup"),
        (
            Status.TOOL_LIMIT,
            "",
            {"unreached": ["the job status service"]},
            "Lookup budget spent; the job status service could not be reached",
        ),
        (
            Status.COMPLETED,
            "",
            {"unreached": ["the job status service"]},
            "Completed; the job status service could not be reached",
        ),
    ],
)
def test_each_refusal_kind_is_headlined_by_what_happened(status, detail, fields, expected):
    headline = stop_headline(status, detail, **fields)
    assert headline.text == expected
    assert headline.at == fields.get("denied_at")


def test_a_denial_is_not_explained_as_a_proposal_not_allowed():
    said = stop_explanation(Status.INVALID_OR_FORBIDDEN, Detail.APPROVAL_DENIED, model_name="rules")
    assert said.startswith("A supervisor denied the lookup the run was waiting on.")
    assert "not allowed" not in said
    forbidden = stop_explanation(Status.INVALID_OR_FORBIDDEN, Detail.FORBIDDEN, model_name="rules")
    assert "not allowed" not in forbidden and "may not make" not in forbidden


@pytest.mark.parametrize(
    "attempts,expected",
    [
        (
            [("read_job_status", "k1", "transient_error"), ("read_job_status", "k1", "timeout")],
            ["the job status service"],
        ),
        ([("read_job_status", "k1", "transient_error"), ("read_job_status", "k1", "ok")], []),  # the retry got through
        ([("read_job_status", "k1", "error")], []),  # it answered: with an error, not unreachable
        ([("search_docs", "k2", "ok"), ("read_service_status", "k3", "timeout")], ["the service status page"]),
    ],
)
def test_a_service_is_unreached_when_a_call_to_it_never_got_an_answer(attempts, expected):
    assert unreached_services(attempts) == expected


# --- the demo tickets, investigated by the rule-based investigator ----------------------------------------


def _investigated(ref: str) -> Run:
    run = investigation_start(ticket=Ticket.objects.get(ref=ref))
    return Run.objects.get(pk=run.pk)


def _headline(run: Run) -> str:
    return run_headline(run=run, packet=packet_of(run)).text


@pytest.mark.parametrize(
    "ref,expected,never",
    [
        ("T-1001", "Completed", "could not be reached"),
        ("T-1002", "Refused a lookup: J-99 does not exist", "may not make"),
        ("T-1003", "Completed", "could not be reached"),
        ("T-1004", "Completed", "could not be reached"),
        ("T-1005", "Refused a lookup: J-77 belongs to another account (GLOBEX)", "may not make"),
        ("T-1006", "Waiting for approval", "Refused"),
        ("T-1007", "Completed", "Refused"),  # its own words find the article on renaming
    ],
)
def test_every_demo_ticket_is_headlined_by_what_happened(demo_committed, ref, expected, never):
    headline = _headline(_investigated(ref))
    assert headline == expected and never not in headline


def test_a_denied_demo_lookup_is_headlined_as_the_supervisors_denial(demo_committed, supervisor_user):
    run = _investigated("T-1006")
    approval_answer(run_id=run.pk, grant=False, decided_by="supervisor", note="audit logs stay internal")
    run.refresh_from_db()
    headline = run_headline(run=run, packet=packet_of(run))
    assert headline.text == "Lookup denied by a supervisor (supervisor)"
    assert headline.at == run.approvals.get().decided_at
    page = client_for(supervisor_user).get(reverse("admin:agentrun_run_change", args=[run.pk])).content.decode()
    assert "Lookup denied by a supervisor (supervisor), " in page
    assert "proposed something not allowed" not in page
    assert "supervisor denied this call: audit logs stay internal" in page


def test_t1007_cites_the_article_its_own_words_find(demo_committed):
    run = _investigated("T-1007")
    assert run.status == Status.COMPLETED
    assert "the article “Renaming a workspace” (DOC-RENAME-2 r1)" in run.packet.summary
    assert "Old links redirect for 30 days." in run.packet.summary


def test_a_hand_off_says_what_its_searches_found(demo_committed):
    t1001 = Ticket.objects.get(ref="T-1001")
    ticket = Ticket.objects.create(
        ref="T-ZEBRA", account=t1001.account, session=t1001.session, subject="Code", body="We see ZEBRA_QUOTA_GONE."
    )
    run = _investigated(ticket.ref)
    assert run.status == Status.NEEDS_HELP
    assert "nothing to look up" not in run.stop_note
    assert "The documentation search for “zebra_quota_gone”" in run.stop_note
    assert "found no article that matches it well" in run.stop_note


def test_t1003_is_not_verified_not_no_longer_verified(demo_committed, client, staff_user):
    run = _investigated("T-1003")
    packet = ReviewPacket.objects.get(run=run)
    assert any("session is not verified" in q for q in packet.open_questions)
    checks = client.get(f"/api/packets/{packet.pk}", **bearer(staff_user)).json()["evidence_checks"]
    assert [c["reason"] for c in checks] == ["the customer's session is not verified; nothing was read"]


@pytest.fixture
def job_service_down(demo_committed, settings):
    server = OperatorServer(jobs=demo_jobs(), summary=statuspage_summary())
    settings.AGENT_JOB_STATUS_BACKEND = "http"
    settings.AGENT_JOB_STATUS_URL = server.job_url
    server.close()  # nothing listens there any more: every lookup fails to connect
    return server


def test_a_run_whose_job_service_was_unreachable_says_so(job_service_down, staff_user):
    run = run_advance(run_start(ticket=Ticket.objects.get(ref="T-1001"), model_name="rules").pk)
    assert _headline(run) == "Completed; the job status service could not be reached"
    packet = ReviewPacket.objects.get(run=run)
    assert "J-42 could not be looked up: the job status service could not be reached." in " ".join(
        packet.open_questions
    )
    page = client_for(staff_user).get(reverse("admin:agentrun_reviewpacket_change", args=[packet.pk])).content
    assert b"Completed; the job status service could not be reached" in page


def test_a_packet_lacking_a_lookup_s_answer_says_it_is_incomplete_everywhere(job_service_down, staff_user):
    """J-42's lookup failed twice (the loop's own retry included): the rules do not try it a third time, draw no
    conclusion for the customer, and the packet page and the API mark the packet incomplete, naming the lookup."""
    run = run_advance(run_start(ticket=Ticket.objects.get(ref="T-1001"), model_name="rules").pk)
    packet = ReviewPacket.objects.get(run=run)
    jobs = [a["outcome"] for a in packet.attempts if a["tool"] == "read_job_status"]
    assert jobs == ["transient_error", "transient_error"]
    assert packet.summary.startswith("Incomplete: J-42 could not be looked up (the job status service could not")
    assert packet.reply == ""  # no conclusion for the customer without the job's record
    page = client_for(staff_user).get(reverse("admin:agentrun_reviewpacket_change", args=[packet.pk])).content.decode()
    block = page[page.index('id="incomplete"') :].split("</div>", 1)[0]
    assert "read_job_status {&quot;job_id&quot;:&quot;J-42&quot;}</code>: its service could not be reached" in block
    out = client_for(staff_user).get(f"/api/packets/{packet.pk}", **bearer(staff_user)).json()
    assert out["incomplete"] is True
    assert out["lost_lookups"] == [
        {
            "tool": "read_job_status",
            "args": {"job_id": "J-42"},
            "outcome": "transient_error",
            "why": "its service could not be reached",
        }
    ]


def test_a_complete_packet_is_not_marked_incomplete(demo_committed, staff_user):
    run = run_advance(run_start(ticket=Ticket.objects.get(ref="T-1001"), model_name="rules").pk)
    packet = ReviewPacket.objects.get(run=run)
    page = client_for(staff_user).get(reverse("admin:agentrun_reviewpacket_change", args=[packet.pk])).content.decode()
    assert 'id="incomplete"' not in page and not packet.summary.startswith("Incomplete")
    out = client_for(staff_user).get(f"/api/packets/{packet.pk}", **bearer(staff_user)).json()
    assert (out["incomplete"], out["lost_lookups"]) == (False, [])


def test_with_nothing_else_to_cite_the_rules_hand_off_naming_the_unreachable_service(job_service_down):
    ticket = Ticket.objects.create(
        ref="T-2001",
        account_id=Ticket.objects.get(ref="T-1001").account_id,
        session=Ticket.objects.get(ref="T-1001").session,
        subject="Job J-42",
        body="What happened to J-42?",
    )
    run = run_advance(run_start(ticket=ticket, model_name="rules").pk)
    assert run.status == Status.NEEDS_HELP
    assert run.stop_note.startswith("The job status service could not be reached, so J-42 could not be looked up.")
    assert _headline(run) == "Handed to a person; the job status service could not be reached"
