"""A run that ends on a proposal leaves a packet naming it (tool, arguments) and saying why, for staff only."""

from __future__ import annotations

import pytest

from engine.decisions import Call
from engine.models import ModelRequest, Observation, ReviewPacket, Run
from engine.refusals import refusal_of_call, refusal_of_calls, refusal_of_denial
from engine.services import investigation_start
from engine.statuses import Detail, Status, Stop
from tests.support.staff import bearer
from tickets.models import Job, Ticket

pytestmark = pytest.mark.usefixtures("settle")

J42 = {"call": {"tool": "read_job_status", "args": {"job_id": "J-42"}, "id": "c1"}}


def _packet(report) -> ReviewPacket:
    return ReviewPacket.objects.get(run_id=report["run"])


def _investigated(ref: str) -> ReviewPacket:
    run = investigation_start(ticket=Ticket.objects.get(ref=ref))
    return ReviewPacket.objects.get(run_id=run.pk)


# --- pure: the words for each refusal ------------------------------------------------------


@pytest.mark.parametrize(
    "call,stop,staff_reason,expected",
    [
        (
            Call("delete_workspace", {"name": "acme"}),
            Stop(Status.INVALID_OR_FORBIDDEN, Detail.UNKNOWN_TOOL),
            "",
            "There is no tool named “delete_workspace”; the tools are search_docs, read_job_status and read_service_status.",
        ),
        (
            Call("read_job_status", {"job_id": "42"}),
            Stop(Status.INVALID_OR_FORBIDDEN, Detail.BAD_ARGUMENTS, "job_id: bad"),
            "",
            "The arguments do not fit read_job_status: job_id: bad.",
        ),
        (
            Call("read_job_status", {"job_id": "J-41"}, "c1"),
            Stop(Status.INVALID_OR_FORBIDDEN, Detail.CALL_ID_CONFLICT),
            "",
            "Call id “c1” was already used for a different call.",
        ),
        (
            Call("read_job_status", {"job_id": "J-99"}),
            Stop(Status.INVALID_OR_FORBIDDEN, Detail.FORBIDDEN),
            "J-99 does not exist.",
            "J-99 does not exist.",
        ),
        (
            Call("read_job_status", {"job_id": "J-42"}),
            Stop(Status.NO_PROGRESS),
            "",
            "It is the same call as the one just made: making it again would learn nothing new.",
        ),
        (
            Call("search_docs", {"query": "x"}),
            Stop(Status.TOOL_LIMIT),
            "",
            "Every tool attempt in the budget was already spent.",
        ),
    ],
)
def test_each_refusal_says_why_in_plain_words(call, stop, staff_reason, expected):
    assert refusal_of_call(call, stop, staff_reason=staff_reason)["reason"] == expected


def test_a_refused_call_is_named_with_its_normalized_arguments():
    refused = refusal_of_call(Call("read_job_status", {"job_id": " j-42 "}, "c9"), Stop(Status.NO_PROGRESS))
    assert (refused["tool"], refused["args"], refused["id"]) == ("read_job_status", {"job_id": "J-42"}, "c9")


def test_a_deadline_is_not_a_refusal_of_the_call():
    assert refusal_of_call(Call("search_docs", {"query": "x"}), Stop(Status.DEADLINE)) is None


def test_several_calls_are_listed_and_a_denial_names_who_denied():
    calls = [{"tool": "search_docs", "args": {"query": "a"}}, {"tool": "read_job_status", "args": {"job_id": "J-1"}}]
    assert refusal_of_calls(calls) | {"reason": ""} == {
        "tool": None,
        "args": None,
        "id": None,
        "calls": calls,
        "reason": "",
    }
    assert "2 calls were proposed in one reply" in refusal_of_calls(calls)["reason"]
    denied = refusal_of_denial(tool="read_job_status", args={"job_id": "J-42"}, call_id="", decided_by="sam")
    assert denied == {
        "tool": "read_job_status",
        "args": {"job_id": "J-42"},
        "id": None,
        "reason": "sam denied this call.",
    }


# --- the demo's tickets, investigated by the rule-based investigator -------------------------


def test_a_job_that_does_not_exist_is_named_in_the_packet(demo_committed):
    packet = _investigated("T-1002")
    assert (packet.stop_reason, packet.detail) == (Status.INVALID_OR_FORBIDDEN, Detail.FORBIDDEN)
    assert packet.refused == {
        "tool": "read_job_status",
        "args": {"job_id": "J-99"},
        "id": None,
        "reason": "J-99 does not exist.",
    }


