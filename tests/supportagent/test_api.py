"""Every answer under /api/ is JSON with the status that fits, as a client that enforces CSRF sees it."""

import pytest
from django.test import Client

from engine.models import Run
from tests.support.staff import bearer

PATHS = [
    "/api/",
    "/api/nothing",
    "/api/runs",
    "/api/runs/1",
    "/api/runs/abc",
    "/api/runs/1/cancel",
    "/api/tickets/T-1001/investigations",
    "/api/tickets/T-404/investigations",
    "/api/packets/1",
    "/api/packets/1/review",
    "/api/runs/1/approval",
    "/api/tickets/T-1001/investigations/",
]
METHODS = ["get", "post", "put", "patch", "delete"]


def _csrf_client() -> Client:
    return Client(enforce_csrf_checks=True)  # the test client skips CSRF unless told: browsers and scripts do not


def _is_json_error(response, status: int, code: str) -> bool:
    return (
        response.status_code == status
        and response["Content-Type"].startswith("application/json")
        and response.json()["code"] == code
    )


def test_a_post_to_no_route_with_a_valid_token_is_a_json_404(staff_user, demo):
    response = _csrf_client().post("/api/nothing", **bearer(staff_user))
    assert _is_json_error(response, 404, "not_found"), response.content


@pytest.mark.parametrize(
    "auth", [{}, {"HTTP_AUTHORIZATION": "Bearer sat_not-a-token"}, {"HTTP_AUTHORIZATION": "Basic c3RhZmY6cGFzcw=="}]
)
def test_a_write_without_a_valid_token_is_a_json_401(demo, auth):
    response = _csrf_client().post("/api/tickets/T-1001/investigations", **auth)
    assert _is_json_error(response, 401, "unauthenticated"), response.content
    assert Run.objects.count() == 0


def test_a_logged_in_session_without_the_csrf_token_is_a_json_403(staff_user, demo):
    client = _csrf_client()
    client.force_login(staff_user)
    response = client.post("/api/tickets/T-1001/investigations")
    assert _is_json_error(response, 403, "forbidden") and "CSRF" in response.json()["message"]
    assert Run.objects.count() == 0


@pytest.mark.parametrize("method", METHODS)
def test_every_method_on_every_path_answers_json_never_html_or_500(staff_user, demo, method):
    for auth in ({}, {"HTTP_AUTHORIZATION": "Bearer sat_bad"}, bearer(staff_user)):
        for path in PATHS:
            response = getattr(_csrf_client(), method)(path, **auth)
            where = f"{method.upper()} {path} {sorted(auth)}"
            assert response["Content-Type"].startswith("application/json"), (where, response.content[:200])
            assert response.status_code < 500, where
            if response.status_code >= 400:
                assert response.json()["code"] and response.json()["message"], where
