"""GET /api/packets/{id} and POST /api/packets/{id}/review."""

import json

import pytest

from engine.models import PacketReview, ReviewPacket
from tests.support.staff import bearer, make_runs


def _error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert body["code"] == code and body["message"]
    return body


def _post(client, packet_id, body, auth):
    data = body if isinstance(body, str) else json.dumps(body)
    return client.post(f"/api/packets/{packet_id}/review", data, content_type="application/json", **auth)


def test_packet_has_its_cited_evidence_inline(client, staff_user, ticket_t1001):
    auth = bearer(staff_user)
    packet_id = client.post("/api/tickets/T-1001/investigations", **auth).json()["packet_id"]
    body = client.get(f"/api/packets/{packet_id}", **auth).json()
    assert body["ticket"] == "T-1001" and body["stop_reason"] == "COMPLETED" and body["summary"]
    assert [e["ref"] for e in body["evidence"]] == ["E1", "E2"]
    assert "EXPORT_ROLE_REQUIRED" in body["evidence"][0]["excerpt"]
    assert [a["tool"] for a in body["attempts"]] == ["read_job_status", "search_docs"]
    assert body["review_state"] == "pending" and body["reviews"] == []
    assert isinstance(body["open_questions"], list) and body["budget_spent"]["model_requests"] == [3, 8]


def test_accept_then_a_changed_decision_are_appended(client, staff_user, supervisor_user, demo):
    packet = make_runs(1)[0].packet
    accepted = _post(client, packet.pk, {"decision": "accept"}, bearer(staff_user))
    assert accepted.status_code == 201 and accepted.json()["decision"] == "accepted"
    assert accepted.json()["reviewer"] == "staff"
    rejected = _post(
        client,
        packet.pk,
        {"decision": "reject", "reason": "wrong_conclusion", "note": "  J-41 was meant  ", "change_decision": True},
        bearer(supervisor_user),
    )
    assert rejected.status_code == 201 and rejected.json()["note"] == "J-41 was meant"
    body = client.get(f"/api/packets/{packet.pk}", **bearer(staff_user)).json()
    assert [r["decision"] for r in body["reviews"]] == ["accepted", "rejected"]
    assert body["review_state"] == "rejected" and body["summary"] == "s"


def test_a_new_decision_on_a_reviewed_packet_is_already_reviewed_unless_changed_with_a_note(
    client, staff_user, supervisor_user, demo
):
    packet = make_runs(1)[0].packet
    assert _post(client, packet.pk, {"decision": "accept"}, bearer(staff_user)).status_code == 201
    for user, body in [
        (staff_user, {"decision": "reject", "reason": "wrong_conclusion", "note": "on second thought"}),
        (supervisor_user, {"decision": "reject", "reason": "wrong_conclusion", "note": "J-41 was meant"}),
        (supervisor_user, {"decision": "accept"}),  # accepted already, but by someone else: a decision of their own
    ]:
        _error(_post(client, packet.pk, body, bearer(user)), 409, "already_reviewed")
    _error(
        _post(client, packet.pk, {"decision": "accept", "change_decision": True}, bearer(supervisor_user)),
        422,
        "note_required",
    )
    assert list(PacketReview.objects.values_list("decision", flat=True)) == ["accepted"]
    changed = _post(
        client,
        packet.pk,
        {"decision": "reject", "reason": "wrong_conclusion", "note": "Wrong job.", "change_decision": True},
        bearer(staff_user),
    )
    assert changed.status_code == 201 and changed.json()["decision"] == "rejected"
    assert ReviewPacket.objects.get(pk=packet.pk).review_state == "rejected"


def test_the_same_decision_sent_again_adds_nothing(client, staff_user, demo):
    packet = make_runs(1)[0].packet
    first = _post(client, packet.pk, {"decision": "accept"}, bearer(staff_user))
    again = _post(client, packet.pk, {"decision": "accept"}, bearer(staff_user))
    assert first.status_code == 201 and again.status_code == 200 and again.json() == first.json()
    rejected = _post(
        client,
        packet.pk,
        {"decision": "reject", "reason": "wrong_conclusion", "note": "No.", "change_decision": True},
        bearer(staff_user),
    )
    retried = _post(
        client,
        packet.pk,
        {"decision": "reject", "reason": "wrong_conclusion", "note": "No.", "change_decision": True},
        bearer(staff_user),
    )
    assert rejected.status_code == 201 and retried.status_code == 200 and retried.json()["id"] == rejected.json()["id"]
    assert list(PacketReview.objects.values_list("decision", flat=True)) == ["accepted", "rejected"]


