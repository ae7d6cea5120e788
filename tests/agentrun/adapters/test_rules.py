"""The default rules model investigates T-1001 end to end (issue 2, the README's demo)."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from engine.decisions import Call, NormalizedCall, normalize_call
from engine.models import Run
from engine.services import investigation_start
from providers.context import AttemptItem, Context, EvidenceItem
from providers.rules import RULE_TOOLS, SERVICE_WORDS, Investigation
from tickets.demo import SERVICES as DEMO_SERVICES
from tickets.models import Evidence
from tools.base import Catalog
from tools.registry import TOOLS

DEMO = Catalog.of(name for name, *_ in DEMO_SERVICES)
PAGE = Catalog.of(["API", "Management Portal", "Git Operations", "API Requests", "API Endpoints", "API (US)"])

pytestmark = pytest.mark.usefixtures("settle")


def investigate(*args) -> str:
    out = StringIO()
    call_command("investigate", "T-1001", *args, stdout=out)
    return out.getvalue()


def test_investigate_json_completes_t1001_citing_the_job_and_the_doc(ticket_t1001):
    report = json.loads(investigate("--json"))
    assert (report["status"], report["detail"], report["model"]) == ("COMPLETED", None, "rules")
    assert [(d["tool"], d["args"], d["outcome"], d["evidence"]) for d in report["dispatched"]] == [
        ("read_job_status", {"job_id": "J-42"}, "ok", "E1"),
        ("search_docs", {"query": "export_role_required", "max_results": 3}, "ok", "E2"),
    ]
    packet = report["packet"]
    assert packet["stop_reason"] == "COMPLETED"
    assert packet["evidence"] == ["E1", "E2"]
    assert "[E1]" in packet["summary"] and "[E2]" in packet["summary"]
    assert "EXPORT_ROLE_REQUIRED" in packet["summary"] and "DOC-EXPORT-7" in packet["summary"]
    assert "not a language model" in packet["summary"]
    assert report["tokens"] == {"reserved": 0, "used": 0} and report["cost_micros"] == 0


def test_rules_packet_asks_about_the_role_at_failure_time_and_the_rename(ticket_t1001):
    questions = json.loads(investigate("--json"))["packet"]["open_questions"]
    role = [q for q in questions if "role" in q.casefold() and "J-42" in q]
    rename = [q for q in questions if "rename" in q.casefold()]
    assert role and rename
    assert "2026-09-14T10:02:00Z" in role[0]  # the failure time, since only the current role is known


def test_investigate_prints_a_readable_packet(ticket_t1001):
    text = investigate()
    assert "Stop reason: COMPLETED" in text
    assert "E1: read_job_status" in text and "E2: search_docs" in text
    assert "Nothing was sent to the customer" in text


def test_investigation_start_completes_t1001(ticket_t1001):
    run = investigation_start(ticket=ticket_t1001)
    run.refresh_from_db()
    assert run.status == "COMPLETED"
    assert run.packet.evidence_refs == ["E1", "E2"]
    assert len(run.packet.open_questions) == 2


def test_a_second_investigation_reuses_the_tickets_evidence(ticket_t1001):
    first = json.loads(investigate("--json"))
    second = json.loads(investigate("--json"))
    assert first["evidence"] == second["evidence"] == ["E1", "E2"]
    assert second["status"] == "COMPLETED"
    assert Evidence.objects.filter(ticket=ticket_t1001).count() == 2
    assert Run.objects.filter(ticket=ticket_t1001).count() == 2


def make_ticket(ref, subject, body):
    from tickets.models import Ticket

    t1001 = Ticket.objects.get(ref="T-1001")
    return Ticket.objects.create(ref=ref, account=t1001.account, session=t1001.session, subject=subject, body=body)


def test_rules_check_the_service_a_ticket_names_when_no_job_explains_it(ticket_t1001):
    ticket = make_ticket("T-BILL", "Invoices are late", "Our invoice for November has not arrived. Is billing down?")
    run = investigation_start(ticket=ticket)
    run.refresh_from_db()
    assert run.status == "COMPLETED"
    attempts = list(run.attempts.values_list("tool", "args"))
    # the ticket's own words first (no article answers them), then the service it names
    assert attempts == [
        ("search_docs", {"query": "invoices are late: our invoice for november has not arrived.", "max_results": 3}),
        ("read_service_status", {"service": "billing"}),
    ]
    assert run.packet.evidence_refs == ["E2"]
    assert "degraded" in run.packet.summary
    assert any("Which article should have answered" in q for q in run.packet.open_questions)


def test_rules_hand_off_a_ticket_with_nothing_to_look_up(ticket_t1001):
    ticket = make_ticket("T-VAGUE", "Hello", "Can someone call me back?")
    run = investigation_start(ticket=ticket)
    run.refresh_from_db()
    # the one thing it says is searched for; no article answers it, and nothing else is there to look up
    assert (run.status, run.tool_attempts, run.packet.stop_reason) == ("NEEDS_HELP", 1, "NEEDS_HELP")
    assert "found no article that matches it well" in run.packet.stop_note


def test_rules_hand_off_a_ticket_with_no_words_to_search(ticket_t1001):
    ticket = make_ticket("T-EMPTY", "Hi", "Hello?")
    run = investigation_start(ticket=ticket)
    run.refresh_from_db()
    assert (run.status, run.tool_attempts, run.packet.stop_reason) == ("NEEDS_HELP", 0, "NEEDS_HELP")


def test_investigate_refuses_a_session_of_another_account(ticket_t1001):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError):
        investigate("--session", "S-GLOBEX-1")
    assert not Run.objects.exists()


def test_investigate_names_a_missing_ticket(demo_committed):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="T-9999"):
        call_command("investigate", "T-9999", stdout=StringIO())


def test_the_readable_packet_of_a_run_that_did_not_complete(play):
    from engine.management.commands.investigate import render_packet
    from engine.models import Run
    from engine.packetview import packet_view

    report = play([{"call": {"tool": "read_job_status", "args": {"job_id": "J-77"}}}])  # GLOBEX's job
    run = Run.objects.select_related("ticket", "packet").get(pk=report["run"])
    text = render_packet(packet_view(run=run, packet=run.packet))
    assert "Stop reason: INVALID_OR_FORBIDDEN / forbidden" in text
    assert "Summary:" not in text
    assert "Attempted operations:\n  none" in text


def test_for_an_unverified_session_the_rules_leave_jobs_as_an_open_question(ticket_t1001, anon_session):
    from engine.loop import run_advance
    from engine.selectors import run_report
    from engine.services import run_start

    run = run_start(ticket=ticket_t1001, session=anon_session, model_name="rules")
    report = run_report(run_id=run_advance(run.pk).pk)

    assert report["status"] == "COMPLETED"
    assert "read_job_status" not in [d["tool"] for d in report["dispatched"]]
    # the ticket's own words find the article on CSV exports: it answers, so no service is checked
    assert [d["tool"] for d in report["dispatched"]] == ["search_docs"]
    assert "the article “CSV export permissions”" in report["packet"]["summary"]
    assert any("not verified" in q and "J-42" in q for q in report["packet"]["open_questions"])


def test_the_rules_name_only_tools_of_the_table_and_the_demos_services():
    assert set(RULE_TOOLS) <= TOOLS.keys()
    assert set(SERVICE_WORDS) == set(DEMO.names)


def propose(subject: str, body: str, catalog: Catalog | None) -> list[tuple[str, dict]]:
    """Pure: the lookups the rules propose for a ticket, each checked as the loop checks it, until they draft."""
    catalogs = {} if catalog is None else {"read_service_status": catalog}
    ctx = Context("T-9", subject, body, True, catalogs=catalogs)
    proposed = []
    for _ in range(10):
        decision = Investigation(ctx).next_decision()
        if "call" not in decision:
            break
        call = normalize_call(Call(decision["call"]["tool"], decision["call"]["args"]), catalogs.get)
        assert isinstance(call, NormalizedCall), call
        proposed.append((call.tool, decision["call"]["args"]))
        attempts = (*ctx.attempts, AttemptItem(call.tool, call.args, "error"))
        ctx = Context(ctx.ticket_ref, ctx.subject, ctx.body, True, attempts=attempts, catalogs=catalogs)
    return proposed


def test_every_call_the_rules_propose_is_a_valid_call_of_the_table():
    """The rules' lookups for a ticket naming a job, an error code and services pass the loop's checks."""
    proposed = propose("Export and billing", "J-42 failed with EXPORT_ROLE_REQUIRED; the invoice too.", DEMO)
    assert [tool for tool, _ in proposed] == [
        "read_job_status",
        "search_docs",  # the error code
        "search_docs",  # the ticket's own words: nothing explained the job (its lookup failed here)
        "read_service_status",
        "read_service_status",
    ]
    assert [args for tool, args in proposed if tool == "read_service_status"] == [
        {"service": "export"},
        {"service": "billing"},
    ]


@pytest.mark.parametrize(
    "body, services",
    [
        ("Since this morning the Management Portal is down for all of us.", ["Management Portal"]),
        ("The management-portal returns 502; git operations are slow too.", ["Management Portal", "Git Operations"]),
        ("Calls to API (US) time out.", ["API", "API (US)"]),  # "API" is a component of its own on this page
        ("Is the api endpoints group degraded?", ["API", "API Endpoints"]),
        ("Our CSV export fails and the invoice is late.", []),  # the demo's words, but this page lists neither
        ("The portal is down.", []),  # a word of a name is not the name
    ],
)
def test_the_rules_ask_about_the_operators_services_the_ticket_names(body, services):
    proposed = propose("Status", body, PAGE)
    assert proposed[0] == ("search_docs", {"query": f"Status: {body}", "max_results": 3})
    assert proposed[1:] == [("read_service_status", {"service": name}) for name in services]


def test_without_a_catalog_the_rules_ask_by_the_demos_words():
    """The status page could not be read: the rules ask as before, and the lookup will tell."""
    proposed = propose("Export", "Our CSV export fails and the Management Portal is down.", None)
    assert proposed[1:] == [("read_service_status", {"service": "export"})]


# --- a lookup that got no answer ------------------------------------------------------------

J42_LOOKUP = AttemptItem("read_job_status", {"job_id": "J-42"}, "interrupted")


def _t1001(*attempts: AttemptItem, evidence=()) -> Context:
    return Context(
        "T-1001",
        "CSV export fails",
        "Job J-42 failed since we renamed the workspace.",
        True,
        attempts=attempts,
        evidence=evidence,
    )


def test_a_lookup_cut_off_is_not_repeated_as_the_next_call_but_after_another():
    first = Investigation(_t1001(J42_LOOKUP)).next_decision()
    assert first["call"]["tool"] != "read_job_status"  # repeating the call just made is NO_PROGRESS
    other = AttemptItem(first["call"]["tool"], first["call"]["args"], "ok")
    assert Investigation(_t1001(J42_LOOKUP, other)).next_decision() == {
        "call": {"tool": "read_job_status", "args": {"job_id": "J-42"}}
    }


@pytest.mark.parametrize(
    "outcome, why",
    [
        ("interrupted", "the lookup was interrupted by a worker restart"),
        ("timeout", "the job status service did not answer in time"),
        ("transient_error", "the job status service could not be reached"),
    ],
)
def test_a_lookup_without_an_answer_twice_is_named_and_no_conclusion_is_drawn(outcome, why):
    lost = AttemptItem("read_job_status", {"job_id": "J-42"}, outcome)
    search = AttemptItem("read_service_status", {"service": "export"}, "ok", "E1")
    status = EvidenceItem(
        "E1",
        "read_service_status",
        {"service": "export"},
        json.dumps({"service": "export", "status": "operational", "incidents": []}),
        "service:export",
    )
    attempts = [lost, search, lost]
    for _ in range(10):  # the rules' other lookups (each answered with nothing), then the draft
        decision = Investigation(_t1001(*attempts, evidence=(status,))).next_decision()
        if "call" not in decision:
            break
        assert decision["call"]["tool"] != "read_job_status"  # not a third time
        attempts.append(AttemptItem(decision["call"]["tool"], decision["call"]["args"], "ok"))
    draft = decision["draft"]
    assert draft["summary"].startswith(f"Incomplete: J-42 could not be looked up ({why});")
    assert f"J-42 could not be looked up: {why}. What does the job record say?" in draft["open_questions"]
    assert "Service export is operational [E1]" in draft["summary"]  # what was found stays, as a fact
    assert "reply" not in draft  # "the service is working" would be a conclusion the job's record may undo


def test_a_lookup_that_failed_for_good_is_not_made_again():
    failed = AttemptItem("read_job_status", {"job_id": "J-42"}, "error")
    decision = Investigation(_t1001(failed, AttemptItem("search_docs", {"query": "x"}, "ok"))).next_decision()
    assert decision.get("call", {}).get("tool") != "read_job_status"
