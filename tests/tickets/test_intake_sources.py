"""Sessions belong to their help desk, and an integration's token to one: both intake points through a real
HTTP server. What either refuses after the sender is proved waits in the intake problems list, and nothing
else is written.
"""

import importlib
import json
import urllib.error
import urllib.request

import pytest
from django.apps import apps as django_apps

from engine.models import ApiToken
from engine.roles import integration_user_setup
from staff.auth import token_create
from tests.tickets.test_zendesk import SECRET, _signed
from tests.tickets.test_zendesk import _send as _send_zendesk
from tickets.models import CustomerSession, IntakeProblem, Ticket

PAYLOAD = {
    "source": "zendesk",
    "external_id": "48213",
    "subject": "CSV export fails",
    "body": "Since the rename, J-42 fails.",
    "account": "ACME",
    "session": {"ref": "zd-user-901", "verified": True, "email": "dana@acme.example"},
}


def _body(**changes) -> bytes:
    return json.dumps({**PAYLOAD, **changes}).encode()


def _post(url: str, body: bytes, token: str) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"{url}/api/tickets",
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _zendesk(url: str, body: bytes) -> tuple[int, dict]:
    return _send_zendesk(url, body, _signed(body))


def _rows() -> tuple:
    """What an intake request could write, besides the intake problems list."""
    return (
        list(Ticket.objects.order_by("pk").values_list("pk", "ref", "subject", "body", "session_id")),
        list(
            CustomerSession.objects.order_by("pk").values_list(
                "pk", "ref", "account_id", "user_id", "verified", "source"
            )
        ),
    )


def _refused_and_kept(reply: tuple[int, dict], status: int, code: str, *, source: str, before: tuple) -> dict:
    assert reply[0] == status and reply[1]["code"] == code, reply
    assert _rows() == before
    problem = IntakeProblem.objects.get()
    assert (problem.source, problem.code, problem.resolved_at) == (source, code, None)
    assert problem.reason and problem.reason in reply[1]["message"]
    return reply[1]


@pytest.fixture
def url(live_server, demo_committed, roles, settings):
    settings.INTAKE_ZENDESK_SECRET = SECRET
    return live_server.url


@pytest.fixture
def integration(roles):
    return integration_user_setup(username="helpdesk")


@pytest.fixture
def token(integration):
    """A token of the integration user, bound to the help desk it is asked for."""

    def _token(source: str) -> str:
        return token_create(user=integration, name=f"{source} intake", source=source)[1]

    return _token


# --- sessions belong to their source ----------------------------------------------------------


def test_a_signed_zendesk_request_naming_a_staff_session_is_refused_and_kept(url):
    before = _rows()
    anon = {"ref": "S-ACME-ANON", "verified": True, "email": "dana@acme.example"}
    reply = _refused_and_kept(
        _zendesk(url, _body(session=anon)), 409, "session_source_mismatch", source="zendesk", before=before
    )
    assert "S-ACME-ANON was made here by staff" in reply["message"]
    session = CustomerSession.objects.get(ref="S-ACME-ANON")
    assert (session.verified, session.user, session.source) == (False, None, "")


def test_a_token_cannot_switch_off_a_staff_session_s_verification(url, token):
    before = _rows()
    dana = {"ref": "S-ACME-1", "verified": False}
    _refused_and_kept(
        _post(url, _body(session=dana), token("zendesk")), 409, "session_source_mismatch", source="api", before=before
    )
    assert CustomerSession.objects.get(ref="S-ACME-1").verified is True


@pytest.mark.parametrize("point", ["token", "signed"])
def test_another_help_desk_s_session_is_refused_to_either_intake_point(url, token, point):
    freshdesk = {"ref": "fd-user-7", "verified": True, "email": "dana@acme.example"}
    status, made = _post(url, _body(source="freshdesk", external_id="7", session=freshdesk), token("freshdesk"))
    assert status == 201 and CustomerSession.objects.get(ref="fd-user-7").source == "freshdesk", made
    before = _rows()
    body = _body(session={**freshdesk, "verified": False})
    reply = _zendesk(url, body) if point == "signed" else _post(url, body, token("zendesk"))
    message = _refused_and_kept(
        reply, 409, "session_source_mismatch", source="zendesk" if point == "signed" else "api", before=before
    )["message"]
    assert "fd-user-7 belongs to freshdesk, not to zendesk" in message
    assert CustomerSession.objects.get(ref="fd-user-7").verified is True


