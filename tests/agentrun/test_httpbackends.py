"""The account-data tools read from the operator's own services (agentrun/httpbackends.py), over real sockets.

tests/support/operatorserver.py serves the demo data set as the operator's job API and a
Statuspage summary would; the runs go through the production loop (`play`, run_advance).
"""

from __future__ import annotations

import json
import logging
import time

import pytest

from engine.loop import run_advance
from engine.models import Observation, ReviewPacket, Run, ToolAttempt
from engine.selectors import run_report
from engine.services import run_start
from engine.waiting import operations_settle
from tests.support.commands import manage_check
from tests.support.operatorserver import Answer, OperatorServer, demo_jobs, statuspage_summary
from tickets.demo import SERVICES as DEMO_SERVICES
from tickets.models import Evidence, Service, Ticket
from tickets.selectors import SessionScope
from tools.httpbackends import http_client
from tools.lookups import Lookup, ToolError
from tools.registry import TOOLS

SERVICES = [name for name, *_ in DEMO_SERVICES]
SUMMARY = "/api/v2/summary.json"

pytestmark = pytest.mark.usefixtures("settle")

SECRET = "Bearer s3cret-operator-token"
J42 = {"call": {"tool": "read_job_status", "args": {"job_id": "J-42"}}}
J77 = {"call": {"tool": "read_job_status", "args": {"job_id": "J-77"}}}
DOCS = {"call": {"tool": "search_docs", "args": {"query": "EXPORT_ROLE_REQUIRED"}}}


def draft(*refs):
    return {"draft": {"summary": "Looked up.", "evidence": list(refs), "open_questions": []}}


def service(name):
    return {"call": {"tool": "read_service_status", "args": {"service": name}}}


@pytest.fixture
def operator(demo_committed):
    server = OperatorServer(jobs=demo_jobs(), summary=statuspage_summary())
    yield server
    server.close()


@pytest.fixture
def http_backends(settings, operator):
    settings.AGENT_JOB_STATUS_BACKEND = settings.AGENT_SERVICE_STATUS_BACKEND = "http"
    settings.AGENT_JOB_STATUS_URL = operator.job_url
    settings.AGENT_JOB_STATUS_AUTH_HEADER = ("Authorization", SECRET)
    settings.AGENT_SERVICE_STATUS_URL = operator.summary_url
    # The page's services are read before a run's first model request and kept (tools/read_service_status.py):
    # read them now, so that each request a test scripts and counts here is a lookup's.
    assert TOOLS["read_service_status"].catalog(5.0) is not None
    operator.received.clear()
    return operator


def dispatched(report):
    return [(d["tool"], d["outcome"]) for d in report["dispatched"]]


def attempt_errors(report):
    return list(ToolAttempt.objects.filter(run_id=report["run"]).order_by("seq").values_list("error", flat=True))


def stored_text(report) -> str:
    """Everything the run wrote that a person or the model may read."""
    run_id = report["run"]
    return json.dumps(
        [
            attempt_errors(report),
            list(Observation.objects.filter(run_id=run_id).values_list("text", flat=True)),
            list(Evidence.objects.values_list("content", flat=True)),
            list(ReviewPacket.objects.filter(run_id=run_id).values("summary", "attempts", "stop_note")),
            list(Run.objects.filter(pk=run_id).values_list("stop_note", "pending_call")),
        ],
        default=str,
    )


# --- the same packet ------------------------------------------------------------------------------


def investigate(ticket) -> dict:
    run = run_start(ticket=ticket, model_name="rules")
    run_advance(run.pk)
    return run_report(run_id=run.pk)


def packet_as_seen(report) -> dict:
    packet = report["packet"]
    contents = dict(Evidence.objects.filter(ticket__ref=report["ticket"]).values_list("number", "content"))
    return {
        "status": report["status"],
        "summary": packet["summary"],
        "open_questions": packet["open_questions"],
        "evidence": {ref: contents[int(ref[1:])] for ref in packet["evidence"]},
        "attempts": [{k: a[k] for k in ("tool", "args", "outcome", "error", "evidence")} for a in packet["attempts"]],
    }


def test_t1001_gives_the_same_packet_with_the_http_backends_as_with_the_database(ticket_t1001, operator, settings):
    by_database = packet_as_seen(investigate(ticket_t1001))
    Evidence.objects.filter(ticket=ticket_t1001).delete()  # the second run numbers and stores its own evidence
    Ticket.objects.filter(pk=ticket_t1001.pk).update(evidence_count=0)
    settings.AGENT_JOB_STATUS_BACKEND = settings.AGENT_SERVICE_STATUS_BACKEND = "http"
    settings.AGENT_JOB_STATUS_URL, settings.AGENT_SERVICE_STATUS_URL = operator.job_url, operator.summary_url
    by_http = packet_as_seen(investigate(ticket_t1001))
    # The page is read once for its services' names (before the first model request), then kept.
    assert [r.path for r in operator.received] == [SUMMARY, "/jobs/J-42"]
    assert by_http == by_database
    assert by_http["status"] == "COMPLETED" and "EXPORT_ROLE_REQUIRED" in by_http["evidence"]["E1"]


