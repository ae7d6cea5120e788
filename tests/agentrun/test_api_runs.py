"""GET /api/runs, GET /api/runs/{id}, POST /api/runs/{id}/cancel, POST /api/runs/{id}/approval."""

import json

import pytest
from django.db import connection

from engine.models import Approval, Run
from tests.support.staff import bearer, make_runs, make_user
from tickets.models import Job


def _error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert body["code"] == code and body["message"]
    return body


def _state() -> list:
    return list(Run.objects.order_by("pk").values_list("pk", "status", "detail", "version"))


def test_list_is_paginated_newest_first(client, staff_user, demo):
    runs = make_runs(25)  # runs[0] is the newest
    body = client.get("/api/runs?limit=10&offset=20", **bearer(staff_user)).json()
    assert body["count"] == 25 and body["limit"] == 10 and body["offset"] == 20
    assert body["count_estimated"] is False
    assert [r["id"] for r in body["items"]] == [r.pk for r in runs[20:25]]
    first = client.get("/api/runs", **bearer(staff_user)).json()
    assert len(first["items"]) == 20 and first["items"][0]["id"] == runs[0].pk


def test_a_count_past_the_exact_count_is_estimated_and_every_page_still_read(client, staff_user, demo, monkeypatch):
    import kit.adminkit

    monkeypatch.setattr(kit.adminkit, "EXACT_COUNT_UP_TO", 5)
    runs = make_runs(12)
    pages = [client.get(f"/api/runs?limit=5&offset={o}", **bearer(staff_user)).json() for o in (0, 5, 10)]
    assert [r["id"] for p in pages for r in p["items"]] == [r.pk for r in runs]
    postgres = connection.vendor == "postgresql"  # PostgreSQL's estimate; SQLite counts exactly
    assert all(p["count_estimated"] is postgres for p in pages)
    assert all(p["count"] >= 6 if postgres else p["count"] == 12 for p in pages)


def test_list_filters(client, staff_user, demo):
    make_runs(10)
    auth = bearer(staff_user)
    body = client.get("/api/runs?status=NO_PROGRESS", **auth).json()
    assert body["count"] == 2 and {r["status"] for r in body["items"]} == {"NO_PROGRESS"}
    assert client.get("/api/runs?detail=forbidden", **auth).json()["count"] == 2
    assert client.get("/api/runs?ticket=T-1001&model=rules", **auth).json()["count"] == 10
    assert client.get("/api/runs?model=other", **auth).json()["count"] == 0
    assert client.get("/api/runs?since=2999-01-01T00:00:00Z", **auth).json()["count"] == 0
    assert client.get("/api/runs?until=2999-01-01", **auth).json()["count"] == 10


@pytest.mark.parametrize(
    "query", ["status=DONE", "limit=0", "limit=101", "limit=ten", "offset=-1", "since=yesterday", "ticket=%00"]
)
def test_bad_list_parameters_are_422(client, staff_user, demo, query):
    _error(client.get(f"/api/runs?{query}", **bearer(staff_user)), 422, "invalid_input")


def test_run_detail_has_the_timeline_evidence_and_budget(client, staff_user, ticket_t1001):
    auth = bearer(staff_user)
    run_id = client.post("/api/tickets/T-1001/investigations", **auth).json()["id"]
    body = client.get(f"/api/runs/{run_id}", **auth).json()
    kinds = [s["kind"] for s in body["timeline"]]
    assert kinds == ["model_request", "tool_attempt", "model_request", "tool_attempt", "model_request"]
    assert body["timeline"][1]["what"].startswith("read_job_status") and body["timeline"][1]["evidence"] == "E1"
    assert body["timeline"][0]["reserved_tokens"] == 9000
    assert [(e["ref"], e["source_kind"], e["source"]) for e in body["evidence"]][0] == ("E1", "job", "J-42")
    assert body["evidence"][1]["source_kind"] == "document" and "DOC-EXPORT-7" in body["evidence"][1]["source"]
    assert body["budget_bars"][0] == {"label": "Model requests", "used": 3, "limit": 8, "percent": 38}
    assert body["stop_explanation"].startswith("The rule-based investigator returned a valid draft")


