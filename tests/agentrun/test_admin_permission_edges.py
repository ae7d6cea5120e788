"""A staff user without a role's permissions gets the same answer for an object that exists and one that does not:
every custom admin view checks permission before it looks anything up (or creates anything)."""

import re

import pytest
from django.urls import reverse

from engine.models import Approval, BudgetDefaults, Run
from tests.support.staff import client_for, make_runs

MISSING = 987654321


def _answer(response) -> tuple:
    """Status, where it leads and the page, with the per-response CSRF token masked."""
    body = re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "", response.content.decode())
    return response.status_code, response.get("Location"), body


@pytest.fixture
def objects(demo):
    run = make_runs(1)[0]
    approval = Approval.objects.create(run=run, tool="read_job_status", args={"job_id": "J-42"}, call_key="k")
    return {"run": run.pk, "reviewpacket": run.packet.pk, "approval": approval.pk, "ticket": run.ticket_id}


PAGES = [
    ("admin:agentrun_run_change", "run"),
    ("admin:agentrun_run_progress", "run"),
    ("admin:agentrun_run_history", "run"),
    ("admin:agentrun_reviewpacket_change", "reviewpacket"),
    ("admin:agentrun_reviewpacket_history", "reviewpacket"),
    ("admin:agentrun_approval_change", "approval"),
    ("admin:agentrun_approval_history", "approval"),
    ("admin:tickets_ticket_change", "ticket"),
    ("admin:tickets_ticket_history", "ticket"),
]


@pytest.mark.parametrize("name,kind", PAGES)
def test_pages_refuse_alike_for_existing_and_missing_objects(outsider, objects, name, kind):
    client = client_for(outsider)
    existing = client.get(reverse(name, args=[objects[kind]]))
    assert existing.status_code == 403
    assert _answer(client.get(reverse(name, args=[MISSING]))) == _answer(existing)


def test_an_approval_page_does_not_lead_to_its_run_without_permission(outsider, objects):
    response = client_for(outsider).get(reverse("admin:agentrun_approval_change", args=[objects["approval"]]))
    assert response.status_code == 403
    assert "Only Support staff may see approvals." in response.content.decode()
    assert reverse("admin:agentrun_run_change", args=[objects["run"]]) not in response.content.decode()


def test_an_approval_page_leads_staff_to_its_run(staff_client, objects):
    response = staff_client.get(reverse("admin:agentrun_approval_change", args=[objects["approval"]]))
    assert (response.status_code, response["Location"]) == (
        302,
        reverse("admin:agentrun_run_change", args=[objects["run"]]),
    )
    assert staff_client.get(reverse("admin:agentrun_approval_change", args=[MISSING])).status_code == 404


def test_a_change_page_with_an_id_that_is_no_number_refuses_before_it_looks(outsider, objects):
    client = client_for(outsider)
    for model, kind in (("run", "run"), ("reviewpacket", "reviewpacket"), ("approval", "approval")):
        existing = client.get(reverse(f"admin:agentrun_{model}_change", args=[objects[kind]]))
        assert _answer(client.get(f"/admin/agentrun/{model}/x/change/")) == _answer(existing)


def test_investigate_answers_alike_for_existing_and_missing_tickets(outsider, objects):
    client = client_for(outsider)
    existing = client.post(reverse("admin:tickets_ticket_investigate", args=[objects["ticket"]]))
    assert existing.status_code == 403
    assert "Only Support staff may start investigations." in existing.content.decode()
    assert _answer(client.post(reverse("admin:tickets_ticket_investigate", args=[MISSING]))) == _answer(existing)
    assert Run.objects.count() == 1


def test_staff_investigating_a_missing_ticket_are_told_so(staff_client, objects):
    response = staff_client.post(reverse("admin:tickets_ticket_investigate", args=[MISSING]), follow=True)
    assert f"There is no ticket {MISSING}." in response.content.decode()


@pytest.mark.parametrize("user", ["outsider", "staff_user"])
def test_budget_defaults_refuse_before_their_row_is_made(request, demo, user):
    client = client_for(request.getfixturevalue(user))
    response = client.get(reverse("admin:agentrun_budgetdefaults_changelist"))
    assert response.status_code == 403
    assert "Only Supervisors may change budget defaults." in response.content.decode()
    assert not BudgetDefaults.objects.exists()
    assert client.get(reverse("admin:agentrun_budgetdefaults_change", args=[1])).status_code == 403


def test_a_missing_packet_is_not_found_not_not_allowed(staff_client, demo):
    response = staff_client.get(reverse("admin:agentrun_reviewpacket_of_run", args=[MISSING]))
    page = response.content.decode()
    assert response.status_code == 404
    assert "<title>Not found | supportagent</title>" in page
    assert "Not allowed" not in page and f"Run {MISSING} has no review packet." in page
    missing = staff_client.get(reverse("admin:agentrun_reviewpacket_change", args=[MISSING]))
    assert missing.status_code == 404 and "Not allowed" not in missing.content.decode()
    assert "Not found" in missing.content.decode()


def test_a_refusal_for_want_of_a_role_is_still_not_allowed(outsider, objects):
    response = client_for(outsider).get(reverse("admin:agentrun_reviewpacket_change", args=[objects["reviewpacket"]]))
    assert response.status_code == 403 and "Not allowed" in response.content.decode()