def test_every_service_reads_the_same_from_the_status_page_as_from_the_database(http_backends, dana_session, settings):
    scope = SessionScope.of(dana_session)
    from_page = {name: TOOLS["read_service_status"].backend(scope, {"service": name}) for name in SERVICES}
    settings.AGENT_SERVICE_STATUS_BACKEND = "database"
    for name in SERVICES:
        from_table = TOOLS["read_service_status"].backend(scope, {"service": name}).content
        # The same but for the service's name, which each source gives as it lists it ("Export" on the page).
        assert from_page[name].content == from_table | {"service": name.capitalize()}
    assert from_page["billing"].content["status"] == "degraded"  # the page's degraded_performance
    assert from_page["export"].content["incidents"][0]["id"] == "INC-311"


# --- a whole run through the loop ----------------------------------------------------------------------


def test_a_job_is_read_with_the_account_and_the_credential_and_kept_as_evidence(play, http_backends):
    assert http_backends.jobs["J-42"] == J42_REPLY  # the reply schema docs/help-desks/services.md documents
    report = play([J42, draft("E1")])
    assert (report["status"], dispatched(report)) == ("COMPLETED", [("read_job_status", "ok")])
    [request] = http_backends.received
    assert request.path == "/jobs/J-42"
    assert request.headers["x-account"] == "ACME"
    assert request.headers["authorization"] == SECRET
    evidence = json.loads(Evidence.objects.get(run_id=report["run"]).content)
    assert evidence["job_id"] == "J-42" and evidence["requester_current_role"] == "viewer"


def test_a_service_is_read_from_the_status_page(play, http_backends):
    report = play([service("export"), draft("E1")])
    assert (report["status"], dispatched(report)) == ("COMPLETED", [("read_service_status", "ok")])
    assert [r.path for r in http_backends.received] == [SUMMARY]  # the names were read before, and kept
    assert json.loads(Evidence.objects.get(run_id=report["run"]).content)["status"] == "operational"


def test_a_service_the_page_does_not_list_is_the_same_bad_argument_as_a_missing_row(play, settings):
    page = statuspage_summary()
    page["components"] = [c for c in page["components"] if c["name"] != "Billing"]
    server = OperatorServer(summary=page)  # a page of its own: its names are read afresh
    settings.AGENT_SERVICE_STATUS_BACKEND, settings.AGENT_SERVICE_STATUS_URL = "http", server.summary_url
    try:
        by_page = play([service("billing"), DOCS, draft("E1")])
    finally:
        server.close()
    settings.AGENT_SERVICE_STATUS_BACKEND = "database"
    Service.objects.filter(name="billing").delete()
    by_table = play([service("billing"), DOCS, draft("E1")])
    for report in (by_page, by_table):
        assert (report["status"], report["detail"], dispatched(report)) == ("INVALID_OR_FORBIDDEN", "bad_arguments", [])
    reasons = [ReviewPacket.objects.get(run_id=r["run"]).refused["reason"] for r in (by_page, by_table)]
    assert reasons == [
        "The arguments do not fit read_service_status: service: Value error, no service named 'billing' is listed;"
        f" the services are: {listed}."
        for listed in ("Api, Auth, Export", "api, auth, export")
    ]


def test_a_service_no_longer_listed_when_looked_up_is_gone_from_either_source(http_backends, dana_session, settings):
    """Listed when the call was checked, gone when it is made (or re-checked): the source no longer has it."""
    scope = SessionScope.of(dana_session)
    http_backends.summary["components"] = [c for c in http_backends.summary["components"] if c["name"] != "Billing"]
    with pytest.raises(ToolError, match="no service named 'billing' is listed") as by_page:
        TOOLS["read_service_status"].backend(scope, {"service": "billing"})
    settings.AGENT_SERVICE_STATUS_BACKEND = "database"
    Service.objects.filter(name="billing").delete()
    with pytest.raises(ToolError, match="no service named 'billing' is listed") as by_table:
        TOOLS["read_service_status"].backend(scope, {"service": "billing"})
    assert by_page.value.gone and by_table.value.gone and not by_page.value.transient