@pytest.mark.parametrize(
    "path,status,code",
    [
        ("/api/runs/999999", 404, "not_found"),
        ("/api/runs/0", 422, "invalid_input"),
        ("/api/runs/99999999999999999999", 422, "invalid_input"),
        ("/api/runs/abc", 422, "invalid_input"),
    ],
)
def test_bad_run_ids(client, staff_user, demo, path, status, code):
    _error(client.get(path, **bearer(staff_user)), status, code)


def test_reads_need_credentials_and_a_role(client, outsider, demo):
    run = make_runs(1)[0]
    _error(client.get("/api/runs"), 401, "unauthenticated")
    _error(client.get(f"/api/runs/{run.pk}", **bearer(outsider)), 403, "forbidden")
    _error(client.get("/api/runs", **bearer(outsider)), 403, "forbidden")


def test_supervisor_cancels_a_queued_run(client, supervisor_user, demo):
    run = make_runs(1, endings=[("QUEUED", "")])[0]
    response = client.post(f"/api/runs/{run.pk}/cancel", **bearer(supervisor_user))
    assert response.status_code == 200 and response.json()["status"] == "CANCELLED"
    assert response.json()["packet_id"] is not None
    _error(client.post(f"/api/runs/{run.pk}/cancel", **bearer(supervisor_user)), 409, "run_ended")


def test_staff_may_not_cancel(client, staff_user, demo):
    run = make_runs(1, endings=[("QUEUED", "")])[0]
    before = _state()
    body = _error(client.post(f"/api/runs/{run.pk}/cancel", **bearer(staff_user)), 403, "forbidden")
    assert "Supervisors" in body["message"] and _state() == before


def test_staff_cancel_through_the_api_the_run_they_started_only(client, staff_user, ticket_t1001):
    Job.objects.filter(ref="J-42").update(sensitive=True)
    run_id = client.post("/api/tickets/T-1001/investigations", **bearer(staff_user)).json()["id"]
    assert Run.objects.get(pk=run_id).status == "WAITING_APPROVAL"
    other = make_user("stella", "Support staff")
    body = _error(client.post(f"/api/runs/{run_id}/cancel", **bearer(other)), 403, "forbidden")
    assert "others started" in body["message"] and Run.objects.get(pk=run_id).status == "WAITING_APPROVAL"
    response = client.post(f"/api/runs/{run_id}/cancel", **bearer(staff_user))
    assert response.status_code == 200 and response.json()["status"] == "CANCELLED"


def test_cancel_unknown_run_is_404(client, supervisor_user, demo):
    _error(client.post("/api/runs/424242/cancel", **bearer(supervisor_user)), 404, "not_found")


@pytest.fixture
def waiting_run(client, supervisor_user, ticket_t1001) -> int:
    Job.objects.filter(ref="J-42").update(sensitive=True)
    body = client.post("/api/tickets/T-1001/investigations", **bearer(supervisor_user)).json()
    assert body["status"] == "WAITING_APPROVAL"
    return body["id"]


def test_approval_grant_resumes_the_run(client, supervisor_user, waiting_run):
    detail = client.get(f"/api/runs/{waiting_run}", **bearer(supervisor_user)).json()
    assert detail["pending_call"]["tool"] == "read_job_status" and detail["pending_call"]["args"] == {"job_id": "J-42"}
    response = client.post(
        f"/api/runs/{waiting_run}/approval",
        {"decision": "grant"},
        content_type="application/json",
        **bearer(supervisor_user),
    )
    assert response.status_code == 200 and response.json()["status"] == "COMPLETED"
    assert Approval.objects.get(run_id=waiting_run).state == "used"
    again = client.post(
        f"/api/runs/{waiting_run}/approval",
        {"decision": "grant"},
        content_type="application/json",
        **bearer(supervisor_user),
    )
    _error(again, 409, "not_waiting")


