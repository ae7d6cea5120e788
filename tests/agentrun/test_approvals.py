"""Approvals people can answer: why, who hears of it, expiry, a denial's reason, the start-up warning."""

from __future__ import annotations

import json
import re

import pytest
from django.core import checks

from engine.checks import APPROVAL_TOO_SHORT, approval_time_check
from engine.models import Approval, Run
from engine.roles import SUPERVISORS
from staff.access import Refused, do_answer_approval
from tests.support.staff import bearer, make_user
from tests.support.webhooks import investigate
from tests.support.workers import wait_for
from tickets.models import Job

J42 = {"call": {"tool": "read_job_status", "args": {"job_id": "J-42"}}}


@pytest.fixture
def waiting(ticket_t1001, roles) -> Run:
    Job.objects.filter(ref="J-42").update(sensitive=True)
    run = investigate(ticket_t1001, script=(J42,))
    assert run.status == "WAITING_APPROVAL"
    return run


def _expire(run: Run) -> None:
    Run.objects.filter(pk=run.pk).update(deadline_at=run.created_at)


def test_the_approval_records_why_it_is_needed(waiting):
    assert waiting.approvals.get().reason == "Job J-42 is marked sensitive: looking it up needs approval."


def test_a_tool_listed_in_the_setting_says_so(ticket_t1001, roles, settings):
    settings.AGENT_REQUIRE_APPROVAL = ["read_job_status"]
    run = investigate(ticket_t1001, script=(J42,))
    assert run.approvals.get().reason.startswith("read_job_status is listed in AGENT_REQUIRE_APPROVAL")


def test_supervisors_with_an_address_are_mailed_when_a_call_waits(ticket_t1001, roles, mailoutbox):
    make_user("sue", SUPERVISORS).__class__.objects.filter(username="sue").update(email="sue@example.com")
    make_user("sam", SUPERVISORS)  # no address: not mailed
    make_user("stan", "Support staff").__class__.objects.filter(username="stan").update(email="stan@example.com")
    Job.objects.filter(ref="J-42").update(sensitive=True)
    run = investigate(ticket_t1001, script=(J42,))

    (mail,) = mailoutbox
    assert mail.to == ["sue@example.com"]
    assert f"run {run.pk} on T-1001" in mail.subject and "left" in mail.subject
    assert "Job J-42 is marked sensitive" in mail.body and f"/admin/agentrun/run/{run.pk}/change/" in mail.body


def test_the_webhook_gets_an_approval_waiting_event(ticket_t1001, roles, hook):
    Job.objects.filter(ref="J-42").update(sensitive=True)
    run = investigate(ticket_t1001, script=(J42,))
    wait_for(lambda: hook.received or None, 10, "the approval event")

    (got,) = hook.received
    event = json.loads(got.body)
    assert (event["type"], got.headers["X-Supportagent-Event"]) == ("approval.waiting", "approval.waiting")
    assert event["run"]["id"] == run.pk and event["run"]["status"] == "WAITING_APPROVAL"
    assert event["run"]["url"].endswith(f"/admin/agentrun/run/{run.pk}/change/")
    assert event["approval"] == {
        "id": run.approvals.get().pk,
        "tool": "read_job_status",
        "args": {"job_id": "J-42"},
        "reason": "Job J-42 is marked sensitive: looking it up needs approval.",
    }


def test_an_expired_approval_is_refused_and_the_run_ends_at_its_deadline(waiting, supervisor_user):
    _expire(waiting)
    with pytest.raises(Refused) as refused:
        do_answer_approval(user=supervisor_user, run_id=waiting.pk, grant=True)
    assert (refused.value.code, refused.value.status) == ("approval_expired", 409)
    assert "expired" in refused.value.message
    approval = waiting.approvals.get()  # the answer is not recorded
    assert (approval.state, approval.decided_by, approval.decided_at) == ("expired", "", None)
    assert Run.objects.get(pk=waiting.pk).status == "DEADLINE"
    with pytest.raises(Refused) as again:  # and stays refused as expired
        do_answer_approval(user=supervisor_user, run_id=waiting.pk, grant=False)
    assert again.value.code == "approval_expired"


def test_the_api_refuses_an_expired_approval(client, waiting, supervisor_user):
    _expire(waiting)
    response = client.post(
        f"/api/runs/{waiting.pk}/approval",
        {"decision": "grant"},
        content_type="application/json",
        **bearer(supervisor_user),
    )
    assert response.status_code == 409 and response.json()["code"] == "approval_expired"
    assert (waiting.approvals.get().state, waiting.approvals.get().decided_by) == ("expired", "")
    assert Run.objects.get(pk=waiting.pk).status == "DEADLINE"


def test_an_approval_of_an_ended_run_is_refused(waiting, supervisor_user):
    do_answer_approval(user=supervisor_user, run_id=waiting.pk, grant=False)
    with pytest.raises(Refused) as refused:
        do_answer_approval(user=supervisor_user, run_id=waiting.pk, grant=True)
    assert refused.value.code == "not_waiting" and "INVALID_OR_FORBIDDEN" in refused.value.message


