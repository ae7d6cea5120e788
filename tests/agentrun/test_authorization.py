"""An ACME session can never read GLOBEX data: not through the policy, not by calling a backend (CONFORMANCE §4)."""

from __future__ import annotations

import dataclasses

import pytest

from engine.models import Run
from engine.services import RunError, run_start
from tickets.models import Document, DocumentRevision, Evidence, Ticket
from tickets.selectors import Forbidden, SessionScope
from tools.dispatch import Dispatcher
from tools.registry import TOOLS

pytestmark = pytest.mark.usefixtures("settle")


def scope(session) -> SessionScope:
    return SessionScope.of(session)


def job(job_id):
    return {"job_id": job_id}


# --- the policy -----------------------------------------------------------------------------


def test_a_verified_session_may_read_its_own_accounts_jobs(dana_session, globex_session):
    allowed = TOOLS["read_job_status"].policy
    assert allowed(scope(dana_session), job("J-42")) and allowed(scope(dana_session), job("J-41"))
    assert allowed(scope(globex_session), job("J-77"))


@pytest.mark.parametrize(
    "session_fixture, job_id",
    [
        ("dana_session", "J-77"),  # another account's job
        ("globex_session", "J-42"),
        ("globex_session", "J-41"),
        ("dana_session", "J-999999"),  # no such job
        ("dana_session", "J-0"),
        ("anon_session", "J-42"),  # not verified, own account
        ("anon_session", "J-77"),
    ],
)
def test_the_policy_refuses_other_accounts_missing_jobs_and_unverified_sessions(request, session_fixture, job_id):
    session = request.getfixturevalue(session_fixture)
    assert TOOLS["read_job_status"].policy(scope(session), job(job_id)) is False


@pytest.mark.parametrize(
    "tool, args",
    [("search_docs", {"query": "export", "max_results": 3}), ("read_service_status", {"service": "billing"})],
)
def test_docs_and_service_status_are_open_to_every_session(anon_session, dana_session, globex_session, tool, args):
    for session in (anon_session, dana_session, globex_session):
        assert TOOLS[tool].policy(scope(session), args) is True


# --- the backend, called directly (defence in depth) ---------------------------------------------------


@pytest.mark.parametrize("job_id", ["J-77", "J-999999"])
def test_the_job_backend_refuses_another_accounts_job_even_without_the_policy(dana_session, job_id):
    with pytest.raises(Forbidden):
        TOOLS["read_job_status"].backend(scope(dana_session), job(job_id))


def test_the_job_backend_refuses_an_unverified_session(anon_session):
    with pytest.raises(Forbidden):
        TOOLS["read_job_status"].backend(scope(anon_session), job("J-42"))


def test_the_job_backend_refuses_a_forged_scope_naming_another_account_unverified(dana_session, globex_session):
    forged = SessionScope("S-FORGED", globex_session.account_id, verified=False)
    with pytest.raises(Forbidden):
        TOOLS["read_job_status"].backend(forged, job("J-77"))


def test_the_dispatcher_cannot_reach_another_accounts_job(dana_session):
    with pytest.raises(Forbidden):
        Dispatcher().dispatch("read_job_status", scope(dana_session), job("J-77"), 0)


def test_another_accounts_job_and_a_missing_job_are_refused_alike(dana_session):
    messages = set()
    for job_id in ("J-77", "J-424242"):
        with pytest.raises(Forbidden) as err:
            TOOLS["read_job_status"].backend(scope(dana_session), job(job_id))
        messages.add(str(err.value))
    assert len(messages) == 1  # the model is never told whether a job exists


def test_the_job_backend_returns_only_the_sessions_own_job(dana_session):
    result = TOOLS["read_job_status"].backend(scope(dana_session), job("J-42"))
    assert result.content["job_id"] == "J-42" and result.content["requested_by"] == "dana@acme.example"
    assert result.content["requester_current_role"] == "viewer"
    assert result.content["error_code"] == "EXPORT_ROLE_REQUIRED"
    assert result.content["failed_at"] == "2026-09-14T10:02:00Z"