@pytest.mark.parametrize("status", [503, 500, 429])
def test_a_server_error_is_transient_retried_and_counted(play, http_backends, status):
    http_backends.answers = [Answer(status)]
    report = play([J42, draft("E1")])
    assert report["status"] == "COMPLETED"
    assert dispatched(report) == [("read_job_status", "transient_error"), ("read_job_status", "ok")]
    assert report["tool_attempts"] == 2 and len(http_backends.received) == 2
    assert attempt_errors(report)[0] == f"the job status service answered HTTP {status}"


def test_retries_stop_at_max_read_retries(play, http_backends):
    http_backends.answers = [Answer(503), Answer(503), Answer(503)]
    report = play([J42, DOCS, draft("E1")], budget={"max_read_retries": 1})
    assert dispatched(report)[:2] == [("read_job_status", "transient_error")] * 2
    assert len(http_backends.received) == 2


def test_an_unreachable_service_is_transient(play, http_backends, settings):
    http_backends.close()
    report = play([J42, DOCS, draft("E1")])
    assert dispatched(report)[:2] == [("read_job_status", "transient_error")] * 2
    assert attempt_errors(report)[0] == "the job status service could not be reached (ConnectError)"


def test_the_deadline_cuts_a_slow_reply_and_the_backend_stops_waiting_with_it(play, http_backends):
    http_backends.answers = [Answer(delay_seconds=10)]
    started = time.monotonic()
    report = play([J42, draft("E1")], budget={"deadline_seconds": 1})
    assert (report["status"], dispatched(report)) == ("DEADLINE", [("read_job_status", "timeout")])
    assert operations_settle(1.0), "the backend went on waiting past the deadline"
    assert time.monotonic() - started < 3
    assert not Evidence.objects.filter(run_id=report["run"]).exists()


def test_a_reply_trickling_in_is_cut_at_the_time_left(http_backends, dana_session):
    http_backends.answers = [Answer(trickle_seconds=0.05)]  # about 15 s for the whole reply
    started = time.monotonic()
    with pytest.raises(ToolError, match="did not answer in time") as raised:
        TOOLS["read_job_status"].backend(SessionScope.of(dana_session), {"job_id": "J-42"}, Lookup(timeout=0.6))
    assert raised.value.transient
    assert time.monotonic() - started < 0.9


def test_a_reply_about_another_account_is_forbidden_and_never_evidence(play, http_backends):
    http_backends.scope_by_account = False  # an operator API that does not scope: J-77 is GLOBEX's
    report = play([J77, draft("E1")])
    assert (report["status"], report["detail"]) == ("INVALID_OR_FORBIDDEN", "forbidden")
    assert http_backends.received[0].headers["x-account"] == "ACME"
    assert not Evidence.objects.filter(run_id=report["run"]).exists()
    assert "J-77" not in stored_text(report).replace('"job_id": "J-77"', "")  # only the call's own arguments
    refused = ReviewPacket.objects.get(run_id=report["run"]).refused  # staff read what the model never does
    assert refused == {
        "tool": "read_job_status",
        "args": {"job_id": "J-77"},
        "id": None,
        "reason": "J-77 belongs to another account (GLOBEX).",
    }


def test_a_404_is_forbidden_as_a_missing_job_is_in_the_database(play, http_backends, settings):
    by_http = play([{"call": {"tool": "read_job_status", "args": {"job_id": "J-999"}}}, draft("E1")])
    settings.AGENT_JOB_STATUS_BACKEND = "database"
    by_table = play([{"call": {"tool": "read_job_status", "args": {"job_id": "J-999"}}}, draft("E1")])
    for report in (by_http, by_table):
        assert (report["status"], report["detail"]) == ("INVALID_OR_FORBIDDEN", "forbidden")
        assert report["packet"]["stop_note"] == "this session may not make this call"
    assert [r.path for r in http_backends.received] == ["/jobs/J-999"]
    reason = ReviewPacket.objects.get(run_id=by_http["run"]).refused["reason"]
    assert reason == "J-999 does not exist: the job status service answered 404."


def test_an_unverified_session_is_refused_before_any_request(play, http_backends):
    report = play([J42, draft("E1")], session="S-ACME-ANON")
    assert (report["status"], report["detail"], report["tool_attempts"]) == ("INVALID_OR_FORBIDDEN", "forbidden", 0)
    assert http_backends.received == []


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_credential_is_a_configuration_error_without_the_secret(play, http_backends, caplog, status):
    http_backends.answers = [Answer(status)]
    with caplog.at_level(logging.INFO):
        report = play([J42, DOCS, draft("E1")])
    assert report["status"] == "COMPLETED"
    assert dispatched(report)[0] == ("read_job_status", "error")  # not retried
    assert len(http_backends.received) == 1
    assert attempt_errors(report)[0] == (
        f"configuration error: the job status service refused our credentials (HTTP {status}); "
        "check AGENT_JOB_STATUS_AUTH_HEADER"
    )
    assert any(r.name == "agentrun" and r.levelno == logging.ERROR for r in caplog.records)
    assert "s3cret" not in caplog.text and "s3cret" not in stored_text(report)


