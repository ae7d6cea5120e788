"""The operator's own services in read_service_status (tools/read_service_status.py), over real sockets.

The http backend reads tests/fixtures/statuspage_summary.json (a page in Statuspage's shape, with a
component group and an incident naming no component) from tests/support/operatorserver.py; the
runs go through the production loop.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from engine.models import Run
from engine.selectors import run_report
from engine.services import investigation_start
from providers.tooldefs import tool_definitions
from staff.recheck import evidence_reread
from tests.support.operatorserver import Answer, OperatorServer, operator_page
from tickets.models import Evidence, Service, Ticket
from tickets.selectors import SessionScope
from tools import read_service_status
from tools.compare import Outcome
from tools.registry import TOOLS

pytestmark = pytest.mark.usefixtures("settle")

SUMMARY = "/api/v2/summary.json"
PAGE_WIDE = ("cp306tmzcl0y", "Unplanned Database Outage", "identified")
US_ERRORS = ("w8hn5x1c0vfj", "Elevated error rates for API requests in the US", "monitoring")
GIT = ("tq0r3y2b8mk4", "Incident with Git Operations", "investigating")
PAGE_NAMES = ["API", "Management Portal", "Git Operations", "API Requests", "API Endpoints", "API (US)", "API (EU)"]


@pytest.fixture
def page(settings, demo_committed):
    """The operator's status page, its names not yet read by this process (a server of its own, a URL of its own)."""
    server = OperatorServer(summary=operator_page())
    settings.AGENT_SERVICE_STATUS_BACKEND = "http"
    settings.AGENT_SERVICE_STATUS_URL = server.summary_url
    yield server
    server.close()


def read(scope, name):
    return TOOLS["read_service_status"].backend(scope, {"service": name}).content


def incidents(content):
    return [(i["id"], i["title"], i["status"]) for i in content["incidents"]]


def ticket(ref, body):
    t1001 = Ticket.objects.get(ref="T-1001")
    return Ticket.objects.create(ref=ref, account=t1001.account, session=t1001.session, subject="Status", body=body)


def service_call(name):
    return {"call": {"tool": "read_service_status", "args": {"service": name}}}


# --- end to end: the rules, a run, its evidence and its packet ----------------------------------------


def test_a_ticket_naming_the_management_portal_gets_its_status_and_the_page_wide_incident(page):
    run = investigation_start(ticket=ticket("T-MP", "Since this morning the Management Portal is down for all of us."))
    report = run_report(run_id=run.pk)
    assert report["status"] == "COMPLETED"
    # the ticket's words first (no article of the demo answers them), then the service it names
    assert [(d["tool"], d["args"], d["outcome"], d["evidence"]) for d in report["dispatched"]] == [
        (
            "search_docs",
            {"query": "status: since this morning the management portal is down for all of us.", "max_results": 3},
            "ok",
            "E1",
        ),
        ("read_service_status", {"service": "management portal"}, "ok", "E2"),
    ]
    evidence = Evidence.objects.get(run_id=run.pk, tool="read_service_status")
    content = json.loads(evidence.content)
    assert (content["service"], content["status"], evidence.source_ref) == (
        "Management Portal",
        "major_outage",
        "service:Management Portal",
    )
    assert incidents(content) == [PAGE_WIDE]
    packet = report["packet"]
    assert packet["evidence"] == ["E2"]
    assert "Service Management Portal is major_outage [E2]" in packet["summary"]
    assert "Unplanned Database Outage" in packet["summary"]
    # The page was read for its names before the first model request, then for the lookup: no more.
    assert [r.path for r in page.received] == [SUMMARY, SUMMARY]


# --- names: by name or slug, in any case; groups ------------------------------------------------------


@pytest.mark.parametrize("written", ["API (US)", "api (us)", "api-us", "API-US"])
def test_name_or_slug_in_any_case_finds_the_component(page, dana_session, written):
    content = read(SessionScope.of(dana_session), written)
    assert (content["service"], content["status"]) == ("API (US)", "partial_outage")
    assert incidents(content) == [PAGE_WIDE, US_ERRORS]  # newest first


@pytest.mark.parametrize("written", ["API Endpoints", "api endpoints", "api-endpoints"])
def test_a_group_name_finds_the_group_with_its_members_incidents(page, dana_session, written):
    content = read(SessionScope.of(dana_session), written)
    assert (content["service"], content["status"]) == ("API Endpoints", "partial_outage")  # as the page gives it
    assert incidents(content) == [PAGE_WIDE, US_ERRORS]


def test_an_incident_naming_no_component_is_every_services(page, dana_session):
    scope = SessionScope.of(dana_session)
    assert incidents(read(scope, "API (EU)")) == [PAGE_WIDE]  # the group's other member: not the US incident
    assert incidents(read(scope, "git-operations")) == [GIT, PAGE_WIDE]
    assert read(scope, "Git Operations")["status"] == "degraded"  # Statuspage's degraded_performance
    assert incidents(read(scope, "API")) == [PAGE_WIDE]  # "API" is a component, not the group's member


