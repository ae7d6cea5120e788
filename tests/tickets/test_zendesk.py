"""POST /api/intake/zendesk through a real HTTP server: Zendesk's webhook signature, no token, no CSRF.

The signature is computed here as Zendesk documents it ("Verifying webhook
authenticity"): base64(HMAC-SHA256(signing secret, TIMESTAMP + BODY)), with the
timestamp header's value in ISO 8601, e.g. 2026-12-06T03:47:00Z.
"""

import base64
import hashlib
import hmac
import json
import urllib.error
import urllib.request
from datetime import timedelta

import pytest
from django.utils import timezone

from engine.models import Run, RunRequest
from tickets.models import CustomerSession, Ticket

SECRET = "dGhlLXdlYmhvb2stc2lnbmluZy1zZWNyZXQ"
PAYLOAD = {
    "source": "zendesk",
    "external_id": "48213",
    "subject": "CSV export fails",
    "body": "Since the rename, J-42 fails.",
    "account": "ACME",
    "session": {"ref": "zd-user-901", "verified": True, "email": "dana@acme.example"},
}


def _timestamp(ago: timedelta = timedelta(0)) -> str:
    return (timezone.now() - ago).strftime("%Y-%m-%dT%H:%M:%SZ")


def _signed(body: bytes, *, secret: str = SECRET, timestamp: str | None = None) -> dict[str, str]:
    timestamp = timestamp or _timestamp()
    signature = base64.b64encode(hmac.new(secret.encode(), timestamp.encode() + body, hashlib.sha256).digest())
    return {"X-Zendesk-Webhook-Signature": signature.decode(), "X-Zendesk-Webhook-Signature-Timestamp": timestamp}


def _send(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"{url}/api/intake/zendesk", data=body, method="POST", headers={"Content-Type": "application/json", **headers}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _body(**changes) -> bytes:
    return json.dumps({**PAYLOAD, **changes}).encode()


def _rows() -> tuple:
    return (
        list(Ticket.objects.order_by("pk").values_list("pk", "ref", "subject", "body")),
        list(CustomerSession.objects.order_by("pk").values_list("pk", "ref", "user_id", "verified")),
    )


@pytest.fixture
def zendesk(live_server, demo_committed, settings):
    settings.INTAKE_ZENDESK_SECRET = SECRET
    return live_server.url


def test_a_signed_request_creates_the_ticket(zendesk):
    body = _body()
    status, reply = _send(zendesk, body, _signed(body))
    assert status == 201, reply
    assert reply["ref"] == "ZD-48213" and reply["created"] is True
    assert Ticket.objects.get(source="zendesk", external_id="48213").session.ref == "zd-user-901"


def test_a_replayed_request_creates_no_duplicate(zendesk):
    body = _body()
    headers = _signed(body)
    assert _send(zendesk, body, headers)[0] == 201
    before = _rows()
    status, reply = _send(zendesk, body, headers)  # the very same request, signature and all
    assert status == 200 and reply["created"] is False and reply["updated"] == []
    assert _rows() == before and Ticket.objects.filter(source="zendesk").count() == 1


def test_a_signed_update_changes_the_ticket(zendesk):
    first = _body()
    _send(zendesk, first, _signed(first))
    second = _body(body="Now J-43 fails too.")
    status, reply = _send(zendesk, second, _signed(second))
    assert status == 200 and reply["updated"] == ["body"]
    assert Ticket.objects.get(ref="ZD-48213").body == "Now J-43 fails too."


@pytest.mark.parametrize(
    "case", ["bad", "other_secret", "tampered", "missing", "no_timestamp", "stale", "future", "not_a_time"]
)
def test_a_request_zendesk_did_not_sign_is_a_401_and_writes_nothing(zendesk, case):
    body = _body()
    headers = {
        "bad": lambda: {**_signed(body), "X-Zendesk-Webhook-Signature": "bm90IHRoZSBzaWduYXR1cmU="},
        "other_secret": lambda: _signed(body, secret="another-secret"),
        "tampered": lambda: _signed(_body(subject="Something else")),
        "missing": lambda: {"X-Zendesk-Webhook-Signature-Timestamp": _timestamp()},
        "no_timestamp": lambda: {"X-Zendesk-Webhook-Signature": _signed(body)["X-Zendesk-Webhook-Signature"]},
        "stale": lambda: _signed(body, timestamp=_timestamp(timedelta(minutes=6))),
        "future": lambda: _signed(body, timestamp=_timestamp(-timedelta(minutes=6))),
        "not_a_time": lambda: _signed(body, timestamp="yesterday"),
    }[case]()
    before = _rows()
    status, reply = _send(zendesk, body, headers)
    assert status == 401 and reply["code"] == "bad_signature" and reply["message"]
    assert _rows() == before


def test_a_timestamp_within_five_minutes_is_accepted(zendesk):
    body = _body()
    assert _send(zendesk, body, _signed(body, timestamp=_timestamp(timedelta(minutes=4))))[0] == 201


@pytest.mark.parametrize(
    "body",
    [
        _body(subject="nul\x00"),
        _body(source="freshdesk"),
        b'{"source": "zendesk"}',
    ],
)
def test_a_signed_body_that_does_not_fit_is_a_422_and_writes_nothing(zendesk, body):
    before = _rows()
    status, reply = _send(zendesk, body, _signed(body))
    assert status == 422 and reply["code"] == "invalid_input", reply
    assert _rows() == before


def test_signed_malformed_json_is_a_400(zendesk):
    body = b'{"source": "zendesk",'
    status, reply = _send(zendesk, body, _signed(body))
    assert status == 400 and reply["code"] == "malformed_json"


def test_an_unknown_account_is_refused_and_writes_nothing(zendesk):
    body = _body(account="NOPE")
    before = _rows()
    status, reply = _send(zendesk, body, _signed(body))
    assert status == 422 and reply["code"] == "unknown_account"
    assert _rows() == before


def test_with_no_secret_configured_the_endpoint_refuses_everything(zendesk, settings):
    settings.INTAKE_ZENDESK_SECRET = ""
    body = _body()
    for headers in (_signed(body), _signed(body, secret=""), {}):
        status, reply = _send(zendesk, body, headers)
        assert (
            status == 401 and reply["code"] == "intake_not_configured" and "INTAKE_ZENDESK_SECRET" in reply["message"]
        )
    assert not Ticket.objects.filter(source="zendesk").exists()


def test_auto_investigate_runs_a_new_ticket_with_no_requesting_user(zendesk, settings):
    settings.AGENT_AUTO_INVESTIGATE = True
    body = _body()
    assert _send(zendesk, body, _signed(body))[0] == 201
    run = Run.objects.select_related("ticket", "packet").get()
    assert run.ticket.ref == "ZD-48213" and run.status == "COMPLETED" and run.packet is not None
    assert RunRequest.objects.get(run=run).requested_by is None
    assert _send(zendesk, body, _signed(body))[0] == 200  # replayed: no second run
    assert Run.objects.count() == 1
