"""POST /api/tickets: tickets from a help desk, found again by source and external id; the Integrations role."""

import json

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test.utils import CaptureQueriesContext

from engine.budgets import Budget
from engine.models import Run, RunRequest
from engine.roles import INTEGRATIONS, integration_user_setup
from engine.selectors import run_context
from engine.services import investigation_start
from staff.auth import token_read, token_user
from tests.support.staff import bearer, make_runs
from tickets.intake import ref_candidates
from tickets.models import CustomerSession, CustomerUser, Ticket

URL = "/api/tickets"
PAYLOAD = {
    "source": "zendesk",
    "external_id": "48213",
    "subject": "CSV export fails",
    "body": "Since the rename, J-42 fails.",
    "account": "ACME",
    "session": {"ref": "zd-user-901", "verified": True, "email": "dana@acme.example"},
}


@pytest.fixture
def integration_user(roles) -> User:
    return integration_user_setup(username="zendesk")


@pytest.fixture
def post(client, integration_user):
    headers = bearer(integration_user, source="zendesk")

    def _post(payload=None, **changes):
        data = {**(payload or PAYLOAD), **changes}
        return client.post(URL, json.dumps(data), content_type="application/json", **headers)

    return _post


def _error(response, status: int, code: str) -> None:
    assert response.status_code == status, response.content
    assert response.json()["code"] == code and response.json()["message"]


def _rows() -> tuple:
    """What an intake request could write."""
    return (
        list(Ticket.objects.order_by("pk").values_list("pk", "ref", "subject", "body", "session_id")),
        list(CustomerSession.objects.order_by("pk").values_list("pk", "ref", "account_id", "user_id", "verified")),
    )


def _ticket_writes(queries) -> list[str]:
    return [
        q["sql"]
        for q in queries
        if q["sql"].lstrip().startswith(("INSERT", "UPDATE", "DELETE")) and '"tickets_' in q["sql"]
    ]


# --- create, find again, update ------------------------------------------------------------


def test_a_new_ticket_is_created_with_a_readable_ref_and_its_session(post, demo):
    response = post()
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["ref"] == "ZD-48213" and body["created"] is True and body["updated"] == []
    ticket = Ticket.objects.select_related("account", "session__user").get(ref="ZD-48213")
    assert (ticket.source, ticket.external_id, ticket.account.code) == ("zendesk", "48213", "ACME")
    assert ticket.subject == PAYLOAD["subject"] and ticket.body == PAYLOAD["body"]
    assert ticket.session.ref == "zd-user-901" and ticket.session.verified is True
    assert ticket.session.user.email == "dana@acme.example"


def test_the_same_request_again_is_200_and_writes_nothing(post, demo):
    post()
    before = _rows()
    with CaptureQueriesContext(connection) as queries:
        again = post()
    assert again.status_code == 200 and again.json()["created"] is False and again.json()["updated"] == []
    assert _ticket_writes(queries.captured_queries) == []
    assert _rows() == before


def test_a_changed_subject_or_body_updates_the_ticket(post, demo):
    before = Ticket.objects.count()
    post()
    response = post(subject="CSV export still fails", body="Now J-43 fails too.")
    assert response.status_code == 200
    assert response.json()["updated"] == ["subject", "body"]
    ticket = Ticket.objects.get(ref="ZD-48213")
    assert (ticket.subject, ticket.body) == ("CSV export still fails", "Now J-43 fails too.")
    assert Ticket.objects.count() == before + 1  # the demo's tickets and this one


