"""A property-based fuzz of the API from its own OpenAPI schema (schemathesis).

Every operation, valid and invalid input alike: no 5xx, responses match the schema,
and a refused request (any 4xx) writes nothing.
"""

import pytest
import schemathesis
from django.contrib.auth.models import Permission
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from engine.models import ApiToken, Approval, PacketReview, ReviewPacket, Run, RunRequest
from tests.support.staff import bearer, make_runs
from tickets.models import Document, DocumentRevision

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


schema = schemathesis.openapi.from_wsgi("/api/openapi.json", get_wsgi_application())


@pytest.fixture
def wsgi_keeps_the_test_connection():
    """Like Django's test client: the WSGI handler must not close the connection holding the test's transaction."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def some_runs(demo, wsgi_keeps_the_test_connection):
    """A queued, a completed and a waiting run (ids 1-3 on a fresh database) for the fuzz to find."""
    return make_runs(3, endings=[("QUEUED", ""), ("COMPLETED", ""), ("WAITING_APPROVAL", "")])


def _snapshot() -> tuple:
    """Everything a request could write."""
    return (
        list(Run.objects.order_by("pk").values_list("pk", "status", "detail", "version", "cancel_requested")),
        list(ReviewPacket.objects.order_by("pk").values_list("pk", "review_state")),
        PacketReview.objects.count(),
        RunRequest.objects.count(),
        ApiToken.objects.count(),
        list(Approval.objects.order_by("pk").values_list("pk", "state")),
        list(Document.objects.order_by("pk").values_list("pk", "title", "public", "origin")),
        list(DocumentRevision.objects.order_by("pk").values_list("pk", "is_current")),
    )


@schema.parametrize()
@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_api_never_fails_and_refusals_write_nothing(case, supervisor_user, some_runs):
    # and may publish documents, so that valid documents are written too
    supervisor_user.user_permissions.add(*Permission.objects.filter(codename__in=["add_document", "change_document"]))
    auth = bearer(supervisor_user)["HTTP_AUTHORIZATION"]
    before = _snapshot()
    response = case.call(headers={"Authorization": auth})
    case.validate_response(response, checks=CHECKS)
    if 400 <= response.status_code < 500:
        assert _snapshot() == before, f"{case.method} {case.formatted_path} answered {response.status_code} but wrote"
        assert {"code", "message"} <= set(response.json())
