"""Runs in the admin: read-only, filterable; the detail page; cancelling; approvals of sensitive lookups."""

from django.urls import reverse

from engine.models import Approval, Run
from tests.support.staff import client_for, make_runs, make_user
from tickets.models import Job


def _investigate(client, ticket) -> Run:
    client.post(reverse("admin:tickets_ticket_investigate", args=[ticket.pk]))
    return Run.objects.order_by("-id").first()


def test_run_detail_shows_timeline_evidence_sources_budget_bars_and_plain_stop_reason(staff_user, ticket_t1001):
    client = client_for(staff_user)
    run = _investigate(client, ticket_t1001)
    page = client.get(reverse("admin:agentrun_run_change", args=[run.pk])).content.decode()
    assert page.count('class="step-model_request"') == 3 and page.count('class="step-tool_attempt"') == 2
    assert "read_job_status" in page and "search_docs" in page
    assert 'id="evidence-E1"' in page and 'id="evidence-E2"' in page
    assert 'job: <span class="source">J-42</span>' in page
    assert "DOC-EXPORT-7 revision r3" in page
    assert 'id="budget-bars"' in page and "Model requests" in page and "3 of 8" in page
    assert "$0.00 of $0.50" in page  # money in dollars
    assert "The rule-based investigator returned a valid draft; it is the review packet." in page
    assert "Why the run stopped" in page and ">Completed<" in page
    assert "started by staff" in page


def test_runs_are_read_only_in_the_admin(staff_client, supervisor_client, demo):
    run = make_runs(1)[0]
    for client in (staff_client, supervisor_client):
        assert client.get(reverse("admin:agentrun_run_add")).status_code == 403
        assert client.post(reverse("admin:agentrun_run_delete", args=[run.pk]), {"post": "yes"}).status_code == 403
    assert Run.objects.filter(pk=run.pk).exists()


def test_run_list_filters_by_status_and_detail(staff_client, demo):
    make_runs(5)
    page = staff_client.get(reverse("admin:agentrun_run_changelist") + "?status__exact=NO_PROGRESS").content.decode()
    assert "1 run" in page
    page = staff_client.get(reverse("admin:agentrun_run_changelist") + "?detail__exact=forbidden").content.decode()
    assert "1 run" in page and "INVALID_OR_FORBIDDEN" in page


def test_run_list_links_the_ticket(staff_client, demo):
    [run] = make_runs(1, endings=[("NO_PROGRESS", "")])
    page = staff_client.get(reverse("admin:agentrun_run_changelist")).content.decode()
    ticket_url = reverse("admin:tickets_ticket_change", args=[run.ticket_id])
    assert f'<td class="field-ticket_link"><a href="{ticket_url}">T-1001</a></td>' in page


def test_supervisor_cancels_a_queued_run_staff_cannot(staff_client, supervisor_client, demo):
    run = make_runs(1, endings=[("QUEUED", "")])[0]
    url = reverse("admin:agentrun_run_cancel", args=[run.pk])
    page = staff_client.post(url, follow=True).content.decode()
    assert "Only Supervisors may cancel runs that others started." in page
    run.refresh_from_db()
    assert run.status == "QUEUED"
    page = supervisor_client.post(url, follow=True).content.decode()
    run.refresh_from_db()
    assert run.status == "CANCELLED" and f"Run {run.pk} cancelled." in page
    assert "Staff cancelled the run." in page


def test_staff_cancel_a_run_they_started_and_no_one_else_s(staff_user, ticket_t1001):
    Job.objects.filter(ref="J-42").update(sensitive=True)
    starter = client_for(staff_user)
    run = _investigate(starter, ticket_t1001)
    assert run.status == "WAITING_APPROVAL"
    other = client_for(make_user("stella", "Support staff"))
    url = reverse("admin:agentrun_run_cancel", args=[run.pk])
    assert 'id="cancel-run"' not in other.get(reverse("admin:agentrun_run_change", args=[run.pk])).content.decode()
    page = other.post(url, follow=True).content.decode()
    assert "Only Supervisors may cancel runs that others started." in page
    assert Run.objects.get(pk=run.pk).status == "WAITING_APPROVAL"

    assert 'id="cancel-run"' in starter.get(reverse("admin:agentrun_run_change", args=[run.pk])).content.decode()
    page = starter.post(url, follow=True).content.decode()
    assert Run.objects.get(pk=run.pk).status == "CANCELLED" and f"Run {run.pk} cancelled." in page