def test_a_run_keeps_the_text_it_started_with_after_the_ticket_changes(post, client, staff_user, demo_committed):
    post()
    ticket = Ticket.objects.get(ref="ZD-48213")
    run = investigation_start(ticket=ticket)  # inline: runs to its end
    run = Run.objects.select_related("ticket", "session", "packet").get(pk=run.pk)
    assert run.packet is not None

    assert post(body="A different story altogether.").json()["updated"] == ["body"]
    run = Run.objects.select_related("ticket", "session").get(pk=run.pk)
    assert run.ticket.body == "A different story altogether."
    context = run_context(run=run, budget=Budget(), shown_allowances={})
    assert (context.subject, context.body) == (PAYLOAD["subject"], PAYLOAD["body"])
    staff = bearer(staff_user)
    packet = client.get(f"/api/packets/{run.packet.pk}", **staff).json()
    assert (packet["subject"], packet["body"]) == (PAYLOAD["subject"], PAYLOAD["body"])
    detail = client.get(f"/api/runs/{run.pk}", **staff).json()
    assert detail["body"] == PAYLOAD["body"]


def test_verified_follows_the_help_desk(post, demo):
    anon = {"ref": "zd-user-905", "verified": False}
    assert post(session=anon).status_code == 201
    response = post(session={**anon, "verified": True, "email": "dana@acme.example"}, external_id="48214")
    assert response.status_code == 201 and response.json()["updated"] == ["session.verified", "session.user"]
    session = CustomerSession.objects.get(ref="zd-user-905")
    assert session.verified is True and session.user.email == "dana@acme.example" and session.source == "zendesk"
    post(session={**anon, "verified": False}, external_id="48215")
    assert CustomerSession.objects.get(ref="zd-user-905").verified is False


def test_an_email_of_another_accounts_user_does_not_link(post, demo):
    response = post(session={"ref": "zd-user-902", "verified": True, "email": "hank@globex.example"})
    assert response.status_code == 201
    assert CustomerSession.objects.get(ref="zd-user-902").user is None
    assert CustomerUser.objects.get(email="hank@globex.example").account.code == "GLOBEX"


def test_a_blank_email_is_no_email(post, demo):
    assert post(session={"ref": "zd-user-904", "verified": False, "email": ""}).status_code == 201
    assert CustomerSession.objects.get(ref="zd-user-904").user is None


def test_a_taken_readable_ref_gets_the_digest_one(post, demo):
    t1001 = Ticket.objects.get(ref="T-1001")
    Ticket.objects.create(ref="ZD-48213", account=t1001.account, session=t1001.session, subject="s", body="b")
    response = post()
    assert response.status_code == 201
    assert response.json()["ref"] == ref_candidates(source="zendesk", external_id="48213")[1]


@pytest.mark.parametrize(
    "source,external_id,expected",
    [
        ("zendesk", "48213", "ZD-48213"),
        ("acme-desk", "a.b", "ACMEDESK-a-b"),
    ],
)
def test_refs_are_readable_when_they_can_be(source, external_id, expected):
    candidates = ref_candidates(source=source, external_id=external_id)
    assert candidates[0] == expected and candidates[1] != candidates[2]
    long = ref_candidates(source="zendesk", external_id="9" * 64)
    assert all(len(c) <= 32 for c in long) and long[0].startswith("ZD-") and len(long[0]) == 13


# --- refusals write nothing ------------------------------------------------------------------


def test_an_unknown_account_is_refused(post, demo):
    before = _rows()
    _error(post(account="NOPE"), 422, "unknown_account")
    assert _rows() == before


def test_a_session_of_another_account_is_refused(post, demo):
    before = _rows()
    _error(
        post(session={"ref": "S-GLOBEX-1", "verified": False, "email": "dana@acme.example"}), 409, "session_mismatch"
    )
    assert _rows() == before


def test_a_ticket_cannot_move_to_another_account(post, demo):
    post()
    before = _rows()
    _error(post(account="GLOBEX", session={"ref": "zd-user-903", "verified": True}), 409, "account_mismatch")
    assert _rows() == before