J42_REPLY = {
    "job_id": "J-42",
    "account": "ACME",
    "kind": "csv_export",
    "status": "failed",
    "error_code": "EXPORT_ROLE_REQUIRED",
    "requested_by": "dana@acme.example",
    "requester_current_role": "viewer",
    "created_at": "2026-09-14T10:01:00Z",
    "finished_at": "2026-09-14T10:02:00Z",
    "sensitive": False,
}


@pytest.mark.parametrize(
    "body",
    [
        {"job_id": "J-42", "account": "ACME"},
        b"<html>oops</html>",
        {**J42_REPLY, "sensitive": "no"},
        {**J42_REPLY, "created_at": "2026-09-14T10:01:00"},  # no time zone
    ],
)
def test_a_reply_that_does_not_fit_the_schema_is_refused(play, http_backends, body):
    http_backends.answers = [Answer(200, body)]
    report = play([J42, DOCS, draft("E1")])
    assert dispatched(report)[0] == ("read_job_status", "error")
    assert len(http_backends.received) == 1
    assert attempt_errors(report)[0].startswith("the job status service sent a reply that does not fit its schema")


# --- a sensitive job: known only from the reply ------------------------------------------------------


def test_a_sensitive_job_waits_for_approval_and_its_first_reply_is_not_kept(play, http_backends):
    http_backends.jobs["J-42"]["sensitive"] = True
    waiting = play([J42, draft("E1")])
    assert waiting["status"] == "WAITING_APPROVAL"
    assert attempt_errors(waiting) == [
        "job J-42 is marked sensitive: the call needs a supervisor's approval; the reply was not kept"
    ]
    assert not Evidence.objects.filter(run_id=waiting["run"]).exists()


def test_a_granted_sensitive_job_is_read_again_and_kept(play, http_backends):
    http_backends.jobs["J-42"]["sensitive"] = True
    report = play([J42, draft("E1")], approval="grant")
    assert report["status"] == "COMPLETED"
    assert dispatched(report) == [("read_job_status", "error"), ("read_job_status", "ok")]
    assert len(http_backends.received) == 2


def test_a_denied_sensitive_job_is_never_kept(play, http_backends):
    http_backends.jobs["J-42"]["sensitive"] = True
    report = play([J42, draft("E1")], approval="deny")
    assert (report["status"], report["detail"]) == ("INVALID_OR_FORBIDDEN", "approval_denied")
    assert not Evidence.objects.filter(run_id=report["run"]).exists()


def test_a_sensitive_job_with_no_attempt_left_is_not_waited_for(play, http_backends):
    http_backends.jobs["J-42"]["sensitive"] = True
    report = play([J42, draft("E1")], budget={"max_tool_attempts": 1})
    assert report["status"] != "WAITING_APPROVAL"
    assert not Evidence.objects.filter(run_id=report["run"]).exists()


# --- configuration and the client ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"AGENT_JOB_STATUS_BACKEND": "http"}, "AGENT_JOB_STATUS_URL must be set when AGENT_JOB_STATUS_BACKEND=http"),
        (
            {"AGENT_SERVICE_STATUS_BACKEND": "http"},
            "AGENT_SERVICE_STATUS_URL must be set when AGENT_SERVICE_STATUS_BACKEND=http",
        ),
        (
            {"AGENT_JOB_STATUS_BACKEND": "http", "AGENT_JOB_STATUS_URL": "http://ops.example/jobs"},
            "AGENT_JOB_STATUS_URL must contain {job_id}",
        ),
        (
            {"AGENT_SERVICE_STATUS_BACKEND": "http", "AGENT_SERVICE_STATUS_URL": "ops.example/summary.json"},
            "AGENT_SERVICE_STATUS_URL must be an absolute http:// or https:// URL",
        ),
    ],
)
def test_an_http_backend_without_a_usable_url_stops_the_process(env, message):
    done = manage_check(**env)
    assert done.returncode != 0 and message in done.stderr


def test_a_malformed_auth_header_stops_the_process_without_showing_it():
    done = manage_check(AGENT_JOB_STATUS_AUTH_HEADER="Bearer s3cret-without-a-name")
    assert done.returncode != 0 and "AGENT_JOB_STATUS_AUTH_HEADER must look like" in done.stderr
    assert "s3cret" not in done.stderr


def test_one_client_serves_every_thread_of_a_process():
    import threading

    seen = []
    threads = [threading.Thread(target=lambda: seen.append(http_client())) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(client) for client in seen + [http_client()]}) == 1