def test_approval_deny_ends_the_run(client, supervisor_user, waiting_run):
    body = client.post(
        f"/api/runs/{waiting_run}/approval",
        {"decision": "deny"},
        content_type="application/json",
        **bearer(supervisor_user),
    ).json()
    assert (body["status"], body["detail"]) == ("INVALID_OR_FORBIDDEN", "approval_denied")


def test_staff_may_not_answer_approvals(client, staff_user, waiting_run):
    before = _state()
    _error(
        client.post(
            f"/api/runs/{waiting_run}/approval",
            {"decision": "grant"},
            content_type="application/json",
            **bearer(staff_user),
        ),
        403,
        "forbidden",
    )
    assert _state() == before and Approval.objects.get().state == "pending"


@pytest.mark.parametrize(
    "body,status,code",
    [
        ('{"decision": "maybe"}', 422, "invalid_input"),
        ('{"decision": 1}', 422, "invalid_input"),
        ('{"decision": "grant", "extra": true}', 422, "invalid_input"),
        ("{}", 422, "invalid_input"),
        ('{"decision": "grant"', 400, "malformed_json"),
        ("[1, 2]", 422, "invalid_input"),
        ("\xff\xfe", 400, "malformed_json"),
    ],
)
def test_bad_approval_bodies_change_nothing(client, supervisor_user, waiting_run, body, status, code):
    before = _state()
    _error(
        client.post(
            f"/api/runs/{waiting_run}/approval", body, content_type="application/json", **bearer(supervisor_user)
        ),
        status,
        code,
    )
    assert _state() == before and Approval.objects.get().state == "pending"


def test_a_huge_approval_body_is_413(client, supervisor_user, demo):
    run = make_runs(1)[0]
    body = json.dumps({"decision": "grant", "pad": "x" * 100_000})
    _error(
        client.post(f"/api/runs/{run.pk}/approval", body, content_type="application/json", **bearer(supervisor_user)),
        413,
        "body_too_large",
    )


@pytest.mark.parametrize(
    "query",
    ["since=1969-09-11T09:15:45.92%2B21:11", "until=0001-01-01T00:00:00%2B01:00", "since=9999-12-31T23:59:59-23:00"],
)
def test_extreme_times_are_refused_not_a_server_error(client, staff_user, demo, query):
    _error(client.get(f"/api/runs?{query}", **bearer(staff_user)), 422, "invalid_input")


@pytest.mark.parametrize(
    "query",
    [
        "since=1970-01-01T00:00:00%2B23:59",
        "until=9998-12-31T23:59:59-23:59",
        "since=9998-12-31T23:59:59.999999-23:59&until=1970-01-01",
    ],
)
def test_times_at_the_edges_of_the_accepted_years_are_answered(client, staff_user, demo, query):
    response = client.get(f"/api/runs?{query}", **bearer(staff_user))
    assert response.status_code == 200 and response.json()["count"] >= 0


def test_times_with_offsets_compare_in_utc(client, staff_user, demo):
    make_runs(1)
    auth = bearer(staff_user)
    assert client.get("/api/runs?since=2000-01-01T05:00:00%2B05:00", **auth).json()["count"] == 1
    # found by the fuzz: an offset PostgreSQL cannot store is converted to UTC first
    assert client.get("/api/runs?since=4255-09-11T09:15:45.92%2B21:11", **auth).json()["count"] == 0


def test_an_approval_after_the_deadline_is_refused_as_expired(client, supervisor_user, waiting_run):
    from datetime import timedelta

    from django.utils import timezone

    Run.objects.filter(pk=waiting_run).update(deadline_at=timezone.now() - timedelta(seconds=1))  # time has run out
    response = client.post(
        f"/api/runs/{waiting_run}/approval",
        {"decision": "grant"},
        content_type="application/json",
        **bearer(supervisor_user),
    )
    _error(response, 409, "approval_expired")
    run = Run.objects.get(pk=waiting_run)  # the answer is not recorded; the run ends at its deadline
    assert run.tool_attempts == 0 and run.status == "DEADLINE"
    assert Approval.objects.get(run=run).state == "expired" and Approval.objects.get(run=run).decided_by == ""
