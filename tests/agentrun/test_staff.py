"""A run past its deadline is ended (DEADLINE) whenever staff read it or act on it, watchdog or not."""

from __future__ import annotations

import pytest
from django.urls import reverse

from engine.models import Approval, Run
from tests.support.staff import bearer, client_for
from tests.support.webhooks import investigate
from tickets.models import Job

J42 = {"call": {"tool": "read_job_status", "args": {"job_id": "J-42"}}}


@pytest.fixture
def overdue(ticket_t1001, roles) -> Run:
    """A run waiting for approval whose deadline has passed, with no watchdog running."""
    Job.objects.filter(ref="J-42").update(sensitive=True)
    run = investigate(ticket_t1001, script=(J42,))
    assert run.status == "WAITING_APPROVAL"
    Run.objects.filter(pk=run.pk).update(deadline_at=run.created_at)
    return run


def _ended_at_deadline(run: Run) -> Run:
    run = Run.objects.get(pk=run.pk)
    assert run.status == "DEADLINE" and run.packet.stop_reason == "DEADLINE"
    assert run.approvals.get().state == Approval.State.EXPIRED
    return run


@pytest.mark.parametrize("page", ["admin:agentrun_run_change", "admin:agentrun_run_progress"])
def test_opening_a_run_waiting_past_its_deadline_ends_it_at_its_deadline(overdue, staff_user, page):
    shown = client_for(staff_user).get(reverse(page, args=[overdue.pk])).content.decode()
    _ended_at_deadline(overdue)
    assert "Deadline reached" in shown and "Waiting for approval" not in shown
    if page == "admin:agentrun_run_change":  # the call nobody answered is still shown, as expired
        assert "this approval can no longer be given or refused. The run ended at its deadline." in shown


def test_the_api_shows_a_run_past_its_deadline_as_deadline(client, overdue, staff_user):
    body = client.get(f"/api/runs/{overdue.pk}", **bearer(staff_user)).json()
    assert body["status"] == "DEADLINE"
    _ended_at_deadline(overdue)


def test_the_ticket_page_ends_its_runs_past_their_deadline(overdue, staff_user):
    page = client_for(staff_user).get(reverse("admin:tickets_ticket_change", args=[overdue.ticket_id]))
    assert page.status_code == 200
    _ended_at_deadline(overdue)


def test_a_run_waiting_past_its_deadline_does_not_block_a_new_investigation(client, overdue, staff_user):
    response = client.post("/api/tickets/T-1001/investigations", **bearer(staff_user))
    assert response.status_code == 202, response.content
    assert response.json()["id"] != overdue.pk
    _ended_at_deadline(overdue)


def test_the_admin_investigates_again_after_a_run_that_outlived_its_deadline(overdue, staff_user):
    client = client_for(staff_user)
    client.post(reverse("admin:tickets_ticket_investigate", args=[overdue.ticket_id]))
    assert Run.objects.filter(ticket_id=overdue.ticket_id).count() == 2
    _ended_at_deadline(overdue)


def test_a_run_still_within_its_deadline_is_left_waiting(ticket_t1001, roles, staff_user, client):
    Job.objects.filter(ref="J-42").update(sensitive=True)
    run = investigate(ticket_t1001, script=(J42,))
    assert client.get(f"/api/runs/{run.pk}", **bearer(staff_user)).json()["status"] == "WAITING_APPROVAL"
    response = client.post("/api/tickets/T-1001/investigations", **bearer(staff_user))
    assert response.status_code == 409 and response.json()["code"] == "run_active"
