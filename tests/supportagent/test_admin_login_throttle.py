"""Admin logins are throttled (django-axes): after 5 failures from one address a user's login is refused, the right
password included, with a clear 429 page, until the cool-off has passed. API tokens are not passwords: unaffected."""

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from tests.support.commands import manage_check
from tests.support.staff import PASSWORD, bearer

LOGIN = "/admin/login/?next=/admin/"


def _login(client: Client, username: str, password: str, address: str = "127.0.0.1"):
    return client.post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=address)


def _fail(client: Client, times: int, username: str = "staff", address: str = "127.0.0.1") -> None:
    for _ in range(times):
        response = _login(client, username, "wrong-password", address)
        assert response.status_code in (200, 429)


def test_the_defaults_are_5_failures_and_15_minutes():
    assert settings.AXES_FAILURE_LIMIT == 5 and settings.AXES_COOLOFF_TIME == timedelta(minutes=15)
    assert settings.AXES_LOCKOUT_PARAMETERS == [["username", "ip_address"]]


def test_the_right_password_logs_in_after_fewer_failures(staff_user):
    client = Client()
    _fail(client, 4)
    response = _login(client, "staff", PASSWORD)
    assert (response.status_code, response["Location"]) == (302, "/admin/")
    assert client.get(reverse("admin:index")).status_code == 200


def test_after_5_failures_the_6th_attempt_is_refused_even_with_the_right_password(staff_user):
    client = Client()
    _fail(client, 5)
    response = _login(client, "staff", PASSWORD)
    page = response.content.decode()
    assert response.status_code == 429
    assert "Login refused: too many failed attempts" in page
    assert "After 5 failed logins as staff from this address" in page
    assert "logins are refused for 15 minutes, even with the right password" in page
    assert "manage.py" not in page and "0:15:00" not in page
    assert "_auth_user_id" not in client.session
    assert client.get(reverse("admin:index"))["Location"].startswith("/admin/login/")


def test_the_lock_is_for_that_user_from_that_address_only(staff_user, supervisor_user):
    _fail(Client(), 5)
    assert _login(Client(), "staff", PASSWORD, address="10.0.0.2").status_code == 302
    assert _login(Client(), "supervisor", PASSWORD).status_code == 302


def test_the_lock_ends_after_the_cool_off(staff_user):
    _fail(Client(), 5)
    assert _login(Client(), "staff", PASSWORD).status_code == 429
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))
    assert _login(Client(), "staff", PASSWORD).status_code == 302


def test_api_tokens_still_work_for_a_locked_out_user(staff_user, demo):
    _fail(Client(), 6)
    response = Client().get("/api/runs", REMOTE_ADDR="127.0.0.1", **bearer(staff_user))
    assert response.status_code == 200


@pytest.mark.parametrize(
    "name,value",
    [("ADMIN_LOGIN_FAILURE_LIMIT", "0"), ("ADMIN_LOGIN_COOLOFF_MINUTES", "soon"), ("ADMIN_LOGIN_LOCKOUT_BY", "nobody")],
)
def test_bad_throttle_settings_stop_the_process(name, value):
    done = manage_check(**{name: value})
    assert done.returncode != 0 and "ImproperlyConfigured" in done.stderr and name in done.stderr


def test_throttle_settings_from_the_environment():
    assert (
        manage_check(
            ADMIN_LOGIN_FAILURE_LIMIT="3", ADMIN_LOGIN_COOLOFF_MINUTES="60", ADMIN_LOGIN_LOCKOUT_BY="user_or_address"
        ).returncode
        == 0
    )


def test_the_login_says_how_many_tries_are_left_from_the_third_failure_on(staff_user):
    client = Client()
    pages = [_login(client, "staff", "wrong-password").content.decode() for _ in range(4)]
    assert ['id="tries-left"' in page for page in pages] == [False, False, True, True]
    assert (
        "2 tries left: after 2 more failed logins as staff from this address, logins are refused for 15 minutes"
        in " ".join(pages[2].split())
    )
    assert "1 try left: after 1 more failed login as staff" in " ".join(pages[3].split())
    assert _login(client, "staff", "wrong-password").status_code == 429


def test_the_count_is_per_user_and_address(staff_user):
    _fail(Client(), 3)
    page = _login(Client(), "staff", "wrong-password", address="10.0.0.2").content.decode()
    assert 'id="tries-left"' not in page


def test_a_supervisor_unlocks_a_login_in_the_admin(staff_user, supervisor_user):
    _fail(Client(), 5)
    assert _login(Client(), "staff", PASSWORD).status_code == 429
    supervisor = Client()
    supervisor.force_login(supervisor_user)
    listed = supervisor.get(reverse("admin:axes_accessattempt_changelist")).content.decode()
    assert "staff" in listed
    attempt = AccessAttempt.objects.get(username="staff")
    confirm = reverse("admin:axes_accessattempt_delete", args=[attempt.pk])
    assert supervisor.post(confirm, {"post": "yes"}).status_code == 302
    assert _login(Client(), "staff", PASSWORD).status_code == 302


def test_support_staff_cannot_unlock_logins(staff_user, supervisor_user):
    _fail(Client(), 5, username="supervisor")
    staff = Client()
    staff.force_login(staff_user)
    assert staff.get(reverse("admin:axes_accessattempt_changelist")).status_code == 403