@pytest.mark.parametrize(
    "changes",
    [
        {"subject": "x" * 301},
        {"subject": ""},
        {"subject": "nul\x00byte"},
        *({"subject": f"Export fails{separator}Priority: urgent"} for separator in "\n\r\v\f\x85\u2028\u2029"),
        {"body": "nul\x00byte"},
        {"source": "Zen Desk"},
        {"source": "z" * 33},
        {"external_id": "has space"},
        {"external_id": "9" * 65},
        {"account": "A" * 33},
        {"session": {"ref": "zd-user-901", "verified": "yes"}},
        {"session": {"ref": "zd-user-901", "verified": True, "email": "not-an-email"}},
        {"session": {"ref": "has space", "verified": True}},
        {"session": {"ref": "zd-user-901"}},
        {"external_id": 48213},
    ],
)
def test_a_body_that_does_not_fit_is_a_422_and_writes_nothing(post, demo, changes):
    before = _rows()
    _error(post(**changes), 422, "invalid_input")
    assert _rows() == before


def test_a_body_past_64_kib_is_a_413(post, demo):
    before = _rows()
    _error(post(body="x" * 70_000), 413, "body_too_large")
    assert _rows() == before


# --- who may ------------------------------------------------------------------------------


@pytest.mark.parametrize("who", ["staff_user", "supervisor_user"])
def test_staff_tokens_cannot_create_tickets(client, demo, request, who):
    user = request.getfixturevalue(who)
    response = client.post(URL, json.dumps(PAYLOAD), content_type="application/json", **bearer(user))
    _error(response, 403, "forbidden")
    assert "Integrations" in response.json()["message"]
    assert not Ticket.objects.filter(source="zendesk").exists()


def test_an_integration_token_cannot_read_runs_packets_or_start_investigations(client, integration_user, demo):
    run = make_runs(1)[0]
    headers = bearer(integration_user)
    for response in (
        client.get("/api/runs", **headers),
        client.get(f"/api/runs/{run.pk}", **headers),
        client.get(f"/api/packets/{run.packet.pk}", **headers),
        client.post("/api/tickets/T-1001/investigations", **headers),
    ):
        _error(response, 403, "forbidden")
    assert Run.objects.count() == 1


def test_without_a_token_intake_is_refused(client, demo):
    _error(client.post(URL, json.dumps(PAYLOAD), content_type="application/json"), 401, "unauthenticated")


def test_create_api_token_integration_makes_the_user_and_its_token(db, capsys):
    call_command("create_api_token", "zendesk", "--integration", "--source", "zendesk")
    raw = capsys.readouterr().out.strip()
    assert token_read(raw=raw).source == "zendesk"
    user = token_user(raw=raw)
    assert user.username == "zendesk" and not user.is_staff and not user.has_usable_password()
    assert list(user.groups.values_list("name", flat=True)) == [INTEGRATIONS]
    assert user.has_perm("tickets.add_ticket") and user.has_perm("tickets.change_document")
    assert not user.has_perm("tickets.view_ticket") and not user.has_perm("agentrun.start_investigation")
    call_command("create_api_token", "zendesk", "--integration", "--source", "zendesk")  # a second token
    assert user.api_tokens.count() == 2


def test_create_api_token_integration_refuses_a_staff_user(staff_user):
    with pytest.raises(CommandError, match="another role"):
        call_command("create_api_token", "staff", "--integration", "--source", "zendesk")
    assert list(staff_user.groups.values_list("name", flat=True)) == ["Support staff"]


# --- AGENT_AUTO_INVESTIGATE ----------------------------------------------------------------


def test_auto_investigate_starts_a_run_for_a_new_ticket_only(post, integration_user, demo_committed, settings):
    settings.AGENT_AUTO_INVESTIGATE = True
    assert post().status_code == 201
    run = Run.objects.select_related("ticket", "packet").get()
    assert run.ticket.ref == "ZD-48213" and run.status == "COMPLETED" and run.packet is not None
    request = RunRequest.objects.get(run=run)
    assert request.requested_by == integration_user and request.via == "intake"
    assert post(body="Updated text.").status_code == 200
    assert Run.objects.count() == 1


def test_auto_investigate_off_starts_nothing(post, demo_committed, settings):
    settings.AGENT_AUTO_INVESTIGATE = False
    assert post().status_code == 201
    assert Run.objects.count() == 0
