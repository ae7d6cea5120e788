"""Passwords staff choose pass Django's four validators: not like the username, at least 12 characters,
not a common password, not all digits (settings.AUTH_PASSWORD_VALIDATORS)."""

import pytest
from django.urls import reverse

from tests.support.staff import PASSWORD, client_for


def _change(client, new: str):
    return client.post(
        reverse("admin:password_change"), {"old_password": PASSWORD, "new_password1": new, "new_password2": new}
    )


@pytest.mark.parametrize(
    "weak,reason",
    [
        ("password1", "too short"),
        ("12345678", "too short"),
        ("staffstaff", "too short"),
        ("qwerty123456", "too common"),
        ("834950217743", "entirely numeric"),
        ("harbourmaster1", "too similar"),
    ],
)
def test_password_change_refuses_a_weak_password(staff_user, weak, reason):
    staff_user.email = "harbourmaster@example.com"
    staff_user.save()
    response = _change(client_for(staff_user), weak)
    assert response.status_code == 200 and reason in response.content.decode()
    staff_user.refresh_from_db()
    assert staff_user.check_password(PASSWORD)


def test_password_change_takes_a_strong_password(staff_user):
    response = _change(client_for(staff_user), "quiet-harbour-lamp-7")
    assert response.status_code == 302
    staff_user.refresh_from_db()
    assert staff_user.check_password("quiet-harbour-lamp-7")