@pytest.mark.parametrize(
    "body,status,code",
    [
        ({"decision": "reject"}, 422, "note_required"),
        ({"decision": "reject", "note": "Wrong job."}, 422, "reason_required"),
        ({"decision": "reject", "reason": "bad", "note": "Wrong job."}, 422, "invalid_input"),
        ({"decision": "accept", "reply": "x" * 5001}, 422, "invalid_input"),
        ({"decision": "reject", "reason": "wrong_conclusion", "note": "   "}, 422, "note_required"),
        ({"decision": "ok"}, 422, "invalid_input"),
        ({"decision": "accept", "note": 5}, 422, "invalid_input"),
        ({"decision": "accept", "note": "x" * 2001}, 422, "invalid_input"),
        ({"decision": "accept", "note": "nul \u0000 byte"}, 422, "invalid_input"),
        ({"decision": "accept", "reviewer": "someone"}, 422, "invalid_input"),
        ('{"decision": ', 400, "malformed_json"),
        ('"accept"', 422, "invalid_input"),
    ],
)
def test_bad_reviews_write_nothing(client, staff_user, demo, body, status, code):
    packet = make_runs(1)[0].packet
    _error(_post(client, packet.pk, body, bearer(staff_user)), status, code)
    assert PacketReview.objects.count() == 0
    assert ReviewPacket.objects.get(pk=packet.pk).review_state == "pending"


def test_review_refusals(client, outsider, staff_user, demo):
    packet = make_runs(1)[0].packet
    _error(_post(client, packet.pk, {"decision": "accept"}, {}), 401, "unauthenticated")
    _error(_post(client, packet.pk, {"decision": "accept"}, bearer(outsider)), 403, "forbidden")
    _error(_post(client, 777777, {"decision": "accept"}, bearer(staff_user)), 404, "not_found")
    _error(client.get("/api/packets/777777", **bearer(staff_user)), 404, "not_found")
    _error(client.get(f"/api/packets/{packet.pk}", **bearer(outsider)), 403, "forbidden")
    huge = json.dumps({"decision": "accept", "note": "x" * 70_000})
    _error(_post(client, packet.pk, huge, bearer(staff_user)), 413, "body_too_large")
    assert PacketReview.objects.count() == 0


def test_openapi_schema_lists_every_path(client, demo):
    schema = client.get("/api/openapi.json").json()
    assert set(schema["paths"]) == {
        "/api/tickets/{ref}/investigations",
        "/api/runs",
        "/api/runs/{run_id}",
        "/api/runs/{run_id}/cancel",
        "/api/runs/{run_id}/approval",
        "/api/packets/{packet_id}",
        "/api/packets/{packet_id}/review",
        "/api/tickets",
        "/api/intake/zendesk",
        "/api/documents/{code}",
        "/api/knowledge-gaps",
    }
    assert client.get("/api/docs").status_code == 200


def test_a_wrong_method_is_a_json_405(client, staff_user, demo):
    response = client.delete("/api/runs", **bearer(staff_user))
    assert response.status_code == 405 and response.json()["code"] == "method_not_allowed"
    assert response["Allow"] == "GET"


def test_an_acceptance_keeps_the_reply_as_edited_and_a_rejection_its_reason(client, staff_user, demo):
    edited, unchanged, rejected = (r.packet for r in make_runs(3))
    suggestion = "Hello,\n\nYour export J-42 failed because the export role was missing."
    ReviewPacket.objects.filter(pk__in=[edited.pk, unchanged.pk, rejected.pk]).update(reply=suggestion)
    mine = "Hi Dana,\r\n\r\nJ-42 failed: ask an admin for the export role.  "
    body = _post(client, edited.pk, {"decision": "accept", "reply": mine}, bearer(staff_user)).json()
    assert body["reply"] == "Hi Dana,\n\nJ-42 failed: ask an admin for the export role." and body["reason"] is None
    assert _post(client, unchanged.pk, {"decision": "accept"}, bearer(staff_user)).json()["reply"] == suggestion
    body = _post(
        client,
        rejected.pk,
        {"decision": "reject", "reason": "no_article", "note": "x", "reply": mine},
        bearer(staff_user),
    ).json()
    assert (body["reason"], body["reason_label"], body["reply"]) == ("no_article", "no article answers it", "")
    assert client.get(f"/api/packets/{edited.pk}", **bearer(staff_user)).json()["reply"] == suggestion