def test_a_denial_keeps_its_reason_on_the_approval_and_the_packet(client, waiting, supervisor_user):
    body = client.post(
        f"/api/runs/{waiting.pk}/approval",
        {"decision": "deny", "reason": "Legal hold on J-42."},
        content_type="application/json",
        **bearer(supervisor_user),
    ).json()
    assert (body["status"], body["detail"]) == ("INVALID_OR_FORBIDDEN", "approval_denied")
    approval = Approval.objects.get(run=waiting)
    assert (approval.state, approval.note, approval.decided_by) == ("denied", "Legal hold on J-42.", "supervisor")
    run = Run.objects.get(pk=waiting.pk)
    assert "Legal hold on J-42." in run.packet.stop_note

    detail = client.get(f"/api/runs/{waiting.pk}", **bearer(supervisor_user)).json()
    (shown,) = detail["approvals"]
    assert (shown["state"], shown["note"], shown["reason"]) == ("denied", "Legal hold on J-42.", approval.reason)
    packet = client.get(f"/api/packets/{run.packet.pk}", **bearer(supervisor_user)).json()
    assert packet["approvals"][0]["note"] == "Legal hold on J-42."


def test_the_start_up_check_warns_when_approvals_get_too_little_time(demo, settings):
    settings.AGENT_REQUIRE_APPROVAL, settings.AGENT_APPROVAL_MIN_SECONDS = [], 600
    settings.AGENT_BUDGET_DEFAULTS, settings.AGENT_APPROVAL_DEADLINE_SECONDS = {"deadline_seconds": 45}, 0
    Job.objects.update(sensitive=False)  # the demo's J-58 is sensitive
    assert approval_time_check() == []  # nothing needs approval
    Job.objects.filter(ref="J-42").update(sensitive=True)
    (warning,) = approval_time_check()
    assert (warning.id, warning.level) == (APPROVAL_TOO_SHORT, checks.WARNING)
    assert "jobs marked sensitive" in warning.msg and "45 s" in warning.msg
    settings.AGENT_BUDGET_DEFAULTS = {"deadline_seconds": 900}
    assert approval_time_check() == []
    settings.AGENT_BUDGET_DEFAULTS, settings.AGENT_APPROVAL_DEADLINE_SECONDS = {}, 300
    assert "300 s" in approval_time_check()[0].msg


def test_the_project_s_own_defaults_pass_the_check(demo):
    assert Job.objects.filter(sensitive=True).exists()  # the demo's J-58: calls may need approval
    assert approval_time_check() == []


def test_a_run_that_may_need_approval_gets_the_approval_deadline(demo, settings):
    from engine.services import run_start
    from tickets.models import CustomerSession, Ticket

    t1001 = Ticket.objects.get(ref="T-1001")
    assert run_start(ticket=t1001).get_budget().deadline_seconds == 900  # ACME has a sensitive job (J-58)
    anonymous = CustomerSession.objects.get(ref="S-ACME-ANON")  # may not look jobs up at all
    assert run_start(ticket=t1001, session=anonymous).get_budget().deadline_seconds == 45
    Job.objects.update(sensitive=False)
    assert run_start(ticket=t1001).get_budget().deadline_seconds == 45
    settings.AGENT_REQUIRE_APPROVAL = ["search_docs"]
    assert run_start(ticket=t1001, session=anonymous).get_budget().deadline_seconds == 900
    settings.AGENT_BUDGET_DEFAULTS = {"deadline_seconds": 1200}  # never shorter than other runs'
    assert run_start(ticket=t1001).get_budget().deadline_seconds == 1200


def test_the_check_reads_the_setting(db, settings):
    settings.AGENT_REQUIRE_APPROVAL, settings.AGENT_APPROVAL_MIN_SECONDS = ["read_job_status"], 60
    settings.AGENT_APPROVAL_DEADLINE_SECONDS = 0
    (warning,) = approval_time_check()
    assert "read_job_status" in warning.msg
    settings.AGENT_APPROVAL_MIN_SECONDS = 45
    assert approval_time_check() == []


def test_the_run_and_packet_pages_list_the_approvals_asked_for(waiting, supervisor_user):
    from django.urls import reverse

    from tests.support.staff import client_for

    client = client_for(supervisor_user)
    page = client.get(reverse("admin:agentrun_run_change", args=[waiting.pk]))
    assert page.status_code == 200
    assert (
        'id="approvals"' in page.content.decode()
        and "read_job_status {&quot;job_id&quot;: &quot;J-42&quot;}" in re.sub("<[^>]+>", "", page.content.decode())
    )
    do_answer_approval(user=supervisor_user, run_id=waiting.pk, grant=False, note="Legal hold.")
    packet = Run.objects.get(pk=waiting.pk).packet
    shown = client.get(reverse("admin:agentrun_reviewpacket_change", args=[packet.pk])).content.decode()
    assert 'id="approvals"' in shown and "Legal hold." in shown