def test_a_sensitive_job_lookup_waits_and_only_a_supervisor_can_approve_it(staff_user, supervisor_user, ticket_t1001):
    Job.objects.filter(ref="J-42").update(sensitive=True)
    staff = client_for(staff_user)
    run = _investigate(staff, ticket_t1001)
    assert run.status == "WAITING_APPROVAL"
    page = staff.get(reverse("admin:agentrun_run_change", args=[run.pk])).content.decode()
    assert 'id="approval-needs-supervisor"' in page and 'id="approve"' not in page
    page = staff.post(reverse("admin:agentrun_run_approval", args=[run.pk]), {"decision": "grant"}, follow=True)
    assert "Only Supervisors may approve or deny calls." in page.content.decode()
    run.refresh_from_db()
    assert run.status == "WAITING_APPROVAL"

    supervisor = client_for(supervisor_user)
    page = supervisor.get(reverse("admin:agentrun_run_change", args=[run.pk])).content.decode()
    assert 'id="approve"' in page and "J-42" in page
    supervisor.post(reverse("admin:agentrun_run_approval", args=[run.pk]), {"decision": "grant"})
    run.refresh_from_db()
    assert run.status == "COMPLETED"
    approval = Approval.objects.get(run=run)
    assert approval.state == "used" and approval.decided_by == "supervisor"
    # used once: answering again is refused with a message, and changes nothing
    page = supervisor.post(reverse("admin:agentrun_run_approval", args=[run.pk]), {"decision": "deny"}, follow=True)
    assert "is not waiting for an approval" in page.content.decode()


def test_denying_the_call_ends_the_run_approval_denied(supervisor_user, ticket_t1001):
    Job.objects.filter(ref="J-42").update(sensitive=True)
    supervisor = client_for(supervisor_user)
    run = _investigate(supervisor, ticket_t1001)
    supervisor.post(reverse("admin:agentrun_run_approval", args=[run.pk]), {"decision": "deny"})
    run.refresh_from_db()
    assert (run.status, run.detail) == ("INVALID_OR_FORBIDDEN", "approval_denied")
    page = supervisor.get(reverse("admin:agentrun_run_change", args=[run.pk])).content.decode()
    assert "A supervisor denied the lookup the run was waiting on." in page


def test_waiting_approvals_are_listed_for_supervisors(supervisor_user, ticket_t1001):
    Job.objects.filter(ref="J-42").update(sensitive=True)
    supervisor = client_for(supervisor_user)
    run = _investigate(supervisor, ticket_t1001)
    page = supervisor.get(reverse("admin:agentrun_approval_changelist") + "?state__exact=pending").content.decode()
    assert f"run {run.pk} on T-1001" in page and "read_job_status" in page


def test_unknown_run_is_a_clear_404_page(staff_client, demo):
    response = staff_client.get(reverse("admin:agentrun_run_change", args=[999999]))
    assert response.status_code == 404 and "There is no run 999999." in response.content.decode()


def test_supervisors_mark_a_job_sensitive_staff_cannot(staff_client, supervisor_client, demo):
    job = Job.objects.get(ref="J-42")
    url = reverse("admin:tickets_job_change", args=[job.pk])
    assert staff_client.post(url, {"sensitive": "on"}).status_code == 403
    assert not Job.objects.get(pk=job.pk).sensitive
    response = supervisor_client.post(url, {"sensitive": "on"})
    assert response.status_code == 302
    job.refresh_from_db()
    assert job.sensitive and job.status == "failed" and job.error_code == "EXPORT_ROLE_REQUIRED"