def test_a_help_desk_keeps_its_own_session_up_to_date(url, token):
    assert _post(url, _body(), token("zendesk"))[0] == 201
    status, reply = _zendesk(url, _body(external_id="48214", session={"ref": "zd-user-901", "verified": False}))
    assert status == 201 and reply["updated"] == ["session.verified"], reply
    session = CustomerSession.objects.get(ref="zd-user-901")
    assert (session.source, session.verified) == ("zendesk", False)
    assert not IntakeProblem.objects.exists()


def test_the_migration_gives_a_session_the_source_of_the_tickets_that_use_it(demo):
    migration = importlib.import_module("tickets.migrations.0013_session_source_and_automatic_caps")
    t1001 = Ticket.objects.select_related("session").get(ref="T-1001")
    used = CustomerSession.objects.create(ref="zd-old", account=t1001.account)
    Ticket.objects.create(
        ref="ZD-1", source="zendesk", external_id="1", account=t1001.account, session=used, subject="s", body="b"
    )
    Ticket.objects.create(
        ref="FD-1", source="freshdesk", external_id="1", account=t1001.account, session=used, subject="s", body="b"
    )
    migration.sessions_to_their_source(django_apps, None)
    sources = dict(CustomerSession.objects.values_list("ref", "source"))
    assert sources.pop("zd-old") == "zendesk"  # its earliest ticket's
    assert set(sources.values()) == {""}  # the demo's sessions: staff-made


# --- a token is bound to one source ---------------------------------------------------------------


def test_a_token_bound_to_zendesk_cannot_send_a_freshdesk_ticket(url, token):
    before = _rows()
    reply = _refused_and_kept(
        _post(url, _body(source="freshdesk"), token("zendesk")), 403, "source_mismatch", source="api", before=before
    )
    assert "sends tickets for zendesk" in reply["message"] and "--source freshdesk" in reply["message"]


def test_a_token_bound_to_no_source_is_refused_naming_the_fix(url, integration):
    _, legacy = token_create(user=integration, name="made before tokens had a source")
    assert ApiToken.objects.get().source == ""
    before = _rows()
    reply = _refused_and_kept(_post(url, _body(), legacy), 403, "token_not_bound", source="api", before=before)
    assert "manage.py create_api_token NAME --integration --source SLUG" in reply["message"]


# --- /api/tickets reads its body as the Zendesk endpoint does ---------------------------------------


@pytest.mark.parametrize(
    ("body", "what"),
    [
        (b'{"source": "zendesk", "source": "freshdesk"}', "repeats the key 'source'"),
        (b'{"a": {"b": {"c": {"d": {"e": {"f": {"g": 1}}}}}}}', "nests deeper than 5"),
        (b'{"source": ', "not valid JSON"),
    ],
)
def test_a_body_intake_cannot_read_is_a_400_and_kept(url, token, body, what):
    before = _rows()
    reply = _refused_and_kept(_post(url, body, token("zendesk")), 400, "malformed_json", source="api", before=before)
    assert what in reply["message"]
    assert IntakeProblem.objects.get().body == body.decode()


def test_a_body_that_does_not_fit_is_a_422_and_kept(url, token):
    before = _rows()
    body = _body(subject="", session={"ref": "zd-user-901"})
    reply = _refused_and_kept(_post(url, body, token("zendesk")), 422, "invalid_input", source="api", before=before)
    assert "body.subject" in reply["message"] and "body.session.verified" in reply["message"]
    assert IntakeProblem.objects.get().body == body.decode()
