"""staff.pages.staff_page: a Refused raised by an admin view becomes the page's answer."""

import pytest
from django.contrib.messages import get_messages
from django.contrib.messages.storage.fallback import FallbackStorage
from django.contrib.sessions.backends.db import SessionStore
from django.http import HttpResponse
from django.test import RequestFactory
from django.urls import reverse

from staff.access import Refused
from staff.pages import staff_page
from tests.support.staff import client_for, make_user

pytestmark = pytest.mark.django_db


def _request(user):
    request = RequestFactory().post("/anywhere/")
    request.user, request.session = user, SessionStore()
    request._messages = FallbackStorage(request)
    return request


def _refuses(request, **kwargs):
    raise Refused("not_possible", "The run has already ended.", 409)


def test_a_refusal_from_the_view_is_the_refusal_page_titled_by_its_status(roles):
    response = staff_page(_refuses)(_request(make_user("ann", None)))
    response.render()
    assert response.status_code == 409 and response.context_data["title"] == "Not possible now"
    assert "The run has already ended." in response.content.decode()


def test_a_button_refused_says_why_on_the_page_it_came_from(roles):
    request = _request(make_user("ann", None))
    response = staff_page(back_to=lambda run_id: f"/runs/{run_id}/")(_refuses)(request, run_id=7)
    assert response.status_code == 302 and response["Location"] == "/runs/7/"
    assert [str(m) for m in get_messages(request)] == ["The run has already ended."]


def test_required_permissions_are_checked_before_the_view_runs(roles):
    ran = []

    @staff_page(requires="agentrun.view_dashboard", back_to=lambda: "/")
    def view(request):
        ran.append(request)
        return HttpResponse("ok")

    response = view(_request(make_user("ann", None)))
    assert response.status_code == 403 and ran == []  # the refusal page, not the button's redirect
    assert view(_request(make_user("sue", "Supervisors"))).content == b"ok"


def test_starting_an_investigation_answers_a_get_before_it_checks_permission(roles, ticket_t1001):
    client = client_for(make_user("ann", None))
    assert client.get(reverse("admin:tickets_ticket_investigate", args=[ticket_t1001.pk])).status_code == 405
    assert client.post(reverse("admin:tickets_ticket_investigate", args=[ticket_t1001.pk])).status_code == 403
