"""POST /api/tickets/{ref}/investigations: 202 with the run, Idempotency-Key, refusals that write nothing."""

import pytest

from engine.models import Run, RunRequest
from tests.support.staff import bearer, make_runs
from tickets.models import Ticket

URL = "/api/tickets/T-1001/investigations"


def _error(response, status: int, code: str) -> None:
    assert response.status_code == status, response.content
    body = response.json()
    assert body["code"] == code and body["message"]


def test_start_returns_202_with_the_run_which_completes_inline(client, staff_user, ticket_t1001):
    response = client.post(URL, **bearer(staff_user))
    assert response.status_code == 202
    body = response.json()
    run = Run.objects.get()
    assert body["id"] == run.pk and body["ticket"] == "T-1001"
    assert body["status"] == "COMPLETED" and body["packet_id"] == run.packet.pk
    assert body["requested_by"] == "staff" and body["budget"]["max_model_requests"] == 8


def test_a_retry_with_the_same_idempotency_key_returns_the_same_run(client, staff_user, demo):
    headers = {**bearer(staff_user), "HTTP_IDEMPOTENCY_KEY": "retry-1"}
    first = client.post(URL, **headers)
    second = client.post(URL, **headers)
    assert first.status_code == second.status_code == 202
    assert first.json()["id"] == second.json()["id"]
    assert Run.objects.count() == 1 and RunRequest.objects.get().idempotency_key == "retry-1"


def test_an_idempotency_key_is_per_user(client, staff_user, supervisor_user, demo):
    client.post(URL, **bearer(staff_user), HTTP_IDEMPOTENCY_KEY="same")
    Run.objects.update(status="COMPLETED")  # let a second run start on the ticket
    other = client.post(URL, **bearer(supervisor_user), HTTP_IDEMPOTENCY_KEY="same")
    assert other.status_code == 202 and Run.objects.count() == 2


def test_reusing_a_key_for_another_ticket_is_a_conflict(client, staff_user, demo):
    t1001 = Ticket.objects.get(ref="T-1001")
    Ticket.objects.create(ref="T-2002", account=t1001.account, session=t1001.session, subject="s", body="b")
    headers = {**bearer(staff_user), "HTTP_IDEMPOTENCY_KEY": "k-9"}
    client.post(URL, **headers)
    _error(client.post("/api/tickets/T-2002/investigations", **headers), 409, "idempotency_key_reused")
    assert Run.objects.count() == 1


def test_a_second_start_while_a_run_is_active_is_a_conflict(client, staff_user, demo):
    make_runs(1, endings=[("RUNNING", "")])
    _error(client.post(URL, **bearer(staff_user)), 409, "run_active")
    assert Run.objects.count() == 1


@pytest.mark.parametrize("key", ["x" * 201, "has space", "ünïcode"])
def test_bad_idempotency_keys_are_refused(client, staff_user, demo, key):
    _error(client.post(URL, **bearer(staff_user), HTTP_IDEMPOTENCY_KEY=key), 422, "invalid_input")
    assert Run.objects.count() == 0


def test_unknown_ticket_is_404_and_writes_nothing(client, staff_user, demo):
    _error(client.post("/api/tickets/T-9999/investigations", **bearer(staff_user)), 404, "not_found")
    assert Run.objects.count() == 0


@pytest.mark.parametrize("ref", ["T%201001", "-T", "x" * 40])
def test_malformed_ticket_refs_are_422(client, staff_user, demo, ref):
    _error(client.post(f"/api/tickets/{ref}/investigations", **bearer(staff_user)), 422, "invalid_input")
    assert Run.objects.count() == 0


def test_no_credentials_is_401_and_a_bad_token_too(client, demo):
    _error(client.post(URL), 401, "unauthenticated")
    _error(client.post(URL, HTTP_AUTHORIZATION="Bearer sat_not-a-token"), 401, "unauthenticated")
    assert Run.objects.count() == 0


def test_a_user_without_a_role_is_403(client, outsider, demo):
    _error(client.post(URL, **bearer(outsider)), 403, "forbidden")
    assert Run.objects.count() == 0


def test_a_huge_body_is_413_and_writes_nothing(client, staff_user, demo):
    response = client.post(URL, data="x" * 200_000, content_type="application/json", **bearer(staff_user))
    _error(response, 413, "body_too_large")
    assert Run.objects.count() == 0


def test_session_auth_needs_the_csrf_token(staff_user, demo):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(staff_user)
    response = client.post(URL)
    assert response.status_code == 403 and response.json()["code"] == "forbidden"
    assert Run.objects.count() == 0
    assert client.get("/api/runs").status_code == 200  # reads need no token


def test_the_api_root_says_where_the_docs_and_the_operations_are(client, demo):
    response = client.get("/api/")  # no token needed: it says only what the documentation says
    assert response.status_code == 200
    index = response.json()
    assert (index["docs"], index["openapi"]) == ("/api/docs", "/api/openapi.json")
    assert client.get(index["openapi"]).status_code == 200
    assert "POST /api/tickets/{ref}/investigations" in index["operations"]
    assert "GET /api/runs/{run_id}" in index["operations"]
    refused = client.post("/api/")
    assert refused.status_code == 405 and refused.json()["code"] == "method_not_allowed"
    assert refused["Allow"] == "GET"
    assert Run.objects.count() == 0


@pytest.mark.parametrize("path", ["/api/nothing", "/api/runs/", "/api/tickets/T-1001/investigations/"])
def test_a_path_the_api_does_not_have_is_a_json_404(client, staff_user, demo, path):
    _error(client.post(path, **bearer(staff_user)), 404, "not_found")
    _error(client.get(path, **bearer(staff_user)), 404, "not_found")
    assert Run.objects.count() == 0