def test_an_unknown_name_is_a_bad_argument_listing_the_page_s_services(page, play):
    report = play([service_call("payments")])
    assert (report["status"], report["detail"], report["dispatched"]) == ("INVALID_OR_FORBIDDEN", "bad_arguments", [])
    reason = Run.objects.get(pk=report["run"]).packet.refused["reason"]
    assert reason == (
        "The arguments do not fit read_service_status: service: Value error, no service named 'payments' is"
        f" listed; the services are: {', '.join(PAGE_NAMES)}."
    )
    assert [r.path for r in page.received] == [SUMMARY]  # read for the names; the call was never made


def test_the_database_backend_lists_the_service_rows(play):
    assert play([service_call("Management Portal")])["detail"] == "bad_arguments"
    Service.objects.create(name="Management Portal", status="major_outage")
    report = play([service_call("management-portal"), {"handoff": "done"}])
    assert [(d["args"], d["outcome"]) for d in report["dispatched"]] == [({"service": "management-portal"}, "ok")]
    content = json.loads(Evidence.objects.get(run_id=report["run"]).content)
    assert (content["service"], content["status"], content["incidents"]) == ("Management Portal", "major_outage", [])


def test_the_rows_are_kept_for_model_requests_and_read_afresh_to_check_a_call(demo_committed):
    catalog = TOOLS["read_service_status"].catalog
    assert list(catalog(5.0).names) == ["api", "auth", "billing", "export"]
    with CaptureQueriesContext(connection) as queries:
        assert list(catalog(5.0).names) == ["api", "auth", "billing", "export"]  # kept: a run's requests cost none
    assert len(queries) == 0
    Service.objects.create(name="Management Portal", status="operational")  # this process forgets what it kept
    with CaptureQueriesContext(connection) as queries:
        assert "Management Portal" in catalog(5.0).names
        assert "Management Portal" in catalog(0).names  # the check of a call reads the table as it is now
    assert len(queries) == 2


# --- the names as a model is offered them --------------------------------------------------------------


def test_the_model_is_offered_the_names_the_engine_read(page):
    TOOLS["read_service_status"].catalog(5.0)  # what the engine does before a model request
    (offered,) = [d for d in tool_definitions() if d.name == "read_service_status"]
    assert offered.parameters["properties"]["service"]["enum"] == PAGE_NAMES
    for _ in range(3):
        tool_definitions()
    assert [r.path for r in page.received] == [SUMMARY]  # the definitions never read the page themselves


# --- the names are kept for a short while ---------------------------------------------------------------


def test_the_page_is_read_for_its_names_at_most_once_while_they_are_kept(page, play):
    play([service_call("API"), service_call("Git Operations"), service_call("api-us"), {"handoff": "done"}])
    # Four model requests; one read of the names, then the three lookups.
    assert [r.path for r in page.received] == [SUMMARY] * 4


def test_threads_asking_at_once_read_the_page_once(page):
    found, start = [], threading.Barrier(8)

    def ask():
        start.wait()
        found.append(read_service_status.service_catalog(5.0))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(found) == 8 and all(c is not None and list(c.names) == PAGE_NAMES for c in found)
    assert len(page.received) == 1


def test_the_names_are_read_again_once_they_are_old(page, monkeypatch):
    monkeypatch.setattr(read_service_status, "CATALOG_SECONDS", 0.2)
    assert "Management Portal" in read_service_status.service_catalog(5.0).names
    page.summary["components"] = [c for c in page.summary["components"] if c["name"] != "Management Portal"]
    assert "Management Portal" in read_service_status.service_catalog(5.0).names  # still kept
    time.sleep(0.3)
    assert "Management Portal" not in read_service_status.service_catalog(5.0).names
    assert len(page.received) == 2


def test_a_page_that_cannot_be_read_for_its_names_leaves_the_lookup_to_say(page, play):
    page.answers = [Answer(503)]  # the read for the names fails; the lookup's read does not
    report = play([service_call("anything"), {"handoff": "done"}])
    assert report["status"] == "NEEDS_HELP"  # the call was made: no names were known to refuse it
    assert [(d["tool"], d["outcome"]) for d in report["dispatched"]] == [("read_service_status", "error")]
    error = Run.objects.get(pk=report["run"]).attempts.get().error
    assert error == "no service named 'anything' is listed"
    # The failed read is not tried again at the next model request: the page does not hold up every request.
    assert [r.path for r in page.received] == [SUMMARY, SUMMARY]


def test_a_failed_read_keeps_the_names_read_before(page, monkeypatch):
    monkeypatch.setattr(read_service_status, "CATALOG_SECONDS", 0.0)
    first = read_service_status.service_catalog(5.0)
    page.answers = [Answer(500)]
    assert read_service_status.service_catalog(5.0) == first
    assert read_service_status.service_catalog(0) == first  # no wait allowed: what was read last


# --- re-checked --------------------------------------------------------------------------------------------


def test_a_service_the_page_no_longer_lists_is_gone_when_re_checked(page, dana_session):
    run = investigation_start(ticket=ticket("T-GIT", "git operations are slow since noon"))
    evidence = Evidence.objects.get(run_id=run.pk, tool="read_service_status")

    def reread():
        return evidence_reread(evidence=evidence, run=run, session=dana_session, approved=set(), timeout=5.0)

    assert reread().outcome == Outcome.UNCHANGED
    page.summary["components"] = [c for c in page.summary["components"] if c["name"] != "Git Operations"]
    gone = reread()
    assert (gone.outcome, gone.reason) == (Outcome.GONE, "no service named 'git operations' is listed")