def test_search_never_returns_a_private_document(anon_session):
    private = Document.objects.create(code="DOC-INTERNAL-1", title="Export internals", public=False)
    DocumentRevision.objects.create(
        document=private, number=1, is_current=True, body="export export export", published_at="2026-01-01T00:00:00Z"
    )
    result = TOOLS["search_docs"].backend(scope(anon_session), {"query": "export", "max_results": 5})
    assert result.content["results"]
    assert "DOC-INTERNAL-1" not in {r["id"] for r in result.content["results"]}


# --- through the loop -------------------------------------------------------------------------------


J77 = {"call": {"tool": "read_job_status", "args": {"job_id": "J-77"}}}


def test_an_acme_run_asking_for_a_globex_job_is_forbidden_and_learns_nothing(play):
    report = play([J77, {"draft": {"summary": "s", "evidence": ["E1"], "open_questions": []}}])
    assert (report["status"], report["detail"]) == ("INVALID_OR_FORBIDDEN", "forbidden")
    assert (report["dispatched"], report["evidence"]) == ([], [])


def test_missing_and_foreign_jobs_end_the_run_alike(play):
    foreign = play([J77])
    missing = play([{"call": {"tool": "read_job_status", "args": {"job_id": "J-123456789"}}}])
    keys = ("status", "detail")
    assert [foreign[k] for k in keys] == [missing[k] for k in keys] == ["INVALID_OR_FORBIDDEN", "forbidden"]
    assert foreign["packet"]["stop_note"] == missing["packet"]["stop_note"]


def test_an_unverified_session_cannot_read_jobs(play):
    report = play([{"call": {"tool": "read_job_status", "args": {"job_id": "J-42"}}}], session="S-ACME-ANON")
    assert (report["status"], report["detail"], report["dispatched"]) == ("INVALID_OR_FORBIDDEN", "forbidden", [])


def test_an_unverified_session_can_search_docs_and_read_service_status(play):
    report = play(
        [
            {"call": {"tool": "search_docs", "args": {"query": "export role"}}},
            {"call": {"tool": "read_service_status", "args": {"service": "EXPORT"}}},
            {"draft": {"summary": "s", "evidence": ["E1", "E2"], "open_questions": []}},
        ],
        session="S-ACME-ANON",
    )
    assert report["status"] == "COMPLETED"
    assert [d["outcome"] for d in report["dispatched"]] == ["ok", "ok"]


def test_a_session_of_another_account_cannot_run_on_the_ticket(dana_session, globex_session):
    ticket = Ticket.objects.get(ref="T-1001")
    with pytest.raises(RunError):
        run_start(ticket=ticket, session=globex_session, model_name="replay")
    assert not Run.objects.exists()


def test_even_a_wrong_policy_cannot_leak_another_accounts_job(play, monkeypatch):
    permissive = dataclasses.replace(TOOLS["read_job_status"], policy=lambda scope, args: True)
    monkeypatch.setitem(TOOLS, "read_job_status", permissive)
    report = play([J77, {"handoff": "h"}])
    assert [d["outcome"] for d in report["dispatched"]] == ["error"]  # the backend refused it
    assert report["evidence"] == []
    run = Run.objects.get(pk=report["run"])
    assert not Evidence.objects.filter(ticket=run.ticket).exists()
    leaked = str(report) + "".join(run.observations.values_list("text", flat=True))
    assert "globex" not in leaked.casefold() and "hank" not in leaked


def test_policy_and_backend_agree_for_every_session_and_job(demo_committed):
    from tickets.models import CustomerSession, Job

    tool = TOOLS["read_job_status"]
    for session in CustomerSession.objects.all():
        for found in Job.objects.all():
            may = session.verified and session.account_id == found.account_id
            assert tool.policy(scope(session), job(found.ref)) is may, (session.ref, found.ref)
            if may:
                assert tool.backend(scope(session), job(found.ref)).content["job_id"] == found.ref
            else:
                with pytest.raises(Forbidden):
                    tool.backend(scope(session), job(found.ref))
