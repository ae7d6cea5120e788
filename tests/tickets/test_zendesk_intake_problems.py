"""POST /api/intake/zendesk with what Zendesk really sends: no organization, an organization id that is not an
account code, long descriptions, fields an admin added. A ticket is never lost: what intake refuses after the
signature is checked waits in the intake problems list, and nothing else is written.

The bodies are the trigger body of docs/help-desks/intake.md as Zendesk renders its placeholders: a requester
with no organization renders `{{ticket.organization.external_id}}` empty.
"""

import json
import re
import urllib.request

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.support.metrics import parse, value
from tests.tickets.test_zendesk import SECRET, _rows, _send, _signed
from tickets.models import Account, IntakeProblem, Ticket

TRIGGER_BODY = {
    "source": "zendesk",
    "external_id": "48213",
    "subject": "CSV export fails",
    "body": "Since the rename, J-42 fails.",
    "organization": "",
    "session": {"ref": "zd-user-901", "verified": True, "email": "dana@acme.example"},
}


def _body(**changes) -> bytes:
    return json.dumps({**TRIGGER_BODY, **changes}).encode()


def _post(url: str, body: bytes) -> tuple[int, dict]:
    return _send(url, body, _signed(body))


def _open_problems(url: str) -> float:
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as response:
        return value(parse(response.read().decode()), "supportagent_intake_problems_open")


@pytest.fixture
def zendesk(live_server, demo_committed, settings):
    settings.INTAKE_ZENDESK_SECRET = SECRET
    Account.objects.filter(code="ACME").update(org_ids=["org_4412", "northwind"], email_domains=["acme.example"])
    return live_server.url


def test_no_organization_finds_the_account_by_the_requester_s_email_domain(zendesk):
    status, reply = _post(
        zendesk, _body(session={"ref": "zd-user-901", "verified": True, "email": "Dana@ACME.example"})
    )
    assert status == 201 and reply["account"] == "ACME", reply
    assert Ticket.objects.get(ref="ZD-48213").account.code == "ACME"


def test_an_organization_id_an_account_lists_finds_it_whatever_its_case(zendesk):
    body = _body(
        organization="ORG_4412", session={"ref": "zd-user-77", "verified": False, "email": "x@elsewhere.example"}
    )
    status, reply = _post(zendesk, body)
    assert status == 201 and reply["account"] == "ACME", reply


def test_the_default_account_takes_a_ticket_nothing_else_names(zendesk, settings):
    settings.INTAKE_DEFAULT_ACCOUNT = "GLOBEX"
    body = _body(session={"ref": "zd-user-77", "verified": False, "email": "sam@gmail.example"})
    status, reply = _post(zendesk, body)
    assert status == 201 and reply["account"] == "GLOBEX", reply


def test_an_unknown_organization_waits_in_the_problems_list_and_nothing_else_is_written(zendesk, supervisor_user):
    body = _body(organization="org_9999", session={"ref": "zd-user-77", "verified": False, "email": "x@else.example"})
    before = _rows()
    status, reply = _post(zendesk, body)
    assert status == 422 and reply["code"] == "no_account", reply
    assert _rows() == before
    problem = IntakeProblem.objects.get()
    assert (problem.source, problem.code, problem.body) == ("zendesk", "no_account", body.decode())
    assert _open_problems(zendesk) == 1

    problem.account = Account.objects.get(code="GLOBEX")
    problem.save(update_fields=["account"])
    client = Client()
    client.force_login(supervisor_user)
    response = client.post(
        "/admin/tickets/intakeproblem/", {"action": "bring_in_selected", "_selected_action": [problem.pk]}, follow=True
    )
    assert response.status_code == 200
    assert "ticket ZD-48213 created" in response.content.decode(), [str(m) for m in response.context["messages"]]
    problem.refresh_from_db()
    assert problem.ticket.ref == "ZD-48213" and problem.ticket.account.code == "GLOBEX" and problem.resolved_at
    assert _open_problems(zendesk) == 0


def test_a_long_description_is_kept_cut_with_a_marker(zendesk):
    description = "J-42 fails. " + "x" * 40_000
    status, reply = _post(zendesk, _body(body=description))
    assert status == 201, reply
    body = Ticket.objects.get(ref="ZD-48213").body
    assert body.startswith(description[:32_000])
    assert body.endswith(f"[… {len(description) - 32_000:,} more characters cut at intake]")


def test_an_extra_field_is_kept_on_the_ticket_and_listed_on_its_page(zendesk, supervisor_user):
    status, reply = _post(zendesk, _body(priority="urgent", tags=["vip", "export"]))
    assert status == 201, reply
    ticket = Ticket.objects.get(ref="ZD-48213")
    assert ticket.extra == {"priority": "urgent", "tags": ["vip", "export"]}
    client = Client()
    client.force_login(supervisor_user)
    page = client.get(f"/admin/tickets/ticket/{ticket.pk}/change/").content.decode()
    assert re.search(r"<code>priority</code>: &quot;urgent&quot;", page)
    assert re.search(r"<code>tags</code>: \[&quot;vip&quot;, &quot;export&quot;\]", page)


@pytest.mark.parametrize(
    "body, said",
    [
        (_body()[:-1] + b', "subject": "Something else"}', "repeats the key 'subject'"),
        (_body(custom={"a": {"b": {"c": {"d": {"e": 1}}}}}), "nests deeper than 5 levels"),
        (b"[" * 20_000 + b"]" * 20_000, "nests deeper than 5 levels"),
    ],
    ids=["duplicate_key", "nested", "very_deep"],
)
def test_duplicate_keys_and_deep_nesting_are_a_400_kept_as_problems(zendesk, body, said):
    before = _rows()
    status, reply = _post(zendesk, body)
    assert status == 400 and reply["code"] == "malformed_json" and said in reply["message"], reply
    assert _rows() == before
    assert IntakeProblem.objects.get().body == body.decode()


def test_an_unsigned_request_is_not_kept(zendesk):
    body = _body(organization="org_9999")
    status, _ = _send(zendesk, body, {})
    assert status == 401 and not IntakeProblem.objects.exists()


def test_staff_list_an_account_s_org_ids_and_domains_in_the_admin(db, roles):
    admin_user = User.objects.create_superuser("root", password="x-unused-x")
    client = Client()
    client.force_login(admin_user)
    form = {"code": "NW", "name": "Northwind", "workspace": "nw", "org_ids": "ORG_4412, Northwind"}
    response = client.post("/admin/tickets/account/add/", {**form, "email_domains": "@NW.example"})
    assert response.status_code == 302, response.content
    account = Account.objects.get(code="NW")
    assert (account.org_ids, account.email_domains) == (["org_4412", "northwind"], ["nw.example"])