def test_another_accounts_job_is_named_with_its_account(demo_committed):
    packet = _investigated("T-1005")
    assert packet.refused["args"] == {"job_id": "J-77"}
    assert packet.refused["reason"] == "J-77 belongs to another account (GLOBEX)."


def test_the_model_is_never_told_the_staff_reason(play):
    report = play([{"call": {"tool": "read_job_status", "args": {"job_id": "J-77"}}}, {"handoff": "unused"}])
    assert (report["status"], report["detail"]) == ("INVALID_OR_FORBIDDEN", "forbidden")
    run = Run.objects.get(pk=report["run"])
    told = [
        run.stop_note,
        *Observation.objects.filter(run=run).values_list("text", flat=True),
        *ModelRequest.objects.filter(run=run).values_list("validation_error", flat=True),
    ]
    assert not any("GLOBEX" in text or "another account" in text for text in told)
    assert report["packet"].keys() >= {"stop_reason"} and "refused" not in report["packet"]  # the scenario shape
    assert "GLOBEX" in _packet(report).refused["reason"]


def test_an_unverified_session_is_the_staff_reason(play):
    report = play([J42], session="S-ACME-ANON")
    assert _packet(report).refused["reason"] == (
        "Session S-ACME-ANON is not verified; job lookups need a verified session."
    )


@pytest.mark.parametrize(
    "model,tool,reason_part",
    [
        ([{"call": {"tool": "delete_workspace", "args": {}}}], "delete_workspace", "There is no tool named"),
        ([{"call": {"tool": "read_job_status", "args": {"job_id": "42"}}}], "read_job_status", "do not fit"),
        ([J42, {"call": {"tool": "read_job_status", "args": {"job_id": "J-42"}}}], "read_job_status", "same call"),
        (
            [J42, {"call": {"tool": "read_job_status", "args": {"job_id": "J-41"}, "id": "c1"}}],
            "read_job_status",
            "already used for a different call",
        ),
    ],
)
def test_every_refused_call_is_on_its_packet(play, model, tool, reason_part):
    refused = _packet(play(model)).refused
    assert refused["tool"] == tool and reason_part in refused["reason"]


def test_several_calls_at_once_are_all_named(play):
    calls = [
        {"tool": "search_docs", "args": {"query": "rename"}},
        {"tool": "read_job_status", "args": {"job_id": "J-42"}},
    ]
    refused = _packet(play([{"calls": calls}])).refused
    assert refused["calls"] == calls and "only one per reply" in refused["reason"]


def test_a_denied_approval_names_the_call_and_who_denied_it(play):
    Job.objects.filter(ref="J-42").update(sensitive=True)
    report = play([J42], approval="deny")
    assert (report["status"], report["detail"]) == ("INVALID_OR_FORBIDDEN", "approval_denied")
    assert _packet(report).refused == {
        "tool": "read_job_status",
        "args": {"job_id": "J-42"},
        "id": "c1",
        "reason": "scenario denied this call.",
    }


def test_a_completed_run_refused_nothing(play):
    report = play([J42, {"draft": {"summary": "s [E1]", "evidence": ["E1"], "open_questions": []}}])
    assert report["status"] == "COMPLETED" and _packet(report).refused is None


def test_the_packet_page_and_the_api_show_the_refusal(staff_user, demo_committed):
    from tests.support.staff import client_for

    packet = _investigated("T-1005")
    page = client_for(staff_user).get(f"/admin/agentrun/reviewpacket/{packet.pk}/change/").content.decode()
    assert 'id="refused-call"' in page and "J-77" in page
    assert "J-77 belongs to another account (GLOBEX)." in page
    assert '<span id="stop-label">Refused a lookup: J-77 belongs to another account (GLOBEX)</span>' in page
    assert "Status of job J-77" in page and "A colleague shared job J-77 with me." in page  # the customer's message
    body = client_for(staff_user).get(f"/api/packets/{packet.pk}", **bearer(staff_user)).json()
    assert body["refused"]["reason"] == "J-77 belongs to another account (GLOBEX)."
    assert (body["stop_reason"], body["detail"]) == ("INVALID_OR_FORBIDDEN", "forbidden")  # codes stay in the API
